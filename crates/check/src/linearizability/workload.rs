//! Generated histories that are linearizable by construction, for tests.
//!
//! Each client runs operations back to back, or with up to `pipeline_depth` outstanding at once;
//! every operation that takes effect gets a linearization point inside its interval (ok) or
//! anywhere after its invocation (info, taken with even odds), and reads return what the store
//! holds at their point. A client with one operation at a time that gets an info is replaced by
//! one with a fresh id, as the format requires; a pipelining client names its operations by id
//! and carries on after an info.
//!
//! With [`Expiry`], every operation is stamped by its client's clock, which is off by a fixed
//! amount per client (so stamps do not grow in linearization order), some writes expire, and
//! clients also sweep and delete keys; reads then return what the model holds at their stamp.

use super::oracle::Store;
use super::witness::{Applied, Witness};
use crate::history::{EventKind, HistoryEvent, OpKind};
use std::collections::VecDeque;

/// A small deterministic generator (SplitMix64): tests must not depend on outside randomness.
pub(super) struct SplitMix(u64);

impl SplitMix {
    /// A generator from a seed.
    pub(super) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A number in `0..bound`.
    pub(super) fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// True with the given chance in percent.
    pub(super) fn percent(&mut self, chance: u64) -> bool {
        self.below(100) < chance
    }
}

/// The shape of a generated history.
pub(super) struct Workload {
    pub(super) clients: u64,
    pub(super) keys: u64,
    pub(super) operations: usize,
    pub(super) seed: u64,
    /// Chances in percent of each op kind; the rest are reads.
    pub(super) write_percent: u64,
    pub(super) append_percent: u64,
    /// Chances in percent of each outcome; the rest are ok.
    pub(super) fail_percent: u64,
    pub(super) info_percent: u64,
    /// Most operations a client has outstanding at once; above 1 its events carry ids.
    pub(super) pipeline_depth: usize,
    /// Key expiry; `None` gives histories without stamps, as before expiry was modelled.
    pub(super) expiry: Option<Expiry>,
}

/// How a generated workload uses key expiry.
pub(super) struct Expiry {
    /// Chance in percent that a write sets an expiry.
    pub(super) expiring_percent: u64,
    /// Chances in percent of expires and deletes, taken from the reads' share.
    pub(super) expire_percent: u64,
    pub(super) delete_percent: u64,
    /// Most a client's clock is off, in ms.
    pub(super) skew_ms_max: u64,
    /// Longest time to live of an expiring write, in ms.
    pub(super) ttl_ms_max: u64,
}

/// Simulated nanoseconds per millisecond of the stamps: small, so that keys expire within the
/// span of a few operations.
const NS_PER_MS: u64 = 100;

/// One generated operation before it becomes events.
struct Planned {
    client: u64,
    id: Option<u64>,
    op: OpKind,
    key: String,
    value: Option<String>,
    invoke_ns: u64,
    completion_ns: u64,
    outcome: EventKind,
    /// When it takes effect, if it does.
    point_ns: Option<u64>,
    at_ms: Option<u64>,
    expires_ms: Option<u64>,
}

impl Workload {
    /// Generates the history's events, in an order valid for the format.
    pub(super) fn generate(&self) -> Vec<HistoryEvent> {
        self.generate_with_witness().0
    }

    /// The history's events, and the order in which the store applied each key's updates: the
    /// witness a simulator would offer.
    pub(super) fn generate_with_witness(&self) -> (Vec<HistoryEvent>, Witness) {
        self.generate_by(StoreClock::Stamp)
    }

    /// The history and order of a store that decides expiry by `clock` (a broken one unless
    /// [`StoreClock::Stamp`]): the same operations and stamps, but what reads return and what
    /// sweeps and appends find expired follow that store. Negative controls for the checker.
    pub(super) fn generate_by(&self, clock: StoreClock) -> (Vec<HistoryEvent>, Witness) {
        let mut random = SplitMix::new(self.seed);
        let mut planned = self.plan(&mut random);
        let witness = resolve_reads(&mut planned, clock);
        (events_of(&planned), witness)
    }

    fn plan(&self, random: &mut SplitMix) -> Vec<Planned> {
        let per_client = self.operations.div_ceil(self.clients as usize);
        let mut next_client = self.clients;
        let mut planned = Vec::with_capacity(self.operations);
        assert!(self.pipeline_depth >= 1, "a client has room for at least one operation");
        let pipelined = self.pipeline_depth > 1;
        for lane in 0..self.clients {
            let mut client = lane;
            let mut time_ns = random.below(100);
            // The lane's clock offset, kept by the clients replacing it (the same machine).
            let offset_ms = self.expiry.as_ref().map_or(0, |expiry| random.below(2 * expiry.skew_ms_max + 1));
            // Completions of the lane's latest invocations: once the window is full, the next
            // invocation waits for the oldest, so at most `pipeline_depth` are ever outstanding.
            let mut window: VecDeque<u64> = VecDeque::with_capacity(self.pipeline_depth);
            for _ in 0..per_client.min(self.operations - planned.len()) {
                if window.len() == self.pipeline_depth {
                    time_ns = time_ns.max(window.pop_front().expect("the window is full"));
                }
                let mut operation = self.plan_one(random, client, time_ns, planned.len());
                self.stamp(random, &mut operation, offset_ms);
                time_ns = operation.invoke_ns;
                window.push_back(operation.completion_ns);
                if pipelined {
                    operation.id = Some(planned.len() as u64);
                } else if operation.outcome == EventKind::Info {
                    client = next_client;
                    next_client += 1;
                }
                planned.push(operation);
            }
        }
        planned
    }

