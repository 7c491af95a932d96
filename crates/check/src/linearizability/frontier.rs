//! The frontier search over one key's operations ("just-in-time" linearization).
//!
//! A configuration is a state of the key plus the set of open operations it has already
//! linearized. The search walks the key's steps in time order, keeping every configuration that
//! explains the history so far:
//!
//! - invoke: the operation joins the open set. A read is linearized at once in every
//!   configuration whose state it matches (see "greedy reads" below).
//! - ok completion of X: every configuration must linearize X now. From each one, the search
//!   tries every sequence of open, not yet linearized updates (writes, appends, expires and
//!   deletes) that ends with X; a read X ends the sequence as soon as the state matches it. X
//!   then leaves the open set.
//! - retire (info or unfinished operations only): the operation leaves the open set unapplied,
//!   at a time after which no read could observe it (see `super::prepare`).
//!
//! Two reductions keep the set small, both sound:
//!
//! - Greedy reads: a read does not change the state, so linearizing an open read the moment the
//!   state matches it is never worse than waiting; reads never need to be branched on. Expiry
//!   does not change this: whether a read matches depends on the state and the read's own
//!   stamp, never on when it is linearized.
//! - Dominance: configuration A makes B redundant when both have the same state, A has only
//!   linearized extra reads, and B has only linearized extra optional (info) operations. Then
//!   any way B can continue, A can continue the same way. (A rule that drops any configuration
//!   with a larger linearized set is NOT sound: an ok write that one configuration has already
//!   applied must still be applied by the other, which changes its state later.)
//!
//! And one equivalence, for keys with expiring writes: once every read and append that can
//! still be linearized on the key is stamped after a state's expiry, that state behaves exactly
//! like the absent key: reads return `null`, appends start afresh, writes and deletes ignore it
//! anyway, and a sweep leaves either the absent key or the same state, equivalent still. So
//! the search replaces it by the absent key (see [`Search::horizons`]). Without this, every lost
//! expiring write (which stays open while reads of `null` could observe it, see
//! `observers.rs`) would leave its own long-expired state in the frontier, never merging with
//! the others.

use super::ReportedState;
use super::slots::SlotSet;
use super::state::{KeyState, Piece};
use crate::fixed_hash::{FixedHashMap, FixedHashSet};
use std::cmp::Reverse;
use std::rc::Rc;

/// What an operation does to the key, prepared for the model. `at_ms` is the operation's stamp
/// (see [`KeyState::expired_at`]).
pub(super) enum Effect {
    /// A read that returned `expected` (`None` = absent).
    Read { expected: Option<Rc<Piece>>, at_ms: Option<u64> },
    /// A write, holding the state it leaves, which every configuration applying it shares.
    Write(KeyState),
    /// An append of the piece.
    Append { piece: Rc<Piece>, at_ms: Option<u64> },
    /// The store's sweep: removes the key if it has expired at `at_ms`.
    Expire { at_ms: Option<u64> },
    /// Removes the key.
    Delete,
}

impl Effect {
    /// The state after the update (a read leaves it as it is).
    pub(super) fn apply(&self, state: &KeyState) -> KeyState {
        match self {
            Effect::Read { .. } => state.clone(),
            Effect::Write(written) => written.clone(),
            Effect::Append { piece, at_ms } => state.appended(piece, *at_ms),
            Effect::Expire { at_ms } => state.swept(*at_ms),
            Effect::Delete => KeyState::ABSENT,
        }
    }

    /// Whether a read would be legal in `state`; `None` when this is not a read.
    fn read_matches(&self, state: &KeyState) -> Option<bool> {
        match self {
            Effect::Read { expected, at_ms } => Some(state.matches(expected.as_deref(), *at_ms)),
            _ => None,
        }
    }
}

/// One operation of the key, as the search sees it.
pub(super) struct KeyOperation {
    /// Index of the operation among the history's paired operations, for reports.
    pub(super) source: usize,
    /// What it does.
    pub(super) effect: Effect,
    /// Info and unfinished operations: they may take effect once, or never.
    pub(super) optional: bool,
    /// Its slot while open, assigned from the schedule of steps.
    pub(super) slot: usize,
}

