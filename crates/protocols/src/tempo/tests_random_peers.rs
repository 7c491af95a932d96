//! No panic from any peer message (issue 20): a Tempo replica of a two-shard cluster fed random
//! well-formed messages from random peers, among its cluster's own traffic, timers and restarts,
//! never panics and keeps its own invariants. Method: [`random_peers::run`] with a generator that
//! pushes the timestamps, ballots and shard lists of real messages anywhere (a second `Commit`
//! with another timestamp once failed an `assert_eq!`, and a multi-shard `Submit` indexed its
//! lists before checking them).

use super::messages::Message;
use super::{Config, Tempo};
use crate::testkit::Envelope;
use crate::testkit::random_peers::{self, Gen, mutate_seen};
use crate::testkit::script::Layout;
use ordo_core::NodeId;
use proptest::prelude::*;

/// Replicas per shard in this test's layout (replicas of shard `s` are `3s..3s + 3`).
const REPLICAS_PER_SHARD: u32 = 3;

/// A real message with a timestamp, ballot or list pushed anywhere.
fn forge(draw: &mut Gen, to: NodeId, seen: &[Envelope<Tempo>]) -> Message {
    let n = draw.number();
    let tweaked = mutate_seen(seen, draw, |draw, message| {
        let first = draw.chance(50);
        match message {
            // A multi-shard submit that `to` coordinates, naming one shard more (often one
            // that does not exist), or one coordinator fewer.
            Message::Submit { shards, parts, coordinators, .. } if first && !parts.is_empty() => {
                shards.push(n as u32);
                parts.push(parts[0].clone());
                coordinators.push(to);
                for (shard, coordinator) in shards.iter().zip(coordinators.iter_mut()) {
                    if *shard == to.0 / REPLICAS_PER_SHARD {
                        *coordinator = to;
                    }
                }
            }
            Message::Submit { coordinators, .. } => {
                coordinators.pop();
            }
            Message::Propose { t, .. } | Message::ProposeAck { t, .. } | Message::Bump { t, .. } => *t = n,
            Message::Commit { t, shard, .. } => {
                if first {
                    *t = n
                } else {
                    *shard = n as u32
                }
            }
            Message::Consensus { t, ballot, .. } => {
                if first {
                    *t = n
                } else {
                    *ballot = n
                }
            }
            Message::ConsensusAck { ballot, .. } | Message::Rec { ballot, .. } => *ballot = n,
            Message::RecAck { t, abal, .. } => {
                if first {
                    *t = n
                } else {
                    *abal = n
                }
            }
            Message::Promises { from_seq, ack, .. } => {
                if first {
                    *from_seq = n
                } else {
                    *ack = n
                }
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
        random_peers::run_on(Layout { shards: 2, ..Layout::new(REPLICAS_PER_SHARD as usize, 2) }, config, seed, &mut forge);
    }
}
