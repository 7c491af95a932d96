//! No panic from any peer message (issue 20): the unreplicated server fed random well-formed
//! messages from random peers, among its clients' own requests, timers and restarts, never
//! panics and keeps its own invariants. Method: [`random_peers::run`] with a generator that
//! pushes the request numbers and acknowledgements of real requests to extremes.

use super::Unreplicated;
use super::messages::Message;
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// A real request with its number or acknowledgement pushed anywhere.
fn forge(draw: &mut Gen, _to: NodeId, seen: &[Envelope<Unreplicated>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| match message {
        Message::Request { id, acked_below, .. } => {
            if draw.chance(50) {
                id.number = n
            } else {
                *acked_below = n
            }
            true
        }
        Message::Reply { .. } => false,
    });
    tweaked.unwrap_or_else(|| draw.value())
}

proptest! {
    #![proptest_config(random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_the_server(seed in any::<u64>()) {
        let config = super::Config::default();
        random_peers::run_on(Layout::new(1, 3), config, seed, &mut forge);
    }
}
