//! A whole cluster comes back after a power cut (issue 21). Every protocol that keeps its state
//! on disk (`Protocol::state_on_disk`: Multi-Paxos, and the unreplicated server with its one
//! replica) runs as real `ordo node` processes started by `ordo cluster up`, under writers and
//! readers whose history is recorded. Every process of the cluster (`cluster up`, replicas,
//! gateway) gets SIGKILL at once while writes are in flight; `cluster up` over the same data
//! directory then restarts the cluster from its `cluster.toml` and the nodes' durable files.
//! After each of `ROUNDS` such kills every key must be read within `SERVE_AGAIN_MAX`, and the
//! whole history (before, across and after the kills, ending with a read of every key) must be
//! linearizable: an acknowledged write the restarted cluster forgot shows as a read of an older
//! value. Writes whose reply the kill cut off are indeterminate (`info`) in the history.
//!
//! SIGKILL keeps what the processes wrote in the kernel's page cache, so these tests check what
//! the nodes write before they reply and how they boot from it, not that `fsync` reaches the
//! disk (that would take a machine that really loses power).
//!
//! `a_restart_that_forgot_its_durable_files_is_caught` is the negative control: the same run
//! with the durable files deleted before the restart must fail the check.
//!
//! Ports 30000-30999 only (this binary's range); `ORDO_RUNTIME_PROTOCOLS=multipaxos` restricts
//! the first test to the protocols named.

mod common;

use common::{Cluster, Load};
use ordo_net::ClusterFile;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The first port of this binary's range, which ends at 30999 (below the ephemeral ports).
const FIRST_PORT: u16 = 30_000;
/// Kills and restarts per protocol.
const ROUNDS: usize = 5;
/// From the kill to every key read again from the restarted cluster.
const SERVE_AGAIN_MAX: Duration = Duration::from_secs(20);
/// Writes acknowledged in each round before the kill.
const WRITES_PER_ROUND_MIN: usize = 100;
/// Client threads of the load.
const CLIENTS: u64 = 4;

/// The registered protocols whose replicas keep their state on disk, or those of them named
/// (comma-separated) in `ORDO_RUNTIME_PROTOCOLS`.
fn protocols_with_state_on_disk() -> Vec<ordo_protocols::ProtocolInfo> {
    let only = std::env::var("ORDO_RUNTIME_PROTOCOLS").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|list| list.split(',').any(|p| p.trim() == name));
    ordo_protocols::protocols().into_iter().filter(|p| !p.canary && p.state_on_disk && wanted(p.name)).collect()
}

/// A cluster file with the protocol's runtime defaults and every port in this binary's range:
/// node i on `port_base + i`, its metrics on `port_base + 8 + i`, the gateway's Redis port on
/// `port_base + 16` (`cluster up` would put metrics 1000 ports up).
struct FileInRange {
    replicas: usize,
    port_base: u16,
    data_dir: PathBuf,
    /// Protocol options set over the runtime defaults.
    options: toml::Table,
}

impl ordo_protocols::ProtocolVisitor for FileInRange {
    type Output = ClusterFile;
    fn visit<P: ordo_core::Protocol>(self) -> ClusterFile {
        let options = ordo_net::config::with_runtime_defaults::<P>(&self.options);
        let config: P::Config = toml::Value::Table(options.clone()).try_into().expect("the runtime defaults parse");
        let redis = Some(self.port_base + 16);
        let mut file =
            ClusterFile::local::<P>(&config, options, self.replicas, 16, self.port_base, redis, self.data_dir);
        assert!(file.nodes.len() <= 8, "nodes, metrics and Redis ports overlap");
        for (index, node) in file.nodes.iter_mut().enumerate() {
            node.metrics = Some(SocketAddr::from(([127, 0, 0, 1], self.port_base + 8 + index as u16)));
        }
        assert!(file.runtime.fsync, "the nodes sync their writes, as `cluster up` does by default");
        file
    }
}

/// What one protocol's kill rounds measured.
struct Rounds {
    /// Writes acknowledged before each kill, counted from the start.
    writes_acknowledged: Vec<usize>,
    /// From each kill to every key read again.
    serve_again: Vec<Duration>,
    /// Writes whose reply a kill cut off (indeterminate in the history).
    writes_cut_off: usize,
    /// `ok` events in the checked history.
    oks: usize,
}

