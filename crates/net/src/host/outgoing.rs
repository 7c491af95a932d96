//! Outgoing messages: local deliveries, packing into datagrams (per destination process, or per
//! link under network faults), the flush through the fault shim, and datagrams it delays.

use super::bulk::{self, BulkSender};
use super::faults::Faults;
use super::{Inbox, Input, Routes};
use crate::clock::monotonic_ns;
use crate::faults::Verdict;
use crate::metrics::Transport;
use crate::udp::{Sender, Sent};
use crate::wire::{self, Header, Packer, Sealer};
use ordo_core::{NodeId, Protocol, Targets};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// Datagrams the fault shim holds back: (release time, sequence, bytes, destination).
type DelayedHeap = BinaryHeap<Reverse<(u64, u64, Vec<u8>, SocketAddr)>>;

/// Which datagrams a message shares: those to the same process. When the fault shim has
/// network faults, also the same sending and receiving node, so that a datagram's fate (a
/// partition between two nodes, say) concerns one link, as in the simulator.
type PackerKey = (SocketAddr, Option<(u32, u32)>);

/// Everything between a node's send and the socket: the packers of this turn's datagrams, the
/// reused encoding buffer, the size limits, the `sendmmsg` sender and the delayed datagrams.
pub(super) struct Outgoing {
    header: Header,
    /// Numbers and tags (with a cluster key, authenticates) every datagram this process sends.
    sealer: Sealer,
    packers: BTreeMap<PackerKey, Packer>,
    /// The TCP path of large messages; none under network faults, whose shim sees datagrams
    /// only (large messages are then fragmented, as every message was before).
    bulk: Option<BulkSender>,
    /// Per-link packing (see [`PackerKey`]).
    packing_per_link: bool,
    sender: Sender,
    /// Reused buffer for encoding one message.
    encoded: Vec<u8>,
    datagram_max: usize,
    message_len_max: usize,
    /// Numbers messages for fragmentation, and orders delayed datagrams of equal release time.
    next_message_number: u64,
    delayed: DelayedHeap,
}

impl Outgoing {
    pub(super) fn new(header: Header, sealer: Sealer, datagram_max: usize, packing_per_link: bool) -> Self {
        Outgoing {
            header,
            sealer,
            packers: BTreeMap::new(),
            bulk: (!packing_per_link).then(BulkSender::default),
            packing_per_link,
            sender: Sender::default(),
            encoded: Vec::new(),
            datagram_max,
            message_len_max: if packing_per_link {
                wire::message_len_max(datagram_max)
            } else {
                bulk::BULK_MAX_BYTES - wire::HEADER_LEN - wire::TAG_LEN - 16
            },
            next_message_number: 0,
            delayed: BinaryHeap::new(),
        }
    }

    /// Sends `message` to every target: packed for the network, or queued on `inbox` for a node
    /// of this process (no encoding then).
    pub(super) fn transmit<P: Protocol>(
        &mut self,
        from: NodeId,
        to: &Targets,
        message: P::Message,
        routes: &Routes,
        inbox: &mut Inbox<P>,
        transport: &mut Transport,
    ) {
        let mut encoded = false;
        for target in to.iter() {
            transport.messages_sent += 1;
            if let Some(local) = routes.local(target) {
                inbox.push_back((local, Input { from, message: message.clone() }));
                continue;
            }
            let Some(address) = routes.address(target) else {
                *transport.dropped.entry("send_to_unknown_node").or_default() += 1;
                continue;
            };
            if !encoded {
                // Encoded once per message, whatever the number of targets, into a reused buffer.
                self.encoded.clear();
                let buffer = std::mem::take(&mut self.encoded);
                self.encoded = postcard::to_extend(&message, buffer).expect("messages serialize");
                encoded = true;
            }
            if self.encoded.len() > self.message_len_max {
                let count = transport.dropped.entry("message_too_large").or_default();
                *count += 1;
                // Logged, not only counted: the protocol will retry it and stall. Every power of
                // two, so a stall that repeats it does not flood the log.
                if count.is_power_of_two() {
                    eprintln!(
                        "error: dropped a message of {} bytes from {from} to {target}: a message has at most {} \
                         bytes ({count} dropped so far)",
                        self.encoded.len(),
                        self.message_len_max
                    );
                }
                continue;
            }
            if let Some(bulk) = self.bulk.as_mut().filter(|_| self.encoded.len() >= bulk::BULK_MIN_BYTES) {
                let sealed = wire::seal_one(&self.header, &mut self.sealer, from.0, target.0, &self.encoded);
                let superseded = bulk.send(address, sealed);
                if superseded > 0 {
                    *transport.dropped.entry("bulk_queue_full").or_default() += superseded as u64;
                }
                continue;
            }
            let (header, datagram_max) = (self.header, self.datagram_max);
            let link = self.packing_per_link.then_some((from.0, target.0));
            let packer = self.packers.entry((address, link)).or_insert_with(|| Packer::new(header, datagram_max));
            packer.push(&mut self.sealer, from.0, target.0, &self.encoded, self.next_message_number);
            self.next_message_number += 1;
        }
    }