impl KeyOperation {
    /// The stamp that bounds the search's horizon (see [`Search::horizons`]): for a read or an
    /// append, its stamp, or 0 when unstamped (it then sees nothing expired, exactly as one
    /// stamped before every expiry would). `u64::MAX` for the others: writes and deletes never
    /// look at expiry, and a sweep maps an absent or expired-for-the-horizon state to one of the
    /// two, so the equivalence survives it whatever its stamp.
    fn horizon_stamp_ms(&self) -> u64 {
        match &self.effect {
            Effect::Read { at_ms, .. } | Effect::Append { at_ms, .. } => at_ms.unwrap_or(0),
            Effect::Write(_) | Effect::Delete | Effect::Expire { .. } => u64::MAX,
        }
    }
}

/// What happens at a step. The order matters: at equal times invokes come first, so that an
/// operation invoked at the very time another completes counts as concurrent with it; retires
/// come last, after every completion that could still observe the retired operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum StepKind {
    /// The operation is invoked.
    Invoke,
    /// The operation completes with ok.
    Complete,
    /// The optional operation can no longer be observed.
    Retire,
}

/// One moment of the key's history; steps are processed sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Step {
    /// When.
    pub(super) time_ns: u64,
    /// What.
    pub(super) kind: StepKind,
    /// Which operation (index into the key's operations).
    pub(super) operation: usize,
}

/// Why a key's search stopped.
pub(super) enum Failure {
    /// No configuration could linearize `operation` at its completion.
    Stuck {
        /// The key operation that could not be linearized.
        operation: usize,
        /// The distinct states the frontier held just before, for the report.
        states: Vec<ReportedState>,
        /// The other key operations open at that moment.
        open: Vec<usize>,
    },
    /// A configuration limit was exceeded.
    TooComplex,
}

/// A state of the key and the open operations linearized to reach it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Config<const WORDS: usize> {
    state: KeyState,
    done: SlotSet<WORDS>,
}

/// Above this many sets with one state met in one exploration, only exact duplicates are
/// removed: the pairwise dominance test would cost more than the redundant configurations it
/// saves.
const DOMINANCE_GROUP_MAX: usize = 256;
/// Most dominance tests when pruning one state's sets of the frontier (as many as a group of
/// [`DOMINANCE_GROUP_MAX`] sets would take at worst); past them only duplicates are removed.
const DOMINANCE_COMPARISONS_MAX: usize = DOMINANCE_GROUP_MAX * DOMINANCE_GROUP_MAX;
/// Up to this many configurations are pruned pairwise; more are grouped by state first.
const SMALL_FRONTIER_MAX: usize = 16;
/// How many distinct states a report lists.
const REPORTED_STATES_MAX: usize = 16;

/// Bounds on one key's search (see `CheckOptions`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Largest frontier.
    pub configurations_max: usize,
    /// Most configurations explored in one completion step.
    pub explored_per_step_max: usize,
}

/// The search over one key. `WORDS` sizes the slot sets (see [`SlotSet`]).
pub(super) struct Search<'a, const WORDS: usize> {
    operations: &'a [KeyOperation],
    frontier: Vec<Config<WORDS>>,
    /// Open updates (writes, appends, expires, deletes), the operations a sequence may apply.
    open_updates: Vec<usize>,
    /// Their slots, so that an exploration finds the updates a configuration may apply with a
    /// few word operations.
    update_slots: SlotSet<WORDS>,
    /// Open ok reads, linearized greedily.
    open_reads: Vec<usize>,
    /// Slots of the open reads.
    reads: SlotSet<WORDS>,
    /// Slots of the open optional operations.
    optional: SlotSet<WORDS>,
    limits: Limits,
    configurations_peak: usize,
    scratch: Scratch<WORDS>,
    /// States expiring before this stamp are the absent key for the rest of the current step
    /// (see [`Search::horizons`]); 0 when no state may be replaced.
    horizon_ms: u64,
    /// The same for the steps after the current one, which the step's results are kept for.
    horizon_after_ms: u64,
    /// Whether the key has updates that may leave a state unchanged (an expiring write, a
    /// sweep, a delete), which [`Self::absorbable`] then looks for.
    absorbs_no_ops: bool,
    /// On keys with expiring writes, when each optional operation retires (`u64::MAX` for the
    /// others); empty otherwise.
    retire_ns: Vec<u64>,
}

