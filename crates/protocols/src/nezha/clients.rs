//! The replica's client table (§5.6): each client's last executed request number and result,
//! for at-most-once execution. It is bounded: past `client_table_max` clients, the client whose
//! last request executed at the lowest log position is forgotten. Positions are the same on
//! every replica (they execute the same log), and checkpoints carry each row's position, so
//! every replica, and every one restored from a checkpoint, forgets the same client. A live
//! client is forgotten only after `client_table_max` other clients executed since its last
//! request, so a retry of that request is what loses its protection (as in
//! [`crate::client_table`]).

use ordo_core::{ClientId, CommandResult};
use std::collections::BTreeMap;

/// One client's row.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    number: u64,
    result: CommandResult,
    /// The log position at which it executed: the eviction order.
    position: u64,
}

/// The client table, bounded by least recent execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Clients {
    rows: BTreeMap<ClientId, Row>,
    /// Each row's position, to find the least recent in logarithmic time.
    by_position: BTreeMap<u64, ClientId>,
    max: usize,
}

/// A row as checkpoints carry it: client, request number, result, position.
pub type ClientRow = (ClientId, u64, CommandResult, u64);

impl Clients {
    /// An empty table of at most `max` clients.
    pub(super) fn new(max: usize) -> Self {
        Clients { rows: BTreeMap::new(), by_position: BTreeMap::new(), max: max.max(1) }
    }

    /// The client's last executed request number and its result.
    pub(super) fn get(&self, client: ClientId) -> Option<(u64, &CommandResult)> {
        self.rows.get(&client).map(|row| (row.number, &row.result))
    }

    /// The client's request `number` executed at `position` with `result`.
    pub(super) fn record(&mut self, client: ClientId, number: u64, result: CommandResult, position: u64) {
        if let Some(old) = self.rows.insert(client, Row { number, result, position }) {
            self.by_position.remove(&old.position);
        }
        self.by_position.insert(position, client);
        while self.rows.len() > self.max {
            let (_, evicted) = self.by_position.pop_first().expect("a row per position");
            self.rows.remove(&evicted);
        }
    }

    /// The rows, by client, for a checkpoint.
    pub(super) fn rows(&self) -> Vec<ClientRow> {
        self.rows.iter().map(|(client, row)| (*client, row.number, row.result.clone(), row.position)).collect()
    }

    /// The table of a checkpoint's rows (the least recent ones beyond the bound forgotten).
    pub(super) fn from_rows(rows: &[ClientRow], max: usize) -> Self {
        let mut table = Clients::new(max);
        let mut by_position: Vec<&ClientRow> = rows.iter().collect();
        by_position.sort_unstable_by_key(|row| row.3);
        for (client, number, result, position) in by_position {
            table.record(*client, *number, result.clone(), *position);
        }
        table
    }

    /// Clients held.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Panics unless every row has its own position.
    pub(super) fn check_invariants(&self) {
        assert!(self.rows.len() <= self.max, "client table within its limit");
        assert_eq!(self.rows.len(), self.by_position.len(), "one position per row");
        for (position, client) in &self.by_position {
            assert_eq!(self.rows.get(client).map(|row| row.position), Some(*position), "positions index the rows");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> CommandResult {
        CommandResult::Ok
    }

    #[test]
    fn the_least_recently_executed_client_is_forgotten() {
        // Goal: past the bound, the client whose last request executed earliest goes, not the
        // lowest id; a checkpoint's rows rebuild the same table.
        let mut table = Clients::new(2);
        table.record(ClientId(1), 1, ok(), 1);
        table.record(ClientId(9), 1, ok(), 2);
        table.record(ClientId(1), 2, ok(), 3);
        table.record(ClientId(5), 1, ok(), 4);
        assert_eq!(table.get(ClientId(9)), None, "9 executed least recently");
        assert_eq!(table.get(ClientId(1)).map(|(n, _)| n), Some(2), "1 is live although its id is lowest");
        assert!(table.get(ClientId(5)).is_some());
        table.check_invariants();
        assert_eq!(Clients::from_rows(&table.rows(), 2), table);
        let smaller = Clients::from_rows(&table.rows(), 1);
        assert_eq!(smaller.rows().iter().map(|row| row.0).collect::<Vec<_>>(), vec![ClientId(5)]);
    }
}
