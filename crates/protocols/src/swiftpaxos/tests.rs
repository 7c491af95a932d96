//! SwiftPaxos tests: spec §12 scenarios on the testkit.
