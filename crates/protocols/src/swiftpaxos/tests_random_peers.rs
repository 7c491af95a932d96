//! No panic from any peer message (issue 20): a SwiftPaxos replica fed random well-formed
//! messages from random peers, among its cluster's own traffic, timers and crashes (a restarted
//! replica retires: crash-stop), never panics and keeps its own invariants. Method:
//! [`random_peers::run`] with a generator that pushes the ballots, dependencies, request numbers,
//! phases and garbage-collection marks of real messages to extremes. N²Paxos and CURP+ run the
//! same nodes in another `Variant`, so their tests call [`run_random_peers`] with their own
//! protocol type: the forge is one, the variant is what differs.

use super::messages::{Entry, Message, Phase};
use super::{Config, SwiftPaxos};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::{NodeId, Protocol, RequestId};
use proptest::prelude::*;

/// A request id: a real one with its number pushed to `n`, or one of a random client.
fn tweak_id(draw: &mut Gen, id: &mut RequestId, n: u64) {
    if draw.chance(70) { id.number = n } else { *id = draw.value() }
}

/// A recovery entry with its phase, dependencies or id changed.
fn tweak_entry(draw: &mut Gen, entry: &mut Entry, n: u64) {
    match draw.below(4) {
        0 => entry.phase = draw.value(),
        1 => entry.deps = if draw.chance(20) { None } else { Some(draw.value()) },
        2 => entry.witnessed = !entry.witnessed,
        _ => tweak_id(draw, &mut entry.id, n),
    }
}

/// Changes one number or list of a SwiftPaxos message, if it has one worth changing.
fn tweak(draw: &mut Gen, message: &mut Message, n: u64) -> bool {
    let first = draw.chance(50);
    match message {
        Message::FastAck { ballot, id, deps, .. } | Message::Reply { ballot, id, deps, .. } => match draw.below(3) {
            0 => *ballot = n,
            1 => tweak_id(draw, id, n),
            // A dependency on the command itself, or on an id never seen.
            _ if first => deps.push(*id),
            _ => deps.push(draw.value()),
        },
        Message::SlowAck { ballot, id } | Message::RecordAck { ballot, id } if first => *ballot = n,
        Message::SlowAck { id, .. } | Message::RecordAck { id, .. } | Message::Executed { id, .. } => {
            tweak_id(draw, id, n)
        }
        Message::Ping { ballot, executed } => match executed.first_mut() {
            Some((_, number)) if !first => *number = n,
            _ => *ballot = n,
        },
        Message::Recover { ballot } | Message::NewLeader { ballot } => *ballot = n,
        Message::NewLeaderAck { ballot, cbal, entries, collected } => match draw.below(4) {
            0 => *ballot = n,
            1 => *cbal = n,
            2 if !collected.is_empty() => collected[0].1 = n,
            _ if entries.is_empty() => entries.push(draw.value()),
            _ => {
                let at = draw.below(entries.len());
                tweak_entry(draw, &mut entries[at], n)
            }
        },
        Message::Sync { ballot, entries } => match entries.len() {
            _ if first => *ballot = n,
            0 => entries.push(Entry { phase: Phase::Commit, ..draw.value() }),
            len => {
                let at = draw.below(len);
                tweak_entry(draw, &mut entries[at], n)
            }
        },
        Message::Fetch { ids } => ids.push(draw.value()),
        Message::Payloads { commands } if !commands.is_empty() => tweak_id(draw, &mut commands[0].0, n),
        _ => return false,
    }
    true
}

/// A real message with a ballot, id, dependency or recovery entry pushed anywhere (any
/// protocol whose nodes are SwiftPaxos').
pub(crate) fn forge<P: Protocol<Message = Message>>(draw: &mut Gen, _to: NodeId, seen: &[Envelope<P>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| tweak(draw, message, n));
    tweaked.unwrap_or_else(|| draw.value())
}

/// One random-peer run of `replicas` replicas and two clients of `P` (SwiftPaxos, N²Paxos or
/// CURP+), with `config`.
pub(crate) fn run_random_peers<P: Protocol<Message = Message, Config = Config>>(
    seed: u64,
    replicas: usize,
    config: Config,
) {
    random_peers::run_on::<P>(Layout::new(replicas, 2), config, seed, &mut forge);
}

proptest! {
    #![proptest_config(random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_a_replica(seed in any::<u64>()) {
        // Half the runs with SwiftPaxos^reads, whose readers answer reads themselves.
        let config = Config { reads: seed % 2 == 0, ..Config::default() };
        run_random_peers::<SwiftPaxos>(seed, 3, config);
    }
}
