//! The Redis gateway: RESP2 and RESP3 connections whose commands become replicated `Command`s
//! run by the host's pool of protocol client nodes. A connection's commands take effect in the
//! order they were sent and replies go back in that order, so pipelining works; a connection that
//! sends malformed RESP gets an error and is closed, and nothing it sent reaches other connections.
//!
//! - [`admission`]: the accept loop, the connection cap and the eviction of idle connections.
//! - [`pipeline`]: one connection's requests, read, planned and answered in order; its replicated
//!   commands are submitted one at a time.
//! - [`table`]: every command the gateway knows, with its arity; dispatch, `COMMAND COUNT` and
//!   the docs' command lists come from it.
//! - [`session`]: per-connection state (id, name, RESP version) and the commands the gateway
//!   answers itself: HELLO, CLIENT, CONFIG, INFO.
//! - [`auth`]: AUTH and the `requirepass` gate in front of every other command.
//! - [`transaction`]: MULTI/EXEC/DISCARD and WATCH/UNWATCH; a transaction is one replicated
//!   command.
//! - [`keyspace`]: KEYS, SCAN, DBSIZE, FLUSHDB/FLUSHALL, RANDOMKEY, RENAME/RENAMENX and UNLINK.
//! - [`collections`]: lists, sets, sorted sets, INCRBYFLOAT and HINCRBYFLOAT, and their reply
//!   shapes.
//!
//! SET's EX/PX/EXAT/PXAT/KEEPTTL options are rejected with an error: expiry is not part of the
//! replicated state machine (a deterministic expiry would need the command to carry a
//! timestamp chosen by the gateway).

pub mod admission;
pub mod auth;
pub mod collections;
pub mod expiry;
mod expiry_commands;
pub mod keyspace;
pub mod pipeline;
pub mod session;
pub mod table;
pub mod transaction;

pub use admission::serve;

use crate::host::Outcome;
use crate::resp::{Reply, RespVersion};
use bytes::Bytes;
use ordo_core::command::{HashRead, SetCondition};
use ordo_core::{Command, CommandResult};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use session::{Clients, Context, ServerFacts};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;
use table::Kind;

/// How a replicated command's result becomes a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The natural mapping.
    Plain,
    /// HMSET: `+OK` whatever the count.
    Ok,
    /// HGETALL: field/value pairs, a map (RESP3) or a flat array (RESP2).
    Pairs,
    /// SETNX: `:1` when it wrote (OK), `:0` when it did not (Nil).
    Flag,
    /// TYPE: the value as a status line (`+string`).
    Status,
    /// SCAN: `[cursor, [keys]]` from the values the store returns (`keyspace`).
    Scan,
    /// A list, set or sorted-set reply ([`collections::Form`]).
    Collection(collections::Form),
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
    /// WATCH: read the keys' versions through the protocol and keep them with the connection.
    Watch(Vec<Bytes>),
    /// Forget the connection's watched keys, then answer (UNWATCH, DISCARD, EXECABORT).
    Unwatch(Reply),
    /// EXEC: run the queued transaction with the connection's watched keys.
    Exec(transaction::Exec),
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

/// A gateway: its facts and its open connections, shared by the connection tasks of its one
/// thread.
pub struct Gateway {
    facts: ServerFacts,
    /// The keys whose expiry this gateway set, for the sweep.
    pub expiring: Rc<RefCell<expiry::Expiring>>,
    clients: RefCell<Clients>,
    /// Connections waiting for a request, which may be closed to admit new ones.
    idle: RefCell<admission::Idle>,
    started: Instant,
    /// Draws each request's seed (SPOP and SRANDMEMBER choose with it at every replica); the
    /// gateway never runs in the simulator, so it may start from the OS' entropy.
    seeds: RefCell<ChaCha8Rng>,
}

impl Gateway {
    /// A gateway with no connection yet.
    pub fn new(facts: ServerFacts) -> Gateway {
        Gateway {
            facts,
            expiring: Rc::default(),
            clients: RefCell::new(Clients::default()),
            idle: RefCell::default(),
            started: Instant::now(),
            seeds: RefCell::new(rand::make_rng()),
        }
    }

    /// Registers a connection; returns its id. It counts as idle from now (it waits for its
    /// first request), so it can make room for the next one even before its task first runs.
    pub fn open(&self, peer: SocketAddr, local: SocketAddr, fd: i32) -> u64 {
        let now = Instant::now();
        let id = self.clients.borrow_mut().open(peer, local, fd, now);
        self.idle.borrow_mut().enter(id, now);
        id
    }

