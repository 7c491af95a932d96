//! The client table (§5.1, after VR Revisited): each client's latest executed request and its
//! result, so that a duplicate in the log is answered instead of executed again.
//!
//! NOPaxos clients have one request outstanding, so one row per client suffices. The table is
//! state derived from the executed log: replicas that executed the same slots hold the same
//! table, and evict the same client when it is full (the one whose latest request executed at
//! the lowest slot). An evicted client loses at-most-once protection for a request it is still
//! retrying; with the default bound that takes 100,000 other clients executing in between.
//! (Main's shared `crate::client_table`, written for pipelined clients after this branch began,
//! can replace this module once merged.)

use ordo_core::{ClientId, CommandResult, RequestId};
use std::collections::BTreeMap;

/// What the table says about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Not executed yet.
    New,
    /// The client's latest executed request, with its result.
    Executed(&'a CommandResult),
    /// The client has executed a later request.
    Old,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    number: u64,
    result: CommandResult,
    slot: u64,
}

/// The bounded table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTable {
    max: usize,
    rows: BTreeMap<ClientId, Row>,
    /// Clients by the slot of their latest execution: the eviction order.
    by_slot: BTreeMap<u64, ClientId>,
}

impl ClientTable {
    /// An empty table of at most `max` clients.
    pub fn new(max: usize) -> Self {
        assert!(max > 0, "a client table holds at least one client");
        ClientTable { max, rows: BTreeMap::new(), by_slot: BTreeMap::new() }
    }

    /// Clients remembered.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no client is remembered.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// What the table knows of `id`.
    pub fn lookup(&self, id: RequestId) -> Lookup<'_> {
        match self.rows.get(&id.client) {
            Some(row) if id.number < row.number => Lookup::Old,
            Some(row) if id.number == row.number => Lookup::Executed(&row.result),
            _ => Lookup::New,
        }
    }

    /// Records that `id` executed at `slot` with `result`.
    pub fn record(&mut self, id: RequestId, result: CommandResult, slot: u64) {
        assert!(!self.by_slot.contains_key(&slot), "each slot executes once");
        if let Some(previous) = self.rows.get(&id.client) {
            assert!(previous.number < id.number, "a client's requests execute in increasing order");
            assert!(previous.slot < slot, "slots execute in increasing order");
            self.by_slot.remove(&previous.slot);
        }
        self.rows.insert(id.client, Row { number: id.number, result, slot });
        self.by_slot.insert(slot, id.client);
        while self.rows.len() > self.max {
            let (_, client) = self.by_slot.pop_first().expect("rows and by_slot hold the same clients");
            self.rows.remove(&client);
        }
        assert_eq!(self.rows.len(), self.by_slot.len(), "rows and by_slot hold the same clients");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(client: u64, number: u64) -> RequestId {
        RequestId { client: ClientId(client), number }
    }

    #[test]
    fn answers_duplicates_and_evicts_the_client_executed_longest_ago() {
        // Goal: at-most-once lookups and a deterministic bound. Method: three clients in a
        // table of two.
        let mut table = ClientTable::new(2);
        table.record(id(1, 1), CommandResult::Ok, 1);
        table.record(id(2, 1), CommandResult::Integer(5), 2);
        assert_eq!(table.lookup(id(2, 1)), Lookup::Executed(&CommandResult::Integer(5)));
        assert_eq!(table.lookup(id(2, 2)), Lookup::New);
        table.record(id(1, 2), CommandResult::Nil, 3);
        assert_eq!(table.lookup(id(1, 1)), Lookup::Old);
        table.record(id(3, 1), CommandResult::Ok, 4);
        assert_eq!(table.len(), 2);
        assert_eq!(table.lookup(id(2, 1)), Lookup::New, "client 2 executed longest ago");
    }
}
