//! A new file holding one record, serialized straight into it: a checkpoint of hundreds of
//! megabytes is neither copied into a buffer first nor held twice in memory. Its frames are
//! those [`super::encode_record_in_frames`] makes; since postcard's size is known before
//! writing, so is each frame's length, and each header's checksum is written once its body is.

use super::{RECORD_HEADER_LEN, frame_header_of};
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use xxhash_rust::xxh3::Xxh3Default;

/// Bytes written between two syncs when syncing: a node's group commit syncs its log on the
/// same disk, and the file system may make that sync wait until every dirty page of the disk is
/// written, so hundreds of dirty megabytes stalled each commit for a second.
const SYNC_EVERY: u64 = 8 * 1024 * 1024;

/// Writes `record` to a new file at `path` in frames of at most `frame_max` bytes, syncing as it
/// goes when `fsync`; returns the bytes written. A record longer than `len_max` is refused
/// (kind `InvalidInput`) before the file is created.
pub(super) fn write_record_file<D: Serialize>(
    path: &Path,
    record: &D,
    len_max: usize,
    frame_max: usize,
    fsync: bool,
) -> io::Result<u64> {
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
    let size = postcard::experimental::serialized_size(record)
        .map_err(|error| invalid(format!("a record does not serialize: {error}")))?;
    if size > len_max {
        return Err(invalid(format!(
            "a record of {size} bytes exceeds the limit of {len_max} bytes (RECORD_LEN_MAX) and was not written"
        )));
    }
    let framed = FramedFile::create(path, size as u64, frame_max as u64, fsync)?;
    let mut buffered = BufWriter::with_capacity(1 << 16, framed);
    postcard::to_io(record, &mut buffered).map_err(|error| io::Error::other(format!("serializing: {error}")))?;
    buffered.into_inner().map_err(|error| error.into_error())?.finish()
}

/// A file being filled with one record's frames.
struct FramedFile {
    file: File,
    frame_max: u64,
    fsync: bool,
    /// Body bytes not yet written, this frame's included.
    remaining: u64,
    /// This frame: where its header goes, its body bytes still to come, and their hash so far.
    header_at: u64,
    frame_left: u64,
    hasher: Xxh3Default,
    /// Bytes written to the file, headers included.
    written: u64,
    unsynced: u64,
}

impl FramedFile {
    fn create(path: &Path, size: u64, frame_max: u64, fsync: bool) -> io::Result<Self> {
        let file = File::create(path)?;
        let mut framed = FramedFile {
            file,
            frame_max,
            fsync,
            remaining: size,
            header_at: 0,
            frame_left: 0,
            hasher: Xxh3Default::new(),
            written: 0,
            unsynced: 0,
        };
        framed.start_frame()?;
        Ok(framed)
    }

    /// Leaves room for the next frame's header; its body is the next `frame_max` bytes or fewer.
    fn start_frame(&mut self) -> io::Result<()> {
        self.header_at = self.written;
        self.frame_left = self.remaining.min(self.frame_max);
        self.hasher = Xxh3Default::new();
        self.file.write_all(&[0; RECORD_HEADER_LEN])?;
        self.written += RECORD_HEADER_LEN as u64;
        Ok(())
    }

    /// Writes the finished frame's header in the room left for it.
    fn end_frame(&mut self) -> io::Result<()> {
        let len = (self.written - self.header_at) as usize - RECORD_HEADER_LEN;
        let header = frame_header_of(len, self.remaining > 0, self.hasher.digest());
        self.file.write_all_at(&header, self.header_at)
    }

    fn finish(mut self) -> io::Result<u64> {
        if self.remaining > 0 || self.frame_left > 0 {
            return Err(io::Error::other("a record serialized to fewer bytes than its size"));
        }
        self.end_frame()?;
        if self.fsync {
            self.file.sync_data()?;
        }
        Ok(self.written)
    }
}

impl Write for FramedFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.frame_left == 0 && !bytes.is_empty() {
            if self.remaining == 0 {
                return Err(io::Error::other("a record serialized to more bytes than its size"));
            }
            self.end_frame()?;
            self.start_frame()?;
        }
        let take = bytes.len().min(self.frame_left as usize);
        let piece = &bytes[..take];
        self.hasher.update(piece);
        self.file.write_all(piece)?;
        (self.frame_left, self.remaining) = (self.frame_left - take as u64, self.remaining - take as u64);
        self.written += take as u64;
        self.unsynced += take as u64;
        if self.fsync && self.unsynced >= SYNC_EVERY {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
