//! Garbage collection of executed commands (not in the paper, whose footnote 2 collects only
//! promises). Each replica numbers the commands it executes and streams their dots to the peers
//! of its shard (`Executed`, reliable like `Promises`: sequence numbers and acknowledgements).
//! A replica forgets an instance once every replica of its shard has executed it, and keeps a
//! compact record of what it forgot ([`Forgotten`]) so that a late or duplicated message about
//! a forgotten command is dropped instead of bringing the command back.
//!
//! Why every replica of the shard: a replica that has not executed a command may still need
//! it — to answer its own `Help` or to finish a recovery (`Rec` needs `r − f` answers, and a
//! replica that forgot would answer as if it had never seen the command, letting a new
//! timestamp be chosen). Once every replica of the shard executed it, no replica of the shard
//! will ever ask. Replicas of the other shards of a multi-shard command may still ask for our
//! shard's timestamp (`Help`) or for our `MStable` (`Stable { waiting }`): the record keeps
//! the shard's timestamp of each forgotten dot so that both are still answered.

use super::messages::{Dot, Message};
use super::replica::{Phase, Replica};
use super::{Flaw, Tempo};
use ordo_core::{ClientId, GlobalChecker, NodeId, Outbox, Protocol};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Our executed dots as a reliable stream to each peer of our shard: dots in execution order,
/// numbered from `base`, and what each peer acknowledged; plus what we applied of each peer's.
#[derive(Debug)]
pub struct ExecutedLog {
    /// Sequence number of `dots[0]`.
    pub base: u64,
    /// Our executed dots not yet acknowledged by every peer.
    pub dots: VecDeque<Dot>,
    /// Per peer rank: the next sequence number it expects from us.
    pub acked: Vec<u64>,
    /// Per peer rank: the next sequence number we expect from it.
    pub expected: Vec<u64>,
}

impl ExecutedLog {
    /// An empty stream for a shard of `r` replicas.
    pub fn new(r: usize) -> Self {
        ExecutedLog { base: 0, dots: VecDeque::new(), acked: vec![0; r], expected: vec![0; r] }
    }

    /// Appends a dot we executed; beyond `limit` dots the oldest goes (see `trim`).
    pub fn push(&mut self, dot: Dot, limit: usize) {
        self.dots.push_back(dot);
        if self.dots.len() > limit {
            self.dots.pop_front();
            self.base += 1;
        }
        assert!(self.dots.len() <= limit, "the executed log is bounded");
    }

    /// One past the sequence number of our last executed dot.
    pub fn end(&self) -> u64 {
        self.base + self.dots.len() as u64
    }

    /// Drops what every peer (`rank` excluded, ourselves) acknowledged; beyond `limit` dots,
    /// drops anyway: only a crashed peer lags that far, and it will never report again.
    pub fn trim(&mut self, rank: usize, limit: usize) {
        let end = self.end();
        let everyone = self.acked.iter().enumerate().filter(|(peer, _)| *peer != rank).map(|(_, &a)| a).min();
        let mut drop_to = everyone.unwrap_or(end).max(self.base).min(end);
        drop_to = drop_to.max(end.saturating_sub(limit as u64));
        while self.base < drop_to {
            self.dots.pop_front();
            self.base += 1;
        }
        assert!(self.dots.len() <= limit, "the executed log is bounded");
    }
}

/// The dots this replica forgot, per client: every dot of a request below `floor`, and the
/// dots at or above it one by one, each with our shard's timestamp and the final one. A client runs one request
/// at a time, so its dots that are still alive are its latest few; older ones fold into the
/// floor once a client has more than `window` forgotten dots above it.
#[derive(Debug, Default)]
pub struct Forgotten {
    clients: BTreeMap<ClientId, ForgottenRow>,
    dots: usize,
}

#[derive(Debug, Default)]
struct ForgottenRow {
    /// Every dot of a request numbered below it counts as forgotten.
    floor: u64,
    /// (request number, attempt) at or above `floor` → its timestamps.
    dots: BTreeMap<(u64, u32), Stamps>,
}

/// The timestamps of a forgotten command: what a replica of another shard may still ask for
/// (our shard's), and what it ran at (the final one, the maximum over its shards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamps {
    /// Our shard's timestamp.
    pub shard: u64,
    /// The final timestamp.
    pub last: u64,
}

impl Forgotten {
    /// Was `dot` forgotten here (or folded below its client's floor)?
    pub fn contains(&self, dot: Dot) -> bool {
        self.clients.get(&dot.request.client).is_some_and(|row| {
            dot.request.number < row.floor || row.dots.contains_key(&(dot.request.number, dot.attempt))
        })
    }

