//! The graph executor against a naive oracle (STYLE 6). The oracle recomputes from scratch,
//! by plain depth-first walks and an all-pairs reachability table, what may run and in which
//! order: a command runs only once its whole dependency closure has committed, runs as soon as
//! it has, runs after every command it reaches outside its own strongly connected component,
//! runs contiguously with its component, and inside it by ⟨sequence, id⟩.

use super::graph::{CommandStatus, ForgetError, GraphConfig, GraphError, GraphExecutor};
use ordo_core::{ClientId, RequestId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const LANES: u64 = 3;
const POSITIONS: u64 = 4;

fn id(lane: u64, position: u64) -> RequestId {
    RequestId { client: ClientId(lane), number: position }
}

/// Ids 1..=POSITIONS of each lane.
fn universe() -> Vec<RequestId> {
    (0..LANES).flat_map(|lane| (1..=POSITIONS).map(move |position| id(lane, position))).collect()
}

fn roomy() -> GraphConfig {
    GraphConfig { commands_max: 1 << 20, lanes_max: 16, deps_max: 16 }
}

#[test]
fn a_diamond_runs_its_sources_first_spec_3_2() {
    // Goal: SwiftPaxos §3.2's example: dep[y] = {x, z}, x and z independent; x and z run in
    // either order, both before y. Method: commit y first, then x, then z.
    let (x, y, z) = (id(0, 1), id(1, 1), id(2, 1));
    let mut graph = GraphExecutor::new(roomy());
    let mut out = Vec::new();
    graph.commit(y, 0, &[x, z]).unwrap();
    assert_eq!(graph.execute_ready(&mut out), 0);
    graph.commit(x, 0, &[]).unwrap();
    assert_eq!(graph.execute_ready(&mut out), 1);
    graph.commit(z, 0, &[]).unwrap();
    graph.execute_ready(&mut out);
    assert_eq!(out, vec![x, z, y]);
    graph.check_invariants();
}

#[test]
fn a_cycle_runs_together_by_sequence_then_id() {
    // Goal: an EPaxos-style cycle runs as one unit, ordered by ⟨sequence, id⟩, before what
    // depends on it. Method: a ⇄ b (b has the lower sequence), c → a; commit c, a, then b.
    let (a, b, c) = (id(0, 1), id(1, 1), id(2, 1));
    let mut graph = GraphExecutor::new(roomy());
    let mut out = Vec::new();
    graph.commit(c, 0, &[a]).unwrap();
    graph.commit(a, 2, &[b]).unwrap();
    assert_eq!(graph.execute_ready(&mut out), 0);
    graph.commit(b, 1, &[a, a, b]).unwrap();
    graph.execute_ready(&mut out);
    assert_eq!(out, vec![b, a, c]);
    graph.check_invariants();
}

#[test]
fn the_frontier_stands_for_forgotten_ids() {
    // Goal: ids below a lane's frontier count as executed (a dependency on one is satisfied, a
    // late commit of one is refused) and are no longer held; the bounds are enforced.
    let config = GraphConfig { commands_max: 2, lanes_max: 1, deps_max: 1 };
    let mut graph = GraphExecutor::new(config);
    let mut out = Vec::new();
    graph.commit(id(0, 1), 0, &[]).unwrap();
    graph.commit(id(0, 2), 0, &[id(0, 3)]).unwrap();
    assert_eq!(graph.commit(id(1, 1), 0, &[]), Err(GraphError::Full));
    graph.execute_ready(&mut out);
    assert_eq!(out, vec![id(0, 1)]);
    assert_eq!(graph.forget_below(ClientId(0), 3), Err(ForgetError::Pending));
    assert_eq!(graph.forget_below(ClientId(0), 2), Ok(()));
    assert_eq!(graph.executed_len(), 0);
    assert_eq!(graph.commit(id(0, 1), 0, &[]), Err(GraphError::Executed));
    assert_eq!(graph.forget_below(ClientId(1), 2), Err(ForgetError::LanesFull));
    assert_eq!(graph.commit(id(1, 1), 0, &[id(0, 1), id(0, 2)]), Err(GraphError::TooManyDeps));
    assert_eq!(graph.commit(id(1, 1), 0, &[id(0, 1)]), Ok(()));
    graph.execute_ready(&mut out);
    assert_eq!(out, vec![id(0, 1), id(1, 1)]);
    assert_eq!(graph.status(id(0, 2)), CommandStatus::Committed);
    graph.check_invariants();
}

/// Commits `order` one at a time (command `i` depends on `deps(i)`), draining after each, and
/// returns everything run.
fn run_chain(order: impl Iterator<Item = u64>, deps: impl Fn(u64) -> Vec<u64>) -> Vec<u64> {
    let mut graph = GraphExecutor::new(roomy());
    let mut out = Vec::new();
    for i in order {
        let deps: Vec<RequestId> = deps(i).into_iter().map(|d| id(0, d)).collect();
        graph.commit(id(0, i), 0, &deps).unwrap();
        graph.execute_ready(&mut out);
    }
    graph.check_invariants();
    assert!(graph.is_empty(), "everything ran");
    out.into_iter().map(|request| request.number).collect()
}

#[test]
fn long_chains_and_cycles_need_no_recursion_nor_quadratic_time() {
    // Goal: 200,000-long chains, committed forwards, backwards and as one cycle, run without a
    // stack overflow and in about linear time (a quadratic executor would take hours here).
    // Method: each shape in the commit order that makes it wait longest.
    const N: u64 = 200_000;
    let ascending: Vec<u64> = (0..N).collect();
    let descending: Vec<u64> = (0..N).rev().collect();
    // i waits for i + 1: each commit is blocked on the next, until the last.
    let waits_on_next = |i: u64| if i + 1 < N { vec![i + 1] } else { vec![] };
    assert_eq!(run_chain(0..N, waits_on_next), descending);
    // i waits for i - 1, committed from the top: everything waits for 0.
    let waits_on_previous = |i: u64| if i > 0 { vec![i - 1] } else { vec![] };
    assert_eq!(run_chain((0..N).rev(), waits_on_previous), ascending);
    // i waits for i + 1, committed from the top down with the top itself last: every commit
    // meets a longer blocked chain.
    let order = (0..N - 1).rev().chain(std::iter::once(N - 1));
    assert_eq!(run_chain(order, waits_on_next), descending);
    // One cycle through all of them: one component, by id since sequences tie.
    assert_eq!(run_chain(0..N, |i| vec![(i + 1) % N]), ascending);
}

/// The oracle's view of a run.
#[derive(Default)]
struct Oracle {
    /// Every accepted commit: sequence and dependencies (kept after it runs).
    committed: BTreeMap<RequestId, (u64, Vec<RequestId>)>,
    /// The executor's output so far, and each id's place in it.
    order: Vec<RequestId>,
    place: BTreeMap<RequestId, usize>,
    frontier: BTreeMap<ClientId, u64>,
}

impl Oracle {
    fn covered(&self, id: RequestId) -> bool {
        self.frontier.get(&id.client).is_some_and(|&below| id.number < below)
    }

    fn done(&self, id: RequestId) -> bool {
        self.place.contains_key(&id) || self.covered(id)
    }

    /// The first uncommitted id in `root`'s dependency closure, walking through committed
    /// commands that have not run, if any.
    fn missing_in_closure(&self, root: RequestId) -> Option<RequestId> {
        let mut seen = BTreeSet::from([root]);
        let mut todo = vec![root];
        while let Some(at) = todo.pop() {
            let Some((_, deps)) = self.committed.get(&at) else { return Some(at) };
            for &dep in deps {
                if !self.done(dep) && seen.insert(dep) {
                    todo.push(dep);
                }
            }
        }
        None
    }

    fn remembered(&self) -> usize {
        self.place.keys().filter(|&&id| !self.covered(id)).count()
    }

    fn pending(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.committed.keys().copied().filter(|&id| !self.done(id))
    }
}

/// Drains the executor and checks the run: each id ran once, only with its closure committed;
/// afterwards, nothing whose closure is committed still waits.
fn drain(graph: &mut GraphExecutor<RequestId>, oracle: &mut Oracle) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    graph.execute_ready(&mut out);
    for id in out {
        prop_assert!(oracle.committed.contains_key(&id), "{:?} ran uncommitted", id);
        prop_assert!(!oracle.done(id), "{:?} ran twice", id);
        prop_assert_eq!(oracle.missing_in_closure(id), None, "{:?} ran before its closure committed", id);
        oracle.place.insert(id, oracle.order.len());
        oracle.order.push(id);
    }
    for id in oracle.pending().collect::<Vec<_>>() {
        prop_assert!(oracle.missing_in_closure(id).is_some(), "{:?} could run but waits", id);
    }
    for id in universe() {
        let expected = if oracle.done(id) {
            CommandStatus::Executed
        } else if oracle.committed.contains_key(&id) {
            CommandStatus::Committed
        } else {
            CommandStatus::Unknown
        };
        prop_assert_eq!(graph.status(id), expected);
    }
    prop_assert_eq!(graph.len(), oracle.pending().count());
    prop_assert_eq!(graph.executed_len(), oracle.remembered());
    graph.check_invariants();
    Ok(())
}