/// Buffers one completion step needs, kept between steps.
struct Scratch<const WORDS: usize> {
    results: Vec<Config<WORDS>>,
    queue: Vec<Config<WORDS>>,
    seen: Seen<WORDS>,
}

impl<const WORDS: usize> Default for Scratch<WORDS> {
    fn default() -> Self {
        Scratch { results: Vec::new(), queue: Vec::new(), seen: Seen::default() }
    }
}

impl<'a, const WORDS: usize> Search<'a, WORDS> {
    /// A search starting from the absent key.
    pub(super) fn new(operations: &'a [KeyOperation], limits: Limits) -> Self {
        assert!(limits.configurations_max > 0, "a search needs room for at least one configuration");
        Search {
            operations,
            frontier: vec![Config { state: KeyState::ABSENT, done: SlotSet::empty() }],
            open_updates: Vec::new(),
            update_slots: SlotSet::empty(),
            open_reads: Vec::new(),
            reads: SlotSet::empty(),
            optional: SlotSet::empty(),
            limits,
            configurations_peak: 1,
            scratch: Scratch::default(),
            horizon_ms: 0,
            horizon_after_ms: 0,
            retire_ns: Vec::new(),
            absorbs_no_ops: operations.iter().any(|operation| match &operation.effect {
                Effect::Write(state) => state.expires_ms().is_some(),
                Effect::Expire { .. } | Effect::Delete => true,
                Effect::Read { .. } | Effect::Append { .. } => false,
            }),
        }
    }

    /// Runs the steps (sorted); returns the largest frontier seen.
    pub(super) fn run(mut self, steps: &[Step]) -> Result<usize, Failure> {
        debug_assert!(steps.is_sorted());
        let horizons = self.horizons(steps);
        if !horizons.is_empty() {
            self.retire_ns = vec![u64::MAX; self.operations.len()];
            for step in steps.iter().filter(|step| step.kind == StepKind::Retire) {
                self.retire_ns[step.operation] = step.time_ns;
            }
        }
        for (index, step) in steps.iter().enumerate() {
            if !horizons.is_empty() {
                (self.horizon_ms, self.horizon_after_ms) = (horizons[index], horizons[index + 1]);
            }
            match step.kind {
                StepKind::Invoke => self.on_invoke(step.operation),
                StepKind::Complete => self.on_complete(step.operation)?,
                StepKind::Retire => self.on_retire(step.operation)?,
            }
        }
        debug_assert!(self.open_updates.is_empty() && self.open_reads.is_empty());
        Ok(self.configurations_peak)
    }

    /// For each step, the smallest stamp (see [`KeyOperation::horizon_stamp_ms`]) among the
    /// operations that can still be linearized during or after it: those whose completion
    /// or retirement is that step or later. One entry more for after the last step. It never
    /// decreases: operations only leave that set. Empty when no write of the key expires, so
    /// that keys without expiry pay nothing.
    fn horizons(&self, steps: &[Step]) -> Vec<u64> {
        let expiring = |operation: &KeyOperation| matches!(&operation.effect, Effect::Write(state) if state.expires_ms().is_some());
        if !self.operations.iter().any(expiring) {
            return Vec::new();
        }
        let mut horizons = vec![u64::MAX; steps.len() + 1];
        for (index, step) in steps.iter().enumerate().rev() {
            horizons[index] = horizons[index + 1];
            if step.kind != StepKind::Invoke {
                horizons[index] = horizons[index].min(self.operations[step.operation].horizon_stamp_ms());
            }
        }
        horizons
    }

    /// The frontier after a completion or a retirement: `configs` reduced by the equivalences
    /// of the module's header, then pruned. Leaves `configs` empty.
    fn settle(&mut self, configs: &mut Vec<Config<WORDS>>) -> Vec<Config<WORDS>> {
        if !self.retire_ns.is_empty() {
            self.drop_dead_sweeps(configs);
            for config in configs.iter_mut() {
                if config.state.expires_ms().is_some_and(|expires_ms| expires_ms < self.horizon_after_ms) {
                    config.state = KeyState::ABSENT;
                }
            }
            let groups = Interchangeable::new(&self.interchangeable(self.horizon_after_ms));
            configs.iter_mut().for_each(|config| groups.rename(&mut config.done));
        }
        self.prune(configs)
    }

