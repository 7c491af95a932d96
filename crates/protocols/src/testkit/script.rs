//! Scripted scenario tests (STYLE rule 14), after etcd raft's datadriven interaction tests: a
//! text file of commands that drive a [`Cluster`], each block followed by the transcript it
//! must print. [`run_scripts`] runs every script of a directory; with `ORDO_REWRITE=1` in the
//! environment it writes the transcripts it got into the files instead of comparing.
//!
//! # Format
//!
//! Scripts live in `crates/protocols/testdata/<protocol>/*.txt`:
//!
//! ```text
//! # specs/nezha.md §11 scenario 1: happy-path fast commit
//! cluster replicas=3 clients=1 proxies=1
//! ----
//! n0 replica shard=0 rank=0
//! ...
//!
//! # a comment
//! submit client=0 set k v
//! deliver
//! ----
//! op 1 at n4: set k v
//! n4 -> n3: ClientRequest { .. }
//! ...
//! ```
//!
//! A block is one or more command lines, a `----` line, the expected output (no blank line in
//! it) and a blank line (or the end of the file). Lines starting with `#` outside the output
//! are comments. The first line of a script must be a comment naming the scenario it covers
//! in `specs/<protocol>.md` (or `docs/protocols/<protocol>.md` for protocols without a spec).
//! Words are split at spaces; `"..."` quotes a word with spaces.
//!
//! # Commands
//!
//! Nodes are named `n3` or `3` (node id), `r1` (rank 1 of shard 0), `r1.2` (rank 2 of shard 1),
//! `c0` (client 0), `p0` (proxy 0). Durations take a unit: `ns`, `us`, `ms` or `s`.
//!
//! Building:
//!
//! - `cluster replicas=3 clients=1 [seed=N] [shards=S] [f=F] [sidecar] [width=W] [option=v...]`:
//!   a new cluster (see [`Layout`]): the replicas of each shard, then the protocol's extra roles
//!   (`Protocol::extra_roles`, e.g. Nezha's `proxies=K`), then the clients; every other
//!   `option=v` sets a field of the protocol's `Config`. Prints the topology. A script may
//!   build several clusters, one after the other.
//!
//! Inputs (each prints what it did):
//!
//! - `submit [client=I] set k v` (or `get k`, `del k...`, `incr k`, `decr k`, `append k v`):
//!   hands the command to client I (default 0).
//! - `deliver [all|next|round|n=K] [from=X] [to=X] [kind=A|B]`: delivers the matching messages
//!   oldest first: all of them including those they cause (the default), one, those pending
//!   when the command starts, or K. `kind` is the first word of a message's Debug output.
//! - `drop [from=X] [to=X] [kind=..] [n=K]`, `duplicate [...]`: removes the matching messages,
//!   or puts a copy of each at the end of the network.
//! - `crash node=X`, `restart node=X`, `isolate node=X`, `heal [node=X]` (all when none).
//! - `advance 10ms`: moves time, firing the timers that fall due; messages stay in the network.
//! - `run 50ms`: delivers messages at once and fires timers, for that long.
//! - `tick node=X [timer=Name]`: fires every pending timer of the node (whose Debug starts with
//!   Name), whatever its deadline.
//! - `skew-clock node=X [offset=-5us] [drift=100] [error=1us]`: jumps the node's clock by the
//!   offset, sets its drift (ppm) and the error bound it claims.
//! - `durability node=X manual|auto`, `flush node=X`: holds the node's writes (and the sends
//!   that wait for them) until a flush; flushes them.
//!
//! Reads: `status [node=X]` (`nX: <status()>` per node), `pending [from=..] [to=..] [kind=..]`
//! (`from -> to: <Debug of message>` per message), `timers [node=X]` (each pending timer and its
//! true deadline), `stats [node=X]` (path counts, executed, events, drops), `completions`
//! (`op N at nX: <result>` for every completion so far).
//!
//! After each command, completions it caused print as `op N done at nX: <result>`. Message
//! lines are cut at `width` characters (200 by default) with `…`.

use super::{Cluster, KitClock, STEP_LIMIT};
use ordo_core::{Command, Destinations, NodeId, NodeSpec, Protocol, Role, Topology};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable that makes [`run_scripts`] rewrite expected outputs.
pub const REWRITE_VAR: &str = "ORDO_REWRITE";

/// Message lines longer than this are cut, unless the script's `cluster` sets `width`.
const DEFAULT_WIDTH: usize = 200;

// ---- topology ----------------------------------------------------------------------------

/// The shape of a cluster with the protocol's extra roles, numbered as the simulator numbers
/// them: the replicas of shard 0 in rank order, those of shard 1..., then one node per
/// `Protocol::extra_roles` entry, then the clients. One site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Shards, each with its own replicas.
    pub shards: usize,
    /// Replicas per shard.
    pub replicas: usize,
    /// Clients.
    pub clients: usize,
    /// Replica failures each shard tolerates; `(replicas - 1) / 2` when `None`.
    pub f: Option<usize>,
    /// Each extra node (proxy...) on its own machine, with clients spread over those machines
    /// (client `i` with extra node `i % extras`), as the simulator's `colocate_clients` does.
    pub sidecar: bool,
}

impl Layout {
    /// One shard of `replicas` replicas and `clients` clients.
    pub fn new(replicas: usize, clients: usize) -> Self {
        Layout { shards: 1, replicas, clients, f: None, sidecar: false }
    }

