//! `ordo cluster up`: a whole local cluster as separate processes on 127.0.0.1, with a Redis
//! gateway. Prints how to connect and the nodes' states, and stops every child on Ctrl-C (and,
//! through PR_SET_PDEATHSIG, when this process dies).

use crate::parse;
use clap::{Args, Subcommand};
use ordo_core::{CrashModel, Protocol};
use ordo_net::ClusterFile;
use ordo_net::config::{FileRole, with_runtime_defaults};
use ordo_protocols::{ProtocolVisitor, protocol_info, with_protocol};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `ordo cluster` subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster and its Redis gateway; Ctrl-C stops it.
    Up(UpArgs),
}

/// Options of `ordo cluster up`.
#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Protocol name (see `ordo protocols`).
    #[arg(long)]
    pub protocol: String,
    /// Replicas: with majority quorums 3 tolerate one failure, 5 two, and 1 or 2 none.
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// Protocol client nodes in the gateway (concurrent operations in flight). Pipelined Redis
    /// clients keep many operations waiting; with too few client nodes they queue in the gateway.
    #[arg(long, default_value_t = 256)]
    pub clients: usize,
    /// The gateway's Redis port on 127.0.0.1.
    #[arg(long, default_value_t = 7379)]
    pub redis_port: u16,
    /// First UDP port (node i uses base+i, its metrics port base+1000+i); at least 1024, and the
    /// range must end by 65535.
    #[arg(long, default_value_t = 7400)]
    pub port_base: u16,
    /// Directory for the cluster file and the nodes' durable files (default:
    /// `$XDG_DATA_HOME/ordo/clusters/PROTOCOL-PORTBASE`, `$XDG_DATA_HOME` being
    /// `~/.local/share` when unset). A directory that holds an earlier cluster is restarted from
    /// its cluster.toml when the protocol keeps its state on disk, and refused otherwise.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Delete an earlier cluster's files (cluster.toml and the nodes' durable files,
    /// `<name>-n<id>.log`) from the data directory and start a new cluster; nothing else there
    /// is touched.
    #[arg(long)]
    pub wipe_data_dir: bool,
    /// Run without a cluster key: datagrams are checksummed, not authenticated. Every node of
    /// `cluster up` is on 127.0.0.1, so only local processes can reach them; this is for
    /// measuring what authentication costs.
    #[arg(long)]
    pub no_key: bool,
    /// Protocol option key=value (repeatable), e.g. --set batch_max=16.
    #[arg(long = "set", value_parser = parse::protocol_option)]
    pub protocol_options: Vec<(String, toml::Value)>,
    /// Skip fsync (writes still go to the file); for comparisons with in-memory stores.
    #[arg(long)]
    pub no_fsync: bool,
    /// How often to print the nodes' states (0: never).
    #[arg(long, value_parser = duration_or_zero, default_value = "2s")]
    pub status_every: u64,
    /// Extra roles (proxy, sequencer, controller; comma-separated) whose nodes run inside the
    /// gateway's process instead of processes of their own: their messages to and from the
    /// gateway's client nodes are then handed over in memory, and two cores serve fewer
    /// processes. `none` gives every node its own process.
    #[arg(long, value_delimiter = ',', default_value = "proxy")]
    pub colocate: Vec<String>,
    /// Password Redis clients must give with AUTH before other commands (Redis' `requirepass`);
    /// written to the cluster file as `requirepass`.
    #[arg(long)]
    pub requirepass: Option<String>,
}

/// A duration, or 0 for "never".
fn duration_or_zero(text: &str) -> Result<u64, String> {
    if text.trim() == "0" { Ok(0) } else { parse::duration_ns(text) }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

struct BuildFile<'a>(&'a UpArgs, PathBuf);

impl ProtocolVisitor for BuildFile<'_> {
    type Output = Result<ClusterFile, String>;
    fn visit<P: Protocol>(self) -> Self::Output {
        let args = self.0;
        let options = with_runtime_defaults::<P>(&args.protocol_options.iter().cloned().collect());
        let config: P::Config =
            toml::Value::Table(options.clone()).try_into().map_err(|e| format!("protocol options: {e}"))?;
        P::validate_config(&config)?;
        let nodes = args.replicas + P::extra_roles(args.replicas, &config).len() + 1;
        // Port 0 is `ordo bench`'s gateway, hosted in its own process without a Redis port.
        let redis_port = (args.redis_port != 0).then_some(args.redis_port);
        ClusterFile::check_local_ports(args.port_base, nodes, redis_port)?;
        let mut file = ClusterFile::local::<P>(
            &config,
            options,
            args.replicas,
            args.clients,
            args.port_base,
            Some(args.redis_port),
            self.1,
        );
        file.runtime.fsync = !args.no_fsync;
        file.requirepass = args.requirepass.clone().map(ordo_net::config::Password);
        colocate(&mut file, &args.colocate)?;
        file.placement::<P>(&config).map_err(|e| e.to_string())?;
        Ok(file)
    }
}

