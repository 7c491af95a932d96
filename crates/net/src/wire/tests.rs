use super::*;
use proptest::prelude::*;

fn header() -> Header {
    Header { cluster: 7, boot: 9 }
}

fn datagrams(packer: &Packer) -> Vec<Vec<u8>> {
    packer.datagrams().map(<[u8]>::to_vec).collect()
}

/// Packs `messages` (from, to, bytes) into datagrams of at most `datagram_max` bytes.
fn pack(messages: &[(u32, u32, Vec<u8>)], datagram_max: usize, sealer: &mut Sealer) -> Packer {
    let mut packer = Packer::new(header(), datagram_max);
    for (n, (from, to, m)) in messages.iter().enumerate() {
        packer.push(sealer, *from, *to, m, n as u64);
    }
    packer.finish(sealer);
    packer
}

/// Decodes and reassembles: (from, to, message) in arrival order.
fn unpack(datagrams: &[Vec<u8>], key: Option<&ClusterKey>) -> Vec<(u32, u32, Vec<u8>)> {
    let mut table = Reassembly::new(8, 1 << 24, u64::MAX);
    let mut out = Vec::new();
    for datagram in datagrams {
        let (received, frames) = decode(datagram, 7, key).expect("valid");
        for frame in frames {
            match frame.body {
                Body::Whole(bytes) => out.push((frame.from, frame.to, bytes.to_vec())),
                Body::Fragment { message, index, count, bytes } => {
                    let boot = received.header.boot;
                    let whole = table.add(0, frame.from, boot, message, index, count, bytes);
                    out.extend(whole.map(|w| (frame.from, frame.to, w)));
                }
            }
        }
    }
    out
}

fn one_datagram(key: Option<ClusterKey>) -> Vec<u8> {
    datagrams(&pack(&[(1, 2, b"hello".to_vec())], 1_000, &mut Sealer::new(key))).remove(0)
}

#[test]
fn packs_small_and_fragments_large_messages() {
    // Goal: many small messages between several node pairs share datagrams and a large one
    // is split and rebuilt, in order, each with its own sender and receiver. Method: pack,
    // decode, reassemble, compare.
    let messages: Vec<(u32, u32, Vec<u8>)> =
        vec![(1, 2, vec![1; 10]), (3, 2, vec![2; 20]), (1, 4, vec![3; 5_000]), (5, 6, vec![4; 30])];
    let mut packer = pack(&messages, 1_000, &mut Sealer::new(None));
    assert!(packer.datagrams().all(|d| d.len() <= 1_000));
    assert_eq!(unpack(&datagrams(&packer), None), messages);
    // The two small messages before the large one share its first datagram.
    let (_, first) = decode(packer.datagrams().next().expect("one"), 7, None).expect("valid");
    assert_eq!(first.filter(|f| matches!(f.body, Body::Whole(_))).count(), 2);
    packer.clear();
    assert!(packer.is_empty());
    assert_eq!(packer.datagrams().len(), 0);
}

#[test]
fn datagrams_are_numbered_in_sending_order() {
    // Goal: one sealer numbers every datagram it seals, across packers, from 0 up.
    let mut sealer = Sealer::new(Some(ClusterKey::derive(b"secret")));
    let key = ClusterKey::derive(b"secret");
    let first = pack(&[(1, 2, vec![1; 3_000])], 1_000, &mut sealer);
    let second = pack(&[(1, 3, vec![2; 10])], 1_000, &mut sealer);
    let sequences: Vec<u64> = first
        .datagrams()
        .chain(second.datagrams())
        .map(|d| decode(d, 7, Some(&key)).expect("valid").0.sequence)
        .collect();
    assert_eq!(sequences, vec![0, 1, 2, 3, 4]);
}

#[test]
fn corrupted_datagrams_are_typed_errors() {
    // Goal: a flipped bit, a wrong cluster, a wrong version or a truncation is reported,
    // not accepted.
    let good = one_datagram(None);
    let mut flipped = good.clone();
    flipped[HEADER_LEN + 2] ^= 1;
    assert_eq!(decode(&flipped, 7, None).unwrap_err(), WireError::Checksum);
    assert_eq!(decode(&good, 8, None).unwrap_err(), WireError::OtherCluster);
    assert_eq!(decode(&good[..10], 7, None).unwrap_err(), WireError::TooShort);
    let mut old = good.clone();
    old[2] = 2;
    assert_eq!(decode(&old, 7, None).unwrap_err(), WireError::Version(2));
}

