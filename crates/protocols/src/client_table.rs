//! The client table: at-most-once execution for clients that keep several requests in flight.
//!
//! A client numbers its requests 1, 2, 3... and tells the replicas, with every request, its
//! acknowledgement mark: the number below which it needs no answer any more (every lower request
//! was answered or given up). For each client the table keeps the mark and the results of the
//! executed requests at or above it, so a retried request gets its first result instead of
//! executing twice. A request below the mark is old and never executes; one at or beyond
//! `mark + window` is refused, since an honest client keeps its requests within `window` numbers
//! of its mark. A client's row thus holds at most `window` results. With a window of one this is
//! the classic table of the last request per client.
//!
//! The table is state derived from the executed commands (and carried in snapshots), so every
//! replica that executed the same commands holds the same table. It remembers at most
//! `clients_max` clients: when a new one would exceed it, the client whose last request executed
//! longest ago is evicted. Eviction is decided by op numbers only, so every replica evicts the
//! same client. An evicted client loses at-most-once protection for a request it is still
//! retrying; with the default bounds that needs 100,000 other clients to execute between two
//! retries.

use ordo_core::{ClientId, CommandResult, RequestId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One client's row, as stored in snapshots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecord {
    /// The client.
    pub client: ClientId,
    /// Its acknowledgement mark: requests below it are old.
    pub acked_below: u64,
    /// Its executed requests at or above the mark, with their results, by number.
    pub results: Vec<(u64, CommandResult)>,
    /// The op at which its last request executed (the eviction order).
    pub op: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    acked_below: u64,
    /// By number, ascending; at most a window of them, so a vector (which keeps its capacity
    /// from one request to the next) beats a tree that allocates whenever it empties.
    results: Vec<(u64, CommandResult)>,
    op: u64,
}

impl Row {
    fn result(&self, number: u64) -> Option<&CommandResult> {
        self.results.iter().find(|(n, _)| *n == number).map(|(_, result)| result)
    }
}

/// What the table says about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Not executed yet: execute it and [`ClientTable::record`] the result.
    New,
    /// Executed already: here is its result.
    Executed(&'a CommandResult),
    /// Below the client's acknowledgement mark: the client needs no answer.
    Old,
    /// Beyond the client's window: only a faulty client sends it.
    BeyondWindow,
}

/// The client table, bounded in clients and in results per client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTable {
    clients_max: usize,
    window: u64,
    rows: BTreeMap<ClientId, Row>,
    /// Clients by the op of their last execution, oldest first: ops are unique, so this is the
    /// eviction order.
    by_op: BTreeMap<u64, ClientId>,
}

impl ClientTable {
    /// An empty table of at most `clients_max` clients, each with at most `window` requests in
    /// flight.
    pub fn new(clients_max: usize, window: usize) -> Self {
        assert!(clients_max > 0, "a client table must hold at least one client");
        assert!(window > 0, "a client has at least one request in flight");
        ClientTable { clients_max, window: window as u64, rows: BTreeMap::new(), by_op: BTreeMap::new() }
    }

    /// How many clients are remembered.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no client is remembered.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The op of the latest recorded execution (0 when empty): a protocol that numbers
    /// executions only for the table continues from it after a restore.
    pub fn last_op(&self) -> u64 {
        self.by_op.last_key_value().map_or(0, |(&op, _)| op)
    }