/// The final order against the condensation of the whole committed graph, from scratch.
fn check_order(oracle: &Oracle) -> Result<(), TestCaseError> {
    let ids: Vec<RequestId> = oracle.committed.keys().copied().collect();
    let reach = |from: RequestId| -> BTreeSet<RequestId> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(at) = todo.pop() {
            for &dep in oracle.committed.get(&at).map(|(_, deps)| deps.as_slice()).unwrap_or(&[]) {
                if oracle.committed.contains_key(&dep) && seen.insert(dep) {
                    todo.push(dep);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<RequestId, BTreeSet<RequestId>> = ids.iter().map(|&id| (id, reach(id))).collect();
    for (&id, &at) in &oracle.place {
        let mut component: Vec<RequestId> = ids
            .iter()
            .copied()
            .filter(|&other| other == id || (reaches[&id].contains(&other) && reaches[&other].contains(&id)))
            .collect();
        for &member in &component {
            prop_assert!(oracle.place.contains_key(&member), "{:?} ran without its component's {:?}", id, member);
        }
        for &dep in &reaches[&id] {
            if !component.contains(&dep) {
                prop_assert!(
                    oracle.place.get(&dep).is_some_and(|&before| before < at),
                    "{:?} ran before {:?}",
                    id,
                    dep
                );
            }
        }
        component.sort_by_key(|&member| (oracle.committed[&member].0, member));
        let first = oracle.place[&component[0]];
        for (offset, &member) in component.iter().enumerate() {
            prop_assert_eq!(oracle.place[&member], first + offset, "component of {:?} not together, in order", id);
        }
    }
    Ok(())
}

/// One planned command: whether it commits, its sequence, its dependencies (indexes into the
/// universe) and a key that places its commit in the run.
type Plan = (bool, u64, Vec<usize>, u32);

/// What happens after a commit: drain or not, perhaps a forget (lane, position), perhaps a
/// repeated commit of an earlier command.
type After = (bool, Option<(u64, u64)>, bool);

fn plans() -> impl Strategy<Value = Vec<Plan>> {
    let size = (LANES * POSITIONS) as usize;
    let plan = (prop::bool::weighted(0.85), 0u64..4, prop::collection::vec(0..size, 0..4), any::<u32>());
    prop::collection::vec(plan, size)
}

fn afters() -> impl Strategy<Value = Vec<After>> {
    let forget = prop::option::weighted(0.3, (0..LANES, 1..POSITIONS + 2));
    prop::collection::vec((prop::bool::weighted(0.6), forget, prop::bool::weighted(0.1)), (LANES * POSITIONS) as usize)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// Goal: whatever the graph (cycles, self-dependencies, dependencies that never commit),
    /// the commit order, the bounds and the forgetting, the executor agrees with the oracle:
    /// the same refusals, nothing run early, nothing left waiting that could run, and in the
    /// end an order that is a valid linearisation of the condensation with each component
    /// together and sorted. Method: 12 ids on 3 lanes, each committed or not in a random order,
    /// draining, forgetting and re-committing at random; forgetting only where the caller's
    /// contract holds (every id below has run or will never commit) or an error is due.
    #[test]
    fn graph_executor_matches_oracle(
        plans in plans(),
        afters in afters(),
        commands_max in 3usize..40,
        lanes_max in 1usize..4,
        deps_max in 2usize..5,
    ) {
        let config = GraphConfig { commands_max, lanes_max, deps_max };
        let mut graph = GraphExecutor::new(config);
        let mut oracle = Oracle::default();
        let universe = universe();
        let mut schedule: Vec<usize> = (0..universe.len()).filter(|&i| plans[i].0).collect();
        schedule.sort_by_key(|&i| (plans[i].3, i));
        for (step, &index) in schedule.iter().enumerate() {
            let (_, sequence, dep_indexes, _) = &plans[index];
            let sequence = *sequence;
            let id = universe[index];
            let deps: Vec<RequestId> = dep_indexes.iter().map(|&d| universe[d]).collect();
            let expected = if oracle.done(id) {
                Err(GraphError::Executed)
            } else if oracle.pending().count() + oracle.remembered() >= commands_max {
                Err(GraphError::Full)
            } else if deps.len() > deps_max {
                Err(GraphError::TooManyDeps)
            } else {
                Ok(())
            };
            prop_assert_eq!(graph.commit(id, sequence, &deps), expected);
            if expected.is_ok() {
                let own: BTreeSet<RequestId> = deps.iter().copied().filter(|&d| d != id).collect();
                oracle.committed.insert(id, (sequence, own.into_iter().collect()));
            }
            let (drain_now, forget, again) = afters[step];
            if again {
                let expected = if oracle.done(id) {
                    Err(GraphError::Executed)
                } else if oracle.committed.contains_key(&id) {
                    Err(GraphError::Committed)
                } else {
                    Ok(())
                };
                if expected.is_err() {
                    prop_assert_eq!(graph.commit(id, sequence, &deps), expected);
                }
            }
            if drain_now {
                drain(&mut graph, &mut oracle)?;
            }
            if let Some((lane, position)) = forget {
                let lane = ClientId(lane);
                let below = |other: &RequestId| other.client == lane && other.number < position;
                let committed_later = schedule[step + 1..].iter().map(|&i| universe[i]).any(|other| below(&other));
                let expected = if position <= oracle.frontier.get(&lane).copied().unwrap_or(0) {
                    Ok(())
                } else if !oracle.frontier.contains_key(&lane) && oracle.frontier.len() >= lanes_max {
                    Err(ForgetError::LanesFull)
                } else if oracle.pending().any(|other| below(&other)) {
                    Err(ForgetError::Pending)
                } else {
                    Ok(())
                };
                // The contract: an id below the frontier ran here or will never commit.
                if expected.is_err() || !committed_later {
                    prop_assert_eq!(graph.forget_below(lane, position), expected);
                    if expected.is_ok() {
                        let frontier = oracle.frontier.entry(lane).or_default();
                        *frontier = (*frontier).max(position);
                    }
                }
            }
        }
        drain(&mut graph, &mut oracle)?;
        check_order(&oracle)?;
    }
}