    /// The timestamps of a forgotten dot, unless it was folded below the floor.
    pub fn stamps(&self, dot: Dot) -> Option<Stamps> {
        let row = self.clients.get(&dot.request.client)?;
        row.dots.get(&(dot.request.number, dot.attempt)).copied()
    }

    /// Records a forgotten dot with its timestamps, folding the client's oldest dots into its
    /// floor beyond `window`.
    pub fn insert(&mut self, dot: Dot, ts: Stamps, window: usize) {
        let row = self.clients.entry(dot.request.client).or_default();
        if dot.request.number < row.floor {
            return;
        }
        if row.dots.insert((dot.request.number, dot.attempt), ts).is_none() {
            self.dots += 1;
        }
        while row.dots.len() > window {
            let ((number, _), _) = row.dots.pop_first().expect("over the window");
            row.floor = row.floor.max(number + 1);
            self.dots -= 1;
        }
        let floor = row.floor;
        while row.dots.first_key_value().is_some_and(|(&(number, _), _)| number < floor) {
            row.dots.pop_first();
            self.dots -= 1;
        }
        assert!(row.dots.len() <= window, "a client's forgotten dots are bounded");
    }

    /// The dots held one by one with their timestamps, by client.
    pub fn iter(&self) -> impl Iterator<Item = (Dot, Stamps)> + '_ {
        self.clients.iter().flat_map(|(&client, row)| {
            row.dots.iter().map(move |(&(number, attempt), &stamps)| {
                (Dot { request: ordo_core::RequestId { client, number }, attempt }, stamps)
            })
        })
    }

    /// Dots held one by one (the floors hold the rest).
    pub fn len(&self) -> usize {
        self.dots
    }

    /// True when nothing was forgotten.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Clients with a row.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }
}

/// Facts a Tempo replica reports to the simulator's global checker ([`GcChecker`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The replica of `shard` executed the command (whether or not its request was a
    /// duplicate).
    Executed {
        /// The command.
        dot: Dot,
        /// The replica's shard.
        shard: u32,
    },
    /// The replica of `shard` (of `replicas` replicas) forgot the command.
    Forgotten {
        /// The command.
        dot: Dot,
        /// The replica's shard.
        shard: u32,
        /// Replicas in that shard.
        replicas: usize,
    },
}

/// Checks the garbage-collection rule across nodes: a replica forgets a command only after
/// every replica of its shard executed it, and never executes it again afterwards. (That it
/// never holds it again is asserted by the replica itself, in `Replica::instance`.)
#[derive(Default)]
pub struct GcChecker {
    /// Per command and shard: the replicas that executed it.
    executed: BTreeMap<(Dot, u32), BTreeSet<NodeId>>,
    /// Per command: the replicas that forgot it.
    forgotten: BTreeMap<Dot, BTreeSet<NodeId>>,
}

impl<P: Protocol<Observation = Observation>> GlobalChecker<P> for GcChecker {
    fn observe(&mut self, node: NodeId, observation: &Observation) -> Result<(), String> {
        match *observation {
            Observation::Executed { dot, shard } => {
                if self.forgotten.get(&dot).is_some_and(|nodes| nodes.contains(&node)) {
                    return Err(format!("{node:?} executed {dot:?} after forgetting it"));
                }
                self.executed.entry((dot, shard)).or_default().insert(node);
            }
            Observation::Forgotten { dot, shard, replicas } => {
                let executors = self.executed.get(&(dot, shard)).map_or(0, BTreeSet::len);
                if executors < replicas {
                    return Err(format!(
                        "{node:?} of shard {shard} forgot {dot:?} executed by {executors} of {replicas} replicas"
                    ));
                }
                self.forgotten.entry(dot).or_default().insert(node);
            }
        }
        Ok(())
    }
}

impl Replica {
    /// Sends each peer the part of our executed log it has not acknowledged, with our
    /// acknowledgement of its log; then forgets what every peer holds.
    pub(crate) fn send_executed(&mut self, out: &mut Outbox<Tempo>) {
        let end = self.gc.log.end();
        for rank in (0..self.r()).filter(|&rank| rank != self.rank) {
            let from = self.gc.log.acked[rank].max(self.gc.log.base);
            // A suspected peer gets only our acknowledgement, as with promises.
            let batch = if self.suspected(rank) { 0 } else { self.config.promise_batch_max };
            let count = ((end - from) as usize).min(batch);
            let start = (from - self.gc.log.base) as usize;
            let dots: Vec<Dot> = self.gc.log.dots.range(start..start + count).copied().collect();
            let message = Message::Executed { from_seq: from, dots, ack: self.gc.log.expected[rank] };
            out.send_durable(self.peers[rank], message);
        }
        self.gc.log.trim(self.rank, self.config.executed_log_max);
    }