/// Moves the nodes of the named extra roles into the gateway's process.
fn colocate(file: &mut ClusterFile, roles: &[String]) -> Result<(), String> {
    let mut wanted = Vec::new();
    for role in roles.iter().map(|r| r.trim()).filter(|r| !r.is_empty() && *r != "none") {
        let parsed: FileRole = toml::Value::String(role.to_string())
            .try_into()
            .map_err(|_| format!("--colocate: unknown role `{role}`"))?;
        if matches!(parsed, FileRole::Replica | FileRole::Gateway) {
            return Err(format!(
                "--colocate: only extra roles (proxy, sequencer, controller) can share the gateway's process, not `{role}`"
            ));
        }
        wanted.push(parsed);
    }
    let Some(gateway) = file.nodes.iter().position(|n| n.role == FileRole::Gateway) else { return Ok(()) };
    let (name, addr) = (file.nodes[gateway].name.clone(), file.nodes[gateway].addr);
    for node in file.nodes.iter_mut().filter(|n| wanted.contains(&n.role)) {
        node.host = Some(name.clone());
        node.addr = addr;
        node.metrics = None;
    }
    Ok(())
}

/// Refuses a cluster with more replicas than its protocol uses (a protocol without
/// replication runs one server), naming the replicas that would be idle processes.
fn refuse_idle_replicas(args: &UpArgs, file: &ClusterFile) -> Result<(), String> {
    let Some(most) = protocol_info(&args.protocol).and_then(|info| info.replicas_max) else { return Ok(()) };
    if args.replicas <= most {
        return Ok(());
    }
    let names: Vec<&str> =
        file.nodes.iter().filter(|n| n.role == FileRole::Replica).map(|n| n.name.as_str()).skip(most).collect();
    Err(format!(
        "`{protocol}` uses {most} replica(s): it has no replication beyond that, and the others \
         ({idle}) would be idle processes. Such a cluster tolerates no more failures whatever \
         --replicas says. Start it with --replicas {most}.",
        protocol = args.protocol,
        idle = names.join(", "),
    ))
}

/// The warning for a replica count that tolerates no failure: a majority of 1 or 2 replicas is
/// all of them, so f = (replicas - 1) / 2 = 0.
fn no_failure_tolerated(replicas: usize) -> Option<String> {
    (replicas < 3).then(|| {
        let count = if replicas == 1 { "1 replica".to_string() } else { format!("{replicas} replicas") };
        format!(
            "warning: with {count}, f = 0: the cluster tolerates no failure (when one replica stops, the \
             cluster stops); 3 replicas tolerate one"
        )
    })
}

/// Builds the cluster file of `cluster up` (also used by `ordo bench`).
pub fn cluster_file(args: &UpArgs, data_dir: PathBuf) -> Result<ClusterFile, String> {
    with_protocol(&args.protocol, BuildFile(args, data_dir)).map_err(|e| e.to_string())?
}

/// Starts `ordo node` for `name`; the child dies with this process.
pub fn spawn_node(config: &Path, name: &str, log: &Path) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let log = std::fs::File::create(log)?;
    let mut command = std::process::Command::new(exe);
    command.args(["node", "--config"]).arg(config).args(["--id", name]);
    command.stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: only async-signal-safe calls (prctl, setpgid) between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // Its own process group: the terminal's Ctrl-C reaches only `cluster up`, which then
            // stops the children in order.
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    command.spawn()
}

/// The last `lines` non-empty lines of a node's log, to say why it stopped without sending the
/// operator to the file.
fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let tail = &tail[tail.len().saturating_sub(lines)..];
    if tail.is_empty() {
        return format!("its log {} is empty", log.display());
    }
    // The commonest reason, with its remedy: another process holds one of the cluster's ports.
    let hint = if tail.iter().any(|line| line.contains("Address already in use")) {
        "\nanother process holds that port: choose free ports with --port-base and --redis-port"
    } else {
        ""
    };
    format!("the end of its log {}:\n  {}{hint}", log.display(), tail.join("\n  "))
}

/// The cluster key's file in a local cluster's data directory.
pub const KEY_FILE_NAME: &str = "cluster.key";

