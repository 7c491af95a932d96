//! Fuzz bodies: one function per decoder that reads bytes from outside (issue 20). Each takes
//! arbitrary bytes, must never panic on them, and asserts what the decoder promises (a parsed
//! request re-encodes to the same words, decoded frames lie inside the datagram, recovered
//! records never exceed the file). The cargo-fuzz targets under `fuzz/` call them, and so does
//! the stable test `tests/fuzz_bodies.rs` with its seed corpora and a short budget of mutated
//! inputs, so CI runs every body without nightly. `docs/fuzzing.md` says how to run them.
//!
//! A panic here is a finding: a decoder must return a typed error for bad input (STYLE 11).

use crate::config::ClusterFile;
use crate::faults::FaultShim;
use crate::resp;
use crate::storage;
use crate::wire::{self, Body, ClusterKey, Frame, Header, Packer, Reassembly, Sealer, WireError};
use bytes::BytesMut;
use ordo_core::Protocol;
use serde::{Serialize, de::DeserializeOwned};

/// The cluster hash the sealed wire body stamps on its datagrams.
const SEALED_CLUSTER: u64 = 7;
/// Most partial messages the wire bodies' reassembly table holds (small, so eviction runs).
const REASSEMBLY_ENTRIES_MAX: usize = 4;
/// Most bytes of one message the wire bodies reassemble.
const REASSEMBLY_BYTES_MAX: usize = 1 << 16;

/// RESP requests: `data` as bytes read from a connection. Every parsed command, re-encoded as a
/// RESP array, parses back to the same words; an incomplete request consumes nothing; and the
/// same bytes delivered in two reads give the same commands and the same error as in one.
pub fn resp(data: &[u8]) {
    let (whole, error) = parse_all(data, data.len());
    for command in &whole {
        let encoded = encode_request(command);
        let mut buffer = BytesMut::from(&encoded[..]);
        let again = resp::parse(&mut buffer).expect("a re-encoded command parses");
        assert_eq!(again.as_ref(), Some(command), "a re-encoded command parses to the same words");
        assert!(buffer.is_empty(), "a re-encoded command is consumed whole");
    }
    // The split point comes from the data, so the fuzzer explores it too.
    let split = data.first().map_or(0, |&b| usize::from(b) * data.len() / 256);
    if data.len() <= resp::LINE_MAX {
        assert_eq!(parse_all(data, split), (whole, error), "two reads parse as one");
    }
}

/// Parses every request of `data`, delivered as two reads split at `split`: the commands, and
/// the error that stopped the parse, if any.
fn parse_all(data: &[u8], split: usize) -> (Vec<Vec<bytes::Bytes>>, Option<resp::RespError>) {
    let mut buffer = BytesMut::from(&data[..split]);
    let mut commands = Vec::new();
    for rest in [&data[split..], &[][..]] {
        loop {
            let before = buffer.len();
            match resp::parse(&mut buffer) {
                Ok(Some(command)) => {
                    assert!(buffer.len() < before, "a parsed command consumes bytes");
                    commands.push(command);
                }
                Ok(None) => {
                    assert_eq!(buffer.len(), before, "an incomplete request consumes nothing");
                    break;
                }
                Err(error) => return (commands, Some(error)),
            }
        }
        buffer.extend_from_slice(rest);
    }
    (commands, None)
}

