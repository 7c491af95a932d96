//! Commands the gateway answers from its own state: HELLO and AUTH, CLIENT, CONFIG and INFO.
//! Each connection has a [`Session`] (its id, name, library and RESP version); the gateway
//! keeps all of them in [`Clients`] so that `CLIENT LIST` tells the truth about every
//! connection. Nothing here is replicated: these commands describe one gateway process.

use super::Action;
use crate::resp::{Reply, RespVersion};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

/// The Redis version whose protocol ordo speaks (RESP3 and HELLO from 6.0, `CLIENT SETINFO`
/// from 7.2). Its commands are a subset of that version's, listed in docs/runtime.md.
pub const REDIS_VERSION: &str = "7.2.0";

/// What the gateway tells clients about itself (HELLO, INFO, CONFIG GET).
#[derive(Clone, Debug)]
pub struct ServerFacts {
    /// The protocol's registry name.
    pub protocol: String,
    /// The gateway's node name in the cluster file.
    pub node: String,
    /// Replicas in the cluster.
    pub replicas: usize,
    /// Protocol client nodes this gateway hosts.
    pub client_nodes: usize,
    /// Most concurrent connections (`maxclients`).
    pub connections_max: usize,
    /// The Redis address it listens on.
    pub address: SocketAddr,
    /// The password AUTH must give before other commands run (`requirepass`), if any.
    pub requirepass: Option<crate::config::Password>,
    /// An idle connection is closed after this long (`timeout`); zero: never.
    pub idle_timeout: std::time::Duration,
    /// Most requests of one connection read and not yet answered.
    pub pipeline_depth_max: usize,
    /// Most reply bytes held for one connection before they are written out.
    pub reply_bytes_max: usize,
}

/// One connection's state.
#[derive(Clone, Debug)]
pub struct Session {
    /// `CLIENT ID`: unique in this gateway process, from 1 up.
    pub id: u64,
    /// The reply protocol, set by HELLO.
    pub version: RespVersion,
    name: Option<Bytes>,
    library_name: Option<Bytes>,
    library_version: Option<Bytes>,
    peer: SocketAddr,
    local: SocketAddr,
    fd: i32,
    opened: Instant,
    active: Instant,
    last_command: String,
    /// The transaction being queued, between MULTI and EXEC.
    pub(crate) queue: Option<super::transaction::Queue>,
    /// True once AUTH (or HELLO's AUTH option) gave the right password; only read when the
    /// gateway has `requirepass`.
    pub(crate) authenticated: bool,
}

/// Every open connection of the gateway, by id (ordered, so CLIENT LIST is too).
#[derive(Debug, Default)]
pub struct Clients {
    next_id: u64,
    open: BTreeMap<u64, Session>,
    /// INFO's Stats, since the start or the last CONFIG RESETSTAT.
    stats: Stats,
}

/// What INFO's Stats section counts.
#[derive(Debug, Default)]
struct Stats {
    /// Connections accepted (`total_connections_received`).
    connections: u64,
    /// Commands planned, known or not (`total_commands_processed`).
    commands: u64,
}

impl Clients {
    /// Registers a new connection and returns its id.
    pub fn open(&mut self, peer: SocketAddr, local: SocketAddr, fd: i32, now: Instant) -> u64 {
        self.next_id += 1;
        self.stats.connections += 1;
        let id = self.next_id;
        let session = Session {
            id,
            version: RespVersion::Resp2,
            name: None,
            library_name: None,
            library_version: None,
            peer,
            local,
            fd,
            opened: now,
            active: now,
            last_command: "NULL".into(),
            queue: None,
            authenticated: false,
        };
        self.open.insert(id, session);
        id
    }

    /// Forgets a closed connection.
    pub fn close(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// The connection's state.
    pub fn session(&self, id: u64) -> Option<&Session> {
        self.open.get(&id)
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// True when no connection is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Records that `id` ran `command` at `now`, for CLIENT LIST's `idle` and `cmd` fields.
    pub fn touch(&mut self, id: u64, command: String, now: Instant) {
        self.stats.commands += 1;
        if let Some(session) = self.open.get_mut(&id) {
            session.active = now;
            session.last_command = command;
        }
    }
}

/// A gateway's facts and connections, and the clock reading of the command being planned.
pub struct Context<'a> {
    /// What the gateway is.
    pub facts: &'a ServerFacts,
    /// Every connection.
    pub clients: &'a mut Clients,
    /// The connection the command came on.
    pub id: u64,
    /// When the gateway started (INFO's uptime).
    pub started: Instant,
    /// Now.
    pub now: Instant,
    /// A random number drawn for this request: commands that choose at random (SPOP,
    /// SRANDMEMBER) carry it, so that every replica chooses alike.
    pub seed: u64,
}

impl Context<'_> {
    /// The connection's state.
    pub(crate) fn session_mut(&mut self) -> &mut Session {
        self.clients.open.get_mut(&self.id).expect("a connection plans commands only while it is registered")
    }
}

