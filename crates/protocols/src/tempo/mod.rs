//! Tempo (Enes, Baquero, Gotsman, Sutra, "Efficient Replication via Timestamp Stability",
//! EuroSys 2021): leaderless state-machine replication ordered by scalar timestamps, with
//! partial replication (shards) and recovery. See `docs/protocols/tempo.md`.
//!
//! # Glossary
//!
//! - **dot**: a command id, the client's request plus the client's attempt at it.
//! - **coordinator**: the replica of a shard the client sent the command to; it proposes, picks
//!   the fast or slow path and commits. A recovering process takes over its role.
//! - **fast quorum**: the coordinator and its `⌊r/2⌋ + f − 1` closest (unsuspected) peers.
//! - **proposal**: a fast-quorum member's timestamp `max(m, clock + 1)`; the command's
//!   timestamp is the highest proposal, taken on the fast path when at least `f` members
//!   proposed it, otherwise agreed by Flexible Paxos (`f + 1` acceptors).
//! - **promise**: ⟨process, key, timestamp⟩ — the process will never propose that timestamp on
//!   that key again; attached to a command or detached. Each key has its own clock.
//! - **stable**: a timestamp of a key up to which a majority has promised everything; committed
//!   commands run in ⟨ts, dot⟩ order once stable (`executor.rs`).
//! - **ballot**: `1..=r` belong to the initial coordinators (rank + 1, phase 2 only); recovery
//!   ballots are above `r` and owned by `rank + 1` modulo `r`.
//!
//! # Messages
//!
//! | message | from → to | purpose |
//! |---|---|---|
//! | `Submit` | client → coordinator of each accessed shard | coordinate a command |
//! | `Propose` / `ProposeAck` | coordinator ↔ fast quorum | timestamp proposals with promises |
//! | `Payload` | coordinator → rest of shard | keep the command for recovery |
//! | `Commit` | coordinator → every replica of every accessed shard | the shard's timestamp |
//! | `Consensus` / `ConsensusAck` | coordinator ↔ shard | slow path and recovery phase 2 |
//! | `Promises` | replica → each shard peer | its promise log, with acknowledgements |
//! | `Executed` | replica → each shard peer | the dots it executed, with acknowledgements (GC) |
//! | `Rec` / `RecAck` | recovering process ↔ shard | recovery phase 1 (carries the payload) |
//! | `Help` | replica → replicas | ask for a commit or payload it lacks |
//! | `Bump` | fast-quorum member → nearby replica of other shards | faster stability |
//! | `Stable` | replica → replicas of the other accessed shards | real-time order across shards |
//! | `Reply` | coordinator → client | the shard's result |
//!
//! # Invariants (checked by `check_invariants`)
//!
//! - A command's per-shard timestamp never changes once known (asserted where it is learned).
//! - `abal ≤ bal`; recovery ballots are above `r` and owned by the sender.
//! - Executed commands run in ⟨ts, dot⟩ order per key and only once stable (executor).
//! - Every map is bounded by a configured limit.
//! - A command is forgotten only once every replica of its shard executed it, and a forgotten
//!   command is never held again (`gc.rs`).
//!
//! # Status line
//!
//! `shard=0 rank=1 cmds=12 peak=40 pending=2 waiting=1 exec=117 forgotten=105 keys=5 log=40
//! suspects=0`.

#[cfg(any(test, feature = "canary"))]
pub mod canary;
pub mod client;
pub mod executor;
pub mod gc;
pub mod messages;
pub mod promises;
pub mod recovery;
pub mod replica;
pub mod shards;

#[cfg(feature = "canary")]
pub use canary::{TempoEarlyForget, TempoLowRecoveryBallot, TempoMinorityStability};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_executor;
#[cfg(test)]
mod tests_gc;
#[cfg(test)]
mod tests_promises;
#[cfg(test)]
mod tests_random_peers;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_scenarios;
#[cfg(test)]
mod tests_scripts;

use ordo_core::{CrashModel, GlobalChecker, Node, NodeContext, Protocol, Role, Topology};
use serde::{Deserialize, Serialize};

/// Tempo.
pub struct Tempo;

/// How a coordinator picks its fast quorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FastQuorumChoice {
    /// Itself and its closest peers by expected delay, skipping peers it suspects (default).
    #[default]
    Closest,
    /// Itself and its closest peers by expected delay, suspected or not (the paper's static
    /// choice).
    ClosestStatic,
}

