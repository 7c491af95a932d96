//! What the real-process tests share: a local cluster started by `ordo cluster up` and stopped
//! on drop, and a load of Redis clients that records a history for the linearizability checker.
//! Each test binary compiles this module on its own and uses part of it.
#![allow(dead_code)]

use ordo_check::history::{EventKind, HistoryEvent, OpKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The keys the load writes and reads.
pub const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];

static NEXT_PORTS: AtomicU16 = AtomicU16::new(0);

/// A node port base and a Redis port for the next cluster, from `first_port` up: each test
/// binary takes its own range, and within it the process id spreads concurrent runs.
fn ports(first_port: u16) -> (u16, u16) {
    let slot = NEXT_PORTS.fetch_add(1, Ordering::SeqCst);
    let base = first_port + (std::process::id() % 50) as u16 * 200 + slot * 20;
    (base, base + 15)
}

/// Wall-clock nanoseconds, the history's time base.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos() as u64
}

/// A running `ordo cluster up` and any node restarted by hand; stopped on drop.
pub struct Cluster {
    up: Child,
    pids: Vec<(String, u32)>,
    /// The gateway's port.
    pub redis_port: u16,
    metrics: Vec<(String, SocketAddr)>,
    /// Where the nodes keep their files and logs.
    pub data_dir: PathBuf,
    /// Nodes the test restarted; killed on drop.
    pub restarted: Vec<Child>,
    /// True once the processes were killed for a restart: the data directory stays.
    keep: bool,
}

/// True when `pid` has exited (gone, or a zombie: its sockets are closed).
fn process_gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name in parentheses, which may itself contain spaces.
    stat.rsplit_once(')').is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'))
}

