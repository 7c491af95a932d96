//! The Redis gateway: RESP2 connections whose commands become replicated `Command`s run by the
//! host's pool of protocol client nodes. Replies go back in request order per connection, so
//! pipelining works; a connection that sends malformed RESP gets an error and is closed, and
//! nothing it sent reaches other connections.
//!
//! SET's EX/PX/EXAT/PXAT/KEEPTTL options are rejected with an error: expiry is not part of the
//! replicated state machine (a deterministic expiry would need the command to carry a
//! timestamp chosen by the gateway).

use crate::host::{Outcome, Request};
use crate::resp::{self, Reply};
use bytes::{Bytes, BytesMut};
use ordo_core::command::SetCondition;
use ordo_core::{Command, CommandResult};
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// Largest unparsed input a connection may hold (a bulk string up to the limit plus slack).
const INPUT_MAX: usize = resp::BULK_LEN_MAX + 64 * 1024;

/// How a replicated command's result becomes a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The natural mapping.
    Plain,
    /// HMSET: `+OK` whatever the count.
    Ok,
    /// HGETALL: an array without nils.
    Pairs,
}

/// What the gateway does with one request.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Answer at once.
    Reply(Reply),
    /// Answer and close the connection (QUIT).
    Close(Reply),
    /// Run through the protocol.
    Replicate(Command, Shape),
}

fn error(text: impl Into<String>) -> Action {
    Action::Reply(Reply::Error(text.into()))
}