/// Gives a cluster file without a key the key in its data directory's [`KEY_FILE_NAME`]:
/// the one already there (a restarted cluster keeps its key), or a new random one, readable
/// by its owner only. The path is made absolute, as an in-process gateway reads it too.
fn give_key(file: &mut ClusterFile) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    if file.key_file.is_some() {
        return Ok(());
    }
    let dir = std::fs::canonicalize(&file.data_dir).map_err(|e| format!("{}: {e}", file.data_dir.display()))?;
    let path = dir.join(KEY_FILE_NAME);
    let fail = |e: std::io::Error| format!("cluster key {}: {e}", path.display());
    if !path.exists() {
        let mut secret = [0u8; 32];
        std::fs::File::open("/dev/urandom").and_then(|mut random| random.read_exact(&mut secret)).map_err(fail)?;
        let hex: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
        let mut key = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(fail)?;
        key.write_all(format!("{hex}\n").as_bytes()).and_then(|()| key.sync_all()).map_err(fail)?;
    }
    file.key_file = Some(path);
    Ok(())
}

/// A running local cluster.
pub struct LocalCluster {
    /// The cluster file.
    pub file: ClusterFile,
    /// Where it was written.
    pub path: PathBuf,
    /// Node name and process of each node.
    pub children: Vec<(String, Child)>,
}

impl LocalCluster {
    /// Writes the file and starts every node, replicas first and the gateway last. When
    /// `keyed`, a file without a key gets one ([`give_key`]), so every datagram is authenticated.
    pub fn start(mut file: ClusterFile, keyed: bool) -> Result<Self, String> {
        std::fs::create_dir_all(&file.data_dir).map_err(|e| format!("{}: {e}", file.data_dir.display()))?;
        if keyed {
            give_key(&mut file)?;
        }
        let path = file.data_dir.join("cluster.toml");
        std::fs::write(&path, file.to_toml()).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut cluster = LocalCluster { file, path, children: Vec::new() };
        for entry in cluster.file.nodes.clone() {
            if entry.role == FileRole::Gateway && entry.redis.is_none() {
                continue; // a gateway without a Redis port is hosted in-process (ordo bench)
            }
            if entry.host.is_some() {
                continue; // runs inside its host's process
            }
            let log = cluster.file.data_dir.join(format!("{}.log.txt", entry.name));
            let child =
                spawn_node(&cluster.path, &entry.name, &log).map_err(|e| format!("start {}: {e}", entry.name))?;
            cluster.children.push((entry.name.clone(), child));
        }
        Ok(cluster)
    }

