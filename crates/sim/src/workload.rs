//! What the simulated clients do: which commands, on which keys, how often.
//!
//! Every generated command is a GET, SET or APPEND on one key, or several of them at once (MGET,
//! MSET, or a MULTI/EXEC transaction), recorded as one history operation per key, so every run's
//! history can be checked for linearizability. Values are unique per operation so the checker
//! can tell writes apart.

use ordo_check::history::OpKind;
use ordo_core::command::{ExpiryTime, SetCondition, SetExpiry};
use ordo_core::{Command, CommandResult, Key};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

/// How keys are chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyChoice {
    /// Uniform over `keys` shared keys.
    Uniform {
        /// Key-space size.
        keys: u64,
    },
    /// Zipf-distributed over `keys` shared keys with exponent `exponent` (YCSB uses 0.99).
    Zipf {
        /// Key-space size.
        keys: u64,
        /// Skew.
        exponent: f64,
    },
    /// A share `rate` of commands goes to one hot key shared by all clients; the rest go to keys
    /// private to each client (the conflict-rate workload of EPaxos, Atlas and Tempo).
    Conflict {
        /// Share of commands on the hot key.
        rate: f64,
    },
}

/// The clients' workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Key choice.
    pub keys: KeyChoice,
    /// Share of reads (GET); the rest write.
    pub read_ratio: f64,
    /// Share of writes that are APPENDs rather than SETs.
    pub append_ratio: f64,
    /// Bytes per value written.
    pub value_size: usize,
    /// Open-loop Poisson arrivals per client per second; closed loop when absent.
    pub rate_per_client: Option<f64>,
    /// Arrivals a client may hold back in open-loop mode before it drops new ones.
    pub backlog_max: usize,
    /// A client gives up on an operation after this long and records its outcome as unknown.
    pub op_timeout_ns: u64,
    /// Operations each client keeps in flight at once (pipelining): at most the protocol's
    /// client window. With more than one, history events carry operation ids.
    pub outstanding_max: usize,
    /// Share of operations that touch two keys at once (MGET for reads, MSET for writes): the
    /// multi-shard commands of partial replication when the keys fall in different shards.
    pub multi_key_ratio: f64,
    /// Share of operations that are transactions (MULTI/EXEC) of two or three GET, SET or APPEND
    /// on distinct keys. A quarter of them WATCH their first key at a guessed version, so some
    /// abort (the history records an aborted transaction as failed: it took no effect).
    pub transaction_ratio: f64,
    /// Share of SETs that expire (PX of 1 to 20 ms). When positive, every command is stamped
    /// with its client node's clock (skewed by clock faults, so stamps are not monotonic in the
    /// order), and a quarter of this share of operations are sweeps of one key (the gateway's
    /// replicated removal of expired keys), recorded as `expire` operations.
    pub expiry_ratio: f64,
}

impl Default for WorkloadSpec {
    /// The history workload: read, write and append on a handful of keys, so operations overlap.
    fn default() -> Self {
        WorkloadSpec {
            keys: KeyChoice::Uniform { keys: 5 },
            read_ratio: 0.5,
            append_ratio: 0.3,
            value_size: 8,
            rate_per_client: None,
            backlog_max: 10_000,
            op_timeout_ns: 1_000_000_000,
            outstanding_max: 1,
            multi_key_ratio: 0.0,
            transaction_ratio: 0.0,
            expiry_ratio: 0.0,
        }
    }
}

