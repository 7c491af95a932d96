//! Dependency-graph order (EPaxos §4.3.2, SwiftPaxos §3.2 L33–36): each command commits with an
//! id, the ids it depends on and a sequence number; it may run once every command it
//! transitively depends on has committed. The committed graph may hold cycles (EPaxos; a
//! SwiftPaxos graph is acyclic, a special case): each strongly connected component (SCC) runs as
//! a unit, after the components it depends on, and inside itself by ⟨sequence, id⟩, so every
//! replica that committed the same graph runs conflicting commands in the same order.
//!
//! # How it finds what can run
//!
//! A search is Tarjan's algorithm, iterative (an explicit call stack, so a chain of a million
//! commands cannot overflow the thread's stack), started from one committed command and
//! walking committed, unexecuted dependencies. Tarjan emits a component only once everything
//! reachable from it has been emitted, so components come out dependencies first, and each one
//! emitted before the search meets an uncommitted id has a fully committed closure: it runs at
//! once. When the search meets an uncommitted id it stops, and the commands on its call stack
//! are *blocked*: each waits on the next one on the path, the last on the uncommitted id (or on
//! an already blocked command). A blocked command is searched again only when what it waits on
//! commits or runs, so a chain committed one link at a time costs one short search per link,
//! not one walk of the whole chain. Blocked commands point along a path that ends at an
//! uncommitted id or at a command that will be searched again; `chain_end` follows it whenever
//! a search meets a blocked command, and either shortens it (it still ends at an uncommitted
//! id) or unblocks it (it no longer does). Without the waiting, every commit
//! would retry every waiting command (quadratic); without the shortening, a chain committed
//! backwards would be walked again at each link (quadratic too).
//!
//! # Memory: an executed frontier per lane
//!
//! A command may depend on one that ran long ago, so executed ids must be remembered, but not
//! forever. Ids come from *lanes* (a client's requests, a replica's instance space: see
//! [`GraphId`]), each numbering its ids by position. [`GraphExecutor::forget_below`]`(lane, p)`
//! says every id of `lane` below position `p` has run (or never will commit), typically once
//! it ran at every replica (SwiftPaxos §4.1's garbage collection): those ids are dropped from
//! the executed set, a dependency on one counts as satisfied and a late commit of one is
//! refused. So the executor holds at most `commands_max` ids (committed plus executed ones above
//! the frontier) and `lanes_max` frontiers; a commit beyond that is refused with
//! [`GraphError::Full`] until the caller forgets. A single frontier over all ids would not do:
//! ids of different lanes run in no particular relative order. A lane's frontier is kept for
//! good (it is what refuses a late duplicate), so `lanes_max` must cover every lane of a run.
//!
//! Deterministic: only `BTreeMap`, `BTreeSet` and `Vec` are iterated. Checked against a naive
//! oracle (reachability recomputed from scratch) in `tests_graph.rs`.

use ordo_core::{ClientId, RequestId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// A command id the graph executor can compact: it belongs to a lane (who issued it) and has a
/// position in that lane. Lanes let [`GraphExecutor::forget_below`] summarise a lane's executed
/// prefix in one number. `Ord` must be lane-major: one lane's ids are contiguous and ordered by
/// position, so a lane's prefix is one range of a sorted map.
pub trait GraphId: Copy + Ord + Debug {
    /// Who issues these ids (a client, a replica's instance space).
    type Lane: Copy + Ord + Debug;
    /// The issuer of this id.
    fn lane(&self) -> Self::Lane;
    /// This id's position among its lane's ids.
    fn position(&self) -> u64;
    /// The lowest id `lane` can have (at or below position 0).
    fn lane_start(lane: Self::Lane) -> Self;
}

/// A request is issued by its client, numbered by the client.
impl GraphId for RequestId {
    type Lane = ClientId;
    fn lane(&self) -> ClientId {
        self.client
    }
    fn position(&self) -> u64 {
        self.number
    }
    fn lane_start(lane: ClientId) -> Self {
        RequestId { client: lane, number: 0 }
    }
}

/// The executor's bounds (STYLE 12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphConfig {
    /// Ids held at once: committed ones not yet run plus executed ones above the frontiers.
    pub commands_max: usize,
    /// Lanes with a frontier.
    pub lanes_max: usize,
    /// Dependencies of one command.
    pub deps_max: usize,
}

