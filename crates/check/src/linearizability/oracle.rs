//! A slow, obviously correct linearizability check for small histories, to test the fast one.
//!
//! It tries every order of the whole history's operations (all keys together, so that the
//! per-key split of the fast checker is tested too): ok operations must all appear, info and
//! unfinished writes and appends may appear or not, failed operations and reads without an ok
//! never appear. An order is legal when every read returns what the model holds at that point
//! and no operation comes before one that completed strictly before it was invoked. Clients
//! play no part, so a pipelining client's overlapping operations are concurrent here too.

use crate::history::{HistoryEvent, OpKind, Operation, Outcome, pair_operations};
use std::collections::BTreeMap;

/// Whether the history is linearizable; `None` if it is malformed.
pub(super) fn is_linearizable(events: &[HistoryEvent]) -> Option<bool> {
    let operations = pair_operations(events).ok()?;
    let candidates: Vec<&Operation> = operations.iter().filter(|operation| may_appear(operation)).collect();
    let mut placed = vec![false; candidates.len()];
    let mut store = BTreeMap::new();
    Some(search(&candidates, &mut placed, &mut store))
}

fn may_appear(operation: &Operation) -> bool {
    match operation.outcome {
        Outcome::Ok => true,
        Outcome::Fail => false,
        Outcome::Info | Outcome::Unfinished => operation.op != OpKind::Read,
    }
}

/// Depth-first over orders: place any operation whose real-time predecessors are placed and
/// whose read (if a read) matches the store; succeed when every ok operation is placed.
fn search(candidates: &[&Operation], placed: &mut [bool], store: &mut BTreeMap<String, String>) -> bool {
    let all_ok_placed =
        candidates.iter().zip(placed.iter()).all(|(operation, &done)| done || operation.outcome != Outcome::Ok);
    if all_ok_placed {
        return true;
    }
    for index in 0..candidates.len() {
        if placed[index] || !predecessors_placed(candidates, placed, index) {
            continue;
        }
        let operation = candidates[index];
        let before = store.get(&operation.key).cloned();
        if !apply(store, operation) {
            continue;
        }
        placed[index] = true;
        if search(candidates, placed, store) {
            return true;
        }
        placed[index] = false;
        match before {
            Some(value) => store.insert(operation.key.clone(), value),
            None => store.remove(&operation.key),
        };
    }
    false
}

/// Every ok operation that completed strictly before `index` was invoked is placed.
fn predecessors_placed(candidates: &[&Operation], placed: &[bool], index: usize) -> bool {
    let invoke_ns = candidates[index].invoke_ns;
    candidates.iter().zip(placed).all(|(other, &done)| {
        done || other.outcome != Outcome::Ok || other.completion_ns.is_none_or(|completion| completion >= invoke_ns)
    })
}

/// Applies the operation to the store; for a read, says whether it returns what the store holds.
fn apply(store: &mut BTreeMap<String, String>, operation: &Operation) -> bool {
    let value = operation.value.clone();
    match operation.op {
        OpKind::Read => store.get(&operation.key) == value.as_ref(),
        OpKind::Write => {
            store.insert(operation.key.clone(), value.unwrap_or_default());
            true
        }
        OpKind::Append => {
            store.entry(operation.key.clone()).or_default().push_str(&value.unwrap_or_default());
            true
        }
    }
}
