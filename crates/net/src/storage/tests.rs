//! The durable file: records, frames, torn tails, damage and failed writes.

use super::*;
use proptest::prelude::*;

#[test]
fn a_node_that_never_writes_leaves_no_file() {
    // Goal: a gateway's client nodes persist nothing; each used to leave an empty file (259
    // of a cluster's 265). Method: open, sync with nothing issued: no file; append and sync:
    // the file holds the record and reopens with it.
    let dir = std::env::temp_dir().join(format!("ordo-storage-lazy-{}", std::process::id()));
    let path = dir.join(durable_file_name("gw", 7));
    let (mut storage, records) = Storage::open::<u64>(&path, false).unwrap();
    assert!(records.is_empty());
    storage.sync().unwrap();
    assert!(!path.exists(), "nothing written, no file");
    storage.append(&42u64).unwrap();
    assert_eq!(storage.sync().unwrap(), 1);
    let (_, records) = Storage::open::<u64>(&path, false).unwrap();
    assert_eq!(records, vec![42]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn durable_file_names_are_recognised() {
    // Goal: `cluster up` finds an earlier cluster's durable files by name and nothing else
    // (a user's `up.log` in the same directory is not one).
    assert!(is_durable_file_name(&durable_file_name("r0", 0)));
    assert!(is_durable_file_name(&durable_file_name("gateway-1", 17)));
    for other in ["up.log", "r0-n0.log.txt", "r0-nx.log", "-n3.log", "r0-n.log", "cluster.toml"] {
        assert!(!is_durable_file_name(other), "{other}");
    }
}

#[test]
fn records_survive_reopen_and_torn_tails_are_cut() {
    // Goal: appended and replaced records come back in order; a torn last record is
    // dropped and cut from the file.
    let dir = std::env::temp_dir().join(format!("ordo-storage-{}", std::process::id()));
    let path = dir.join("node.log");
    let _ = std::fs::remove_file(&path);
    let (mut storage, records) = Storage::open::<String>(&path, true).expect("open");
    assert!(records.is_empty());
    storage.append(&"a".to_string()).unwrap();
    storage.append(&"b".to_string()).unwrap();
    assert_eq!(storage.sync().expect("sync"), 2);
    drop(storage);
    let (mut storage, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["a".to_string(), "b".to_string()]);
    storage.replace(&"snap".to_string()).expect("replace");
    storage.append(&"c".to_string()).unwrap();
    storage.sync().expect("sync");
    drop(storage);
    let mut file = OpenOptions::new().append(true).open(&path).expect("open");
    file.write_all(&[9, 0, 0, 0, 1, 2]).expect("torn write");
    drop(file);
    let (_, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["snap".to_string(), "c".to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory for one test, named after it.
fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordo-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test directory");
    dir
}

/// Writes `records` to a new file at `path` and returns each record's byte offset.
fn write_records(path: &Path, records: &[&str]) -> Vec<usize> {
    let (mut storage, _) = Storage::open::<String>(path, false).expect("open");
    for record in records {
        storage.append(&record.to_string()).expect("append");
    }
    storage.sync().expect("sync");
    let bytes = std::fs::read(path).expect("read");
    let mut offsets = vec![0];
    while let Some((_, end)) = record_at(&bytes, *offsets.last().expect("one")) {
        offsets.push(end);
    }
    offsets.pop();
    offsets
}

#[test]
fn a_bad_last_record_is_a_torn_tail_and_is_cut() {
    // Goal: a crash can leave the last record whole in length but wrong in content (its
    // pages reached the disk out of order); that is a torn tail, cut at start. Method: flip
    // a byte of the last record's body; reopen: the earlier records, the file cut before it.
    let dir = test_dir("bad-last");
    let path = dir.join("node.log");
    let offsets = write_records(&path, &["one", "two", "three"]);
    let mut bytes = std::fs::read(&path).expect("read");
    *bytes.last_mut().expect("bytes") ^= 0x55;
    std::fs::write(&path, &bytes).expect("damage");
    let (_, records) = Storage::open::<String>(&path, true).expect("a torn tail is repaired");
    assert_eq!(records, vec!["one".to_string(), "two".to_string()]);
    assert_eq!(std::fs::metadata(&path).expect("file").len(), offsets[2] as u64, "cut at the bad record");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_record_followed_by_intact_ones_refuses_with_file_and_offset() {
    // Goal: damage in the middle of a file stops the node, naming the file and offset, and
    // never cuts the later records. Method: damage the second of four records, once in its
    // body (its length still finds the next record) and once in its length (a byte-by-byte
    // search finds it); each time open fails with InvalidData and the file is unchanged.
    let dir = test_dir("mid-file");
    let path = dir.join("node.log");
    for (what, delta) in [("body", RECORD_HEADER_LEN + 1), ("length", 2)] {
        let offsets = write_records(&path, &["one", "two", "three", "four"]);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[offsets[1] + delta] ^= 0x40;
        std::fs::write(&path, &bytes).expect("damage");
        let error = Storage::open::<String>(&path, true).err().expect("damage in the middle refuses");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{what}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{what}: names the file: {message}");
        assert!(message.contains(&format!("byte offset {}", offsets[1])), "{what}: names the offset: {message}");
        assert!(message.contains(&format!("byte offset {}", offsets[2])), "{what}: names the next: {message}");
        assert_eq!(std::fs::read(&path).expect("read"), bytes, "{what}: the file is left as it is");
        std::fs::remove_file(&path).expect("remove");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_record_over_the_cap_is_refused_when_written() {
    // Goal: a record that could not be read back is never written; the write returns a clear
    // error (no panic) and the records before it stay readable. Method: lower the cap to 16
    // bytes; append a short record, then a long one (refused, and the storage refuses every
    // later write); the same through `replace`; reopen: the short record only.
    let dir = test_dir("oversize");
    let path = dir.join("node.log");
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    storage.record_len_max = 16;
    storage.append(&"short".to_string()).expect("fits");
    storage.sync().expect("sync");
    let error = storage.append(&"x".repeat(100)).expect_err("over the cap");
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("exceeds the limit"), "{error}");
    assert!(storage.failed());
    assert!(storage.sync().is_err(), "nothing is written after a refused write");
    let (mut storage, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["short".to_string()]);
    storage.record_len_max = 16;
    let error = storage.replace(&"y".repeat(100)).expect_err("over the cap");
    assert!(error.to_string().contains("exceeds the limit"), "{error}");
    let (_, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["short".to_string()], "a refused snapshot leaves the file as it was");
    assert!(!Storage::temporary_path(&path).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_record_longer_than_a_frame_is_written_in_frames_and_reads_back() {
    // Goal: a record of any size is stored (a 296 MB Multi-Paxos checkpoint, over the old
    // single-frame cap of 256 MiB, stopped every replica of the cluster). Method: frames of
    // 8 bytes; a snapshot and an appended record of 100 bytes read back whole; the appended
    // record cut short anywhere inside its frames is a torn tail, cut at its first frame.
    let dir = test_dir("frames");
    let path = dir.join("node.log");
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    storage.frame_body_max = 8;
    storage.replace(&"s".repeat(100)).expect("a snapshot in frames");
    storage.append(&"a".repeat(100)).expect("an append in frames");
    storage.sync().expect("sync");
    drop(storage);
    let bytes = std::fs::read(&path).expect("read");
    let (_, second) = record_at(&bytes, 0).expect("the snapshot is intact");
    assert!(frame_at(&bytes, 0).expect("a frame").continued, "the snapshot took several frames");
    let (_, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["s".repeat(100), "a".repeat(100)]);
    for cut in [second + 1, second + RECORD_HEADER_LEN + 8, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).expect("torn");
        let (_, records) = Storage::open::<String>(&path, true).expect("a torn record of many frames is repaired");
        assert_eq!(records, vec!["s".repeat(100)], "cut at {cut}");
        assert_eq!(std::fs::metadata(&path).expect("file").len(), second as u64, "cut at its first frame");
    }
    let mut damaged = bytes.clone();
    damaged[RECORD_HEADER_LEN + 2] ^= 0x40;
    std::fs::write(&path, &damaged).expect("damage");
    let error = Storage::open::<String>(&path, true).err().expect("damage in the first frame of two records");
    assert!(error.to_string().contains("byte offset 0"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_replace_leaves_no_stray_file_and_keeps_the_old_one() {
    // Goal: a snapshot write that fails with ENOSPC returns a clear error, no panic, no stray
    // temporary file, and the old records intact. Method: the temporary file's name is made
    // a link to /dev/full, where every write fails with ENOSPC.
    let dir = test_dir("replace-enospc");
    let path = dir.join("node.log");
    write_records(&path, &["one", "two"]);
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    std::os::unix::fs::symlink("/dev/full", Storage::temporary_path(&path)).expect("symlink");
    let error = storage.replace(&"snapshot".to_string()).expect_err("disk full");
    assert_eq!(error.raw_os_error(), None, "wrapped with the file's name");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull, "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    assert!(!Storage::temporary_path(&path).exists(), "no stray temporary file");
    assert!(storage.sync().is_err() && storage.failed(), "a failed storage stays failed");
    let (_, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, vec!["one".to_string(), "two".to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_compaction_fails_the_storage_and_keeps_the_old_file() {
    // Goal: a background checkpoint that hits ENOSPC stops the node as a failed replace does:
    // a clear error naming the file when it would land, no stray file, the old records and the
    // appends issued meanwhile intact. Method: the temporary file's name links to /dev/full.
    let dir = test_dir("compact-enospc");
    let path = dir.join("node.log");
    write_records(&path, &["one", "two"]);
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    std::os::unix::fs::symlink("/dev/full", Storage::temporary_path(&path)).expect("symlink");
    storage.compact("checkpoint".to_string()).expect("the writer starts");
    storage.append(&"three".to_string()).unwrap();
    storage.flush_buffer().expect("the old file takes the append");
    let error = storage.settle_compaction(true).expect_err("disk full");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull, "{error}");
    assert!(error.to_string().contains("compaction failed"), "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    assert!(!Storage::temporary_path(&path).exists(), "no stray temporary file");
    assert!(storage.sync().is_err() && storage.failed(), "a failed storage stays failed");
    let (_, records) = Storage::open::<String>(&path, true).expect("reopen");
    assert_eq!(records, strings(&["one", "two", "three"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_append_is_an_error_naming_the_file() {
    // Goal: ENOSPC on the group-commit write is an error naming the file (the host stops on
    // it), never a panic. Method: the file's name, first written at `sync`, is a link to
    // /dev/full.
    let dir = test_dir("append-enospc");
    let path = dir.join("node.log");
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    std::os::unix::fs::symlink("/dev/full", &path).expect("symlink");
    storage.append(&"one".to_string()).expect("buffered");
    let error = storage.sync().expect_err("disk full");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull, "{error}");
    assert!(error.to_string().contains("write failed"), "{error}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    assert!(storage.append(&"two".to_string()).is_err(), "a failed storage takes no more writes");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stale_temporary_file_is_removed_at_open() {
    // Goal: a crash between writing a snapshot and renaming it leaves a temporary file that
    // was never the durable state; the next start removes it.
    let dir = test_dir("stale-tmp");
    let path = dir.join("node.log");
    write_records(&path, &["one"]);
    std::fs::write(Storage::temporary_path(&path), b"half a snapshot").expect("stale");
    let (_, records) = Storage::open::<String>(&path, true).expect("open");
    assert_eq!(records, vec!["one".to_string()]);
    assert!(!Storage::temporary_path(&path).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn strings(records: &[&str]) -> Vec<String> {
    records.iter().map(|record| record.to_string()).collect()
}

#[test]
fn a_compaction_lands_behind_the_appends_issued_while_it_was_written() {
    // Goal: a checkpoint written in the background does not hold up the node, and loses no
    // write issued meanwhile. Method: append a and b, compact them into "ab" (durable at once
    // as far as the node knows), append c while the writer may still run; then crash (copy
    // the file) before the compaction lands, and let it land. The copy reads a, b, c: the old
    // file and every later write; the landed file reads "ab", c; no temporary file is left.
    let dir = test_dir("compaction");
    let path = dir.join("node.log");
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    storage.append(&"a".to_string()).unwrap();
    storage.append(&"b".to_string()).unwrap();
    storage.compact("ab".to_string()).expect("compact");
    assert!(storage.compacting());
    storage.append(&"c".to_string()).unwrap();
    storage.flush_buffer().expect("flush");
    assert_eq!(storage.durable(), 4, "the compaction and the append are durable at once");
    let crashed = dir.join("crashed.log");
    std::fs::copy(&path, &crashed).expect("copy");
    assert_eq!(Storage::open::<String>(&crashed, true).expect("reopen").1, strings(&["a", "b", "c"]));
    storage.settle_compaction(true).expect("lands");
    assert!(!storage.compacting() && storage.compactions == 1);
    storage.append(&"d".to_string()).unwrap();
    storage.sync().expect("sync");
    drop(storage);
    assert!(!Storage::temporary_path(&path).exists());
    assert_eq!(Storage::open::<String>(&path, true).expect("reopen").1, strings(&["ab", "c", "d"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compactions_go_one_at_a_time_and_a_replace_supersedes_one() {
    // Goal: a second compaction waits for the first to land, and a replacing write drops a
    // compaction still being written, leaving no stray file. Method: compact twice with an
    // append between, in frames of 4 bytes (records longer than a frame); then compact and
    // replace at once. Each reopen reads exactly what the last landed record and later appends say.
    let dir = test_dir("compactions");
    let path = dir.join("node.log");
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    storage.frame_body_max = 4;
    storage.append(&"first".to_string()).unwrap();
    storage.compact("compacted once".to_string()).expect("compact");
    storage.append(&"second".to_string()).unwrap();
    storage.compact("compacted twice".to_string()).expect("compact");
    storage.append(&"third".to_string()).unwrap();
    storage.settle_compaction(false).ok();
    storage.sync().expect("sync");
    storage.settle_compaction(true).expect("lands");
    assert_eq!(storage.compactions, 2);
    let records = Storage::open::<String>(&path, true).expect("reopen").1;
    assert_eq!(records, strings(&["compacted twice", "third"]));
    let (mut storage, _) = Storage::open::<String>(&path, true).expect("open");
    storage.compact("dropped".to_string()).expect("compact");
    storage.append(&"lost with it".to_string()).unwrap();
    storage.replace(&"replaced".to_string()).expect("replace");
    storage.append(&"after".to_string()).unwrap();
    storage.sync().expect("sync");
    assert!(!storage.compacting() && storage.compactions == 0);
    assert!(!Storage::temporary_path(&path).exists());
    assert_eq!(Storage::open::<String>(&path, true).expect("reopen").1, strings(&["replaced", "after"]));
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #[test]
    fn a_record_file_holds_the_frames_an_append_writes(
        record in proptest::collection::vec(any::<u8>(), 0..300),
        frame_max in 1usize..64,
    ) {
        // Goal: a record serialized straight into its own file (replace, compaction) has the
        // very bytes an append of it would: same frames, lengths, continued bits, checksums.
        let dir = test_dir("record-file");
        let path = dir.join("record.log");
        let written = record_file::write_record_file(&path, &record, RECORD_LEN_MAX, frame_max, false).expect("written");
        let mut appended = Vec::new();
        encode_record_in_frames(&record, RECORD_LEN_MAX, frame_max, &mut appended).expect("fits");
        let file = std::fs::read(&path).expect("read");
        prop_assert_eq!(written, file.len() as u64);
        prop_assert_eq!(file, appended);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

proptest! {
    #[test]
    fn a_torn_tail_of_valid_records_is_never_refused(
        records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
        cut in any::<proptest::sample::Index>(),
    ) {
        // Goal: every prefix of a well-written file (a crash cuts a write short anywhere)
        // opens, with the whole records before the cut. Method: frame random records, cut
        // the bytes at a random point, recover.
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for record in &records {
            encode_record(record, RECORD_LEN_MAX, &mut bytes).expect("fits");
            ends.push(bytes.len());
        }
        let cut = cut.index(bytes.len() + 1);
        let recovered = recover_records::<Vec<u8>>(&bytes[..cut]);
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        let recovered = recovered.map_err(TestCaseError::fail)?;
        prop_assert_eq!(&recovered.records[..], &records[..whole]);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        // Goal: a corrupt file reads as its intact prefix, never a panic.
        let (records, intact) = decode_records::<Vec<u8>>(&bytes);
        prop_assert!(intact <= bytes.len());
        prop_assert!(records.len() <= bytes.len());
        if let Ok(recovered) = recover_records::<Vec<u8>>(&bytes) {
            prop_assert_eq!(recovered.intact, intact);
        }
    }
}
