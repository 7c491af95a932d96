//! No panic from any peer message (issue 20): an N²Paxos replica fed random well-formed
//! messages from random peers, among its cluster's own traffic, timers and crashes, never
//! panics and keeps its own invariants. Method: SwiftPaxos' random-peer run and generator
//! (`swiftpaxos/tests_random_peers.rs`: ballots, dependencies, request numbers and recovery
//! entries of real messages pushed to extremes), on nodes in `Variant::N2Paxos`.

use super::N2Paxos;
use crate::swiftpaxos::Config;
use crate::swiftpaxos::tests_random_peers::run_random_peers;
use proptest::prelude::*;

proptest! {
    #![proptest_config(crate::testkit::random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_a_replica(seed in any::<u64>()) {
        run_random_peers::<N2Paxos>(seed, 3, Config::default());
    }
}
