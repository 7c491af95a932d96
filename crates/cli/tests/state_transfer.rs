//! Real-process test of a large state moving between replicas (issue 20): a 200 MB state
//! (200,000 values of 1 KiB) is written while one replica is down; the replica is restarted and
//! must receive the state from its peers (Multi-Paxos has truncated its log past the replica's
//! place, Nezha keeps no state on disk), reach the others' state digest, and then serve: the
//! leader is killed, so the restarted replica is one of the two left, and every sampled key must
//! read back its value. A state this size travels over the large-message path (`host/bulk.rs`)
//! as one message; before it, anything over 33.5 MB was dropped as `message_too_large` and the
//! replica asked again forever.
//!
//! `ORDO_RUNTIME_PROTOCOLS=nezha` restricts the test to the protocols named.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};

/// The first port of this binary's range (test binaries run one at a time and share it).
const FIRST_PORT: u16 = 12_000;
/// Keys written while the replica is down.
const KEYS: usize = 200_000;
/// Bytes per value: `KEYS * VALUE_BYTES` is the state's size.
const VALUE_BYTES: usize = 1024;
/// Client connections that write the state, each pipelining `PIPELINE` SETs.
const WRITERS: usize = 4;
const PIPELINE: usize = 64;
/// From the restart to the restarted replica's digest equal to the others'.
const CATCH_UP_MAX: Duration = Duration::from_secs(180);
/// From the leader's kill to a first read answered by the two replicas left.
const SERVE_AGAIN_MAX: Duration = Duration::from_secs(60);
/// Every `SAMPLE_EVERY`th key is read back after the leader is killed.
const SAMPLE_EVERY: usize = 97;

/// The protocols whose restarted replicas receive state from their peers (the others under test
/// elsewhere), or those of them named in `ORDO_RUNTIME_PROTOCOLS`.
fn protocols() -> Vec<&'static str> {
    let only = std::env::var("ORDO_RUNTIME_PROTOCOLS").ok();
    ["multipaxos", "nezha"]
        .into_iter()
        .filter(|name| only.as_deref().is_none_or(|list| list.split(',').any(|p| p.trim() == *name)))
        .collect()
}

fn key(index: usize) -> String {
    format!("state:{index:07}")
}

/// Key `index`'s value: `VALUE_BYTES` bytes that differ from every other key's.
fn value(index: usize) -> Vec<u8> {
    let stamp = format!("{index:07}|");
    stamp.bytes().cycle().take(VALUE_BYTES).collect()
}

/// A replica's counter `event` (from `/status`), 0 when absent.
fn event_count(cluster: &Cluster, node: &str, event: &str) -> u64 {
    cluster.status(node).and_then(|s| s["nodes"][0]["stats"]["events"][event].as_u64()).unwrap_or(0)
}

fn digest(cluster: &Cluster, node: &str) -> Option<u64> {
    cluster.status(node).and_then(|s| s["nodes"][0]["digest"].as_u64())
}

/// The replica whose status line calls itself `leader`.
fn leader(cluster: &Cluster) -> Option<String> {
    cluster.replicas().into_iter().find(|name| {
        cluster.status(name).is_some_and(|s| {
            s["nodes"][0]["status"].as_str().is_some_and(|line| line.split_whitespace().any(|w| w == "leader"))
        })
    })
}

/// Prints what the replicas left say of themselves (status line and counters), to explain a
/// failover that did not finish.
fn report_survivors(cluster: &Cluster, killed: &str) {
    for name in cluster.replicas().into_iter().filter(|n| n != killed) {
        match cluster.status(&name) {
            Some(status) => {
                eprintln!("{name}: {} {}", status["nodes"][0]["status"], status["nodes"][0]["stats"]["events"])
            }
            None => eprintln!("{name}: /status did not answer"),
        }
    }
}

