//! One connection's requests, in the order they were sent. Redis runs a connection's commands one
//! after the other, and clients rely on it: a pipelined `SET k v; GET k` reads `v`, and anyone who
//! sees the effect of a later command of a connection also sees the effects of its earlier ones.
//!
//! The gateway keeps that by submitting a connection's replicated commands one at a time: the
//! next is handed to the host only once the previous one has completed. Two commands submitted
//! together would go to two client nodes and could be ordered either way by the protocol, even
//! when they touch different keys (see docs/runtime.md, "Order per connection", for why waiting
//! only for conflicting commands is not enough). Connections still run in parallel with each
//! other, and a pipeline still saves the client its round trips to the gateway.
//!
//! Commands the gateway answers itself (PING, HELLO, CLIENT, ...) are planned when they are read:
//! they touch only the connection's session, which no replicated command reads, and their replies
//! take their place in the same in-order stream as the others.

use super::expiry::{Expiring, wall_ms};
use super::transaction::{Exec, Watched, exec_reply};
use super::{Gateway, Shape, reply};
use crate::host::{Outcome, Request};
use crate::resp::{self, Reply, RespVersion};
use bytes::{Bytes, BytesMut};
use ordo_core::Command;
use std::cell::RefCell;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Most requests of one connection planned and not yet answered. Requests beyond it stay unparsed
/// in the input buffer, and the connection is not read, until these are answered: TCP's flow
/// control then holds the client back. Nothing is refused; a long pipeline just waits.
pub const PIPELINE_MAX: usize = 1_024;

/// Largest unparsed input a connection may hold (a bulk string up to the limit plus slack).
const INPUT_MAX: usize = resp::BULK_LEN_MAX + 64 * 1024;

/// Replies are written to the socket once this many bytes are waiting, so that a long pipeline
/// of large replies does not pile up in memory.
const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;

/// A request in request order, with the RESP version the connection spoke when it was read (a
/// pipelined HELLO changes it only for the requests after it).
#[derive(Debug)]
pub(crate) enum Pending {
    /// Answered by the gateway when it was read.
    Ready(Reply, RespVersion),
    /// A command for the protocol, not yet submitted: it is, once every earlier request of the
    /// connection has been answered.
    Replicate(Command, Shape, RespVersion),
    /// WATCH: the keys' versions are read, in turn, and kept with the connection.
    Watch(Vec<Bytes>, RespVersion),
    /// UNWATCH, DISCARD, EXECABORT: the watched keys are forgotten, in turn.
    Unwatch(Reply, RespVersion),
    /// EXEC: the transaction runs, in turn, with the keys watched by then.
    Exec(Exec, RespVersion),
}

/// Plans complete requests of `input` into `pending`, until the input holds no complete request
/// or `pending` holds [`PIPELINE_MAX`]; true when the connection must close after replying (QUIT,
/// malformed input).
pub(crate) fn plan_input(input: &mut BytesMut, gateway: &Gateway, id: u64, pending: &mut Vec<Pending>) -> bool {
    while pending.len() < PIPELINE_MAX {
        let args = match resp::parse(input) {
            Ok(None) => return false,
            Ok(Some(args)) if args.is_empty() => continue,
            Ok(Some(args)) => args,
            Err(error) => {
                pending.push(Pending::Ready(Reply::Error(format!("ERR {error}")), gateway.version(id)));
                return true;
            }
        };
        let action = gateway.plan(id, &args);
        // Planned first: HELLO's own reply is in the version it chose.
        let version = gateway.version(id);
        match action {
            super::Action::Reply(reply) => pending.push(Pending::Ready(reply, version)),
            super::Action::Close(reply) => {
                pending.push(Pending::Ready(reply, version));
                return true;
            }
            super::Action::Replicate(command, shape) => pending.push(Pending::Replicate(command, shape, version)),
            super::Action::Watch(keys) => pending.push(Pending::Watch(keys, version)),
            super::Action::Unwatch(reply) => pending.push(Pending::Unwatch(reply, version)),
            super::Action::Exec(exec) => pending.push(Pending::Exec(exec, version)),
        }
    }
    false
}

