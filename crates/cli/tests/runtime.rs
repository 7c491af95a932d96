//! Real-process tests of the runtime: every registered protocol runs as a local cluster of
//! `ordo node` processes on 127.0.0.1 (started by `ordo cluster up`), and is driven through the
//! Redis gateway with a real Redis client library.
//!
//! - `redis_clients_work_for_every_protocol`: SET/GET and the other supported commands, a
//!   garbage-sending client that is disconnected without harming a well-behaved one, and (when
//!   installed) a short redis-benchmark run without errors.
//! - `leader_crash_under_load_for_every_protocol`: writers and readers run while the busiest
//!   replica (the leader, for leader-based protocols) is killed with SIGKILL; the cluster must
//!   keep completing operations, the recorded history must be linearizable (so no acknowledged
//!   write is lost), and the killed replica, restarted, must catch up with the others (for a
//!   crash-stop protocol: stay out, executing nothing).
//!
//! Every wait is bounded; every process is stopped when a test ends, even when it fails.

use ordo_check::history::{EventKind, HistoryEvent, OpKind};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Protocols that by design do not survive the loss of a replica (they are still tested with
/// Redis clients, not with a crash). The core has no way to ask this (see docs/runtime.md).
const NOT_FAULT_TOLERANT: &[&str] = &["unreplicated"];

static NEXT_PORTS: AtomicU16 = AtomicU16::new(0);

fn ports() -> (u16, u16) {
    // Spread by process id so that concurrent test binaries do not collide.
    let slot = NEXT_PORTS.fetch_add(1, Ordering::SeqCst);
    let base = 20_000 + (std::process::id() % 50) as u16 * 200 + slot * 20;
    (base, base + 15)
}

/// True when the protocol's crashed replicas come back (`CrashModel::Recover`); for the others
/// (`Stop`, as their papers assume) a restarted replica is not expected to catch up.
fn replicas_recover(protocol: &str) -> bool {
    struct Recovers;
    impl ordo_protocols::ProtocolVisitor for Recovers {
        type Output = bool;
        fn visit<P: ordo_core::Protocol>(self) -> bool {
            P::crash_model() == ordo_core::CrashModel::Recover
        }
    }
    ordo_protocols::with_protocol(protocol, Recovers).expect("registered")
}

fn protocols() -> Vec<String> {
    ordo_protocols::protocols().into_iter().filter(|p| !p.canary).map(|p| p.name.to_string()).collect()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos() as u64
}

/// A running `ordo cluster up` and any node restarted by hand; stopped on drop.
struct Cluster {
    up: Child,
    pids: Vec<(String, u32)>,
    redis_port: u16,
    metrics: Vec<(String, SocketAddr)>,
    data_dir: PathBuf,
    restarted: Vec<Child>,
}

impl Cluster {
    fn start(protocol: &str, replicas: usize, clients: usize) -> Cluster {
        let (port_base, redis_port) = ports();
        let data_dir = std::env::temp_dir().join(format!("ordo-runtime-test-{}-{port_base}", std::process::id()));
        let _ = std::fs::remove_dir_all(&data_dir);
        let mut up = Command::new(env!("CARGO_BIN_EXE_ordo"))
            .args(["cluster", "up", "--protocol", protocol, "--status-every", "0"])
            .args(["--replicas", &replicas.to_string(), "--clients", &clients.to_string()])
            .args(["--port-base", &port_base.to_string(), "--redis-port", &redis_port.to_string()])
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
        let mut pids = Vec::new();
        let mut metrics = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = receiver.recv_timeout(left).unwrap_or_else(|_| {
                let _ = up.kill();
                panic!("cluster up for {protocol} did not get ready in time (see {})", data_dir.display())
            });
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() == Some(&"started") && words.len() == 4 {
                pids.push((words[1].to_string(), words[3].parse().expect("pid")));
            }
            if words.len() == 3 && words[1] == "metrics" {
                let address = words[2].trim_start_matches("http://").trim_end_matches("/metrics");
                metrics.push((words[0].to_string(), address.parse().expect("metrics address")));
            }
            if line.starts_with("Ctrl-C") {
                break;
            }
        }
        Cluster { up, pids, redis_port, metrics, data_dir, restarted: Vec::new() }
    }

    fn redis(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.redis_port)).expect("url");
        let connection = client.get_connection_with_timeout(Duration::from_secs(5)).expect("connects");
        connection.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
        connection
    }

    fn status(&self, name: &str) -> Option<serde_json::Value> {
        let address = self.metrics.iter().find(|(n, _)| n == name)?.1;
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        stream.write_all(b"GET /status HTTP/1.1\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        serde_json::from_str(response.split_once("\r\n\r\n")?.1).ok()
    }

    fn replicas(&self) -> Vec<String> {
        self.pids.iter().map(|(n, _)| n.clone()).filter(|n| n.starts_with('r')).collect()
    }

    fn pid(&self, name: &str) -> u32 {
        self.pids.iter().find(|(n, _)| n == name).expect("known node").1
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.restarted {
            let _ = child.kill();
            let _ = child.wait();
        }
        // SAFETY: signalling the `cluster up` process this test started, by its pid.
        unsafe { libc::kill(self.up.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.up.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.up.kill();
        let _ = self.up.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

#[test]
fn redis_clients_work_for_every_protocol() {
    // Goal: a real Redis client library can use every protocol's cluster through the gateway,
    // and a client that sends garbage is cut off without harming others.
    for protocol in protocols() {
        let started = Instant::now();
        let cluster = Cluster::start(&protocol, 3, 8);
        let mut redis = cluster.redis();
        let pong: String = redis::cmd("PING").query(&mut redis).expect("PING");
        assert_eq!(pong, "PONG");
        let () = redis::cmd("SET").arg("greeting").arg("hello").query(&mut redis).expect("SET");
        let value: Option<String> = redis::cmd("GET").arg("greeting").query(&mut redis).expect("GET");
        assert_eq!(value.as_deref(), Some("hello"), "{protocol}: GET after SET");
        let missing: Option<String> = redis::cmd("GET").arg("absent").query(&mut redis).expect("GET absent");
        assert_eq!(missing, None);
        let n: i64 = redis::cmd("INCRBY").arg("counter").arg(5).query(&mut redis).expect("INCRBY");
        assert_eq!(n, 5);
        let n: i64 = redis::cmd("DECR").arg("counter").query(&mut redis).expect("DECR");
        assert_eq!(n, 4);
        let () = redis::cmd("MSET").arg("a").arg("1").arg("b").arg("2").query(&mut redis).expect("MSET");
        let values: Vec<Option<String>> =
            redis::cmd("MGET").arg("a").arg("x").arg("b").query(&mut redis).expect("MGET");
        assert_eq!(values, vec![Some("1".into()), None, Some("2".into())]);
        let added: i64 = redis::cmd("HSET").arg("h").arg("f").arg("v").query(&mut redis).expect("HSET");
        assert_eq!(added, 1);
        let all: Vec<String> = redis::cmd("HGETALL").arg("h").query(&mut redis).expect("HGETALL");
        assert_eq!(all, vec!["f".to_string(), "v".to_string()]);
        let len: i64 = redis::cmd("APPEND").arg("greeting").arg("!").query(&mut redis).expect("APPEND");
        assert_eq!(len, 6);
        let error = redis::cmd("NOSUCH").query::<String>(&mut redis).expect_err("unknown command");
        assert!(error.to_string().contains("unknown command"), "{error}");
        let error = redis::cmd("SET").arg("k").arg("v").arg("EX").arg(10).query::<String>(&mut redis).expect_err("EX");
        assert!(error.to_string().contains("expiry"), "{error}");

        // Garbage on another connection: an error reply, then the connection is closed.
        let mut raw = TcpStream::connect(("127.0.0.1", cluster.redis_port)).expect("connect");
        raw.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        raw.write_all(b"*2\r\n$3\r\nGET\r\n:oops\r\n").expect("write");
        let mut reply = Vec::new();
        raw.read_to_end(&mut reply).expect("closed by the gateway");
        assert!(reply.starts_with(b"-ERR Protocol error"), "{}", String::from_utf8_lossy(&reply));
        let value: Option<String> = redis::cmd("GET").arg("greeting").query(&mut redis).expect("still served");
        assert_eq!(value.as_deref(), Some("hello!"));

        if let Some(output) = redis_benchmark(cluster.redis_port) {
            assert!(!output.to_lowercase().contains("error"), "{protocol}: redis-benchmark saw errors:\n{output}");
            assert!(output.contains("requests per second"), "{protocol}: {output}");
        }
        eprintln!("{protocol}: Redis client checks passed in {:.1}s", started.elapsed().as_secs_f64());
    }
}

/// A short redis-benchmark run (pipelined), when redis-benchmark is installed.
fn redis_benchmark(port: u16) -> Option<String> {
    let output = Command::new("timeout")
        .args(["60", "redis-benchmark", "-p", &port.to_string(), "-t", "set,get", "-n", "4000", "-c", "10"])
        .args(["-P", "8", "-q"])
        .output()
        .ok()?;
    if output.status.code() == Some(127) || (!output.status.success() && output.stdout.is_empty()) {
        eprintln!("redis-benchmark not available: skipped");
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr))
}

/// What the load threads share.
struct Load {
    history: Mutex<Vec<HistoryEvent>>,
    stop: AtomicBool,
    next_process: AtomicU64,
    completed: AtomicU64,
}

fn record(load: &Load, client: u64, kind: EventKind, op: OpKind, key: &str, value: Option<String>) {
    let event = HistoryEvent { client, id: None, kind, time_ns: now_ns(), op, key: key.to_string(), value };
    load.history.lock().expect("history lock").push(event);
}

/// One client: writes unique values and reads, on a few keys, until told to stop. After an
/// unknown outcome it takes a new identity and a new connection, as the history format asks.
fn worker(cluster_port: u16, worker: u64, load: Arc<Load>) {
    let keys = ["k0", "k1", "k2", "k3"];
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
        let key = keys[((worker + n) % keys.len() as u64) as usize];
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

fn commits(status: &serde_json::Value) -> u64 {
    let stats = &status["nodes"][0]["stats"];
    stats["fast_path_commits"].as_u64().unwrap_or(0) + stats["slow_path_commits"].as_u64().unwrap_or(0)
}

fn digest(status: &serde_json::Value) -> Option<u64> {
    status["nodes"][0]["digest"].as_u64()
}

/// True when every replica reports the same state digest as `victim`.
fn caught_up(cluster: &Cluster, victim: &str) -> bool {
    let mine = cluster.status(victim).and_then(|s| digest(&s));
    let digests: Vec<Option<u64>> =
        cluster.replicas().iter().map(|n| cluster.status(n).and_then(|s| digest(&s))).collect();
    mine.is_some() && digests.iter().all(|d| *d == mine)
}

#[test]
fn leader_crash_under_load_for_every_protocol() {
    // Goal: with SIGKILL of the busiest replica under load, the cluster goes on, no
    // acknowledged write is lost (the history, checked for linearizability, ends with reads of
    // every key), and the replica, restarted from its file, catches up.
    for protocol in protocols().into_iter().filter(|p| !NOT_FAULT_TOLERANT.contains(&p.as_str())) {
        let started = Instant::now();
        let mut cluster = Cluster::start(&protocol, 3, 16);
        let load = Arc::new(Load {
            history: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            next_process: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        });
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let load = load.clone();
                let port = cluster.redis_port;
                std::thread::spawn(move || worker(port, w, load))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1_500));
        let before_kill = load.completed.load(Ordering::SeqCst);
        assert!(before_kill > 0, "{protocol}: no operation completed before the crash");
        // The leader is the replica whose commit count grows now (for leaderless protocols, the
        // busiest coordinator): sample twice, 300 ms apart.
        let sample = |cluster: &Cluster| -> Vec<(String, u64)> {
            cluster.replicas().into_iter().map(|n| (n.clone(), cluster.status(&n).map_or(0, |s| commits(&s)))).collect()
        };
        let first = sample(&cluster);
        std::thread::sleep(Duration::from_millis(300));
        let second = sample(&cluster);
        // A replica whose status line calls itself `leader` is preferred (the convention of the
        // leader-based protocols' status lines).
        let says_leader = |name: &String| {
            cluster.status(name).is_some_and(|s| {
                s["nodes"][0]["status"].as_str().is_some_and(|line| line.split_whitespace().any(|w| w == "leader"))
            })
        };
        let busiest = second
            .iter()
            .zip(&first)
            .max_by_key(|((_, now), (_, before))| now.saturating_sub(*before))
            .map(|((name, _), _)| name.clone())
            .expect("replicas");
        let victim = cluster.replicas().into_iter().find(says_leader).unwrap_or(busiest);
        // SAFETY: SIGKILL to a node process this test's cluster started, by its pid.
        unsafe { libc::kill(cluster.pid(&victim) as libc::pid_t, libc::SIGKILL) };
        let killed_at = Instant::now();
        let after_kill = load.completed.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while load.completed.load(Ordering::SeqCst) < after_kill + 50 {
            assert!(Instant::now() < deadline, "{protocol}: no progress after killing {victim}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let recovered_in = killed_at.elapsed();
        std::thread::sleep(Duration::from_millis(1_000));
        // The victim restarts from its file: a protocol that recovers must bring it back, a
        // crash-stop one must keep it out (it retires) without harming the others.
        let recovers = replicas_recover(&protocol);
        let log = std::fs::File::create(cluster.data_dir.join(format!("{victim}.restart.txt"))).expect("log");
        let restarted = Command::new(env!("CARGO_BIN_EXE_ordo"))
            .args(["node", "--config"])
            .arg(cluster.data_dir.join("cluster.toml"))
            .args(["--id", &victim])
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("restart");
        cluster.restarted.push(restarted);
        let at_restart = load.completed.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1_500));
        assert!(load.completed.load(Ordering::SeqCst) > at_restart, "{protocol}: no progress after {victim} restarted");
        load.stop.store(true, Ordering::SeqCst);
        for worker in workers {
            worker.join().expect("worker");
        }
        // Final reads of every key by a fresh client: a lost acknowledged write would show here.
        let mut redis = cluster.redis();
        for key in ["k0", "k1", "k2", "k3"] {
            let process = load.next_process.fetch_add(1, Ordering::SeqCst);
            record(&load, process, EventKind::Invoke, OpKind::Read, key, None);
            let value: Option<String> = redis::cmd("GET").arg(key).query(&mut redis).expect("final read");
            record(&load, process, EventKind::Ok, OpKind::Read, key, value);
        }
        let history = std::mem::take(&mut *load.history.lock().expect("history lock"));
        let oks = history.iter().filter(|e| e.kind == EventKind::Ok).count();
        if let Err(violation) = ordo_check::linearizability::check_linearizable(&history) {
            let path = std::env::temp_dir().join(format!("ordo-{protocol}-crash-history.jsonl"));
            let lines: Vec<String> = history.iter().map(HistoryEvent::to_json_line).collect();
            let _ = std::fs::write(&path, lines.join("\n"));
            panic!("{protocol}: history not linearizable ({violation}); saved to {}", path.display());
        }
        // Catch-up: the restarted replica's state digest reaches the others'.
        let deadline = Instant::now() + Duration::from_secs(30);
        while recovers && !caught_up(&cluster, &victim) {
            assert!(Instant::now() < deadline, "{protocol}: restarted {victim} did not catch up");
            std::thread::sleep(Duration::from_millis(250));
        }
        if !recovers {
            let status = cluster.status(&victim).expect("the restarted replica answers /status");
            assert_eq!(status["nodes"][0]["stats"]["executed"], 0, "{protocol}: a retired {victim} executes nothing");
            assert!(digest(&status).is_none(), "{protocol}: a retired {victim} has no state to compare");
        }
        eprintln!(
            "{protocol}: killed {victim}; progress again after {:.0} ms; {oks} ok events linearizable; \
             restarted replica {}; {:.1}s in all",
            recovered_in.as_secs_f64() * 1e3,
            if recovers { "caught up" } else { "stayed out (crash model: stop)" },
            started.elapsed().as_secs_f64()
        );
    }
}
