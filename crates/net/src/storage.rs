//! Durable storage: one append-only file per node. Each record is `len u32 | xxh3_64 u64 |
//! postcard bytes`. Writes issued while handling a batch of inputs are written together and
//! covered by one `fsync` (group commit); only then are the sends that wait on them released.
//! A replacing write (a snapshot) goes to a new file that is renamed over the old one.
//!
//! Storage fails loudly, never silently:
//! - a record longer than [`RECORD_LEN_MAX`] is refused when written (it could not be read
//!   back), with an error, never a panic;
//! - on restart, a *torn tail* (a bad last record: a write cut short by a crash) is cut, but a bad
//!   record followed by an intact one is damage no crash explains, and opening the file fails
//!   with an error naming the file and the byte offset, rather than dropping the later records;
//! - the directory is synced after the file is created and after a rename (with `fsync` on), so
//!   a crash cannot lose the file's name;
//! - a failed write (ENOSPC, EIO) returns an error that names the file, removes a half-written
//!   replacement, and poisons the storage: every later write fails too, so the node stops instead
//!   of appending after a partial record.

use serde::{Serialize, de::DeserializeOwned};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Largest record accepted, when writing and when reading back (a corrupt length must not
/// allocate gigabytes). A record's length is stored as a `u32`.
pub const RECORD_LEN_MAX: usize = 256 * 1024 * 1024;
pub(crate) const RECORD_HEADER_LEN: usize = 12;
const _: () = assert!(RECORD_LEN_MAX <= u32::MAX as usize, "a record's length fits its u32 field");

/// The name of node `node`'s durable file in the data directory, when the cluster-file entry
/// `host` runs it: `<host>-n<node>.log`.
pub fn durable_file_name(host: &str, node: u32) -> String {
    format!("{host}-n{node}.log")
}

/// True for a name [`durable_file_name`] gives, so that tools can tell a cluster's durable
/// files from anything else in its data directory.
pub fn is_durable_file_name(name: &str) -> bool {
    let Some((host, node)) = name.strip_suffix(".log").and_then(|stem| stem.rsplit_once("-n")) else {
        return false;
    };
    !host.is_empty() && !node.is_empty() && node.bytes().all(|b| b.is_ascii_digit())
}

/// A node's durable file.
pub struct Storage {
    path: PathBuf,
    /// Open for appending; `None` until the node first writes, so that nodes that never persist
    /// anything (a gateway's client nodes) leave no empty file behind.
    file: Option<File>,
    buffer: Vec<u8>,
    fsync: bool,
    /// Writes issued since the node booted.
    issued: u64,
    /// Writes durable since the node booted.
    durable: u64,
    /// Why an earlier write failed: the file may end in a partial record, so nothing more may
    /// be written after it.
    failure: Option<(io::ErrorKind, String)>,
    /// Longest record written: [`RECORD_LEN_MAX`], lowered by tests.
    record_len_max: usize,
    /// Bytes written since start (metrics).
    pub bytes_written: u64,
    /// `fsync` calls since start (metrics).
    pub syncs: u64,
}

/// Appends the record's frame to `into`, or refuses a record too long to read back.
pub(crate) fn encode_record<D: Serialize>(record: &D, len_max: usize, into: &mut Vec<u8>) -> Result<(), String> {
    assert!(len_max <= RECORD_LEN_MAX, "what is written can be read back");
    let bytes = postcard::to_allocvec(record).map_err(|error| format!("a record does not serialize: {error}"))?;
    if bytes.len() > len_max {
        return Err(format!(
            "a record of {} bytes exceeds the limit of {len_max} bytes (RECORD_LEN_MAX) and was not written",
            bytes.len()
        ));
    }
    let len = u32::try_from(bytes.len()).expect("RECORD_LEN_MAX fits in u32");
    into.extend_from_slice(&len.to_le_bytes());
    into.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&bytes).to_le_bytes());
    into.extend_from_slice(&bytes);
    Ok(())
}

/// The body of the record framed at `at`, if a whole frame with a matching checksum starts there.
pub(crate) fn frame_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at.checked_add(RECORD_HEADER_LEN)?)?;
    let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
    let sum = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
    if len > RECORD_LEN_MAX {
        return None;
    }
    let start = at + RECORD_HEADER_LEN;
    let body = bytes.get(start..start.checked_add(len)?)?;
    (xxhash_rust::xxh3::xxh3_64(body) == sum).then_some(body)
}

