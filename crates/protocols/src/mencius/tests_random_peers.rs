//! No panic from any peer message (issue 20): a Mencius replica fed random well-formed messages
//! from random peers, among its cluster's own traffic, timers, revocations and restarts, never
//! panics and keeps its own invariants. Method: [`random_peers::run`] with a generator that
//! pushes the ballots, slots, ranges and owners of real proposals, acknowledgements, skips,
//! revocations and snapshots to extremes.

use super::messages::{Ballot, Message, Value};
use super::{Config, Mencius};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// A ballot with its round or its rank pushed anywhere.
fn tweak_ballot(draw: &mut Gen, ballot: &mut Ballot, n: u64) {
    if draw.chance(70) { ballot.round = n } else { ballot.rank = n as u32 }
}

/// Slot-value pairs with one slot pushed to `n`, or a value added there.
fn tweak_entries(draw: &mut Gen, entries: &mut Vec<(u64, Value)>, n: u64) {
    match entries.len() {
        0 => entries.push((n, draw.value())),
        len => {
            let at = draw.below(len);
            entries[at].0 = n
        }
    }
}

/// A real message with a ballot, slot, range or owner pushed anywhere.
fn forge(draw: &mut Gen, _to: NodeId, seen: &[Envelope<Mencius>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| {
        let first = draw.chance(50);
        match message {
            Message::Propose { ballot, .. } if first => tweak_ballot(draw, ballot, n),
            Message::Propose { entries, .. } | Message::Learn { entries } => tweak_entries(draw, entries, n),
            Message::Accepted { ballot, .. } if first => tweak_ballot(draw, ballot, n),
            Message::Accepted { slots, .. } => slots.push(n),
            Message::Skip { from, until } | Message::Query { from, until } => {
                if first {
                    *from = n
                } else {
                    *until = n
                }
            }
            Message::Prepare { ballot, owner, from, until } => match draw.below(4) {
                0 => tweak_ballot(draw, ballot, n),
                1 => *owner = n as u32,
                2 => *from = n,
                _ => *until = n,
            },
            Message::Promise { ballot, .. } if first => tweak_ballot(draw, ballot, n),
            Message::Promise { accepted, .. } => match accepted.len() {
                0 => accepted.push((n, draw.value(), draw.value())),
                len => {
                    let at = draw.below(len);
                    if draw.chance(50) { accepted[at].0 = n } else { tweak_ballot(draw, &mut accepted[at].1, n) }
                }
            },
            Message::StateRequest { need } => *need = n,
            Message::StateReply(snapshot) if first => snapshot.executed = n,
            Message::StateReply(snapshot) => snapshot.ops = n,
            _ => return false,
        }
        true
    });
    tweaked.unwrap_or_else(|| draw.value())
}

proptest! {
    #![proptest_config(random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_a_replica(seed in any::<u64>()) {
        // A lying far slot costs up to a window's skip (issue 20): a small window keeps
        // thousands of cases fast and reaches the window's end often.
        let config = Config { window_max: 1_000, ..Config::default() };
        random_peers::run_on(Layout::new(3, 2), config, seed, &mut forge);
    }
}