    /// Forgets a closed connection.
    pub fn close(&self, id: u64) {
        self.clients.borrow_mut().close(id);
        self.idle.borrow_mut().leave(id);
    }

    /// Connection `id` starts waiting for a request with nothing in flight; the returned
    /// notification tells it to close to make room for a new connection.
    pub fn idle_since(&self, id: u64) -> Rc<tokio::sync::Notify> {
        self.idle.borrow_mut().enter(id, Instant::now())
    }

    /// Connection `id` stopped waiting (it read something).
    pub fn busy(&self, id: u64) {
        self.idle.borrow_mut().leave(id);
    }

    /// The reply protocol of connection `id`.
    pub fn version(&self, id: u64) -> RespVersion {
        self.clients.borrow().session(id).map_or(RespVersion::Resp2, |session| session.version)
    }

    /// Maps one request of connection `id` to an action.
    pub fn plan(&self, id: u64, args: &[Bytes]) -> Action {
        let now = Instant::now();
        let mut clients = self.clients.borrow_mut();
        // Before planning, as Redis does: CLIENT INFO shows itself as the last command.
        clients.touch(id, shown_name(args), now);
        let seed = self.seeds.borrow_mut().next_u64();
        let mut context = Context { facts: &self.facts, clients: &mut clients, id, started: self.started, now, seed };
        plan(args, &mut context)
    }
}

/// The command's name as CLIENT LIST's `cmd=` shows it: lower case, `client|list` for a
/// subcommand, `NULL` before the first known command.
fn shown_name(args: &[Bytes]) -> String {
    let Some(spec) = args.first().and_then(|name| table::lookup(&String::from_utf8_lossy(name).to_ascii_uppercase()))
    else {
        return "NULL".into();
    };
    let name = spec.name.to_ascii_lowercase();
    match args.get(1).filter(|_| spec.has_subcommands) {
        Some(sub) => format!("{name}|{}", String::from_utf8_lossy(sub).to_ascii_lowercase()),
        None => name,
    }
}

/// Maps one request's words to an action: the table decides whether the command exists and has
/// the right number of words; then the gateway answers it, plans its replicated command, or,
/// inside MULTI, queues it.
pub fn plan(args: &[Bytes], context: &mut Context) -> Action {
    let checked = check(args);
    // After the name and arity checks, as Redis does: an unknown command is reported as such.
    if let Ok(name) = checked
        && !auth::allowed_before_auth(name)
        && auth::required(context)
    {
        return error(auth::NOAUTH);
    }
    let Some(mut queue) = context.session_mut().queue.take() else {
        return checked.map_or_else(|refused| refused, |name| dispatch(name, &args[1..], context));
    };
    if let Ok(name @ ("EXEC" | "DISCARD")) = checked {
        return transaction::finish(queue, name == "EXEC");
    }
    let action = transaction::queue(&mut queue, args, checked, |name| dispatch(name, &args[1..], context));
    context.session_mut().queue = Some(queue);
    action
}

/// The command's table name, or the error for an unknown command or a wrong number of words.
fn check(args: &[Bytes]) -> Result<&'static str, Action> {
    let Some(name) = args.first() else { return Err(error("ERR empty command")) };
    let upper = String::from_utf8_lossy(name).to_ascii_uppercase();
    let Some(spec) = table::lookup(&upper) else {
        let shown: String = String::from_utf8_lossy(name).chars().take(64).collect();
        return Err(error(format!("ERR unknown command '{shown}'")));
    };
    if !spec.arity_fits(args.len()) {
        return Err(wrong_args(&upper));
    }
    Ok(spec.name)
}

fn dispatch(name: &'static str, rest: &[Bytes], context: &mut Context) -> Action {
    match name {
        "MULTI" => {
            context.session_mut().queue = Some(transaction::Queue::default());
            Action::Reply(Reply::Simple("OK"))
        }
        "EXEC" | "DISCARD" => error(format!("ERR {name} without MULTI")),
        "WATCH" => Action::Watch(rest.to_vec()),
        "UNWATCH" => Action::Unwatch(Reply::Simple("OK")),
        _ => match table::lookup(name).expect("checked").kind {
            Kind::Gateway => plan_gateway(name, rest, context),
            Kind::Replicated => {
                collections::plan(name, rest, context.seed).unwrap_or_else(|| plan_replicated(name, rest))
            }
        },
    }
}