/// Reads every intact record of `bytes`; returns them and the length of the intact prefix.
pub fn decode_records<D: DeserializeOwned>(bytes: &[u8]) -> (Vec<D>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while let Some(body) = frame_at(bytes, at) {
        let Ok(record) = postcard::from_bytes(body) else { break };
        records.push(record);
        at += RECORD_HEADER_LEN + body.len();
    }
    (records, at)
}

/// The offset of the first intact frame that starts after `bad`, the offset of a bad record.
/// Tried first where the bad record says it ends (a damaged body), then at every byte (a
/// damaged length). Quadratic at worst, but it runs only on a damaged file.
pub fn intact_record_after(bytes: &[u8], bad: usize) -> Option<usize> {
    let claimed_end = bytes
        .get(bad..bad + 4)
        .map(|len| bad + RECORD_HEADER_LEN + u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize);
    if let Some(end) = claimed_end
        && end < bytes.len()
        && frame_at(bytes, end).is_some()
    {
        return Some(end);
    }
    (bad + 1..bytes.len()).find(|&at| frame_at(bytes, at).is_some())
}

/// What a durable file holds, read back at start.
#[derive(Debug)]
pub struct Recovered<D> {
    /// The intact records, in order.
    pub records: Vec<D>,
    /// The length of the intact prefix: a torn tail starts there.
    pub intact: usize,
}

/// Reads a whole file's bytes: its intact records, or an error naming the byte offset of a bad
/// record that intact ones follow (or of a record that is intact but does not decode).
pub fn recover_records<D: DeserializeOwned>(bytes: &[u8]) -> Result<Recovered<D>, String> {
    let (records, intact) = decode_records::<D>(bytes);
    if intact == bytes.len() {
        return Ok(Recovered { records, intact });
    }
    if let Some(body) = frame_at(bytes, intact) {
        let error = postcard::from_bytes::<D>(body).err().map_or_else(String::new, |e| e.to_string());
        return Err(format!(
            "the record at byte offset {intact} (of {}) is intact but does not decode ({error}): written by \
             another protocol or version; the node refuses to start rather than drop it and every record after it",
            bytes.len()
        ));
    }
    if let Some(next) = intact_record_after(bytes, intact) {
        return Err(format!(
            "the record at byte offset {intact} (of {}) is corrupt and an intact record follows at byte offset \
             {next}: this is damage, not a write cut short by a crash; the node refuses to start rather than drop \
             the records after it (restore the file, or truncate it at byte {intact} to drop them knowingly)",
            bytes.len()
        ));
    }
    Ok(Recovered { records, intact })
}

/// Syncs the directory holding `path`, so that a file created or renamed there keeps its name
/// after a crash.
fn sync_directory(path: &Path) -> io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(parent)?.sync_all()
}

/// An error about `path` that says what was being done.
fn error_at(path: &Path, kind: io::ErrorKind, message: impl std::fmt::Display) -> io::Error {
    io::Error::new(kind, format!("{}: {message}", path.display()))
}

