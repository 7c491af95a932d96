//! Incoming datagrams: batched reads, checks, reassembly of fragmented messages and decoding
//! into the inbox of the node each message is for.

use super::{Inbox, Input, Routes};
use crate::clock::monotonic_ns;
use crate::metrics::Transport;
use crate::udp::Receiver;
use crate::wire::replay::ReplayGuard;
use crate::wire::{self, Body, ClusterKey, Reassembly, Received};
use ordo_core::{NodeId, Protocol};
use std::collections::HashSet;
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// Datagrams taken per `recvmmsg` call.
const RECV_SLOTS: usize = 32;
/// Partial fragmented messages held per process.
const REASSEMBLY_ENTRIES_MAX: usize = 256;
/// Fragmented messages not completed within this are dropped.
const REASSEMBLY_EXPIRY_NS: u64 = 5_000_000_000;
/// Sources the log names a rejected datagram of; after this many, rejections are only counted.
const COMPLAINTS_MAX: usize = 64;

/// Everything between the socket and a node's inbox: the `recvmmsg` receiver, the cluster a
/// datagram must belong to and its key, the replay window, and the fragmented messages being
/// put together.
pub(super) struct Incoming {
    receiver: Receiver,
    checks: Checks,
}

/// What a datagram (or a large message) is checked against on its way to a node: the cluster
/// and its key, the replay window, the table of fragmented messages, and the log of rejected
/// senders. Apart from the receiver, whose buffer a datagram borrows while it is checked.
struct Checks {
    cluster_hash: u64,
    key: Option<ClusterKey>,
    replay: ReplayGuard,
    reassembly: Reassembly,
    complaints: Complaints,
}

/// The sources whose rejected datagrams the log has named, so that a misconfigured peer
/// sending thousands of datagrams gets one line, not thousands.
#[derive(Default)]
struct Complaints {
    named: HashSet<(SocketAddr, &'static str)>,
}

impl Complaints {
    /// Logs why datagrams from `source` are dropped, once per source and reason, for the
    /// rejections an operator must act on (the counts are in the metrics either way).
    fn on_rejected(&mut self, source: SocketAddr, error: wire::WireError) {
        let advice = match error {
            wire::WireError::OtherCluster => {
                "they belong to another cluster: the cluster files differ in the protocol, its options or \
                 the [[node]] list (names, roles, addresses, clients); every node must run the same ones"
            }
            wire::WireError::BadMac => {
                "their authentication fails: the sender has another cluster key (key_file or ORDO_CLUSTER_KEY), \
                 or someone without the key is sending"
            }
            wire::WireError::Unauthenticated => {
                "they carry no MAC, but this cluster has a key: every node needs the same key_file or ORDO_CLUSTER_KEY"
            }
            wire::WireError::NoKey => {
                "they carry a MAC, but this node has no cluster key: give it the same key_file or ORDO_CLUSTER_KEY"
            }
            _ => return,
        };
        if self.named.len() < COMPLAINTS_MAX && self.named.insert((source, wire_reason(error))) {
            eprintln!("error: dropping datagrams from {source}: {advice}");
        }
    }
}

/// What one read of the socket did.
pub(super) struct Batch {
    /// Datagrams read.
    pub(super) count: usize,
    /// True when the socket may hold more (the read filled every slot).
    pub(super) more: bool,
}

impl Incoming {
    pub(super) fn new(cluster_hash: u64, key: Option<ClusterKey>, datagram_max: usize) -> Self {
        Incoming {
            receiver: Receiver::new(RECV_SLOTS),
            checks: Checks {
                cluster_hash,
                key,
                replay: ReplayGuard::default(),
                complaints: Complaints::default(),
                reassembly: Reassembly::new(
                    REASSEMBLY_ENTRIES_MAX,
                    wire::message_len_max(datagram_max),
                    REASSEMBLY_EXPIRY_NS,
                ),
            },
        }
    }

    /// Reads one batch of datagrams from `socket` and queues their messages on `inbox`.
    pub(super) fn read_batch<P: Protocol>(
        &mut self,
        socket: &UdpSocket,
        routes: &Routes,
        inbox: &mut Inbox<P>,
        transport: &mut Transport,
    ) -> Batch {
        use std::os::fd::AsRawFd;
        let fd = socket.as_raw_fd();
        let slots = self.receiver.slots();
        let receiver = &mut self.receiver;
        // A call that fills fewer slots than it has found the queue empty: report WouldBlock
        // to tokio then, so it clears the socket's readiness without one more, failing, call.
        // Datagrams arriving later raise a new readiness event (epoll is edge-triggered here),
        // so none is missed.
        let mut count = 0;
        let result = socket.try_io(tokio::io::Interest::READABLE, || {
            count = receiver.receive(fd)?;
            if count < slots { Err(std::io::ErrorKind::WouldBlock.into()) } else { Ok(()) }
        });
        for index in 0..count {
            let Some(datagram) = self.receiver.get(index) else { break };
            transport.datagrams_received += 1;
            transport.bytes_received += datagram.bytes.len() as u64;
            if datagram.truncated {
                *transport.dropped.entry("datagram_truncated").or_default() += 1;
                continue;
            }
            let Some(source) = datagram.source else {
                *transport.dropped.entry("unknown_sender").or_default() += 1;
                continue;
            };
            self.checks.on_datagram(datagram.bytes, source, routes, transport, inbox);
        }
        transport.receive_calls += u64::from(count > 0);
        match result {
            Ok(()) => Batch { count, more: true },
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Batch { count, more: false },
            Err(_) => {
                transport.receive_errors += 1;
                Batch { count, more: false }
            }
        }
    }