fn plan_gateway(name: &str, rest: &[Bytes], context: &mut Context) -> Action {
    match name {
        "HELLO" => session::hello(rest, context),
        "AUTH" => auth::auth(rest, context),
        "PING" => match rest.len() {
            0 => Action::Reply(Reply::Simple("PONG")),
            1 => Action::Reply(Reply::Bulk(Some(rest[0].clone()))),
            _ => wrong_args(name),
        },
        "ECHO" => Action::Reply(Reply::Bulk(Some(rest[0].clone()))),
        "QUIT" => Action::Close(Reply::Simple("OK")),
        "SELECT" if rest[0].as_ref() == b"0" => Action::Reply(Reply::Simple("OK")),
        "SELECT" => error("ERR DB index is out of range"),
        "CLIENT" => session::client(rest, context),
        "CONFIG" => session::config(rest, context),
        "COMMAND" => command(rest),
        "INFO" => session::info(rest, context),
        "TIME" => {
            let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            Action::Reply(Reply::Array(vec![
                Some(Bytes::from(micros.as_secs().to_string())),
                Some(Bytes::from(micros.subsec_micros().to_string())),
            ]))
        }
        _ => error(format!("ERR unknown command '{name}'")),
    }
}

/// `COMMAND COUNT` and `COMMAND LIST [FILTERBY PATTERN p]` from the table. `COMMAND`, `COMMAND
/// INFO` and `COMMAND DOCS` answer an empty list: the table has no key positions or flags yet,
/// and an empty answer is what clients cope with (redis-cli then shows no hints).
fn command(rest: &[Bytes]) -> Action {
    let sub = rest.first().map(|s| String::from_utf8_lossy(s).to_ascii_uppercase());
    let names = |pattern: &[u8]| {
        let names = table::COMMANDS.iter().map(|spec| spec.name.to_ascii_lowercase());
        let matching = names.filter(|name| session::glob_match(pattern, name.as_bytes()));
        Action::Reply(Reply::Array(matching.map(|name| Some(Bytes::from(name))).collect()))
    };
    match (sub.as_deref(), rest.len()) {
        (Some("COUNT"), 1) => Action::Reply(Reply::Integer(table::COMMANDS.len() as i64)),
        (Some("LIST"), 1) => names(b"*"),
        (Some("LIST"), 4) if rest[1].eq_ignore_ascii_case(b"FILTERBY") && rest[2].eq_ignore_ascii_case(b"PATTERN") => {
            names(&rest[3].to_ascii_lowercase())
        }
        (Some("LIST"), _) => error("ERR syntax error"),
        (None | Some("INFO" | "DOCS"), _) => Action::Reply(Reply::Array(Vec::new())),
        (Some("COUNT"), _) => wrong_args("command|count"),
        (Some(_), _) => {
            error(format!("ERR unknown subcommand '{}'. Try COMMAND HELP.", String::from_utf8_lossy(&rest[0])))
        }
    }
}

