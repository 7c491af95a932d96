//! The gateway's command table: every command it knows, with Redis' arity and a one-line
//! summary. Dispatch looks commands up here first (so a command missing from the table is an
//! unknown command, whatever the match arms say), `COMMAND COUNT` counts it, and the command
//! lists in README.md and docs/runtime.md are rendered from it by [`markdown`] (a test fails
//! when they differ).

/// Who answers a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The gateway itself, from its own and the connection's state; nothing is replicated.
    Gateway,
    /// The replicated state machine, through the protocol.
    Replicated,
}

/// One command the gateway serves.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// Upper-case name.
    pub name: &'static str,
    /// Redis' arity, counting the name: `n` exactly n words, `-n` at least n.
    pub arity: i32,
    /// Who answers it.
    pub kind: Kind,
    /// True for container commands (CLIENT, CONFIG, COMMAND) whose first argument is a
    /// subcommand: `CLIENT LIST` shows the last command as `client|list`, as Redis does.
    pub has_subcommands: bool,
    /// One line for the docs: the syntax ordo accepts and what it does.
    pub summary: &'static str,
}

const fn gateway(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec { name, arity, kind: Kind::Gateway, has_subcommands: false, summary }
}

const fn container(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec { name, arity, kind: Kind::Gateway, has_subcommands: true, summary }
}

const fn replicated(name: &'static str, arity: i32, summary: &'static str) -> CommandSpec {
    CommandSpec { name, arity, kind: Kind::Replicated, has_subcommands: false, summary }
}