    /// The topology for protocol `P` with `config` (which decides the extra roles).
    pub fn topology<P: Protocol>(&self, config: &P::Config) -> Topology {
        assert!(self.replicas > 0 && self.shards > 0, "a cluster has at least one replica");
        let mut nodes = Vec::new();
        let mut shards = Vec::new();
        let next_id = |nodes: &Vec<NodeSpec>| NodeId(u32::try_from(nodes.len()).expect("node ids fit in u32"));
        for shard in 0..self.shards {
            let mut members = Vec::new();
            for _ in 0..self.replicas {
                let id = next_id(&nodes);
                nodes.push(NodeSpec { id, role: Role::Replica, site: 0, shard: Some(shard), machine: None });
                members.push(id);
            }
            shards.push(Destinations::from(members));
        }
        let first_extra = nodes.len();
        let extras = P::extra_roles(self.replicas, config);
        let count = extras.len();
        let sidecar = self.sidecar && count > 0;
        for (index, role) in extras.into_iter().enumerate() {
            let id = next_id(&nodes);
            nodes.push(NodeSpec { id, role, site: 0, shard: None, machine: sidecar.then_some(index) });
        }
        for client in 0..self.clients {
            let id = next_id(&nodes);
            let machine = if sidecar { nodes[first_extra + client % count].machine } else { None };
            nodes.push(NodeSpec { id, role: Role::Client, site: 0, shard: None, machine });
        }
        Topology {
            nodes,
            shards,
            f: self.f.unwrap_or((self.replicas - 1) / 2),
            sites: vec!["local".to_string()],
            site_delay_ns: vec![vec![0]],
        }
    }
}

// ---- protocol options --------------------------------------------------------------------

/// Builds a protocol's `Config` from `name=value` pairs (fields not named keep their
/// defaults, since every protocol's `Config` is `#[serde(default)]`). Numbers may carry a
/// duration unit (`1ms` is 1000000) and underscores; enums take their serde names.
pub fn config_from_options<C: DeserializeOwned>(options: &[(String, String)]) -> Result<C, String> {
    let pairs = options.iter().map(|(name, value)| (name.as_str(), OptionValue(value)));
    let map = de::value::MapDeserializer::<_, de::value::Error>::new(pairs);
    C::deserialize(map).map_err(|e| e.to_string())
}

/// One option's value, read as whatever the field wants.
struct OptionValue<'a>(&'a str);

impl<'de> IntoDeserializer<'de, de::value::Error> for OptionValue<'_> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for OptionValue<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            text => match parse_signed_ns(text) {
                Ok(n) if n >= 0 => visitor.visit_u64(n as u64),
                Ok(n) => visitor.visit_i64(n),
                Err(_) => visitor.visit_str(text),
            },
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_str(self.0)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_str(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(de::value::StrDeserializer::<Self::Error>::new(self.0))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0.parse::<f64>() {
            Ok(x) => visitor.visit_f64(x),
            Err(_) => self.deserialize_any(visitor),
        }
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_f64(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char bytes byte_buf unit unit_struct
        newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// `12`, `1_000`, `-5us`, `10ms`, `2s`, `300ns` in nanoseconds (a bare number as is).
fn parse_signed_ns(text: &str) -> Result<i64, String> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits_end = body.find(|c: char| !c.is_ascii_digit() && c != '_').unwrap_or(body.len());
    let (digits, unit) = body.split_at(digits_end);
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err(format!("`{text}` is not a number"));
    }
    let value: i64 = digits.parse().map_err(|_| format!("`{text}` is out of range"))?;
    let scale = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (ns, us, ms, s)")),
    };
    let ns = value.checked_mul(scale).ok_or_else(|| format!("`{text}` is out of range"))?;
    Ok(if negative { -ns } else { ns })
}

fn parse_ns(text: &str) -> Result<u64, String> {
    let ns = parse_signed_ns(text)?;
    u64::try_from(ns).map_err(|_| format!("`{text}` is negative"))
}

/// Nanoseconds in the largest unit that divides them exactly: `10ms`, `80us`, `1234ns`.
fn format_ns(ns: i128) -> String {
    match ns {
        0 => "0".to_string(),
        _ if ns % 1_000_000_000 == 0 => format!("{}s", ns / 1_000_000_000),
        _ if ns % 1_000_000 == 0 => format!("{}ms", ns / 1_000_000),
        _ if ns % 1_000 == 0 => format!("{}us", ns / 1_000),
        _ => format!("{ns}ns"),
    }
}

// ---- parsing -----------------------------------------------------------------------------

/// A malformed script: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    /// The script's name (its path as shown to the reader).
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for ScriptError {}

/// A parsed script: its blocks, and the lines after the last one.
#[derive(Debug)]
struct Script {
    blocks: Vec<Block>,
    /// Comments and blank lines after the last block, kept when rewriting.
    trailer: Vec<String>,
}

/// Command lines, then the output they must print.
#[derive(Debug)]
struct Block {
    /// The raw lines before `----` (comments, blank lines and commands), kept when rewriting.
    lead: Vec<String>,
    /// The commands, with their line numbers.
    commands: Vec<(usize, Step)>,
    /// The line of `----`.
    separator: usize,
    /// The expected output.
    expected: Vec<String>,
}

/// A node as a script names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeRef {
    Id(u32),
    Replica { shard: usize, rank: usize },
    Client(usize),
    Proxy(usize),
}

impl NodeRef {
    fn parse(text: &str) -> Result<NodeRef, String> {
        let number = |s: &str| s.parse::<usize>().map_err(|_| format!("`{text}` is not a node (n3, r1, c0, p0)"));
        if let Ok(id) = text.parse::<u32>() {
            return Ok(NodeRef::Id(id));
        }
        let (kind, rest) = text.split_at(text.chars().next().map_or(0, char::len_utf8));
        match kind {
            "n" => Ok(NodeRef::Id(rest.parse().map_err(|_| format!("`{text}` is not a node id"))?)),
            "r" => match rest.split_once('.') {
                Some((rank, shard)) => Ok(NodeRef::Replica { shard: number(shard)?, rank: number(rank)? }),
                None => Ok(NodeRef::Replica { shard: 0, rank: number(rest)? }),
            },
            "c" => Ok(NodeRef::Client(number(rest)?)),
            "p" => Ok(NodeRef::Proxy(number(rest)?)),
            _ => Err(format!("`{text}` is not a node (n3, r1, r1.2, c0, p0)")),
        }
    }

    fn resolve(self, topology: &Topology) -> Result<NodeId, String> {
        let found = match self {
            NodeRef::Id(id) => (id as usize) < topology.nodes.len(),
            _ => true,
        };
        let node = match self {
            NodeRef::Id(id) => found.then_some(NodeId(id)),
            NodeRef::Replica { shard, rank } => topology.shards.get(shard).and_then(|s| s.get(rank)).copied(),
            NodeRef::Client(index) => topology.with_role(Role::Client).nth(index),
            NodeRef::Proxy(index) => topology.with_role(Role::Proxy).nth(index),
        };
        node.ok_or_else(|| format!("the cluster has no node {self:?}"))
    }
}

