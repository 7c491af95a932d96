//! The short fuzz budget that CI runs (issue 20): every fuzz body of `ordo_net::fuzzing` and
//! `ordo_check::fuzzing` gets its seed corpus (`fuzz/corpus/<target>/`), its regression inputs
//! (`fuzz/regressions/<target>/`, inputs the fuzzer once found) and a fixed number of inputs
//! mutated from them, or random, from a fixed seed. The cargo-fuzz targets under `fuzz/` run the
//! same bodies for millions of inputs on nightly (`docs/fuzzing.md`); this test keeps them
//! honest on stable, in a few seconds, with no extra install.
//!
//! A failing input is printed in hex; save it under `fuzz/regressions/<target>/` with the fix.
//! The binary seeds (wire, wire_sealed, storage, message) are written by
//! `cargo test -p ordo-net --test fuzz_bodies -- --ignored write_binary_seeds`.

use ordo_core::{Command, Protocol};
use ordo_net::ClusterFile;
use ordo_net::fuzzing;
use ordo_net::storage::Storage;
use ordo_net::wire::{self, ClusterKey, Header, Packer, Sealer};
use ordo_protocols::testkit::Cluster;
use ordo_protocols::testkit::script::Layout;
use ordo_protocols::{ProtocolVisitor, protocols, with_protocol};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};

/// Inputs per target besides its seeds: mutated or random. About 0.1 to 0.5 s per target here.
const INPUTS_PER_TARGET: usize = 20_000;
/// Longest input generated.
const INPUT_LEN_MAX: usize = 4_096;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `fuzz/<folder>/<target>/`, sorted by name.
fn files(folder: &str, target: &str) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(folder).join(target)) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.map(|entry| entry.expect("a directory entry").path()).collect();
    paths.sort();
    paths.iter().filter(|path| path.is_file()).map(|path| std::fs::read(path).expect("a corpus file")).collect()
}

/// Numbers that break parsers, as text and as little-endian integers.
const INTERESTING_TEXT: &[&str] =
    &["-1", "0", "1", "65536", "4294967296", "9223372036854775807", "-9223372036854775808", "1e400", "nan"];
const INTERESTING_BYTES: &[u8] = b"\x00\x01\x7f\x80\xff\r\n*$\"'\\ =[]{}";

/// One mutation of `input`, with pieces of `corpus` spliced in sometimes.
fn mutate_once(rng: &mut ChaCha8Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let at = if input.is_empty() { 0 } else { rng.random_range(0..input.len()) };
    match rng.random_range(0..9) {
        0 if !input.is_empty() => input[at] ^= 1 << rng.random_range(0..8),
        1 if !input.is_empty() => input[at] = INTERESTING_BYTES[rng.random_range(0..INTERESTING_BYTES.len())],
        2 => {
            let bytes: Vec<u8> = (0..rng.random_range(1..9)).map(|_| rng.random()).collect();
            input.splice(at..at, bytes);
        }
        3 if !input.is_empty() => {
            let end = rng.random_range(at..=input.len().min(at + 16));
            input.drain(at..end);
        }
        4 if !input.is_empty() => {
            let end = rng.random_range(at..=input.len().min(at + 32));
            let copy = input[at..end].to_vec();
            input.splice(at..at, copy);
        }
        5 if !corpus.is_empty() => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            let from = rng.random_range(0..=other.len());
            input.truncate(at);
            input.extend_from_slice(&other[from..]);
        }
        6 => input.truncate(at),
        7 => {
            let text = INTERESTING_TEXT[rng.random_range(0..INTERESTING_TEXT.len())];
            input.splice(at..at, text.bytes());
        }
        _ => {
            let value = [0, 1, u64::from(u16::MAX), u64::from(u32::MAX), u64::MAX][rng.random_range(0..5)];
            let width = [2, 4, 8][rng.random_range(0..3)];
            let end = input.len().min(at + width);
            input.splice(at..end, value.to_le_bytes()[..width].iter().copied());
        }
    }
    input.truncate(INPUT_LEN_MAX);
}