/// Every command the gateway serves, connection and server commands first.
pub const COMMANDS: &[CommandSpec] = &[
    gateway(
        "HELLO",
        -1,
        "`HELLO [2|3 [AUTH user pass] [SETNAME name]]`: choose RESP2 or RESP3, reply with the server map",
    ),
    gateway(
        "AUTH",
        -2,
        "`AUTH [user] pass`: with `requirepass`, the password (user `default`) unlocks the connection; without, the user `default` is accepted, as by Redis",
    ),
    gateway("PING", -1, "`PING [message]`"),
    gateway("ECHO", 2, "`ECHO message`"),
    gateway("QUIT", -1, "close the connection"),
    gateway("SELECT", 2, "`SELECT 0`: there is one database"),
    container("CLIENT", -2, "`CLIENT ID|GETNAME|SETNAME|INFO|LIST [ID id ...]|SETINFO LIB-NAME|LIB-VER value|HELP`"),
    container(
        "CONFIG",
        -2,
        "`CONFIG GET pattern ...` of the parameters ordo has; `CONFIG SET` is an error; `CONFIG RESETSTAT`",
    ),
    container(
        "COMMAND",
        -1,
        "`COMMAND COUNT`, `COMMAND LIST [FILTERBY PATTERN p]` (this table); `COMMAND`, `COMMAND INFO` and `COMMAND DOCS` answer an empty list",
    ),
    gateway("INFO", -1, "`INFO [section ...]`: server, clients, replication, keyspace and the `ordo` section"),
    gateway("MULTI", 1, "`MULTI`: queue the commands that follow (each answered `QUEUED`) until EXEC or DISCARD"),
    replicated(
        "EXEC",
        1,
        "`EXEC`: run the queued commands as one replicated command, at one point of the order; a null reply when a watched key was written since WATCH",
    ),
    gateway("DISCARD", 1, "`DISCARD`: drop the queued commands and forget the watched keys"),
    replicated(
        "WATCH",
        -2,
        "`WATCH key ...`: read the keys' versions (replicated); the next EXEC runs only if none was written since",
    ),
    gateway("UNWATCH", 1, "`UNWATCH`: forget the watched keys"),
    replicated("GET", 2, "`GET key`"),
    replicated(
        "SET",
        -3,
        "`SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`: GET replies the old value",
    ),
    replicated("DEL", -2, "`DEL key ...`"),
    replicated("EXISTS", -2, "`EXISTS key ...`"),
    replicated("INCR", 2, "`INCR key`"),
    replicated("DECR", 2, "`DECR key`"),
    replicated("INCRBY", 3, "`INCRBY key delta`"),
    replicated("DECRBY", 3, "`DECRBY key delta`"),
    replicated("APPEND", 3, "`APPEND key value`"),
    replicated("GETSET", 3, "`GETSET key value`: set, reply the old value"),
    replicated("SETNX", 3, "`SETNX key value`: `1` when set, `0` when the key existed"),
    replicated("GETDEL", 2, "`GETDEL key`"),
    replicated("STRLEN", 2, "`STRLEN key`"),
    replicated("GETRANGE", 4, "`GETRANGE key start end` (negative positions count from the end)"),
    replicated("SUBSTR", 4, "`SUBSTR key start end`: GETRANGE's old name"),
    replicated("SETRANGE", 4, "`SETRANGE key offset value` (zero-padded; at most 64 MiB)"),
    replicated("MGET", -2, "`MGET key ...`"),
    replicated("MSET", -3, "`MSET key value ...`"),
    replicated("MSETNX", -3, "`MSETNX key value ...`: all or none, `1` or `0`"),
    replicated("HSET", -4, "`HSET key field value ...`"),
    replicated("HMSET", -4, "`HMSET key field value ...` (replies `OK`)"),
    replicated("HGET", 3, "`HGET key field`"),
    replicated("HGETALL", 2, "`HGETALL key` (a map in RESP3)"),
    replicated("HDEL", -3, "`HDEL key field ...`"),
    replicated("HINCRBY", 4, "`HINCRBY key field delta`"),
    replicated("HSETNX", 4, "`HSETNX key field value`"),
    replicated("HMGET", -3, "`HMGET key field ...`"),
    replicated("HKEYS", 2, "`HKEYS key`"),
    replicated("HVALS", 2, "`HVALS key`"),
    replicated("HLEN", 2, "`HLEN key`"),
    replicated("HEXISTS", 3, "`HEXISTS key field`"),
    replicated("HSTRLEN", 3, "`HSTRLEN key field`"),
    replicated("SETEX", 4, "`SETEX key seconds value`"),
    replicated("PSETEX", 4, "`PSETEX key milliseconds value`"),
    replicated(
        "EXPIRE",
        -3,
        "`EXPIRE key seconds [NX|XX|GT|LT]`: expiry is decided from each command's gateway timestamp, the same on every replica",
    ),
    replicated("PEXPIRE", -3, "`PEXPIRE key milliseconds [NX|XX|GT|LT]`"),
    replicated("EXPIREAT", -3, "`EXPIREAT key unix-seconds [NX|XX|GT|LT]`"),
    replicated("PEXPIREAT", -3, "`PEXPIREAT key unix-milliseconds [NX|XX|GT|LT]`"),
    replicated("TTL", 2, "`TTL key`: seconds left, -1 without expiry, -2 when absent"),
    replicated("PTTL", 2, "`PTTL key`: milliseconds left"),
    replicated("EXPIRETIME", 2, "`EXPIRETIME key`: the Unix time in seconds"),
    replicated("PEXPIRETIME", 2, "`PEXPIRETIME key`: the Unix time in milliseconds"),
    replicated("PERSIST", 2, "`PERSIST key`: the key no longer expires"),
    gateway("TIME", 1, "`TIME`: the gateway's clock, the one that stamps commands for expiry"),
    // ---- the whole keyspace, and renames (`keyspace.rs`) ----
    replicated("KEYS", 2, "`KEYS pattern`: every key matching the glob pattern, in key order"),
    replicated(
        "SCAN",
        -2,
        "`SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: keys in the order of a fixed hash; every key present for the whole walk is returned",
    ),
    replicated("DBSIZE", 1, "`DBSIZE`: how many keys exist"),
    replicated("FLUSHDB", -1, "`FLUSHDB [ASYNC|SYNC]`: delete every key (there is one database)"),
    replicated("FLUSHALL", -1, "`FLUSHALL [ASYNC|SYNC]`: delete every key"),
    replicated(
        "RANDOMKEY",
        1,
        "`RANDOMKEY`: a key, picked by a seed the gateway draws, so every replica picks the same",
    ),
    replicated("RENAME", 3, "`RENAME key newkey`: move the value, replacing newkey's"),
    replicated("RENAMENX", 3, "`RENAMENX key newkey`: `1` when moved, `0` when newkey exists"),
    replicated("UNLINK", -2, "`UNLINK key ...`: as DEL"),
    replicated("TYPE", 2, "`TYPE key`: `string`, `hash`, `list`, `set`, `zset` or `none`"),
    // Lists, sets, sorted sets and float increments (`gateway/collections.rs`).
    replicated("INCRBYFLOAT", 3, "`INCRBYFLOAT key delta`: the new value as text, an `f64` (Redis: a `long double`)"),
    replicated("HINCRBYFLOAT", 4, "`HINCRBYFLOAT key field delta`"),
    replicated("LPUSH", -3, "`LPUSH key value ...`"),
    replicated("RPUSH", -3, "`RPUSH key value ...`"),
    replicated("LPUSHX", -3, "`LPUSHX key value ...`: only onto an existing list"),
    replicated("RPUSHX", -3, "`RPUSHX key value ...`: only onto an existing list"),
    replicated("LPOP", -2, "`LPOP key [count]`"),
    replicated("RPOP", -2, "`RPOP key [count]`"),
    replicated("LRANGE", 4, "`LRANGE key start stop`"),
    replicated("LLEN", 2, "`LLEN key`"),
    replicated("LINDEX", 3, "`LINDEX key index`"),
    replicated("LSET", 4, "`LSET key index value`"),
    replicated("LREM", 4, "`LREM key count value`"),
    replicated("LTRIM", 4, "`LTRIM key start stop`"),
    replicated("LINSERT", 5, "`LINSERT key BEFORE|AFTER pivot value`"),
    replicated("LPOS", -3, "`LPOS key value [RANK rank] [COUNT count] [MAXLEN len]`"),
    replicated("SADD", -3, "`SADD key member ...`"),
    replicated("SREM", -3, "`SREM key member ...`"),
    replicated("SMEMBERS", 2, "`SMEMBERS key` (a set in RESP3; ordo lists members in byte order)"),
    replicated("SISMEMBER", 3, "`SISMEMBER key member`"),
    replicated("SMISMEMBER", -3, "`SMISMEMBER key member ...`"),
    replicated("SCARD", 2, "`SCARD key`"),
    replicated("SPOP", -2, "`SPOP key [count]`: the gateway draws the random seed, every replica pops alike"),
    replicated("SRANDMEMBER", -2, "`SRANDMEMBER key [count]` (seeded like SPOP)"),
    replicated("SINTER", -2, "`SINTER key ...`"),
    replicated("SUNION", -2, "`SUNION key ...`"),
    replicated("SDIFF", -2, "`SDIFF key ...`"),
    replicated("SINTERSTORE", -3, "`SINTERSTORE destination key ...`"),
    replicated("SUNIONSTORE", -3, "`SUNIONSTORE destination key ...`"),
    replicated("SDIFFSTORE", -3, "`SDIFFSTORE destination key ...`"),
    replicated("SMOVE", 4, "`SMOVE source destination member`"),
    replicated("ZADD", -4, "`ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...`"),
    replicated("ZINCRBY", 4, "`ZINCRBY key delta member`"),
    replicated("ZREM", -3, "`ZREM key member ...`"),
    replicated("ZSCORE", 3, "`ZSCORE key member` (a double in RESP3)"),
    replicated("ZMSCORE", -3, "`ZMSCORE key member ...`"),
    replicated("ZCARD", 2, "`ZCARD key`"),
    replicated("ZRANK", 3, "`ZRANK key member`"),
    replicated("ZREVRANK", 3, "`ZREVRANK key member`"),
    replicated("ZCOUNT", 4, "`ZCOUNT key min max` (`(` excludes, `-inf`/`+inf`)"),
    replicated(
        "ZRANGE",
        -4,
        "`ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` (pairs in RESP3)",
    ),
    replicated("ZRANGEBYSCORE", -4, "`ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`"),
    replicated("ZREVRANGEBYSCORE", -4, "`ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`"),
    replicated("ZREVRANGE", -4, "`ZREVRANGE key start stop [WITHSCORES]`"),
    replicated("ZPOPMIN", -2, "`ZPOPMIN key [count]`"),
    replicated("ZPOPMAX", -2, "`ZPOPMAX key [count]`"),
    replicated("ZREMRANGEBYSCORE", 4, "`ZREMRANGEBYSCORE key min max`"),
    replicated("ZREMRANGEBYRANK", 4, "`ZREMRANGEBYRANK key start stop`"),
];