/// Which messages a command acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Filter {
    from: Option<NodeRef>,
    to: Option<NodeRef>,
    /// Message kinds (the first word of the Debug output); any when empty.
    kinds: Vec<String>,
    /// At most this many.
    count: Option<usize>,
}

/// How `deliver` goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    /// Until no message matches, including those the deliveries cause.
    All,
    /// Only the messages pending when the command starts.
    Round,
}

/// One command of a script.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Cluster { layout: Layout, seed: u64, width: usize, options: Vec<(String, String)> },
    Submit { client: usize, command: Command, text: String },
    Deliver { filter: Filter, delivery: Delivery },
    Drop(Filter),
    Duplicate(Filter),
    Crash(NodeRef),
    Restart(NodeRef),
    Isolate(NodeRef),
    Heal(Option<NodeRef>),
    Advance(u64),
    Run(u64),
    Tick { node: NodeRef, timer: Option<String> },
    SkewClock { node: NodeRef, offset: Option<i64>, drift_ppm: Option<i64>, error: Option<u64> },
    Durability { node: NodeRef, manual: bool },
    Flush(NodeRef),
    Status(Option<NodeRef>),
    Pending(Filter),
    Timers(Option<NodeRef>),
    Stats(Option<NodeRef>),
    Completions,
}

/// Splits a command line into words; `"..."` quotes a word (with `\"` and `\\` inside).
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            if c != '"' {
                word.push(c);
                continue;
            }
            loop {
                match chars.next() {
                    None => return Err("unclosed `\"`".to_string()),
                    Some('"') => break,
                    Some('\\') => word.push(chars.next().ok_or("unclosed `\"`")?),
                    Some(c) => word.push(c),
                }
            }
        }
        words.push(word);
    }
    Ok(words)
}

/// A command's arguments: `name=value` pairs and bare words, consumed as the command reads
/// them; whatever is left is an error.
struct Args {
    command: String,
    named: Vec<(String, String)>,
    bare: Vec<String>,
}

impl Args {
    fn new(command: &str, words: &[String]) -> Args {
        let mut args = Args { command: command.to_string(), named: Vec::new(), bare: Vec::new() };
        for word in words {
            match word.split_once('=') {
                Some((name, value)) if !name.is_empty() => args.named.push((name.to_string(), value.to_string())),
                _ => args.bare.push(word.clone()),
            }
        }
        args
    }

    fn take(&mut self, name: &str) -> Option<String> {
        let index = self.named.iter().position(|(n, _)| n == name)?;
        Some(self.named.remove(index).1)
    }

    fn flag(&mut self, word: &str) -> bool {
        let index = self.bare.iter().position(|w| w == word);
        index.map(|i| self.bare.remove(i)).is_some()
    }

    fn number(&mut self, name: &str) -> Result<Option<usize>, String> {
        self.take(name).map(|v| v.parse().map_err(|_| format!("{name}=`{v}` is not a number"))).transpose()
    }

    fn node(&mut self, name: &str) -> Result<Option<NodeRef>, String> {
        self.take(name).map(|v| NodeRef::parse(&v)).transpose()
    }

    fn required_node(&mut self) -> Result<NodeRef, String> {
        self.node("node")?.ok_or_else(|| format!("`{}` needs node=X", self.command))
    }

    fn filter(&mut self) -> Result<Filter, String> {
        Ok(Filter {
            from: self.node("from")?,
            to: self.node("to")?,
            kinds: self.take("kind").map(|k| k.split('|').map(str::to_string).collect()).unwrap_or_default(),
            count: self.number("n")?,
        })
    }

    /// The one bare word a command takes (a duration, say).
    fn single(&mut self, what: &str) -> Result<String, String> {
        if self.bare.is_empty() {
            return Err(format!("`{}` needs {what}", self.command));
        }
        Ok(self.bare.remove(0))
    }

    fn finish(self) -> Result<(), String> {
        let mut left: Vec<String> = self.named.iter().map(|(n, v)| format!("{n}={v}")).collect();
        left.extend(self.bare);
        if left.is_empty() { Ok(()) } else { Err(format!("`{}` does not take {}", self.command, left.join(" "))) }
    }
}

/// The key-value command of `submit`.
fn kv_command(words: &[String]) -> Result<Command, String> {
    let usage = "a command: set k v, get k, del k..., incr k, decr k, append k v";
    let (name, rest) = words.split_first().ok_or_else(|| format!("`submit` needs {usage}"))?;
    let key = |i: usize| rest.get(i).map(|k| ordo_core::Key::from(k.clone()));
    let command = match (name.as_str(), rest.len()) {
        ("set", 2) => Command::set(key(0).expect("two words"), key(1).expect("two words")),
        ("get", 1) => Command::get(key(0).expect("one word")),
        ("del", n) if n > 0 => Command::Del { keys: (0..n).filter_map(key).collect() },
        ("incr", 1) => Command::IncrBy { key: key(0).expect("one word"), delta: 1 },
        ("decr", 1) => Command::IncrBy { key: key(0).expect("one word"), delta: -1 },
        ("append", 2) => Command::append(key(0).expect("two words"), key(1).expect("two words")),
        _ => return Err(format!("`{}` is not {usage}", words.join(" "))),
    };
    Ok(command)
}