/// Submits one command to the host and waits for its outcome. A request the host's channel cannot
/// take was never submitted, so it is `Busy` (safe to follow with the next command); a request the
/// host dropped unanswered may have run, so it is `Timeout`.
///
/// The command leaves stamped with the gateway's clock ([`Command::Timed`]), and the keys it
/// gives an expiry are remembered for the sweep.
pub(crate) async fn submit(
    requests: &mpsc::Sender<Request>,
    expiring: &RefCell<Expiring>,
    command: Command,
) -> Outcome {
    let now = wall_ms();
    expiring.borrow_mut().note(&command, now);
    let command = command.timed(now);
    let (reply, receiver) = oneshot::channel();
    if requests.try_send(Request { command, reply }).is_err() {
        return Outcome::Busy;
    }
    receiver.await.unwrap_or(Outcome::Timeout)
}

/// Answers `pending` in order, writing the replies to `writer`: each replicated command is
/// submitted only after the previous one has completed. `watched` is the connection's WATCH
/// state, read and changed in request order. True when the connection must close because a
/// command's outcome is unknown (`-TIMEOUT`): it may still take effect later, so a later
/// command of the connection could overtake it; the requests after it are not run.
pub(crate) async fn answer<W: AsyncWrite + Unpin>(
    pending: &mut Vec<Pending>,
    requests: &mpsc::Sender<Request>,
    expiring: &RefCell<Expiring>,
    watched: &mut Watched,
    output: &mut Vec<u8>,
    writer: &mut W,
) -> std::io::Result<bool> {
    let mut unknown = false;
    for item in pending.drain(..) {
        match item {
            Pending::Ready(reply, version) => reply.encode(version, output),
            Pending::Replicate(command, shape, version) => {
                let outcome = submit(requests, expiring, command).await;
                unknown = outcome == Outcome::Timeout;
                reply(outcome, shape).encode(version, output);
            }
            Pending::Watch(keys, version) => {
                let outcome = submit(requests, expiring, Command::Versions { keys: keys.clone() }).await;
                unknown = outcome == Outcome::Timeout;
                watched.record(keys, outcome).encode(version, output);
            }
            Pending::Unwatch(reply, version) => {
                watched.clear();
                reply.encode(version, output);
            }
            Pending::Exec(exec, version) => match watched.exec(&exec) {
                Ok(transaction) => {
                    let outcome = submit(requests, expiring, transaction).await;
                    unknown = outcome == Outcome::Timeout;
                    exec_reply(outcome, &exec.slots).encode(version, output);
                }
                Err(reply) => reply.encode(version, output),
            },
        }
        if output.len() >= OUTPUT_FLUSH_BYTES || unknown {
            writer.write_all(output).await?;
            output.clear();
        }
        if unknown {
            break;
        }
    }
    writer.write_all(output).await?;
    output.clear();
    Ok(unknown)
}

/// Serves one connection until it closes: reads requests, plans them, answers them in order.
pub(crate) async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    requests: mpsc::Sender<Request>,
    gateway: &Gateway,
    id: u64,
) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = Vec::with_capacity(16 * 1024);
    let mut pending: Vec<Pending> = Vec::new();
    let mut watched = Watched::default();
    loop {
        let mut close = plan_input(&mut input, gateway, id, &mut pending);
        if pending.is_empty() {
            // Only part of a request is left: read the rest, within the limit.
            if input.len() <= INPUT_MAX {
                if stream.read_buf(&mut input).await? == 0 {
                    return Ok(());
                }
                continue;
            }
            let error = Reply::Error("ERR Protocol error: request too large".into());
            pending.push(Pending::Ready(error, gateway.version(id)));
            close = true;
        }
        close |= answer(&mut pending, &requests, &gateway.expiring, &mut watched, &mut output, stream).await?;
        if close {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests;
