//! No panic from any peer message (issue 20): a Multi-Paxos replica fed random well-formed
//! messages from random peers, among its cluster's own traffic, timers and restarts, never
//! panics and keeps its own invariants. Method: [`random_peers::run`] with a generator that
//! pushes the views and op numbers of real messages to extremes (a view of `u64::MAX` once
//! wrapped at `view + 1`, and persisted, at every restart).

use super::messages::Message;
use super::{Config, MultiPaxos};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// A real message with a view or an op number pushed anywhere, often to an extreme.
fn forge(draw: &mut Gen, _to: NodeId, seen: &[Envelope<MultiPaxos>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| {
        let first = draw.chance(50);
        match message {
            Message::Prepare(p) if first => p.view = n,
            Message::Prepare(p) => p.op_number = n,
            Message::PrepareOk { view, .. } if first => *view = n,
            Message::PrepareOk { op_number, .. } => *op_number = n,
            Message::Commit { view, .. } if first => *view = n,
            Message::Commit { commit_number, .. } => *commit_number = n,
            Message::DoViewChange(d) if first => d.view = n,
            Message::DoViewChange(d) => d.op_number = n,
            Message::StartView(s) if first => s.view = n,
            Message::StartView(s) => s.commit_number = n,
            Message::NewState(s) if first => s.view = n,
            Message::NewState(s) => s.op_number = n,
            Message::GetState { view, .. } if first => *view = n,
            Message::GetState { op_number, .. } => *op_number = n,
            _ => return false,
        }
        true
    });
    tweaked.unwrap_or(match draw.below(2) {
        0 => Message::StartViewChange { view: n },
        _ => Message::GetState { view: n, op_number: draw.number() },
    })
}

proptest! {
    #![proptest_config(random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_a_replica(seed in any::<u64>()) {
        let config = Config::default();
        random_peers::run_on(Layout::new(3, 2), config, seed, &mut forge);
    }
}
