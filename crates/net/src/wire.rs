//! The wire format: one UDP datagram carries a header, one or more frames and a checksum.
//!
//! ```text
//! magic "OR" | version u8 | flags u8 | cluster u64 | boot u64 | sequence u64 | frames... | tag [u8; 16]
//! frame: 0 | from u32 | to u32 | len u32 | postcard message                                  (a whole message)
//!        1 | from u32 | to u32 | message u64 | index u16 | count u16 | len u32 | bytes       (a fragment)
//! ```
//!
//! All integers are little-endian. `cluster` is a hash of the cluster's membership, so that
//! datagrams of another cluster on the same ports are dropped; `boot` is the sending process's
//! start time, which keeps fragments of an earlier incarnation of the sender from being glued to
//! new ones; `sequence` numbers the process's datagrams, for the replay window. The tag covers
//! everything before it: with a cluster key (flag bit 0) it is a keyed BLAKE3 MAC, so a datagram
//! from anyone without the key is dropped; without one it is an xxh3-128 checksum. Each
//! frame names its sending and receiving node, so one datagram carries messages between any
//! nodes of the two processes: a gateway's many client nodes share datagrams to a proxy, and the
//! proxy's replies to them share datagrams back. A message larger than a datagram is split into
//! fragments and reassembled in a bounded table. Every decoding failure is a typed
//! [`WireError`], never a panic.

pub mod replay;

use std::collections::BTreeMap;
use std::ops::Range;
use thiserror::Error;

/// First bytes of every datagram.
pub const MAGIC: [u8; 2] = *b"OR";
/// The wire format version; a datagram of another version is dropped. Version 2 moved the
/// sending and receiving node from the header into each frame; version 3 added the flags, the
/// sequence number and the 16-byte tag (a MAC with a cluster key).
pub const VERSION: u8 = 3;
/// Bytes of the header.
pub const HEADER_LEN: usize = 2 + 1 + 1 + 8 + 8 + 8;
/// Bytes of the trailing tag (a MAC or a checksum).
pub const TAG_LEN: usize = 16;
/// Where the header's sequence number lies.
const SEQUENCE_AT: usize = 20;
/// Flag bit: the tag is a MAC under the cluster key.
const FLAG_KEYED: u8 = 1;
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
const DATAGRAM_MIN: usize = HEADER_LEN + TAG_LEN + FRAGMENT_FRAME_LEN + 64;
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
    /// The checksum does not match (a datagram without a key).
    #[error("checksum mismatch")]
    Checksum,
    /// The MAC does not match: the sender does not have this cluster's key, or the datagram was
    /// changed on the way.
    #[error("authentication failed")]
    BadMac,
    /// A datagram without a MAC at a node that has a cluster key.
    #[error("datagram not authenticated")]
    Unauthenticated,
    /// A datagram with a MAC at a node without a cluster key.
    #[error("authenticated datagram, but this node has no cluster key")]
    NoKey,
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
    /// Hash of the cluster's membership.
    pub cluster: u64,
    /// The sender process's start time, ns since the Unix epoch: a later incarnation of a
    /// process has a larger one.
    pub boot: u64,
}

/// A decoded datagram's header and where it stands in its sender's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The header.
    pub header: Header,
    /// The sender's number for this datagram (counts up from 0 in each incarnation).
    pub sequence: u64,
    /// True when the tag was a MAC under the cluster key.
    pub keyed: bool,
}

/// A cluster's secret, as the key of the datagram MAC. Derived from the secret's bytes (a key
/// file's content, say), so a secret of any length and alphabet gives a uniform key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterKey([u8; 32]);

impl ClusterKey {
    /// The MAC key of a secret.
    pub fn derive(secret: &[u8]) -> Self {
        ClusterKey(blake3::derive_key("ordo 2026-11-27 cluster datagram MAC", secret))
    }
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)") // never print the secret
    }
}

