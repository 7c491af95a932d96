//! The network model: a one-way delay between every pair of sites (constant base plus an
//! exponentially distributed extra), read from a latency-matrix file for WAN runs.

use serde::{Deserialize, Serialize};

/// One-way delays between sites.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LatencyModel {
    /// Site names; replica r of each shard and client c are placed at site r (c) modulo the count.
    pub sites: Vec<String>,
    /// Base one-way delay from site i to site j, in ns.
    pub one_way_ns: Vec<Vec<u64>>,
    /// Mean of the exponentially distributed delay added to every message, in ns.
    pub jitter_mean_ns: u64,
    /// One-way delay between two nodes of the same site when the matrix says 0, in ns.
    pub local_ns: u64,
    /// One-way delay between two nodes on one machine (loopback, no jitter), in ns.
    pub machine_ns: u64,
}

/// Loopback: the kernel's cost of a datagram is in the CPU model (about 3 µs each way,
/// specs/dependencies.md §1); what remains is a wake-up of the receiving process.
const MACHINE_NS: u64 = 5_000;

impl Default for LatencyModel {
    /// A LAN: one site, 40 µs one way plus a 10 µs mean exponential tail.
    fn default() -> Self {
        LatencyModel {
            sites: vec!["lan".into()],
            one_way_ns: vec![vec![40_000]],
            jitter_mean_ns: 10_000,
            local_ns: 40_000,
            machine_ns: MACHINE_NS,
        }
    }
}

/// The on-disk form of a latency matrix (examples/latency/*.toml).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyFile {
    sites: Vec<String>,
    /// Round-trip times in ms; one-way delay is half.
    rtt_ms: Option<Vec<Vec<f64>>>,
    /// One-way delays in ms.
    one_way_ms: Option<Vec<Vec<f64>>>,
    /// Mean exponential jitter added to each message, in ms.
    jitter_mean_ms: Option<f64>,
    /// One-way delay inside a site, in ms.
    local_ms: Option<f64>,
}

const NANOS_PER_MS: f64 = 1_000_000.0;

impl LatencyModel {
    /// Reads a latency matrix in TOML: `sites`, then `rtt_ms` (halved) or `one_way_ms`.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: LatencyFile = toml::from_str(text).map_err(|e| format!("latency file: {e}"))?;
        let (matrix, scale) = match (file.rtt_ms, file.one_way_ms) {
            (Some(rtt), None) => (rtt, 0.5),
            (None, Some(one_way)) => (one_way, 1.0),
            _ => return Err("latency file: give exactly one of `rtt_ms` and `one_way_ms`".into()),
        };
        let to_ns = |ms: f64| (ms * scale * NANOS_PER_MS).round() as u64;
        let local_ns = file.local_ms.map_or(100_000, |ms| (ms * NANOS_PER_MS) as u64);
        let model = LatencyModel {
            sites: file.sites,
            one_way_ns: matrix.iter().map(|row| row.iter().map(|&ms| to_ns(ms)).collect()).collect(),
            jitter_mean_ns: file.jitter_mean_ms.map_or(0, |ms| (ms * NANOS_PER_MS) as u64),
            local_ns,
            machine_ns: MACHINE_NS,
        };
        model.validate()?;
        Ok(model)
    }

    /// Checks the matrix is square and matches the site list.
    pub fn validate(&self) -> Result<(), String> {
        if self.sites.is_empty() {
            return Err("latency: at least one site is needed".into());
        }
        if self.one_way_ns.len() != self.sites.len() || self.one_way_ns.iter().any(|row| row.len() != self.sites.len())
        {
            return Err(format!("latency: the matrix must be {n}×{n} for {n} sites", n = self.sites.len()));
        }
        Ok(())
    }

    /// Base one-way delay from site `from` to site `to`.
    pub fn base_ns(&self, from: usize, to: usize) -> u64 {
        match self.one_way_ns[from][to] {
            0 => self.local_ns,
            delay => delay,
        }
    }

    /// The site-to-site matrix as protocols see it (`Topology::site_delay_ns`).
    pub fn matrix_ns(&self) -> Vec<Vec<u64>> {
        (0..self.sites.len()).map(|i| (0..self.sites.len()).map(|j| self.base_ns(i, j)).collect()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rtt_matrix_as_half() {
        // Goal: a file of round-trip times becomes one-way delays of half, and bad shapes are
        // reported rather than accepted.
        let model = LatencyModel::from_toml("sites = ['a', 'b']\nrtt_ms = [[0, 10], [10, 0]]").unwrap();
        assert_eq!(model.base_ns(0, 1), 5_000_000);
        assert_eq!(model.base_ns(0, 0), 100_000);
        assert!(LatencyModel::from_toml("sites = ['a']\nrtt_ms = [[0, 1]]").is_err());
        assert!(LatencyModel::from_toml("sites = ['a']").is_err());
    }
}