    /// The groups of [`Self::interchangeable`] for the current step's explorations.
    fn interchangeable_now(&self) -> Interchangeable<WORDS> {
        let groups = if self.retire_ns.is_empty() { Vec::new() } else { self.interchangeable(self.horizon_ms) };
        Interchangeable::new(&groups)
    }

    /// Closes the open optional sweeps stamped at or before the horizon: every state the
    /// search keeps from now on expires at or after the horizon (or never), so such a sweep can
    /// never remove anything again, and never applying it is as good as applying it.
    fn drop_dead_sweeps(&mut self, configs: &mut [Config<WORDS>]) {
        let horizon_ms = self.horizon_after_ms;
        let operations = self.operations;
        let dead = |&update: &usize| {
            let operation = &operations[update];
            operation.optional
                && matches!(operation.effect, Effect::Expire { at_ms: Some(at_ms) } if at_ms <= horizon_ms)
        };
        for update in self.open_updates.iter().copied().filter(dead).collect::<Vec<_>>() {
            let slot = operations[update].slot;
            configs.iter_mut().for_each(|config| config.done.remove(slot));
            self.optional.remove(slot);
            self.open_updates.retain(|&open| open != update);
            self.update_slots.remove(slot);
        }
    }

    /// The open optional updates that are interchangeable from now on, in groups of two or more
    /// (each sorted by slot): those that make the key absent whatever it holds (deletes, and
    /// writes whose state the horizon has made equivalent to the absent key) and retire at the
    /// same time. Two configurations that differ only in which members of a group they applied
    /// have exactly the same futures (each can use the other's member in its place), so
    /// [`Self::settle`] names the applied ones canonically: the lowest slots of the group.
    fn interchangeable(&self, horizon_ms: u64) -> Vec<Vec<usize>> {
        let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
        for &update in &self.open_updates {
            let operation = &self.operations[update];
            let removes = match &operation.effect {
                Effect::Delete => true,
                Effect::Write(state) => state.expires_ms().is_some_and(|expires_ms| expires_ms < horizon_ms),
                _ => false,
            };
            if !operation.optional || !removes {
                continue;
            }
            let retire_ns = self.retire_ns[update];
            match groups.iter_mut().find(|(group_ns, _)| *group_ns == retire_ns) {
                Some((_, slots)) => slots.push(operation.slot),
                None => groups.push((retire_ns, vec![operation.slot])),
            }
        }
        groups.retain(|(_, slots)| slots.len() > 1);
        groups
            .into_iter()
            .map(|(_, mut slots)| {
                slots.sort_unstable();
                slots
            })
            .collect()
    }

    fn on_invoke(&mut self, operation: usize) {
        let key_operation = &self.operations[operation];
        let slot = key_operation.slot;
        debug_assert!(self.frontier.iter().all(|config| !config.done.contains(slot)), "slot {slot} reused while held");
        if key_operation.optional {
            self.optional.insert(slot);
        }
        if !matches!(key_operation.effect, Effect::Read { .. }) {
            self.open_updates.push(operation);
            self.update_slots.insert(slot);
            return;
        }
        self.open_reads.push(operation);
        self.reads.insert(slot);
        for config in &mut self.frontier {
            if key_operation.effect.read_matches(&config.state) == Some(true) {
                config.done.insert(slot);
            }
        }
    }

    fn on_complete(&mut self, operation: usize) -> Result<(), Failure> {
        let slot = self.operations[operation].slot;
        debug_assert!(!self.operations[operation].optional);
        // The buffers are reused from step to step: allocation dominated the profile otherwise.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.results.clear();
        let mut budget = self.limits.explored_per_step_max;
        let groups = self.interchangeable_now();
        for config in &self.frontier {
            if config.done.contains(slot) {
                scratch.results.push(config.clone());
            } else if groups.is_empty() {
                self.explore(config, operation, &groups, &mut scratch, &mut budget)?;
            } else {
                let mut start = config.clone();
                groups.rename(&mut start.done);
                self.explore(&start, operation, &groups, &mut scratch, &mut budget)?;
            }
        }
        if scratch.results.is_empty() {
            return Err(self.stuck(operation));
        }
        self.frontier = self.settle(&mut scratch.results);
        self.scratch = scratch;
        debug_assert!(self.frontier.iter().all(|config| config.done.contains(slot)));
        self.close(operation);
        self.note_size()
    }

