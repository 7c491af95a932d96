//! The wire format: one UDP datagram carries a header, one or more frames and a checksum.
//!
//! ```text
//! magic "OR" | version u8 | cluster u64 | boot u64 | frames... | xxh3_64 u64
//! frame: 0 | from u32 | to u32 | len u32 | postcard message                                  (a whole message)
//!        1 | from u32 | to u32 | message u64 | index u16 | count u16 | len u32 | bytes       (a fragment)
//! ```
//!
//! All integers are little-endian. `cluster` is a hash of the cluster file, so that datagrams of
//! another cluster on the same ports are dropped; `boot` is a per-process random number that
//! keeps fragments of an earlier incarnation of the sender from being glued to new ones. Each
//! frame names its sending and receiving node, so one datagram carries messages between any
//! nodes of the two processes: a gateway's many client nodes share datagrams to a proxy, and the
//! proxy's replies to them share datagrams back. A message larger than a datagram is split into
//! fragments and reassembled in a bounded table. Every decoding failure is a typed
//! [`WireError`], never a panic.

use std::collections::BTreeMap;
use std::ops::Range;
use thiserror::Error;

/// First bytes of every datagram.
pub const MAGIC: [u8; 2] = *b"OR";
/// The wire format version; a datagram of another version is dropped. Version 2 moved the
/// sending and receiving node from the header into each frame.
pub const VERSION: u8 = 2;
/// Bytes of the header.
pub const HEADER_LEN: usize = 2 + 1 + 8 + 8;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 8;
/// Bytes of a whole-message frame's header.
const WHOLE_FRAME_LEN: usize = 1 + 4 + 4 + 4;
/// Bytes of a fragment frame's header.
const FRAGMENT_FRAME_LEN: usize = 1 + 4 + 4 + 8 + 2 + 2 + 4;
/// The largest UDP payload over IPv4.
pub const DATAGRAM_MAX: usize = 65_507;
/// Most fragments of one message (bounds reassembly memory).
pub const FRAGMENTS_MAX: usize = 1_024;
/// Buffer bytes a packer keeps between flushes.
pub const PACKER_KEEP_BYTES: usize = 1 << 20;
/// The smallest datagram the packer accepts: room for a fragment header and some bytes.
const DATAGRAM_MIN: usize = HEADER_LEN + CHECKSUM_LEN + FRAGMENT_FRAME_LEN + 64;
const _: () = assert!(DATAGRAM_MIN < DATAGRAM_MAX);

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

/// The fixed part of a datagram: which cluster and which incarnation of the sending process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Hash of the cluster file.
    pub cluster: u64,
    /// The sender process's boot number.
    pub boot: u64,
}

/// One frame of a decoded datagram, borrowing from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// The message, whole or a piece of it.
    pub body: Body<'a>,
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
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

pub(crate) fn put_header(buffer: &mut Vec<u8>, header: &Header) {
    buffer.extend_from_slice(&MAGIC);
    buffer.push(VERSION);
    buffer.extend_from_slice(&header.cluster.to_le_bytes());
    buffer.extend_from_slice(&header.boot.to_le_bytes());
}

pub(crate) fn seal(buffer: &mut Vec<u8>, start: usize) {
    let sum = xxhash_rust::xxh3::xxh3_64(&buffer[start..]);
    buffer.extend_from_slice(&sum.to_le_bytes());
}

/// Packs encoded messages for one destination process into datagrams of at most `datagram_max`
/// bytes. Messages too large for one datagram are fragmented; `message_number` names them.
///
/// All datagrams live in one buffer that is cleared, not freed, after each flush, so a steady
/// load packs without allocating.
pub struct Packer {
    header: Header,
    datagram_max: usize,
    bytes: Vec<u8>,
    /// Start of the datagram being filled, if one is open.
    open: Option<usize>,
    ready: Vec<Range<usize>>,
}

