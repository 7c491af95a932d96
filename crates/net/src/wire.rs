//! The wire format: one UDP datagram carries a header, one or more frames and a checksum.
//!
//! ```text
//! magic "OR" | version u8 | cluster u64 | boot u64 | from u32 | to u32 | frames... | xxh3_64 u64
//! frame: 0 | len u32 | postcard message            (a whole message)
//!        1 | message u64 | index u16 | count u16 | len u32 | bytes   (a fragment)
//! ```
//!
//! All integers are little-endian. `cluster` is a hash of the cluster file, so that datagrams of
//! another cluster on the same ports are dropped; `boot` is a per-process random number that
//! keeps fragments of an earlier incarnation of the sender from being glued to new ones. Many
//! messages to one destination are packed into a datagram; a message larger than a datagram is
//! split into fragments and reassembled in a bounded table. Every decoding failure is a typed
//! [`WireError`], never a panic.

use std::collections::BTreeMap;
use thiserror::Error;

/// First bytes of every datagram.
pub const MAGIC: [u8; 2] = *b"OR";
/// The wire format version; a datagram of another version is dropped.
pub const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 2 + 1 + 8 + 8 + 4 + 4;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 8;
/// Bytes of a whole-message frame's header.
const WHOLE_FRAME_LEN: usize = 1 + 4;
/// Bytes of a fragment frame's header.
const FRAGMENT_FRAME_LEN: usize = 1 + 8 + 2 + 2 + 4;
/// The largest UDP payload over IPv4.
pub const DATAGRAM_MAX: usize = 65_507;
/// Most fragments of one message (bounds reassembly memory).
pub const FRAGMENTS_MAX: usize = 1_024;

/// Why a datagram was dropped.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than a header and a checksum.
    #[error("datagram too short")]
    TooShort,
    /// Does not start with the magic bytes.
    #[error("bad magic")]
    BadMagic,
    /// Another wire format version.
    #[error("unsupported version {0}")]
    Version(u8),
    /// The checksum does not match.
    #[error("checksum mismatch")]
    Checksum,
    /// From another cluster.
    #[error("datagram of another cluster")]
    OtherCluster,
    /// A frame runs past the end or has an unknown tag.
    #[error("malformed frame")]
    BadFrame,
    /// A fragment's index or count is out of range.
    #[error("bad fragment")]
    BadFragment,
}

/// The fixed part of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Hash of the cluster file.
    pub cluster: u64,
    /// The sender process's boot number.
    pub boot: u64,
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
}

/// One frame of a decoded datagram, borrowing from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole encoded message.
    Whole(&'a [u8]),
    /// One piece of a large message.
    Fragment {
        /// The sender's number for the message.
        message: u64,
        /// This piece's position.
        index: u16,
        /// How many pieces.
        count: u16,
        /// The piece.
        bytes: &'a [u8],
    },
}

fn put_header(buffer: &mut Vec<u8>, header: &Header) {
    buffer.extend_from_slice(&MAGIC);
    buffer.push(VERSION);
    buffer.extend_from_slice(&header.cluster.to_le_bytes());
    buffer.extend_from_slice(&header.boot.to_le_bytes());
    buffer.extend_from_slice(&header.from.to_le_bytes());
    buffer.extend_from_slice(&header.to.to_le_bytes());
}

fn seal(buffer: &mut Vec<u8>) {
    let sum = xxhash_rust::xxh3::xxh3_64(buffer);
    buffer.extend_from_slice(&sum.to_le_bytes());
}

/// Packs encoded messages for one destination into datagrams of at most `datagram_max` bytes.
/// Messages too large for one datagram are fragmented; `next_message` numbers them.
pub struct Packer {
    header: Header,
    datagram_max: usize,
    current: Vec<u8>,
    /// Finished datagrams, ready to send.
    pub ready: Vec<Vec<u8>>,
}

impl Packer {
    /// A packer for datagrams with this header.
    pub fn new(header: Header, datagram_max: usize) -> Self {
        let datagram_max = datagram_max.clamp(HEADER_LEN + CHECKSUM_LEN + FRAGMENT_FRAME_LEN + 64, DATAGRAM_MAX);
        Packer { header, datagram_max, current: Vec::new(), ready: Vec::new() }
    }

    fn room(&self) -> usize {
        let used = if self.current.is_empty() { HEADER_LEN } else { self.current.len() };
        self.datagram_max.saturating_sub(used + CHECKSUM_LEN)
    }

    fn start_if_empty(&mut self) {
        if self.current.is_empty() {
            put_header(&mut self.current, &self.header);
        }
    }

    /// Closes the datagram being filled, if any.
    pub fn finish(&mut self) {
        if self.current.len() > HEADER_LEN {
            let mut done = std::mem::take(&mut self.current);
            seal(&mut done);
            self.ready.push(done);
        }
        self.current.clear();
    }