#[test]
fn only_holders_of_the_key_are_heard() {
    // Goal: with a cluster key, a datagram is accepted only with a MAC under that key; one
    // without a MAC, one under another key, and any changed bit (the sequence number
    // included) are each rejected with their own error.
    let key = ClusterKey::derive(b"the cluster's secret");
    let good = one_datagram(Some(key.clone()));
    let (received, frames) = decode(&good, 7, Some(&key)).expect("the key's own datagram");
    assert!(received.keyed);
    assert_eq!(frames.count(), 1);
    assert_eq!(decode(&one_datagram(None), 7, Some(&key)).unwrap_err(), WireError::Unauthenticated);
    let forged = one_datagram(Some(ClusterKey::derive(b"a guess")));
    assert_eq!(decode(&forged, 7, Some(&key)).unwrap_err(), WireError::BadMac);
    for at in [3, SEQUENCE_AT, HEADER_LEN + 2, good.len() - 1] {
        let mut changed = good.clone();
        changed[at] ^= 0x80;
        assert!(decode(&changed, 7, Some(&key)).is_err(), "byte {at} changed");
    }
    // Clearing the flag makes it an unkeyed datagram, whose checksum then fails.
    let mut unflagged = good.clone();
    unflagged[3] = 0;
    assert_eq!(decode(&unflagged, 7, None).unwrap_err(), WireError::Checksum);
    assert_eq!(decode(&good, 7, None).unwrap_err(), WireError::NoKey);
    assert_eq!(format!("{key:?}"), "ClusterKey(..)", "the key is never printed");
}

#[test]
fn a_bad_frame_rejects_the_whole_datagram() {
    // Goal: a well-sealed datagram whose second frame runs past the end delivers nothing.
    let mut datagram = Vec::new();
    put_header(&mut datagram, &header());
    datagram.extend_from_slice(&[0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 42]);
    datagram.extend_from_slice(&[0, 1, 0, 0, 0, 2, 0, 0, 0, 9, 0, 0, 0, 42]);
    seal(&mut datagram, 0, &mut Sealer::new(None));
    assert_eq!(decode(&datagram, 7, None).unwrap_err(), WireError::BadFrame);
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2_000)) {
        // Goal: any byte string decodes to frames or a typed error.
        if let Ok((_, frames)) = decode(&bytes, 7, None) {
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
        seal(&mut datagram, 0, &mut Sealer::new(None));
        if let Ok((received, frames)) = decode(&datagram, 7, None) {
            let mut table = Reassembly::new(4, 1 << 16, 10);
            for frame in frames {
                if let Body::Fragment { message, index, count, bytes } = frame.body {
                    let _ = table.add(0, frame.from, received.header.boot, message, index, count, bytes);
                }
            }
        }
    }

    #[test]
    fn round_trip(
        messages in proptest::collection::vec(
            (0u32..4, 0u32..4, proptest::collection::vec(any::<u8>(), 0..3_000)), 0..20),
        keyed in any::<bool>(),
    ) {
        // Goal: whatever the sizes and node pairs, every message comes out once, in order,
        // with its sender and receiver, and no datagram exceeds the limit; with or without a key.
        let key = keyed.then(|| ClusterKey::derive(b"k"));
        let packer = pack(&messages, 1_200, &mut Sealer::new(key.clone()));
        prop_assert!(packer.datagrams().all(|d| d.len() <= 1_200));
        prop_assert_eq!(unpack(&datagrams(&packer), key.as_ref()), messages);
    }
}

#[test]
fn a_message_sealed_alone_decodes_as_a_datagram() {
    // Goal: the TCP path's format is the datagram format: one whole frame of any size, its
    // sender readable before the checks, and checked like any datagram.
    let key = ClusterKey::derive(b"secret of sixteen bytes");
    let mut sealer = Sealer::new(Some(key.clone()));
    let big = vec![7u8; 3 * DATAGRAM_MAX];
    let sealed = seal_one(&header(), &mut sealer, 4, 2, &big);
    assert_eq!(first_sender(&sealed), Some(4));
    let (received, frames) = decode(&sealed, 7, Some(&key)).expect("valid");
    assert_eq!(received.sequence, 0);
    let frames: Vec<Frame<'_>> = frames.collect();
    assert_eq!(frames, vec![Frame { from: 4, to: 2, body: Body::Whole(&big) }]);
    assert_eq!(decode(&sealed, 7, None).unwrap_err(), WireError::NoKey);
    assert_eq!(first_sender(&sealed[..HEADER_LEN]), None);
}