/// Why [`GraphExecutor::commit`] refused a command. Nothing changed in the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphError {
    /// The command ran already, or lies below its lane's frontier.
    Executed,
    /// The command is committed and waiting already.
    Committed,
    /// `commands_max` ids are held: the caller must forget executed ones first.
    Full,
    /// More than `deps_max` dependencies.
    TooManyDeps,
}

/// Why [`GraphExecutor::forget_below`] refused. Nothing changed in the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForgetError {
    /// A committed command of the lane below the new frontier has not run: the caller's claim
    /// that the prefix ran is wrong here.
    Pending,
    /// `lanes_max` lanes have a frontier already.
    LanesFull,
}

/// What the executor knows of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandStatus {
    /// It ran here, or lies below its lane's frontier.
    Executed,
    /// It committed and waits for dependencies.
    Committed,
    /// It has not committed here.
    Unknown,
}

/// A committed command waiting to run, with the scratch state of Tarjan's search.
#[derive(Clone, Debug)]
struct Node<Id> {
    sequence: u64,
    /// Sorted, without duplicates or the command itself.
    deps: Vec<Id>,
    /// The search that last visited this node; `index`, `low` and `on_stack` are its.
    epoch: u64,
    index: usize,
    low: usize,
    on_stack: bool,
}

/// Runs committed commands in dependency order, strongly connected components together.
#[derive(Clone, Debug)]
pub struct GraphExecutor<Id: GraphId> {
    config: GraphConfig,
    /// Committed commands not yet run.
    pending: BTreeMap<Id, Node<Id>>,
    /// Commands run, above their lane's frontier.
    executed: BTreeSet<Id>,
    /// Per lane, the position below which every id counts as executed.
    frontier: BTreeMap<Id::Lane, u64>,
    /// Pending commands to search from (newly committed, or what they waited on changed).
    dirty: BTreeSet<Id>,
    /// Pending command → the id it waits on (a dependency, direct or transitive, not yet run).
    blocked: BTreeMap<Id, Id>,
    /// The reverse of `blocked`.
    waiters: BTreeMap<Id, BTreeSet<Id>>,
    /// Counts searches, so that a node's scratch state needs no reset.
    epoch: u64,
    /// The search's call stack: a node and the index of the next dependency to look at.
    call: Vec<(Id, usize)>,
    /// Tarjan's stack of visited nodes whose component is not emitted yet.
    stack: Vec<Id>,
    /// Scratch for one component, sorted before it runs.
    component: Vec<(u64, Id)>,
    /// Scratch for `chain_end`.
    chain: Vec<Id>,
}

impl<Id: GraphId> GraphExecutor<Id> {
    /// An empty executor with these bounds.
    pub fn new(config: GraphConfig) -> Self {
        assert!(config.commands_max >= 1, "room for one command");
        assert!(config.lanes_max >= 1, "room for one lane");
        GraphExecutor {
            config,
            pending: BTreeMap::new(),
            executed: BTreeSet::new(),
            frontier: BTreeMap::new(),
            dirty: BTreeSet::new(),
            blocked: BTreeMap::new(),
            waiters: BTreeMap::new(),
            epoch: 0,
            call: Vec::new(),
            stack: Vec::new(),
            component: Vec::new(),
            chain: Vec::new(),
        }
    }

    /// The bounds.
    pub fn config(&self) -> GraphConfig {
        self.config
    }

    /// Committed commands waiting to run.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no committed command waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Executed ids remembered (above the frontiers).
    pub fn executed_len(&self) -> usize {
        self.executed.len()
    }

    /// The position below which every id of `lane` counts as executed (0: none).
    pub fn frontier(&self, lane: Id::Lane) -> u64 {
        self.frontier.get(&lane).copied().unwrap_or(0)
    }

    /// What the executor knows of `id`.
    pub fn status(&self, id: Id) -> CommandStatus {
        if self.is_executed(id) {
            CommandStatus::Executed
        } else if self.pending.contains_key(&id) {
            CommandStatus::Committed
        } else {
            CommandStatus::Unknown
        }
    }

