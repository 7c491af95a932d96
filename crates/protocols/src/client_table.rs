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
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

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
///
/// Every executed request passes through [`ClientTable::record`], so its rows sit in a hash map
/// and its eviction order in a queue of (op, client) appended in op order. A client's earlier
/// entries in that queue go stale when it executes again; they are skipped when evicting and
/// dropped when they outnumber the live ones, so the queue stays within twice the rows.
#[derive(Clone, Debug)]
pub struct ClientTable {
    clients_max: usize,
    window: u64,
    rows: FxHashMap<ClientId, Row>,
    /// (op, client) in increasing op order; an entry is live while it is its client's `Row::op`.
    /// The first live entry is the client whose last request executed longest ago.
    by_op: VecDeque<(u64, ClientId)>,
    /// The highest op recorded (or restored).
    last_op: u64,
}

impl PartialEq for ClientTable {
    /// Same bounds and same rows; stale queue entries do not count.
    fn eq(&self, other: &Self) -> bool {
        self.clients_max == other.clients_max && self.window == other.window && self.rows == other.rows
    }
}

impl Eq for ClientTable {}

impl ClientTable {
    /// An empty table for at most `clients_max` clients, each with at most `window` requests in
    /// flight.
    pub fn new(clients_max: usize, window: usize) -> Self {
        assert!(clients_max > 0, "a client table must hold at least one client");
        assert!(window > 0, "a client has at least one request in flight");
        ClientTable {
            clients_max,
            window: window as u64,
            rows: FxHashMap::default(),
            by_op: VecDeque::new(),
            last_op: 0,
        }
    }

    /// Clients held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no client is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The highest op recorded, 0 if none.
    pub fn last_op(&self) -> u64 {
        self.last_op
    }

    /// What the table knows of request `id`, sent with acknowledgement mark `acked_below`.
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

    /// Records that request `id` (a [`Lookup::New`] one) executed at `op` with `result`. Ops
    /// increase from one record to the next.
    pub fn record(&mut self, id: RequestId, acked_below: u64, result: CommandResult, op: u64) {
        assert!(op > self.last_op, "each op executes once, in increasing order");
        assert_eq!(self.lookup(id, acked_below), Lookup::New, "only new requests execute");
        let row = self.rows.entry(id.client).or_insert_with(|| Row { acked_below, results: Vec::new(), op });
        row.acked_below = row.acked_below.max(acked_below);
        let mark = row.acked_below;
        row.results.retain(|&(number, _)| number >= mark);
        let at = row.results.partition_point(|&(number, _)| number < id.number);
        row.results.insert(at, (id.number, result));
        row.op = op;
        assert!(row.results.len() as u64 <= self.window, "a row holds at most a window of results");
        self.by_op.push_back((op, id.client));
        self.last_op = op;
        self.evict();
    }

    /// Whether the queue entry (op, client) is its client's latest.
    fn is_live(&self, (op, client): (u64, ClientId)) -> bool {
        self.rows.get(&client).is_some_and(|row| row.op == op)
    }

    /// Evicts the clients whose last request executed longest ago until at most `clients_max`
    /// remain, then drops stale queue entries if they outnumber the live ones.
    fn evict(&mut self) {
        while self.rows.len() > self.clients_max {
            let entry = self.by_op.pop_front().expect("every row has a live entry in the queue");
            if self.is_live(entry) {
                self.rows.remove(&entry.1);
            }
        }
        if self.by_op.len() > 2 * self.rows.len() + 16 {
            let rows = &self.rows;
            self.by_op.retain(|&(op, client)| rows.get(&client).is_some_and(|row| row.op == op));
            assert_eq!(self.by_op.len(), self.rows.len(), "one live queue entry per row");
        }
        assert!(self.by_op.len() >= self.rows.len(), "every row has a live entry in the queue");
    }

    /// The rows, for a snapshot, by client.
    pub fn to_records(&self) -> Vec<ClientRecord> {
        let mut records: Vec<ClientRecord> = self
            .rows
            .iter()
            .map(|(client, row)| ClientRecord {
                client: *client,
                acked_below: row.acked_below,
                results: row.results.clone(),
                op: row.op,
            })
            .collect();
        records.sort_unstable_by_key(|record| record.client);
        records
    }

    /// Rebuilds a table from a snapshot's rows; `None` if they are inconsistent (a client or an
    /// op twice, results out of order or outside the window). Keeps the `clients_max` most
    /// recent clients if there are more.
    pub fn from_records(clients_max: usize, window: usize, records: &[ClientRecord]) -> Option<Self> {
        let mut table = ClientTable::new(clients_max, window);
        let mut by_op = Vec::with_capacity(records.len());
        for record in records {
            if table.rows.contains_key(&record.client) {
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
            by_op.push((record.op, record.client));
        }
        by_op.sort_unstable();
        if by_op.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return None;
        }
        table.last_op = by_op.last().map_or(0, |&(op, _)| op);
        table.by_op = by_op.into();
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
    fn the_eviction_queue_stays_bounded_and_evicts_the_oldest() {
        let mut table = ClientTable::new(3, 1);
        for op in 1..=1000 {
            // Client 1 executes again and again; clients 2 and 3 once each, early.
            let client = match op {
                2 => 2,
                3 => 3,
                _ => 1,
            };
            table.record(id(client, op), op, CommandResult::Ok, op);
            assert!(table.by_op.len() <= 2 * table.len() + 16, "stale entries are dropped");
        }
        assert_eq!(table.last_op(), 1000);
        table.record(id(4, 1), 1, CommandResult::Ok, 1001);
        assert_eq!(table.len(), 3);
        assert_eq!(table.lookup(id(2, 2), 2), Lookup::New, "client 2 executed longest ago: evicted");
        assert_eq!(table.lookup(id(3, 3), 3), Lookup::Executed(&CommandResult::Ok));
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