fn error(text: impl Into<String>) -> Action {
    Action::Reply(Reply::Error(text.into()))
}

fn ok() -> Action {
    Action::Reply(Reply::Simple("OK"))
}

fn upper(word: &Bytes) -> String {
    String::from_utf8_lossy(word).to_ascii_uppercase()
}

/// A client or library name: Redis allows printable ASCII without spaces ('!' to '~').
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`, with Redis' checks in Redis' order:
/// the version, the options' syntax, AUTH, then the name; the version changes only if all pass.
pub fn hello(rest: &[Bytes], context: &mut Context) -> Action {
    let mut version = context.session_mut().version;
    if let Some(word) = rest.first() {
        version = match std::str::from_utf8(word).ok().and_then(|w| w.parse::<i64>().ok()) {
            Some(2) => RespVersion::Resp2,
            Some(3) => RespVersion::Resp3,
            Some(_) => return error("NOPROTO unsupported protocol version"),
            None => return error("ERR Protocol version is not an integer or out of range"),
        };
    }
    let (mut user, mut name) = (None, None);
    let mut at = 1;
    while at < rest.len() {
        let option = upper(&rest[at]);
        let left = rest.len() - at - 1;
        match option.as_str() {
            "AUTH" if left >= 2 => (user, at) = (Some((rest[at + 1].clone(), rest[at + 2].clone())), at + 3),
            "SETNAME" if left >= 1 => (name, at) = (Some(rest[at + 1].clone()), at + 2),
            _ => return error(format!("ERR Syntax error in HELLO option '{}'", String::from_utf8_lossy(&rest[at]))),
        }
    }
    match user {
        Some((user, password)) => {
            if let Err(refused) = super::auth::authenticate(&user, &password, context) {
                return refused;
            }
        }
        None if super::auth::required(context) => return error(super::auth::NOAUTH_HELLO),
        None => {}
    }
    if let Some(name) = name {
        if !valid_name(&name) {
            return error("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        context.session_mut().name = Some(name).filter(|n| !n.is_empty());
    }
    context.session_mut().version = version;
    Action::Reply(hello_map(context))
}

fn hello_map(context: &mut Context) -> Reply {
    let session = context.session_mut();
    let pairs = [
        ("server", Reply::text("redis")),
        ("version", Reply::text(REDIS_VERSION)),
        ("proto", Reply::Integer(session.version.number())),
        ("id", Reply::Integer(session.id as i64)),
        ("mode", Reply::text("standalone")),
        ("role", Reply::text("master")),
        ("modules", Reply::Nested(Vec::new())),
    ];
    Reply::Map(pairs.into_iter().map(|(key, value)| (Reply::text(key), value)).collect())
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "LIST [ID <id> [<id> ...]]",
    "    Return information about client connections.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set the library name or version of the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Print this help.",
];

/// `CLIENT subcommand ...`.
pub fn client(rest: &[Bytes], context: &mut Context) -> Action {
    let sub = upper(&rest[0]);
    let args = &rest[1..];
    match (sub.as_str(), args.len()) {
        ("ID", 0) => Action::Reply(Reply::Integer(context.id as i64)),
        ("GETNAME", 0) => Action::Reply(Reply::Bulk(context.session_mut().name.clone())),
        ("SETNAME", 1) if !valid_name(&args[0]) => {
            error("ERR Client names cannot contain spaces, newlines or special characters.")
        }
        ("SETNAME", 1) => {
            context.session_mut().name = Some(args[0].clone()).filter(|n| !n.is_empty());
            ok()
        }
        ("SETINFO", 2) => client_setinfo(args, context.session_mut()),
        ("INFO", 0) => {
            let session = context.session_mut().clone();
            Action::Reply(Reply::Verbatim(client_line(&session, context.now)))
        }
        ("LIST", _) => client_list(args, context),
        ("HELP", 0) => Action::Reply(Reply::Nested(CLIENT_HELP.iter().map(|&line| Reply::Simple(line)).collect())),
        ("ID" | "GETNAME" | "SETNAME" | "SETINFO" | "INFO" | "HELP", _) => {
            error(format!("ERR wrong number of arguments for 'client|{}' command", sub.to_ascii_lowercase()))
        }
        _ => error(format!("ERR unknown subcommand '{}'. Try CLIENT HELP.", String::from_utf8_lossy(&rest[0]))),
    }
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`: what redis-py, go-redis and node-redis send on
/// connect; shown by CLIENT LIST and CLIENT INFO.
fn client_setinfo(args: &[Bytes], session: &mut Session) -> Action {
    let attribute = upper(&args[0]);
    let value = Some(args[1].clone()).filter(|v| !v.is_empty());
    let slot = match attribute.as_str() {
        "LIB-NAME" => &mut session.library_name,
        "LIB-VER" => &mut session.library_version,
        _ => return error(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(&args[0]))),
    };
    if !valid_name(&args[1]) {
        return error(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            attribute.to_ascii_lowercase()
        ));
    }
    *slot = value;
    ok()
}