    fn is_executed(&self, id: Id) -> bool {
        self.executed.contains(&id) || self.frontier.get(&id.lane()).is_some_and(|&below| id.position() < below)
    }

    /// Accepts a committed command: its `sequence` number orders it inside its component, its
    /// `deps` must run first (a dependency on itself or twice on one id is ignored). It runs
    /// from [`GraphExecutor::execute_ready`]. On error nothing changes.
    pub fn commit(&mut self, id: Id, sequence: u64, deps: &[Id]) -> Result<(), GraphError> {
        if self.is_executed(id) {
            return Err(GraphError::Executed);
        }
        if self.pending.contains_key(&id) {
            return Err(GraphError::Committed);
        }
        if self.pending.len() + self.executed.len() >= self.config.commands_max {
            return Err(GraphError::Full);
        }
        if deps.len() > self.config.deps_max {
            return Err(GraphError::TooManyDeps);
        }
        let mut own: Vec<Id> = deps.iter().copied().filter(|&dep| dep != id).collect();
        own.sort_unstable();
        own.dedup();
        let node = Node { sequence, deps: own, epoch: 0, index: 0, low: 0, on_stack: false };
        self.pending.insert(id, node);
        self.dirty.insert(id);
        // Whoever waited for this id to commit may now get further.
        self.wake(id);
        assert!(self.pending.len() + self.executed.len() <= self.config.commands_max, "the bound holds");
        assert!(!self.blocked.contains_key(&id), "a new command waits on nothing yet");
        Ok(())
    }

    /// Runs everything that can run: appends the ids to `out` in execution order (components
    /// together, dependencies' components first, inside one by ⟨sequence, id⟩); returns how many.
    pub fn execute_ready(&mut self, out: &mut Vec<Id>) -> usize {
        let before = out.len();
        while let Some(root) = self.dirty.pop_first() {
            assert!(self.pending.contains_key(&root), "only pending commands are dirty");
            assert!(!self.blocked.contains_key(&root), "a dirty command is not blocked");
            self.search(root, out);
            assert!(self.call.is_empty(), "a search leaves no call stack");
            assert!(self.stack.is_empty(), "a search leaves no Tarjan stack");
        }
        // Nothing is dirty: every waiting command is blocked on a path to an uncommitted id.
        assert_eq!(self.blocked.len(), self.pending.len(), "every waiting command is blocked");
        out.len() - before
    }

    /// Records that every id of `lane` below `position` has run here (or will never commit),
    /// so its executed ids can be forgotten. Moving a frontier back is a no-op.
    pub fn forget_below(&mut self, lane: Id::Lane, position: u64) -> Result<(), ForgetError> {
        let current = self.frontier(lane);
        if position <= current {
            return Ok(());
        }
        if !self.frontier.contains_key(&lane) && self.frontier.len() >= self.config.lanes_max {
            return Err(ForgetError::LanesFull);
        }
        // Ids are lane-major (`GraphId`): the lane's ids below `position` are one range, so
        // forgetting costs what it forgets, not a walk of everything held.
        let in_range = |id: &Id| id.lane() == lane && id.position() < position;
        let start = Id::lane_start(lane);
        if self.pending.range(start..).next().is_some_and(|(id, _)| in_range(id)) {
            return Err(ForgetError::Pending);
        }
        self.frontier.insert(lane, position);
        let forgotten: Vec<Id> = self.executed.range(start..).take_while(|id| in_range(id)).copied().collect();
        for id in forgotten {
            self.executed.remove(&id);
        }
        // Uncommitted ids now below the frontier count as executed: wake what waited on them.
        let covered: Vec<Id> = self.waiters.range(start..).map(|(id, _)| *id).take_while(in_range).collect();
        for id in covered {
            assert!(!self.pending.contains_key(&id), "no pending id lies below a frontier");
            self.wake(id);
        }
        assert!(self.frontier.len() <= self.config.lanes_max, "the lane bound holds");
        assert!(!self.executed.range(start..).next().is_some_and(in_range), "forgotten ids are gone");
        Ok(())
    }

    // ---- waiting -------------------------------------------------------------------------------