impl WorkloadSpec {
    /// Builds a workload from a name: `history` (default), `uniform:N`, `ycsb-a`, `ycsb-b`,
    /// `ycsb-c`, `conflict:RATE` (e.g. `conflict:0.02`).
    pub fn from_name(name: &str) -> Result<Self, String> {
        let base = WorkloadSpec::default();
        let (kind, argument) = name.split_once(':').map_or((name, None), |(k, a)| (k, Some(a)));
        let number = |what: &str| -> Result<f64, String> {
            let text = argument.ok_or_else(|| format!("workload `{kind}` needs {what}, e.g. `{kind}:0.02`"))?;
            text.parse::<f64>().map_err(|_| format!("workload `{name}`: `{text}` is not a number"))
        };
        let ycsb = |read_ratio| WorkloadSpec {
            keys: KeyChoice::Zipf { keys: 1_000, exponent: 0.99 },
            read_ratio,
            append_ratio: 0.0,
            ..base.clone()
        };
        let spec = match kind {
            "history" => base.clone(),
            "uniform" => {
                WorkloadSpec { keys: KeyChoice::Uniform { keys: number("a key count")? as u64 }, ..base.clone() }
            }
            "ycsb-a" => ycsb(0.5),
            "ycsb-b" => ycsb(0.95),
            "ycsb-c" => ycsb(1.0),
            "conflict" => WorkloadSpec {
                keys: KeyChoice::Conflict { rate: number("a rate")? },
                append_ratio: 0.0,
                ..base.clone()
            },
            _ => {
                return Err(format!(
                    "unknown workload `{name}` (known: history, uniform:N, ycsb-a, ycsb-b, ycsb-c, conflict:RATE)"
                ));
            }
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Rejects impossible settings.
    pub fn validate(&self) -> Result<(), String> {
        let ratio = |name: &str, value: f64| {
            if (0.0..=1.0).contains(&value) {
                Ok(())
            } else {
                Err(format!("workload: {name} must be in [0, 1], not {value}"))
            }
        };
        ratio("read_ratio", self.read_ratio)?;
        ratio("append_ratio", self.append_ratio)?;
        ratio("multi_key_ratio", self.multi_key_ratio)?;
        ratio("transaction_ratio", self.transaction_ratio)?;
        ratio("expiry_ratio", self.expiry_ratio)?;
        if self.outstanding_max == 0 {
            return Err("workload: outstanding_max must be at least 1".into());
        }
        match self.keys {
            KeyChoice::Uniform { keys: 0 } | KeyChoice::Zipf { keys: 0, .. } => {
                Err("workload: keys must be at least 1".into())
            }
            KeyChoice::Zipf { exponent, .. } if exponent <= 0.0 => {
                Err("workload: zipf exponent must be positive".into())
            }
            KeyChoice::Conflict { rate } => ratio("conflict rate", rate),
            _ => match self.rate_per_client {
                Some(rate) if rate <= 0.0 => Err("workload: rate must be positive".into()),
                _ => Ok(()),
            },
        }
    }
}

/// One key's part of a generated operation, as the history records it.
pub struct GeneratedPart {
    /// History operation kind.
    pub kind: OpKind,
    /// The key, as text.
    pub key: String,
    /// The value written or appended.
    pub value: Option<String>,
    /// The command's stamp ([`Command::Timed`]), in ms; `None` when unstamped.
    pub at_ms: Option<u64>,
    /// A write's expiry (resolved from its stamp), in ms; `None` when it never expires.
    pub expires_ms: Option<u64>,
}

/// How the history records `command`: one part per key (a multi-key command is recorded as one
/// read or write per key, each spanning the command). Only for commands [`Generator`] makes,
/// stamped or not, plus DEL.
pub fn parts(command: &Command) -> Vec<GeneratedPart> {
    let mut parts = Vec::new();
    push_parts(command, None, &mut parts);
    parts
}

/// [`parts`] of `command` carrying the stamp `at_ms` of an enclosing [`Command::Timed`].
fn push_parts(command: &Command, at_ms: Option<i64>, parts: &mut Vec<GeneratedPart>) {
    match command {
        Command::Transaction { commands, .. } => {
            return commands.iter().for_each(|command| push_parts(command, at_ms, parts));
        }
        Command::Timed { now_ms, command } => return push_parts(command, Some(*now_ms), parts),
        _ => {}
    }
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    // Stamps come from simulated clocks, which never read below zero.
    let ms = |stamp: i64| u64::try_from(stamp).expect("simulated stamps are not negative");
    let mut part = |kind, key: &[u8], value: Option<&[u8]>, expires_ms: Option<i64>| {
        parts.push(GeneratedPart {
            kind,
            key: text(key),
            value: value.map(text),
            at_ms: at_ms.map(ms),
            expires_ms: expires_ms.map(ms),
        })
    };
    match command {
        Command::Get { key } => part(OpKind::Read, key, None, None),
        Command::Set { key, value, condition: SetCondition::Always, expiry } => {
            let expires_ms = match expiry {
                SetExpiry::Clear => None,
                // A relative expiry is resolved with the stamp, as the store does.
                SetExpiry::Set(time) => Some(time.resolve(at_ms.expect("the generator stamps expiring SETs"))),
                SetExpiry::Keep => panic!("the workload generator never makes KEEPTTL"),
            };
            part(OpKind::Write, key, Some(value), expires_ms)
        }
        Command::Append { key, value } => part(OpKind::Append, key, Some(value), None),
        Command::MGet { keys } => keys.iter().for_each(|key| part(OpKind::Read, key, None, None)),
        Command::MSet { pairs } => pairs.iter().for_each(|(key, value)| part(OpKind::Write, key, Some(value), None)),
        Command::ExpireSweep { keys } => keys.iter().for_each(|key| part(OpKind::Expire, key, None, None)),
        Command::Del { keys } => keys.iter().for_each(|key| part(OpKind::Delete, key, None, None)),
        other => panic!("the workload generator never makes {other:?}"),
    }
}

/// What a completed operation's `result` says of each of its parts ([`parts`], in order): the
/// value each read part read (`None` for an absent key; writes' entries are unused), or `None`
/// when the operation took no effect: an error, or, when `may_abort` (a transaction with
/// WATCH), a null result.
pub fn part_results(result: CommandResult, may_abort: bool) -> Option<Vec<Option<String>>> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match result {
        CommandResult::Error(_) => None,
        CommandResult::Nil if may_abort => None,
        CommandResult::Value(value) => Some(vec![Some(text(&value))]),
        CommandResult::Values(values) => Some(values.iter().map(|v| v.as_deref().map(text)).collect()),
        CommandResult::Results(results) => {
            let mut flat = Vec::new();
            for result in results {
                // The generator's commands in a transaction never fail on their own.
                flat.extend(part_results(result, false)?);
            }
            Some(flat)
        }
        // OK of a write, or Nil of a read of an absent key: one part.
        _ => Some(vec![None]),
    }
}

/// True when a null result means `command` took no effect (a transaction with WATCH, stamped
/// or not).
pub fn may_abort(command: &Command) -> bool {
    matches!(command.untimed(), Command::Transaction { watched, .. } if !watched.is_empty())
}

/// Draws operations for one run (one instance shared by all clients, fed the workload RNG).
pub struct Generator {
    spec: WorkloadSpec,
    zipf: Option<Zipf<f64>>,
}

/// Private keys per client in the conflict workload (bounded so the store stays small).
const PRIVATE_KEYS_PER_CLIENT: u64 = 64;

/// Appends `n` in `radix` (10 or 16) to `text`. Every simulated operation formats a key and a
/// value, and `format!` costs several times this on the simulator's hot path.
fn push_number(text: &mut String, mut n: u64, radix: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[(n % radix) as usize];
        n /= radix;
        if n == 0 {
            break;
        }
    }
    text.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

/// `prefix` followed by `n` in decimal.
fn numbered(prefix: &str, n: u64) -> String {
    let mut text = String::with_capacity(prefix.len() + 20);
    text.push_str(prefix);
    push_number(&mut text, n, 10);
    text
}

impl Generator {
    /// A generator for `spec`.
    pub fn new(spec: &WorkloadSpec) -> Self {
        let zipf = match spec.keys {
            KeyChoice::Zipf { keys, exponent } => Some(Zipf::new(keys as f64, exponent).expect("validated")),
            _ => None,
        };
        Generator { spec: spec.clone(), zipf }
    }