fn plan_replicated(name: &str, rest: &[Bytes]) -> Action {
    let key = |i: usize| rest[i].clone();
    let plain = |command| Action::Replicate(command, Shape::Plain);
    match name {
        "GET" => plain(Command::Get { key: key(0) }),
        "SET" => expiry_commands::set(rest),
        "SETEX" | "PSETEX" | "EXPIRE" | "PEXPIRE" | "EXPIREAT" | "PEXPIREAT" | "TTL" | "PTTL" | "EXPIRETIME"
        | "PEXPIRETIME" | "PERSIST" => expiry_commands::plan(name, rest),
        "DEL" => plain(Command::Del { keys: rest.to_vec() }),
        "EXISTS" => plain(Command::Exists { keys: rest.to_vec() }),
        "INCR" => plain(Command::IncrBy { key: key(0), delta: 1 }),
        "DECR" => plain(Command::IncrBy { key: key(0), delta: -1 }),
        "INCRBY" | "DECRBY" => match integer(&rest[1]) {
            Some(delta) if name == "INCRBY" => plain(Command::IncrBy { key: key(0), delta }),
            Some(delta) if delta != i64::MIN => plain(Command::IncrBy { key: key(0), delta: -delta }),
            _ => error("ERR value is not an integer or out of range"),
        },
        "APPEND" => plain(Command::Append { key: key(0), value: key(1) }),
        "MGET" => plain(Command::MGet { keys: rest.to_vec() }),
        "MSET" if rest.len().is_multiple_of(2) => {
            plain(Command::MSet { pairs: rest.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() })
        }
        "HSET" | "HMSET" if rest.len() % 2 == 1 => Action::Replicate(
            Command::HSet { key: key(0), fields: rest[1..].chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() },
            if name == "HMSET" { Shape::Ok } else { Shape::Plain },
        ),
        "HGET" => plain(Command::HGet { key: key(0), field: key(1) }),
        "HGETALL" => Action::Replicate(Command::HGetAll { key: key(0) }, Shape::Pairs),
        "HDEL" => plain(Command::HDel { key: key(0), fields: rest[1..].to_vec() }),
        "GETSET" => plain(Command::getset(key(0), key(1))),
        "SETNX" => Action::Replicate(
            Command::Set {
                key: key(0),
                value: key(1),
                condition: SetCondition::IfAbsent,
                expiry: ordo_core::command::SetExpiry::Clear,
            },
            Shape::Flag,
        ),
        "GETDEL" => plain(Command::GetDel { key: key(0) }),
        "STRLEN" => plain(Command::StrLen { key: key(0) }),
        "GETRANGE" | "SUBSTR" => match (integer(&rest[1]), integer(&rest[2])) {
            (Some(start), Some(end)) => plain(Command::GetRange { key: key(0), start, end }),
            _ => error("ERR value is not an integer or out of range"),
        },
        "SETRANGE" => match integer(&rest[1]) {
            Some(offset) if offset >= 0 => {
                plain(Command::SetRange { key: key(0), offset: offset as u64, value: key(2) })
            }
            Some(_) => error("ERR offset is out of range"),
            None => error("ERR value is not an integer or out of range"),
        },
        "MSETNX" if rest.len().is_multiple_of(2) => {
            plain(Command::MSetNx { pairs: rest.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect() })
        }
        "HINCRBY" => match integer(&rest[2]) {
            Some(delta) => plain(Command::HIncrBy { key: key(0), field: key(1), delta }),
            None => error("ERR value is not an integer or out of range"),
        },
        "HSETNX" => plain(Command::HSetNx { key: key(0), field: key(1), value: key(2) }),
        "HMGET" => plain(Command::HMGet { key: key(0), fields: rest[1..].to_vec() }),
        "HKEYS" => plain(Command::HRead { key: key(0), read: HashRead::Fields }),
        "HVALS" => plain(Command::HRead { key: key(0), read: HashRead::Values }),
        "HLEN" => plain(Command::HRead { key: key(0), read: HashRead::Len }),
        "HEXISTS" => plain(Command::HRead { key: key(0), read: HashRead::Exists(key(1)) }),
        "HSTRLEN" => plain(Command::HRead { key: key(0), read: HashRead::StrLen(key(1)) }),
        "TYPE" => Action::Replicate(Command::Type { key: key(0) }, Shape::Status),
        "MSET" | "MSETNX" | "HSET" | "HMSET" => wrong_args(name),
        _ => keyspace::plan(name, rest),
    }
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
        (CommandResult::Values(values), Shape::Scan) => keyspace::scan_reply(values),
        (other, Shape::Scan) => keyspace::scan_unexpected(&other),
        (result, Shape::Collection(form)) => collections::reply(result, form),
        (_, Shape::Ok) => Reply::Simple("OK"),
        (CommandResult::Ok, Shape::Flag) => Reply::Integer(1),
        (CommandResult::Nil, Shape::Flag) => Reply::Integer(0),
        (CommandResult::Value(kind), Shape::Status) => Reply::Simple(match kind.as_ref() {
            b"string" => "string",
            b"hash" => "hash",
            b"list" => "list",
            b"set" => "set",
            b"zset" => "zset",
            _ => "none",
        }),
        (CommandResult::Ok, _) => Reply::Simple("OK"),
        (CommandResult::Nil, Shape::Pairs) => Reply::Map(Vec::new()),
        (CommandResult::Nil, _) => Reply::Bulk(None),
        (CommandResult::Value(value), _) => Reply::Bulk(Some(value)),
        (CommandResult::Integer(n), _) => Reply::Integer(n),
        (CommandResult::Values(values), Shape::Pairs) => {
            let present: Vec<Bytes> = values.into_iter().flatten().collect();
            Reply::Map(
                present
                    .chunks_exact(2)
                    .map(|p| (Reply::Bulk(Some(p[0].clone())), Reply::Bulk(Some(p[1].clone()))))
                    .collect(),
            )
        }
        (CommandResult::Values(values), _) => Reply::Array(values),
        // Only transactions and WATCH's reads give these, and they shape their own replies
        // (`transaction`); a plain rendering, should another command ever return them.
        (CommandResult::Results(results), _) => {
            Reply::Nested(results.into_iter().map(|result| reply(Outcome::Done(result), Shape::Plain)).collect())
        }
        (CommandResult::Versions(versions), _) => {
            Reply::Nested(versions.into_iter().map(|version| Reply::Integer(version as i64)).collect())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