/// The inputs of a run: the seeds, then `count` more, each random (one in ten) or a seed with
/// one to four mutations.
fn inputs(seeds: &[Vec<u8>], count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut all = seeds.to_vec();
    for _ in 0..count {
        if seeds.is_empty() || rng.random_range(0..10) == 0 {
            let len = rng.random_range(0..256);
            all.push((0..len).map(|_| rng.random()).collect());
            continue;
        }
        let mut input = seeds[rng.random_range(0..seeds.len())].clone();
        for _ in 0..rng.random_range(1..5) {
            mutate_once(&mut rng, &mut input, seeds);
        }
        all.push(input);
    }
    all
}

/// Runs `body` on the target's corpus, its regressions and the budget; a panic names the input.
fn run(target: &str, extra_seeds: Vec<Vec<u8>>, body: impl Fn(&[u8])) {
    let corpus = files("corpus", target);
    assert!(!corpus.is_empty() || !extra_seeds.is_empty(), "{target}: no seed corpus");
    let mut seeds = corpus;
    seeds.extend(files("regressions", target));
    seeds.extend(extra_seeds);
    let seed = target.bytes().fold(0u64, |hash, b| hash.wrapping_mul(31).wrapping_add(u64::from(b)));
    for input in inputs(&seeds, INPUTS_PER_TARGET, seed) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&input)));
        if outcome.is_err() {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("{target}: the body panicked on input (hex) {hex}");
        }
    }
}

#[test]
fn resp_body_survives_its_budget() {
    // Goal: the RESP parser never panics and round-trips what it parses. Method: corpus plus
    // mutations through `fuzzing::resp`.
    run("resp", Vec::new(), fuzzing::resp);
}

#[test]
fn wire_bodies_survive_their_budget() {
    // Goal: raw datagrams (behind their checksum) and sealed ones (past it) decode or fail with
    // a typed error, frames stay inside, and delivered messages re-pack the same.
    run("wire", Vec::new(), fuzzing::wire);
    run("wire_sealed", Vec::new(), fuzzing::wire_sealed);
}

#[test]
fn storage_body_survives_its_budget() {
    // Goal: a damaged durable file recovers its intact prefix or fails with an offset.
    run("storage", Vec::new(), fuzzing::storage);
}

#[test]
fn history_body_survives_its_budget() {
    // Goal: `ordo check`'s history parser and checker never panic on a user's file.
    run("history", Vec::new(), ordo_check::fuzzing::history);
}

/// Runs a protocol-generic body for the protocol a fuzz input names.
struct Placement<'a>(&'a ClusterFile);

impl ProtocolVisitor for Placement<'_> {
    type Output = ();
    fn visit<P: Protocol>(self) {
        fuzzing::cluster_placement::<P>(self.0);
    }
}

struct Message<'a>(&'a [u8]);

impl ProtocolVisitor for Message<'_> {
    type Output = ();
    fn visit<P: Protocol>(self) {
        fuzzing::message::<P>(self.0);
    }
}

/// The `cluster_file` target: parse, then place with the protocol the file names.
fn cluster_file(data: &[u8]) {
    if let Some(file) = fuzzing::cluster_file(data) {
        let _ = with_protocol(&file.protocol, Placement(&file));
    }
}

/// The `message` target: the first byte picks a registered protocol, the rest is its message.
fn message(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else { return };
    let names: Vec<&str> = protocols().iter().filter(|p| !p.canary).map(|p| p.name).collect();
    with_protocol(names[usize::from(pick) % names.len()], Message(bytes)).expect("a registered protocol");
}

#[test]
fn cluster_file_body_survives_its_budget() {
    // Goal: a cluster file parses, writes back the same, and places its nodes, or fails with
    // an error.
    run("cluster_file", Vec::new(), cluster_file);
}

#[test]
fn message_body_survives_its_budget() {
    // Goal: every protocol's message and durable decoders give a value that round-trips, or an
    // error. Method: the committed seeds plus fresh well-formed values of every protocol.
    run("message", generated_messages(1), message);
}