    fn on_retire(&mut self, operation: usize) -> Result<(), Failure> {
        debug_assert!(self.operations[operation].optional);
        self.close(operation);
        // Configurations that differed only in the retired operation are now duplicates.
        let mut frontier = std::mem::take(&mut self.frontier);
        self.frontier = self.settle(&mut frontier);
        self.note_size()
    }

    /// Collects into `results` every configuration reachable from `start` by a sequence of
    /// open updates that ends with `target` (or, for a read, ends as soon as the
    /// read is satisfied), up to the canonical naming of the interchangeable operations in
    /// `groups` (see [`Interchangeable`]). Breadth first, so that a configuration is met before the ones
    /// it makes redundant.
    fn explore(
        &self,
        start: &Config<WORDS>,
        target: usize,
        groups: &Interchangeable<WORDS>,
        scratch: &mut Scratch<WORDS>,
        budget: &mut usize,
    ) -> Result<(), Failure> {
        let target_slot = self.operations[target].slot;
        let target_is_read = matches!(self.operations[target].effect, Effect::Read { .. });
        debug_assert!(
            self.operations[target].effect.read_matches(&start.state) != Some(true),
            "greedy reads linearize every matching read"
        );
        let mut others = self.update_slots;
        others.remove(target_slot);
        if groups.applicable(&start.done, &others).is_empty() {
            // The common case: nothing else could come first, so no search is needed.
            if !target_is_read {
                scratch.results.push(self.linearize(start, target));
            }
            return Ok(());
        }
        let Scratch { results, queue, seen } = scratch;
        seen.clear();
        seen.admit(start, &self.reads, &self.optional);
        queue.clear();
        queue.push(start.clone());
        let mut head = 0;
        while let Some(current) = queue.get(head).cloned() {
            head += 1;
            if !target_is_read {
                results.push(self.linearize(&current, target));
            }
            // In the order the updates were invoked, as before sets of slots picked them.
            let applicable = groups.applicable(&current.done, &others);
            for &update in self.open_updates.iter().filter(|&&update| applicable.contains(self.operations[update].slot))
            {
                *budget = budget.checked_sub(1).ok_or(Failure::TooComplex)?;
                let mut next = self.linearize(&current, update);
                groups.rename(&mut next.done);
                if next.done.contains(target_slot) {
                    results.push(next);
                } else if seen.admit(&next, &self.reads, &self.optional) {
                    queue.push(next);
                }
            }
        }
        Ok(())
    }

    /// `config` with `operation` (an update) applied, then every open read the new state
    /// satisfies.
    fn linearize(&self, config: &Config<WORDS>, operation: usize) -> Config<WORDS> {
        let key_operation = &self.operations[operation];
        let mut state = key_operation.effect.apply(&config.state);
        // The horizon is 0 on keys without expiring writes: no state to look at.
        if self.horizon_ms > 0 && state.expires_ms().is_some_and(|expires_ms| expires_ms < self.horizon_ms) {
            state = KeyState::ABSENT;
        }
        let mut next = Config { state, done: config.done };
        next.done.insert(key_operation.slot);
        for &read in &self.open_reads {
            let read_operation = &self.operations[read];
            if !next.done.contains(read_operation.slot) {
                let matches = read_operation.effect.read_matches(&next.state);
                debug_assert!(matches.is_some(), "open reads are reads");
                if matches == Some(true) {
                    next.done.insert(read_operation.slot);
                }
            }
        }
        next
    }

    /// Removes `operation` from the open set and from every configuration.
    fn close(&mut self, operation: usize) {
        let slot = self.operations[operation].slot;
        for config in &mut self.frontier {
            config.done.remove(slot);
        }
        self.reads.remove(slot);
        self.optional.remove(slot);
        self.update_slots.remove(slot);
        for open in [&mut self.open_reads, &mut self.open_updates] {
            if let Some(position) = open.iter().position(|&candidate| candidate == operation) {
                open.remove(position);
            }
        }
    }