    fn key(&self, rng: &mut ChaCha8Rng, client: usize) -> String {
        match self.spec.keys {
            KeyChoice::Uniform { keys } => numbered("k", rng.random_range(0..keys)),
            KeyChoice::Zipf { .. } => {
                let rank = self.zipf.as_ref().expect("zipf").sample(rng) as u64;
                numbered("k", rank.saturating_sub(1))
            }
            KeyChoice::Conflict { rate } => {
                if rng.random_bool(rate) {
                    "hot".to_string()
                } else {
                    let mut key = numbered("c", client as u64);
                    key.push('.');
                    push_number(&mut key, rng.random_range(0..PRIVATE_KEYS_PER_CLIENT), 10);
                    key
                }
            }
        }
    }

    /// `{unique:x}.{part}.` padded with `x` to the value size.
    fn value(&self, unique: u64, part: usize) -> String {
        let mut value = String::with_capacity(self.spec.value_size.max(24));
        push_number(&mut value, unique, 16);
        value.push('.');
        push_number(&mut value, part as u64, 10);
        value.push('.');
        let padding = self.spec.value_size.saturating_sub(value.len());
        value.extend(std::iter::repeat_n('x', padding));
        value
    }

    /// The next command of `client`; `unique` makes its values unique in the run.
    pub fn next(&self, rng: &mut ChaCha8Rng, client: usize, unique: u64) -> Command {
        if self.spec.transaction_ratio > 0.0
            && rng.random_bool(self.spec.transaction_ratio)
            && let Some(transaction) = self.transaction(rng, client, unique)
        {
            return transaction;
        }
        let key = self.key(rng, client);
        let read = rng.random_bool(self.spec.read_ratio);
        if self.spec.multi_key_ratio > 0.0 && rng.random_bool(self.spec.multi_key_ratio) {
            let mut other = self.key(rng, client);
            for _ in 0..8 {
                if other != key {
                    break;
                }
                other = self.key(rng, client);
            }
            if other != key {
                return self.multi_key(read, [key, other], unique);
            }
        }
        if self.spec.expiry_ratio > 0.0 && rng.random_bool(self.spec.expiry_ratio / 4.0) {
            return Command::ExpireSweep { keys: vec![key.into()] };
        }
        if read {
            return Command::get(key);
        }
        self.write(rng, key, self.value(unique, 0))
    }