/// The table entry of a command, by its upper-case name.
pub fn lookup(upper: &str) -> Option<&'static CommandSpec> {
    COMMANDS.iter().find(|spec| spec.name == upper)
}

impl CommandSpec {
    /// True when `words` words (the name included) fit the arity.
    pub fn arity_fits(&self, words: usize) -> bool {
        let words = words as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { words == arity } else { words >= -arity }
    }
}

/// Marks the start of the generated list in a Markdown file.
pub const DOCS_BEGIN: &str = "<!-- commands: generated from crates/net/src/gateway/table.rs; do not edit -->";
/// Marks its end.
pub const DOCS_END: &str = "<!-- end of commands -->";

/// The command list as Markdown: one table, in [`COMMANDS`]' order.
pub fn markdown() -> String {
    let mut out = String::from("| command | answered by | syntax and notes |\n|---|---|---|\n");
    for spec in COMMANDS {
        let by = match spec.kind {
            Kind::Gateway => "gateway",
            Kind::Replicated => "replicated",
        };
        // A bar ends a Markdown table cell, even inside a code span, unless escaped.
        out.push_str(&format!("| `{}` | {by} | {} |\n", spec.name, spec.summary.replace('|', "\\|")));
    }
    out
}

/// `text` with the part between [`DOCS_BEGIN`] and [`DOCS_END`] replaced by [`markdown`];
/// `None` when the markers are missing.
pub fn with_generated_list(text: &str) -> Option<String> {
    let start = text.find(DOCS_BEGIN)? + DOCS_BEGIN.len();
    let end = start + text[start..].find(DOCS_END)?;
    Some(format!("{}\n{}{}", &text[..start], markdown(), &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_are_unique_and_upper_case() {
        // Goal: a lookup finds exactly one entry, and the docs never list a command twice.
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.name, spec.name.to_ascii_uppercase());
            assert!(COMMANDS[i + 1..].iter().all(|other| other.name != spec.name), "{} twice", spec.name);
            assert_ne!(spec.arity, 0, "{}: Redis arities are never 0", spec.name);
        }
        assert!(lookup("GET").is_some_and(|spec| spec.arity_fits(2) && !spec.arity_fits(3)));
        assert!(lookup("DEL").is_some_and(|spec| spec.arity_fits(5) && !spec.arity_fits(1)));
    }

    #[test]
    fn docs_list_the_table() {
        // Goal: README.md and docs/runtime.md list exactly the commands of this table. Method:
        // render the list and compare it with the marked part of each file; run with
        // ORDO_UPDATE_DOCS=1 to rewrite that part instead.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in ["README.md", "docs/runtime.md"] {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path).expect("the docs exist");
            let expected =
                with_generated_list(&text).unwrap_or_else(|| panic!("{file} lacks the command-list markers"));
            if std::env::var_os("ORDO_UPDATE_DOCS").is_some() {
                std::fs::write(&path, &expected).expect("docs writable");
            } else {
                assert!(
                    text == expected,
                    "{file}'s command list differs from the gateway's table; rerun with ORDO_UPDATE_DOCS=1"
                );
            }
        }
    }
}