/// A command as a client library sends it: an array of bulk strings.
fn encode_request(command: &[bytes::Bytes]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", command.len()).into_bytes();
    for word in command {
        out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        out.extend_from_slice(word);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The key of the authenticated fuzz targets.
fn fuzz_key() -> ClusterKey {
    ClusterKey::derive(b"the fuzzers' cluster secret")
}

/// A datagram as received, tag and all: what any sender on the network can put on a port,
/// decoded by a node without a key and by one with a key. The cluster hash is taken from the
/// datagram itself, so only the tag stands between the fuzzer and the frames. Whatever decodes
/// obeys the checks of [`wire_frames`].
pub fn wire(data: &[u8]) {
    let cluster = data.get(4..12).map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let key = fuzz_key();
    for key in [None, Some(&key)] {
        if let Ok((received, frames)) = wire::decode(data, cluster, key) {
            assert_eq!(received.header.cluster, cluster);
            assert_eq!(received.keyed, key.is_some());
            wire_frames(data, received.header, frames.collect());
        }
    }
}

/// A datagram body behind a valid header and MAC: what a peer that holds the cluster key (a
/// member of the cluster) can send. Decoding may only fail on a frame; frames lie inside the
/// datagram; fragments go through a small reassembly table; and the whole messages, packed
/// again, decode to the same messages.
pub fn wire_sealed(data: &[u8]) {
    let header = Header { cluster: SEALED_CLUSTER, boot: 9 };
    let mut datagram = Vec::with_capacity(wire::HEADER_LEN + data.len() + wire::TAG_LEN);
    wire::put_header(&mut datagram, &header);
    datagram.extend_from_slice(data);
    wire::seal(&mut datagram, 0, &mut Sealer::new(Some(fuzz_key())));
    match wire::decode(&datagram, SEALED_CLUSTER, Some(&fuzz_key())) {
        Ok((decoded, frames)) => {
            assert_eq!(decoded.header, header);
            wire_frames(&datagram, header, frames.collect());
        }
        Err(error) => {
            assert!(matches!(error, WireError::BadFrame | WireError::BadFragment), "a sealed datagram failed: {error}")
        }
    }
}

/// The checks on a decoded datagram's frames: each lies inside the datagram, in order, without
/// overlap; the fragments reassemble within the table's bounds; and the messages delivered,
/// packed again, decode to the same messages.
fn wire_frames(datagram: &[u8], header: Header, frames: Vec<Frame<'_>>) {
    let range = datagram.as_ptr_range();
    let mut previous_end = datagram.as_ptr();
    for frame in &frames {
        let bytes = match frame.body {
            Body::Whole(bytes) | Body::Fragment { bytes, .. } => bytes,
        };
        let inside = bytes.as_ptr_range();
        assert!(range.start <= inside.start && inside.end <= range.end, "a frame lies inside its datagram");
        assert!(previous_end <= inside.start, "frames come in order, without overlap");
        previous_end = inside.end;
    }
    let delivered = deliver(&frames, header.boot);
    let mut packer = Packer::new(header, wire::DATAGRAM_MAX);
    let mut sealer = Sealer::new(None);
    for (number, (from, to, message)) in delivered.iter().enumerate() {
        packer.push(&mut sealer, *from, *to, message, number as u64);
    }
    packer.finish(&mut sealer);
    let mut again = Vec::new();
    let mut table = Reassembly::new(REASSEMBLY_ENTRIES_MAX, usize::MAX, u64::MAX);
    for datagram in packer.datagrams() {
        let (_, frames) = wire::decode(datagram, header.cluster, None).expect("a packed datagram decodes");
        for frame in frames {
            again.extend(deliver_one(&mut table, &frame, header.boot, 0));
        }
    }
    assert_eq!(again, delivered, "delivered messages, packed again, decode to the same messages");
}

/// The messages the frames deliver: whole ones, and fragmented ones once reassembled (in a
/// small table, one nanosecond apart, so eviction and expiry both run).
fn deliver(frames: &[Frame<'_>], boot: u64) -> Vec<(u32, u32, Vec<u8>)> {
    let mut table = Reassembly::new(REASSEMBLY_ENTRIES_MAX, REASSEMBLY_BYTES_MAX, 64);
    let mut delivered = Vec::new();
    let mut fed = 0;
    for (now_ns, frame) in frames.iter().enumerate() {
        if let Body::Fragment { bytes, .. } = frame.body {
            fed += bytes.len();
        }
        if let Some(message) = deliver_one(&mut table, frame, boot, now_ns as u64) {
            if matches!(frame.body, Body::Fragment { .. }) {
                assert!(message.2.len() <= REASSEMBLY_BYTES_MAX, "a reassembled message stays in bounds");
                assert!(message.2.len() <= fed, "a reassembled message is made of fragments received");
            }
            delivered.push(message);
        }
        assert!(table.len() <= REASSEMBLY_ENTRIES_MAX, "the reassembly table stays in bounds");
    }
    delivered
}

fn deliver_one(table: &mut Reassembly, frame: &Frame<'_>, boot: u64, now_ns: u64) -> Option<(u32, u32, Vec<u8>)> {
    let message = match frame.body {
        Body::Whole(bytes) => bytes.to_vec(),
        Body::Fragment { message, index, count, bytes } => {
            table.add(now_ns, frame.from, boot, message, index, count, bytes)?
        }
    };
    Some((frame.from, frame.to, message))
}

/// A durable file's bytes, read back as records of byte strings. The intact prefix never
/// exceeds the file; re-encoded, in one frame each or in many, the records read back the same;
/// a record of many frames cut short is a torn tail; recovery agrees with
/// decoding; and an intact record found after a bad one is where it says.
pub fn storage(data: &[u8]) {
    let (records, intact) = storage::decode_records::<Vec<u8>>(data);
    assert!(intact <= data.len(), "the intact prefix lies inside the file");
    let smallest = storage::RECORD_HEADER_LEN + 1;
    assert!(records.len() * smallest <= intact, "every record takes at least {smallest} bytes");
    let mut encoded = Vec::new();
    for record in &records {
        storage::encode_record(record, storage::RECORD_LEN_MAX, &mut encoded).expect("a read record fits");
    }
    let (again, again_intact) = storage::decode_records::<Vec<u8>>(&encoded);
    assert_eq!(again, records, "re-encoded records read back the same");
    assert_eq!(again_intact, encoded.len(), "re-encoded records are intact");
    // The same records in frames of 3 bytes (as a record over FRAME_BODY_MAX is written) read
    // back the same, and a cut inside the last record keeps exactly the records before it.
    let mut framed = Vec::new();
    for record in &records {
        storage::encode_record_in_frames(record, storage::RECORD_LEN_MAX, 3, &mut framed).expect("fits");
    }
    let (again, again_intact) = storage::decode_records::<Vec<u8>>(&framed);
    assert_eq!(again, records, "records in many frames read back the same");
    assert_eq!(again_intact, framed.len(), "records in many frames are intact");
    if !records.is_empty() {
        let cut = framed.len() - 1;
        let recovered = storage::recover_records::<Vec<u8>>(&framed[..cut]).expect("a torn last record is a torn tail");
        assert_eq!(recovered.records, records[..records.len() - 1], "a torn record of many frames is dropped alone");
    }
    match storage::recover_records::<Vec<u8>>(data) {
        Ok(recovered) => {
            assert_eq!(recovered.intact, intact, "recovery keeps the intact prefix");
            assert_eq!(recovered.records, records, "recovery keeps the intact records");
        }
        Err(message) => assert!(message.contains(&format!("byte offset {intact}")), "names the bad record: {message}"),
    }
    if let Some(next) = storage::intact_record_after(data, intact) {
        assert!(intact < next && next < data.len(), "an intact record after a bad one lies beyond it");
        assert!(storage::frame_at(data, next).is_some(), "the record found is intact");
    }
    let prefix = storage::recover_records::<Vec<u8>>(&data[..intact]).expect("an intact prefix recovers");
    assert_eq!(prefix.records, records, "the intact prefix recovers alone");
}

/// A cluster file's text. What parses writes back as TOML that parses to the same file, and
/// every name and host reference resolves or fails with an error. Returns the file, for
/// [`cluster_placement`] with the protocol it names.
pub fn cluster_file(data: &[u8]) -> Option<ClusterFile> {
    let text = std::str::from_utf8(data).ok()?;
    let file = ClusterFile::parse(text).ok()?;
    let written = file.to_toml();
    let again = ClusterFile::parse(&written).expect("a written cluster file parses");
    assert_eq!(again.to_toml(), written, "a written cluster file reads back the same");
    assert_eq!(again.cluster_hash(), file.cluster_hash(), "the cluster hash is stable");
    for (index, node) in file.nodes.iter().enumerate() {
        let first = file.entry(&node.name).expect("a node's own name resolves");
        assert!(first <= index, "a name resolves to its first entry");
        if let Ok(hosting) = file.hosting_entry(index) {
            assert!(hosting < file.nodes.len(), "a hosting entry is an entry");
        }
    }
    Some(file)
}

/// What a node process does with a cluster file of protocol `P` before it runs: the protocol's
/// options, the topology, the fault shim. Errors are fine; panics are not. A placement covers
/// every entry's node, and the shim decides a few datagrams' fate.
pub fn cluster_placement<P: Protocol>(file: &ClusterFile) {
    let Ok(config) = file.protocol_config::<P>() else { return };
    let Ok(placement) = file.placement::<P>(&config) else { return };
    assert_eq!(placement.entry_of.len(), placement.topology.nodes.len(), "every node has an entry");
    assert!(placement.entry_of.iter().all(|&entry| entry < file.nodes.len()), "entries exist");
    let Ok(mut shim) = FaultShim::new(&file.faults, &placement.topology, file.runtime.seed) else { return };
    let nodes = placement.topology.nodes.len() as u32;
    for fault in 0..file.faults.faults.len() as u64 {
        for elapsed_ns in [0, fault, 1_000_000_000 * fault, u64::MAX] {
            let _ = shim.decide(elapsed_ns, 0, nodes - 1);
            let _ = shim.due_node_faults(elapsed_ns, (fault % u64::from(nodes)) as u32);
        }
    }
}

/// A peer's message bytes for protocol `P`, as the host decodes them, and the same bytes as a
/// durable record of `P`, as a restarting node decodes them. What decodes encodes, and its
/// encoding decodes and encodes again to the same bytes.
pub fn message<P: Protocol>(data: &[u8]) {
    round_trip::<P::Message>(data);
    round_trip::<P::Durable>(data);
}

fn round_trip<T: Serialize + DeserializeOwned>(data: &[u8]) {
    let Ok(value) = postcard::from_bytes::<T>(data) else { return };
    let encoded = postcard::to_allocvec(&value).expect("a decoded value encodes");
    let again = postcard::from_bytes::<T>(&encoded).expect("an encoded value decodes");
    let encoded_again = postcard::to_allocvec(&again).expect("a decoded value encodes");
    assert_eq!(encoded_again, encoded, "encoding is stable across a round trip");
}
