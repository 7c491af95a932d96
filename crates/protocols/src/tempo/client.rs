//! The client: the paper's submitter (Algorithm 1 line 1–4, §4). It splits a command by shard,
//! sends each part to a coordinator of that shard (`I_c^i`: "a responsive replica of p close
//! to i", §4), and merges the shards' results in key order. Per shard, the client ranks the
//! replicas by distance once (replicas equally close are taken in an order that depends on the
//! client, so that the clients of one site spread over that site's replicas), starts at the
//! closest, and keeps the replica that last answered it: a request that times out is submitted
//! again to the next replica of the ranking, and later requests go straight to whichever
//! replica answered. A retry is a new attempt (a new dot) coordinated elsewhere; replicas run
//! each request once whatever the attempts. Since each attempt is proposed in full, a large
//! command waits longer, more with each attempt (`client_pipeline::large_command_wait`).

use super::messages::{Dot, Message};
use super::{Config, Tempo, Timer};
use crate::client_pipeline::large_command_wait;
use ordo_core::{
    ClientId, ClockReading, Command, CommandResult, Key, Node, NodeContext, NodeId, NodeStats, Outbox, RequestId,
    Submission, Topology, Value,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How the shards' results make the command's result.
#[derive(Debug)]
enum Merge {
    /// One shard: its result as is.
    Single,
    /// MGET: values in the order of the keys, each from (shard, position in its part).
    Values(Vec<(u32, usize)>),
    /// MSET: OK once every shard did its part.
    Ok,
    /// DEL / EXISTS: the sum of the counts.
    Sum,
}

/// A command split by shard.
#[derive(Debug)]
pub struct Split {
    /// (shard, that shard's part), by shard.
    pub parts: Vec<(u32, Command)>,
    merge: Merge,
}

/// Redis Cluster's answer to a command whose keys live in several shards, which ordo gives for
/// the commands it cannot split: a transaction (and WATCH's version read) must decide, and
/// abort, at one point of one shard's order (and MSETNX its all-or-nothing, RENAME its move).
pub const CROSS_SHARD: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Tempo's answer to a command over the whole keyspace (KEYS, SCAN, DBSIZE, FLUSHALL,
/// RANDOMKEY, or a transaction holding one). Tempo orders commands per key: per-key clocks,
/// promises and execution queues, and shards that never hear of one another's keys. A command
/// on every key would need a clock above every key's, a promise from every key of every shard
/// and a place in every key's queue, including keys that do not exist yet: a protocol of its
/// own, not an option of this one.
pub const KEYSPACE_REFUSED: &str = concat!(
    "ERR keyspace commands (KEYS, SCAN, DBSIZE, FLUSHDB, FLUSHALL, RANDOMKEY) ",
    "are not supported by Tempo, which orders commands per key"
);

/// Tempo's answer to a command that names no key: no shard, no clock, no queue would hold it.
pub const NO_KEY_REFUSED: &str = "ERR a command with no key cannot be ordered by Tempo";

/// Splits a command into one part per shard its keys fall in; a transaction, a WATCH, an
/// MSETNX, a SINTER/SUNION/SDIFF (or STORE) or an SMOVE over several shards is refused with
/// [`CROSS_SHARD`], a command over the whole keyspace with [`KEYSPACE_REFUSED`], a command
/// naming no key with [`NO_KEY_REFUSED`].
pub fn split(command: &Command, topology: &Topology) -> Result<Split, CommandResult> {
    if command.touches_every_key() {
        return Err(CommandResult::Error(KEYSPACE_REFUSED.into()));
    }
    // A stamped command splits as its inner command, and each part keeps the stamp.
    if let Command::Timed { now_ms, command } = command {
        let mut split = split(command, topology)?;
        split.parts = split.parts.into_iter().map(|(shard, part)| (shard, part.timed(*now_ms))).collect();
        return Ok(split);
    }
    let shard_of = |key: &Key| topology.shard_of(key) as u32;
    let mut shards: Vec<u32> = Vec::new();
    command.for_each_key(|key| shards.push(shard_of(key)));
    shards.sort_unstable();
    shards.dedup();
    let Some(&first) = shards.first() else {
        return Err(CommandResult::Error(NO_KEY_REFUSED.into()));
    };
    if shards.len() == 1 {
        let part = (first, command.clone());
        return Ok(Split { parts: vec![part], merge: Merge::Single });
    }
    let mut grouped: BTreeMap<u32, Vec<Key>> = BTreeMap::new();
    let mut positions: Vec<(u32, usize)> = Vec::new();
    let mut group = |key: &Key| {
        let shard = shard_of(key);
        let keys = grouped.entry(shard).or_default();
        positions.push((shard, keys.len()));
        keys.push(key.clone());
    };
    Ok(match command {
        Command::MGet { keys } => {
            keys.iter().for_each(&mut group);
            let parts = grouped.into_iter().map(|(s, keys)| (s, Command::MGet { keys })).collect();
            Split { parts, merge: Merge::Values(positions) }
        }
        Command::Del { keys } | Command::Exists { keys } | Command::ExpireSweep { keys } => {
            keys.iter().for_each(&mut group);
            let part = |keys| match command {
                Command::Del { .. } => Command::Del { keys },
                Command::Exists { .. } => Command::Exists { keys },
                _ => Command::ExpireSweep { keys },
            };
            let parts = grouped.into_iter().map(|(s, keys)| (s, part(keys))).collect();
            Split { parts, merge: Merge::Sum }
        }
        Command::MSet { pairs } => {
            let mut by_shard: BTreeMap<u32, Vec<(Key, Value)>> = BTreeMap::new();
            for (key, value) in pairs {
                by_shard.entry(shard_of(key)).or_default().push((key.clone(), value.clone()));
            }
            let parts = by_shard.into_iter().map(|(s, pairs)| (s, Command::MSet { pairs })).collect();
            Split { parts, merge: Merge::Ok }
        }
        Command::Transaction { .. } | Command::Versions { .. } | Command::MSetNx { .. } | Command::Rename { .. } => {
            return Err(CommandResult::Error(CROSS_SHARD.into()));
        }
        // Their result needs every set at once (and SMOVE is all or nothing), as in Redis Cluster.
        Command::SetAlgebra { .. } | Command::SetMove { .. } => return Err(CommandResult::Error(CROSS_SHARD.into())),
        other => unreachable!("{} touches one key", other.name()),
    })
}

/// The replicas of `shard`, closest to `client` first. Replicas equally close to the client as
/// the closest one (a client on a LAN, or at a site with several replicas of the shard) are
/// rotated by the client's node id, so that a site's clients spread their commands over them
/// instead of all coordinating at the first: Tempo is leaderless, and a shared first choice
/// would make that replica a leader in all but name (and the bottleneck of the CPU model).
pub(crate) fn ranking(topology: &Topology, client: NodeId, shard: usize) -> Vec<NodeId> {
    let replicas = topology.replicas_of(shard);
    let mut ranked = topology.closest(client, replicas, replicas.len());
    let Some(&nearest) = ranked.first() else { return ranked };
    let nearest_ns = topology.delay_ns(client, nearest);
    let ties = ranked.iter().take_while(|&&n| topology.delay_ns(client, n) == nearest_ns).count();
    assert!(ties >= 1, "the nearest replica ties with itself");
    ranked[..ties].rotate_left(client.index() % ties);
    assert_eq!(ranked.len(), replicas.len(), "every replica is ranked");
    ranked
}

impl Split {
    /// The command's result from every shard's result.
    pub fn merge(&self, results: &BTreeMap<u32, CommandResult>) -> CommandResult {
        assert_eq!(results.len(), self.parts.len(), "one result per shard");
        if let Some(error) = results.values().find(|r| matches!(r, CommandResult::Error(_))) {
            return error.clone();
        }
        match &self.merge {
            Merge::Single => results.values().next().expect("one").clone(),
            Merge::Ok => CommandResult::Ok,
            Merge::Sum => CommandResult::Integer(
                results.values().map(|r| if let CommandResult::Integer(n) = r { *n } else { 0 }).sum(),
            ),
            Merge::Values(positions) => CommandResult::Values(
                positions
                    .iter()
                    .map(|(shard, index)| match &results[shard] {
                        CommandResult::Values(values) => values.get(*index).cloned().flatten(),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

/// The request the client waits on.
struct Outstanding {
    op: u64,
    request: RequestId,
    attempt: u32,
    split: Split,
    /// Per part of `split`: the position in the shard's ranking of attempt 0's coordinator.
    first: Vec<usize>,
    results: BTreeMap<u32, CommandResult>,
}

/// A Tempo client.
pub struct Client {
    id: ClientId,
    topology: Arc<Topology>,
    config: Config,
    /// Per shard: its replicas, closest first (see the module comment for ties).
    rankings: Vec<Vec<NodeId>>,
    /// Per shard: the position in `rankings` of the replica that last answered us, where the
    /// next request starts. A replica that stops answering costs one retry time-out, not one
    /// per request.
    preferred: Vec<usize>,
    next_number: u64,
    outstanding: Option<Outstanding>,
    stats: NodeStats,
}

impl Client {
    /// A client with no request outstanding.
    pub fn new(context: NodeContext<Tempo>) -> Self {
        let config = context.config.scaled(&context.topology);
        let rankings: Vec<Vec<NodeId>> =
            (0..context.topology.shards.len()).map(|shard| ranking(&context.topology, context.id, shard)).collect();
        let preferred = vec![0; rankings.len()];
        Client {
            id: context.client_id(),
            topology: context.topology,
            config,
            rankings,
            preferred,
            next_number: 1,
            outstanding: None,
            stats: NodeStats::default(),
        }
    }

    /// The position in `shard`'s ranking of the coordinator of `attempt`, for a request whose
    /// attempt 0 went to position `first`: the next replica on each retry.
    fn position(&self, shard: u32, first: usize, attempt: u32) -> usize {
        let count = self.rankings[shard as usize].len();
        assert!(count > 0, "a shard has replicas");
        (first + attempt as usize % count) % count
    }

    fn send_attempt(&mut self, out: &mut Outbox<Tempo>) {
        let outstanding = self.outstanding.as_ref().expect("outstanding");
        let dot = Dot { request: outstanding.request, attempt: outstanding.attempt };
        let shards: Vec<u32> = outstanding.split.parts.iter().map(|(s, _)| *s).collect();
        let parts: Vec<Command> = outstanding.split.parts.iter().map(|(_, c)| c.clone()).collect();
        let coordinators: Vec<NodeId> = shards
            .iter()
            .zip(&outstanding.first)
            .map(|(&s, &first)| self.rankings[s as usize][self.position(s, first, dot.attempt)])
            .collect();
        for &to in &coordinators {
            let message = Message::Submit {
                dot,
                shards: shards.clone(),
                parts: parts.clone(),
                coordinators: coordinators.clone(),
            };
            out.send(to, message);
        }
        // A retry is a whole new proposal: give a large command time to arrive, more each time.
        let bytes: usize = parts.iter().map(Command::encoded_len).sum();
        let wait = self.config.client_retry_ns.saturating_add(large_command_wait(bytes, dot.attempt + 1));
        out.set_timer(Timer::ClientRetry, wait);
    }

    fn on_reply(
        &mut self,
        dot: Dot,
        shard: u32,
        result: CommandResult,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        let Some(outstanding) = &mut self.outstanding else { return Err("reply while nothing is outstanding") };
        if outstanding.request != dot.request {
            return Err("reply for a request no longer outstanding");
        }
        let Some(index) = outstanding.split.parts.iter().position(|(s, _)| *s == shard) else {
            return Err("reply from a shard the command does not access");
        };
        if dot.attempt > outstanding.attempt {
            return Err("reply for an attempt not yet made");
        }
        if outstanding.results.contains_key(&shard) {
            return Err("duplicate reply");
        }
        // The coordinator of the attempt that answered is responsive: start there next time.
        let first = outstanding.first[index];
        outstanding.results.insert(shard, result);
        let answered = self.position(shard, first, dot.attempt);
        self.preferred[shard as usize] = answered;
        let outstanding = self.outstanding.as_mut().expect("outstanding");
        if outstanding.results.len() < outstanding.split.parts.len() {
            return Ok(());
        }
        let result = outstanding.split.merge(&outstanding.results);
        out.complete(outstanding.op, result);
        out.cancel_timer(Timer::ClientRetry);
        self.outstanding = None;
        Ok(())
    }
}

impl Node<Tempo> for Client {
    fn on_start(&mut self, _now: ClockReading, _out: &mut Outbox<Tempo>) {}

    fn on_submit(&mut self, _now: ClockReading, submission: Submission, out: &mut Outbox<Tempo>) {
        // Refused before it takes a number: replicas never see a gap in a client's numbers.
        let split = match split(&submission.command, &self.topology) {
            Ok(split) => split,
            Err(refused) => return out.complete(submission.op, refused),
        };
        let request = RequestId { client: self.id, number: self.next_number };
        self.next_number += 1;
        let first: Vec<usize> = split.parts.iter().map(|(s, _)| self.preferred[*s as usize]).collect();
        assert!(first.iter().zip(&split.parts).all(|(&p, (s, _))| p < self.rankings[*s as usize].len()), "in range");
        self.outstanding =
            Some(Outstanding { op: submission.op, request, attempt: 0, split, first, results: BTreeMap::new() });
        self.send_attempt(out);
    }

    fn on_message(&mut self, _now: ClockReading, _from: NodeId, message: Message, out: &mut Outbox<Tempo>) {
        let handled = match message {
            Message::Reply { dot, shard, result } => self.on_reply(dot, shard, result, out),
            _ => Err("replica message sent to a client"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, _now: ClockReading, timer: Timer, out: &mut Outbox<Tempo>) {
        if timer != Timer::ClientRetry {
            return;
        }
        let Some(outstanding) = &mut self.outstanding else { return };
        // A new attempt elsewhere; results already gathered from some shards stay valid: each
        // shard runs the request once, whichever attempt gets there first.
        outstanding.attempt += 1;
        self.stats.count("client_retry");
        self.send_attempt(out);
    }

    fn check_invariants(&self) {
        if let Some(outstanding) = &self.outstanding {
            assert!(outstanding.request.number < self.next_number, "the outstanding request was numbered");
            assert!(outstanding.results.len() < outstanding.split.parts.len(), "a complete request is not outstanding");
            assert_eq!(outstanding.first.len(), outstanding.split.parts.len(), "one first coordinator per part");
        }
        assert_eq!(self.preferred.len(), self.rankings.len(), "one preferred replica per shard");
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let (number, attempt) = self.outstanding.as_ref().map_or((0, 0), |o| (o.request.number, o.attempt));
        format!("client {:?} next={} outstanding={} attempt={}", self.id, self.next_number, number, attempt)
    }
}