    /// Waits until every child's metrics endpoint answers (or `timeout`). Every child is
    /// watched all along, so a node that exits while another is still starting is reported
    /// with why (the end of its log), not only the first one in file order.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut waiting: Vec<usize> = (0..self.children.len()).collect();
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for index in waiting {
                let (name, child) = &mut self.children[index];
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.file.data_dir.join(format!("{name}.log.txt"));
                    return Err(format!("{name} exited with {status}; {}", log_tail(&log, 5)));
                }
                let entry = &self.file.nodes[self.file.entry(name).map_err(|e| e.to_string())?];
                let Some(address) = entry.metrics else { continue };
                if ordo_net::metrics::fetch(address, "/status", Duration::from_millis(200)).is_none() {
                    still.push(index);
                }
            }
            waiting = still;
            if let Some(&index) = waiting.first()
                && Instant::now() > deadline
            {
                return Err(format!("{} did not start in {} s", self.children[index].0, timeout.as_secs()));
            }
            if !waiting.is_empty() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// Stops every child: SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self) {
        for (_, child) in &self.children {
            // SAFETY: signalling a child we started, by its pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for (_, child) in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Commits counted by the nodes one process hosts, fast and slow: its own nodes (a replica; a
/// gateway's colocated proxies) and, for a gateway, the sum over its client nodes. Each
/// protocol counts a commit once, where it is decided: at the leader or coordinator replica
/// (Multi-Paxos, Tempo), at a proxy (Nezha) or at the client (NOPaxos); so the cluster's
/// commits are the sum over every process, and a replica that only executes counts none.
fn commits_counted(status: &serde_json::Value) -> (u64, u64) {
    let count = |stats: &serde_json::Value| {
        (stats["fast_path_commits"].as_u64().unwrap_or(0), stats["slow_path_commits"].as_u64().unwrap_or(0))
    };
    let hosted = status["nodes"].as_array().into_iter().flatten().filter(|node| node["role"] != "client");
    let (mut fast, mut slow) = count(&status["client_stats"]);
    for node in hosted {
        let (node_fast, node_slow) = count(&node["stats"]);
        fast += node_fast;
        slow += node_slow;
    }
    (fast, slow)
}

/// How commits read in a status line: fast and slow where the protocol has a fast path, a
/// plain count otherwise (its commits are all "slow", which would say nothing).
fn commits_text(fast: u64, slow: u64, fast_path: bool) -> String {
    if fast_path {
        let share = (fast * 100).checked_div(fast + slow).map_or(String::new(), |percent| format!(", {percent}% fast"));
        format!("commits fast/slow {fast}/{slow}{share}")
    } else {
        format!("commits {}", fast + slow)
    }
}

/// The nodes' states: a header line with the cluster's commits, then one line per process
/// from its `/status`.
pub fn status_lines(file: &ClusterFile) -> Vec<String> {
    let fast_path = protocol_info(&file.protocol).is_some_and(|info| info.fast_path);
    let (mut fast, mut slow) = (0, 0);
    let mut lines = Vec::new();
    for entry in &file.nodes {
        let Some(address) = entry.metrics else { continue };
        let line = match ordo_net::metrics::fetch(address, "/status", Duration::from_millis(500))
            .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
        {
            None => "unreachable".to_string(),
            Some(status) => {
                let (process_fast, process_slow) = commits_counted(&status);
                fast += process_fast;
                slow += process_slow;
                describe(&status, fast_path)
            }
        };
        lines.push(format!("  {:<10} {:<9} {line}", entry.name, format!("{:?}", entry.role).to_lowercase()));
    }
    lines.insert(0, format!("-- nodes (cluster: {})", commits_text(fast, slow, fast_path)));
    lines
}

/// One process's status line. Commits appear on the processes that count them (see
/// [`commits_counted`]), so `executed 2` on a replica beside no commits is not a contradiction:
/// that replica executes what another node decided.
fn describe(status: &serde_json::Value, fast_path: bool) -> String {
    let transport = &status["transport"];
    let (fast, slow) = commits_counted(status);
    let commits = if fast + slow > 0 { format!(" | {}", commits_text(fast, slow, fast_path)) } else { String::new() };
    if status["role"] == "gateway" {
        let latency = &status["latency_us"];
        return format!(
            "ops {} (timed out {}, abandoned {}), busy clients {}, queued {}, p50 {}us p99 {}us{commits}",
            transport["operations_completed"],
            transport["operations_timed_out"],
            transport["operations_abandoned"],
            transport["clients_busy"],
            transport["requests_queued"],
            latency[0][1],
            latency[2][1]
        );
    }
    let node = &status["nodes"][0];
    format!(
        "{} | executed {}{commits} | msgs in/out {}/{}",
        node["status"].as_str().unwrap_or("?"),
        node["stats"]["executed"],
        transport["messages_received"],
        transport["messages_sent"]
    )
}

/// The files in `data_dir` that an earlier cluster left and that the nodes of a new one would
/// boot from: its cluster file and its nodes' durable files. Sorted.
fn earlier_cluster_files(data_dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(format!("{}: {error}", data_dir.display())),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", data_dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "cluster.toml" || ordo_net::storage::is_durable_file_name(&name) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Makes the data directory of `file` ready and returns the cluster file to start. An empty or
/// missing directory gets the new cluster `file`; `wipe` first deletes an earlier cluster's files
/// (and only those). A directory that holds an earlier cluster is restarted from its own
/// `cluster.toml`, so that its nodes, ports and options stay as they were, when the protocol
/// keeps its state on disk and the arguments name the same protocol and replica count; it is
/// refused otherwise, since its nodes would boot from those files as restarted nodes (a
/// crash-stop protocol's replicas would all retire, a diskless one's would wait for live peers
/// that never come, and the cluster would never answer).
fn prepare_data_dir(file: ClusterFile, wipe: bool) -> Result<ClusterFile, String> {
    let data_dir = file.data_dir.clone();
    let earlier = earlier_cluster_files(&data_dir)?;
    if !earlier.is_empty() && wipe {
        for path in &earlier {
            std::fs::remove_file(path).map_err(|e| format!("--wipe-data-dir: {}: {e}", path.display()))?;
        }
        println!("deleted {} files of an earlier cluster from {}", earlier.len(), data_dir.display());
    }
    if earlier.is_empty() || wipe {
        println!("new cluster in {}", data_dir.display());
        return Ok(file);
    }
    let names: Vec<String> =
        earlier.iter().filter_map(|f| f.file_name()).map(|n| n.to_string_lossy().into_owned()).collect();
    let shown = if names.len() > 4 { format!("{}, ...", names[..4].join(", ")) } else { names.join(", ") };
    let refused = |why: String| {
        format!(
            "{dir} holds the files of an earlier cluster ({count}: {shown}). {why} Add --wipe-data-dir to \
             delete them first, or choose another --data-dir. To restart one node of a running cluster instead, \
             run `ordo node --config {dir}/cluster.toml --id NAME`.",
            dir = data_dir.display(),
            count = names.len(),
        )
    };
    let existing = existing_cluster_file(&data_dir);
    let replicas = |f: &ClusterFile| f.nodes.iter().filter(|n| n.role == FileRole::Replica).count();
    if let Ok(existing) = &existing
        && (existing.protocol != file.protocol || replicas(existing) != replicas(&file))
    {
        return Err(refused(format!(
            "It is a {} cluster with {} replicas, and these arguments ask for {} with {}: restarting it \
             would not give that cluster.",
            existing.protocol,
            replicas(existing),
            file.protocol,
            replicas(&file)
        )));
    }
    if !keeps_state_on_disk(existing.as_ref().unwrap_or(&file)) {
        return Err(refused(format!(
            "`cluster up` cannot restart a {} cluster: {}.",
            file.protocol,
            restart_consequence(&file.protocol)
        )));
    }
    let existing = existing.map_err(|why| refused(format!("{why}.")))?;
    println!("restarting the cluster in {} from its cluster.toml and its nodes' durable files", data_dir.display());
    if let Some(note) = differences(&file, &existing) {
        println!("{note}");
    }
    Ok(existing)
}

/// The cluster file an earlier cluster left in `data_dir`, set to that directory (it may have
/// been moved since), or why it cannot be used.
fn existing_cluster_file(data_dir: &Path) -> Result<ClusterFile, String> {
    let path = data_dir.join("cluster.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("Its cluster file {} cannot be read ({e})", path.display()))?;
    let mut existing =
        ClusterFile::parse(&text).map_err(|e| format!("Its cluster file {} is not valid ({e})", path.display()))?;
    existing.data_dir = data_dir.to_path_buf();
    Ok(existing)
}

/// A note naming the lines where the cluster file these arguments would write differs from
/// the one a restart uses as written (ports, client nodes, protocol options), if any.
fn differences(wanted: &ClusterFile, existing: &ClusterFile) -> Option<String> {
    let (wanted, existing) = (wanted.to_toml(), existing.to_toml());
    let only_in = |a: &str, b: &str| -> Vec<String> {
        let lines: std::collections::BTreeSet<&str> = b.lines().collect();
        a.lines().filter(|line| !lines.contains(line)).map(|line| line.trim().to_string()).take(6).collect()
    };
    let (given, kept) = (only_in(&wanted, &existing), only_in(&existing, &wanted));
    if given.is_empty() && kept.is_empty() {
        return None;
    }
    Some(format!(
        "note: its cluster.toml differs from these arguments and is used as written (it has: {}; the arguments \
         would give: {}); add --wipe-data-dir to start a new cluster with the arguments instead",
        kept.join(", "),
        given.join(", ")
    ))
}

/// True when the nodes of `file` keep their state on disk with its options
/// (`Protocol::state_on_disk_with`): the cluster can be stopped whole and restarted.
fn keeps_state_on_disk(file: &ClusterFile) -> bool {
    struct OnDisk<'a>(&'a ClusterFile);
    impl ProtocolVisitor for OnDisk<'_> {
        type Output = bool;
        fn visit<P: Protocol>(self) -> bool {
            self.0.protocol_config::<P>().is_ok_and(|config| P::state_on_disk_with(&config))
        }
    }
    with_protocol(&file.protocol, OnDisk(file)).unwrap_or(false)
}

/// Why `cluster up` cannot restart a cluster of this protocol from its files.
fn restart_consequence(protocol: &str) -> &'static str {
    struct Consequence;
    impl ProtocolVisitor for Consequence {
        type Output = &'static str;
        fn visit<P: Protocol>(self) -> &'static str {
            match P::crash_model() {
                CrashModel::Recover if P::state_on_disk() => "its replicas would resume the earlier cluster's state",
                CrashModel::Recover => {
                    "its replicas keep no state on disk (they rebuild it from live peers), so with every one \
                     restarted at once none would serve again"
                }
                CrashModel::Stop => "this protocol is crash-stop: every restarted replica stays down for good",
            }
        }
    }
    with_protocol(protocol, Consequence).unwrap_or("")
}

