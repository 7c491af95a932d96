//! Workloads: which command each operation is.

use bytes::Bytes;
use ordo_core::Command;
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Zipf};

/// Keys of the YCSB and uniform workloads.
const KEYS_DEFAULT: u64 = 10_000;

/// An operation mix.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// Reads with probability `read_ratio`, else writes; Zipfian (0.99) keys over `keys`.
    Ycsb {
        /// Share of reads.
        read_ratio: f64,
        /// Key space.
        keys: u64,
    },
    /// Half reads, half writes, uniform over `keys` keys.
    Uniform {
        /// Key space.
        keys: u64,
    },
    /// Writes; with probability `rate` to one shared hot key, else to a key of the client's own.
    Conflict {
        /// Probability of touching the hot key.
        rate: f64,
    },
}

impl Workload {
    /// Parses `ycsb-a`, `ycsb-b`, `ycsb-c`, `uniform:N` or `conflict:RATE`.
    pub fn parse(text: &str) -> Result<Workload, String> {
        let bad = || format!("unknown workload `{text}` (ycsb-a, ycsb-b, ycsb-c, uniform:N, conflict:RATE)");
        match text {
            "ycsb-a" => return Ok(Workload::Ycsb { read_ratio: 0.5, keys: KEYS_DEFAULT }),
            "ycsb-b" => return Ok(Workload::Ycsb { read_ratio: 0.95, keys: KEYS_DEFAULT }),
            "ycsb-c" => return Ok(Workload::Ycsb { read_ratio: 1.0, keys: KEYS_DEFAULT }),
            _ => {}
        }
        let (name, value) = text.split_once(':').ok_or_else(bad)?;
        match name {
            "uniform" => {
                let keys: u64 = value.parse().map_err(|_| bad())?;
                if keys == 0 {
                    return Err("uniform:N needs N > 0".into());
                }
                Ok(Workload::Uniform { keys })
            }
            "conflict" => {
                let rate: f64 = value.parse().map_err(|_| bad())?;
                if !(0.0..=1.0).contains(&rate) {
                    return Err("conflict:RATE needs 0 <= RATE <= 1".into());
                }
                Ok(Workload::Conflict { rate })
            }
            _ => Err(bad()),
        }
    }

    /// The key space: `None` for the conflict workload, whose keys are one hot key and one key per
    /// client, so their number depends on the load rather than on the workload.
    pub fn keys(&self) -> Option<u64> {
        match *self {
            Workload::Ycsb { keys, .. } | Workload::Uniform { keys } => Some(keys),
            Workload::Conflict { .. } => None,
        }
    }

    /// The mix in words, for plot titles and `results.json` (the name alone does not say what
    /// `ycsb-a` means to a reader who has not seen YCSB).
    pub fn description(&self) -> String {
        match *self {
            Workload::Ycsb { read_ratio, keys } => {
                format!("{:.0}% reads, Zipfian 0.99 over {keys} keys", read_ratio * 100.0)
            }
            Workload::Uniform { keys } => format!("50% reads, uniform over {keys} keys"),
            Workload::Conflict { rate } => {
                format!("writes, {:.0}% to one hot key, the rest to a key per client", rate * 100.0)
            }
        }
    }

    /// What a written value is: [`Workload::next`] writes `c<client>-<operation>` as text, so a
    /// value is 4 bytes at first and grows with the operation count (12 bytes at 1,000 clients
    /// and a million operations each).
    pub const VALUE_DESCRIPTION: &'static str = "text c<client>-<op>, 4 to ~12 bytes";

    /// The command of operation `n` of client `client`.
    pub fn next(&self, rng: &mut impl Rng, client: u64, n: u64) -> Command {
        let value = Bytes::from(format!("c{client}-{n}"));
        match *self {
            Workload::Ycsb { read_ratio, keys } => {
                let rank = Zipf::new(keys as f64, 0.99).expect("valid zipf").sample(rng) as u64;
                // Scramble ranks so that hot keys are spread over the key space.
                let key = Bytes::from(format!("user{}", rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % keys));
                if rng.random_bool(read_ratio) { Command::Get { key } } else { Command::set(key, value) }
            }
            Workload::Uniform { keys } => {
                let key = Bytes::from(format!("key{}", rng.random_range(0..keys)));
                if rng.random_bool(0.5) { Command::Get { key } } else { Command::set(key, value) }
            }
            Workload::Conflict { rate } => {
                let key = if rng.random_bool(rate) {
                    Bytes::from_static(b"hot")
                } else {
                    Bytes::from(format!("own{client}"))
                };
                Command::set(key, value)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn workloads_parse_and_generate() {
        // Goal: the names parse, bad ones are errors, and the mix is roughly as named.
        assert!(Workload::parse("ycsb-z").is_err());
        assert!(Workload::parse("conflict:2").is_err());
        let workload = Workload::parse("ycsb-b").expect("valid");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let reads = (0..1_000).filter(|&n| workload.next(&mut rng, 0, n).is_read_only()).count();
        assert!((900..=990).contains(&reads), "{reads}");
        let conflict = Workload::parse("conflict:0").expect("valid");
        assert_eq!(conflict.next(&mut rng, 3, 1).keys(), vec![Bytes::from("own3")]);
        assert_eq!(conflict.keys(), None);
        assert_eq!(workload.keys(), Some(10_000));
        assert_eq!(workload.description(), "95% reads, Zipfian 0.99 over 10000 keys");
    }
}
