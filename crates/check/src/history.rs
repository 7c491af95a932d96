//! The client history format: one JSON object per line, one line per event.
//!
//! ```text
//! {"client": 3, "kind": "invoke", "time_ns": 1200, "op": "write", "key": "k1", "value": "v5"}
//! {"client": 3, "kind": "ok", "time_ns": 5400, "op": "write", "key": "k1", "value": "v5"}
//! ```
//!
//! A client invokes an operation and later completes it with `ok` (it took effect), `fail` (it
//! certainly did not) or `info` (nobody knows). Times are true simulated nanoseconds.
//!
//! A completion is paired with its invocation in one of two ways, chosen per client by its first
//! event and never mixed:
//!
//! - Without operation ids (`id` absent), pairing is by client: a client has at most one
//!   operation outstanding, and a client id is never used again after an `info`. Such a client
//!   reads as sequential, one operation after another, but one that gave up cannot tell when
//!   its lost operation lands, perhaps after its next one; so it continues under a new id.
//! - With operation ids (`"id": 7`), pairing is by client and id: a pipelining client may have
//!   several operations outstanding, each id at most once at a time, and an id whose operation
//!   completed `ok` or `fail` may be used again. An `info` retires only its (client, id): the
//!   lost operation stays identified and open, so the client goes on invoking under other ids,
//!   but that id is never used again (a later event naming it could not be told apart from the
//!   lost operation's late reply).
//!
//! An operation may carry the store's time stamp `at_ms` (the time the command was stamped with
//! where it entered the system, which decides whether a key has expired for it) and a write may
//! carry `expires_ms` (the stamp after which its value is gone); both are given on the
//! invocation, and a completion that repeats one must agree with it.
//!
//! Either way the checker orders operations only by time, never by client: operations of one
//! client whose intervals overlap are concurrent, and nothing assumes a client's operations
//! follow one another. A client's events must still be recorded in time order. `docs/history.md`
//! describes the format for users.

use crate::fixed_hash::FixedHashMap;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::fmt;

/// What an event says about an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The client sent the operation.
    Invoke,
    /// The operation took effect; a read's event carries the value it returned.
    Ok,
    /// The operation certainly did not take effect.
    Fail,
    /// The client stopped waiting without knowing whether the operation took effect.
    Info,
}

/// The key-value operations a history may contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// Returns the key's value, or `null` when the key is absent.
    Read,
    /// Sets the key's value.
    Write,
    /// Concatenates to the key's value, an absent or expired key counting as empty.
    Append,
    /// Removes the key if it has expired at the operation's stamp (the store's sweep).
    Expire,
    /// Removes the key.
    Delete,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Append => "append",
            OpKind::Expire => "expire",
            OpKind::Delete => "delete",
        })
    }
}

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    /// The client. Without operation ids, it has one operation outstanding at a time and is
    /// never used again after an info.
    pub client: u64,
    /// The operation's id, which pairs a completion with its invocation when a client has
    /// several operations outstanding: unique among the client's outstanding operations, and
    /// never used again by the client after an info for it. `None` pairs by client alone. Left
    /// out of the JSON when `None`, so that histories without ids are written as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Invocation or one of the three completions.
    pub kind: EventKind,
    /// True simulated time of the event.
    pub time_ns: u64,
    /// The operation invoked or completed.
    pub op: OpKind,
    /// The key it touches.
    pub key: String,
    /// Writes and appends: the value written or appended. A read's `ok`: the value read, `None`
    /// when the key was absent. Otherwise `None`.
    #[serde(default)]
    pub value: Option<String>,
    /// The store's time stamp of the operation, in milliseconds: a key expiring at `E` has
    /// expired for the operation when `at_ms > E`. `None`: the operation sees no key as expired.
    /// Left out of the JSON when `None`, so that histories without expiry are written as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// Writes only: the stamp after which the written value is gone (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
}