/// Where `cluster up` keeps a cluster without --data-dir: a directory that survives a reboot,
/// `$XDG_DATA_HOME/ordo/clusters/PROTOCOL-PORTBASE` (`$XDG_DATA_HOME` defaults to
/// `$HOME/.local/share`). Two clusters cannot share a port base, so the name tells one local
/// cluster from another, and the same command starts the same cluster again.
fn default_data_dir(protocol: &str, port_base: u16) -> Result<PathBuf, String> {
    let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|path| path.is_absolute());
    let base = absolute("XDG_DATA_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/share")))
        .ok_or("neither XDG_DATA_HOME nor HOME is set to an absolute path: give the cluster a --data-dir")?;
    Ok(base.join("ordo").join("clusters").join(format!("{protocol}-{port_base}")))
}

/// Builds and checks everything `cluster up` needs before it starts a process: the cluster
/// file, the data directory, the replica count. An error is the user's to fix (exit 2).
fn prepare(args: &UpArgs) -> Result<ClusterFile, String> {
    let data_dir = match &args.data_dir {
        Some(data_dir) => data_dir.clone(),
        None => default_data_dir(&args.protocol, args.port_base)?,
    };
    let file = cluster_file(args, data_dir.clone())?;
    refuse_idle_replicas(args, &file)?;
    // A cluster that keeps no state on disk cannot be restarted; in the default directory, which
    // the user did not choose, a new cluster replaces it (a chosen one is refused instead). The
    // earlier cluster's own file says whether it kept its state (Nezha's durable mode is an
    // option the arguments may leave out): a durable cluster is never replaced unasked.
    let earlier = existing_cluster_file(&data_dir).ok().filter(|earlier| earlier.protocol == file.protocol);
    let on_disk = keeps_state_on_disk(earlier.as_ref().unwrap_or(&file));
    let replace = args.data_dir.is_none() && !on_disk && !args.wipe_data_dir;
    if replace && !earlier_cluster_files(&data_dir)?.is_empty() {
        println!(
            "the earlier {} cluster in {} cannot be restarted ({}): a new one replaces it",
            args.protocol,
            data_dir.display(),
            restart_consequence(&args.protocol)
        );
    }
    let file = prepare_data_dir(file, args.wipe_data_dir || replace)?;
    println!("data directory: {} (the cluster file, each node's log and durable files)", data_dir.display());
    if let Some(warning) = no_failure_tolerated(args.replicas) {
        eprintln!("{warning}");
    }
    Ok(file)
}