impl Cluster {
    /// Starts `replicas` replicas (and the protocol's other roles) and the gateway, on ports
    /// from `first_port` up, and waits until `cluster up` says they are ready.
    pub fn start(protocol: &str, replicas: usize, clients: usize, first_port: u16) -> Cluster {
        let (port_base, redis_port) = ports(first_port);
        let data_dir = std::env::temp_dir().join(format!("ordo-runtime-test-{}-{port_base}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        let mut arguments: Vec<String> =
            ["--clients", &clients.to_string(), "--port-base", &port_base.to_string()].map(String::from).to_vec();
        arguments.extend(["--redis-port".to_string(), redis_port.to_string()]);
        Cluster::up(protocol, replicas, &arguments, data_dir, redis_port)
    }

    /// Runs `cluster up` with `arguments` over `data_dir` (which may hold a cluster to restart)
    /// and waits until it says the nodes are ready; the gateway listens on `redis_port`.
    pub fn up(protocol: &str, replicas: usize, arguments: &[String], data_dir: PathBuf, redis_port: u16) -> Cluster {
        let mut up = Command::new(env!("CARGO_BIN_EXE_ordo"))
            .args(["cluster", "up", "--protocol", protocol, "--status-every", "0"])
            .args(["--replicas", &replicas.to_string()])
            .args(arguments)
            .arg("--data-dir")
            .arg(&data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ordo cluster up starts");
        let stdout = up.stdout.take().expect("piped");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let mut cluster = Cluster {
            up,
            pids: Vec::new(),
            redis_port,
            metrics: Vec::new(),
            data_dir,
            restarted: Vec::new(),
            keep: false,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = receiver.recv_timeout(left) else {
                panic!("cluster up for {protocol} did not get ready in time (see {})", cluster.data_dir.display())
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() == Some(&"started") && words.len() == 4 {
                cluster.pids.push((words[1].to_string(), words[3].parse().expect("pid")));
            }
            if words.len() == 3 && words[1] == "metrics" {
                let address = words[2].trim_start_matches("http://").trim_end_matches("/metrics");
                cluster.metrics.push((words[0].to_string(), address.parse().expect("metrics address")));
            }
            if line.starts_with("Ctrl-C") {
                return cluster;
            }
        }
    }

    /// SIGKILL to `cluster up` and every node process, all at once, as a power cut would stop
    /// them; returns when every one is gone, keeping the data directory for a restart.
    pub fn kill_all(mut self) {
        let mut pids: Vec<u32> = self.pids.iter().map(|(_, pid)| *pid).collect();
        pids.extend(self.restarted.iter().map(Child::id));
        pids.push(self.up.id());
        for &pid in &pids {
            // SAFETY: SIGKILL to processes this cluster started, by their pids.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.up.wait();
        for child in &mut self.restarted {
            let _ = child.wait();
        }
        // The nodes are `cluster up`'s children: reaped by init, or zombies that hold no port.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pids.iter().all(|&pid| process_gone(pid)) {
            assert!(Instant::now() < deadline, "a killed node process is still running");
            std::thread::sleep(Duration::from_millis(10));
        }
        self.keep = true;
    }

    /// A Redis connection to the gateway.
    pub fn redis(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.redis_port)).expect("url");
        let connection = client.get_connection_with_timeout(Duration::from_secs(5)).expect("connects");
        connection.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
        connection
    }

    /// The node's `/status` document, if it answers.
    pub fn status(&self, name: &str) -> Option<serde_json::Value> {
        let address = self.metrics.iter().find(|(n, _)| n == name)?.1;
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        stream.write_all(b"GET /status HTTP/1.1\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        serde_json::from_str(response.split_once("\r\n\r\n")?.1).ok()
    }

    /// The replicas' names.
    pub fn replicas(&self) -> Vec<String> {
        self.pids.iter().map(|(n, _)| n.clone()).filter(|n| n.starts_with('r')).collect()
    }

    /// The process id of a node `cluster up` started.
    pub fn pid(&self, name: &str) -> u32 {
        self.pids.iter().find(|(n, _)| n == name).expect("known node").1
    }

    /// SIGKILL to the node `name` that `cluster up` started.
    pub fn kill(&self, name: &str) {
        // SAFETY: SIGKILL to a node process this test's cluster started, by its pid.
        unsafe { libc::kill(self.pid(name) as libc::pid_t, libc::SIGKILL) };
    }

    /// Starts node `name` again from the cluster file (and its own durable file, if its
    /// protocol keeps one), logging to `<name>.restart.txt`; it is killed on drop.
    pub fn restart(&mut self, name: &str) {
        let log = std::fs::File::create(self.data_dir.join(format!("{name}.restart.txt"))).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_ordo"))
            .args(["node", "--config"])
            .arg(self.data_dir.join("cluster.toml"))
            .args(["--id", name])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("restart");
        self.restarted.push(child);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.restarted {
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.keep {
            return;
        }
        // SAFETY: signalling the `cluster up` process this test started, by its pid.
        unsafe { libc::kill(self.up.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.up.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.up.kill();
        let _ = self.up.wait();
        if std::thread::panicking() {
            // A failed test's logs are what explains it: keep them.
            eprintln!("the nodes' files and logs are kept in {}", self.data_dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// Writer/reader threads through the gateway and the history they record.
pub struct Load {
    history: Mutex<Vec<HistoryEvent>>,
    stop: AtomicBool,
    next_process: AtomicU64,
    completed: AtomicU64,
}

impl Load {
    /// Starts `threads` clients on the gateway at `port`.
    pub fn start(port: u16, threads: u64) -> (Arc<Load>, Vec<JoinHandle<()>>) {
        let load = Arc::new(Load {
            history: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            next_process: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        });
        let workers = load.resume(port, threads);
        (load, workers)
    }

    /// Starts `threads` more clients on the gateway at `port`, recording into the same history
    /// (after [`Load::stop`], for a cluster started again).
    pub fn resume(self: &Arc<Self>, port: u16, threads: u64) -> Vec<JoinHandle<()>> {
        self.stop.store(false, Ordering::SeqCst);
        (0..threads)
            .map(|w| {
                let load = self.clone();
                std::thread::spawn(move || worker(port, w, load))
            })
            .collect()
    }

    /// Acknowledged writes in the history so far.
    pub fn writes_acknowledged(&self) -> usize {
        self.writes(EventKind::Ok)
    }

    /// Writes in the history so far whose outcome is unknown (`info`: no reply, or a timeout).
    pub fn writes_indeterminate(&self) -> usize {
        self.writes(EventKind::Info)
    }

    fn writes(&self, kind: EventKind) -> usize {
        let history = self.history.lock().expect("history lock");
        history.iter().filter(|e| e.kind == kind && e.op == OpKind::Write).count()
    }

    /// Reads every key once with a fresh client, recorded, retrying a read that fails until
    /// `deadline` (a cluster that just started may not serve yet). Panics past the deadline.
    pub fn read_every_key(&self, cluster: &Cluster, deadline: Instant) {
        for key in KEYS {
            loop {
                let process = self.next_process.fetch_add(1, Ordering::SeqCst);
                record(self, process, EventKind::Invoke, OpKind::Read, key, None);
                let read = redis::Client::open(format!("redis://127.0.0.1:{}/", cluster.redis_port))
                    .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
                    .and_then(|mut redis| redis::cmd("GET").arg(key).query::<Option<String>>(&mut redis));
                match read {
                    Ok(value) => {
                        record(self, process, EventKind::Ok, OpKind::Read, key, value);
                        break;
                    }
                    Err(error) => {
                        record(self, process, EventKind::Info, OpKind::Read, key, None);
                        assert!(Instant::now() < deadline, "no read of {key} served in time: {error}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
    }

    /// Operations completed so far.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Stops the clients and waits for them.
    pub fn stop(&self, workers: Vec<JoinHandle<()>>) {
        self.stop.store(true, Ordering::SeqCst);
        for worker in workers {
            worker.join().expect("worker");
        }
    }

    /// Reads every key once more with a fresh client (a lost acknowledged write would show),
    /// then checks the whole history for linearizability; saves it under `name` in the
    /// temporary directory and panics if it is not. Returns the number of `ok` events.
    pub fn final_reads_and_check(&self, cluster: &Cluster, name: &str) -> usize {
        let mut redis = cluster.redis();
        for key in KEYS {
            let process = self.next_process.fetch_add(1, Ordering::SeqCst);
            record(self, process, EventKind::Invoke, OpKind::Read, key, None);
            let value: Option<String> = redis::cmd("GET").arg(key).query(&mut redis).expect("final read");
            record(self, process, EventKind::Ok, OpKind::Read, key, value);
        }
        self.check(name).unwrap_or_else(|violation| panic!("{violation}"))
    }

    /// Checks the history recorded so far for linearizability (and empties it): the number of
    /// `ok` events, or the violation, with the history saved under `name` in the temporary
    /// directory.
    pub fn check(&self, name: &str) -> Result<usize, String> {
        let history = std::mem::take(&mut *self.history.lock().expect("history lock"));
        if let Err(violation) = ordo_check::linearizability::check_linearizable(&history) {
            let path = std::env::temp_dir().join(format!("ordo-{name}-history.jsonl"));
            let lines: Vec<String> = history.iter().map(HistoryEvent::to_json_line).collect();
            let _ = std::fs::write(&path, lines.join("\n"));
            return Err(format!("{name}: history not linearizable ({violation}); saved to {}", path.display()));
        }
        Ok(history.iter().filter(|e| e.kind == EventKind::Ok).count())
    }
}

fn record(load: &Load, client: u64, kind: EventKind, op: OpKind, key: &str, value: Option<String>) {
    let event = HistoryEvent {
        client,
        id: None,
        kind,
        time_ns: now_ns(),
        op,
        key: key.to_string(),
        value,
        at_ms: None,
        expires_ms: None,
    };
    load.history.lock().expect("history lock").push(event);
}

/// One client: writes unique values and reads, on a few keys, until told to stop. After an
/// unknown outcome it takes a new identity and a new connection, as the history format asks.
fn worker(cluster_port: u16, worker: u64, load: Arc<Load>) {
    let mut process = load.next_process.fetch_add(1, Ordering::SeqCst);
    let mut connection = None;
    let mut n = 0u64;
    while !load.stop.load(Ordering::SeqCst) {
        let connection_now = match connection.as_mut() {
            Some(connection) => connection,
            None => {
                let client = redis::Client::open(format!("redis://127.0.0.1:{cluster_port}/")).expect("url");
                match client.get_connection_with_timeout(Duration::from_secs(2)) {
                    Ok(c) => {
                        c.set_read_timeout(Some(Duration::from_secs(12))).expect("timeout");
                        connection.insert(c)
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                }
            }
        };
        n += 1;
        let key = KEYS[((worker + n) % KEYS.len() as u64) as usize];
        if n.is_multiple_of(2) {
            let value = format!("w{worker}-{n}");
            record(&load, process, EventKind::Invoke, OpKind::Write, key, Some(value.clone()));
            match redis::cmd("SET").arg(key).arg(&value).query::<()>(connection_now) {
                Ok(()) => {
                    record(&load, process, EventKind::Ok, OpKind::Write, key, Some(value));
                    load.completed.fetch_add(1, Ordering::SeqCst);
                }
                Err(error) => {
                    let kind = if error.to_string().contains("BUSY") { EventKind::Fail } else { EventKind::Info };
                    record(&load, process, kind, OpKind::Write, key, Some(value));
                    if kind == EventKind::Info {
                        process = load.next_process.fetch_add(1, Ordering::SeqCst);
                        connection = None;
                    }
                }
            }
        } else {
            record(&load, process, EventKind::Invoke, OpKind::Read, key, None);
            match redis::cmd("GET").arg(key).query::<Option<String>>(connection_now) {
                Ok(value) => {
                    record(&load, process, EventKind::Ok, OpKind::Read, key, value);
                    load.completed.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => {
                    record(&load, process, EventKind::Info, OpKind::Read, key, None);
                    process = load.next_process.fetch_add(1, Ordering::SeqCst);
                    connection = None;
                }
            }
        }
    }
}