/// Parses one command line.
fn parse_step(line: &str) -> Result<Step, String> {
    let words = words(line)?;
    let (name, rest) = words.split_first().ok_or("an empty command")?;
    if name == "submit" {
        let (client, command_words) = match rest.first().and_then(|w| w.strip_prefix("client=")) {
            Some(index) => (index.parse().map_err(|_| format!("client=`{index}` is not a number"))?, &rest[1..]),
            None => (0, rest),
        };
        let command = kv_command(command_words)?;
        return Ok(Step::Submit { client, command, text: command_words.join(" ") });
    }
    let mut args = Args::new(name, rest);
    let step = match name.as_str() {
        "cluster" => parse_cluster(&mut args)?,
        "deliver" => {
            let mut filter = args.filter()?;
            let mut delivery = Delivery::All;
            if args.flag("next") {
                filter.count = Some(1);
            } else if args.flag("round") {
                delivery = Delivery::Round;
            } else {
                args.flag("all");
            }
            Step::Deliver { filter, delivery }
        }
        "drop" => Step::Drop(args.filter()?),
        "duplicate" => Step::Duplicate(args.filter()?),
        "pending" => Step::Pending(args.filter()?),
        "crash" => Step::Crash(args.required_node()?),
        "restart" => Step::Restart(args.required_node()?),
        "isolate" => Step::Isolate(args.required_node()?),
        "heal" => Step::Heal(args.node("node")?),
        "advance" => Step::Advance(parse_ns(&args.single("a duration (advance 10ms)")?)?),
        "run" => Step::Run(parse_ns(&args.single("a duration (run 50ms)")?)?),
        "tick" => Step::Tick { node: args.required_node()?, timer: args.take("timer") },
        "skew-clock" => parse_skew_clock(&mut args)?,
        "durability" => {
            let node = args.required_node()?;
            let manual = match (args.flag("manual"), args.flag("auto")) {
                (true, false) => true,
                (false, true) => false,
                _ => return Err("`durability` needs manual or auto".into()),
            };
            Step::Durability { node, manual }
        }
        "flush" => Step::Flush(args.required_node()?),
        "status" => Step::Status(args.node("node")?),
        "timers" => Step::Timers(args.node("node")?),
        "stats" => Step::Stats(args.node("node")?),
        "completions" => Step::Completions,
        other => return Err(format!("unknown command `{other}`")),
    };
    args.finish()?;
    Ok(step)
}

fn parse_cluster(args: &mut Args) -> Result<Step, String> {
    let mut layout = Layout::new(args.number("replicas")?.unwrap_or(3), args.number("clients")?.unwrap_or(1));
    layout.shards = args.number("shards")?.unwrap_or(1);
    layout.f = args.number("f")?;
    layout.sidecar = args.flag("sidecar");
    if layout.replicas == 0 || layout.shards == 0 {
        return Err("a cluster has at least one replica and one shard".into());
    }
    let seed = args.number("seed")?.unwrap_or(1) as u64;
    let width = args.number("width")?.unwrap_or(DEFAULT_WIDTH).max(10);
    // Every other `name=value` is a protocol option.
    let options = std::mem::take(&mut args.named);
    Ok(Step::Cluster { layout, seed, width, options })
}

fn parse_skew_clock(args: &mut Args) -> Result<Step, String> {
    let node = args.required_node()?;
    let offset = args.take("offset").map(|v| parse_signed_ns(&v)).transpose()?;
    let drift_ppm = args.take("drift").map(|v| v.parse().map_err(|_| format!("drift=`{v}`: ppm"))).transpose()?;
    let error = args.take("error").map(|v| parse_ns(&v)).transpose()?;
    if offset.is_none() && drift_ppm.is_none() && error.is_none() {
        return Err("`skew-clock` needs offset=, drift= or error=".into());
    }
    Ok(Step::SkewClock { node, offset, drift_ppm, error })
}

/// Parses a script; `file` names it in errors.
fn parse(file: &str, text: &str) -> Result<Script, ScriptError> {
    let error = |line: usize, message: String| ScriptError { file: file.to_string(), line, message };
    let lines: Vec<&str> = text.lines().collect();
    match lines.iter().position(|l| !l.trim().is_empty()) {
        Some(first) if lines[first].starts_with('#') => {
            let names = ["specs/", "docs/protocols/"];
            if !names.iter().any(|n| lines[first].contains(n)) {
                return Err(error(
                    first + 1,
                    "the first comment must name the scenario covered \
                     (specs/<protocol>.md or docs/protocols/<protocol>.md)"
                        .into(),
                ));
            }
        }
        Some(first) => {
            return Err(error(first + 1, "a script starts with a comment naming the spec scenario it covers".into()));
        }
        None => return Err(error(1, "empty script".into())),
    }
    let mut blocks = Vec::new();
    let mut lead: Vec<String> = Vec::new();
    let mut commands = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let number = index + 1;
        index += 1;
        if line.trim() == "----" {
            if commands.is_empty() {
                return Err(error(number, "`----` without a command before it".into()));
            }
            let mut expected = Vec::new();
            while index < lines.len() && !lines[index].trim().is_empty() {
                expected.push(lines[index].to_string());
                index += 1;
            }
            index += 1; // the blank line that ends the block
            blocks.push(Block {
                lead: std::mem::take(&mut lead),
                commands: std::mem::take(&mut commands),
                separator: number,
                expected,
            });
            continue;
        }
        lead.push(line.to_string());
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let step = parse_step(trimmed).map_err(|message| error(number, message))?;
        commands.push((number, step));
    }
    if let Some((line, _)) = commands.first() {
        return Err(error(*line, "commands without `----` and expected output after them".into()));
    }
    if blocks.is_empty() {
        return Err(error(lines.len(), "no command".into()));
    }
    Ok(Script { blocks, trailer: lead })
}

// ---- running -----------------------------------------------------------------------------

/// The state a script runs in.
struct Runner<P: Protocol> {
    cluster: Option<Cluster<P>>,
    /// Each node's clock as the script set it.
    clocks: Vec<KitClock>,
    isolated: BTreeSet<NodeId>,
    width: usize,
    completions_seen: usize,
}

impl<P: Protocol> Runner<P> {
    fn new() -> Self {
        Runner {
            cluster: None,
            clocks: Vec::new(),
            isolated: BTreeSet::new(),
            width: DEFAULT_WIDTH,
            completions_seen: 0,
        }
    }

    fn cluster(&mut self) -> Result<&mut Cluster<P>, String> {
        self.cluster.as_mut().ok_or_else(|| "no cluster yet: start with `cluster replicas=N clients=M`".to_string())
    }

    fn node(&mut self, node: NodeRef) -> Result<NodeId, String> {
        let topology = self.cluster()?.topology().clone();
        node.resolve(&topology)
    }

