//! The client table: for each client, the last request executed and its result, so that a
//! retried request is answered from the table instead of executing twice.
//!
//! It is state derived from the executed log (and carried in snapshots), so every replica that
//! executed the same ops holds the same table. Its size is bounded by `client_table_max`: when a
//! new client would exceed it, the client whose last request executed longest ago is evicted.
//! Eviction is decided by op numbers only, so every replica evicts the same client. An evicted
//! client loses at-most-once protection for a request it is still retrying: if that request sits
//! in the log twice (retried across a view change), the second copy executes again. With the
//! default bound that needs 100,000 other clients to execute between two retries.

use ordo_core::{ClientId, CommandResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One client's row, as stored in snapshots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecord {
    /// The client.
    pub client: ClientId,
    /// Its last executed request number.
    pub number: u64,
    /// That request's result.
    pub result: CommandResult,
    /// The op at which it executed (the eviction order).
    pub op: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    number: u64,
    result: CommandResult,
    op: u64,
}

/// What the table says about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Not executed yet.
    New,
    /// It is the client's last executed request: here is its result.
    Executed(&'a CommandResult),
    /// The client has executed a later request already.
    Old,
}

/// The client table, bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTable {
    max: usize,
    rows: BTreeMap<ClientId, Row>,
    /// Clients by the op of their last execution, oldest first: ops are unique, so this is the
    /// eviction order.
    by_op: BTreeMap<u64, ClientId>,
}

impl ClientTable {
    /// An empty table of at most `max` clients.
    pub fn new(max: usize) -> Self {
        assert!(max > 0, "a client table must hold at least one client");
        ClientTable { max, rows: BTreeMap::new(), by_op: BTreeMap::new() }
    }

    /// How many clients are remembered.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no client is remembered.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// What the table knows of request `number` of `client`.
    pub fn lookup(&self, client: ClientId, number: u64) -> Lookup<'_> {
        match self.rows.get(&client) {
            Some(row) if number < row.number => Lookup::Old,
            Some(row) if number == row.number => Lookup::Executed(&row.result),
            _ => Lookup::New,
        }
    }

    /// Records that request `number` of `client` executed at `op` with `result`.
    pub fn record(&mut self, client: ClientId, number: u64, result: CommandResult, op: u64) {
        assert!(!self.by_op.contains_key(&op), "each op executes once");
        if let Some(previous) = self.rows.get(&client) {
            assert!(previous.number < number, "requests of a client execute in increasing order");
            assert!(previous.op < op, "ops execute in increasing order");
            self.by_op.remove(&previous.op);
        }
        self.rows.insert(client, Row { number, result, op });
        self.by_op.insert(op, client);
        self.evict();
    }

    fn evict(&mut self) {
        while self.rows.len() > self.max {
            let (_, client) = self.by_op.pop_first().expect("rows and by_op hold the same clients");
            self.rows.remove(&client);
        }
        assert_eq!(self.rows.len(), self.by_op.len(), "rows and by_op hold the same clients");
    }

    /// The table as snapshot rows, sorted by client.
    pub fn to_records(&self) -> Vec<ClientRecord> {
        self.rows
            .iter()
            .map(|(client, row)| ClientRecord {
                client: *client,
                number: row.number,
                result: row.result.clone(),
                op: row.op,
            })
            .collect()
    }

    /// A table rebuilt from snapshot rows; `None` if they are inconsistent (duplicate clients or
    /// ops). Evicts down to `max` if the rows came from a replica with a larger bound.
    pub fn from_records(max: usize, records: &[ClientRecord]) -> Option<Self> {
        let mut table = ClientTable::new(max);
        for record in records {
            if table.rows.contains_key(&record.client) || table.by_op.contains_key(&record.op) {
                return None;
            }
            let row = Row { number: record.number, result: record.result.clone(), op: record.op };
            table.rows.insert(record.client, row);
            table.by_op.insert(record.op, record.client);
        }
        table.evict();
        Some(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_eviction_order() {
        // Goal: the table answers retries and evicts the least recently executed client.
        // Method: three clients in a table of two, then round-trip through snapshot rows.
        let mut table = ClientTable::new(2);
        table.record(ClientId(1), 1, CommandResult::Ok, 1);
        table.record(ClientId(2), 1, CommandResult::Integer(5), 2);
        assert_eq!(table.lookup(ClientId(2), 1), Lookup::Executed(&CommandResult::Integer(5)));
        assert_eq!(table.lookup(ClientId(2), 2), Lookup::New);
        table.record(ClientId(1), 2, CommandResult::Nil, 3);
        assert_eq!(table.lookup(ClientId(1), 1), Lookup::Old);
        table.record(ClientId(3), 1, CommandResult::Ok, 4);
        assert_eq!(table.len(), 2);
        assert_eq!(table.lookup(ClientId(2), 1), Lookup::New, "client 2 executed longest ago");
        let rebuilt = ClientTable::from_records(2, &table.to_records()).unwrap();
        assert_eq!(rebuilt, table);
        let smaller = ClientTable::from_records(1, &table.to_records()).unwrap();
        assert_eq!(smaller.lookup(ClientId(3), 1), Lookup::Executed(&CommandResult::Ok));
        assert_eq!(smaller.len(), 1);
    }

    #[test]
    fn inconsistent_rows_are_refused() {
        // Goal: a snapshot naming one client twice is bad input, not a panic.
        let row = ClientRecord { client: ClientId(1), number: 1, result: CommandResult::Ok, op: 1 };
        let mut twice = row.clone();
        twice.op = 2;
        assert!(ClientTable::from_records(4, &[row, twice]).is_none());
    }
}