/// Runs `ordo cluster ...`. Exit codes (docs/runtime.md): 2 when the command or its
/// configuration is refused before anything starts; 1 when a node fails to start or exits
/// before Ctrl-C; 0 after a Ctrl-C that found every node running.
pub fn run(command: ClusterCommand) -> ExitCode {
    let ClusterCommand::Up(args) = command;
    let file = match prepare(&args) {
        Ok(file) => file,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut cluster = match LocalCluster::start(file, !args.no_key) {
        Ok(cluster) => cluster,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(1);
        }
    };
    for (name, child) in &cluster.children {
        println!("started {name} pid {}", child.id());
    }
    if let Err(error) = cluster.wait_ready(Duration::from_secs(20)) {
        eprintln!("error: {error}");
        return ExitCode::from(1);
    }
    print_connection(&cluster, &args);
    let failed = watch(&mut cluster, args.status_every);
    println!("stopping the cluster");
    cluster.stop();
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Says the cluster is up and how to reach it.
fn print_connection(cluster: &LocalCluster, args: &UpArgs) {
    let replicas = if args.replicas == 1 { "1 replica".to_string() } else { format!("{} replicas", args.replicas) };
    println!("{} cluster with {replicas} is up (cluster file {})", args.protocol, cluster.path.display());
    if let Some(redis) = cluster.file.nodes.iter().find_map(|n| n.redis) {
        println!("connect with: redis-cli -p {}    (Redis protocol on {redis})", redis.port());
    }
    for entry in &cluster.file.nodes {
        if let Some(metrics) = entry.metrics {
            println!("  {:<10} metrics http://{metrics}/metrics", entry.name);
        }
    }
    println!("Ctrl-C stops the cluster.");
}

/// Until Ctrl-C: reports a node that exits, with why (the end of its log), and prints the
/// nodes' states every `status_every_ns` (0: never). Returns true when a node exited before
/// Ctrl-C: the run then failed, whatever the cluster did afterwards.
fn watch(cluster: &mut LocalCluster, status_every_ns: u64) -> bool {
    let mut next_status = Instant::now() + Duration::from_nanos(status_every_ns);
    let mut failed = false;
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        for (name, child) in &mut cluster.children {
            if let Ok(Some(status)) = child.try_wait() {
                let log = cluster.file.data_dir.join(format!("{name}.log.txt"));
                eprintln!("error: {name} exited with {status}; {}", log_tail(&log, 5));
                failed = true;
            }
        }
        cluster.children.retain_mut(|(_, child)| matches!(child.try_wait(), Ok(None)));
        if status_every_ns > 0 && Instant::now() >= next_status {
            next_status = Instant::now() + Duration::from_nanos(status_every_ns);
            for line in status_lines(&cluster.file) {
                println!("{line}");
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up_args(protocol: &str, protocol_options: Vec<(String, toml::Value)>) -> UpArgs {
        UpArgs {
            protocol: protocol.into(),
            replicas: 3,
            clients: 4,
            redis_port: 0,
            port_base: 9000,
            data_dir: None,
            wipe_data_dir: false,
            no_key: false,
            protocol_options,
            no_fsync: true,
            status_every: 0,
            colocate: vec!["proxy".into()],
            requirepass: None,
        }
    }

    #[test]
    fn requirepass_reaches_the_cluster_file() {
        // Goal: `--requirepass` becomes the file's `requirepass`, and without it there is none.
        let mut args = up_args("multipaxos", vec![]);
        assert_eq!(cluster_file(&args, "/tmp/unused".into()).expect("file").requirepass, None);
        args.requirepass = Some("pw".into());
        let file = cluster_file(&args, "/tmp/unused".into()).expect("file");
        assert_eq!(file.requirepass, Some(ordo_net::config::Password("pw".into())));
    }

    #[test]
    fn real_clusters_get_the_protocols_runtime_defaults_unless_set() {
        // Goal: every protocol's runtime defaults are options its Config accepts (a misspelt
        // name would fail the build of the cluster file) and reach the cluster file; the
        // user's --set wins over them.
        for info in ordo_protocols::protocols().iter().filter(|info| !info.canary) {
            let file = cluster_file(&up_args(info.name, vec![]), "/tmp/unused".into());
            assert!(file.is_ok(), "{}: {:?}", info.name, file.err());
        }
        let timeout = |file: ClusterFile| file.protocol_options.get("view_change_timeout_ns").cloned();
        let file = cluster_file(&up_args("nezha", vec![]), "/tmp/unused".into()).unwrap();
        assert_eq!(timeout(file), Some(toml::Value::Integer(1_000_000_000)), "the runtime default");
        let set = vec![("view_change_timeout_ns".to_string(), toml::Value::Integer(20_000_000))];
        let file = cluster_file(&up_args("nezha", set), "/tmp/unused".into()).unwrap();
        assert_eq!(timeout(file), Some(toml::Value::Integer(20_000_000)), "--set wins");
    }

    #[test]
    fn status_lines_count_commits_where_the_protocol_counts_them() {
        // Goal: the status block once read `commits fast/slow 0/0` beside `executed 2`: the
        // commits of Nezha and NOPaxos are counted by the gateway's proxies and clients, and a
        // protocol without a fast path has no fast/slow split. Method: /status bodies as the
        // runtime writes them; a replica that only executes shows no commits, a gateway shows
        // its proxies' and client nodes' commits (its first client node, listed among its
        // nodes, counted once), a protocol without a fast path a plain count.
        let stats = |fast: u64, slow: u64| serde_json::json!({"fast_path_commits": fast, "slow_path_commits": slow, "executed": 2});
        let transport = serde_json::json!({"messages_received": 5, "messages_sent": 6, "operations_completed": 3});
        let follower = serde_json::json!({
            "role": "replica", "transport": transport, "client_stats": stats(0, 0),
            "nodes": [{"role": "replica", "status": "follower", "stats": stats(0, 0)}],
        });
        assert_eq!(commits_counted(&follower), (0, 0));
        assert_eq!(describe(&follower, true), "follower | executed 2 | msgs in/out 5/6");
        let gateway = serde_json::json!({
            "role": "gateway", "transport": transport, "latency_us": [[0.5, 10], [0.9, 20], [0.99, 30]],
            "client_stats": stats(1, 0),
            "nodes": [
                {"role": "proxy", "status": "", "stats": stats(2, 1)},
                {"role": "client", "status": "", "stats": stats(1, 0)},
            ],
        });
        assert_eq!(commits_counted(&gateway), (3, 1), "the first client node is not counted twice");
        assert!(
            describe(&gateway, true).ends_with(" | commits fast/slow 3/1, 75% fast"),
            "{}",
            describe(&gateway, true)
        );
        let leader = serde_json::json!({
            "role": "replica", "transport": transport, "client_stats": stats(0, 0),
            "nodes": [{"role": "replica", "status": "leader", "stats": stats(0, 7)}],
        });
        assert_eq!(describe(&leader, false), "leader | executed 2 | commits 7 | msgs in/out 5/6");
        assert_eq!(commits_text(0, 0, true), "commits fast/slow 0/0");
    }

    #[test]
    fn one_or_two_replicas_are_warned_that_f_is_zero() {
        // Goal: a replica count that tolerates no failure says so, in those words.
        for replicas in [1, 2] {
            let warning = no_failure_tolerated(replicas).expect("a warning");
            assert!(warning.contains("f = 0") && warning.contains("no failure"), "{warning}");
        }
        assert_eq!(no_failure_tolerated(3), None);
    }

    #[test]
    fn only_a_protocol_without_replication_is_refused_for_idle_replicas() {
        // Goal: exactly the protocol that runs one server is refused with 3 replicas, never a
        // replicated one. Method: every registered protocol with 3 replicas and its defaults.
        for info in ordo_protocols::protocols().iter().filter(|info| !info.canary) {
            let args = up_args(info.name, vec![]);
            let file = cluster_file(&args, "/tmp/unused".into()).unwrap();
            let refused = refuse_idle_replicas(&args, &file);
            assert_eq!(refused.is_err(), info.name == "unreplicated", "{}: {refused:?}", info.name);
        }
    }

    #[test]
    fn wipe_deletes_only_an_earlier_clusters_files() {
        // Goal: --wipe-data-dir deletes exactly what a new cluster's nodes would boot from (the
        // cluster file and the nodes' durable files), never a user's other files; an empty or
        // missing directory is ready as it is. Method: a directory with `cluster.toml`,
        // `r0-n0.log`, `gateway-n5.log`, a node's text log and a user's `up.log`.
        let dir = std::env::temp_dir().join(format!("ordo-wipe-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tempo = cluster_file(&up_args("tempo", vec![]), dir.clone()).unwrap();
        assert_eq!(prepare_data_dir(tempo.clone(), false), Ok(tempo.clone()), "a missing directory is ready");
        std::fs::create_dir_all(&dir).unwrap();
        let names = ["cluster.toml", "r0-n0.log", "gateway-n5.log", "r0.log.txt", "up.log"];
        for name in names {
            std::fs::write(dir.join(name), "earlier").unwrap();
        }
        let refused = prepare_data_dir(tempo.clone(), false).expect_err("refused without --wipe-data-dir");
        assert!(refused.contains("crash-stop"), "says what would happen for this protocol: {refused}");
        let nezha = cluster_file(&up_args("nezha", vec![]), dir.clone()).unwrap();
        assert!(prepare_data_dir(nezha, false).expect_err("refused").contains("no state on disk"));
        assert_eq!(prepare_data_dir(tempo.clone(), true), Ok(tempo.clone()));
        let left: Vec<&str> = names.into_iter().filter(|name| dir.join(name).exists()).collect();
        assert_eq!(left, ["r0.log.txt", "up.log"], "only the earlier cluster's files are deleted");
        assert_eq!(prepare_data_dir(tempo.clone(), false), Ok(tempo), "ready once wiped");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_earlier_cluster_on_disk_is_restarted_from_its_own_file() {
        // Goal: `cluster up` over a directory that holds a cluster of a protocol that keeps its
        // state on disk restarts that cluster from its cluster.toml (same nodes and ports, a
        // note on what differs from the arguments), and refuses arguments that name another
        // protocol or replica count, saying how to start over. Method: a Multi-Paxos file with
        // port base 9000 and a durable file written, then `prepare_data_dir` with other
        // arguments.
        let dir = std::env::temp_dir().join(format!("ordo-restart-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let earlier = cluster_file(&up_args("multipaxos", vec![]), dir.clone()).unwrap();
        std::fs::write(dir.join("cluster.toml"), earlier.to_toml()).unwrap();
        std::fs::write(dir.join("r1-n0.log"), "records").unwrap();
        assert_eq!(prepare_data_dir(earlier.clone(), false), Ok(earlier.clone()), "the same arguments");
        let mut other_ports = up_args("multipaxos", vec![]);
        other_ports.port_base = 9100;
        let wanted = cluster_file(&other_ports, dir.clone()).unwrap();
        assert_eq!(differences(&earlier, &earlier), None);
        let note = differences(&wanted, &earlier).expect("the ports differ");
        assert!(note.contains("127.0.0.1:9000") && note.contains("127.0.0.1:9100"), "{note}");
        assert_eq!(prepare_data_dir(wanted, false), Ok(earlier.clone()), "the file's ports, not the arguments'");
        let mut five = up_args("multipaxos", vec![]);
        five.replicas = 5;
        let refused = prepare_data_dir(cluster_file(&five, dir.clone()).unwrap(), false).expect_err("5 replicas");
        assert!(refused.contains("with 3 replicas") && refused.contains("--wipe-data-dir"), "{refused}");
        let mencius = cluster_file(&up_args("mencius", vec![]), dir.clone()).unwrap();
        let refused = prepare_data_dir(mencius, false).expect_err("another protocol");
        assert!(refused.contains("It is a multipaxos cluster"), "names the cluster that is there: {refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_data_dir_is_named_after_protocol_and_port_base() {
        // Goal: without --data-dir a cluster lives where a reboot keeps it, under the user's
        // data directory, and the same protocol and port base find the same directory.
        let dir = default_data_dir("multipaxos", 7400).expect("HOME or XDG_DATA_HOME is set where tests run");
        assert!(dir.is_absolute() && dir.ends_with("ordo/clusters/multipaxos-7400"), "{}", dir.display());
    }
}