/// Starts `protocol` with `options` on the 20 ports of `slot`, kills every process `rounds`
/// times under load and restarts it with `cluster up` over its data directory (deleting the
/// nodes' durable files first when `forget_files`, the negative control), then checks the whole
/// history.
fn kill_rounds(
    protocol: &ordo_protocols::ProtocolInfo,
    options: toml::Table,
    slot: u16,
    rounds: usize,
    forget_files: bool,
) -> Result<Rounds, String> {
    let replicas = protocol.replicas_max.map_or(3, |most| most.min(3));
    let port_base = FIRST_PORT + (std::process::id() % 4) as u16 * 250 + slot * 20;
    let data_dir =
        std::env::temp_dir().join(format!("ordo-restart-test-{}-{}-{slot}", std::process::id(), protocol.name));
    let _ = std::fs::remove_dir_all(&data_dir);
    std::fs::create_dir_all(&data_dir).expect("data directory");
    let file = ordo_protocols::with_protocol(
        protocol.name,
        FileInRange { replicas, port_base, data_dir: data_dir.clone(), options },
    )
    .expect("registered");
    std::fs::write(data_dir.join("cluster.toml"), file.to_toml()).expect("cluster file");
    let redis_port = port_base + 16;
    let mut cluster = Cluster::up(protocol.name, replicas, &[], data_dir.clone(), redis_port);
    let (load, mut workers) = Load::start(redis_port, CLIENTS);
    let mut measured = Rounds { writes_acknowledged: Vec::new(), serve_again: Vec::new(), writes_cut_off: 0, oks: 0 };
    for round in 0..rounds {
        let goal = load.writes_acknowledged() + WRITES_PER_ROUND_MIN;
        let deadline = Instant::now() + Duration::from_secs(15);
        while load.writes_acknowledged() < goal {
            assert!(Instant::now() < deadline, "{}: round {round}: too few writes acknowledged", protocol.name);
            std::thread::sleep(Duration::from_millis(20));
        }
        // The workers are in the middle of operations: their replies are cut off.
        measured.writes_acknowledged.push(load.writes_acknowledged());
        cluster.kill_all();
        let killed_at = Instant::now();
        load.stop(workers);
        if forget_files {
            forget_durable_files(&data_dir);
        }
        cluster = Cluster::up(protocol.name, replicas, &[], data_dir.clone(), redis_port);
        load.read_every_key(&cluster, killed_at + SERVE_AGAIN_MAX);
        measured.serve_again.push(killed_at.elapsed());
        workers = load.resume(redis_port, CLIENTS);
    }
    std::thread::sleep(Duration::from_millis(300));
    load.stop(workers);
    measured.writes_cut_off = load.writes_indeterminate();
    load.read_every_key(&cluster, Instant::now() + SERVE_AGAIN_MAX);
    measured.oks = load.check(&format!("{}-whole-restart", protocol.name))?;
    Ok(measured)
}

/// Deletes the nodes' durable files (`<name>-n<id>.log`) from `data_dir`.
fn forget_durable_files(data_dir: &Path) {
    for entry in std::fs::read_dir(data_dir).expect("data directory").map_while(Result::ok) {
        if ordo_net::storage::is_durable_file_name(&entry.file_name().to_string_lossy()) {
            std::fs::remove_file(entry.path()).expect("remove a durable file");
        }
    }
}

#[test]
fn every_protocol_with_state_on_disk_survives_a_whole_cluster_restart() {
    // Goal and method: see the module's header.
    let all = protocols_with_state_on_disk();
    if std::env::var("ORDO_RUNTIME_PROTOCOLS").is_err() {
        let names: Vec<&str> = all.iter().map(|p| p.name).collect();
        assert_eq!(names, ["unreplicated", "multipaxos"], "the protocols that say they keep their state on disk");
    }
    for (slot, protocol) in all.iter().enumerate() {
        survives_kill_rounds(protocol, toml::Table::new(), slot as u16);
    }
}

#[test]
fn nezha_in_durable_mode_survives_a_whole_cluster_restart() {
    // Goal: (issue 21) Nezha's durable mode, `durable = true`, keeps every acknowledged write
    // through a power cut; the paper's diskless Nezha cannot restart at all. Method: as above.
    let nezha = ordo_protocols::protocol_info("nezha").expect("registered");
    if std::env::var("ORDO_RUNTIME_PROTOCOLS").is_ok_and(|list| !list.split(',').any(|p| p.trim() == "nezha")) {
        return;
    }
    let options = toml::toml! { durable = true };
    survives_kill_rounds(&nezha, options, 5);
}

/// Runs `ROUNDS` kill rounds of `protocol` with `options` on the ports of `slot` and fails on
/// any lost write.
fn survives_kill_rounds(protocol: &ordo_protocols::ProtocolInfo, options: toml::Table, slot: u16) {
    let started = Instant::now();
    let label = if options.is_empty() {
        protocol.name.to_string()
    } else {
        format!("{} with {}", protocol.name, options.to_string().trim())
    };
    let measured =
        kill_rounds(protocol, options, slot, ROUNDS, false).unwrap_or_else(|violation| panic!("{violation}"));
    // Each kill cuts off the operation each client has in flight, a write half the time.
    assert!(measured.writes_cut_off > 0, "{label}: no write was in flight at a kill");
    let serve_again: Vec<String> =
        measured.serve_again.iter().map(|d| format!("{:.0} ms", d.as_secs_f64() * 1e3)).collect();
    eprintln!(
        "{label}: {ROUNDS} kills of every process; writes acknowledged before each kill (cumulative) {:?}, {} cut \
         off by a kill; every key read again {} after the kills; {} ok events linearizable; {:.1}s in all",
        measured.writes_acknowledged,
        measured.writes_cut_off,
        serve_again.join(", "),
        measured.oks,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_restart_that_forgot_its_durable_files_is_caught() {
    // Goal: the check above can fail. Method: one Multi-Paxos round as above, but the nodes'
    // durable files are deleted after the kill, so the cluster restarts empty and forgets every
    // acknowledged write; the history check must report it.
    let multipaxos = ordo_protocols::protocol_info("multipaxos").expect("registered");
    let outcome = kill_rounds(&multipaxos, toml::Table::new(), 11, 1, true);
    let violation = outcome.err().expect("a cluster that forgot its writes fails the check");
    assert!(violation.contains("not linearizable"), "{violation}");
}
