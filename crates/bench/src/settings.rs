//! The settings of a benchmark run, written into `results.json` and the title block of each plot:
//! a number means little without the replicas, workload, durations, fsync and machine behind it.

use crate::plot::{format_axis_tick, format_tick};
use serde::{Deserialize, Serialize};

/// Everything `ordo bench` was asked to do, and where it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The protocols compared, in the order they ran.
    pub protocols: Vec<String>,
    /// Protocol options given with `--set`, as `key=value`.
    pub protocol_options: Vec<String>,
    /// Replicas per cluster.
    pub replicas: usize,
    /// The workload as named on the command line (`ycsb-a`, `conflict:0.02`).
    pub workload: String,
    /// The workload in words.
    pub workload_description: String,
    /// Keys of the workload (`None` when it depends on the client count).
    pub keys: Option<u64>,
    /// What a written value is.
    pub value: String,
    /// `closed` (clients that wait for each answer) or `open` (Poisson arrivals).
    pub load: String,
    /// The load points: client counts (closed loop) or arrivals per second (open loop).
    pub load_points: Vec<f64>,
    /// Measured seconds per load point.
    pub duration_s: f64,
    /// Warm-up seconds per load point, not measured.
    pub warmup_s: f64,
    /// Whether replicas fsync their writes.
    pub fsync: bool,
    /// Protocol client nodes in the load generator (operations in flight at most).
    pub gateway_clients: usize,
    /// Roles whose nodes run inside the load generator's process.
    pub colocate: Vec<String>,
    /// The machine the run was on.
    pub machine: Machine,
    /// The ordo version that ran.
    pub ordo_version: String,
}

/// The machine of a run: every process of `ordo bench` shares it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Logical cores.
    pub cores: usize,
    /// The CPU model as `/proc/cpuinfo` names it.
    pub cpu_model: String,
}

impl Machine {
    /// Reads `/proc/cpuinfo`; where it is missing (not Linux), the cores the OS offers this
    /// process and an unknown model.
    pub fn detect() -> Machine {
        match std::fs::read_to_string("/proc/cpuinfo") {
            Ok(text) => Machine::from_cpuinfo(&text),
            Err(_) => Machine {
                cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
                cpu_model: "unknown".into(),
            },
        }
    }

    /// Parses the text of `/proc/cpuinfo`: one `processor` line per logical core, and the model
    /// in `model name` (x86) or, failing that, `Hardware` or `CPU part` (some ARM kernels).
    pub fn from_cpuinfo(text: &str) -> Machine {
        let field = |line: &str, name: &str| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        };
        let cores = text.lines().filter(|line| field(line, "processor").is_some()).count();
        let cpu_model = ["model name", "Hardware", "CPU part"]
            .iter()
            .find_map(|name| text.lines().find_map(|line| field(line, name)))
            .filter(|model| !model.is_empty())
            .unwrap_or_else(|| "unknown".into());
        Machine { cores, cpu_model }
    }
}

impl Settings {
    /// The title block's lines under the title: cluster and options, workload, load and
    /// durations, machine (the protocols are in the title). A plot shrinks a line too long for it.
    pub fn title_lines(&self) -> Vec<String> {
        let options = if self.protocol_options.is_empty() {
            "default options".to_string()
        } else {
            format!("options {}", self.protocol_options.join(" "))
        };
        let fsync = if self.fsync { "fsync on" } else { "fsync off" };
        let load_points: Vec<String> = self.load_points.iter().map(|&v| format_tick(v)).collect();
        let load = match self.load.as_str() {
            "open" => format!("open loop at {} ops/s", load_points.join(", ")),
            _ => format!("closed loop with {} clients", load_points.join(", ")),
        };
        vec![
            format!("{} replicas, {options}, {fsync}", self.replicas),
            format!("workload {}: {}; values {}", self.workload, self.workload_description, self.value),
            format!(
                "{load}; {} s measured after {} s warm-up per point",
                format_axis_tick(self.duration_s, self.duration_s),
                format_axis_tick(self.warmup_s, self.warmup_s)
            ),
            format!(
                "machine: {} cores, {}; ordo {}; load generator with {} client nodes",
                self.machine.cores, self.machine.cpu_model, self.ordo_version, self.gateway_clients
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_gives_cores_and_model() {
        // Goal: the machine line names the cores and the model on x86 and ARM kernels.
        let x86 = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(Machine::from_cpuinfo(x86), Machine { cores: 2, cpu_model: "AMD EPYC 7B13".into() });
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n";
        assert_eq!(Machine::from_cpuinfo(arm), Machine { cores: 1, cpu_model: "0xd0c".into() });
        assert_eq!(Machine::from_cpuinfo("").cpu_model, "unknown");
    }
}
