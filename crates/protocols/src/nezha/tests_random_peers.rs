//! No panic from any peer message (issue 20): a Nezha replica fed random well-formed messages
//! from random peers, among its cluster's own traffic (proxies, clients), timers and restarts,
//! never panics and keeps its own invariants. Method: [`random_peers::run`] with a generator
//! that pushes the views, sync points and crash vectors of real messages to extremes (a
//! `SyncAck` naming the leader's own rank once failed an assertion).

use super::messages::Message;
use super::{Config, Nezha};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// A real message with a view, position or crash-vector entry pushed anywhere.
fn forge(draw: &mut Gen, _to: NodeId, seen: &[Envelope<Nezha>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| {
        let first = draw.chance(50);
        match message {
            Message::Sync { view, first: position, .. } => {
                if first {
                    *view = n
                } else {
                    *position = n
                }
            }
            Message::SyncAck { view, sync_point, .. } => {
                if first {
                    *view = n
                } else {
                    *sync_point = n
                }
            }
            Message::ViewChangeRequest { view, cv }
            | Message::ViewChange { view, cv, .. }
            | Message::StartView { view, cv, .. }
            | Message::StateTransferReply { view, cv, .. } => {
                if first || cv.is_empty() {
                    *view = n
                } else {
                    let at = draw.below(cv.len());
                    cv[at] = n
                }
            }
            Message::FastReplies { view, .. } | Message::SlowReply { view, .. } | Message::Commits { view, .. } => {
                *view = n
            }
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
