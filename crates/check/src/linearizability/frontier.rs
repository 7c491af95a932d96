//! The frontier search over one key's operations ("just-in-time" linearization).
//!
//! A configuration is a state of the key plus the set of open operations it has already
//! linearized. The search walks the key's steps in time order, keeping every configuration that
//! explains the history so far:
//!
//! - invoke: the operation joins the open set. A read is linearized at once in every
//!   configuration whose state it matches (see "greedy reads" below).
//! - ok completion of X: every configuration must linearize X now. From each one, the search
//!   tries every sequence of open, not yet linearized writes and appends that ends with X; a
//!   read X ends the sequence as soon as the state matches it. X then leaves the open set.
//! - retire (info or unfinished operations only): the operation leaves the open set unapplied,
//!   at a time after which no read could observe it (see `super::prepare`).
//!
//! Two reductions keep the set small, both sound:
//!
//! - Greedy reads: a read does not change the state, so linearizing an open read the moment the
//!   state matches it is never worse than waiting; reads never need to be branched on.
//! - Dominance: configuration A makes B redundant when both have the same state, A has only
//!   linearized extra reads, and B has only linearized extra optional (info) operations. Then
//!   any way B can continue, A can continue the same way. (A rule that drops any configuration
//!   with a larger linearized set is NOT sound: an ok write that one configuration has already
//!   applied must still be applied by the other, which changes its state later.)

use super::slots::SlotSet;
use super::state::{KeyState, Piece};
use crate::fixed_hash::{FixedHashMap, FixedHashSet};
use std::rc::Rc;