    /// What the table knows of request `id`, which the client sent with mark `acked_below`.
    pub fn lookup(&self, id: RequestId, acked_below: u64) -> Lookup<'_> {
        let row = self.rows.get(&id.client);
        let mark = row.map_or(acked_below, |row| row.acked_below.max(acked_below));
        if id.number < mark {
            return Lookup::Old;
        }
        if let Some(result) = row.and_then(|row| row.result(id.number)) {
            return Lookup::Executed(result);
        }
        if id.number >= mark.saturating_add(self.window) {
            return Lookup::BeyondWindow;
        }
        Lookup::New
    }

    /// Records that request `id`, sent with mark `acked_below`, executed at `op` with `result`.
    /// The caller looked it up first and found it [`Lookup::New`].
    pub fn record(&mut self, id: RequestId, acked_below: u64, result: CommandResult, op: u64) {
        assert!(!self.by_op.contains_key(&op), "each op executes once");
        assert_eq!(self.lookup(id, acked_below), Lookup::New, "only new requests execute");
        let row = self.rows.entry(id.client).or_insert_with(|| Row { acked_below, results: Vec::new(), op });
        if row.op != op {
            assert!(row.op < op, "ops execute in increasing order");
            self.by_op.remove(&row.op);
        }
        row.acked_below = row.acked_below.max(acked_below);
        let mark = row.acked_below;
        row.results.retain(|&(number, _)| number >= mark);
        let at = row.results.partition_point(|&(number, _)| number < id.number);
        row.results.insert(at, (id.number, result));
        row.op = op;
        assert!(row.results.len() as u64 <= self.window, "a row holds at most a window of results");
        self.by_op.insert(op, id.client);
        self.evict();
    }

    fn evict(&mut self) {
        while self.rows.len() > self.clients_max {
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
                acked_below: row.acked_below,
                results: row.results.clone(),
                op: row.op,
            })
            .collect()
    }

    /// A table rebuilt from snapshot rows; `None` if they are inconsistent (duplicate clients or
    /// ops, results below their mark or beyond this table's window). Evicts down to
    /// `clients_max` if the rows came from a replica with a larger bound.
    pub fn from_records(clients_max: usize, window: usize, records: &[ClientRecord]) -> Option<Self> {
        let mut table = ClientTable::new(clients_max, window);
        for record in records {
            if table.rows.contains_key(&record.client) || table.by_op.contains_key(&record.op) {
                return None;
            }
            let results = record.results.clone();
            let in_window =
                |number: u64| number >= record.acked_below && number < record.acked_below.saturating_add(table.window);
            let ascending = results.windows(2).all(|pair| pair[0].0 < pair[1].0);
            if !ascending || !results.iter().all(|&(number, _)| in_window(number)) {
                return None;
            }
            table.rows.insert(record.client, Row { acked_below: record.acked_below, results, op: record.op });
            table.by_op.insert(record.op, record.client);
        }
        table.evict();
        Some(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(client: u64, number: u64) -> RequestId {
        RequestId { client: ClientId(client), number }
    }

    #[test]
    fn lookup_and_eviction_order() {
        // Goal: with a window of one the table answers retries of the last request and evicts
        // the least recently executed client.
        // Method: three clients in a table of two, then round-trip through snapshot rows.
        let mut table = ClientTable::new(2, 1);
        table.record(id(1, 1), 1, CommandResult::Ok, 1);
        table.record(id(2, 1), 1, CommandResult::Integer(5), 2);
        assert_eq!(table.lookup(id(2, 1), 1), Lookup::Executed(&CommandResult::Integer(5)));
        assert_eq!(table.lookup(id(2, 2), 2), Lookup::New);
        table.record(id(1, 2), 2, CommandResult::Nil, 3);
        assert_eq!(table.lookup(id(1, 1), 1), Lookup::Old);
        table.record(id(3, 1), 1, CommandResult::Ok, 4);
        assert_eq!(table.len(), 2);
        assert_eq!(table.lookup(id(2, 1), 1), Lookup::New, "client 2 executed longest ago");
        let rebuilt = ClientTable::from_records(2, 1, &table.to_records()).unwrap();
        assert_eq!(rebuilt, table);
        let smaller = ClientTable::from_records(1, 1, &table.to_records()).unwrap();
        assert_eq!(smaller.lookup(id(3, 1), 1), Lookup::Executed(&CommandResult::Ok));
        assert_eq!(smaller.len(), 1);
    }

    #[test]
    fn a_pipelining_client_gets_each_result_once_within_its_window() {
        // Goal: requests of one client execute in any order, each at most once, retries get
        // their own result until the client acknowledges it, and the row never holds more than
        // the window.
        // Method: window 3; requests 1..3 in flight, executed out of order; then the mark moves.
        let mut table = ClientTable::new(4, 3);
        table.record(id(1, 3), 1, CommandResult::Integer(3), 1);
        table.record(id(1, 1), 1, CommandResult::Integer(1), 2);
        assert_eq!(table.lookup(id(1, 3), 1), Lookup::Executed(&CommandResult::Integer(3)));
        assert_eq!(table.lookup(id(1, 2), 1), Lookup::New);
        assert_eq!(table.lookup(id(1, 4), 1), Lookup::BeyondWindow, "4 is beyond 1 + 3");
        // Request 1 answered: the client's mark is 2, so 4 fits and 1 is old.
        assert_eq!(table.lookup(id(1, 4), 2), Lookup::New);
        table.record(id(1, 4), 2, CommandResult::Integer(4), 3);
        assert_eq!(table.lookup(id(1, 1), 1), Lookup::Old, "the row's mark counts, not the request's");
        assert_eq!(table.lookup(id(1, 3), 2), Lookup::Executed(&CommandResult::Integer(3)));
        assert_eq!(table.to_records()[0].results.len(), 2, "result 1 was dropped at the mark");
        let rebuilt = ClientTable::from_records(4, 3, &table.to_records()).unwrap();
        assert_eq!(rebuilt, table);
        assert!(ClientTable::from_records(4, 1, &table.to_records()).is_none(), "a narrower window refuses it");
    }

    #[test]
    fn inconsistent_rows_are_refused() {
        // Goal: a snapshot naming one client twice, or a result below its mark, is bad input,
        // not a panic.
        let row = ClientRecord { client: ClientId(1), acked_below: 1, results: vec![(1, CommandResult::Ok)], op: 1 };
        let mut twice = row.clone();
        twice.op = 2;
        assert!(ClientTable::from_records(4, 1, &[row.clone(), twice]).is_none());
        let below = ClientRecord { acked_below: 2, ..row };
        assert!(ClientTable::from_records(4, 1, &[below]).is_none());
    }
}