    /// Removes duplicates and dominated configurations from the frontier between steps, keeping
    /// the order of first appearance so that the search is deterministic. Leaves `configs`
    /// empty. Here a configuration may also be dominated by one that has not yet applied some
    /// open updates that leave its state as it is (see [`Self::absorbable`]).
    fn prune(&self, configs: &mut Vec<Config<WORDS>>) -> Vec<Config<WORDS>> {
        if configs.len() <= SMALL_FRONTIER_MAX {
            return self.prune_small(configs);
        }
        let mut groups: Vec<(KeyState, Vec<SlotSet<WORDS>>)> = Vec::new();
        let mut group_of_state: FixedHashMap<KeyState, usize> = FixedHashMap::default();
        for config in configs.drain(..) {
            let group = *group_of_state.entry(config.state.clone()).or_insert_with(|| {
                groups.push((config.state, Vec::new()));
                groups.len() - 1
            });
            groups[group].1.push(config.done);
        }
        let mut pruned = Vec::new();
        for (state, sets) in groups {
            let absorbable = self.absorbable(&state);
            for done in self.antichain(sets, &absorbable) {
                pruned.push(Config { state: state.clone(), done });
            }
        }
        pruned
    }

    /// [`Self::prune`] for a few configurations: pairwise, without hashing.
    fn prune_small(&self, configs: &mut Vec<Config<WORDS>>) -> Vec<Config<WORDS>> {
        if self.absorbs_no_ops {
            return self.prune_small_absorbing(configs);
        }
        let mut kept: Vec<Config<WORDS>> = Vec::with_capacity(configs.len());
        for config in configs.drain(..) {
            let redundant = |other: &Config<WORDS>| {
                other.state == config.state && dominates(&other.done, &config.done, &self.reads, &self.optional)
            };
            if kept.iter().any(redundant) {
                continue;
            }
            kept.retain(|other| {
                !(other.state == config.state && dominates(&config.done, &other.done, &self.reads, &self.optional))
            });
            kept.push(config);
        }
        kept
    }

    /// [`Self::prune_small`] on a key where updates can leave a state unchanged: each state's
    /// absorbable slots (see [`Self::absorbable`]) are found once and kept with its configurations.
    fn prune_small_absorbing(&self, configs: &mut Vec<Config<WORDS>>) -> Vec<Config<WORDS>> {
        let mut kept: Vec<(Config<WORDS>, SlotSet<WORDS>)> = Vec::with_capacity(configs.len());
        for config in configs.drain(..) {
            let same_state = kept.iter().find(|(other, _)| other.state == config.state);
            let absorbable = same_state.map_or_else(|| self.absorbable(&config.state), |&(_, absorbable)| absorbable);
            let redundant = |(other, _): &(Config<WORDS>, SlotSet<WORDS>)| {
                other.state == config.state && dominates(&other.done, &config.done, &self.reads, &absorbable)
            };
            if kept.iter().any(redundant) {
                continue;
            }
            kept.retain(|(other, _)| {
                !(other.state == config.state && dominates(&config.done, &other.done, &self.reads, &absorbable))
            });
            kept.push((config, absorbable));
        }
        kept.into_iter().map(|(config, _)| config).collect()
    }

    /// The sets of one state that no other set of that state dominates, given the slots
    /// `absorbable` in that state. The sets are sorted so that each comes after every set that
    /// dominates it (fewer absorbable slots first, then more reads: a dominating set has at
    /// most as many of the one and at least as many of the other, and differs in one of the
    /// counts), so one pass keeping the sets no kept set dominates finds them. Past
    /// [`DOMINANCE_COMPARISONS_MAX`] comparisons only exact duplicates are removed, so that a
    /// huge group costs a bounded time. On keys with expiry, lost deletes and sweeps multiply a
    /// state's sets by the subsets of them applied, which only this pass removes.
    fn antichain(&self, mut sets: Vec<SlotSet<WORDS>>, absorbable: &SlotSet<WORDS>) -> Vec<SlotSet<WORDS>> {
        if sets.len() <= DOMINANCE_GROUP_MAX {
            return self.antichain_pairwise(sets, absorbable);
        }
        if !self.absorbs_no_ops {
            // Large groups on keys without expiry come from concurrent acknowledged updates,
            // which dominance seldom removes (one configuration in 11,850 on the million-operation
            // test), so they only lose their duplicates, at no cost to those histories.
            sets.sort_unstable();
            sets.dedup();
            return sets;
        }
        sets.sort_by_cached_key(|set| (set.count_within(absorbable), Reverse(set.count_within(&self.reads)), *set));
        sets.dedup();
        let mut kept: Vec<SlotSet<WORDS>> = Vec::with_capacity(sets.len());
        let mut comparisons_left = DOMINANCE_COMPARISONS_MAX;
        for set in sets {
            if comparisons_left >= kept.len() {
                comparisons_left -= kept.len();
                if kept.iter().any(|other| dominates(other, &set, &self.reads, absorbable)) {
                    continue;
                }
            }
            kept.push(set);
        }
        kept
    }

