//! Durable storage: one append-only file per node. Each record is postcard bytes in one or
//! more frames of `len u32 | xxh3_64 u64 | bytes` (a record over [`FRAME_BODY_MAX`] takes
//! several, each but the last marked continued in the length's top bit). Writes issued while handling a batch of inputs are written together and
//! covered by one `fsync` (group commit); only then are the sends that wait on them released.
//! A replacing write (a snapshot) goes to a new file that is renamed over the old one; a
//! compacting write (a checkpoint of what earlier records already hold) does too, written by a
//! thread while later appends go on (`compaction.rs`). Both stream the record into the new
//! file (`record_file.rs`).
//!
//! Storage fails loudly, never silently:
//! - a record of any size up to [`RECORD_LEN_MAX`] (4 GiB) is written, in frames; a longer one
//!   is refused with an error, never a panic (a 296 MB checkpoint, a single frame under the
//!   old 256 MiB cap, once stopped every replica of a Multi-Paxos cluster);
//! - on restart, a *torn tail* (a bad last record: a write cut short by a crash) is cut, but a bad
//!   record followed by an intact one is damage no crash explains, and opening the file fails
//!   with an error naming the file and the byte offset, rather than dropping the later records;
//! - the directory is synced after the file is created and after a rename (with `fsync` on), so
//!   a crash cannot lose the file's name;
//! - a failed write (ENOSPC, EIO) returns an error that names the file, removes a half-written
//!   replacement, and poisons the storage: every later write fails too, so the node stops instead
//!   of appending after a partial record.

use serde::{Serialize, de::DeserializeOwned};
use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

mod compaction;
mod record_file;
use compaction::Compaction;
use record_file::write_record_file;

/// Longest body of one frame. A longer record is written as several frames, each but the last
/// marked continued in its length field's top bit. Earlier versions wrote every record as one
/// frame of at most this length (the top bit clear), so their files read the same.
pub const FRAME_BODY_MAX: usize = 256 * 1024 * 1024;
/// Largest record accepted when writing: a sanity bound (the record is serialized in memory
/// first, and read back whole at restart), far above any state the runtime moves (a message
/// is at most 1 GiB).
pub const RECORD_LEN_MAX: usize = 4 * 1024 * 1024 * 1024;
pub(crate) const RECORD_HEADER_LEN: usize = 12;
/// The length field's top bit: another frame of the same record follows.
const CONTINUED: u32 = 1 << 31;
const _: () = assert!(FRAME_BODY_MAX < CONTINUED as usize, "a frame's length leaves the continued bit free");

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
    /// Longest frame body written: [`FRAME_BODY_MAX`], lowered by tests.
    frame_body_max: usize,
    /// Bytes written since start (metrics).
    pub bytes_written: u64,
    /// `fsync` calls since start (metrics).
    pub syncs: u64,
    /// The compaction being written in the background, if any.
    compaction: Option<Compaction>,
    /// Compactions landed since start (metrics).
    pub compactions: u64,
}

/// Appends the record's frames to `into` (one frame unless it is longer than [`FRAME_BODY_MAX`]),
/// or refuses a record longer than `len_max`.
pub(crate) fn encode_record<D: Serialize>(record: &D, len_max: usize, into: &mut Vec<u8>) -> Result<(), String> {
    encode_record_in_frames(record, len_max, FRAME_BODY_MAX, into)
}

/// [`encode_record`] with frames of at most `frame_max` bytes. The record is serialized once,
/// straight behind room for its frame header; only a record longer than a frame is copied
/// again, into frames.
pub(crate) fn encode_record_in_frames<D: Serialize>(
    record: &D,
    len_max: usize,
    frame_max: usize,
    into: &mut Vec<u8>,
) -> Result<(), String> {
    assert!((1..=FRAME_BODY_MAX).contains(&frame_max), "what is written can be read back");
    let start = into.len();
    into.extend_from_slice(&[0; RECORD_HEADER_LEN]);
    if let Err(error) = serialize_into(record, len_max, into) {
        into.truncate(start);
        return Err(error);
    }
    let body_start = start + RECORD_HEADER_LEN;
    if into.len() - body_start <= frame_max {
        let header = frame_header(&into[body_start..], false);
        into[start..body_start].copy_from_slice(&header);
        return Ok(());
    }
    let body = into.split_off(body_start);
    into.truncate(start);
    for (piece, continued) in frames(&body, frame_max) {
        into.extend_from_slice(&frame_header(piece, continued));
        into.extend_from_slice(piece);
    }
    Ok(())
}