impl Packer {
    /// A packer for datagrams with this header.
    pub fn new(header: Header, datagram_max: usize) -> Self {
        let datagram_max = datagram_max.clamp(DATAGRAM_MIN, DATAGRAM_MAX);
        Packer { header, datagram_max, bytes: Vec::new(), open: None, ready: Vec::new() }
    }

    fn room(&self) -> usize {
        let used = match self.open {
            Some(start) => self.bytes.len() - start,
            None => HEADER_LEN,
        };
        self.datagram_max.saturating_sub(used + CHECKSUM_LEN)
    }

    fn start_if_closed(&mut self) {
        if self.open.is_none() {
            self.open = Some(self.bytes.len());
            put_header(&mut self.bytes, &self.header);
        }
    }

    /// Closes the datagram being filled, if any.
    pub fn finish(&mut self) {
        let Some(start) = self.open.take() else { return };
        debug_assert!(self.bytes.len() > start + HEADER_LEN, "an open datagram has a frame");
        seal(&mut self.bytes, start);
        debug_assert!(self.bytes.len() - start <= self.datagram_max);
        self.ready.push(start..self.bytes.len());
    }

    /// True when no datagram is finished or open.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The finished datagrams, in packing order.
    pub fn datagrams(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.ready.iter().map(|range| &self.bytes[range.clone()])
    }

    /// Forgets every datagram, keeping the buffer's memory (up to [`PACKER_KEEP_BYTES`], so one
    /// large state transfer does not pin its size for good).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.bytes.shrink_to(PACKER_KEEP_BYTES);
        self.ready.clear();
        self.open = None;
    }

    /// Adds one encoded message from node `from` to node `to`; `message_number` names it if it
    /// must be fragmented.
    pub fn push(&mut self, from: u32, to: u32, encoded: &[u8], message_number: u64) {
        if encoded.len() + WHOLE_FRAME_LEN <= self.room() {
            self.start_if_closed();
            self.bytes.push(0);
            self.bytes.extend_from_slice(&from.to_le_bytes());
            self.bytes.extend_from_slice(&to.to_le_bytes());
            self.bytes.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
            self.bytes.extend_from_slice(encoded);
            return;
        }
        let single = self.datagram_max - HEADER_LEN - CHECKSUM_LEN - WHOLE_FRAME_LEN;
        if encoded.len() <= single {
            self.finish();
            self.push(from, to, encoded, message_number);
            return;
        }
        self.finish();
        let piece = self.datagram_max - HEADER_LEN - CHECKSUM_LEN - FRAGMENT_FRAME_LEN;
        let count = encoded.len().div_ceil(piece);
        assert!(count <= FRAGMENTS_MAX, "the host bounds message size below {FRAGMENTS_MAX} fragments");
        for (index, bytes) in encoded.chunks(piece).enumerate() {
            self.start_if_closed();
            self.bytes.push(1);
            self.bytes.extend_from_slice(&from.to_le_bytes());
            self.bytes.extend_from_slice(&to.to_le_bytes());
            self.bytes.extend_from_slice(&message_number.to_le_bytes());
            self.bytes.extend_from_slice(&(index as u16).to_le_bytes());
            self.bytes.extend_from_slice(&(count as u16).to_le_bytes());
            self.bytes.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            self.bytes.extend_from_slice(bytes);
            self.finish();
        }
    }
}

