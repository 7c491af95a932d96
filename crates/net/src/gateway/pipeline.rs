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

// Backpressure: a connection is read only when none of its requests is waiting for an answer.
// At most `pipeline_depth_max` requests are planned from what was read; requests beyond them stay
// unparsed in the input buffer until those are answered, and TCP's flow control then holds the
// client back. Replies are written out once `reply_bytes_max` bytes wait, and answering goes on
// only when the socket took them, so a client that does not read its replies stops being served
// (and read) instead of growing the gateway's memory. Nothing is refused: a long pipeline waits.

/// Largest unparsed input a connection may hold (a bulk string up to the limit plus slack).
const INPUT_MAX: usize = resp::BULK_LEN_MAX + 64 * 1024;

/// Replies waiting to be written to one connection, and its limits.
#[derive(Debug)]
pub(crate) struct Output {
    /// Encoded replies not yet written.
    pub(crate) bytes: Vec<u8>,
    /// The replies are written once this many bytes wait.
    budget: usize,
    /// A write not finished within this long closes the connection (zero: never).
    timeout: std::time::Duration,
}

impl Output {
    /// An empty output with the gateway's limits.
    pub(crate) fn new(facts: &super::session::ServerFacts) -> Output {
        Output {
            bytes: Vec::with_capacity(16 * 1024),
            budget: facts.reply_bytes_max.max(1),
            timeout: facts.idle_timeout,
        }
    }

    /// Writes the waiting replies to `writer`. A client that has not taken them within the idle
    /// timeout (at most `budget` bytes and one reply) is gone or stuck: the connection fails
    /// with `TimedOut` and is closed.
    async fn write<W: AsyncWrite + Unpin>(&mut self, writer: &mut W) -> std::io::Result<()> {
        let result = within(self.timeout, writer.write_all(&self.bytes)).await;
        self.bytes.clear();
        result.unwrap_or_else(|| Err(std::io::ErrorKind::TimedOut.into()))
    }
}

impl Default for Output {
    fn default() -> Output {
        Output { bytes: Vec::new(), budget: 64 * 1024, timeout: std::time::Duration::ZERO }
    }
}

/// Runs `future`, giving up after `timeout` (never, for zero): None when it gave up.
pub(crate) async fn within<F: std::future::Future>(timeout: std::time::Duration, future: F) -> Option<F::Output> {
    if timeout.is_zero() {
        return Some(future.await);
    }
    tokio::time::timeout(timeout, future).await.ok()
}

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

/// A connection's unparsed input and where parsing it stopped.
#[derive(Debug, Default)]
pub(crate) struct Input {
    /// Bytes read and not yet parsed.
    pub(crate) bytes: BytesMut,
    parser: resp::Parser,
}

#[cfg(test)]
impl Input {
    /// Input that holds `bytes`, as if just read.
    pub(crate) fn from(bytes: &[u8]) -> Input {
        Input { bytes: BytesMut::from(bytes), parser: resp::Parser::default() }
    }
}

