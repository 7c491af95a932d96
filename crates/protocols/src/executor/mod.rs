//! Executors: the part of a replica that decides *when* a committed command reaches the
//! `StateMachine`, kept apart from the part that decides *what* is committed (STYLE 5).
//!
//! # Why agreement and execution are split
//!
//! Protocols differ far more in how they order execution than in how they apply a command:
//! Multi-Paxos runs its log in slot order, EPaxos and SwiftPaxos walk a dependency graph, Tempo
//! waits for timestamps to become stable. Ordering bugs (running a command before something it
//! must follow, running it twice, never running it) hide in that step, so each order lives here
//! as a small, sans-IO, deterministic module that only orders *ids*: the protocol keeps the
//! payloads, hands ids to an executor as they commit, and applies to its state machine what the
//! executor releases. Each executor is checked against a slow, obviously correct oracle on
//! thousands of random cases (STYLE 6), in `tests_*.rs` next to it.
//!
//! # The three orders
//!
//! - [`log`]: **log order**. Committed entries arrive by slot number in any order; each is
//!   released once, in slot order, after every lower slot. Out-of-order arrivals wait in a gap
//!   buffer with a configured bound. (Multi-Paxos, NOPaxos, Nezha.)
//! - [`graph`]: **dependency-graph order**. Each command commits with a set of dependency ids
//!   and a sequence number; it runs once everything it transitively depends on has committed.
//!   Strongly connected components run together, dependencies' components first, and inside a
//!   component by ⟨sequence, id⟩. (SwiftPaxos, EPaxos-style protocols.)
//! - [`stability`]: **timestamp-stability order**. Each command commits with a timestamp and the
//!   keys it touches; it runs when it heads the ⟨timestamp, id⟩ queue of every key it touches and
//!   its timestamp is stable on each of them. (Tempo.)
//!
//! All three iterate only `BTreeMap`s, `BTreeSet`s and `Vec`s, so the order they release is a
//! function of their inputs alone (STYLE A2), and each has a configured bound on what it holds
//! (STYLE 12): a full executor refuses the next commit with a typed error rather than grow.

pub mod graph;
pub mod log;
pub mod stability;

#[cfg(test)]
mod tests_graph;
#[cfg(test)]
mod tests_log;
#[cfg(test)]
mod tests_stability;