    /// [`Self::antichain`] for a group of at most [`DOMINANCE_GROUP_MAX`] sets: pairwise, in the
    /// order met, which is cheaper than sorting for the small groups that are the usual case.
    fn antichain_pairwise(&self, sets: Vec<SlotSet<WORDS>>, absorbable: &SlotSet<WORDS>) -> Vec<SlotSet<WORDS>> {
        let mut kept: Vec<SlotSet<WORDS>> = Vec::with_capacity(sets.len());
        for set in sets {
            if kept.iter().any(|other| dominates(other, &set, &self.reads, absorbable)) {
                continue;
            }
            kept.retain(|other| !dominates(&set, other, &self.reads, absorbable));
            kept.push(set);
        }
        kept
    }

    /// The slots a configuration in `state` may have linearized beyond another in the same state
    /// and still be dominated by it: the open optional operations (never applying one is always
    /// allowed) and, on keys where updates can leave a state unchanged (expiry, sweeps,
    /// deletes), the open updates that would leave `state` unchanged if applied now. The
    /// configuration without such an update X can apply X first and become the one with it;
    /// that holds between steps, not inside an exploration, where X applied early may stop
    /// being a no-op after the next update, and only [`Self::prune`] uses it.
    fn absorbable(&self, state: &KeyState) -> SlotSet<WORDS> {
        let mut absorbable = self.optional;
        if !self.absorbs_no_ops {
            return absorbable;
        }
        for &update in &self.open_updates {
            let operation = &self.operations[update];
            if absorbable.contains(operation.slot) {
                continue;
            }
            let unchanged = match &operation.effect {
                Effect::Delete => *state == KeyState::ABSENT,
                Effect::Expire { at_ms } => !state.expired_at(*at_ms),
                Effect::Write(written) => {
                    let forgotten = written.expires_ms().is_some_and(|expires_ms| expires_ms < self.horizon_after_ms);
                    if forgotten { *state == KeyState::ABSENT } else { written == state }
                }
                // An append changes a string unless it is empty; not telling saves an allocation.
                Effect::Append { .. } | Effect::Read { .. } => false,
            };
            if unchanged {
                absorbable.insert(operation.slot);
            }
        }
        absorbable
    }

    fn note_size(&mut self) -> Result<(), Failure> {
        self.configurations_peak = self.configurations_peak.max(self.frontier.len());
        if self.frontier.len() > self.limits.configurations_max {
            return Err(Failure::TooComplex);
        }
        Ok(())
    }

    fn stuck(&self, operation: usize) -> Failure {
        let mut states: Vec<&KeyState> = Vec::new();
        for config in &self.frontier {
            if states.len() < REPORTED_STATES_MAX && !states.contains(&&config.state) {
                states.push(&config.state);
            }
        }
        let open = self.open_updates.iter().chain(&self.open_reads).copied().filter(|&open| open != operation);
        Failure::Stuck {
            operation,
            states: states
                .into_iter()
                .map(|state| ReportedState { value: state.to_report(), expires_ms: state.expires_ms() })
                .collect(),
            open: open.collect(),
        }
    }
}

/// Groups of interchangeable open operations (see [`Search::interchangeable`]), ready to name
/// the members a configuration applied canonically: as many of the group's lowest slots.
struct Interchangeable<const WORDS: usize> {
    /// Per group, its slots, and for each count `k` its `k` lowest slots.
    groups: Vec<(SlotSet<WORDS>, Vec<SlotSet<WORDS>>)>,
    /// The members that are not the lowest of their group.
    later_slots: SlotSet<WORDS>,
}