    /// Adds one encoded message; `message_number` names it if it must be fragmented.
    pub fn push(&mut self, encoded: &[u8], message_number: u64) {
        if encoded.len() + WHOLE_FRAME_LEN <= self.room() {
            self.start_if_empty();
            self.current.push(0);
            self.current.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
            self.current.extend_from_slice(encoded);
            return;
        }
        let single = self.datagram_max - HEADER_LEN - CHECKSUM_LEN - WHOLE_FRAME_LEN;
        if encoded.len() <= single {
            self.finish();
            self.push(encoded, message_number);
            return;
        }
        self.finish();
        let piece = self.datagram_max - HEADER_LEN - CHECKSUM_LEN - FRAGMENT_FRAME_LEN;
        let count = encoded.len().div_ceil(piece);
        assert!(count <= FRAGMENTS_MAX, "the host bounds message size below {FRAGMENTS_MAX} fragments");
        for (index, bytes) in encoded.chunks(piece).enumerate() {
            self.start_if_empty();
            self.current.push(1);
            self.current.extend_from_slice(&message_number.to_le_bytes());
            self.current.extend_from_slice(&(index as u16).to_le_bytes());
            self.current.extend_from_slice(&(count as u16).to_le_bytes());
            self.current.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            self.current.extend_from_slice(bytes);
            self.finish();
        }
    }
}

/// The largest message the packer can fragment with `datagram_max`-byte datagrams.
pub fn message_len_max(datagram_max: usize) -> usize {
    (datagram_max.clamp(1, DATAGRAM_MAX).saturating_sub(HEADER_LEN + CHECKSUM_LEN + FRAGMENT_FRAME_LEN)) * FRAGMENTS_MAX
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Checks a datagram's header and checksum and returns its header and frames.
pub fn decode(datagram: &[u8], cluster: u64) -> Result<(Header, Vec<Frame<'_>>), WireError> {
    if datagram.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(WireError::TooShort);
    }
    if datagram[0..2] != MAGIC {
        return Err(WireError::BadMagic);
    }
    if datagram[2] != VERSION {
        return Err(WireError::Version(datagram[2]));
    }
    let body_len = datagram.len() - CHECKSUM_LEN;
    let sum = read_u64(datagram, body_len).ok_or(WireError::TooShort)?;
    if xxhash_rust::xxh3::xxh3_64(&datagram[..body_len]) != sum {
        return Err(WireError::Checksum);
    }
    let header = Header {
        cluster: read_u64(datagram, 3).ok_or(WireError::TooShort)?,
        boot: read_u64(datagram, 11).ok_or(WireError::TooShort)?,
        from: read_u32(datagram, 19).ok_or(WireError::TooShort)?,
        to: read_u32(datagram, 23).ok_or(WireError::TooShort)?,
    };
    if header.cluster != cluster {
        return Err(WireError::OtherCluster);
    }
    let body = &datagram[..body_len];
    let mut at = HEADER_LEN;
    let mut frames = Vec::new();
    while at < body.len() {
        match body[at] {
            0 => {
                let len = read_u32(body, at + 1).ok_or(WireError::BadFrame)? as usize;
                let start = at + WHOLE_FRAME_LEN;
                let bytes =
                    body.get(start..start.checked_add(len).ok_or(WireError::BadFrame)?).ok_or(WireError::BadFrame)?;
                frames.push(Frame::Whole(bytes));
                at = start + len;
            }
            1 => {
                let message = read_u64(body, at + 1).ok_or(WireError::BadFrame)?;
                let index = read_u16(body, at + 9).ok_or(WireError::BadFrame)?;
                let count = read_u16(body, at + 11).ok_or(WireError::BadFrame)?;
                let len = read_u32(body, at + 13).ok_or(WireError::BadFrame)? as usize;
                if count == 0 || index >= count || count as usize > FRAGMENTS_MAX {
                    return Err(WireError::BadFragment);
                }
                let start = at + FRAGMENT_FRAME_LEN;
                let bytes =
                    body.get(start..start.checked_add(len).ok_or(WireError::BadFrame)?).ok_or(WireError::BadFrame)?;
                frames.push(Frame::Fragment { message, index, count, bytes });
                at = start + len;
            }
            _ => return Err(WireError::BadFrame),
        }
    }
    Ok((header, frames))
}

/// A message being reassembled.
struct Partial {
    pieces: Vec<Option<Vec<u8>>>,
    received: usize,
    bytes: usize,
    started_ns: u64,
}

/// Reassembles fragmented messages, keyed by sender, sender boot and message number. Bounded in
/// entries and bytes; the oldest entry is evicted when full, and entries expire.
pub struct Reassembly {
    partial: BTreeMap<(u32, u64, u64), Partial>,
    entries_max: usize,
    bytes_max: usize,
    expiry_ns: u64,
    /// Messages given up (evicted, expired or inconsistent).
    pub abandoned: u64,
}

impl Reassembly {
    /// A table holding at most `entries_max` partial messages of at most `bytes_max` bytes each.
    pub fn new(entries_max: usize, bytes_max: usize, expiry_ns: u64) -> Self {
        Reassembly { partial: BTreeMap::new(), entries_max: entries_max.max(1), bytes_max, expiry_ns, abandoned: 0 }
    }