/// `CLIENT LIST [TYPE normal] [ID id ...]`: every connection is a normal client.
fn client_list(args: &[Bytes], context: &mut Context) -> Action {
    let mut ids: Option<Vec<u64>> = None;
    let mut normal = true;
    match args.first().map(upper).as_deref() {
        None => {}
        Some("TYPE") if args.len() == 2 => match upper(&args[1]).as_str() {
            "NORMAL" => {}
            "MASTER" | "REPLICA" | "SLAVE" | "PUBSUB" => normal = false,
            _ => return error(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(&args[1]))),
        },
        Some("ID") if args.len() >= 2 => {
            let parsed: Option<Vec<u64>> =
                args[1..].iter().map(|a| std::str::from_utf8(a).ok()?.parse().ok().filter(|&id| id > 0)).collect();
            let Some(parsed) = parsed else { return error("ERR Invalid client ID") };
            ids = Some(parsed);
        }
        _ => return error("ERR syntax error"),
    }
    let now = context.now;
    let lines: String = context
        .clients
        .open
        .values()
        .filter(|session| normal && ids.as_ref().is_none_or(|ids| ids.contains(&session.id)))
        .map(|session| client_line(session, now))
        .collect();
    Action::Reply(Reply::Verbatim(lines))
}

/// One line of CLIENT LIST, with Redis' field names. Only fields the gateway knows are shown:
/// Redis' buffer and memory fields (qbuf, omem, tot-mem, ...) are left out rather than faked.
fn client_line(session: &Session, now: Instant) -> String {
    let text = |value: &Option<Bytes>| value.as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub=0 psub=0 ssub=0 multi={} \
         cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
        session.id,
        session.peer,
        session.local,
        session.fd,
        text(&session.name),
        now.saturating_duration_since(session.opened).as_secs(),
        now.saturating_duration_since(session.active).as_secs(),
        if session.queue.is_some() { "x" } else { "N" },
        session.queue.as_ref().map_or(-1, |queue| queue.len() as i64),
        session.last_command,
        session.version.number(),
        text(&session.library_name),
        text(&session.library_version),
    )
}

/// The configuration parameters ordo has, with their values. Others do not exist here, so
/// CONFIG GET does not list them (as Redis does for an unknown name).
fn parameters(facts: &ServerFacts) -> Vec<(&'static str, String)> {
    vec![
        ("bind", facts.address.ip().to_string()),
        ("databases", "1".into()),
        ("maxclients", facts.connections_max.to_string()),
        ("port", facts.address.port().to_string()),
        ("proto-max-bulk-len", crate::resp::BULK_LEN_MAX.to_string()),
        ("timeout", facts.idle_timeout.as_secs().to_string()),
    ]
}

