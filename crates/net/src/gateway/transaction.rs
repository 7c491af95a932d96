//! Redis transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//!
//! Between MULTI and EXEC a connection's commands are queued in its session ([`Queue`]) and
//! answered `QUEUED`; EXEC sends them as one replicated [`Command::Transaction`], which every
//! replica executes at one point of the order, so nothing else runs between them. Commands the
//! gateway answers itself (PING, ECHO, ...) and argument errors found while planning take their
//! place in EXEC's reply array as they were answered when queued; an unknown command or a wrong
//! number of arguments fails the whole transaction (EXECABORT), as in Redis.
//!
//! WATCH reads the keys' versions through the protocol ([`Command::Versions`]) and keeps them
//! with the connection ([`Watched`]); EXEC carries them, and the replicas run the transaction
//! only if every watched key is still at its version (Redis answers a null array otherwise).
//! The versions are read and kept while the connection's requests are answered, in order, not
//! when they are planned: a pipelined `WATCH k; MULTI; ...; EXEC` gets the versions its WATCH
//! read. A WATCH whose read failed makes the next EXEC abort rather than run unwatched.

use super::{Action, Shape, error, reply};
use crate::host::Outcome;
use crate::resp::Reply;
use bytes::Bytes;
use ordo_core::{Command, CommandResult, Key};

/// Most commands one transaction may queue.
pub const QUEUED_MAX: usize = 10_000;

/// Most argument bytes one transaction may queue: it travels as one replicated command, which
/// must stay well below the runtime's largest message.
pub const QUEUED_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Where one queued command's reply comes from in EXEC's array.
#[derive(Clone, Debug, PartialEq)]
pub enum Slot {
    /// Answered when it was queued (a gateway command, or an argument error).
    Answered(Reply),
    /// The next result of the replicated transaction, shaped like the command's own reply.
    Replicated(Shape),
}

/// A transaction being queued, between MULTI and EXEC.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Queue {
    slots: Vec<Slot>,
    commands: Vec<Command>,
    bytes: usize,
    /// A command was refused while queuing: EXEC discards the transaction (EXECABORT).
    failed: bool,
}

impl Queue {
    /// Commands queued so far (CLIENT LIST's `multi=`).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True before the first command is queued.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// What EXEC runs: the replicated commands, and every queued command's place in the reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Exec {
    /// One per queued command, in order.
    pub slots: Vec<Slot>,
    /// The replicated ones, in order: one per [`Slot::Replicated`].
    pub commands: Vec<Command>,
}

/// A connection's watched keys, with the versions WATCH read.
#[derive(Debug, Default)]
pub struct Watched {
    keys: Vec<(Key, u64)>,
    /// A WATCH's read failed: the next EXEC aborts.
    lost: bool,
}

impl Watched {
    /// Forgets every watched key (UNWATCH, DISCARD, EXEC).
    pub fn clear(&mut self) {
        *self = Watched::default();
    }

    /// Takes in WATCH's outcome for `keys`, and answers it.
    pub fn record(&mut self, keys: Vec<Key>, outcome: Outcome) -> Reply {
        match outcome {
            Outcome::Done(CommandResult::Versions(versions)) if versions.len() == keys.len() => {
                self.keys.extend(keys.into_iter().zip(versions));
                Reply::Simple("OK")
            }
            other => {
                self.lost = true;
                match reply(other, Shape::Plain) {
                    Reply::Error(text) => Reply::Error(text),
                    _ => Reply::Error("ERR WATCH could not read the keys' versions".into()),
                }
            }
        }
    }

    /// The transaction EXEC submits, or the reply when there is nothing to submit: the watch
    /// is consumed either way.
    pub fn exec(&mut self, exec: &Exec) -> Result<Command, Reply> {
        let watched = std::mem::take(self);
        if watched.lost {
            return Err(Reply::NullArray);
        }
        if exec.commands.is_empty() && watched.keys.is_empty() {
            return Err(exec_reply(Outcome::Done(CommandResult::Results(Vec::new())), &exec.slots));
        }
        Ok(Command::Transaction { watched: watched.keys, commands: exec.commands.clone() })
    }
}

/// EXEC's reply: every queued command's reply in order, a null array when a watched key moved.
pub fn exec_reply(outcome: Outcome, slots: &[Slot]) -> Reply {
    let results = match outcome {
        Outcome::Done(CommandResult::Results(results)) => results,
        Outcome::Done(CommandResult::Nil) => return Reply::NullArray,
        other @ (Outcome::Done(CommandResult::Error(_)) | Outcome::Timeout | Outcome::Busy) => {
            return reply(other, Shape::Plain);
        }
        Outcome::Done(other) => return Reply::Error(format!("ERR unexpected transaction result {other:?}")),
    };
    let replicated = slots.iter().filter(|slot| matches!(slot, Slot::Replicated(_))).count();
    if results.len() != replicated {
        return Reply::Error(format!("ERR transaction returned {} results for {replicated} commands", results.len()));
    }
    let mut results = results.into_iter();
    let replies = slots.iter().map(|slot| match slot {
        Slot::Answered(answer) => answer.clone(),
        Slot::Replicated(shape) => reply(Outcome::Done(results.next().expect("counted above")), *shape),
    });
    Reply::Nested(replies.collect())
}

/// Plans a request of a connection inside MULTI (other than EXEC and DISCARD, which end it).
/// `checked` is the table's verdict on the name and arity (a refusal fails the transaction);
/// `planned` plans the command as it would be outside MULTI.
pub fn queue(
    queue: &mut Queue,
    args: &[Bytes],
    checked: Result<&'static str, Action>,
    planned: impl FnOnce(&'static str) -> Action,
) -> Action {
    let name = match checked {
        Ok(name) => name,
        Err(refused) => {
            queue.failed = true;
            return refused;
        }
    };
    match name {
        "MULTI" => return error("ERR MULTI calls can not be nested"),
        "WATCH" => {
            queue.failed = true;
            return error("ERR WATCH inside MULTI is not allowed");
        }
        _ => {}
    }
    let bytes: usize = args.iter().map(Bytes::len).sum();
    if queue.slots.len() >= QUEUED_MAX || queue.bytes + bytes > QUEUED_BYTES_MAX {
        queue.failed = true;
        return error(format!(
            "ERR transaction too large: at most {QUEUED_MAX} commands and {QUEUED_BYTES_MAX} bytes of arguments"
        ));
    }
    queue.bytes += bytes;
    match planned(name) {
        Action::Replicate(command, shape) => {
            queue.commands.push(command);
            queue.slots.push(Slot::Replicated(shape));
        }
        Action::Reply(answer) | Action::Unwatch(answer) => queue.slots.push(Slot::Answered(answer)),
        // QUIT: the connection closes and the queue goes with it.
        closing @ Action::Close(_) => return closing,
        other @ (Action::Watch(_) | Action::Exec(_)) => unreachable!("not planned inside MULTI: {other:?}"),
    }
    Action::Reply(Reply::Simple("QUEUED"))
}

/// EXEC or DISCARD of a queue: what the connection answers.
pub fn finish(queue: Queue, exec: bool) -> Action {
    if !exec {
        return Action::Unwatch(Reply::Simple("OK"));
    }
    if queue.failed {
        return Action::Unwatch(Reply::Error("EXECABORT Transaction discarded because of previous errors.".into()));
    }
    Action::Exec(Exec { slots: queue.slots, commands: queue.commands })
}
