//! What the simulated clients do: which commands, on which keys, how often.
//!
//! Every generated command is a GET, SET or APPEND on one key, so every run's history can be
//! checked for linearizability. Values are unique per operation so the checker can tell writes
//! apart.

use ordo_check::history::OpKind;
use ordo_core::Command;
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
}

/// One generated operation: the command and how the history records it (one part per key; a
/// multi-key command is recorded as one read or write per key, each spanning the command).
pub struct GeneratedOp {
    /// The command submitted.
    pub command: Command,
    /// Its parts, one per key.
    pub parts: Vec<GeneratedPart>,
}

/// Draws operations for one run (one instance shared by all clients, fed the workload RNG).
pub struct Generator {
    spec: WorkloadSpec,
    zipf: Option<Zipf<f64>>,
}

/// Private keys per client in the conflict workload (bounded so the store stays small).
const PRIVATE_KEYS_PER_CLIENT: u64 = 64;

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
            KeyChoice::Uniform { keys } => format!("k{}", rng.random_range(0..keys)),
            KeyChoice::Zipf { .. } => {
                let rank = self.zipf.as_ref().expect("zipf").sample(rng) as u64;
                format!("k{}", rank.saturating_sub(1))
            }
            KeyChoice::Conflict { rate } => {
                if rng.random_bool(rate) {
                    "hot".to_string()
                } else {
                    format!("c{client}.{}", rng.random_range(0..PRIVATE_KEYS_PER_CLIENT))
                }
            }
        }
    }

    fn value(&self, unique: u64, part: usize) -> String {
        let mut value = format!("{unique:x}.{part}.");
        while value.len() < self.spec.value_size {
            value.push('x');
        }
        value
    }

    /// The next operation of `client`; `unique` makes its values unique in the run.
    pub fn next(&self, rng: &mut ChaCha8Rng, client: usize, unique: u64) -> GeneratedOp {
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
        if read {
            let part = GeneratedPart { kind: OpKind::Read, key: key.clone(), value: None };
            return GeneratedOp { command: Command::get(key), parts: vec![part] };
        }
        let value = self.value(unique, 0);
        let (kind, command) = if rng.random_bool(self.spec.append_ratio) {
            (OpKind::Append, Command::append(key.clone(), value.clone()))
        } else {
            (OpKind::Write, Command::set(key.clone(), value.clone()))
        };
        GeneratedOp { command, parts: vec![GeneratedPart { kind, key, value: Some(value) }] }
    }

    fn multi_key(&self, read: bool, keys: [String; 2], unique: u64) -> GeneratedOp {
        if read {
            let command = Command::MGet { keys: keys.iter().map(|k| k.clone().into()).collect() };
            let parts = keys.into_iter().map(|key| GeneratedPart { kind: OpKind::Read, key, value: None }).collect();
            return GeneratedOp { command, parts };
        }
        let values: Vec<String> = (0..keys.len()).map(|part| self.value(unique, part)).collect();
        let command = Command::MSet {
            pairs: keys.iter().zip(&values).map(|(k, v)| (k.clone().into(), v.clone().into())).collect(),
        };
        let parts = keys
            .into_iter()
            .zip(values)
            .map(|(key, value)| GeneratedPart { kind: OpKind::Write, key, value: Some(value) })
            .collect();
        GeneratedOp { command, parts }
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
            let op = generator.next(&mut rng, 0, unique);
            assert_eq!(op.parts.len(), 2);
            assert_ne!(op.parts[0].key, op.parts[1].key);
            assert!(matches!(op.command, Command::MGet { .. } | Command::MSet { .. }));
        }
    }

    #[test]
    fn conflict_rate_is_respected() {
        // Goal: about `rate` of the commands land on the hot key.
        let spec = WorkloadSpec::from_name("conflict:0.1").unwrap();
        let generator = Generator::new(&spec);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let hot = (0..10_000).filter(|&i| generator.next(&mut rng, 3, i).parts[0].key == "hot").count();
        assert!((800..1200).contains(&hot), "{hot} of 10000 on the hot key");
    }
}