/// Writes every key from `WRITERS` connections, each key once, in pipelines.
fn write_state(cluster: &Cluster) {
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let mut redis = cluster.redis();
            std::thread::spawn(move || {
                let mine: Vec<usize> = (writer..KEYS).step_by(WRITERS).collect();
                for batch in mine.chunks(PIPELINE) {
                    let mut pipe = redis::pipe();
                    for &index in batch {
                        pipe.cmd("SET").arg(key(index)).arg(value(index)).ignore();
                    }
                    let () = pipe.query(&mut redis).unwrap_or_else(|e| panic!("SETs from writer {writer}: {e}"));
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer finished");
    }
}

#[test]
fn a_200_mb_state_reaches_a_restarted_replica_which_then_serves() {
    for protocol in protocols() {
        let started = Instant::now();
        let mut cluster = Cluster::start(protocol, 3, 8, FIRST_PORT);
        let mut redis = cluster.redis();
        let () = redis::cmd("SET").arg("warm").arg("up").query(&mut redis).expect("a first SET");
        let leader = leader(&cluster).unwrap_or_else(|| panic!("{protocol}: a replica says it leads"));
        let victim = cluster.replicas().into_iter().find(|n| *n != leader).expect("a follower");
        cluster.kill(&victim);

        let writing = Instant::now();
        write_state(&cluster);
        let written_in = writing.elapsed();

        let transfers_before = event_count(&cluster, &leader, "state_transfer");
        cluster.restart(&victim);
        let restarted = Instant::now();
        let deadline = restarted + CATCH_UP_MAX;
        loop {
            let mine = digest(&cluster, &victim);
            if mine.is_some() && mine == digest(&cluster, &leader) {
                break;
            }
            assert!(Instant::now() < deadline, "{protocol}: restarted {victim} did not reach the leader's state");
            std::thread::sleep(Duration::from_millis(250));
        }
        let caught_up_in = restarted.elapsed();
        let transfers = (event_count(&cluster, &victim, "state_transfer")
            + event_count(&cluster, &leader, "state_transfer"))
        .saturating_sub(transfers_before);
        assert!(transfers > 0, "{protocol}: {victim} caught up without a state transfer (nothing was tested)");

        // The restarted replica is now needed: with the leader gone, it is one of the two left.
        cluster.kill(&leader);
        let serving = Instant::now();
        let mut redis = cluster.redis();
        let first: Vec<u8> = loop {
            // The gateway answers TIMEOUT (outcome unknown) while the two left change views.
            match redis::cmd("GET").arg(key(0)).query(&mut redis) {
                Ok(read) => break read,
                Err(error) if serving.elapsed() < SERVE_AGAIN_MAX => {
                    eprintln!("{protocol}: GET while failing over: {error}");
                    if error.is_io_error() {
                        redis = cluster.redis();
                    }
                }
                Err(error) => {
                    report_survivors(&cluster, &leader);
                    panic!("{protocol}: no GET answered {SERVE_AGAIN_MAX:?} after the leader's kill: {error}")
                }
            }
        };
        let served_again_in = serving.elapsed();
        assert!(first == value(0), "{protocol}: {} reads back its value", key(0));
        for index in (0..KEYS).step_by(SAMPLE_EVERY) {
            let read: Vec<u8> = redis::cmd("GET").arg(key(index)).query(&mut redis).unwrap_or_else(|e| {
                panic!("{protocol}: GET {} after the leader's kill: {e}", key(index));
            });
            assert!(read == value(index), "{protocol}: {} reads back its value", key(index));
        }
        let () = redis::cmd("SET").arg("after").arg("transfer").query(&mut redis).expect("a SET after the kill");
        eprintln!(
            "{protocol}: {KEYS} values of {VALUE_BYTES} B written in {:.1} s with {victim} down; it caught up in \
             {:.1} s ({transfers} state transfer(s)); with {leader} killed, served again in {:.1} s and {} sampled \
             keys read back in {:.1} s; {:.1} s in all",
            written_in.as_secs_f64(),
            caught_up_in.as_secs_f64(),
            served_again_in.as_secs_f64(),
            KEYS.div_ceil(SAMPLE_EVERY),
            serving.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
}