/// What an operation does to the key, prepared for the model.
pub(super) enum Effect {
    /// A read that returned the piece (`None` = absent).
    Read(Option<Rc<Piece>>),
    /// A write, holding the state it leaves, which every configuration applying it shares.
    Write(KeyState),
    /// An append of the piece.
    Append(Rc<Piece>),
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
        states: Vec<Option<String>>,
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

/// Above this many sets with one state, only exact duplicates are removed: the pairwise
/// dominance test would cost more than the redundant configurations it saves.
const DOMINANCE_GROUP_MAX: usize = 256;
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
    /// Open writes and appends, the operations a sequence may apply.
    open_updates: Vec<usize>,
    /// Open ok reads, linearized greedily.
    open_reads: Vec<usize>,
    /// Slots of the open reads.
    reads: SlotSet<WORDS>,
    /// Slots of the open optional operations.
    optional: SlotSet<WORDS>,
    limits: Limits,
    configurations_peak: usize,
    scratch: Scratch<WORDS>,
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
            open_reads: Vec::new(),
            reads: SlotSet::empty(),
            optional: SlotSet::empty(),
            limits,
            configurations_peak: 1,
            scratch: Scratch::default(),
        }
    }

    /// Runs the steps (sorted); returns the largest frontier seen.
    pub(super) fn run(mut self, steps: &[Step]) -> Result<usize, Failure> {
        debug_assert!(steps.is_sorted());
        for step in steps {
            match step.kind {
                StepKind::Invoke => self.on_invoke(step.operation),
                StepKind::Complete => self.on_complete(step.operation)?,
                StepKind::Retire => self.on_retire(step.operation)?,
            }
        }
        debug_assert!(self.open_updates.is_empty() && self.open_reads.is_empty());
        Ok(self.configurations_peak)
    }

    fn on_invoke(&mut self, operation: usize) {
        let key_operation = &self.operations[operation];
        let slot = key_operation.slot;
        debug_assert!(self.frontier.iter().all(|config| !config.done.contains(slot)), "slot {slot} reused while held");
        if key_operation.optional {
            self.optional.insert(slot);
        }
        match &key_operation.effect {
            Effect::Read(expected) => {
                self.open_reads.push(operation);
                self.reads.insert(slot);
                for config in &mut self.frontier {
                    if config.state.matches(expected.as_deref()) {
                        config.done.insert(slot);
                    }
                }
            }
            Effect::Write(_) | Effect::Append(_) => self.open_updates.push(operation),
        }
    }

    fn on_complete(&mut self, operation: usize) -> Result<(), Failure> {
        let slot = self.operations[operation].slot;
        debug_assert!(!self.operations[operation].optional);
        // The buffers are reused from step to step: allocation dominated the profile otherwise.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.results.clear();
        let mut budget = self.limits.explored_per_step_max;
        for config in &self.frontier {
            if config.done.contains(slot) {
                scratch.results.push(config.clone());
            } else {
                self.explore(config, operation, &mut scratch, &mut budget)?;
            }
        }
        if scratch.results.is_empty() {
            return Err(self.stuck(operation));
        }
        self.frontier = self.prune(&mut scratch.results);
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
        self.frontier = self.prune(&mut frontier);
        self.note_size()
    }

    /// Collects into `results` every configuration reachable from `start` by a sequence of
    /// open writes and appends that ends with `target` (or, for a read, ends as soon as the
    /// read is satisfied). Breadth first, so that a configuration is met before the ones it
    /// makes redundant.
    fn explore(
        &self,
        start: &Config<WORDS>,
        target: usize,
        scratch: &mut Scratch<WORDS>,
        budget: &mut usize,
    ) -> Result<(), Failure> {
        let target_slot = self.operations[target].slot;
        let target_is_read = matches!(self.operations[target].effect, Effect::Read(_));
        if let Effect::Read(expected) = &self.operations[target].effect {
            debug_assert!(!start.state.matches(expected.as_deref()), "greedy reads linearize every matching read");
        }
        let applicable = |config: &Config<WORDS>, update: usize| {
            update != target && !config.done.contains(self.operations[update].slot)
        };
        if !self.open_updates.iter().any(|&update| applicable(start, update)) {
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
            for &update in self.open_updates.iter().filter(|&&update| applicable(&current, update)) {
                *budget = budget.checked_sub(1).ok_or(Failure::TooComplex)?;
                let next = self.linearize(&current, update);
                if next.done.contains(target_slot) {
                    results.push(next);
                } else if seen.admit(&next, &self.reads, &self.optional) {
                    queue.push(next);
                }
            }
        }
        Ok(())
    }

    /// `config` with `operation` (a write or append) applied, then every open read the new
    /// state satisfies.
    fn linearize(&self, config: &Config<WORDS>, operation: usize) -> Config<WORDS> {
        let key_operation = &self.operations[operation];
        let state = match &key_operation.effect {
            Effect::Write(written) => written.clone(),
            Effect::Append(piece) => config.state.appended(piece),
            Effect::Read(_) => config.state.clone(),
        };
        let mut next = Config { state, done: config.done };
        next.done.insert(key_operation.slot);
        for &read in &self.open_reads {
            let read_operation = &self.operations[read];
            let Effect::Read(expected) = &read_operation.effect else { unreachable!("open reads are reads") };
            if !next.done.contains(read_operation.slot) && next.state.matches(expected.as_deref()) {
                next.done.insert(read_operation.slot);
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
        for open in [&mut self.open_reads, &mut self.open_updates] {
            if let Some(position) = open.iter().position(|&candidate| candidate == operation) {
                open.remove(position);
            }
        }
    }

    /// Removes duplicates and dominated configurations, keeping the order of first appearance
    /// so that the search is deterministic. Leaves `configs` empty.
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
            for done in self.antichain(sets) {
                pruned.push(Config { state: state.clone(), done });
            }
        }
        pruned
    }

    /// [`Self::prune`] for a few configurations: pairwise, without hashing.
    fn prune_small(&self, configs: &mut Vec<Config<WORDS>>) -> Vec<Config<WORDS>> {
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

    /// The sets of one state that no other set of that state dominates.
    fn antichain(&self, mut sets: Vec<SlotSet<WORDS>>) -> Vec<SlotSet<WORDS>> {
        if sets.len() > DOMINANCE_GROUP_MAX {
            sets.sort_unstable();
            sets.dedup();
            return sets;
        }
        let mut kept: Vec<SlotSet<WORDS>> = Vec::with_capacity(sets.len());
        for set in sets {
            if kept.iter().any(|other| dominates(other, &set, &self.reads, &self.optional)) {
                continue;
            }
            kept.retain(|other| !dominates(&set, other, &self.reads, &self.optional));
            kept.push(set);
        }
        kept
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
            states: states.into_iter().map(KeyState::to_report).collect(),
            open: open.collect(),
        }
    }
}

/// Whether configuration sets `better` and `worse` of the same state stand so that `better`
/// can do whatever `worse` can: `better` linearized only extra reads, `worse` only extra
/// optional operations.
fn dominates<const WORDS: usize>(
    better: &SlotSet<WORDS>,
    worse: &SlotSet<WORDS>,
    reads: &SlotSet<WORDS>,
    optional: &SlotSet<WORDS>,
) -> bool {
    better.difference_within(worse, reads) && worse.difference_within(better, optional)
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
