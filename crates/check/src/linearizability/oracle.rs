//! A slow, obviously correct linearizability check for small histories, to test the fast one.
//!
//! It tries every order of the whole history's operations (all keys together, so that the
//! per-key split of the fast checker is tested too): ok operations must all appear, info and
//! unfinished updates (writes, appends, expires, deletes) may appear or not, failed operations
//! and reads without an ok never appear. An order is legal when every read returns what the
//! model ([`Store`]) holds at that point for the read's stamp and no operation comes before one
//! that completed strictly before it was invoked. Clients play no part, so a pipelining client's
//! overlapping operations are concurrent here too.

use crate::history::{HistoryEvent, OpKind, Operation, Outcome, pair_operations};
use std::collections::BTreeMap;

/// The store of the model, written as plainly as possible: per key, the value and the stamp
/// after which it expires. The generators of test histories use it too, to produce histories
/// linearizable by construction.
#[derive(Clone, Debug, Default)]
pub(super) struct Store(BTreeMap<String, (String, Option<u64>)>);

impl Store {
    /// The value a read of `key` stamped `at_ms` returns.
    pub(super) fn read(&self, key: &str, at_ms: Option<u64>) -> Option<String> {
        let (value, expires_ms) = self.0.get(key)?;
        let expired = matches!((at_ms, expires_ms), (Some(at), Some(expires)) if at > *expires);
        (!expired).then(|| value.clone())
    }

    /// Applies an update; `value` is the written or appended value.
    pub(super) fn update(
        &mut self,
        op: OpKind,
        key: &str,
        value: Option<&str>,
        at_ms: Option<u64>,
        expires_ms: Option<u64>,
    ) {
        let value = value.unwrap_or_default().to_string();
        match op {
            OpKind::Read => {}
            OpKind::Write => _ = self.0.insert(key.to_string(), (value, expires_ms)),
            OpKind::Append => match (self.read(key, at_ms), self.0.get_mut(key)) {
                (Some(_), Some((current, _))) => current.push_str(&value),
                _ => _ = self.0.insert(key.to_string(), (value, None)),
            },
            OpKind::Expire => {
                if self.0.contains_key(key) && self.read(key, at_ms).is_none() {
                    self.0.remove(key);
                }
            }
            OpKind::Delete => _ = self.0.remove(key),
        }
    }
}

/// Whether the history is linearizable; `None` if it is malformed.
pub(super) fn is_linearizable(events: &[HistoryEvent]) -> Option<bool> {
    let operations = pair_operations(events).ok()?;
    let candidates: Vec<&Operation> = operations.iter().filter(|operation| may_appear(operation)).collect();
    let mut placed = vec![false; candidates.len()];
    Some(search(&candidates, &mut placed, &mut Store::default()))
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
fn search(candidates: &[&Operation], placed: &mut [bool], store: &mut Store) -> bool {
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
        let before = store.clone();
        if !apply(store, operation) {
            continue;
        }
        placed[index] = true;
        if search(candidates, placed, store) {
            return true;
        }
        placed[index] = false;
        *store = before;
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
fn apply(store: &mut Store, operation: &Operation) -> bool {
    if operation.op == OpKind::Read {
        return store.read(&operation.key, operation.at_ms) == operation.value;
    }
    store.update(operation.op, &operation.key, operation.value.as_deref(), operation.at_ms, operation.expires_ms);
    true
}
