//! Clocks and the promise table against a naive oracle (STYLE 6), and the paper's examples
//! (spec §11 T1, T2, T5, T6).

use super::messages::{Dot, PromiseRange};
use super::promises::{KeyClocks, PromiseTable};
use ordo_core::{ClientId, Key, RequestId};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn dot(n: u64) -> Dot {
    Dot { request: RequestId { client: ClientId(1), number: n }, attempt: 0 }
}

fn key() -> Key {
    Key::from("k")
}

fn range(lo: u64, hi: u64, attached: Option<Dot>) -> PromiseRange {
    PromiseRange { key: key(), lo, hi, attached }
}

#[test]
fn proposal_semantics_t1() {
    // Goal: proposal(id, m) = max(m, Clock + 1), detached promises for the values skipped, the
    // attached promise at the proposal (Table 1d, 1a). Method: the three cases of T1.
    let keys = vec![key()];
    let mut clocks = KeyClocks::default();
    let mut out = Vec::new();
    clocks.bump(&keys, 1, &mut out);
    out.clear();
    assert_eq!(clocks.proposal(dot(1), &keys, 6, &mut out), 6);
    assert_eq!(out, vec![range(2, 5, None), range(6, 6, Some(dot(1)))]);
    assert_eq!(clocks.clock(&key()), 6);

    let mut clocks = KeyClocks::default();
    clocks.bump(&keys, 5, &mut Vec::new());
    let mut out = Vec::new();
    assert_eq!(clocks.proposal(dot(1), &keys, 6, &mut out), 6);
    assert_eq!(out, vec![range(6, 6, Some(dot(1)))], "no detached promise when Clock + 1 = m");

    let mut clocks = KeyClocks::default();
    clocks.bump(&keys, 6, &mut Vec::new());
    let mut out = Vec::new();
    assert_eq!(clocks.proposal(dot(1), &keys, 6, &mut out), 7, "a busy clock proposes above m");
    assert_eq!(out, vec![range(7, 7, Some(dot(1)))]);
}

#[test]
fn bump_semantics_t2() {
    // Goal: bump(t) generates detached promises up to t included and never goes back (T2).
    let keys = vec![key()];
    let mut clocks = KeyClocks::default();
    clocks.bump(&keys, 3, &mut Vec::new());
    let mut out = Vec::new();
    clocks.bump(&keys, 7, &mut out);
    assert_eq!(out, vec![range(4, 7, None)]);
    assert_eq!(clocks.clock(&key()), 7);
    let mut out = Vec::new();
    clocks.bump(&keys, 5, &mut out);
    assert!(out.is_empty(), "a lower bump changes nothing");
    assert_eq!(clocks.clock(&key()), 7);
}

#[test]
fn figure_2_stable_timestamp_t5() {
    // Goal: Fig. 2 — r = 3, A holds only promise 2, B all of 1..3, C all of 1..2: timestamp 2
    // is stable (the majority's value). Method: feed detached promises and read `stable`.
    let mut table = PromiseTable::new(3);
    let none = |_: Dot| false;
    table.insert(0, &range(2, 2, None), &none).unwrap();
    table.insert(1, &range(1, 3, None), &none).unwrap();
    table.insert(2, &range(1, 2, None), &none).unwrap();
    assert_eq!(table.hcp(0, &key()), 0);
    assert_eq!(table.stable(&key()), 2);
}

#[test]
fn figure_3_attached_promises_t5() {
    // Goal: Fig. 3 — w {A1, B2}, y {B1, C2}, z {C1, A3}, x {A2} uncommitted: with w, y, z
    // committed, timestamp 2 is stable (hcp A = 1, B = 2, C = 2) and 3 is not.
    let (w, x, y, z) = (dot(1), dot(2), dot(3), dot(4));
    let committed: BTreeSet<Dot> = [w, y, z].into_iter().collect();
    let is_committed = |d: Dot| committed.contains(&d);
    let mut table = PromiseTable::new(3);
    for (rank, lo, d) in [(0, 1, w), (1, 2, w), (1, 1, y), (2, 2, y), (2, 1, z), (0, 3, z), (0, 2, x)] {
        table.insert(rank, &range(lo, lo, Some(d)), &is_committed).unwrap();
    }
    assert_eq!((table.hcp(0, &key()), table.hcp(1, &key()), table.hcp(2, &key())), (1, 2, 2));
    assert_eq!(table.stable(&key()), 2);
}