    fn message_line(&self, from: NodeId, to: NodeId, message: &P::Message) -> String {
        let text = format!("{message:?}");
        let cut = match text.char_indices().nth(self.width) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        };
        let up = self.cluster.as_ref().is_none_or(|c| c.is_up(to));
        let lost = if self.isolated.contains(&from) || self.isolated.contains(&to) {
            " (lost: isolated)"
        } else if !up {
            " (lost: down)"
        } else {
            ""
        };
        format!("{from} -> {to}: {cut}{lost}")
    }

    /// The ids and lines of the pending messages `filter` picks, oldest first.
    fn matching(&mut self, filter: &Filter) -> Result<Vec<(u64, String)>, String> {
        let from = filter.from.map(|n| self.node(n)).transpose()?;
        let to = filter.to.map(|n| self.node(n)).transpose()?;
        let cluster = self.cluster.as_ref().expect("resolved above");
        let picked = cluster
            .pending()
            .filter(|e| from.is_none_or(|n| e.from == n) && to.is_none_or(|n| e.to == n))
            .filter(|e| filter.kinds.is_empty() || filter.kinds.iter().any(|k| kind_of(&e.message) == *k))
            .take(filter.count.unwrap_or(usize::MAX))
            .map(|e| (e.id, self.message_line(e.from, e.to, &e.message)))
            .collect();
        Ok(picked)
    }

    /// Runs one command; returns what it prints.
    fn run(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let mut out = match step {
            Step::Cluster { layout, seed, width, options } => self.build(layout, *seed, *width, options)?,
            Step::Submit { client, command, text } => {
                let node = self.node(NodeRef::Client(*client))?;
                let op = self.cluster()?.submit(node, command.clone());
                vec![format!("op {op} at {node}: {text}")]
            }
            Step::Deliver { .. } | Step::Drop(_) | Step::Duplicate(_) | Step::Pending(_) => self.messages(step)?,
            Step::Crash(_) | Step::Restart(_) | Step::Isolate(_) | Step::Heal(_) => self.faults(step)?,
            Step::Advance(_) | Step::Run(_) | Step::Tick { .. } => self.time(step)?,
            Step::SkewClock { .. } | Step::Durability { .. } | Step::Flush(_) => self.clock_and_disk(step)?,
            Step::Status(_) | Step::Timers(_) | Step::Stats(_) | Step::Completions => self.reads(step)?,
        };
        if let Some(cluster) = &self.cluster {
            for c in &cluster.completions()[self.completions_seen..] {
                out.push(format!("op {} done at {}: {:?}", c.op, c.client, c.result));
            }
            self.completions_seen = cluster.completions().len();
        }
        if out.is_empty() {
            out.push("(none)".into());
        }
        for line in &mut out {
            if line.trim().is_empty() {
                *line = "(blank)".into();
            }
        }
        Ok(out)
    }

    /// `cluster`: a new cluster; prints its topology.
    fn build(
        &mut self,
        layout: &Layout,
        seed: u64,
        width: usize,
        options: &[(String, String)],
    ) -> Result<Vec<String>, String> {
        let config: P::Config = config_from_options(options).map_err(|e| format!("{} options: {e}", P::NAME))?;
        P::validate_config(&config)?;
        let topology = layout.topology::<P>(&config);
        let mut out = Vec::new();
        for spec in &topology.nodes {
            let role = format!("{:?}", spec.role).to_lowercase();
            let mut line = format!("{} {role}", spec.id);
            if let Some(shard) = spec.shard {
                let rank = topology.shards[shard].iter().position(|&n| n == spec.id).expect("in its shard");
                line += &format!(" shard={shard} rank={rank}");
            }
            if let Some(machine) = spec.machine {
                line += &format!(" machine={machine}");
            }
            out.push(line);
        }
        self.clocks = vec![KitClock::default(); topology.nodes.len()];
        self.cluster = Some(Cluster::with_topology(topology, config, seed));
        self.isolated.clear();
        self.width = width;
        self.completions_seen = 0;
        Ok(out)
    }

    /// `deliver`, `drop`, `duplicate`, `pending`: print each message acted on.
    fn messages(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        match step {
            Step::Deliver { filter, delivery } => {
                let round: Option<BTreeSet<u64>> = match delivery {
                    Delivery::Round => Some(self.matching(filter)?.into_iter().map(|(id, _)| id).collect()),
                    Delivery::All => None,
                };
                let limit = filter.count.unwrap_or(usize::MAX);
                let one = Filter { count: None, ..filter.clone() };
                while out.len() < limit {
                    let mut candidates = self.matching(&one)?.into_iter();
                    let Some((id, line)) = candidates.find(|(id, _)| round.as_ref().is_none_or(|r| r.contains(id)))
                    else {
                        break;
                    };
                    self.cluster()?.deliver(id);
                    out.push(line);
                    if out.len() >= STEP_LIMIT {
                        return Err("the protocol keeps sending messages without end".into());
                    }
                }
            }
            Step::Drop(filter) => {
                let picked = self.matching(filter)?;
                let ids: BTreeSet<u64> = picked.iter().map(|(id, _)| *id).collect();
                self.cluster()?.drop_where(|e| ids.contains(&e.id));
                out.extend(picked.into_iter().map(|(_, line)| line));
            }
            Step::Duplicate(filter) => {
                for (id, line) in self.matching(filter)? {
                    self.cluster()?.duplicate(id).expect("the message is pending");
                    out.push(line);
                }
            }
            Step::Pending(filter) => out.extend(self.matching(filter)?.into_iter().map(|(_, line)| line)),
            _ => unreachable!("not a message command"),
        }
        Ok(out)
    }

    /// `crash`, `restart`, `isolate`, `heal`.
    fn faults(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let line = match step {
            Step::Crash(node) => {
                let node = self.node(*node)?;
                let cluster = self.cluster()?;
                if !cluster.is_up(node) {
                    return Err(format!("{node} is already down"));
                }
                cluster.crash(node);
                format!("{node} down")
            }
            Step::Restart(node) => {
                let node = self.node(*node)?;
                let cluster = self.cluster()?;
                if cluster.is_up(node) {
                    return Err(format!("{node} is running"));
                }
                cluster.restart(node);
                format!("{node} up: {}", cluster.status(node))
            }
            Step::Isolate(node) => {
                let node = self.node(*node)?;
                self.cluster()?.isolate(node);
                self.isolated.insert(node);
                format!("{node} isolated")
            }
            Step::Heal(Some(node)) => {
                let node = self.node(*node)?;
                self.cluster()?.heal(node);
                self.isolated.remove(&node);
                format!("{node} healed")
            }
            Step::Heal(None) => {
                self.cluster()?.heal_all();
                self.isolated.clear();
                "all healed".into()
            }
            _ => unreachable!("not a fault command"),
        };
        Ok(vec![line])
    }

    /// `advance`, `run`, `tick`.
    fn time(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        match step {
            Step::Advance(ns) => {
                let cluster = self.cluster()?;
                cluster.advance(*ns);
                out.push(format!("now {}", format_ns(i128::from(cluster.now_ns()))));
            }
            Step::Run(ns) => {
                let cluster = self.cluster()?;
                let inputs = cluster.run_for(*ns);
                out.push(format!("ran {inputs} inputs, now {}", format_ns(i128::from(cluster.now_ns()))));
            }
            Step::Tick { node, timer } => {
                let node = self.node(*node)?;
                let cluster = self.cluster()?;
                for (pending, _) in cluster.pending_timers(node) {
                    let name = format!("{pending:?}");
                    if timer.as_ref().is_some_and(|t| !name.starts_with(t.as_str())) {
                        continue;
                    }
                    if cluster.fire_timer(node, &pending) {
                        out.push(format!("{node} fired {name}"));
                    }
                }
            }
            _ => unreachable!("not a time command"),
        }
        Ok(out)
    }

    /// `skew-clock`, `durability`, `flush`.
    fn clock_and_disk(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let line = match step {
            Step::SkewClock { node, offset, drift_ppm, error } => {
                let node = self.node(*node)?;
                let mut clock = self.clocks[node.index()];
                clock.offset_ns += offset.unwrap_or(0);
                clock.drift_ppm = drift_ppm.unwrap_or(clock.drift_ppm);
                clock.error_ns = error.unwrap_or(clock.error_ns);
                self.clocks[node.index()] = clock;
                let cluster = self.cluster()?;
                cluster.set_clock(node, clock);
                let reading = cluster.clock_reading(node);
                format!(
                    "{node} clock reads {} at true time {} (offset {}, drift {}ppm, error {})",
                    format_ns(i128::from(reading.local_ns)),
                    format_ns(i128::from(cluster.now_ns())),
                    format_ns(i128::from(clock.offset_ns)),
                    clock.drift_ppm,
                    format_ns(i128::from(clock.error_ns)),
                )
            }
            Step::Durability { node, manual } => {
                let node = self.node(*node)?;
                self.cluster()?.set_manual_durability(node, *manual);
                format!("{node} {}", if *manual { "holds writes until flush" } else { "writes at once" })
            }
            Step::Flush(node) => {
                let node = self.node(*node)?;
                let cluster = self.cluster()?;
                let count = cluster.unflushed_count(node);
                cluster.flush(node);
                format!("{node} flushed {count} writes")
            }
            _ => unreachable!("not a clock or disk command"),
        };
        Ok(vec![line])
    }

    /// `status`, `timers`, `stats`, `completions`.
    fn reads(&mut self, step: &Step) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        match step {
            Step::Status(node) => {
                for node in self.nodes(*node)? {
                    out.push(format!("{node}: {}", self.cluster()?.status(node)));
                }
            }
            Step::Timers(node) => {
                for node in self.nodes(*node)? {
                    for (timer, at) in self.cluster()?.pending_timers(node) {
                        out.push(format!("{node} {timer:?} at {}", format_ns(i128::from(at))));
                    }
                }
            }
            Step::Stats(node) => {
                for node in self.nodes(*node)? {
                    let cluster = self.cluster()?;
                    if !cluster.is_up(node) {
                        out.push(format!("{node}: down"));
                        continue;
                    }
                    let s = cluster.stats(node);
                    out.push(format!(
                        "{node}: fast={} slow={} executed={} events={:?} dropped={:?}",
                        s.fast_path_commits, s.slow_path_commits, s.executed, s.events, s.dropped
                    ));
                }
            }
            Step::Completions => {
                let cluster = self.cluster()?;
                for c in cluster.completions() {
                    out.push(format!("op {} at {}: {:?}", c.op, c.client, c.result));
                }
                self.completions_seen = cluster.completions().len();
            }
            _ => unreachable!("not a read command"),
        }
        Ok(out)
    }

    /// One node, or every node.
    fn nodes(&mut self, node: Option<NodeRef>) -> Result<Vec<NodeId>, String> {
        match node {
            Some(node) => Ok(vec![self.node(node)?]),
            None => Ok(self.cluster()?.topology().nodes.iter().map(|n| n.id).collect()),
        }
    }
}