/// Plans complete requests of `input` into `pending`, until the input holds no complete request
/// or `pending` holds the gateway's `pipeline_depth_max`; true when the connection must close
/// after replying (QUIT, malformed input).
pub(crate) fn plan_input(input: &mut Input, gateway: &Gateway, id: u64, pending: &mut Vec<Pending>) -> bool {
    while pending.len() < gateway.facts.pipeline_depth_max.max(1) {
        let args = match input.parser.parse(&mut input.bytes) {
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

/// [`submit`], reading the connection's further input into `input` meanwhile: `None` when the
/// client closes the connection (or it fails) first. The submission is then dropped, and the
/// host abandons the operation when it sees its caller gone, so a client that hung up does not
/// keep a client node retrying for it (a large value resent for minutes, issue 20). Redis, too,
/// frees a client at end of input without answering what it had sent.
async fn submit_watching<S: AsyncRead + Unpin>(
    requests: &mpsc::Sender<Request>,
    expiring: &RefCell<Expiring>,
    command: Command,
    stream: &mut S,
    input: &mut BytesMut,
) -> Option<Outcome> {
    let submitted = submit(requests, expiring, command);
    tokio::pin!(submitted);
    loop {
        if input.len() > INPUT_MAX {
            // Enough buffered: stop reading (back-pressure) and wait for the outcome.
            return Some(submitted.await);
        }
        // `read_buf` is cancel-safe: when the outcome comes first, nothing read is lost.
        tokio::select! {
            biased;
            outcome = &mut submitted => return Some(outcome),
            read = stream.read_buf(input) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return None;
                }
            }
        }
    }
}

/// Answers `pending` in order, writing the replies to `stream`: each replicated command is
/// submitted only after the previous one has completed, and the input that arrives meanwhile is
/// read into `input`. `watched` is the connection's WATCH state, read and changed in request
/// order. True when the connection must close: the client closed it while a command was in
/// flight, or a command's outcome is unknown (`-TIMEOUT`): it may still take effect later, so a
/// later command of the connection could overtake it; the requests after it are not run.
pub(crate) async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    pending: &mut Vec<Pending>,
    requests: &mpsc::Sender<Request>,
    expiring: &RefCell<Expiring>,
    watched: &mut Watched,
    output: &mut Output,
    stream: &mut S,
    input: &mut BytesMut,
) -> std::io::Result<bool> {
    let mut unknown = false;
    for item in pending.drain(..) {
        let mut replicate = async |command| submit_watching(requests, expiring, command, stream, input).await;
        match item {
            Pending::Ready(reply, version) => reply.encode(version, &mut output.bytes),
            Pending::Replicate(command, shape, version) => {
                let Some(outcome) = replicate(command).await else { return Ok(true) };
                unknown = outcome == Outcome::Timeout;
                reply(outcome, shape).encode(version, &mut output.bytes);
            }
            Pending::Watch(keys, version) => {
                let Some(outcome) = replicate(Command::Versions { keys: keys.clone() }).await else { return Ok(true) };
                unknown = outcome == Outcome::Timeout;
                watched.record(keys, outcome).encode(version, &mut output.bytes);
            }
            Pending::Unwatch(reply, version) => {
                watched.clear();
                reply.encode(version, &mut output.bytes);
            }
            Pending::Exec(exec, version) => match watched.exec(&exec) {
                Ok(transaction) => {
                    let Some(outcome) = replicate(transaction).await else { return Ok(true) };
                    unknown = outcome == Outcome::Timeout;
                    exec_reply(outcome, &exec.slots).encode(version, &mut output.bytes);
                }
                Err(reply) => reply.encode(version, &mut output.bytes),
            },
        }
        if output.bytes.len() >= output.budget || unknown {
            output.write(stream).await?;
        }
        if unknown {
            break;
        }
    }
    output.write(stream).await?;
    Ok(unknown)
}

/// Serves one connection until it closes: reads requests, plans them, answers them in order.
/// It ends when the client closes, on QUIT or malformed input, when it has been idle (nothing
/// read and nothing in flight) for the idle timeout, and when the gateway evicts it to admit
/// another connection ([`super::Gateway::evict_idlest`]); an evicted or timed-out connection
/// is closed without a reply, as Redis closes one that exceeded its `timeout`.
pub(crate) async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    requests: mpsc::Sender<Request>,
    gateway: &Gateway,
    id: u64,
) -> std::io::Result<()> {
    let mut input = Input::default();
    let mut output = Output::new(&gateway.facts);
    let mut pending: Vec<Pending> = Vec::new();
    let mut watched = Watched::default();
    loop {
        let mut close = plan_input(&mut input, gateway, id, &mut pending);
        if pending.is_empty() {
            // Nothing to answer: read (the rest of a request, or a new one), within the limit.
            if input.bytes.len() <= INPUT_MAX {
                if !read(stream, &mut input.bytes, gateway, id).await? {
                    return Ok(());
                }
                continue;
            }
            let error = Reply::Error("ERR Protocol error: request too large".into());
            pending.push(Pending::Ready(error, gateway.version(id)));
            close = true;
        }
        close |=
            answer(&mut pending, &requests, &gateway.expiring, &mut watched, &mut output, stream, &mut input.bytes)
                .await?;
        if close {
            return Ok(());
        }
    }
}

/// Reads more of the connection's input; false when the connection is to close: the client
/// closed it, nothing came for the idle timeout, or the gateway evicted it while it waited for
/// a new request with nothing in flight.
async fn read<S: AsyncRead + Unpin>(
    stream: &mut S,
    input: &mut BytesMut,
    gateway: &Gateway,
    id: u64,
) -> std::io::Result<bool> {
    // Only a connection between requests counts as idle for eviction: one with part of a request
    // read is in the middle of something.
    let evicted = input.is_empty().then(|| gateway.idle_since(id));
    let read = async {
        match &evicted {
            Some(notify) => tokio::select! {
                read = stream.read_buf(input) => Some(read),
                () = notify.notified() => None,
            },
            None => Some(stream.read_buf(input).await),
        }
    };
    let result = within(gateway.facts.idle_timeout, read).await;
    if evicted.is_some() {
        gateway.busy(id);
    }
    match result {
        Some(Some(read)) => Ok(read? > 0),
        Some(None) | None => Ok(false),
    }
}

#[cfg(test)]
mod tests;