/// `CONFIG GET pattern ...`, `CONFIG SET` (always an error: ordo's settings come from the
/// cluster file and cannot change while it runs), `CONFIG RESETSTAT` and `CONFIG REWRITE`.
pub fn config(rest: &[Bytes], context: &mut Context) -> Action {
    let facts = context.facts;
    let sub = upper(&rest[0]);
    let args = &rest[1..];
    match sub.as_str() {
        "GET" if !args.is_empty() => {
            let matching = parameters(facts).into_iter().filter(|(name, _)| {
                args.iter().any(|pattern| glob_match(&pattern.to_ascii_lowercase(), name.as_bytes()))
            });
            Action::Reply(Reply::Map(matching.map(|(name, value)| (Reply::text(name), Reply::text(value))).collect()))
        }
        "SET" if !args.is_empty() && args.len().is_multiple_of(2) => {
            let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
            if parameters(facts).iter().any(|(known, _)| *known == name) {
                error(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
                ))
            } else {
                error(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"))
            }
        }
        "RESETSTAT" if args.is_empty() => {
            context.clients.stats = Stats::default();
            ok()
        }
        "REWRITE" if args.is_empty() => error("ERR The server is running without a config file"),
        "GET" | "SET" | "RESETSTAT" | "REWRITE" => {
            error(format!("ERR wrong number of arguments for 'config|{}' command", sub.to_ascii_lowercase()))
        }
        _ => error(format!("ERR unknown subcommand '{}'. Try CONFIG HELP.", String::from_utf8_lossy(&rest[0]))),
    }
}

/// Redis' glob patterns, shared with the store's KEYS and SCAN MATCH.
pub use ordo_core::glob::glob_match;

/// `INFO [section ...]`: Redis' sections the gateway can fill truthfully, and `# ordo`.
pub fn info(rest: &[Bytes], context: &Context) -> Action {
    let wanted: Vec<String> = rest.iter().map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()).collect();
    let all = wanted.is_empty() || wanted.iter().any(|w| matches!(w.as_str(), "all" | "everything" | "default"));
    let sections = info_sections(context);
    let text: Vec<String> = sections
        .into_iter()
        .filter(|(name, _)| all || wanted.iter().any(|w| w == &name.to_ascii_lowercase()))
        .map(|(name, lines)| format!("# {name}\r\n{}", lines.iter().map(|l| format!("{l}\r\n")).collect::<String>()))
        .collect();
    Action::Reply(Reply::Verbatim(text.join("\r\n")))
}

fn info_sections(context: &Context) -> Vec<(&'static str, Vec<String>)> {
    let facts = context.facts;
    let uptime = context.now.saturating_duration_since(context.started).as_secs();
    vec![
        (
            "Server",
            vec![
                format!("redis_version:{REDIS_VERSION}"),
                format!("ordo_version:{}", env!("CARGO_PKG_VERSION")),
                "redis_mode:standalone".into(),
                format!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH),
                format!("arch_bits:{}", usize::BITS),
                format!("process_id:{}", std::process::id()),
                format!("tcp_port:{}", facts.address.port()),
                format!("uptime_in_seconds:{uptime}"),
                format!("uptime_in_days:{}", uptime / 86_400),
            ],
        ),
        (
            "Clients",
            vec![
                format!("connected_clients:{}", context.clients.len()),
                format!("maxclients:{}", facts.connections_max),
            ],
        ),
        (
            "Stats",
            vec![
                format!("total_connections_received:{}", context.clients.stats.connections),
                format!("total_commands_processed:{}", context.clients.stats.commands),
            ],
        ),
        // The gateway takes writes, so to a client it is a master; its replicas are ordo's own
        // (see the ordo section), not Redis replicas.
        ("Replication", vec!["role:master".into(), "connected_slaves:0".into()]),
        // Not a Redis Cluster: clients (and redis-py's test suite) read this field.
        ("Cluster", vec!["cluster_enabled:0".into()]),
        // Key counts would need a replicated read; the gateway does not know them.
        ("Keyspace", Vec::new()),
        (
            "ordo",
            vec![
                format!("ordo_protocol:{}", facts.protocol),
                "ordo_role:gateway".into(),
                format!("ordo_node:{}", facts.node),
                format!("ordo_replicas:{}", facts.replicas),
                format!("ordo_client_nodes:{}", facts.client_nodes),
                // No commas or '=' in values: redis-py's INFO parser splits on them.
                format!("ordo_redis_compatibility:{REDIS_VERSION}"),
                format!("ordo_commands:{}", super::table::COMMANDS.len()),
            ],
        ),
    ]
}

#[cfg(test)]
mod tests;