    fn block(&mut self, id: Id, target: Id) {
        assert!(self.pending.contains_key(&id), "only pending commands block");
        assert!(id != target, "a command does not wait on itself");
        let previous = self.blocked.insert(id, target);
        assert!(previous.is_none(), "a command waits on one id");
        self.waiters.entry(target).or_default().insert(id);
        self.dirty.remove(&id);
    }

    fn unblock(&mut self, id: Id) {
        let target = self.blocked.remove(&id).expect("the command was blocked");
        let waiters = self.waiters.get_mut(&target).expect("blocked and waiters mirror each other");
        assert!(waiters.remove(&id), "blocked and waiters mirror each other");
        if waiters.is_empty() {
            self.waiters.remove(&target);
        }
    }

    /// `id` committed or ran: what waited on it is worth another search.
    fn wake(&mut self, id: Id) {
        let Some(waiters) = self.waiters.remove(&id) else { return };
        for waiter in waiters {
            assert_eq!(self.blocked.remove(&waiter), Some(id), "blocked and waiters mirror each other");
            self.dirty.insert(waiter);
        }
    }

    /// Follows the waits from the blocked command `start`. If they end at an uncommitted id,
    /// points every command on the way straight at it (so the next walk is short) and returns
    /// it. If they end at a pending command that is not blocked (dirty, or on the current
    /// search's stack), every command on the way may be able to run after all: they are
    /// unblocked and marked dirty (the current search may run them first), and `None` is
    /// returned. Unblocking the whole way, not only `start`, keeps a search that goes on into
    /// the next command of the same chain from walking the rest of it again.
    fn chain_end(&mut self, start: Id) -> Option<Id> {
        let mut chain = std::mem::take(&mut self.chain);
        chain.clear();
        let mut at = start;
        while let Some(&target) = self.blocked.get(&at) {
            chain.push(at);
            at = target;
            assert!(chain.len() <= self.pending.len(), "waits form no cycle");
        }
        let end = if self.pending.contains_key(&at) { None } else { Some(at) };
        for &id in &chain {
            match end {
                Some(missing) if self.blocked.get(&id) == Some(&missing) => {}
                Some(missing) => {
                    self.unblock(id);
                    self.block(id, missing);
                }
                None => {
                    self.unblock(id);
                    self.dirty.insert(id);
                }
            }
        }
        assert!(end.is_none_or(|missing| !self.is_executed(missing)), "nothing waits on an executed id");
        self.chain = chain;
        end
    }

    // ---- Tarjan's search -----------------------------------------------------------------------

    fn enter(&mut self, id: Id, counter: &mut usize) {
        let node = self.pending.get_mut(&id).expect("only pending commands are entered");
        assert!(node.epoch != self.epoch, "a node is entered once per search");
        node.epoch = self.epoch;
        node.index = *counter;
        node.low = *counter;
        node.on_stack = true;
        *counter += 1;
        self.stack.push(id);
        self.call.push((id, 0));
    }

    /// One search from `root`: runs every component it completes; if it meets an uncommitted
    /// (or blocked) id, blocks the commands on its path and stops.
    fn search(&mut self, root: Id, out: &mut Vec<Id>) {
        self.epoch += 1;
        let mut counter = 0;
        self.enter(root, &mut counter);
        while let Some(&(id, next)) = self.call.last() {
            let Some(&dep) = self.pending[&id].deps.get(next) else {
                self.finish(id, out);
                continue;
            };
            self.call.last_mut().expect("non-empty").1 += 1;
            if self.is_executed(dep) {
                continue;
            }
            if !self.pending.contains_key(&dep) {
                self.abort(dep);
                return;
            }
            // A blocked dependency whose wait leads to a command that may still run is
            // unblocked by `chain_end` and searched through.
            if self.blocked.contains_key(&dep) && self.chain_end(dep).is_some() {
                self.abort(dep);
                return;
            }
            let (epoch, index) = (self.pending[&dep].epoch, self.pending[&dep].index);
            if epoch == self.epoch {
                // Visited in this search and not run, so still on Tarjan's stack.
                assert!(self.pending[&dep].on_stack, "a visited pending node is on the stack");
                let node = self.pending.get_mut(&id).expect("on the call stack");
                node.low = node.low.min(index);
            } else {
                self.enter(dep, &mut counter);
            }
        }
    }

