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
    for protocol in protocols() {
        let slowest = serve_large_values(&protocol);
        eprintln!("{protocol}: slowest SET+GET of a large value {slowest:?}");
    }
}