/// The tag over `bytes`: a MAC under `key`, or a checksum without one.
fn tag(key: Option<&ClusterKey>, bytes: &[u8]) -> [u8; TAG_LEN] {
    let mut tag = [0; TAG_LEN];
    match key {
        Some(key) => tag.copy_from_slice(&blake3::keyed_hash(&key.0, bytes).as_bytes()[..TAG_LEN]),
        None => tag = xxhash_rust::xxh3::xxh3_128(bytes).to_le_bytes(),
    }
    tag
}

/// Finishes datagrams: numbers each one and writes its tag (a MAC with a key).
#[derive(Debug)]
pub struct Sealer {
    key: Option<ClusterKey>,
    next_sequence: u64,
}

impl Sealer {
    /// A sealer with the cluster key, if the cluster has one.
    pub fn new(key: Option<ClusterKey>) -> Self {
        Sealer { key, next_sequence: 0 }
    }

    /// Numbers and tags `datagram`, whose last [`TAG_LEN`] bytes are reserved for the tag.
    fn seal(&mut self, datagram: &mut [u8]) {
        let body_len = datagram.len() - TAG_LEN;
        datagram[3] = if self.key.is_some() { FLAG_KEYED } else { 0 };
        datagram[SEQUENCE_AT..SEQUENCE_AT + 8].copy_from_slice(&self.next_sequence.to_le_bytes());
        self.next_sequence += 1;
        let tag = tag(self.key.as_ref(), &datagram[..body_len]);
        datagram[body_len..].copy_from_slice(&tag);
    }
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

/// Writes a header whose flags and sequence number [`Sealer::seal`] fills in.
pub(crate) fn put_header(buffer: &mut Vec<u8>, header: &Header) {
    buffer.extend_from_slice(&MAGIC);
    buffer.push(VERSION);
    buffer.push(0);
    buffer.extend_from_slice(&header.cluster.to_le_bytes());
    buffer.extend_from_slice(&header.boot.to_le_bytes());
    buffer.extend_from_slice(&0u64.to_le_bytes());
}

/// Appends a frame that carries the whole message `encoded` (of `len` bytes) from `from` to `to`.
fn put_whole_frame(buffer: &mut Vec<u8>, from: u32, to: u32, len: u32, encoded: &[u8]) {
    buffer.push(0);
    buffer.extend_from_slice(&from.to_le_bytes());
    buffer.extend_from_slice(&to.to_le_bytes());
    buffer.extend_from_slice(&len.to_le_bytes());
    buffer.extend_from_slice(encoded);
}

/// Reserves the tag after the frames from `start` on, and seals that datagram.
pub(crate) fn seal(buffer: &mut Vec<u8>, start: usize, sealer: &mut Sealer) {
    buffer.extend_from_slice(&[0; TAG_LEN]);
    sealer.seal(&mut buffer[start..]);
}

/// One message from node `from` to node `to`, sealed alone in the datagram format (a header, one
/// whole frame, the tag), of any size up to `u32::MAX` bytes: what the TCP path of large
/// messages carries, so it is checked exactly as a datagram is.
pub fn seal_one(header: &Header, sealer: &mut Sealer, from: u32, to: u32, encoded: &[u8]) -> Vec<u8> {
    let len = u32::try_from(encoded.len()).expect("the host bounds a large message below 4 GiB");
    let mut bytes = Vec::with_capacity(HEADER_LEN + WHOLE_FRAME_LEN + encoded.len() + TAG_LEN);
    put_header(&mut bytes, header);
    put_whole_frame(&mut bytes, from, to, len, encoded);
    seal(&mut bytes, 0, sealer);
    bytes
}

/// The sending node the first frame of `datagram` names, read without any check: only to
/// choose which member's address to check the datagram against ([`decode`] then checks it all).
pub fn first_sender(datagram: &[u8]) -> Option<u32> {
    match datagram.get(HEADER_LEN)? {
        0 | 1 => read_u32(datagram, HEADER_LEN + 1),
        _ => None,
    }
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
        self.datagram_max.saturating_sub(used + TAG_LEN)
    }