    /// `Executed` from peer `rank`: note each dot it executed that we had not heard of yet.
    pub(crate) fn on_executed(
        &mut self,
        rank: usize,
        from_seq: u64,
        dots: Vec<Dot>,
        ack: u64,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if ack <= self.gc.log.end() {
            self.gc.log.acked[rank] = self.gc.log.acked[rank].max(ack);
        }
        let expected = self.gc.log.expected[rank];
        if from_seq > expected {
            return Err("executed dots after a gap");
        }
        let skip = (expected - from_seq) as usize;
        for &dot in dots.iter().skip(skip) {
            self.gc.log.expected[rank] += 1;
            self.note_executed_by(dot, rank, out);
        }
        Ok(())
    }

    /// Peer `rank` executed `dot`. A command we do not know yet is one we will learn (it was
    /// committed): keep the mark on an empty instance and ask about it if it stays unknown.
    fn note_executed_by(&mut self, dot: Dot, rank: usize, out: &mut Outbox<Tempo>) {
        if self.gc.forgotten.contains(dot) && !self.instances.contains_key(&dot) {
            self.stats.drop_input("executed report for a forgotten command");
            return;
        }
        let deadline = self.now_ns + self.config.recovery_timeout_ns;
        let Some(instance) = self.instance(dot) else { return };
        instance.executed_by |= 1 << rank;
        if instance.phase == Phase::Start {
            self.watch.entry(dot).or_insert(deadline);
        }
        self.maybe_forget(dot, out);
    }

    /// We executed `dot`: report it to the peers and to the checker.
    pub(crate) fn note_executed(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        let rank = self.rank;
        let instance = self.instances.get_mut(&dot).expect("an executed command is known");
        instance.executed_by |= 1 << rank;
        self.gc.log.push(dot, self.config.executed_log_max);
        out.observe(Observation::Executed { dot, shard: self.shard });
        self.maybe_forget(dot, out);
    }

    /// Forgets `dot` if every replica of our shard executed it (the flawed variant: all but
    /// one).
    fn maybe_forget(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        let Some(instance) = self.instances.get(&dot) else { return };
        let everyone = self.r() as u32;
        let needed = if self.flaw == Flaw::EarlyForget { everyone - 1 } else { everyone };
        if instance.phase != Phase::Execute || instance.executed_by.count_ones() < needed {
            return;
        }
        let shard = *instance.shard_ts.get(&self.shard).expect("an executed command has our shard's timestamp");
        let ts = Stamps { shard, last: instance.ts };
        self.instances.remove(&dot);
        self.watch.remove(&dot);
        self.gc.forgotten.insert(dot, ts, self.config.forgotten_window);
        self.stats.count("forgotten");
        out.observe(Observation::Forgotten { dot, shard: self.shard, replicas: self.r() });
    }

    /// A message about a command we forgot: drop it, answering the other shards' questions
    /// that only our shard's timestamp settles. `Some(reason)` when it is not to be handled.
    pub(crate) fn forgotten_guard(
        &mut self,
        from: NodeId,
        message: &Message,
        out: &mut Outbox<Tempo>,
    ) -> Option<&'static str> {
        let dot = message.dot()?;
        if self.instances.contains_key(&dot) || !self.gc.forgotten.contains(dot) {
            return None;
        }
        let other_shard = self.rank_of(from).is_none();
        match (message, self.gc.forgotten.stamps(dot)) {
            (Message::Help { .. }, Some(stamps)) if other_shard => {
                let t = stamps.shard;
                let commit = Message::Commit { dot, shard: self.shard, t, promises: Vec::new(), payload: None };
                out.send_durable(from, commit);
            }
            (Message::Stable { waiting: true, .. }, Some(_)) if other_shard => {
                out.send_durable(from, Message::Stable { dot, shard: self.shard, waiting: false });
            }
            _ => {}
        }
        Some("message about a forgotten command")
    }
}

/// The garbage collector's state at a replica: our executed stream and what we forgot.
#[derive(Debug)]
pub struct Gc {
    /// Our executed dots, streamed to the peers.
    pub log: ExecutedLog,
    /// What we forgot.
    pub forgotten: Forgotten,
}

impl Gc {
    /// The collector of a replica in a shard of `r`.
    pub fn new(r: usize) -> Self {
        assert!(r <= 64, "executed marks are a 64-bit set of ranks");
        Gc { log: ExecutedLog::new(r), forgotten: Forgotten::default() }
    }
}
