//! Execution: the state machine, the client table (at-most-once, §5.1) and how far the log was
//! applied. Only the leader executes as it appends; followers execute up to their sync-point
//! (§5.2.4, §5.3). Entries are applied in slot order, each once, NO-OPs skipped.
//!
//! An ousted leader may have executed requests the next view dropped (§5.3). It does not roll
//! back: when a new log differs from what it executed, the state is rebuilt from the log's
//! checkpoint ([`Execution::restored`], committed slots only) and the held entries are executed
//! again — a state transfer whose source is the agreed log (see `log.rs`).
//!
//! The client table is the shared one (`crate::client_table`) with a window of one: NOPaxos
//! clients have one request outstanding, so a request's own number is its client's
//! acknowledgement mark, and the table keeps each client's latest executed request.

use super::log::Checkpoint;
use super::messages::Entry;
use crate::client_table::{ClientTable, Lookup};
use ordo_core::{CommandResult, RequestId, StateMachine};

/// What applying one entry did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// A NO-OP.
    NoOp,
    /// A new request, with its result.
    Executed(CommandResult),
    /// A request already executed, with the cached result if it is the client's latest.
    Duplicate(Option<CommandResult>),
}

/// The state machine and what has been applied to it.
pub struct Execution {
    new_state_machine: fn() -> Box<dyn StateMachine>,
    state_machine: Box<dyn StateMachine>,
    table: ClientTable,
    table_max: usize,
    /// Every slot up to here is applied.
    executed: u64,
}

impl Execution {
    /// A fresh state machine, nothing applied.
    pub fn new(new_state_machine: fn() -> Box<dyn StateMachine>, table_max: usize) -> Self {
        Execution {
            new_state_machine,
            state_machine: new_state_machine(),
            table: ClientTable::new(table_max, 1),
            table_max,
            executed: 0,
        }
    }

    /// The last slot applied.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// The state machine.
    pub fn state_machine(&self) -> &dyn StateMachine {
        self.state_machine.as_ref()
    }

    /// Applies `entry`, which must be at the next slot.
    pub fn apply(&mut self, slot: u64, entry: &Entry) -> Applied {
        assert_eq!(slot, self.executed + 1, "entries are applied in slot order");
        self.executed = slot;
        let Entry::Request(request) = entry else { return Applied::NoOp };
        let id = request.id;
        match self.table.lookup(id, id.number) {
            Lookup::Executed(result) => Applied::Duplicate(Some(result.clone())),
            Lookup::Old | Lookup::BeyondWindow => Applied::Duplicate(None),
            Lookup::New => {
                let result = self.state_machine.apply(id, &request.command);
                self.table.record(id, id.number, result.clone(), slot);
                Applied::Executed(result)
            }
        }
    }

    /// The result of `id` if it is its client's latest executed request.
    pub fn cached(&self, id: RequestId) -> Option<CommandResult> {
        match self.table.lookup(id, id.number) {
            Lookup::Executed(result) => Some(result.clone()),
            _ => None,
        }
    }

    /// The state and client table after the last slot applied.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint { slot: self.executed, state: self.state_machine.snapshot(), clients: self.table.to_records() }
    }

    /// A state rebuilt from `checkpoint`; an error if a peer's checkpoint does not decode.
    pub fn restored(&self, checkpoint: &Checkpoint) -> Result<Execution, String> {
        let mut state_machine = (self.new_state_machine)();
        // Slot 0 is the initial state: nothing to decode.
        if checkpoint.slot > 0 {
            state_machine.restore(&checkpoint.state).map_err(|e| format!("{e:?}"))?;
        }
        let table = ClientTable::from_records(self.table_max, 1, &checkpoint.clients)
            .ok_or_else(|| "inconsistent client table".to_string())?;
        Ok(Execution {
            new_state_machine: self.new_state_machine,
            state_machine,
            table,
            table_max: self.table_max,
            executed: checkpoint.slot,
        })
    }
}
