//! No panic from any peer message (issue 20): a CURP+ replica (leader or witness) fed random
//! well-formed messages from random peers, among its cluster's own traffic, timers and crashes,
//! never panics and keeps its own invariants (a witness holds no two conflicting commands).
//! Method: SwiftPaxos' random-peer run and generator (`swiftpaxos/tests_random_peers.rs`:
//! ballots, dependencies, request numbers and recovery entries, `witnessed` flags included, of
//! real messages pushed to extremes), on five nodes in `Variant::Curp`.

use super::Curp;
use crate::swiftpaxos::Config;
use crate::swiftpaxos::tests_random_peers::run_random_peers;
use proptest::prelude::*;

proptest! {
    #![proptest_config(crate::testkit::random_peers::cases())]
    #[test]
    fn random_peer_messages_never_panic_a_replica(seed in any::<u64>()) {
        run_random_peers::<Curp>(seed, 5, Config::default());
    }
}
