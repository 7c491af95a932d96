//! Real-process tests of the authenticated transport (`wire.rs`, `wire/replay.rs`): a cluster
//! started by `ordo cluster up` has a key, and a replica drops every datagram that does not
//! carry a MAC under it, even one sent from a stopped node's own address, counts each drop by
//! reason, names the sender in its log, and carries on serving; a datagram replayed by a key
//! holder is dropped too. A node whose cluster file has a non-loopback address refuses to start
//! without a key.

mod common;

use common::Cluster;
use ordo_net::ClusterFile;
use ordo_net::wire::{ClusterKey, Header, Packer, Sealer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first port of this binary's range. Test binaries run one at a time, so they may share
/// one; every range stays below 32768, where the kernel's ephemeral ports start (a port an
/// outgoing connection holds there cannot be bound).
const FIRST_PORT: u16 = 12_000;

/// One datagram from node `from` to node `to` of `file`'s cluster carrying `payload`, sealed
/// with `key` (or only checksummed).
fn datagram(file: &ClusterFile, key: Option<ClusterKey>, from: u32, to: u32, payload: &[u8]) -> Vec<u8> {
    let mut sealer = Sealer::new(key);
    let mut packer = Packer::new(Header { cluster: file.cluster_hash(), boot: common::now_ns() }, 1_400);
    packer.push(&mut sealer, from, to, payload, 0);
    packer.finish(&mut sealer);
    packer.datagrams().next().expect("one datagram").to_vec()
}

/// The transport's drop count for `reason` in a node's `/metrics`.
fn dropped(metrics: SocketAddr, reason: &str) -> u64 {
    let Ok(mut stream) = TcpStream::connect_timeout(&metrics, Duration::from_secs(1)) else { return 0 };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let label = format!("reason=\"{reason}\"");
    text.lines()
        .filter(|line| line.starts_with("ordo_transport_dropped_total") && line.contains(&label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Waits (bounded) until `reason` has been counted at least `count` times.
fn wait_dropped(metrics: SocketAddr, reason: &str, count: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = dropped(metrics, reason);
        if seen >= count || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn forged_and_replayed_datagrams_are_dropped_and_the_cluster_carries_on() {
    // Goal: the attacks of issue 20 fail against a keyed cluster. Method: stop a replica, bind
    // its UDP port, and send the leader datagrams from it: without a MAC, with a MAC under a
    // guessed key, and (as a key holder would) one valid datagram twice. Each is dropped for
    // its reason, the log names the sender, and the cluster serves before and after.
    let cluster = Cluster::start("multipaxos", 3, 4, FIRST_PORT);
    let file = ClusterFile::load(&cluster.data_dir.join("cluster.toml")).expect("cluster file");
    let key = file.cluster_key().expect("key file").expect("cluster up gives every cluster a key");
    let mut redis = cluster.redis();
    let () = redis::cmd("SET").arg("before").arg("1").query(&mut redis).expect("SET before");
    cluster.kill("r3");
    let r3 = file.nodes[file.entry("r3").expect("r3")].addr;
    let r1 = &file.nodes[file.entry("r1").expect("r1")];
    let metrics = r1.metrics.expect("r1 has metrics");
    let deadline = Instant::now() + Duration::from_secs(5);
    let socket = loop {
        match UdpSocket::bind(r3) {
            Ok(socket) => break socket,
            Err(error) if Instant::now() > deadline => panic!("bind the stopped replica's port {r3}: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let forged_commit = b"a forged Commit of slot 1_000_000";
    let unkeyed = datagram(&file, None, 2, 0, forged_commit);
    let guessed = datagram(&file, Some(ClusterKey::derive(b"a guess at the cluster secret")), 2, 0, forged_commit);
    let genuine = datagram(&file, Some(key), 2, 0, forged_commit);
    for bytes in [&unkeyed, &guessed, &genuine, &genuine] {
        socket.send_to(bytes, r1.addr).expect("send");
    }
    assert!(wait_dropped(metrics, "unauthenticated", 1) >= 1, "a datagram without a MAC is counted");
    assert!(wait_dropped(metrics, "bad_mac", 1) >= 1, "a MAC under another key is counted");
    assert!(wait_dropped(metrics, "replayed", 1) >= 1, "a datagram sent twice is counted once as a replay");
    let log = std::fs::read_to_string(cluster.data_dir.join("r1.log.txt")).expect("r1's log");
    assert!(log.contains(&format!("dropping datagrams from {r3}: they carry no MAC")), "r1's log:\n{log}");
    assert!(log.contains(&format!("dropping datagrams from {r3}: their authentication fails")), "r1's log:\n{log}");
    let () = redis::cmd("SET").arg("after").arg("2").query(&mut redis).expect("SET after, r3 down");
    let after: Option<String> = redis::cmd("GET").arg("after").query(&mut redis).expect("GET after");
    let before: Option<String> = redis::cmd("GET").arg("before").query(&mut redis).expect("GET before");
    assert_eq!((before.as_deref(), after.as_deref()), (Some("1"), Some("2")));
}

#[test]
fn a_node_off_the_loopback_refuses_to_start_without_a_key() {
    // Goal: a cluster file with a non-loopback address is refused (exit 2) with a message that
    // says what to set, and the same file runs once ORDO_CLUSTER_KEY holds a secret.
    let dir = std::env::temp_dir().join(format!("ordo-auth-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let port = FIRST_PORT + 9_900 + (std::process::id() % 50) as u16;
    let mut file = ClusterFile::local::<ordo_protocols::multipaxos::MultiPaxos>(
        &Default::default(),
        toml::Table::new(),
        3,
        2,
        port,
        None,
        dir.clone(),
    );
    file.nodes[0].addr = SocketAddr::from(([0, 0, 0, 0], port));
    file.nodes[0].metrics = None;
    let path = dir.join("cluster.toml");
    std::fs::write(&path, file.to_toml()).expect("write");
    let node = |secret: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ordo"));
        command.args(["node", "--config"]).arg(&path).args(["--id", "r1"]);
        command.env_remove(ordo_net::config::KEY_ENV).stdout(Stdio::null()).stderr(Stdio::piped());
        if let Some(secret) = secret {
            command.env(ordo_net::config::KEY_ENV, secret);
        }
        command.spawn().expect("ordo node starts")
    };
    let refused = node(None).wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a loopback address") && stderr.contains("key_file"), "{stderr}");
    let mut keyed = node(Some("a secret of at least sixteen bytes"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(keyed.try_wait().expect("status").is_none(), "with a key the node runs");
    let _ = keyed.kill();
    let _ = keyed.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