    /// An APPEND or a SET, which expires in a share `expiry_ratio` of cases.
    fn write(&self, rng: &mut ChaCha8Rng, key: String, value: String) -> Command {
        if rng.random_bool(self.spec.append_ratio) {
            return Command::append(key, value);
        }
        if self.spec.expiry_ratio > 0.0 && rng.random_bool(self.spec.expiry_ratio) {
            let expiry = SetExpiry::Set(ExpiryTime::In(rng.random_range(1..=20)));
            return Command::Set { key: key.into(), value: value.into(), condition: SetCondition::Always, expiry };
        }
        Command::set(key, value)
    }

    /// Two or three single-key commands on distinct keys, as one transaction; `None` when the
    /// key space offers too few distinct keys.
    fn transaction(&self, rng: &mut ChaCha8Rng, client: usize, unique: u64) -> Option<Command> {
        let wanted = rng.random_range(2..=3);
        let mut keys: Vec<String> = Vec::with_capacity(wanted);
        for _ in 0..8 * wanted {
            let key = self.key(rng, client);
            if !keys.contains(&key) {
                keys.push(key);
            }
            if keys.len() == wanted {
                break;
            }
        }
        if keys.len() < 2 {
            return None;
        }
        let commands = keys.iter().enumerate().map(|(part, key)| {
            let key = key.clone();
            if rng.random_bool(self.spec.read_ratio) {
                Command::get(key)
            } else {
                self.write(rng, key, self.value(unique, part))
            }
        });
        let commands: Vec<Command> = commands.collect();
        // A guessed version: right now and then (small versions on a small key space), so both
        // the commit and the abort of a watched transaction happen.
        let watched = if rng.random_bool(0.25) {
            vec![(Key::from(keys[0].clone()), rng.random_range(0..20))]
        } else {
            Vec::new()
        };
        Some(Command::Transaction { watched, commands })
    }

