//! Execution, apart from agreement: applies committed entries to the state machine in op order,
//! at most once per request, and snapshots or restores the state machine with the client table.
//!
//! Multi-Paxos' order is log order (`crate::executor::log`), and this executor is that log
//! executor's consumer with the buffering already done: committed entries arrive here from the
//! replica's own log, in op order, as the commit number moves (`Replica::execute_committed`).
//! That log is the gap buffer, bounded by the replica's log limit and emptied by checkpoints, so
//! a second buffer here would only copy entries. The log executor is kept with a one-slot window
//! as the cursor: it is where "each op once, in order, none skipped" is checked, and a snapshot
//! moves it.

use super::messages::{Entry, Snapshot};
use crate::client_table::{ClientTable, Lookup};
use crate::executor::log::LogExecutor;
use ordo_core::{CommandResult, StateMachine};

/// What executing one entry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran and gave this result.
    Applied(CommandResult),
    /// The request had executed before (a retry that reached the log twice), or its client
    /// needs no answer (below its mark, or beyond its window): the state did not change; the
    /// result is the cached one while the client may still ask for it.
    Duplicate(Option<CommandResult>),
}

/// A snapshot could not be installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// The state bytes do not decode.
    State,
    /// The client table rows are inconsistent.
    ClientTable,
}

/// The state machine, the client table and how far they have executed.
pub struct Executor {
    state_machine: Box<dyn StateMachine>,
    new_state_machine: fn() -> Box<dyn StateMachine>,
    client_table: ClientTable,
    client_table_max: usize,
    client_window: usize,
    /// A canary's flaw: executed requests that reach the log again are applied again.
    pub(crate) reexecute_retries: bool,
    /// The next op to execute; a one-slot window, since ops come in order.
    order: LogExecutor<()>,
}

impl Executor {
    /// A fresh state machine at op 0.
    pub fn new(
        new_state_machine: fn() -> Box<dyn StateMachine>,
        client_table_max: usize,
        client_window: usize,
    ) -> Self {
        Executor {
            state_machine: new_state_machine(),
            new_state_machine,
            client_table: ClientTable::new(client_table_max, client_window),
            client_table_max,
            client_window,
            reexecute_retries: false,
            order: LogExecutor::new(1, 1),
        }
    }

    /// The last op executed.
    pub fn executed(&self) -> u64 {
        self.order.next_slot() - 1
    }

    /// The client table.
    pub fn client_table(&self) -> &ClientTable {
        &self.client_table
    }

    /// The state machine.
    pub fn state_machine(&self) -> &dyn StateMachine {
        self.state_machine.as_ref()
    }

    /// Executes `entry` at `op`, which must be the next op.
    pub fn execute(&mut self, op: u64, entry: &Entry) -> Outcome {
        self.order.commit(op, ()).expect("ops execute in order");
        let (released, ()) = self.order.pop().expect("the next op is released at once");
        assert_eq!(released, op, "ops execute in order");
        let outcome = match self.client_table.lookup(entry.id, entry.acked_below) {
            Lookup::Old | Lookup::BeyondWindow => Outcome::Duplicate(None),
            Lookup::Executed(_) if self.reexecute_retries => {
                Outcome::Applied(self.state_machine.apply(entry.id, &entry.command))
            }
            Lookup::Executed(result) => Outcome::Duplicate(Some(result.clone())),
            Lookup::New => {
                let result = self.state_machine.apply(entry.id, &entry.command);
                self.client_table.record(entry.id, entry.acked_below, result.clone(), op);
                Outcome::Applied(result)
            }
        };
        assert_eq!(self.executed(), op, "executed moves by one per entry");
        outcome
    }

    /// The state after `executed()`.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            op: self.executed(),
            state: self.state_machine.snapshot().into(),
            client_table: self.client_table.to_records(),
        }
    }

    /// Replaces the state with `snapshot`. On error nothing changes.
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), RestoreError> {
        let client_table = ClientTable::from_records(self.client_table_max, self.client_window, &snapshot.client_table)
            .ok_or(RestoreError::ClientTable)?;
        let mut state_machine = (self.new_state_machine)();
        state_machine.restore(&snapshot.state).map_err(|_| RestoreError::State)?;
        self.state_machine = state_machine;
        self.client_table = client_table;
        self.order = LogExecutor::new(snapshot.op + 1, 1);
        assert!(self.client_table.len() <= self.client_table_max, "the restored table respects its bound");
        Ok(())
    }

    /// A new state machine holding the same state (the early-reply canary's speculative copy).
    #[cfg_attr(not(feature = "canary"), allow(dead_code))]
    pub(crate) fn clone_state_machine(&self) -> Box<dyn StateMachine> {
        let mut copy = (self.new_state_machine)();
        copy.restore(&self.state_machine.snapshot()).expect("a state machine restores its own snapshot");
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::{ClientId, Command, KvStore, NodeId, RequestId};

    fn new_kv() -> Box<dyn StateMachine> {
        Box::new(KvStore::new())
    }

    fn incr(client: u64, number: u64) -> Entry {
        Entry {
            id: RequestId { client: ClientId(client), number },
            acked_below: number,
            reply_to: NodeId(0),
            command: Command::IncrBy { key: "n".into(), delta: 1 },
        }
    }

    #[test]
    fn duplicates_do_not_execute_twice() {
        // Goal: at-most-once execution. Method: the same request at two ops, then an older one.
        let mut executor = Executor::new(new_kv, 10, 1);
        assert_eq!(executor.execute(1, &incr(1, 1)), Outcome::Applied(CommandResult::Integer(1)));
        assert_eq!(executor.execute(2, &incr(1, 1)), Outcome::Duplicate(Some(CommandResult::Integer(1))));
        assert_eq!(executor.execute(3, &incr(1, 2)), Outcome::Applied(CommandResult::Integer(2)));
        assert_eq!(executor.execute(4, &incr(1, 1)), Outcome::Duplicate(None));
        assert_eq!(executor.executed(), 4);
    }

    #[test]
    fn snapshot_round_trip_and_bad_snapshot() {
        // Goal: a snapshot restores state and table; a corrupt one changes nothing.
        let mut executor = Executor::new(new_kv, 10, 1);
        executor.execute(1, &incr(1, 1));
        let snapshot = executor.snapshot();
        let mut other = Executor::new(new_kv, 10, 1);
        other.restore(&snapshot).unwrap();
        assert_eq!(other.executed(), 1);
        assert_eq!(other.execute(2, &incr(1, 1)), Outcome::Duplicate(Some(CommandResult::Integer(1))));
        let corrupt = Snapshot { op: 9, state: bytes::Bytes::from_static(b"\xff\xff"), client_table: vec![] };
        assert_eq!(other.restore(&corrupt), Err(RestoreError::State));
        assert_eq!(other.executed(), 2);
    }
}
