//! Real-process test of durable storage at start: a replica whose file is damaged in the
//! middle refuses to start, naming the file and the byte offset, and leaves the file alone; the
//! same replica with only a torn tail (a write cut short) repairs it and runs.

mod common;

use common::Cluster;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first port of this binary's range. Test binaries run one at a time, so they may share
/// one; every range stays below 32768, where the kernel's ephemeral ports start (a port an
/// outgoing connection holds there cannot be bound).
const FIRST_PORT: u16 = 12_000;

/// The byte offsets of the records framed in `bytes` (`len u32 | xxh3 u64 | body`), up to the
/// first that does not fit.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        if at + 12 + len > bytes.len() {
            break;
        }
        offsets.push(at);
        at += 12 + len;
    }
    offsets
}

/// Starts `ordo node` for `name` of the cluster, with its stderr in `name.stderr.txt`.
fn start_node(cluster: &Cluster, name: &str) -> (std::process::Child, std::path::PathBuf) {
    let log_path = cluster.data_dir.join(format!("{name}.stderr.txt"));
    let log = std::fs::File::create(&log_path).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["node", "--config"])
        .arg(cluster.data_dir.join("cluster.toml"))
        .args(["--id", name])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("ordo node starts");
    (child, log_path)
}

#[test]
fn a_replica_with_a_corrupt_middle_record_refuses_to_start_and_a_torn_tail_is_repaired() {
    // Goal: storage never drops records silently. Method: a 3-replica Multi-Paxos cluster takes
    // some writes; a backup is killed with SIGKILL; a byte in the body of a record in the middle
    // of its file is flipped: restarted, it exits (code 2) with a message naming the file and
    // the record's offset, and the file is unchanged. Then the file gets its good bytes back
    // plus a torn tail: restarted, it says it cut the tail and serves `/status`.
    let mut cluster = Cluster::start("multipaxos", 3, 4, FIRST_PORT);
    let mut redis = cluster.redis();
    for n in 0..30 {
        let () = redis::cmd("SET").arg(format!("k{n}")).arg(n).query(&mut redis).expect("SET");
    }
    let victim = "r1";
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: SIGKILL to a node process this test's cluster started, by its pid.
    unsafe { libc::kill(cluster.pid(victim) as libc::pid_t, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(300));
    let file = std::fs::read_dir(&cluster.data_dir)
        .expect("data dir")
        .map(|entry| entry.expect("entry").path())
        .find(|path| path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{victim}-n"))))
        .expect("the victim's durable file");
    let good = std::fs::read(&file).expect("read");
    let offsets = record_offsets(&good);
    assert!(offsets.len() >= 3, "{}: only {} records", file.display(), offsets.len());
    let bad = offsets[offsets.len() / 2];
    let mut damaged = good.clone();
    damaged[bad + 12] ^= 0x20;
    std::fs::write(&file, &damaged).expect("damage");

    let (mut child, log_path) = start_node(&cluster, victim);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "a replica with a damaged file kept running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&log_path).expect("stderr");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "names the file: {stderr}");
    assert!(stderr.contains(&format!("byte offset {bad}")), "names the offset {bad}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(std::fs::read(&file).expect("read"), damaged, "the damaged file is left as it is");
    eprintln!("damaged middle record: {}", stderr.trim());

    let mut torn = good;
    torn.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&file, &torn).expect("torn tail");
    let (child, log_path) = start_node(&cluster, victim);
    cluster.restarted.push(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.status(victim).is_none() {
        assert!(Instant::now() < deadline, "the replica with a torn tail did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = std::fs::read_to_string(&log_path).expect("stderr");
    assert!(stderr.contains("cut a torn tail of 7 bytes"), "{stderr}");
    let () = redis::cmd("SET").arg("after").arg("1").query(&mut redis).expect("SET after the restart");
}