    /// Adds a fragment; returns the whole message once every piece arrived.
    pub fn add(
        &mut self,
        now_ns: u64,
        header: &Header,
        message: u64,
        index: u16,
        count: u16,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let expiry = self.expiry_ns;
        let before = self.partial.len();
        self.partial.retain(|_, p| now_ns.saturating_sub(p.started_ns) < expiry);
        self.abandoned += (before - self.partial.len()) as u64;
        let key = (header.from, header.boot, message);
        if !self.partial.contains_key(&key) && self.partial.len() >= self.entries_max {
            let oldest = self.partial.iter().min_by_key(|(_, p)| p.started_ns).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.partial.remove(&oldest);
                self.abandoned += 1;
            }
        }
        let entry = self.partial.entry(key).or_insert_with(|| Partial {
            pieces: vec![None; count as usize],
            received: 0,
            bytes: 0,
            started_ns: now_ns,
        });
        if entry.pieces.len() != count as usize || entry.bytes + bytes.len() > self.bytes_max {
            self.partial.remove(&key);
            self.abandoned += 1;
            return None;
        }
        let slot = &mut entry.pieces[index as usize];
        if slot.is_none() {
            *slot = Some(bytes.to_vec());
            entry.received += 1;
            entry.bytes += bytes.len();
        }
        if entry.received < entry.pieces.len() {
            return None;
        }
        let done = self.partial.remove(&key)?;
        let mut whole = Vec::with_capacity(done.bytes);
        for piece in done.pieces.into_iter().flatten() {
            whole.extend_from_slice(&piece);
        }
        Some(whole)
    }

    /// Partial messages held.
    pub fn len(&self) -> usize {
        self.partial.len()
    }

    /// True when nothing is being reassembled.
    pub fn is_empty(&self) -> bool {
        self.partial.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> Header {
        Header { cluster: 7, boot: 9, from: 1, to: 2 }
    }

    fn unpack(datagrams: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut table = Reassembly::new(8, 1 << 24, u64::MAX);
        let mut out = Vec::new();
        for datagram in datagrams {
            let (h, frames) = decode(datagram, 7).expect("valid");
            for frame in frames {
                match frame {
                    Frame::Whole(bytes) => out.push(bytes.to_vec()),
                    Frame::Fragment { message, index, count, bytes } => {
                        out.extend(table.add(0, &h, message, index, count, bytes));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn packs_small_and_fragments_large_messages() {
        // Goal: many small messages share datagrams and a large one is split and rebuilt, in
        // order. Method: pack, decode, reassemble, compare.
        let mut packer = Packer::new(header(), 1_000);
        let messages: Vec<Vec<u8>> = vec![vec![1; 10], vec![2; 20], vec![3; 5_000], vec![4; 30]];
        for (n, m) in messages.iter().enumerate() {
            packer.push(m, n as u64);
        }
        packer.finish();
        assert!(packer.ready.iter().all(|d| d.len() <= 1_000));
        assert_eq!(unpack(&packer.ready), messages);
    }

    #[test]
    fn corrupted_datagrams_are_typed_errors() {
        // Goal: a flipped bit, a wrong cluster or a truncation is reported, not accepted.
        let mut packer = Packer::new(header(), 1_000);
        packer.push(b"hello", 0);
        packer.finish();
        let good = packer.ready[0].clone();
        let mut flipped = good.clone();
        flipped[HEADER_LEN + 2] ^= 1;
        assert_eq!(decode(&flipped, 7).unwrap_err(), WireError::Checksum);
        assert_eq!(decode(&good, 8).unwrap_err(), WireError::OtherCluster);
        assert_eq!(decode(&good[..10], 7).unwrap_err(), WireError::TooShort);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2_000)) {
            // Goal: any byte string decodes to frames or a typed error.
            let _ = decode(&bytes, 7);
        }

        #[test]
        fn decode_never_panics_with_valid_checksum(mut bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            // Goal: a well-sealed datagram with a garbage body still cannot panic the decoder,
            // nor can its fragments panic reassembly.
            let mut datagram = Vec::new();
            put_header(&mut datagram, &header());
            datagram.append(&mut bytes);
            seal(&mut datagram);
            if let Ok((h, frames)) = decode(&datagram, 7) {
                let mut table = Reassembly::new(4, 1 << 16, 10);
                for frame in frames {
                    if let Frame::Fragment { message, index, count, bytes } = frame {
                        let _ = table.add(0, &h, message, index, count, bytes);
                    }
                }
            }
        }

        #[test]
        fn round_trip(messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3_000), 0..20)) {
            // Goal: whatever the sizes, every message comes out once, in order.
            let mut packer = Packer::new(header(), 1_200);
            for (n, m) in messages.iter().enumerate() {
                packer.push(m, n as u64);
            }
            packer.finish();
            prop_assert_eq!(unpack(&packer.ready), messages);
        }
    }
}