    fn plan_one(&self, random: &mut SplitMix, client: u64, after_ns: u64, number: usize) -> Planned {
        let invoke_ns = after_ns + random.below(50);
        let duration_ns = 1 + random.below(1000);
        let completion_ns = invoke_ns + duration_ns;
        let (op, value) = self.pick_op(random, number);
        let roll = random.below(100);
        let (outcome, point_ns) = if roll < self.fail_percent {
            (EventKind::Fail, None)
        } else if roll < self.fail_percent + self.info_percent {
            let point_ns = random.percent(50).then(|| invoke_ns + random.below(10 * duration_ns));
            (EventKind::Info, point_ns)
        } else {
            (EventKind::Ok, Some(invoke_ns + random.below(duration_ns + 1)))
        };
        let key = format!("k{}", random.below(self.keys));
        Planned {
            client,
            id: None,
            op,
            key,
            value,
            invoke_ns,
            completion_ns,
            outcome,
            point_ns,
            at_ms: None,
            expires_ms: None,
        }
    }

    fn pick_op(&self, random: &mut SplitMix, number: usize) -> (OpKind, Option<String>) {
        let roll = random.below(100);
        let (expire_percent, delete_percent) =
            self.expiry.as_ref().map_or((0, 0), |expiry| (expiry.expire_percent, expiry.delete_percent));
        let mut bound = self.write_percent;
        if roll < bound {
            return (OpKind::Write, Some(format!("w{number}")));
        }
        bound += self.append_percent;
        if roll < bound {
            return (OpKind::Append, Some(format!(".{number}")));
        }
        bound += expire_percent;
        if roll < bound {
            return (OpKind::Expire, None);
        }
        bound += delete_percent;
        if roll < bound { (OpKind::Delete, None) } else { (OpKind::Read, None) }
    }

    /// Stamps the operation with its client's clock at its invocation, and gives some writes an
    /// expiry after a random time to live.
    fn stamp(&self, random: &mut SplitMix, operation: &mut Planned, offset_ms: u64) {
        let Some(expiry) = &self.expiry else { return };
        let at_ms = operation.invoke_ns / NS_PER_MS + offset_ms;
        operation.at_ms = Some(at_ms);
        if operation.op == OpKind::Write && random.percent(expiry.expiring_percent) {
            operation.expires_ms = Some(at_ms + random.below(expiry.ttl_ms_max + 1));
        }
    }
}

/// Which time a generated store decides expiry by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StoreClock {
    /// The command's stamp, as the model (and ordo's store) requires.
    Stamp,
    /// None: the store ignores stamps, so no key ever expires for it (a broken store).
    Ignored,
    /// The store's own clock when it applies the command, the true time of the operation's
    /// point, instead of the stamp (a broken store: replicas deciding by their clocks).
    Own,
}

/// Runs the operations that take effect in the order of their points; reads get the value,
/// with expiry decided by `clock`. Returns the order of the updates.
fn resolve_reads(planned: &mut [Planned], clock: StoreClock) -> Witness {
    let mut order: Vec<(u64, usize)> =
        planned.iter().enumerate().filter_map(|(index, operation)| Some((operation.point_ns?, index))).collect();
    order.sort_unstable();
    let mut store = Store::default();
    let mut witness = Witness::default();
    for (_, index) in order {
        let operation = &mut planned[index];
        let at_ms = match clock {
            StoreClock::Stamp => operation.at_ms,
            StoreClock::Ignored => None,
            StoreClock::Own => operation.at_ms.and(operation.point_ns.map(|point_ns| point_ns / NS_PER_MS)),
        };
        let value = || operation.value.clone().unwrap_or_default();
        let applied = match operation.op {
            OpKind::Read => {
                operation.value = store.read(&operation.key, at_ms);
                continue;
            }
            OpKind::Write => Applied::Write(value()),
            OpKind::Append => Applied::Append(value()),
            OpKind::Expire => Applied::Expire(operation.at_ms),
            OpKind::Delete => Applied::Delete,
        };
        witness.effects.entry(operation.key.clone()).or_default().push(applied);
        store.update(operation.op, &operation.key, operation.value.as_deref(), at_ms, operation.expires_ms);
    }
    witness
}

/// The events of the operations, sorted by time; at equal times completions come first, so a
/// client's completion precedes its next invocation.
fn events_of(planned: &[Planned]) -> Vec<HistoryEvent> {
    let mut events = Vec::with_capacity(2 * planned.len());
    for operation in planned {
        let invoke_value = if operation.op == OpKind::Read { None } else { operation.value.clone() };
        let completion_value = match (operation.op, operation.outcome) {
            (OpKind::Read, EventKind::Ok) | (OpKind::Write | OpKind::Append, _) => operation.value.clone(),
            _ => None,
        };
        // Completions repeat the stamps, as the format allows.
        let event = |kind, time_ns, value| HistoryEvent {
            client: operation.client,
            id: operation.id,
            kind,
            time_ns,
            op: operation.op,
            key: operation.key.clone(),
            value,
            at_ms: operation.at_ms,
            expires_ms: operation.expires_ms,
        };
        events.push(event(EventKind::Invoke, operation.invoke_ns, invoke_value));
        events.push(event(operation.outcome, operation.completion_ns, completion_value));
    }
    events.sort_by_key(|event| (event.time_ns, event.kind == EventKind::Invoke));
    events
}