impl HistoryEvent {
    /// The event as one line of JSON, without the trailing newline.
    pub fn to_json_line(&self) -> String {
        // Plain strings, integers and unit variants always serialize; failure would be a bug.
        serde_json::to_string(self).expect("a history event always serializes")
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Completed with `ok`: it took effect between its invocation and completion.
    Ok,
    /// Completed with `fail`: it never took effect.
    Fail,
    /// Completed with `info`: it may take effect at any time after its invocation, or never.
    Info,
    /// Never completed before the history ended; treated like `info`.
    Unfinished,
}

/// An invocation paired with its completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// The client that invoked it.
    pub client: u64,
    /// Its operation id, if the client's events carry ids.
    pub id: Option<u64>,
    /// What it does.
    pub op: OpKind,
    /// The key it touches.
    pub key: String,
    /// Writes and appends: the value written or appended. Reads that completed `ok`: the value
    /// returned (`None` = absent). Other reads, expires and deletes: `None`.
    pub value: Option<String>,
    /// Its time stamp in the store, if it has one (see [`HistoryEvent::at_ms`]).
    pub at_ms: Option<u64>,
    /// Writes: when the written value expires, if ever (see [`HistoryEvent::expires_ms`]).
    pub expires_ms: Option<u64>,
    /// When it was invoked.
    pub invoke_ns: u64,
    /// When it completed (ok, fail or info); `None` if it never did.
    pub completion_ns: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {}", self.client)?;
        if let Some(id) = self.id {
            write!(f, " id {id}")?;
        }
        write!(f, " {}", self.op)?;
        match (self.op, self.outcome) {
            (OpKind::Read, Outcome::Ok) => write!(f, " -> {}", ShortValue(self.value.as_deref()))?,
            (OpKind::Read | OpKind::Expire | OpKind::Delete, _) => {}
            (OpKind::Write | OpKind::Append, _) => write!(f, " {}", ShortValue(self.value.as_deref()))?,
        }
        write_stamps(f, self.at_ms, self.expires_ms)?;
        write!(f, " [invoked {} ns, ", self.invoke_ns)?;
        match (self.outcome, self.completion_ns) {
            (Outcome::Ok, Some(time_ns)) => write!(f, "ok {time_ns} ns]"),
            (Outcome::Fail, Some(time_ns)) => write!(f, "fail {time_ns} ns]"),
            (Outcome::Info, Some(time_ns)) => write!(f, "info {time_ns} ns]"),
            _ => write!(f, "never completed]"),
        }
    }
}

/// The stamps of an operation or a state for messages, named as in the format; nothing when
/// there are none, so that reports on histories without expiry read as before.
pub(crate) fn write_stamps(f: &mut fmt::Formatter<'_>, at_ms: Option<u64>, expires_ms: Option<u64>) -> fmt::Result {
    match (at_ms, expires_ms) {
        (None, None) => Ok(()),
        (Some(at_ms), None) => write!(f, " (at_ms {at_ms})"),
        (None, Some(expires_ms)) => write!(f, " (expires_ms {expires_ms})"),
        (Some(at_ms), Some(expires_ms)) => write!(f, " (at_ms {at_ms}, expires_ms {expires_ms})"),
    }
}

/// A value for messages: quoted, `absent` for `None`, long values cut so that a report of an
/// append-heavy key stays readable.
pub(crate) struct ShortValue<'a>(pub Option<&'a str>);

impl fmt::Display for ShortValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN_CHARS_MAX: usize = 64;
        let Some(text) = self.0 else { return f.write_str("absent") };
        if text.chars().count() <= SHOWN_CHARS_MAX {
            return write!(f, "{text:?}");
        }
        let head: String = text.chars().take(SHOWN_CHARS_MAX).collect();
        write!(f, "{head:?}... ({} bytes)", text.len())
    }
}