    fn multi_key(&self, read: bool, keys: [String; 2], unique: u64) -> Command {
        if read {
            return Command::MGet { keys: keys.into_iter().map(Into::into).collect() };
        }
        let pairs = keys.into_iter().enumerate().map(|(part, key)| (key.into(), self.value(unique, part).into()));
        Command::MSet { pairs: pairs.collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn names_parse_and_bad_names_explain() {
        // Goal: the CLI's workload names map to specs, and mistakes get a message, not a panic.
        assert_eq!(WorkloadSpec::from_name("conflict:0.02").unwrap().keys, KeyChoice::Conflict { rate: 0.02 });
        assert!(WorkloadSpec::from_name("conflict").unwrap_err().contains("needs"));
        assert!(WorkloadSpec::from_name("conflict:2").is_err());
        assert!(WorkloadSpec::from_name("nope").unwrap_err().contains("known"));
    }

    #[test]
    fn multi_key_operations_touch_two_distinct_keys() {
        // Goal: with multi_key_ratio 1 every operation is an MGET or MSET of two different keys,
        // recorded as one part per key.
        let spec =
            WorkloadSpec { multi_key_ratio: 1.0, keys: KeyChoice::Uniform { keys: 100 }, ..WorkloadSpec::default() };
        let generator = Generator::new(&spec);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for unique in 0..100 {
            let command = generator.next(&mut rng, 0, unique);
            assert!(matches!(command, Command::MGet { .. } | Command::MSet { .. }));
            let parts = parts(&command);
            assert_eq!(parts.len(), 2);
            assert_ne!(parts[0].key, parts[1].key);
        }
    }

    #[test]
    fn transactions_touch_distinct_keys_and_their_results_align_with_parts() {
        // Goal: with transaction_ratio 1 every operation is a transaction of 2-3 commands on
        // distinct keys, some with WATCH; its results map onto its parts in order, and a null
        // result is "no effect" only for a watched transaction.
        let spec = WorkloadSpec { transaction_ratio: 1.0, ..WorkloadSpec::default() };
        let generator = Generator::new(&spec);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut watched_seen = 0;
        for unique in 0..200 {
            let command = generator.next(&mut rng, 0, unique);
            let Command::Transaction { watched, commands } = &command else { panic!("{command:?}") };
            watched_seen += usize::from(!watched.is_empty());
            assert!((2..=3).contains(&commands.len()));
            let keys = command.keys();
            let parts = parts(&command);
            assert_eq!(parts.len(), commands.len());
            assert!(parts.iter().enumerate().all(|(i, p)| parts[i + 1..].iter().all(|q| q.key != p.key)));
            assert_eq!(may_abort(&command), !watched.is_empty());
            assert!(keys.len() >= parts.len());
        }
        assert!((20..100).contains(&watched_seen), "about a quarter watched: {watched_seen}");
        let results =
            CommandResult::Results(vec![CommandResult::Ok, CommandResult::Value("v".into()), CommandResult::Nil]);
        assert_eq!(part_results(results, true), Some(vec![None, Some("v".to_string()), None]));
        assert_eq!(part_results(CommandResult::Nil, true), None, "an aborted transaction");
        assert_eq!(part_results(CommandResult::Nil, false), Some(vec![None]), "a GET of an absent key");
        assert_eq!(part_results(CommandResult::Error("x".into()), false), None);
    }

    #[test]
    fn numbers_and_values_are_formatted_as_before() {
        // Goal: the hand-written formatting gives what `format!` gave (the history and the
        // message sizes depend on it).
        for n in [0, 7, 10, 255, 4096, 99_999, u64::MAX] {
            assert_eq!(numbered("k", n), format!("k{n}"));
            let mut hex = String::new();
            push_number(&mut hex, n, 16);
            assert_eq!(hex, format!("{n:x}"));
        }
        let generator = Generator::new(&WorkloadSpec { value_size: 16, ..WorkloadSpec::default() });
        assert_eq!(generator.value(0xabc, 1), "abc.1.xxxxxxxxxx");
        assert_eq!(generator.value(u64::MAX, 0), format!("{:x}.0.", u64::MAX), "longer than the size: no padding");
    }

    #[test]
    fn conflict_rate_is_respected() {
        // Goal: about `rate` of the commands land on the hot key.
        let spec = WorkloadSpec::from_name("conflict:0.1").unwrap();
        let generator = Generator::new(&spec);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let hot = (0..10_000).filter(|&i| parts(&generator.next(&mut rng, 3, i))[0].key == "hot").count();
        assert!((800..1200).contains(&hot), "{hot} of 10000 on the hot key");
    }
}