/// The first word of a message's Debug output: its variant or type name.
fn kind_of<M: fmt::Debug>(message: &M) -> String {
    let text = format!("{message:?}");
    text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// What running a script gave.
struct Evaluation {
    /// The script with the outputs it printed in place of the expected ones.
    rewritten: String,
    /// A readable report of each block whose output differs.
    mismatches: Vec<String>,
}

/// Runs a script's text; `file` names it in reports. Fails on a malformed script, an error or
/// a panic (the cluster's invariant checks); then the report names the file and line.
fn evaluate<P: Protocol>(file: &str, text: &str) -> Result<Evaluation, String> {
    let script = parse(file, text).map_err(|e| e.to_string())?;
    let mut runner = Runner::<P>::new();
    let mut rewritten = Vec::new();
    let mut mismatches = Vec::new();
    for block in &script.blocks {
        let mut got = Vec::new();
        for (line, step) in &block.commands {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runner.run(step)));
            let command = block.lead[block.lead.len() - (block.separator - line)].trim().to_string();
            match result {
                Ok(Ok(lines)) => got.extend(lines),
                Ok(Err(message)) => return Err(format!("{file}:{line}: `{command}`: {message}")),
                Err(payload) => {
                    return Err(format!("{file}:{line}: `{command}` panicked: {}", panic_message(payload.as_ref())));
                }
            }
        }
        if got != block.expected {
            let first = block.commands[0].0;
            mismatches.push(format!(
                "{file}:{first}: output differs (- expected, + got; block ends with `----` at line {}):\n{}",
                block.separator,
                diff(&block.expected, &got)
            ));
        }
        rewritten.extend(block.lead.iter().cloned());
        rewritten.push("----".to_string());
        rewritten.extend(got);
        rewritten.push(String::new());
    }
    if script.trailer.is_empty() {
        rewritten.pop();
    }
    rewritten.extend(script.trailer.iter().cloned());
    Ok(Evaluation { rewritten: rewritten.join("\n") + "\n", mismatches })
}