/// What is wrong with one line of a history.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The line is not JSON, lacks a field or has a field of the wrong type.
    #[error("not a valid event: {0}")]
    BadJson(String),
    /// `kind` is not one of invoke, ok, fail, info.
    #[error("unknown kind {0:?} (expected invoke, ok, fail or info)")]
    UnknownKind(String),
    /// `op` is not one of read, write, append, expire, delete.
    #[error("unknown op {0:?} (expected read, write, append, expire or delete)")]
    UnknownOp(String),
    /// A write or append invoked without a value.
    #[error("client {client} invokes {op} without a value")]
    MissingValue {
        /// The client.
        client: u64,
        /// The operation.
        op: OpKind,
    },
    /// An `expires_ms` on an operation other than a write, which would be silently meaningless.
    #[error("client {client} gives {op} an expires_ms: only writes set an expiry")]
    ExpiryOnNonWrite {
        /// The client.
        client: u64,
        /// The operation.
        op: OpKind,
    },
    /// A completion repeating `at_ms` or `expires_ms` with a value other than the invocation's
    /// (or one the invocation did not have).
    #[error(
        "client {client} completes {op} with {field} {value} but invoked it with {}",
        invoke_value.map_or("none".to_string(), |stamp| stamp.to_string())
    )]
    StampMismatch {
        /// The client.
        client: u64,
        /// The op.
        op: OpKind,
        /// `at_ms` or `expires_ms`.
        field: &'static str,
        /// The completion's stamp.
        value: u64,
        /// The invocation's stamp.
        invoke_value: Option<u64>,
    },
    /// A completion for a client with nothing outstanding.
    #[error("client {client} completes an operation it never invoked")]
    CompletionWithoutInvoke {
        /// The client.
        client: u64,
    },
    /// An invocation while the client's previous operation is outstanding.
    #[error("client {client} invokes again while its operation invoked on line {outstanding_line} is outstanding")]
    SecondInvoke {
        /// The client.
        client: u64,
        /// Where the outstanding operation was invoked.
        outstanding_line: usize,
    },
    /// A client id used again after its `info`.
    #[error("client {client} is used again after its info on line {info_line}")]
    ClientReusedAfterInfo {
        /// The client.
        client: u64,
        /// Where the client's info was.
        info_line: usize,
    },
    /// A client with events both with and without an operation id.
    #[error(
        "client {client} mixes events with and without an operation id: its first event (line {first_line}) {}",
        if *first_has_id { "has an id and this one has none" } else { "has no id and this one has one" }
    )]
    MixedIds {
        /// The client.
        client: u64,
        /// Where the client's first event was; it decided whether the client uses ids.
        first_line: usize,
        /// Whether that first event had an id.
        first_has_id: bool,
    },
    /// An invocation naming an operation id the client has outstanding.
    #[error(
        "client {client} invokes id {id} while its operation with that id, invoked on line {outstanding_line}, \
         is outstanding"
    )]
    IdOutstanding {
        /// The client.
        client: u64,
        /// The operation id.
        id: u64,
        /// Where the outstanding operation was invoked.
        outstanding_line: usize,
    },
    /// A completion naming an operation id that is not outstanding for the client.
    #[error("client {client} completes id {id}, which is not outstanding")]
    CompletionWithoutInvokeOfId {
        /// The client.
        client: u64,
        /// The operation id.
        id: u64,
    },
    /// An operation id used again after its `info`.
    #[error("client {client} uses id {id} again after its info on line {info_line}")]
    IdReusedAfterInfo {
        /// The client.
        client: u64,
        /// The operation id.
        id: u64,
        /// Where the operation's info was.
        info_line: usize,
    },
    /// A client's event earlier than the client's previous event.
    #[error("client {client}'s time goes backwards from {previous_ns} ns to {time_ns} ns")]
    TimeWentBackwards {
        /// The client.
        client: u64,
        /// The time of its previous event.
        previous_ns: u64,
        /// The time of this event.
        time_ns: u64,
    },
    /// A completion whose op or key differs from the outstanding invocation's.
    #[error("client {client} completes {op} on {key:?} but invoked {invoke_op} on {invoke_key:?} (line {invoke_line})")]
    Mismatch {
        /// The client.
        client: u64,
        /// The completion's op.
        op: OpKind,
        /// The completion's key.
        key: String,
        /// The invocation's op.
        invoke_op: OpKind,
        /// The invocation's key.
        invoke_key: String,
        /// Where the invocation was.
        invoke_line: usize,
    },
    /// A write's or append's completion naming a value other than the one invoked.
    #[error("client {client} completes {op} of {value:?} but invoked it with {invoke_value:?}")]
    ValueMismatch {
        /// The client.
        client: u64,
        /// The op.
        op: OpKind,
        /// The completion's value.
        value: String,
        /// The invocation's value.
        invoke_value: String,
    },
}

/// A malformed history: where and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct HistoryError {
    /// 1-based line of the text; for events not parsed from text, 1-based position in the slice.
    pub line: usize,
    /// What is wrong.
    pub problem: Problem,
}

/// The fields of a line before `kind` and `op` are interpreted, so that an unknown kind gets its
/// own message instead of serde's generic one. Unknown extra fields are ignored.
#[derive(Deserialize)]
struct RawEvent {
    client: u64,
    #[serde(default)]
    id: Option<u64>,
    kind: String,
    time_ns: u64,
    op: String,
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    at_ms: Option<u64>,
    #[serde(default)]
    expires_ms: Option<u64>,
}