    /// Sends every packed datagram on `fd`, all in one `sendmmsg` call when the kernel takes them.
    /// With network faults, each datagram first goes through the fault shim.
    pub(super) fn flush(&mut self, fd: RawFd, faults: &mut Faults, transport: &mut Transport) {
        let mut any = false;
        for packer in self.packers.values_mut() {
            packer.finish(&mut self.sealer);
            any |= !packer.is_empty();
        }
        if !any {
            return;
        }
        let sent = if self.packing_per_link {
            self.flush_through_shim(fd, faults)
        } else {
            self.sender
                .send(fd, self.packers.iter().flat_map(|(&(address, _), p)| p.datagrams().map(move |d| (d, address))))
        };
        count_sent(transport, sent);
        for packer in self.packers.values_mut() {
            packer.clear();
        }
    }

    fn flush_through_shim(&mut self, fd: RawFd, faults: &mut Faults) -> Sent {
        let now = monotonic_ns();
        let mut now_out: Vec<(&[u8], SocketAddr)> = Vec::new();
        for (&(address, link), packer) in &self.packers {
            let (from, to) = link.expect("per-link packing names the link");
            for datagram in packer.datagrams() {
                let Verdict::Send { copies, delay_ns } = faults.decide(now, from, to) else { continue };
                for _ in 0..copies {
                    if delay_ns > 0 {
                        let sequence = self.next_message_number;
                        self.next_message_number += 1;
                        self.delayed.push(Reverse((now + delay_ns, sequence, datagram.to_vec(), address)));
                    } else {
                        now_out.push((datagram, address));
                    }
                }
            }
        }
        self.sender.send(fd, now_out)
    }

    /// Sends on `fd` the delayed datagrams due by `now`.
    pub(super) fn release_delayed(&mut self, now: u64, fd: RawFd, transport: &mut Transport) {
        let mut due = Vec::new();
        while self.delayed.peek().is_some_and(|Reverse((at, ..))| *at <= now) {
            let Reverse((_, _, datagram, address)) = self.delayed.pop().expect("peeked");
            due.push((datagram, address));
        }
        if !due.is_empty() {
            let sent = self.sender.send(fd, due.iter().map(|(d, a)| (&d[..], *a)));
            count_sent(transport, sent);
        }
    }

    /// When the earliest delayed datagram is due.
    pub(super) fn next_delayed(&self) -> Option<u64> {
        self.delayed.peek().map(|Reverse((at, ..))| *at)
    }
}

fn count_sent(transport: &mut Transport, sent: Sent) {
    transport.datagrams_sent += sent.datagrams;
    transport.bytes_sent += sent.bytes;
    transport.send_calls += sent.calls;
    if sent.failed > 0 {
        // UDP may lose datagrams anyway; a full socket buffer is one more way.
        *transport.dropped.entry("send_failed").or_default() += sent.failed;
    }
}