/// Messages and durable records of every registered protocol, as `message` inputs: the traffic
/// of a three-replica cluster serving two commands, a few messages of each kind (by their
/// leading variant byte) and a replica's durable records.
fn generated_messages(seed: u64) -> Vec<Vec<u8>> {
    struct Traffic(u64, u8);
    impl ProtocolVisitor for Traffic {
        type Output = Vec<Vec<u8>>;
        fn visit<P: Protocol>(self) -> Vec<Vec<u8>> {
            let config = P::Config::default();
            let topology = Layout::new(3, 1).topology::<P>(&config);
            let mut cluster = Cluster::<P>::with_topology(topology, config, self.0);
            cluster.keep_sent_log();
            let client = cluster.clients()[0];
            cluster.submit(
                client,
                Command::Set {
                    key: "k".into(),
                    value: "v".into(),
                    condition: Default::default(),
                    expiry: Default::default(),
                },
            );
            cluster.run_for(1_000_000_000);
            cluster.submit(client, Command::Get { key: "k".into() });
            cluster.run_for(1_000_000_000);
            let tagged = |bytes: Vec<u8>| [vec![self.1], bytes].concat();
            let mut kinds = std::collections::BTreeMap::new();
            for envelope in cluster.sent_log() {
                let bytes = postcard::to_allocvec(&envelope.message).expect("a message encodes");
                kinds.entry(bytes[0]).or_insert(bytes);
            }
            let mut all: Vec<Vec<u8>> = kinds.into_values().take(MESSAGE_KINDS_MAX).map(tagged).collect();
            let durable = cluster.durable(cluster.replica(0)).iter().take(1);
            all.extend(durable.map(|record| tagged(postcard::to_allocvec(record).expect("a record encodes"))));
            all
        }
    }
    let names: Vec<&str> = protocols().iter().filter(|p| !p.canary).map(|p| p.name).collect();
    let values = names.iter().enumerate().map(|(index, name)| with_protocol(name, Traffic(seed, index as u8)));
    values.flat_map(|values| values.expect("a registered protocol")).collect()
}

/// Message kinds kept per protocol in the `message` seeds.
const MESSAGE_KINDS_MAX: usize = 2;

/// Datagrams of a cluster with hash 7, without a key and with the fuzzers' key
/// (`ordo_net::fuzzing`): small messages sharing one, and a fragmented one.
fn datagrams() -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for key in [None, Some(ClusterKey::derive(b"the fuzzers' cluster secret"))] {
        let mut sealer = Sealer::new(key);
        let mut packer = Packer::new(Header { cluster: 7, boot: 9 }, 200);
        packer.push(&mut sealer, 1, 2, b"hello", 0);
        packer.push(&mut sealer, 3, 2, &[0, 1, 2, 3], 1);
        packer.push(&mut sealer, 1, 4, &[7; 600], 2);
        packer.push(&mut sealer, 5, 6, b"", 3);
        packer.finish(&mut sealer);
        all.extend(packer.datagrams().map(<[u8]>::to_vec));
    }
    all
}

/// A durable file of a few records, as `Storage` writes it, with a torn tail or not.
fn durable_file(records: &[&[u8]], torn: bool) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("ordo-fuzz-seeds-{}", std::process::id()));
    let path = dir.join("node.log");
    let _ = std::fs::remove_file(&path);
    let (mut storage, _) = Storage::open::<Vec<u8>>(&path, false).expect("open");
    for record in records {
        storage.append(&record.to_vec()).expect("append");
    }
    storage.sync().expect("sync");
    // A storage that never wrote leaves no file: it holds nothing.
    let mut bytes = std::fs::read(&path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    if torn {
        bytes.truncate(bytes.len() - 3);
    }
    bytes
}

#[test]
#[ignore = "writes the binary seed corpora; run by hand after a format change"]
fn write_binary_seeds() {
    // Goal: binary seeds that match the current formats. Method: build them with the real
    // encoders and write them under fuzz/corpus/.
    let write = |target: &str, seeds: Vec<Vec<u8>>| {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (index, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{index}")), seed).expect("seed");
        }
    };
    let datagrams = datagrams();
    let bodies = datagrams.iter().map(|d| d[wire::HEADER_LEN..d.len() - wire::TAG_LEN].to_vec()).collect();
    write("wire", datagrams);
    write("wire_sealed", bodies);
    let records: [&[u8]; 3] = [b"one", b"", &[0xFF; 40]];
    write("storage", vec![durable_file(&records, false), durable_file(&records, true), durable_file(&[], false)]);
    write("message", generated_messages(0));
}
