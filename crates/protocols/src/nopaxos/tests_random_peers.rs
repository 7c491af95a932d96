//! No panic from any peer message (issue 20): a NOPaxos replica fed random well-formed messages
//! from random peers, among its cluster's own traffic (sequencer, controller, clients), timers
//! and restarts, never panics and keeps its own invariants. Method: [`random_peers::run`] with
//! a generator that pushes the views, slots and sequence numbers of real messages to extremes.

use super::messages::Message;
use super::{Config, NoPaxos};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// A real message with a view, slot or sequence number pushed anywhere.
fn forge(draw: &mut Gen, _to: NodeId, seen: &[Envelope<NoPaxos>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| {
        let first = draw.chance(50);
        match message {
            Message::Stamped { session, .. } if first => *session = n,
            Message::Stamped { seq, .. } => *seq = n,
            Message::SlotLookup { view, slot }
            | Message::SlotMissing { view, slot }
            | Message::GapFind { view, slot }
            | Message::GapCommit { view, slot }
            | Message::GapCommitRep { view, slot }
            | Message::GapFound { view, slot, .. }
            | Message::SlotContent { view, slot, .. } => {
                if first {
                    view.leader_num = n
                } else {
                    *slot = n
                }
            }
            Message::ViewChangeReq { view } | Message::StartViewAck { view } => {
                if first {
                    view.leader_num = n
                } else {
                    view.session_num = n
                }
            }
            Message::ViewChange { view, session_msg_num, .. } | Message::StartView { view, session_msg_num, .. } => {
                if first {
                    view.leader_num = n
                } else {
                    *session_msg_num = n
                }
            }
            Message::SyncPrepare { through, .. }
            | Message::SyncRep { through, .. }
            | Message::SyncCommit { through, .. } => *through = n,
            Message::SetSession { session, .. } => *session = n,
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
        let config = Config::default();
        random_peers::run_on(Layout::new(3, 2), config, seed, &mut forge);
    }
}