impl<const WORDS: usize> Interchangeable<WORDS> {
    /// From groups of slots, each sorted.
    fn new(groups: &[Vec<usize>]) -> Self {
        let mut interchangeable = Interchangeable { groups: Vec::new(), later_slots: SlotSet::empty() };
        for slots in groups {
            debug_assert!(slots.is_sorted());
            let mut prefixes = vec![SlotSet::empty()];
            for (position, &slot) in slots.iter().enumerate() {
                let mut prefix = prefixes[position];
                prefix.insert(slot);
                prefixes.push(prefix);
                if position > 0 {
                    interchangeable.later_slots.insert(slot);
                }
            }
            let all = *prefixes.last().expect("a group has members");
            interchangeable.groups.push((all, prefixes));
        }
        interchangeable
    }

    /// Whether there are no groups, as on keys without expiry.
    fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Names the applied members of each group canonically.
    fn rename(&self, done: &mut SlotSet<WORDS>) {
        for (all, prefixes) in &self.groups {
            let applied = done.count_within(all) as usize;
            done.replace_within(all, &prefixes[applied]);
        }
    }

    /// The slots among `open` that a configuration with the canonically named `done` may apply
    /// next: those not applied yet and, of each group, only the lowest member not applied.
    /// Applying another member gives a configuration that renames to the same one.
    fn applicable(&self, done: &SlotSet<WORDS>, open: &SlotSet<WORDS>) -> SlotSet<WORDS> {
        let mut applicable = *open;
        applicable.remove_all(done);
        if self.groups.is_empty() {
            return applicable;
        }
        applicable.remove_all(&self.later_slots);
        for (all, prefixes) in &self.groups {
            let applied = done.count_within(all) as usize;
            if applied > 0 && applied + 1 < prefixes.len() {
                let mut next = prefixes[applied + 1];
                next.remove_all(&prefixes[applied]);
                applicable.insert_all(&next);
            }
        }
        applicable.intersect(open);
        applicable
    }
}

/// Whether configuration sets `better` and `worse` of the same state stand so that `better`
/// can do whatever `worse` can: `better` linearized only extra reads, `worse` only extra
/// operations among `absorbable` (optional ones, or see [`Search::absorbable`]).
fn dominates<const WORDS: usize>(
    better: &SlotSet<WORDS>,
    worse: &SlotSet<WORDS>,
    reads: &SlotSet<WORDS>,
    absorbable: &SlotSet<WORDS>,
) -> bool {
    better.difference_within(worse, reads) && worse.difference_within(better, absorbable)
}

/// The configurations met during one exploration, to skip repeated and dominated ones.
struct Seen<const WORDS: usize> {
    exact: FixedHashSet<Config<WORDS>>,
    by_state: FixedHashMap<KeyState, Vec<SlotSet<WORDS>>>,
}

impl<const WORDS: usize> Default for Seen<WORDS> {
    fn default() -> Self {
        Seen { exact: FixedHashSet::default(), by_state: FixedHashMap::default() }
    }
}

impl<const WORDS: usize> Seen<WORDS> {
    /// Empties the tables for the next exploration. Clearing costs time in proportion to the
    /// capacity, so tables grown by one rare large exploration are dropped instead.
    fn clear(&mut self) {
        const KEPT_CAPACITY_MAX: usize = 1024;
        if self.exact.capacity() > KEPT_CAPACITY_MAX || self.by_state.capacity() > KEPT_CAPACITY_MAX {
            *self = Seen::default();
        }
        self.exact.clear();
        self.by_state.clear();
    }

    /// Records `config` and says whether it is new and not dominated by one met before. Only
    /// the first [`DOMINANCE_GROUP_MAX`] sets of a state are tested for dominance, so that one
    /// admission costs a bounded time; past them only exact repeats are caught.
    fn admit(&mut self, config: &Config<WORDS>, reads: &SlotSet<WORDS>, optional: &SlotSet<WORDS>) -> bool {
        if !self.exact.insert(config.clone()) {
            return false;
        }
        let sets = self.by_state.entry(config.state.clone()).or_default();
        if sets.iter().any(|kept| dominates(kept, &config.done, reads, optional)) {
            return false;
        }
        if sets.len() < DOMINANCE_GROUP_MAX {
            sets.push(config.done);
        }
        true
    }
}