impl Storage {
    /// Opens the file at `path` and returns what it holds; a missing file holds nothing and is
    /// created at the first write (see [`Storage::sync`]), so a node that never writes leaves no
    /// file. A torn tail is cut (and
    /// said on stderr); a damaged record that intact records follow is an error of kind
    /// `InvalidData` naming the file and the offset, and leaves the file as it is. A temporary
    /// file left by a crash during [`Storage::replace`] is removed: it was never renamed, so it
    /// never was the durable state.
    pub fn open<D: DeserializeOwned>(path: &Path, fsync: bool) -> io::Result<(Self, Vec<D>)> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let _ = std::fs::remove_file(Self::temporary_path(path));
        let mut bytes = Vec::new();
        if path.exists() {
            File::open(path)?.read_to_end(&mut bytes)?;
        }
        let recovered =
            recover_records::<D>(&bytes).map_err(|message| error_at(path, io::ErrorKind::InvalidData, message))?;
        let file = if path.exists() { Some(OpenOptions::new().append(true).open(path)?) } else { None };
        if let Some(file) = &file
            && recovered.intact < bytes.len()
        {
            eprintln!(
                "storage: {}: cut a torn tail of {} bytes at byte offset {} (a write cut short by a crash)",
                path.display(),
                bytes.len() - recovered.intact,
                recovered.intact
            );
            file.set_len(recovered.intact as u64)?;
            if fsync {
                file.sync_all()?;
            }
        }
        let storage = Storage {
            path: path.to_path_buf(),
            file,
            buffer: Vec::new(),
            fsync,
            issued: 0,
            durable: 0,
            failure: None,
            record_len_max: RECORD_LEN_MAX,
            bytes_written: 0,
            syncs: 0,
        };
        Ok((storage, recovered.records))
    }

    fn temporary_path(path: &Path) -> PathBuf {
        path.with_extension("tmp")
    }

    /// The error of an earlier failed write, again: nothing may follow a partial record.
    fn check_not_failed(&self) -> io::Result<()> {
        match &self.failure {
            Some((kind, message)) => Err(io::Error::new(*kind, format!("{message} (an earlier write failed)"))),
            None => Ok(()),
        }
    }

    /// Records a failed write (so that every later write fails too) and returns its error,
    /// naming the file and what was being done.
    fn fail(&mut self, doing: &str, error: io::Error) -> io::Error {
        let error = error_at(&self.path, error.kind(), format_args!("{doing} failed: {error}"));
        self.failure = Some((error.kind(), error.to_string()));
        error
    }

    /// Issues an appending write (durable at the next [`Storage::sync`]). A record longer than
    /// [`RECORD_LEN_MAX`] is refused (kind `InvalidInput`), and so is every write after a failed one.
    pub fn append<D: Serialize>(&mut self, record: &D) -> io::Result<()> {
        self.check_not_failed()?;
        if let Err(message) = encode_record(record, self.record_len_max, &mut self.buffer) {
            return Err(self.fail("append", io::Error::new(io::ErrorKind::InvalidInput, message)));
        }
        self.issued += 1;
        Ok(())
    }

    /// Replaces everything stored by `record`: earlier buffered writes are flushed first, then
    /// a new file is written, synced and renamed over the old one. On failure the new file is
    /// removed and the old one is left as it was.
    pub fn replace<D: Serialize>(&mut self, record: &D) -> io::Result<()> {
        self.sync()?;
        let mut bytes = Vec::new();
        if let Err(message) = encode_record(record, self.record_len_max, &mut bytes) {
            return Err(self.fail("replace", io::Error::new(io::ErrorKind::InvalidInput, message)));
        }
        let temporary = Self::temporary_path(&self.path);
        if let Err(error) = self.write_new_file(&temporary, &bytes) {
            let _ = std::fs::remove_file(&temporary);
            return Err(self.fail("replace (writing the new file)", error));
        }
        self.bytes_written += bytes.len() as u64;
        self.issued += 1;
        self.durable = self.issued;
        Ok(())
    }

    /// Writes `bytes` to `temporary`, syncs it, renames it over the file and syncs the directory.
    fn write_new_file(&mut self, temporary: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut file = File::create(temporary)?;
        file.write_all(bytes)?;
        if self.fsync {
            file.sync_data()?;
        }
        std::fs::rename(temporary, &self.path)?;
        if self.fsync {
            sync_directory(&self.path)?;
            self.syncs += 1;
        }
        self.file = Some(OpenOptions::new().append(true).open(&self.path)?);
        Ok(())
    }

    /// Writes and syncs every issued write; returns how many writes are durable.
    pub fn sync(&mut self) -> io::Result<u64> {
        self.check_not_failed()?;
        if !self.buffer.is_empty() {
            if let Err(error) = self.write_buffer() {
                return Err(self.fail("write", error));
            }
            self.bytes_written += self.buffer.len() as u64;
            self.buffer.clear();
        }
        self.durable = self.issued;
        Ok(self.durable)
    }

    /// Appends the buffered records to the file (created at the first write, its directory
    /// synced) and syncs it.
    fn write_buffer(&mut self) -> io::Result<()> {
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let file = OpenOptions::new().create(true).append(true).open(&self.path)?;
                if self.fsync {
                    sync_directory(&self.path)?;
                }
                self.file.insert(file)
            }
        };
        file.write_all(&self.buffer)?;
        if self.fsync {
            file.sync_data()?;
            self.syncs += 1;
        }
        Ok(())
    }

    /// True when some write waits for [`Storage::sync`].
    pub fn dirty(&self) -> bool {
        self.issued > self.durable
    }

    /// True once a write has failed: the node must stop (every later write fails too).
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Writes durable since boot.
    pub fn durable(&self) -> u64 {
        self.durable
    }
}

#[cfg(test)]
mod tests {
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
        while let Some(body) = frame_at(&bytes, *offsets.last().expect("one")) {
            offsets.push(offsets.last().expect("one") + RECORD_HEADER_LEN + body.len());
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
}
