//! Real-process test of large values: SETs and GETs of 1 MiB, 4 MiB and 16 MiB values through
//! every protocol's cluster, then a small request, which must be served normally. How fast
//! they are answered is measured by `scripts/big-values.sh` (redis-py, 20 in a row of each
//! size), not here. Messages of a
//! megabyte or more travel over the TCP path of large messages (`host/bulk.rs`); before it, a
//! 4 MiB value sent as 128 fragments to each replica overran the socket buffers, was lost at
//! every retry, and stalled the cluster. Mencius once timed out here: each tick resent its
//! unchosen megabyte proposals to every replica, and each client retry proposed them again.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};

/// The first port of this binary's range. Test binaries run one at a time, so they may share
/// one; every range stays below 32768, where the kernel's ephemeral ports start (a port an
/// outgoing connection holds there cannot be bound).
const FIRST_PORT: u16 = 12_000;

/// The tests of this binary take turns: two clusters moving 16 MiB values at once on two cores
/// take each other's CPU, and the times each prints would then say little.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn protocols() -> Vec<String> {
    let only = std::env::var("ORDO_RUNTIME_PROTOCOLS").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|list| list.split(',').any(|p| p.trim() == name));
    ordo_protocols::protocols()
        .into_iter()
        .filter(|p| !p.canary && wanted(p.name))
        .map(|p| p.name.to_string())
        .collect()
}

/// SETs and GETs `count` values of each size, checks every one, then a small SET; returns the
/// slowest SET+GET pair.
fn serve_large_values(protocol: &str) -> Duration {
    let replicas = if protocol == "unreplicated" { 1 } else { 3 };
    let cluster = Cluster::start(protocol, replicas, 4, FIRST_PORT);
    let mut redis = cluster.redis();
    let mut slowest = Duration::ZERO;
    for (size, count) in [(1usize << 20, 3), (4 << 20, 2), (16 << 20, 2)] {
        for index in 0..count {
            let key = format!("big-{size}-{index}");
            let value: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let started = Instant::now();
            let () = redis::cmd("SET").arg(&key).arg(&value).query(&mut redis).unwrap_or_else(|e| {
                panic!("{protocol}: SET of {size} bytes: {e}");
            });
            let read: Vec<u8> = redis::cmd("GET").arg(&key).query(&mut redis).expect("GET");
            slowest = slowest.max(started.elapsed());
            assert!(read == value, "{protocol}: the {size}-byte value reads back whole");
        }
    }
    let () = redis::cmd("SET").arg("small").arg("1").query(&mut redis).expect("a small SET after");
    slowest
}

#[test]
fn large_values_reach_every_protocol() {
    // Goal: values of megabytes go through every protocol and the cluster still
    // serves small requests afterwards. Timing is printed, not asserted (a shared machine).
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for protocol in protocols() {
        let slowest = serve_large_values(&protocol);
        eprintln!("{protocol}: slowest SET+GET of a large value {slowest:?}");
    }
}

/// A 16 MiB value, different for each `seed`.
fn big_value(seed: u8) -> Vec<u8> {
    (0..16usize << 20).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// The replica whose status line calls itself `leader` (the leader-based protocols'
/// convention), or the first replica for leaderless ones.
fn leader_or_first(cluster: &Cluster) -> String {
    let replicas = cluster.replicas();
    let says_leader = |name: &&String| {
        cluster.status(name).is_some_and(|s| {
            s["nodes"][0]["status"].as_str().is_some_and(|line| line.split_whitespace().any(|w| w == "leader"))
        })
    };
    replicas.iter().find(says_leader).unwrap_or(&replicas[0]).clone()
}

/// The status of every replica that answers, for a failure's message.
fn survivors(cluster: &Cluster) -> String {
    let status = |name: &String| cluster.status(name).map(|s| s["nodes"][0].to_string());
    cluster
        .replicas()
        .iter()
        .filter_map(|name| Some(format!("{name}: {}", status(name)?)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `command` until it answers, with a new connection after each error, for at most `within`.
fn until_answered<T: redis::FromRedisValue>(
    cluster: &Cluster,
    redis: &mut redis::Connection,
    within: Duration,
    command: &redis::Cmd,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    loop {
        match command.query(redis) {
            Ok(answer) => return Ok(answer),
            Err(error) if Instant::now() >= deadline => return Err(error.to_string()),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(200));
                *redis = cluster.redis();
            }
        }
    }
}

#[test]
fn large_values_survive_a_leader_kill() {
    // Goal (issue 20): a state holding 16 MiB values moves through the view change, recovery or
    // leader election that follows a SIGKILL of the leader, for every protocol that tolerates a
    // crash: the new leader's messages that carry the state are tens of megabytes. Method: two
    // 16 MiB values written, the leader killed (the replica whose status says `leader`, else
    // the first), then both read back whole and a third written and read, each within a
    // minute (retrying through the gateway while the cluster elects). Timing is printed.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for protocol in protocols().into_iter().filter(|p| p != "unreplicated") {
        let cluster = Cluster::start(&protocol, 3, 4, FIRST_PORT);
        let mut redis = cluster.redis();
        for seed in 0..2 {
            let () = redis::cmd("SET").arg(format!("big-{seed}")).arg(big_value(seed)).query(&mut redis).expect("SET");
        }
        let victim = leader_or_first(&cluster);
        cluster.kill(&victim);
        let killed_at = Instant::now();
        let within = Duration::from_secs(60);
        for seed in 0..2 {
            let read: Vec<u8> =
                until_answered(&cluster, &mut redis, within, redis::cmd("GET").arg(format!("big-{seed}")))
                    .unwrap_or_else(|e| {
                        panic!("{protocol}: GET of a 16 MiB value after killing {victim}: {e}\n{}", survivors(&cluster))
                    });
            assert!(read == big_value(seed), "{protocol}: the value written before the kill reads back whole");
        }
        let read_again = killed_at.elapsed();
        let () = until_answered(&cluster, &mut redis, within, redis::cmd("SET").arg("big-2").arg(big_value(2)))
            .unwrap_or_else(|e| panic!("{protocol}: SET of a 16 MiB value after killing {victim}: {e}"));
        let read: Vec<u8> = redis::cmd("GET").arg("big-2").query(&mut redis).expect("GET of the new value");
        assert!(read == big_value(2), "{protocol}: the value written after the kill reads back whole");
        eprintln!(
            "{protocol}: killed {victim}; both 16 MiB values read back {:.0} ms after the kill, a new one written by {:.0} ms",
            read_again.as_secs_f64() * 1e3,
            killed_at.elapsed().as_secs_f64() * 1e3
        );
    }
}
