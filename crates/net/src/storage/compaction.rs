//! A compacting write in the background ([`Storage::compact`](super::Storage::compact)): a thread
//! writes the record to the new file while the node goes on, so that a checkpoint of a state of
//! hundreds of megabytes does not stall the event loop for the seconds its write takes.

use std::io;
use std::thread::JoinHandle;

/// A compaction being written.
pub(super) struct Compaction {
    /// Writes the record's frames to the new file and syncs it; returns the bytes written.
    writer: JoinHandle<io::Result<u64>>,
    /// The frames of every append issued since the compaction began: they follow its record in
    /// the new file.
    pub(super) retained: Vec<u8>,
}

impl Compaction {
    /// Starts `write` on its own thread: it serializes the record, writes it to the new file
    /// and syncs it, and returns the bytes written.
    pub(super) fn start(write: impl FnOnce() -> io::Result<u64> + Send + 'static) -> io::Result<Self> {
        let writer = std::thread::Builder::new().name("ordo-compaction".into()).spawn(write)?;
        Ok(Compaction { writer, retained: Vec::new() })
    }

    /// True once the new file holds the record, synced (or its write failed).
    pub(super) fn is_finished(&self) -> bool {
        self.writer.is_finished()
    }

    /// Waits for the writer: the bytes it wrote and the appends retained meanwhile.
    pub(super) fn wait(self) -> io::Result<(u64, Vec<u8>)> {
        let written =
            self.writer.join().unwrap_or_else(|_| Err(io::Error::other("the compaction's writer panicked")))?;
        Ok((written, self.retained))
    }
}