fn wrong_args(name: &str) -> Action {
    error(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

fn integer(bytes: &Bytes) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

const INFO: &str =
    "# Server\r\nredis_version:7.0.0\r\nordo_gateway:1\r\nredis_mode:standalone\r\n# Clients\r\n# Keyspace\r\n";

/// Maps one request's words to an action.
pub fn plan(args: &[Bytes]) -> Action {
    let Some(name) = args.first() else { return Action::Reply(Reply::Error("ERR empty command".into())) };
    let upper = String::from_utf8_lossy(name).to_ascii_uppercase();
    let rest = &args[1..];
    let key = |i: usize| rest[i].clone();
    match upper.as_str() {
        "PING" => match rest.len() {
            0 => Action::Reply(Reply::Simple("PONG")),
            1 => Action::Reply(Reply::Bulk(Some(key(0)))),
            _ => wrong_args(&upper),
        },
        "ECHO" if rest.len() == 1 => Action::Reply(Reply::Bulk(Some(key(0)))),
        "QUIT" => Action::Close(Reply::Simple("OK")),
        "SELECT" if rest.len() == 1 => {
            if rest[0].as_ref() == b"0" {
                Action::Reply(Reply::Simple("OK"))
            } else {
                error("ERR DB index is out of range")
            }
        }
        "CONFIG" => match rest.first().map(|s| s.to_ascii_uppercase()) {
            Some(sub) if sub == b"GET" => Action::Reply(Reply::Array(Vec::new())),
            Some(sub) if sub == b"SET" || sub == b"RESETSTAT" => Action::Reply(Reply::Simple("OK")),
            _ => error("ERR unknown CONFIG subcommand"),
        },
        "COMMAND" => match rest.first().map(|s| s.to_ascii_uppercase()) {
            Some(sub) if sub == b"COUNT" => Action::Reply(Reply::Integer(0)),
            _ => Action::Reply(Reply::Array(Vec::new())),
        },
        "INFO" => Action::Reply(Reply::Bulk(Some(Bytes::from_static(INFO.as_bytes())))),
        "CLIENT" => Action::Reply(Reply::Simple("OK")),
        "GET" if rest.len() == 1 => Action::Replicate(Command::Get { key: key(0) }, Shape::Plain),
        "SET" if rest.len() >= 2 => plan_set(rest),
        "DEL" if !rest.is_empty() => Action::Replicate(Command::Del { keys: rest.to_vec() }, Shape::Plain),
        "EXISTS" if !rest.is_empty() => Action::Replicate(Command::Exists { keys: rest.to_vec() }, Shape::Plain),
        "INCR" if rest.len() == 1 => Action::Replicate(Command::IncrBy { key: key(0), delta: 1 }, Shape::Plain),
        "DECR" if rest.len() == 1 => Action::Replicate(Command::IncrBy { key: key(0), delta: -1 }, Shape::Plain),
        "INCRBY" | "DECRBY" if rest.len() == 2 => match integer(&rest[1]) {
            Some(delta) if upper == "INCRBY" => Action::Replicate(Command::IncrBy { key: key(0), delta }, Shape::Plain),
            Some(delta) if delta != i64::MIN => {
                Action::Replicate(Command::IncrBy { key: key(0), delta: -delta }, Shape::Plain)
            }
            _ => error("ERR value is not an integer or out of range"),
        },
        "APPEND" if rest.len() == 2 => Action::Replicate(Command::Append { key: key(0), value: key(1) }, Shape::Plain),
        "MGET" if !rest.is_empty() => Action::Replicate(Command::MGet { keys: rest.to_vec() }, Shape::Plain),
        "MSET" if !rest.is_empty() && rest.len().is_multiple_of(2) => Action::Replicate(
            Command::MSet { pairs: rest.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() },
            Shape::Plain,
        ),
        "HSET" | "HMSET" if rest.len() >= 3 && rest.len() % 2 == 1 => Action::Replicate(
            Command::HSet { key: key(0), fields: rest[1..].chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() },
            if upper == "HMSET" { Shape::Ok } else { Shape::Plain },
        ),
        "HGET" if rest.len() == 2 => Action::Replicate(Command::HGet { key: key(0), field: key(1) }, Shape::Plain),
        "HGETALL" if rest.len() == 1 => Action::Replicate(Command::HGetAll { key: key(0) }, Shape::Pairs),
        "HDEL" if rest.len() >= 2 => {
            Action::Replicate(Command::HDel { key: key(0), fields: rest[1..].to_vec() }, Shape::Plain)
        }
        "GET" | "SET" | "DEL" | "EXISTS" | "INCR" | "DECR" | "INCRBY" | "DECRBY" | "APPEND" | "MGET" | "MSET"
        | "HSET" | "HMSET" | "HGET" | "HGETALL" | "HDEL" | "ECHO" | "SELECT" => wrong_args(&upper),
        _ => {
            let shown: String = String::from_utf8_lossy(name).chars().take(64).collect();
            error(format!("ERR unknown command '{shown}'"))
        }
    }
}

fn plan_set(rest: &[Bytes]) -> Action {
    let mut condition = SetCondition::Always;
    for option in &rest[2..] {
        match option.to_ascii_uppercase().as_slice() {
            b"NX" if condition == SetCondition::Always => condition = SetCondition::IfAbsent,
            b"XX" if condition == SetCondition::Always => condition = SetCondition::IfPresent,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" | b"KEEPTTL" => {
                return error("ERR expiry (EX/PX/EXAT/PXAT/KEEPTTL) is not supported by ordo's replicated store");
            }
            _ => return error("ERR syntax error"),
        }
    }
    Action::Replicate(Command::Set { key: rest[0].clone(), value: rest[1].clone(), condition }, Shape::Plain)
}

/// The reply for a replicated command's outcome.
pub fn reply(outcome: Outcome, shape: Shape) -> Reply {
    let result = match outcome {
        Outcome::Done(result) => result,
        Outcome::Timeout => return Reply::Error("TIMEOUT the operation's outcome is unknown".into()),
        Outcome::Busy => return Reply::Error("BUSY the gateway's queue is full, retry later".into()),
    };
    match (result, shape) {
        (CommandResult::Error(text), _) => {
            let starts_upper =
                text.split(' ').next().is_some_and(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase()));
            Reply::Error(if starts_upper { text } else { format!("ERR {text}") })
        }
        (_, Shape::Ok) => Reply::Simple("OK"),
        (CommandResult::Ok, _) => Reply::Simple("OK"),
        (CommandResult::Nil, Shape::Pairs) => Reply::Array(Vec::new()),
        (CommandResult::Nil, _) => Reply::Bulk(None),
        (CommandResult::Value(value), _) => Reply::Bulk(Some(value)),
        (CommandResult::Integer(n), _) => Reply::Integer(n),
        (CommandResult::Values(values), Shape::Pairs) => {
            Reply::Array(values.into_iter().filter(Option::is_some).collect())
        }
        (CommandResult::Values(values), _) => Reply::Array(values),
    }
}