/// The largest message the packer can fragment with `datagram_max`-byte datagrams.
pub fn message_len_max(datagram_max: usize) -> usize {
    (datagram_max.clamp(DATAGRAM_MIN, DATAGRAM_MAX) - (HEADER_LEN + CHECKSUM_LEN + FRAGMENT_FRAME_LEN)) * FRAGMENTS_MAX
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at.checked_add(2)?)?.try_into().ok()?))
}
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Reads the frame at `at` of a checksummed body; returns it and where the next one starts.
fn frame_at(body: &[u8], at: usize) -> Result<(Frame<'_>, usize), WireError> {
    let from = read_u32(body, at + 1).ok_or(WireError::BadFrame)?;
    let to = read_u32(body, at + 5).ok_or(WireError::BadFrame)?;
    let (start, len, body_of) = match body[at] {
        0 => {
            let len = read_u32(body, at + 9).ok_or(WireError::BadFrame)? as usize;
            (at + WHOLE_FRAME_LEN, len, None)
        }
        1 => {
            let message = read_u64(body, at + 9).ok_or(WireError::BadFrame)?;
            let index = read_u16(body, at + 17).ok_or(WireError::BadFrame)?;
            let count = read_u16(body, at + 19).ok_or(WireError::BadFrame)?;
            let len = read_u32(body, at + 21).ok_or(WireError::BadFrame)? as usize;
            if count == 0 || index >= count || count as usize > FRAGMENTS_MAX {
                return Err(WireError::BadFragment);
            }
            (at + FRAGMENT_FRAME_LEN, len, Some((message, index, count)))
        }
        _ => return Err(WireError::BadFrame),
    };
    let end = start.checked_add(len).ok_or(WireError::BadFrame)?;
    let bytes = body.get(start..end).ok_or(WireError::BadFrame)?;
    let body = match body_of {
        None => Body::Whole(bytes),
        Some((message, index, count)) => Body::Fragment { message, index, count, bytes },
    };
    Ok((Frame { from, to, body }, end))
}

/// The frames of a datagram that [`decode`] checked; iterating cannot fail.
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Frame<'a>;

    fn next(&mut self) -> Option<Frame<'a>> {
        if self.at >= self.body.len() {
            return None;
        }
        // `decode` walked these same frames without error, so this cannot fail; stop anyway
        // rather than panic if it ever did.
        let (frame, next) = frame_at(self.body, self.at).ok()?;
        self.at = next;
        Some(frame)
    }
}

