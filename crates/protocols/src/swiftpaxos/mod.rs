//! SwiftPaxos (Ryabinin, Gotsman, Sutra, "SwiftPaxos: Fast Geo-Replicated State Machines",
//! NSDI 2024): leader-based replication where commands commit in two message delays without
//! contention and in three with it, because followers vote twice. See
//! `docs/protocols/swiftpaxos.md` and `../shared/specs/swiftpaxos.md`.
//!
//! # Glossary
//!
//! - **ballot**: `b`, led by replica rank `b mod N`; a replica is in one ballot (`bal`) and
//!   completed recovery last in `cbal`.
//! - **dependencies** (`D`): the conflicting commands a replica received before a command; a
//!   command runs after its committed dependencies (the shared graph executor).
//! - **fast quorum**: the leader plus fixed followers (C2, default: a majority) or any set of
//!   more than 3/4 of the replicas holding the leader (C1). Its members propose `D` (`FastAck`).
//! - **slow quorum**: the leader plus any `f` followers. Followers adopt the leader's `D` and
//!   say so (`SlowAck`): the double vote.
//! - **paths** (`P`): a digest of a command's dependency paths, trimmed after the first
//!   accepted or committed dependency (§3.5, §4.1); a far client takes the leader's optimistic
//!   result only when a fast quorum's paths match.
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Propagate` | client → replicas | submit (L2); follower re-proposal to the leader (§4.3) |
//! | `FastAck` | fast-quorum member → replicas (+ client) | dependency proposal (L19, L21) |
//! | `SlowAck` | follower → replicas + client | adopted the leader's `D` (L27, L76) |
//! | `Reply` | leader → client | optimistic result with the leader's paths (L18) |
//! | `Executed` | replica → client | result after execution (co-located client, retries) |
//! | `Fetch` / `Payloads` | replica ↔ leader | missing payloads (§4.3) |
//! | `Ping` | replica → replicas | failure detector (Fig 13) |
//! | `Recover` | replica → trusted replica | ask for a new ballot (L84) |
//! | `NewLeader` / `NewLeaderAck` / `Sync` | recovery (L40–L76) |
//!
//! # Invariants (checked by `check_invariants` and `checker.rs`)
//!
//! - Inv 1: every replica commits a command with the same dependencies (global checker).
//! - Inv 2: two committed conflicting commands are ordered one way at least (replica).
//! - Inv 3: commits come after their dependencies' commits, so the committed graph is acyclic;
//!   a Sync's graph is checked acyclic before it is sent (recovery).
//! - Inv 5: no dependency of an accepted or committed command is in `Start` (replica).
//! - Inv 7: the leader proposes one `D` per command and ballot (global checker).
//! - Inv 14 / Nontriviality: what a client accepted through the leader commits with the
//!   leader's dependencies, transitively, and executes with the result the client got.
//!
//! # Status line
//!
//! `rank=1 bal=5 cbal=5 normal leader=0 cmds=120 preaccept=2 accept=1 commit=117 exec=117`.

#[cfg(any(test, feature = "canary"))]
pub mod canary;
pub mod checker;
pub mod client;
pub mod conflicts;
pub mod gc;
pub mod messages;
pub mod paths;
pub mod quorums;
pub mod reads;
pub mod recovery;
pub mod replica;

#[cfg(feature = "canary")]
pub use canary::{SwiftPaxosDirectDeps, SwiftPaxosSingleVote, SwiftPaxosStaleRead};

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod tests_random_peers;
#[cfg(test)]
mod tests_reads;
#[cfg(test)]
mod tests_scenarios;

use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};

/// SwiftPaxos.
pub struct SwiftPaxos;

/// The fast-quorum system (§3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum QuorumSystem {
    /// One fixed majority per ballot holding the leader (the paper's default).
    #[default]
    C2,
    /// Any set of more than 3/4 of the replicas holding the leader.
    C1,
}

/// Options of SwiftPaxos. Time-outs get the topology's largest round trip added
/// ([`Config::scaled`]), so the same defaults suit a LAN and the 13-region WAN.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// C2 (default) or C1.
    pub quorum_system: QuorumSystem,
    /// Under C2, the first ballot of the first rank listed uses the other ranks listed as its
    /// fast followers (the paper's `quorum.conf`); empty: the leader's `f` closest peers.
    pub fast_quorum_ranks: Vec<usize>,
    /// How often a replica pings its peers and looks for stuck commands.
    pub tick_ns: u64,
    /// Silence after which a peer is suspected.
    pub suspect_timeout_ns: u64,
    /// A payload missing this long is fetched from the leader (§4.3).
    pub fetch_timeout_ns: u64,
    /// A command uncommitted this long is re-proposed to the leader (§4.3).
    pub repropose_timeout_ns: u64,
    /// A command uncommitted this long (or a recovery without Sync this long) asks the trusted
    /// replica for a new ballot.
    pub stuck_timeout_ns: u64,
    /// How long a client waits before sending its command again.
    pub client_retry_ns: u64,
    /// Most commands a replica holds.
    pub instances_max: usize,
    /// Most clients in the client table.
    pub clients_max: usize,
    /// Garbage collection (`gc.rs`): forget commands executed at every replica (on by default).
    pub gc: bool,
    /// SwiftPaxos^reads (`reads.rs`, §4.4): read-only commands run speculatively at the
    /// fast-quorum replica closest to their client instead of at the leader (off by default).
    pub reads: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            quorum_system: QuorumSystem::C2,
            fast_quorum_ranks: Vec::new(),
            tick_ns: 1_000_000,
            suspect_timeout_ns: 20_000_000,
            fetch_timeout_ns: 2_000_000,
            repropose_timeout_ns: 10_000_000,
            stuck_timeout_ns: 30_000_000,
            client_retry_ns: 40_000_000,
            instances_max: 4_000_000,
            clients_max: 65_536,
            gc: true,
            reads: false,
        }
    }
}

impl Config {
    /// Rejects options no node can run with.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("tick_ns", self.tick_ns),
            ("suspect_timeout_ns", self.suspect_timeout_ns),
            ("fetch_timeout_ns", self.fetch_timeout_ns),
            ("repropose_timeout_ns", self.repropose_timeout_ns),
            ("stuck_timeout_ns", self.stuck_timeout_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("instances_max", self.instances_max as u64),
            ("clients_max", self.clients_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("swiftpaxos: {name} must be positive"));
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's largest round trip (the spec leaves them to
    /// the implementer, §13.10): a WAN must not trigger fetches, re-proposals, suspicions and
    /// recoveries that only a LAN's speed would justify.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            suspect_timeout_ns: topology.stretched(self.suspect_timeout_ns, 2),
            fetch_timeout_ns: topology.stretched(self.fetch_timeout_ns, 1),
            repropose_timeout_ns: topology.stretched(self.repropose_timeout_ns, 3),
            stuck_timeout_ns: topology.stretched(self.stuck_timeout_ns, 6),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 8),
            ..self.clone()
        }
    }
}

/// Timers of SwiftPaxos.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Replica: ping, fetch, re-propose, nominate a leader.
    Tick,
    /// Client: the command went unanswered; send it again.
    ClientRetry,
}

/// A deliberate bug, for the canaries (`canary.rs`). Always `None` in the real protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// The client takes the fast path on matching direct dependencies without comparing paths
    /// (spec scenario 6).
    DirectDeps,
    /// A fast-quorum follower that disagrees with the leader keeps its own vote yet says it
    /// adopted the leader's (no double vote).
    SingleVote,
    /// N²Paxos whose followers order commands by their own arrival order and 2B that order as
    /// if it were the leader's.
    OwnOrder,
    /// CURP+ whose witnesses ack every record and whose leader replies at once from its
    /// executed state, without L14's wait for the conflicting commands' commits.
    BlindWitness,
    /// SwiftPaxos^reads whose reader answers from its executed state alone, ignoring the
    /// unexecuted writes the read depends on.
    StaleRead,
}

/// Which protocol the nodes run: SwiftPaxos, or one of the paper's baselines built from the same
/// machinery (`crate::n2paxos`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// SwiftPaxos as the paper describes it.
    Swift,
    /// N²Paxos (§5, spec §9.2): no fast quorum; the leader's `FastAck` is the 2A, every
    /// follower broadcasts its `SlowAck` (the 2B), every replica commits on a slow quorum, and
    /// the replica closest to the client answers it after execution. No `Reply`.
    N2Paxos,
    /// CURP+ (App. B, spec §9.7): N²Paxos whose followers are also CURP witnesses
    /// (`RecordAck`), whose leader replies optimistically once every dependency is committed,
    /// and whose client takes that reply with record acks from more than 3N/4 replicas.
    Curp,
}

impl Variant {
    /// Whether SwiftPaxos' fast quorums (followers' `FastAck`s) exist.
    pub fn has_fast_path(self) -> bool {
        self == Variant::Swift
    }

    /// Whether the leader sends an optimistic `Reply` at all.
    pub fn replies(self) -> bool {
        self != Variant::N2Paxos
    }
}

impl Protocol for SwiftPaxos {
    const NAME: &'static str = "swiftpaxos";
    const SUMMARY: &'static str = "SwiftPaxos: 2-delay fast path, double-vote slow path, dependency graph, recovery";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;
    type Observation = checker::Observation;

    fn has_fast_path() -> bool {
        true
    }

    /// Crash-stop, as the paper (§2): a restarted replica retires.
    fn crash_model() -> CrashModel {
        CrashModel::Stop
    }

    /// Real processes share cores with their clients: with 800 SETs in flight a command waits
    /// tens of milliseconds for its commit, and a replica may pause for a hundred while a map of
    /// a million keys grows. The simulator's 10 ms re-proposal and 2 ms fetch made followers
    /// re-propose most commands under such load (70,000 each in a 10-minute soak), adding the
    /// load that delayed them, and a command stuck 300 ms made a new ballot (26–65 recoveries).
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[
            ("suspect_timeout_ns", 500_000_000),
            ("stuck_timeout_ns", 1_000_000_000),
            ("repropose_timeout_ns", 100_000_000),
            ("fetch_timeout_ns", 20_000_000),
            ("client_retry_ns", 400_000_000),
        ]
    }

    fn coverage_goals() -> &'static [&'static str] {
        &["slow_path", "recovery", "retired"]
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(checker::SwiftChecker::default()))
    }

    fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
        new_node_with(context, &durable, Variant::Swift, Flaw::None)
    }
}

/// Builds a node of `variant` with `flaw` switched on.
pub(crate) fn new_node_with(
    context: NodeContext<SwiftPaxos>,
    durable: &[()],
    variant: Variant,
    flaw: Flaw,
) -> Box<dyn Node<SwiftPaxos>> {
    match context.role() {
        Role::Client => Box::new(client::Client::new(context, variant, flaw)),
        _ => Box::new(replica::Replica::new(context, variant, flaw, replica::Boot::from_durable(durable))),
    }
}