    fn start_if_closed(&mut self) {
        if self.open.is_none() {
            self.open = Some(self.bytes.len());
            put_header(&mut self.bytes, &self.header);
        }
    }

    /// Closes and seals the datagram being filled, if any.
    pub fn finish(&mut self, sealer: &mut Sealer) {
        let Some(start) = self.open.take() else { return };
        debug_assert!(self.bytes.len() > start + HEADER_LEN, "an open datagram has a frame");
        seal(&mut self.bytes, start, sealer);
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
    /// must be fragmented. Datagrams it fills are sealed by `sealer`.
    pub fn push(&mut self, sealer: &mut Sealer, from: u32, to: u32, encoded: &[u8], message_number: u64) {
        if encoded.len() + WHOLE_FRAME_LEN <= self.room() {
            self.start_if_closed();
            put_whole_frame(&mut self.bytes, from, to, encoded.len() as u32, encoded);
            return;
        }
        let single = self.datagram_max - HEADER_LEN - TAG_LEN - WHOLE_FRAME_LEN;
        if encoded.len() <= single {
            self.finish(sealer);
            self.push(sealer, from, to, encoded, message_number);
            return;
        }
        self.finish(sealer);
        let piece = self.datagram_max - HEADER_LEN - TAG_LEN - FRAGMENT_FRAME_LEN;
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
            self.finish(sealer);
        }
    }
}

/// The largest message the packer can fragment with `datagram_max`-byte datagrams.
pub fn message_len_max(datagram_max: usize) -> usize {
    (datagram_max.clamp(DATAGRAM_MIN, DATAGRAM_MAX) - (HEADER_LEN + TAG_LEN + FRAGMENT_FRAME_LEN)) * FRAGMENTS_MAX
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

/// Checks a datagram's header, tag and every frame, and returns where it stands and its frames.
/// A node with a cluster `key` accepts only datagrams with a MAC under it; a node without one
/// only checksummed datagrams. A datagram with one bad frame is rejected whole.
pub fn decode<'a>(
    datagram: &'a [u8],
    cluster: u64,
    key: Option<&ClusterKey>,
) -> Result<(Received, Frames<'a>), WireError> {
    if datagram.len() < HEADER_LEN + TAG_LEN {
        return Err(WireError::TooShort);
    }
    if datagram[0..2] != MAGIC {
        return Err(WireError::BadMagic);
    }
    if datagram[2] != VERSION {
        return Err(WireError::Version(datagram[2]));
    }
    let keyed = datagram[3] & FLAG_KEYED != 0;
    match (keyed, key.is_some()) {
        (false, true) => return Err(WireError::Unauthenticated),
        (true, false) => return Err(WireError::NoKey),
        _ => {}
    }
    let body_len = datagram.len() - TAG_LEN;
    // Compared in constant time, so a forger learns nothing from how long a rejection took.
    let expected = tag(key, &datagram[..body_len]);
    if !constant_time_eq(&expected, &datagram[body_len..]) {
        return Err(if keyed { WireError::BadMac } else { WireError::Checksum });
    }
    let header = Header {
        cluster: read_u64(datagram, 4).ok_or(WireError::TooShort)?,
        boot: read_u64(datagram, 12).ok_or(WireError::TooShort)?,
    };
    let sequence = read_u64(datagram, SEQUENCE_AT).ok_or(WireError::TooShort)?;
    if header.cluster != cluster {
        return Err(WireError::OtherCluster);
    }
    let body = &datagram[..body_len];
    let mut at = HEADER_LEN;
    while at < body.len() {
        at = frame_at(body, at)?.1;
    }
    Ok((Received { header, sequence, keyed }, Frames { body, at: HEADER_LEN }))
}

/// Equality of two byte strings that takes the same time wherever they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
mod tests;