/// Checks a datagram's header, checksum and every frame, and returns its header and frames.
/// A datagram with one bad frame is rejected whole.
pub fn decode(datagram: &[u8], cluster: u64) -> Result<(Header, Frames<'_>), WireError> {
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
    };
    if header.cluster != cluster {
        return Err(WireError::OtherCluster);
    }
    let body = &datagram[..body_len];
    let mut at = HEADER_LEN;
    while at < body.len() {
        at = frame_at(body, at)?.1;
    }
    Ok((header, Frames { body, at: HEADER_LEN }))
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

    /// Adds a fragment from node `from` of the process incarnation `boot`; returns the whole
    /// message once every piece arrived.
    #[allow(clippy::too_many_arguments)] // the fields of one fragment frame, passed as they are decoded
    pub fn add(
        &mut self,
        now_ns: u64,
        from: u32,
        boot: u64,
        message: u64,
        index: u16,
        count: u16,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let expiry = self.expiry_ns;
        let before = self.partial.len();
        self.partial.retain(|_, p| now_ns.saturating_sub(p.started_ns) < expiry);
        self.abandoned += (before - self.partial.len()) as u64;
        let key = (from, boot, message);
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
        Header { cluster: 7, boot: 9 }
    }

    fn datagrams(packer: &Packer) -> Vec<Vec<u8>> {
        packer.datagrams().map(<[u8]>::to_vec).collect()
    }

    /// Decodes and reassembles: (from, to, message) in arrival order.
    fn unpack(datagrams: &[Vec<u8>]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut table = Reassembly::new(8, 1 << 24, u64::MAX);
        let mut out = Vec::new();
        for datagram in datagrams {
            let (h, frames) = decode(datagram, 7).expect("valid");
            for frame in frames {
                match frame.body {
                    Body::Whole(bytes) => out.push((frame.from, frame.to, bytes.to_vec())),
                    Body::Fragment { message, index, count, bytes } => {
                        let whole = table.add(0, frame.from, h.boot, message, index, count, bytes);
                        out.extend(whole.map(|w| (frame.from, frame.to, w)));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn packs_small_and_fragments_large_messages() {
        // Goal: many small messages between several node pairs share datagrams and a large one
        // is split and rebuilt, in order, each with its own sender and receiver. Method: pack,
        // decode, reassemble, compare.
        let mut packer = Packer::new(header(), 1_000);
        let messages: Vec<(u32, u32, Vec<u8>)> =
            vec![(1, 2, vec![1; 10]), (3, 2, vec![2; 20]), (1, 4, vec![3; 5_000]), (5, 6, vec![4; 30])];
        for (n, (from, to, m)) in messages.iter().enumerate() {
            packer.push(*from, *to, m, n as u64);
        }
        packer.finish();
        assert!(packer.datagrams().all(|d| d.len() <= 1_000));
        assert_eq!(unpack(&datagrams(&packer)), messages);
        // The two small messages before the large one share its first datagram.
        let (_, first) = decode(packer.datagrams().next().expect("one"), 7).expect("valid");
        assert_eq!(first.filter(|f| matches!(f.body, Body::Whole(_))).count(), 2);
        packer.clear();
        assert!(packer.is_empty());
        assert_eq!(packer.datagrams().len(), 0);
    }

    #[test]
    fn corrupted_datagrams_are_typed_errors() {
        // Goal: a flipped bit, a wrong cluster, a wrong version or a truncation is reported,
        // not accepted.
        let mut packer = Packer::new(header(), 1_000);
        packer.push(1, 2, b"hello", 0);
        packer.finish();
        let good = datagrams(&packer).remove(0);
        let mut flipped = good.clone();
        flipped[HEADER_LEN + 2] ^= 1;
        assert_eq!(decode(&flipped, 7).unwrap_err(), WireError::Checksum);
        assert_eq!(decode(&good, 8).unwrap_err(), WireError::OtherCluster);
        assert_eq!(decode(&good[..10], 7).unwrap_err(), WireError::TooShort);
        let mut old = good.clone();
        old[2] = 1;
        assert_eq!(decode(&old, 7).unwrap_err(), WireError::Version(1));
    }

    #[test]
    fn a_bad_frame_rejects_the_whole_datagram() {
        // Goal: a well-sealed datagram whose second frame runs past the end delivers nothing.
        let mut datagram = Vec::new();
        put_header(&mut datagram, &header());
        datagram.extend_from_slice(&[0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 42]);
        datagram.extend_from_slice(&[0, 1, 0, 0, 0, 2, 0, 0, 0, 9, 0, 0, 0, 42]);
        seal(&mut datagram, 0);
        assert_eq!(decode(&datagram, 7).unwrap_err(), WireError::BadFrame);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2_000)) {
            // Goal: any byte string decodes to frames or a typed error.
            if let Ok((_, frames)) = decode(&bytes, 7) {
                let _ = frames.count();
            }
        }

        #[test]
        fn decode_never_panics_with_valid_checksum(mut bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            // Goal: a well-sealed datagram with a garbage body still cannot panic the decoder,
            // nor can its fragments panic reassembly.
            let mut datagram = Vec::new();
            put_header(&mut datagram, &header());
            datagram.append(&mut bytes);
            seal(&mut datagram, 0);
            if let Ok((h, frames)) = decode(&datagram, 7) {
                let mut table = Reassembly::new(4, 1 << 16, 10);
                for frame in frames {
                    if let Body::Fragment { message, index, count, bytes } = frame.body {
                        let _ = table.add(0, frame.from, h.boot, message, index, count, bytes);
                    }
                }
            }
        }

        #[test]
        fn round_trip(
            messages in proptest::collection::vec(
                (0u32..4, 0u32..4, proptest::collection::vec(any::<u8>(), 0..3_000)), 0..20),
        ) {
            // Goal: whatever the sizes and node pairs, every message comes out once, in order,
            // with its sender and receiver, and no datagram exceeds the limit.
            let mut packer = Packer::new(header(), 1_200);
            for (n, (from, to, m)) in messages.iter().enumerate() {
                packer.push(*from, *to, m, n as u64);
            }
            packer.finish();
            prop_assert!(packer.datagrams().all(|d| d.len() <= 1_200));
            prop_assert_eq!(unpack(&datagrams(&packer)), messages);
        }
    }
}