/// Options of Tempo. Time-outs get the topology's largest round trip added (see
/// [`Config::scaled`]) so the defaults suit a LAN and a WAN alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How a coordinator picks its fast quorum.
    pub fast_quorum: FastQuorumChoice,
    /// How often a replica sends its promise log to its peers (`MPromises`).
    pub promise_interval_ns: u64,
    /// How often a replica looks for commands to recover or ask about.
    pub tick_ns: u64,
    /// How long a command may stay uncommitted before a replica recovers it.
    pub recovery_timeout_ns: u64,
    /// How long a client waits before it submits its request again (new attempt).
    pub client_retry_ns: u64,
    /// Silence after which a peer is suspected (it is then left out of fast quorums).
    pub suspect_timeout_ns: u64,
    /// Send `MBump` to the other accessed shards (paper §4).
    pub bump: bool,
    /// Most promise ranges in one `Promises` message.
    pub promise_batch_max: usize,
    /// Most promise ranges kept for peers that have not acknowledged them; a peer further
    /// behind is cut off (only a crashed peer gets that far behind).
    pub promise_log_max: usize,
    /// Most commands a replica keeps; new submissions are refused beyond it.
    pub instances_max: usize,
    /// Most keys with a clock; commands on new keys are refused beyond it.
    pub keys_max: usize,
    /// Request numbers remembered per client to run each request once.
    pub client_window: usize,
    /// Most clients in the client table; submissions from new clients are refused beyond it.
    pub clients_max: usize,
    /// Forgotten commands remembered one by one per client (`gc::Forgotten`); older ones fold
    /// into the client's floor, below which every message is dropped.
    pub forgotten_window: usize,
    /// Most executed dots kept for peers that have not acknowledged them; a peer further
    /// behind is cut off (only a crashed peer gets that far behind).
    pub executed_log_max: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            fast_quorum: FastQuorumChoice::Closest,
            promise_interval_ns: 1_000_000,
            tick_ns: 1_000_000,
            recovery_timeout_ns: 10_000_000,
            client_retry_ns: 40_000_000,
            suspect_timeout_ns: 20_000_000,
            bump: true,
            promise_batch_max: 4096,
            promise_log_max: 2_000_000,
            instances_max: 4_000_000,
            keys_max: 4_000_000,
            client_window: 65_536,
            clients_max: 65_536,
            forgotten_window: 1024,
            executed_log_max: 2_000_000,
        }
    }
}

impl Config {
    /// Rejects options no node can run with.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("promise_interval_ns", self.promise_interval_ns),
            ("tick_ns", self.tick_ns),
            ("recovery_timeout_ns", self.recovery_timeout_ns),
            ("client_retry_ns", self.client_retry_ns),
            ("suspect_timeout_ns", self.suspect_timeout_ns),
            ("promise_batch_max", self.promise_batch_max as u64),
            ("promise_log_max", self.promise_log_max as u64),
            ("instances_max", self.instances_max as u64),
            ("keys_max", self.keys_max as u64),
            ("client_window", self.client_window as u64),
            ("clients_max", self.clients_max as u64),
            ("forgotten_window", self.forgotten_window as u64),
            ("executed_log_max", self.executed_log_max as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("tempo: {name} must be positive"));
        }
        Ok(())
    }

    /// The time-outs stretched by the topology's largest round trip, so that a WAN does not
    /// trigger recoveries and retries that a LAN would need.
    pub fn scaled(&self, topology: &Topology) -> Config {
        Config {
            recovery_timeout_ns: topology.stretched(self.recovery_timeout_ns, 3),
            client_retry_ns: topology.stretched_for_clients(self.client_retry_ns, 5),
            suspect_timeout_ns: topology.stretched(self.suspect_timeout_ns, 2),
            ..self.clone()
        }
    }
}

/// Timers of Tempo.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Replica: send the promise log to the peers.
    Promises,
    /// Replica: recover commands stuck too long, ask for missing commits.
    Tick,
    /// Client: the request went unanswered; submit a new attempt.
    ClientRetry,
}

/// A deliberate bug, for the canaries (`canary.rs`). Always `None` in the real protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "canary"), allow(dead_code))]
pub(crate) enum Flaw {
    /// The protocol as designed.
    None,
    /// A timestamp is declared stable once any single process promised up to it.
    MinorityStability,
    /// Recovery ballots computed with floor division: a first recovery uses ballot `rank + 1`,
    /// which may equal an initial coordinator's ballot (spec §6.4).
    LowRecoveryBallot,
    /// Garbage collection forgets a command once all replicas of the shard but one executed
    /// it (`gc.rs`).
    EarlyForget,
}

impl Protocol for Tempo {
    const NAME: &'static str = "tempo";
    const SUMMARY: &'static str = "Tempo: leaderless, timestamp stability, partial replication, recovery";
    type Message = messages::Message;
    type Timer = Timer;
    type Durable = ();
    type Config = Config;
    type Observation = gc::Observation;

    fn has_fast_path() -> bool {
        true
    }

    fn supports_shards() -> bool {
        true
    }

    /// A replica forgets a command only once every replica of its shard executed it.
    fn global_checker() -> Option<Box<dyn GlobalChecker<Self>>> {
        Some(Box::new(gc::GcChecker::default()))
    }

    /// Crash-stop, as the paper (§2): a restarted replica retires (`replica::Life`).
    fn crash_model() -> CrashModel {
        CrashModel::Stop
    }

    /// A hundred times the simulator's. Under `redis-benchmark -c 50 -P 16` on a 2-core host
    /// the simulator's started about 40,000 command recoveries in 17 s (17.8k SET/s; 21.9k and
    /// none with ten times); and a command carrying a 16 MiB value takes a few hundred
    /// milliseconds to commit, so with 100 ms every such SET was recovered (its payload sent
    /// again to every replica) until it timed out (issue 20).
    fn runtime_defaults() -> &'static [(&'static str, u64)] {
        &[("recovery_timeout_ns", 1_000_000_000), ("suspect_timeout_ns", 2_000_000_000)]
    }

    /// `retired`: a campaign must restart a crashed replica and see it stay out.
    fn coverage_goals() -> &'static [&'static str] {
        &["recovery", "retired"]
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        config.validate()
    }

    /// The only durable record is a replica's boot marker (`()`): a replica that finds it
    /// restarted after a crash and stays down (`replica::Life`).
    fn new_node(context: NodeContext<Self>, durable: Vec<()>) -> Box<dyn Node<Self>> {
        match context.role() {
            Role::Client => Box::new(client::Client::new(context)),
            _ => Box::new(replica::Replica::new(context, Flaw::None, replica::Boot::from_durable(&durable))),
        }
    }
}