#[test]
fn attached_promise_counts_after_commit_t6() {
    // Goal: line 47 — an attached promise of an uncommitted command is kept but not counted;
    // once the command commits, it counts (it was sent once and buffered).
    let mut table = PromiseTable::new(3);
    let c = dot(7);
    let mut committed: BTreeSet<Dot> = BTreeSet::new();
    for rank in 0..3 {
        let is = |d: Dot| committed.contains(&d);
        table.insert(rank, &range(1, 1, Some(c)), &is).unwrap();
    }
    assert_eq!(table.stable(&key()), 0, "not counted before the commit");
    assert_eq!(table.waiting().collect::<Vec<_>>(), vec![c]);
    committed.insert(c);
    let is = |d: Dot| committed.contains(&d);
    assert_eq!(table.on_commit(c, &is), vec![key()]);
    assert_eq!(table.stable(&key()), 1, "counted after the commit");
    assert_eq!(table.waiting_len(), 0);
}

/// The oracle: a set of facts ⟨process, value⟩ → attached command, and the definition.
fn oracle_stable(facts: &BTreeMap<(usize, u64), Option<Dot>>, committed: &BTreeSet<Dot>, processes: usize) -> u64 {
    let mut hcps: Vec<u64> = (0..processes)
        .map(|p| {
            let mut c = 0;
            while let Some(attached) = facts.get(&(p, c + 1)) {
                if attached.is_some_and(|d| !committed.contains(&d)) {
                    break;
                }
                c += 1;
            }
            c
        })
        .collect();
    hcps.sort_unstable_by(|a, b| b.cmp(a));
    hcps[processes / 2]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Goal: the incremental table agrees with the definition (Theorem 1's majority of highest
    /// contiguous promises, line 47's gating) on random histories. Method: processes generate
    /// promises through `KeyClocks` (proposals and bumps), ranges reach the table in a random
    /// order, some twice, commands commit at random points; after each step compare `stable`.
    #[test]
    fn table_matches_oracle(
        processes in 1usize..6,
        steps in prop::collection::vec((0usize..6, 0u8..3, 1u64..6, any::<bool>(), 0usize..64), 1..80),
    ) {
        let keys = vec![key()];
        let mut clocks: Vec<KeyClocks> = (0..processes).map(|_| KeyClocks::default()).collect();
        let mut undelivered: Vec<(usize, PromiseRange)> = Vec::new();
        let mut facts: BTreeMap<(usize, u64), Option<Dot>> = BTreeMap::new();
        let mut committed: BTreeSet<Dot> = BTreeSet::new();
        let mut table = PromiseTable::new(processes);
        let mut next_dot = 0;
        for (process, action, amount, twice, pick) in steps {
            let process = process % processes;
            let mut out = Vec::new();
            match action {
                0 => {
                    next_dot += 1;
                    let m = clocks[process].clock(&key()) + amount;
                    clocks[process].proposal(dot(next_dot), &keys, m, &mut out);
                }
                1 => {
                    let t = clocks[process].clock(&key()) + amount;
                    clocks[process].bump(&keys, t, &mut out);
                }
                _ => {
                    let candidate = dot(1 + (pick as u64) % next_dot.max(1));
                    if next_dot > 0 && committed.insert(candidate) {
                        let is = |d: Dot| committed.contains(&d);
                        table.on_commit(candidate, &is);
                    }
                }
            }
            undelivered.extend(out.into_iter().map(|r| (process, r)));
            if !undelivered.is_empty() {
                let index = pick % undelivered.len();
                let (p, r) = if twice { undelivered[index].clone() } else { undelivered.swap_remove(index) };
                for value in r.lo..=r.hi {
                    facts.insert((p, value), r.attached);
                }
                let is = |d: Dot| committed.contains(&d);
                table.insert(p, &r, &is).unwrap();
            }
            prop_assert_eq!(table.stable(&key()), oracle_stable(&facts, &committed, processes));
        }
    }
}