fn parse_line(line: &str) -> Result<HistoryEvent, Problem> {
    let raw: RawEvent = serde_json::from_str(line).map_err(|error| Problem::BadJson(error.to_string()))?;
    let kind = match raw.kind.as_str() {
        "invoke" => EventKind::Invoke,
        "ok" => EventKind::Ok,
        "fail" => EventKind::Fail,
        "info" => EventKind::Info,
        _ => return Err(Problem::UnknownKind(raw.kind)),
    };
    let op = match raw.op.as_str() {
        "read" => OpKind::Read,
        "write" => OpKind::Write,
        "append" => OpKind::Append,
        "expire" => OpKind::Expire,
        "delete" => OpKind::Delete,
        _ => return Err(Problem::UnknownOp(raw.op)),
    };
    Ok(HistoryEvent {
        client: raw.client,
        id: raw.id,
        kind,
        time_ns: raw.time_ns,
        op,
        key: raw.key,
        value: raw.value,
        at_ms: raw.at_ms,
        expires_ms: raw.expires_ms,
    })
}

/// Parses a history, one event per line; blank lines are skipped. The history must be
/// well formed (see [`validate_history`]); the error names the first offending line.
pub fn parse_history(text: &str) -> Result<Vec<HistoryEvent>, HistoryError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // First the lines up to the first unparsable one, then the rules over those: whichever
    // problem comes first in the text is the one reported.
    let mut events = Vec::new();
    let mut lines = Vec::new();
    let mut parse_error = None;
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(event) => {
                events.push(event);
                lines.push(index + 1);
            }
            Err(problem) => {
                parse_error = Some(HistoryError { line: index + 1, problem });
                break;
            }
        }
    }
    pair(&events, |position| lines[position])?;
    match parse_error {
        Some(error) => Err(error),
        None => Ok(events),
    }
}

/// Writes a history, one JSON line per event.
pub fn write_history(events: &[HistoryEvent], out: &mut impl std::io::Write) -> std::io::Result<()> {
    for event in events {
        writeln!(out, "{}", event.to_json_line())?;
    }
    Ok(())
}

/// Checks the rules of a history given as events: every completion matches its outstanding
/// invocation (same client and id, op, key and, for writes and appends, value; a stamp it
/// repeats must be the invocation's); only writes carry `expires_ms`; a client's
/// events all carry an operation id or none do; without ids a client has one operation
/// outstanding at a time and is not used after its `info`; with ids an id is outstanding at
/// most once at a time and is not used after its `info`; a client's times never go backwards;
/// and writes and appends carry a value.
pub fn validate_history(events: &[HistoryEvent]) -> Result<(), HistoryError> {
    pair_operations(events).map(|_| ())
}

/// Pairs each invocation with its completion, in invocation order. Invocations still
/// outstanding at the end become [`Outcome::Unfinished`] operations.
pub fn pair_operations(events: &[HistoryEvent]) -> Result<Vec<Operation>, HistoryError> {
    let views = pair(events, |position| position + 1)?;
    Ok(views.into_iter().map(OperationView::to_operation).collect())
}

/// Pairs the events without copying their strings; `line_of` maps an event's position to the
/// line reported in errors.
pub(crate) fn pair(
    events: &[HistoryEvent],
    line_of: impl Fn(usize) -> usize,
) -> Result<Vec<OperationView<'_>>, HistoryError> {
    let mut pairing = Pairing::default();
    for (position, event) in events.iter().enumerate() {
        let line = line_of(position);
        pairing.accept(line, event).map_err(|problem| HistoryError { line, problem })?;
    }
    Ok(pairing.open.operations)
}

/// An [`Operation`] borrowing its strings from the events: the checker pairs a million events
/// and copying every key and value was a measurable part of its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OperationView<'a> {
    pub(crate) client: u64,
    pub(crate) id: Option<u64>,
    pub(crate) op: OpKind,
    pub(crate) key: &'a str,
    pub(crate) value: Option<&'a str>,
    pub(crate) at_ms: Option<u64>,
    pub(crate) expires_ms: Option<u64>,
    pub(crate) invoke_ns: u64,
    pub(crate) completion_ns: Option<u64>,
    pub(crate) outcome: Outcome,
}