    /// `id`'s dependencies are all explored: pass its low link up, and run its component if it
    /// is the component's root.
    fn finish(&mut self, id: Id, out: &mut Vec<Id>) {
        let (popped, _) = self.call.pop().expect("finishing the top frame");
        assert_eq!(popped, id, "the top frame finishes");
        let (index, low) = (self.pending[&id].index, self.pending[&id].low);
        if let Some(&(parent, _)) = self.call.last() {
            let node = self.pending.get_mut(&parent).expect("on the call stack");
            node.low = node.low.min(low);
        }
        if low != index {
            return;
        }
        self.component.clear();
        loop {
            let member = self.stack.pop().expect("the root is on the stack");
            let node = self.pending.get_mut(&member).expect("stacked nodes are pending");
            node.on_stack = false;
            self.component.push((node.sequence, member));
            if member == id {
                break;
            }
        }
        self.component.sort_unstable();
        for at in 0..self.component.len() {
            let member = self.component[at].1;
            self.run(member, out);
        }
    }

    fn run(&mut self, id: Id, out: &mut Vec<Id>) {
        let node = self.pending.remove(&id).expect("runs a pending command");
        assert!(
            node.deps.iter().all(|&dep| self.is_executed(dep) || self.pending.contains_key(&dep)),
            "deps committed"
        );
        assert!(!self.blocked.contains_key(&id), "a running command is not blocked");
        self.dirty.remove(&id);
        let inserted = self.executed.insert(id);
        assert!(inserted, "a command runs once");
        out.push(id);
        self.wake(id);
    }

    /// The search met `target`, uncommitted or blocked: every command on the call stack waits
    /// on the next one along the path, the last on `target`. Commands still on Tarjan's stack
    /// but off the call stack also reach `target` (through a call-stack node), but which one
    /// they reach is not at hand; they stay dirty and are searched again. (Every command a
    /// search enters, but its root, is dirty: it was, or `chain_end` made it so.)
    fn abort(&mut self, target: Id) {
        let call = std::mem::take(&mut self.call);
        for (at, &(id, _)) in call.iter().enumerate() {
            let next = call.get(at + 1).map_or(target, |&(next, _)| next);
            self.block(id, next);
        }
        let mut stack = std::mem::take(&mut self.stack);
        for id in stack.drain(..) {
            self.pending.get_mut(&id).expect("stacked nodes are pending").on_stack = false;
            let waits = self.blocked.contains_key(&id);
            assert!(waits || self.dirty.contains(&id), "a command off the call stack stays dirty");
        }
        self.stack = stack;
        self.call = call;
        self.call.clear();
    }

    /// Checks the bounds and that the bookkeeping sets agree.
    pub fn check_invariants(&self) {
        assert!(self.pending.len() + self.executed.len() <= self.config.commands_max, "the id bound holds");
        assert!(self.frontier.len() <= self.config.lanes_max, "the lane bound holds");
        assert!(self.call.is_empty(), "no search is under way");
        assert!(self.stack.is_empty(), "no search is under way");
        for (&id, node) in &self.pending {
            assert!(!self.is_executed(id), "a pending command has not run");
            assert!(node.deps.windows(2).all(|pair| pair[0] < pair[1]), "deps are sorted and distinct");
            assert!(!node.deps.contains(&id), "a command does not depend on itself");
            assert!(self.dirty.contains(&id) != self.blocked.contains_key(&id), "dirty or blocked, not both");
        }
        for &id in &self.executed {
            assert!(!self.pending.contains_key(&id), "an executed command is not pending");
            assert!(self.frontier.get(&id.lane()).is_none_or(|&below| id.position() >= below), "forgotten ids go");
        }
        let mut waiting = 0;
        for (&target, waiters) in &self.waiters {
            assert!(!waiters.is_empty(), "no empty waiter sets");
            assert!(!self.is_executed(target), "nothing waits on an executed id");
            for waiter in waiters {
                assert_eq!(self.blocked.get(waiter), Some(&target), "blocked and waiters mirror each other");
            }
            waiting += waiters.len();
        }
        assert_eq!(waiting, self.blocked.len(), "blocked and waiters mirror each other");
    }
}