    /// Checks a large message that came over TCP ([`super::bulk`]) and queues it on `inbox`.
    /// The connection's port is ephemeral, so the message is checked against the address of
    /// the member it names, which must be on the connecting host.
    pub(super) fn on_bulk<P: Protocol>(
        &mut self,
        sealed: &[u8],
        peer: SocketAddr,
        routes: &Routes,
        inbox: &mut Inbox<P>,
        transport: &mut Transport,
    ) {
        transport.bytes_received += sealed.len() as u64;
        let member = wire::first_sender(sealed).and_then(|from| routes.address(NodeId(from)));
        let Some(source) = member.filter(|address| address.ip() == peer.ip()) else {
            *transport.dropped.entry("unknown_sender").or_default() += 1;
            return;
        };
        self.checks.on_datagram(sealed, source, routes, transport, inbox);
    }

    /// Fragmented messages being reassembled.
    pub(super) fn reassembly_partial(&self) -> usize {
        self.checks.reassembly.len()
    }

    /// Fragmented messages given up.
    pub(super) fn reassembly_abandoned(&self) -> u64 {
        self.checks.reassembly.abandoned
    }
}

impl Checks {
    /// Checks a datagram and queues its messages for their nodes. Each frame is checked on its own:
    /// its sender must live at the datagram's source address, and its receiver here.
    fn on_datagram<P: Protocol>(
        &mut self,
        datagram: &[u8],
        source: SocketAddr,
        routes: &Routes,
        transport: &mut Transport,
        inbox: &mut Inbox<P>,
    ) {
        let (Received { header, sequence, keyed }, frames) =
            match wire::decode(datagram, self.cluster_hash, self.key.as_ref()) {
                Ok(decoded) => decoded,
                Err(error) => {
                    *transport.dropped.entry(wire_reason(error)).or_default() += 1;
                    self.complaints.on_rejected(source, error);
                    return;
                }
            };
        // Only a keyed datagram is known to come from a holder of the key; without a key the
        // fault shim's duplicates must reach the protocols, as the simulator's do.
        if keyed && let Err(replay) = self.replay.accept(source, header.boot, sequence, monotonic_ns()) {
            *transport.dropped.entry(replay.reason()).or_default() += 1;
            return;
        }
        for frame in frames {
            if routes.address(NodeId(frame.from)) != Some(source) {
                *transport.dropped.entry("unknown_sender").or_default() += 1;
                continue;
            }
            let Some(local) = routes.local(NodeId(frame.to)) else {
                *transport.dropped.entry("not_hosted_here").or_default() += 1;
                continue;
            };
            let whole = match frame.body {
                Body::Whole(bytes) => postcard::from_bytes::<P::Message>(bytes),
                Body::Fragment { message, index, count, bytes } => {
                    let now = monotonic_ns();
                    let abandoned = self.reassembly.abandoned;
                    let whole = self.reassembly.add(now, frame.from, header.boot, message, index, count, bytes);
                    log_abandoned(abandoned, self.reassembly.abandoned, frame.from);
                    match whole {
                        Some(whole) => postcard::from_bytes::<P::Message>(&whole),
                        None => continue,
                    }
                }
            };
            match whole {
                Ok(message) => {
                    transport.messages_received += 1;
                    inbox.push_back((local, Input { from: NodeId(frame.from), message }));
                }
                Err(_) => *transport.dropped.entry("undecodable_message").or_default() += 1,
            }
        }
    }
}

/// Logs when reassembly gave up on messages (a fragment lost, too slow, or the table full),
/// at every power of two of the total: a lost large message stalls whoever waits for it.
fn log_abandoned(before: u64, after: u64, from: u32) {
    if (before + 1..=after).any(u64::is_power_of_two) {
        eprintln!(
            "error: gave up reassembling a fragmented message (the latest from node {from}): a fragment was lost, \
             it took over {} s, or {REASSEMBLY_ENTRIES_MAX} were in progress ({after} given up so far)",
            REASSEMBLY_EXPIRY_NS / 1_000_000_000
        );
    }
}

fn wire_reason(error: wire::WireError) -> &'static str {
    match error {
        wire::WireError::TooShort => "datagram_too_short",
        wire::WireError::BadMagic => "bad_magic",
        wire::WireError::Version(_) => "bad_version",
        wire::WireError::Checksum => "bad_checksum",
        wire::WireError::BadMac => "bad_mac",
        wire::WireError::Unauthenticated => "unauthenticated",
        wire::WireError::NoKey => "keyed_but_no_key_here",
        wire::WireError::OtherCluster => "other_cluster",
        wire::WireError::BadFrame => "bad_frame",
        wire::WireError::BadFragment => "bad_fragment",
    }
}