impl OperationView<'_> {
    /// The owned operation, for reports.
    pub(crate) fn to_operation(self) -> Operation {
        Operation {
            client: self.client,
            id: self.id,
            op: self.op,
            key: self.key.to_string(),
            value: self.value.map(String::from),
            at_ms: self.at_ms,
            expires_ms: self.expires_ms,
            invoke_ns: self.invoke_ns,
            completion_ns: self.completion_ns,
            outcome: self.outcome,
        }
    }
}

/// What a client has shown of itself so far, for the per-client rules.
struct ClientState {
    /// Whether its events carry operation ids; its first event decided.
    has_ids: bool,
    /// Where its first event was.
    first_line: usize,
    /// The time of its latest event.
    last_ns: u64,
}

/// Where one operation identity stands: a (client, id) pair, or for a client without ids the
/// client alone (its id is `None`), which is why one outstanding operation per such client and
/// its retirement after an info fall out of the same rules.
enum IdentityState {
    /// `operation` (an index into the paired operations) invoked on `line` is outstanding.
    Outstanding { operation: usize, line: usize },
    /// Gave up with an info on `line`; the identity is spent.
    Retired { line: usize },
}

/// An operation's identity: its client and, if the client uses them, its id.
type Identity = (u64, Option<u64>);

/// Validates events one by one and builds the paired operations as it goes.
#[derive(Default)]
struct Pairing<'a> {
    /// Only looked up, never iterated, so hashing cannot make the outcome depend on order.
    clients: FixedHashMap<u64, ClientState>,
    open: Identities<'a>,
}

/// The operations paired so far and where each identity stands. Apart from [`ClientState`]
/// so that a handler can hold a client's state and change these at once: pairing a million
/// events is a visible part of a check, and each extra lookup showed.
#[derive(Default)]
struct Identities<'a> {
    /// Identities outstanding or retired; one whose operation completed ok or fail is removed,
    /// free again. Only looked up, never iterated.
    states: FixedHashMap<Identity, IdentityState>,
    operations: Vec<OperationView<'a>>,
}

impl<'a> Pairing<'a> {
    fn accept(&mut self, line: usize, event: &'a HistoryEvent) -> Result<(), Problem> {
        let has_id = event.id.is_some();
        let client = self.clients.entry(event.client).or_insert(ClientState {
            has_ids: has_id,
            first_line: line,
            last_ns: event.time_ns,
        });
        if client.has_ids != has_id {
            let (first_line, first_has_id) = (client.first_line, client.has_ids);
            return Err(Problem::MixedIds { client: event.client, first_line, first_has_id });
        }
        match event.kind {
            EventKind::Invoke => self.open.on_invoke(line, client.last_ns, event)?,
            EventKind::Ok | EventKind::Fail | EventKind::Info => {
                self.open.on_completion(line, client.last_ns, event)?
            }
        }
        debug_assert!(client.last_ns <= event.time_ns);
        client.last_ns = event.time_ns;
        Ok(())
    }
}

impl<'a> Identities<'a> {
    /// `previous_ns` is the time of the client's latest event. The identity rules are checked
    /// before the time, so that a history reusing a spent identity is reported as that.
    fn on_invoke(&mut self, line: usize, previous_ns: u64, event: &'a HistoryEvent) -> Result<(), Problem> {
        let client = event.client;
        let state = match self.states.entry((client, event.id)) {
            Entry::Vacant(vacant) => vacant,
            Entry::Occupied(occupied) => {
                return Err(match (occupied.get(), event.id) {
                    (IdentityState::Retired { line: info_line }, None) => {
                        Problem::ClientReusedAfterInfo { client, info_line: *info_line }
                    }
                    (IdentityState::Retired { line: info_line }, Some(id)) => {
                        Problem::IdReusedAfterInfo { client, id, info_line: *info_line }
                    }
                    (IdentityState::Outstanding { line: outstanding_line, .. }, None) => {
                        Problem::SecondInvoke { client, outstanding_line: *outstanding_line }
                    }
                    (IdentityState::Outstanding { line: outstanding_line, .. }, Some(id)) => {
                        Problem::IdOutstanding { client, id, outstanding_line: *outstanding_line }
                    }
                });
            }
        };
        if event.time_ns < previous_ns {
            return Err(Problem::TimeWentBackwards { client, previous_ns, time_ns: event.time_ns });
        }
        // Reads, expires and deletes carry no value; one given anyway is ignored, not trusted.
        let value = match event.op {
            OpKind::Read | OpKind::Expire | OpKind::Delete => None,
            OpKind::Write | OpKind::Append => {
                let value = event.value.as_deref().ok_or(Problem::MissingValue { client, op: event.op })?;
                Some(value)
            }
        };
        if event.expires_ms.is_some() && event.op != OpKind::Write {
            return Err(Problem::ExpiryOnNonWrite { client, op: event.op });
        }
        state.insert(IdentityState::Outstanding { operation: self.operations.len(), line });
        self.operations.push(OperationView {
            client,
            id: event.id,
            op: event.op,
            key: &event.key,
            value,
            at_ms: event.at_ms,
            expires_ms: event.expires_ms,
            invoke_ns: event.time_ns,
            completion_ns: None,
            outcome: Outcome::Unfinished,
        });
        Ok(())
    }