/// Appends the record's postcard bytes to `into`, or refuses a record longer than `len_max`
/// (leaving `into` longer: the caller cuts it back).
fn serialize_into<D: Serialize>(record: &D, len_max: usize, into: &mut Vec<u8>) -> Result<(), String> {
    /// `into`, extended in place (postcard takes its output by value).
    struct Appending<'a>(&'a mut Vec<u8>);
    impl Extend<u8> for Appending<'_> {
        fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
            self.0.extend(bytes);
        }
    }
    let start = into.len();
    postcard::to_extend(record, Appending(into)).map_err(|error| format!("a record does not serialize: {error}"))?;
    let len = into.len() - start;
    if len > len_max {
        return Err(format!(
            "a record of {len} bytes exceeds the limit of {len_max} bytes (RECORD_LEN_MAX) and was not written"
        ));
    }
    Ok(())
}

/// A record's body cut into frames of at most `frame_max` bytes, each with whether another
/// follows (an empty body is one empty frame).
fn frames(body: &[u8], frame_max: usize) -> impl Iterator<Item = (&[u8], bool)> {
    let count = body.len().div_ceil(frame_max).max(1);
    (0..count).map(move |index| {
        let piece = &body[(index * frame_max).min(body.len())..((index + 1) * frame_max).min(body.len())];
        (piece, index + 1 < count)
    })
}

fn frame_header(body: &[u8], continued: bool) -> [u8; RECORD_HEADER_LEN] {
    frame_header_of(body.len(), continued, xxhash_rust::xxh3::xxh3_64(body))
}

/// The header of a frame whose body is `len` bytes hashing to `hash` (xxh3-64).
fn frame_header_of(len: usize, continued: bool, hash: u64) -> [u8; RECORD_HEADER_LEN] {
    let len = u32::try_from(len).expect("a frame's body is at most FRAME_BODY_MAX");
    let field = if continued { len | CONTINUED } else { len };
    let mut header = [0; RECORD_HEADER_LEN];
    header[..4].copy_from_slice(&field.to_le_bytes());
    header[4..].copy_from_slice(&hash.to_le_bytes());
    header
}

/// One intact frame of a durable file.
pub(crate) struct Frame<'a> {
    pub(crate) body: &'a [u8],
    /// Another frame of the same record follows.
    pub(crate) continued: bool,
    /// The offset just past the frame.
    pub(crate) end: usize,
}

/// The frame at `at`, if a whole frame with a matching checksum starts there.
pub(crate) fn frame_at(bytes: &[u8], at: usize) -> Option<Frame<'_>> {
    let header = bytes.get(at..at.checked_add(RECORD_HEADER_LEN)?)?;
    let field = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    let sum = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
    let len = (field & !CONTINUED) as usize;
    if len > FRAME_BODY_MAX {
        return None;
    }
    let start = at + RECORD_HEADER_LEN;
    let end = start.checked_add(len)?;
    let body = bytes.get(start..end)?;
    (xxhash_rust::xxh3::xxh3_64(body) == sum).then_some(Frame { body, continued: field & CONTINUED != 0, end })
}

/// The body of the record whose first frame is at `at`, and the offset just past its last
/// frame, if every frame of it is intact.
pub(crate) fn record_at(bytes: &[u8], at: usize) -> Option<(Cow<'_, [u8]>, usize)> {
    let first = frame_at(bytes, at)?;
    if !first.continued {
        return Some((Cow::Borrowed(first.body), first.end));
    }
    let mut body = first.body.to_vec();
    let mut end = first.end;
    loop {
        let frame = frame_at(bytes, end)?;
        body.extend_from_slice(frame.body);
        end = frame.end;
        if !frame.continued {
            return Some((Cow::Owned(body), end));
        }
    }
}