enum Pending {
    Ready(Reply),
    Waiting(oneshot::Receiver<Outcome>, Shape),
}

/// Serves Redis connections on `address`, sending commands to the host through `requests`.
pub async fn serve(
    address: SocketAddr,
    requests: mpsc::Sender<Request>,
    connections_max: usize,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(address).await?;
    let open = Rc::new(Cell::new(0usize));
    loop {
        let Ok((mut stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        if open.get() >= connections_max {
            let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
            continue;
        }
        open.set(open.get() + 1);
        let requests = requests.clone();
        let open = open.clone();
        tokio::task::spawn_local(async move {
            let _ = connection(&mut stream, requests).await;
            open.set(open.get() - 1);
        });
    }
}

async fn connection(stream: &mut TcpStream, requests: mpsc::Sender<Request>) -> std::io::Result<()> {
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = Vec::with_capacity(16 * 1024);
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
        let mut close = false;
        loop {
            match resp::parse(&mut input) {
                Ok(None) => break,
                Ok(Some(args)) if args.is_empty() => continue,
                Ok(Some(args)) => match plan(&args) {
                    Action::Reply(reply) => pending.push(Pending::Ready(reply)),
                    Action::Close(reply) => {
                        pending.push(Pending::Ready(reply));
                        close = true;
                        break;
                    }
                    Action::Replicate(command, shape) => {
                        let (reply, receiver) = oneshot::channel();
                        match requests.try_send(Request { command, reply }) {
                            Ok(()) => pending.push(Pending::Waiting(receiver, shape)),
                            Err(_) => {
                                pending.push(Pending::Ready(Reply::Error("BUSY the gateway is overloaded".into())))
                            }
                        }
                    }
                },
                Err(error) => {
                    pending.push(Pending::Ready(Reply::Error(format!("ERR {error}"))));
                    close = true;
                    break;
                }
            }
        }
        if input.len() > INPUT_MAX {
            pending.push(Pending::Ready(Reply::Error("ERR Protocol error: request too large".into())));
            close = true;
        }
        for item in pending.drain(..) {
            let reply = match item {
                Pending::Ready(reply) => reply,
                Pending::Waiting(receiver, shape) => reply(receiver.await.unwrap_or(Outcome::Timeout), shape),
            };
            reply.encode(&mut output);
        }
        stream.write_all(&output).await?;
        output.clear();
        if close {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::from(w.to_string())).collect()
    }

    #[test]
    fn redis_commands_map_to_replicated_commands() {
        // Goal: each supported command becomes the right Command; INCR/DECR are IncrBy,
        // HMSET is HSet; EX is refused clearly; unknown commands are errors.
        assert_eq!(plan(&words("get k")), Action::Replicate(Command::get("k"), Shape::Plain));
        assert_eq!(
            plan(&words("DECR k")),
            Action::Replicate(Command::IncrBy { key: "k".into(), delta: -1 }, Shape::Plain)
        );
        assert!(matches!(plan(&words("HMSET h a 1 b 2")), Action::Replicate(Command::HSet { .. }, Shape::Ok)));
        assert!(matches!(
            plan(&words("SET k v NX")),
            Action::Replicate(Command::Set { condition: SetCondition::IfAbsent, .. }, _)
        ));
        assert!(matches!(plan(&words("SET k v EX 10")), Action::Reply(Reply::Error(e)) if e.contains("expiry")));
        assert!(matches!(plan(&words("FLUSHALL")), Action::Reply(Reply::Error(e)) if e.contains("unknown command")));
        assert!(matches!(plan(&words("GET")), Action::Reply(Reply::Error(e)) if e.contains("wrong number")));
        assert_eq!(plan(&words("CONFIG GET save")), Action::Reply(Reply::Array(Vec::new())));
    }

    #[test]
    fn results_become_redis_replies() {
        assert_eq!(reply(Outcome::Done(CommandResult::Nil), Shape::Plain), Reply::Bulk(None));
        assert_eq!(reply(Outcome::Done(CommandResult::Integer(2)), Shape::Ok), Reply::Simple("OK"));
        assert!(matches!(reply(Outcome::Done(CommandResult::Error("value is not an integer".into())), Shape::Plain),
            Reply::Error(e) if e.starts_with("ERR ")));
    }
}