/// A line diff: `-` expected only, `+` got only, ` ` both.
fn diff(expected: &[String], got: &[String]) -> String {
    let (n, m) = (expected.len(), got.len());
    // lcs[i][j]: the longest common subsequence of expected[i..] and got[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if expected[i] == got[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut lines = Vec::new();
    while i < n || j < m {
        if i < n && j < m && expected[i] == got[j] {
            lines.push(format!("   {}", expected[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] > lcs[i + 1][j]) {
            lines.push(format!("  +{}", got[j]));
            j += 1;
        } else {
            lines.push(format!("  -{}", expected[i]));
            i += 1;
        }
    }
    lines.join("\n")
}

/// Runs every `*.txt` script of `dir` (relative to this crate's directory unless absolute)
/// for protocol `P`, in name order, and panics with a report of every failure: a malformed
/// script or a command that fails (with file and line), or an output that differs from the
/// expected one (with a diff). With `ORDO_REWRITE=1` in the environment it writes the outputs
/// it got into the scripts instead of comparing them.
pub fn run_scripts<P: Protocol>(dir: impl AsRef<Path>) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = crate_dir.join(dir.as_ref());
    let rewrite = std::env::var(REWRITE_VAR).is_ok_and(|v| !v.is_empty() && v != "0");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.txt script in {}", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.strip_prefix(crate_dir).unwrap_or(path).display().to_string();
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
        match evaluate::<P>(&name, &text) {
            Err(failure) => failures.push(failure),
            Ok(evaluation) if rewrite => {
                if evaluation.rewritten != text {
                    std::fs::write(path, &evaluation.rewritten).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
                    eprintln!("rewrote {name}");
                }
            }
            Ok(evaluation) => failures.extend(evaluation.mismatches),
        }
    }
    assert!(
        failures.is_empty(),
        "{} script(s) of {} failed ({REWRITE_VAR}=1 rewrites the expected outputs):\n\n{}",
        failures.len(),
        dir.display(),
        failures.join("\n\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unreplicated::Unreplicated;

    const HEADER: &str = "# docs/protocols/unreplicated.md: a test script\n";

    fn parse_error(text: &str) -> ScriptError {
        parse("t.txt", text).expect_err("the script is malformed")
    }

    #[test]
    fn parser_reads_blocks_comments_and_outputs() {
        // Goal: the format. Method: two blocks, the first with two commands and a comment
        // among them, the second with an empty output at the end of the file.
        let text =
            format!("{HEADER}cluster replicas=1 clients=1\n# between\nstatus\n----\na\nb\n\ncompletions\n----\n");
        let script = parse("t.txt", &text).expect("well formed");
        assert_eq!(script.blocks.len(), 2);
        assert_eq!(script.blocks[0].commands.iter().map(|(line, _)| *line).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(script.blocks[0].separator, 5);
        assert_eq!(script.blocks[0].expected, vec!["a", "b"]);
        assert_eq!(script.blocks[1].commands, vec![(9, Step::Completions)]);
        assert!(script.blocks[1].expected.is_empty());
        assert!(script.trailer.is_empty());
    }

    #[test]
    fn parser_reads_arguments() {
        // Goal: each command's arguments. Method: parse one of each kind.
        let step = parse_step("cluster replicas=5 clients=2 seed=7 proxies=2 sidecar heartbeat_ns=1ms").unwrap();
        let Step::Cluster { layout, seed, options, .. } = step else { panic!("{step:?}") };
        assert_eq!((layout.replicas, layout.clients, layout.sidecar, seed), (5, 2, true, 7));
        assert_eq!(options, vec![("proxies".into(), "2".into()), ("heartbeat_ns".into(), "1ms".into())]);
        assert_eq!(
            parse_step("submit client=1 set k \"a b\"").unwrap(),
            Step::Submit { client: 1, command: Command::set("k", "a b"), text: "set k a b".into() }
        );
        assert_eq!(
            parse_step("deliver next from=r0 to=c1 kind=Prepare|Commit").unwrap(),
            Step::Deliver {
                filter: Filter {
                    from: Some(NodeRef::Replica { shard: 0, rank: 0 }),
                    to: Some(NodeRef::Client(1)),
                    kinds: vec!["Prepare".into(), "Commit".into()],
                    count: Some(1),
                },
                delivery: Delivery::All,
            }
        );
        assert_eq!(
            parse_step("skew-clock node=n2 offset=-5us").unwrap(),
            Step::SkewClock { node: NodeRef::Id(2), offset: Some(-5_000), drift_ppm: None, error: None }
        );
        assert_eq!(parse_step("advance 1_500us").unwrap(), Step::Advance(1_500_000));
        assert_eq!(parse_step("crash node=r1.2").unwrap(), Step::Crash(NodeRef::Replica { shard: 2, rank: 1 }));
    }

    #[test]
    fn malformed_scripts_name_the_file_and_line() {
        // Goal: a malformed script fails with its file, line and what is wrong. Method: one
        // script per mistake.
        let cases: [(&str, usize, &str); 10] = [
            ("cluster\n----\n\n", 1, "starts with a comment"),
            ("# no scenario named\ncluster\n----\n", 1, "must name the scenario"),
            ("# specs/x.md\n----\n", 2, "without a command"),
            ("# specs/x.md\ncluster\nstatus\n", 2, "without `----`"),
            ("# specs/x.md\nfrobnicate node=1\n----\n", 2, "unknown command `frobnicate`"),
            ("# specs/x.md\ncluster\n----\nx\n\ncrash\n----\n", 6, "needs node=X"),
            ("# specs/x.md\ndeliver frm=n1\n----\n", 2, "does not take frm=n1"),
            ("# specs/x.md\nadvance 10 parsecs\n----\n", 2, "does not take parsecs"),
            ("# specs/x.md\nadvance 10h\n----\n", 2, "unknown unit `h`"),
            ("# specs/x.md\n\nsubmit set k \"v\n----\n", 3, "unclosed"),
        ];
        for (text, line, message) in cases {
            let error = parse_error(text);
            assert_eq!((error.file.as_str(), error.line), ("t.txt", line), "{text:?}: {error}");
            assert!(error.message.contains(message), "{text:?}: {error}");
            assert!(error.to_string().starts_with(&format!("t.txt:{line}: ")), "{error}");
        }
        let error = parse_error("# specs/x.md\nsubmit frob k\n----\n");
        assert!(error.message.contains("is not a command"), "{error}");
    }

    #[test]
    fn runtime_errors_and_panics_name_the_file_and_line() {
        // Goal: a command that cannot run, or a panic of the cluster, fails with the line.
        let text = format!("{HEADER}status\n----\n");
        let error = evaluate::<Unreplicated>("t.txt", &text).err().expect("no cluster");
        assert!(error.starts_with("t.txt:2: `status`: no cluster yet"), "{error}");
        let text = format!("{HEADER}cluster replicas=1 clients=1\ncrash node=c3\n----\n");
        let error = evaluate::<Unreplicated>("t.txt", &text).err().expect("no such node");
        assert!(error.starts_with("t.txt:3: `crash node=c3`: the cluster has no node"), "{error}");
        let text = format!("{HEADER}cluster replicas=1 clients=1 snapshot_intervall=3\n----\n");
        let error = evaluate::<Unreplicated>("t.txt", &text).err().expect("unknown option");
        assert!(error.contains("unknown field `snapshot_intervall`"), "{error}");
    }

    #[test]
    fn a_differing_output_is_reported_with_a_diff_and_rewritten() {
        // Goal: the comparison can fail, says where and how, and the rewrite repairs it.
        // Method: a script whose second block expects a wrong result.
        let good = format!(
            "{HEADER}cluster replicas=1 clients=1 client_retry_ns=5ms\n----\nn0 replica shard=0 rank=0\nn1 client\n\n\
             # the submission and its reply\nsubmit set k v\ndeliver\n----\nop 1 at n1: set k v\n\
             n1 -> n0: Request {{ id: c4294967297#1, acked_below: 1, command: Set {{ key: b\"k\", value: b\"v\", \
             condition: Always, expiry: Clear }} }}\n\
             n0 -> n1: Reply {{ id: c4294967297#1, result: Ok }}\nop 1 done at n1: Ok\n\n# the end\n"
        );
        let evaluation = evaluate::<Unreplicated>("t.txt", &good).expect("runs");
        assert!(evaluation.mismatches.is_empty(), "{}", evaluation.mismatches.join("\n"));
        assert_eq!(evaluation.rewritten, good, "nothing to rewrite");
        let bad = good.replace("done at n1: Ok", "done at n1: Nil");
        let evaluation = evaluate::<Unreplicated>("t.txt", &bad).expect("runs");
        assert_eq!(evaluation.mismatches.len(), 1);
        let report = &evaluation.mismatches[0];
        assert!(report.starts_with("t.txt:8: output differs"), "{report}");
        assert!(report.contains("  -op 1 done at n1: Nil\n  +op 1 done at n1: Ok"), "{report}");
        assert_eq!(evaluation.rewritten, good, "the rewrite restores the real output");
    }

    #[test]
    fn options_fill_the_protocol_config() {
        // Goal: `cluster` options reach the protocol's Config with units, and others keep
        // their defaults. Method: Nezha's and Tempo's configs (numbers, booleans, an enum).
        let options = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        let config: crate::nezha::Config = config_from_options(&options(&[
            ("proxies", "2"),
            ("heartbeat_ns", "2ms"),
            ("commutativity", "false"),
            ("owd_percentile", "90"),
        ]))
        .unwrap();
        assert_eq!((config.proxies, config.heartbeat_ns, config.commutativity), (2, 2_000_000, false));
        assert_eq!(config.owd_percentile, 90);
        assert_eq!(config.client_retry_ns, crate::nezha::Config::default().client_retry_ns);
        let config: crate::tempo::Config =
            config_from_options(&options(&[("fast_quorum", "closest_static"), ("bump", "false")])).unwrap();
        assert_eq!(config.fast_quorum, crate::tempo::FastQuorumChoice::ClosestStatic);
        assert!(!config.bump);
        let error = config_from_options::<crate::nezha::Config>(&options(&[("proxies", "many")])).unwrap_err();
        assert!(error.contains("many"), "{error}");
    }

    #[test]
    fn layout_numbers_replicas_then_extra_roles_then_clients() {
        // Goal: the simulator's numbering, with sidecars on the proxies' machines.
        let config = crate::nezha::Config { proxies: 2, ..Default::default() };
        let layout = Layout { sidecar: true, ..Layout::new(3, 3) };
        let topology = layout.topology::<crate::nezha::Nezha>(&config);
        let roles: Vec<(Role, Option<usize>)> = topology.nodes.iter().map(|n| (n.role, n.machine)).collect();
        assert_eq!(
            roles,
            vec![
                (Role::Replica, None),
                (Role::Replica, None),
                (Role::Replica, None),
                (Role::Proxy, Some(0)),
                (Role::Proxy, Some(1)),
                (Role::Client, Some(0)),
                (Role::Client, Some(1)),
                (Role::Client, Some(0)),
            ]
        );
        assert_eq!(topology.f, 1);
    }

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_signed_ns("-5us"), Ok(-5_000));
        assert_eq!(parse_ns("2s"), Ok(2_000_000_000));
        assert!(parse_ns("-1").is_err());
        assert!(parse_ns("ms").is_err());
        assert_eq!(format_ns(80_000), "80us");
        assert_eq!(format_ns(-3_000_000), "-3ms");
        assert_eq!(format_ns(1_234), "1234ns");
    }
}