    fn on_completion(&mut self, line: usize, previous_ns: u64, event: &'a HistoryEvent) -> Result<(), Problem> {
        let client = event.client;
        let mut state = match self.states.entry((client, event.id)) {
            Entry::Occupied(occupied) => occupied,
            Entry::Vacant(_) => {
                return Err(match event.id {
                    None => Problem::CompletionWithoutInvoke { client },
                    Some(id) => Problem::CompletionWithoutInvokeOfId { client, id },
                });
            }
        };
        let (index, invoke_line) = match (state.get(), event.id) {
            (IdentityState::Outstanding { operation, line }, _) => (*operation, *line),
            (IdentityState::Retired { line: info_line }, None) => {
                return Err(Problem::ClientReusedAfterInfo { client, info_line: *info_line });
            }
            (IdentityState::Retired { line: info_line }, Some(id)) => {
                return Err(Problem::IdReusedAfterInfo { client, id, info_line: *info_line });
            }
        };
        let operation = &mut self.operations[index];
        debug_assert_eq!((operation.client, operation.id), (client, event.id));
        check_completion_matches(operation, invoke_line, previous_ns, event)?;
        operation.completion_ns = Some(event.time_ns);
        operation.outcome = match event.kind {
            EventKind::Ok => Outcome::Ok,
            EventKind::Fail => Outcome::Fail,
            EventKind::Info | EventKind::Invoke => Outcome::Info,
        };
        if operation.op == OpKind::Read && operation.outcome == Outcome::Ok {
            operation.value = event.value.as_deref();
        }
        match event.kind {
            EventKind::Info => _ = state.insert(IdentityState::Retired { line }),
            _ => _ = state.remove(),
        }
        Ok(())
    }
}

/// A completion must name the invocation it completes; a mismatch means the history's writer
/// lost track of its clients, and checking such a history would prove nothing.
/// `previous_ns` is the time of the client's latest event: the invocation, or a later event of a
/// client with several operations outstanding.
fn check_completion_matches(
    operation: &OperationView<'_>,
    invoke_line: usize,
    previous_ns: u64,
    event: &HistoryEvent,
) -> Result<(), Problem> {
    let client = event.client;
    if operation.op != event.op || operation.key != event.key {
        return Err(Problem::Mismatch {
            client,
            op: event.op,
            key: event.key.clone(),
            invoke_op: operation.op,
            invoke_key: operation.key.to_string(),
            invoke_line,
        });
    }
    debug_assert!(operation.invoke_ns <= previous_ns);
    if event.time_ns < previous_ns {
        return Err(Problem::TimeWentBackwards { client, previous_ns, time_ns: event.time_ns });
    }
    if let (OpKind::Write | OpKind::Append, Some(value), Some(invoke_value)) =
        (event.op, event.value.as_deref(), operation.value)
        && value != invoke_value
    {
        return Err(Problem::ValueMismatch {
            client,
            op: event.op,
            value: value.to_string(),
            invoke_value: invoke_value.to_string(),
        });
    }
    let stamps = [("at_ms", event.at_ms, operation.at_ms), ("expires_ms", event.expires_ms, operation.expires_ms)];
    for (field, stamp, invoke_stamp) in stamps {
        if let Some(value) = stamp
            && Some(value) != invoke_stamp
        {
            return Err(Problem::StampMismatch { client, op: event.op, field, value, invoke_value: invoke_stamp });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