/// Reads every intact record of `bytes`; returns them and the length of the intact prefix.
pub fn decode_records<D: DeserializeOwned>(bytes: &[u8]) -> (Vec<D>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while let Some((body, end)) = record_at(bytes, at) {
        let Ok(record) = postcard::from_bytes(&body) else { break };
        records.push(record);
        at = end;
    }
    (records, at)
}

/// The offset of the first intact frame that starts after `bad`, the offset of a bad frame.
/// Tried first where the bad frame says it ends (a damaged body), then at every byte (a
/// damaged length). Quadratic at worst, but it runs only on a damaged file.
pub fn intact_record_after(bytes: &[u8], bad: usize) -> Option<usize> {
    let claimed_end = bytes.get(bad..bad + 4).map(|len| {
        let field = u32::from_le_bytes(len.try_into().expect("4 bytes"));
        bad + RECORD_HEADER_LEN + (field & !CONTINUED) as usize
    });
    if let Some(end) = claimed_end
        && end < bytes.len()
        && frame_at(bytes, end).is_some()
    {
        return Some(end);
    }
    (bad + 1..bytes.len()).find(|&at| frame_at(bytes, at).is_some())
}

/// Where the run of intact continued frames from `at` stops: the offset of the first frame
/// that is missing or bad (or the last one, which says no more follow).
fn end_of_continued_frames(bytes: &[u8], mut at: usize) -> usize {
    while let Some(frame) = frame_at(bytes, at).filter(|frame| frame.continued) {
        at = frame.end;
    }
    at
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
    if let Some((body, _)) = record_at(bytes, intact) {
        let error = postcard::from_bytes::<D>(&body).err().map_or_else(String::new, |e| e.to_string());
        return Err(format!(
            "the record at byte offset {intact} (of {}) is intact but does not decode ({error}): written by \
             another protocol or version; the node refuses to start rather than drop it and every record after it",
            bytes.len()
        ));
    }
    // A record cut short keeps its first frames intact: the damage starts after them.
    if let Some(next) = intact_record_after(bytes, end_of_continued_frames(bytes, intact)) {
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
            frame_body_max: FRAME_BODY_MAX,
            bytes_written: 0,
            syncs: 0,
            compaction: None,
            compactions: 0,
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
        let start = self.buffer.len();
        if let Err(message) =
            encode_record_in_frames(record, self.record_len_max, self.frame_body_max, &mut self.buffer)
        {
            return Err(self.fail("append", io::Error::new(io::ErrorKind::InvalidInput, message)));
        }
        if let Some(compaction) = &mut self.compaction {
            compaction.retained.extend_from_slice(&self.buffer[start..]);
        }
        self.issued += 1;
        Ok(())
    }

    /// Replaces everything stored by `record`: earlier buffered writes are flushed first, then
    /// a new file is written, synced and renamed over the old one. On failure the new file is
    /// removed and the old one is left as it was. A compaction still being written is dropped:
    /// this record replaces it too.
    pub fn replace<D: Serialize>(&mut self, record: &D) -> io::Result<()> {
        self.sync()?;
        self.drop_compaction();
        let temporary = Self::temporary_path(&self.path);
        let written = write_record_file(&temporary, record, self.record_len_max, self.frame_body_max, self.fsync)
            .and_then(|written| self.install(&temporary).map(|()| written));
        let written = match written {
            Ok(written) => written,
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                let doing = if error.kind() == io::ErrorKind::InvalidInput {
                    "replace"
                } else {
                    "replace (writing the new file)"
                };
                return Err(self.fail(doing, error));
            }
        };
        self.bytes_written += written;
        self.issued += 1;
        self.durable = self.issued;
        Ok(())
    }

    /// Issues a compacting write ([`PersistMode::Compact`](ordo_core::PersistMode)): `record`
    /// replaces every earlier record, but says no more than they do, so it is durable as far as
    /// the node is concerned once the earlier records are (at the next [`Storage::sync`]). A
    /// thread writes it to a new file while later appends still go to the old file and are kept
    /// for the new one; the sync after the thread finishes appends them to the new file and
    /// renames it over the old one. A crash before that leaves the old file, every write in it.
    /// One compaction at a time: a second waits for the first to land. The thread serializes
    /// the record too, so the node's loop pays for none of it.
    pub fn compact<D: Serialize + Send + 'static>(&mut self, record: D) -> io::Result<()> {
        self.sync()?;
        self.settle_compaction(true)?;
        let temporary = Self::temporary_path(&self.path);
        let (len_max, frame_max, fsync) = (self.record_len_max, self.frame_body_max, self.fsync);
        let write = move || write_record_file(&temporary, &record, len_max, frame_max, fsync);
        match Compaction::start(write) {
            Ok(compaction) => self.compaction = Some(compaction),
            Err(error) => return Err(self.fail("compact (starting its writer)", error)),
        }
        self.issued += 1;
        Ok(())
    }

    /// Renames the synced new file `temporary` over the file, syncs the directory, and appends
    /// to the new file from now on.
    fn install(&mut self, temporary: &Path) -> io::Result<()> {
        std::fs::rename(temporary, &self.path)?;
        if self.fsync {
            sync_directory(&self.path)?;
            self.syncs += 1;
        }
        self.file = Some(OpenOptions::new().append(true).open(&self.path)?);
        Ok(())
    }

    /// Lands a compaction whose writer has finished (or, with `wait`, any compaction): the
    /// appends issued since it began follow its record, synced, and the new file replaces the
    /// old. Called with nothing buffered, so each of those appends is in the old file and lands
    /// in the new one once. A failure fails the storage, as a failed replace does.
    fn settle_compaction(&mut self, wait: bool) -> io::Result<()> {
        let Some(compaction) = self.compaction.take_if(|compaction| wait || compaction.is_finished()) else {
            return Ok(());
        };
        debug_assert!(self.buffer.is_empty(), "a compaction lands between syncs");
        let temporary = Self::temporary_path(&self.path);
        let landed = compaction.wait().and_then(|(written, retained)| {
            let mut file = OpenOptions::new().append(true).open(&temporary)?;
            file.write_all(&retained)?;
            if self.fsync {
                file.sync_data()?;
            }
            self.install(&temporary)?;
            Ok(written + retained.len() as u64)
        });
        match landed {
            Ok(written) => {
                self.bytes_written += written;
                self.compactions += 1;
                Ok(())
            }
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                Err(self.fail("compaction", error))
            }
        }
    }

    /// Drops a compaction still being written (a replacing write supersedes it).
    fn drop_compaction(&mut self) {
        if let Some(compaction) = self.compaction.take() {
            let _ = compaction.wait();
            let _ = std::fs::remove_file(Self::temporary_path(&self.path));
        }
    }

    /// True while a compaction is being written: [`Storage::sync`] lands it once it is.
    pub fn compacting(&self) -> bool {
        self.compaction.is_some()
    }

    /// Writes and syncs every issued write; returns how many writes are durable.
    /// A compaction whose writer has finished lands here.
    pub fn sync(&mut self) -> io::Result<u64> {
        self.flush_buffer()?;
        self.settle_compaction(false)?;
        Ok(self.durable)
    }

    /// Writes and syncs the buffered records: every issued write is durable.
    fn flush_buffer(&mut self) -> io::Result<()> {
        self.check_not_failed()?;
        if !self.buffer.is_empty() {
            if let Err(error) = self.write_buffer() {
                return Err(self.fail("write", error));
            }
            self.bytes_written += self.buffer.len() as u64;
            self.buffer.clear();
        }
        self.durable = self.issued;
        Ok(())
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
mod tests;
