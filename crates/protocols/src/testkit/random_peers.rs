//! Random well-formed messages from random peers: the shared harness of each protocol's
//! "no panic from any peer message" property test.
//!
//! A message that decodes is well formed, but a faulty or hostile peer (or a corrupted but
//! checksummed datagram) can put any value in any field. [`Gen`] builds such values for any
//! type that implements `Deserialize`: it *is* a serde deserializer that answers every question
//! with a random choice (a variant, a length, a number biased to the extremes: 0, 1, small,
//! `u32::MAX`, `u64::MAX`), so a protocol's message enum needs no hand-written generator. Each
//! protocol's test adds a small generator of its own that aims at its fields (a real message
//! seen in the network with one field pushed to an extreme, say).
//!
//! [`run`] drives a [`Cluster`] of the protocol: the protocol's own traffic, client submissions,
//! time passing and timers firing, crashes and restarts, all interleaved with random messages
//! from random peers to random replicas. Every input is followed by the node's
//! `check_invariants` (the kit's rule), so a test passes when no input panicked. The global
//! checker is off: a forged message may well make replicas disagree (that is what authenticated
//! transport is for); what is tested is that no node panics and each node's own invariants hold.

use super::script::Layout;
use super::{Cluster, Envelope};
use ordo_core::{Command, CrashModel, NodeId, Protocol, Role};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};

/// The error type the random deserializer reports (it never fails).
type Error = de::value::Error;

/// Most messages kept in the network: the oldest are dropped past it.
const NETWORK_MAX: usize = 400;

/// Deepest nesting of sequences and options the random deserializer builds.
const DEPTH_MAX: usize = 4;

/// A seeded source of random choices and random values of any deserializable type.
pub struct Gen {
    rng: ChaCha8Rng,
    /// How many nodes the cluster has: node ids are drawn mostly below it, sometimes just past.
    pub nodes: u32,
    depth: usize,
}

impl Gen {
    /// A generator for a cluster of `nodes` nodes.
    pub fn new(seed: u64, nodes: u32) -> Self {
        Gen { rng: ChaCha8Rng::seed_from_u64(seed), nodes, depth: 0 }
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "a choice among none");
        self.rng.random_range(0..n)
    }

    /// A number as a peer might send one: mostly small (the views, slots and counts of a short
    /// run), often an extreme (0, `u32::MAX`, `u64::MAX` and neighbours), sometimes anything.
    pub fn number(&mut self) -> u64 {
        match self.rng.random_range(0..100) {
            0..40 => self.rng.random_range(0..8),
            40..55 => self.rng.random_range(0..1_024),
            55..65 => u64::MAX,
            65..70 => u64::MAX - self.rng.random_range(1..4),
            70..75 => u64::from(u32::MAX) + self.rng.random_range(0..3) - 1,
            75..80 => 1u64 << self.rng.random_range(0..64),
            _ => self.rng.random(),
        }
    }

    /// A node id: mostly one of the cluster's, sometimes just past the last.
    pub fn node(&mut self) -> NodeId {
        if self.chance(90) { NodeId(self.rng.random_range(0..self.nodes)) } else { NodeId(self.number() as u32) }
    }

    /// A random value of `T`, built field by field.
    pub fn value<T: DeserializeOwned>(&mut self) -> T {
        self.depth = 0;
        T::deserialize(&mut *self).expect("the random deserializer never fails")
    }

    /// `value` with a few bytes of its encoding changed (zeroed, set to 0xFF, random, or an
    /// extreme varint inserted), if the result still decodes: a real message with one field
    /// pushed anywhere, whatever the protocol.
    pub fn mutate_bytes<T: serde::Serialize + DeserializeOwned>(&mut self, value: &T) -> Option<T> {
        let original = postcard::to_allocvec(value).expect("messages serialize");
        for _ in 0..8 {
            let mut bytes = original.clone();
            for _ in 0..1 + self.below(3) {
                if bytes.is_empty() {
                    break;
                }
                let at = self.below(bytes.len());
                match self.below(4) {
                    0 => bytes[at] = 0,
                    1 => bytes[at] = 0xFF,
                    2 => bytes[at] = self.rng.random(),
                    // u64::MAX as a postcard varint, in place of a one-byte number.
                    _ => {
                        bytes.splice(at..at + 1, [0xFF; 9].into_iter().chain([0x01]));
                    }
                }
            }
            if let Ok(mutated) = postcard::from_bytes(&bytes) {
                return Some(mutated);
            }
        }
        None
    }

    /// A key among a few, so that commands conflict.
    fn key(&mut self) -> Vec<u8> {
        format!("k{}", self.rng.random_range(0..4)).into_bytes()
    }

    /// A command on a few keys.
    pub fn command(&mut self) -> Command {
        match self.below(3) {
            0 => Command::Get { key: self.key().into() },
            1 => self.value(),
            _ => Command::Set {
                key: self.key().into(),
                value: self.key().into(),
                condition: Default::default(),
                expiry: Default::default(),
            },
        }
    }

    /// A length for a sequence: mostly short, shorter when nested.
    fn len(&mut self) -> usize {
        if self.depth >= DEPTH_MAX {
            return 0;
        }
        match self.rng.random_range(0..10) {
            0..3 => 0,
            3..7 => 1,
            7..9 => 2,
            _ => self.rng.random_range(3..6),
        }
    }
}

impl<'de> de::Deserializer<'de> for &mut Gen {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(self.number())
    }
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(self.chance(50))
    }
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i8(self.number() as i8)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i16(self.number() as i16)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i32(self.number() as i32)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(self.number() as i64)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u8(self.number() as u8)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u16(self.number() as u16)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // Node ids, ranks and shards are u32: mostly within the cluster.
        let value = if self.chance(70) { self.rng.random_range(0..self.nodes + 2) } else { self.number() as u32 };
        visitor.visit_u32(value)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(self.number())
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f32(self.number() as f32)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(self.number() as f64)
    }
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_char('x')
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_string(format!("s{}", self.number()))
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_byte_buf(visitor)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let bytes = if self.chance(80) { self.key() } else { (0..self.len() * 7).map(|_| self.rng.random()).collect() };
        visitor.visit_byte_buf(bytes)
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.depth >= DEPTH_MAX || self.chance(40) {
            return visitor.visit_none();
        }
        self.depth += 1;
        let value = visitor.visit_some(&mut *self);
        self.depth -= 1;
        value
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let left = self.len();
        self.depth += 1;
        let value = visitor.visit_seq(Elements { draw: &mut *self, left });
        self.depth -= 1;
        value
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { draw: self, left: len })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { draw: self, left: len })
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let left = self.len();
        self.depth += 1;
        let value = visitor.visit_map(Elements { draw: &mut *self, left });
        self.depth -= 1;
        value
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { draw: self, left: fields.len() })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let variant = self.below(variants.len()) as u32;
        visitor.visit_enum(Variant { draw: self, variant })
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(0)
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The elements of a random sequence, tuple, struct or map.
struct Elements<'a> {
    draw: &'a mut Gen,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.draw).map(Some)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl<'de> de::MapAccess<'de> for Elements<'_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.draw).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.draw)
    }
}

/// A random variant of an enum and its fields.
struct Variant<'a> {
    draw: &'a mut Gen,
    variant: u32,
}

impl<'de, 'a> de::EnumAccess<'de> for Variant<'a> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), Error> {
        let index: de::value::U32Deserializer<Error> = self.variant.into_deserializer();
        Ok((seed.deserialize(index)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self.draw)
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { draw: self.draw, left: len })
    }
    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements { draw: self.draw, left: fields.len() })
    }
}

/// What one random-peer run did, for the test's report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunCounts {
    /// Random messages delivered.
    pub forged: u64,
    /// Protocol messages delivered.
    pub delivered: u64,
    /// Timers fired.
    pub timers: u64,
    /// Crashes, each followed by a restart.
    pub restarts: u64,
    /// Commands the replicas executed, all incarnations together (a run that executes nothing
    /// never reached the protocol's deeper states).
    pub executed: u64,
    /// Inputs the replicas dropped, by reason, all incarnations together.
    pub dropped: std::collections::BTreeMap<&'static str, u64>,
}

/// A protocol's own generator: a random message for `to` (a replica), given the messages seen
/// in the network so far (the latest, at most [`NETWORK_MAX`]).
pub type Forge<'a, P> = &'a mut dyn FnMut(&mut Gen, NodeId, &[Envelope<P>]) -> <P as Protocol>::Message;

/// Runs `steps` inputs on `cluster`: the protocol's own traffic, client submissions, time and
/// timers, crash-restarts of a replica, and messages made by `forge` (or [`Gen::value`]) from
/// random peers to random replicas. A panic anywhere (an assertion in a handler, a failed
/// `check_invariants`, an overflow) fails the calling test.
pub fn run<P: Protocol>(cluster: &mut Cluster<P>, seed: u64, steps: usize, forge: Forge<'_, P>) -> RunCounts {
    cluster.checker = None;
    cluster.keep_sent_log();
    let nodes = u32::try_from(cluster.topology().nodes.len()).expect("node ids fit in u32");
    let mut draw = Gen::new(seed, nodes);
    let replicas: Vec<NodeId> = cluster.topology().with_role(Role::Replica).collect();
    let clients = cluster.clients();
    let mut counts = RunCounts::default();
    let mut seen: Vec<Envelope<P>> = Vec::new();
    for step in 0..steps {
        remember_sent(cluster, &mut seen);
        // The first quarter is calm (no forged message, no crash), so that logs, views and
        // timestamps are deep when the forgeries start.
        let roll = if step < steps / 4 { 20 + draw.below(70) } else { draw.below(100) };
        match roll {
            0..20 => {
                let to = replicas[draw.below(replicas.len())];
                let from = NodeId(draw.below(nodes as usize) as u32);
                let message = match draw.below(3) {
                    0 => forge(&mut draw, to, &seen),
                    1 => mutate_bytes_seen(&seen, &mut draw).unwrap_or_else(|| draw.value()),
                    _ => draw.value(),
                };
                let id = cluster.inject(from, to, message);
                cluster.deliver(id);
                counts.forged += 1;
            }
            20..70 => {
                for _ in 0..1 + draw.below(8) {
                    counts.delivered += u64::from(deliver_random(cluster, &mut draw));
                }
            }
            70..82 => submit_random(cluster, &clients, &mut draw),
            // Time passes with every message delivered as it falls due, so that clients' requests
            // complete and the protocol's state deepens between forgeries.
            82..90 => {
                cluster.run_for(draw.below(20_000_000) as u64);
            }
            90..98 => counts.timers += u64::from(fire_random_timer(cluster, &replicas, &mut draw)),
            // A crash-stop protocol's restarted replica retires for good: restart none there;
            // others restart rarely (each restart sets the protocol back to recovery).
            _ if P::crash_model() == CrashModel::Stop || draw.chance(50) => {
                cluster.advance(draw.below(20_000_000) as u64)
            }
            _ => counts.restarts += u64::from(crash_and_restart(cluster, &replicas, &mut draw)),
        }
        if cluster.pending_count() > NETWORK_MAX {
            let keep_after = cluster.pending().nth(cluster.pending_count() - NETWORK_MAX).map_or(0, |e| e.id);
            cluster.drop_where(|envelope| envelope.id < keep_after);
        }
    }
    for &replica in &replicas {
        let stats = cluster.total_stats(replica);
        counts.executed += stats.executed;
        for (reason, count) in stats.dropped {
            *counts.dropped.entry(reason).or_default() += count;
        }
    }
    counts
}

/// Moves the messages sent since the last step into `seen` (the latest [`NETWORK_MAX`]).
fn remember_sent<P: Protocol>(cluster: &mut Cluster<P>, seen: &mut Vec<Envelope<P>>) {
    if let Some(log) = cluster.sent_log.as_mut() {
        seen.append(log);
    }
    if seen.len() > NETWORK_MAX {
        seen.drain(..seen.len() - NETWORK_MAX);
    }
}

/// Delivers a pending message: mostly the oldest, sometimes any (reordering), sometimes it is
/// dropped or duplicated instead.
fn deliver_random<P: Protocol>(cluster: &mut Cluster<P>, draw: &mut Gen) -> bool {
    let count = cluster.pending_count();
    if count == 0 {
        return false;
    }
    let id = if draw.chance(60) { cluster.pending().next() } else { cluster.pending().nth(draw.below(count)) }
        .map(|envelope| envelope.id)
        .expect("a pending message");
    match draw.below(20) {
        0 => {
            cluster.drop_where(|envelope| envelope.id == id);
            false
        }
        1 => {
            cluster.duplicate(id);
            cluster.deliver(id)
        }
        _ => cluster.deliver(id),
    }
}

/// Submits a command at a client with nothing outstanding.
fn submit_random<P: Protocol>(cluster: &mut Cluster<P>, clients: &[NodeId], draw: &mut Gen) {
    if clients.is_empty() {
        return;
    }
    let client = clients[draw.below(clients.len())];
    if cluster.is_up(client) && cluster.outstanding(client).is_none() {
        let command = draw.command();
        cluster.submit(client, command);
    }
}

/// Fires one pending timer of a random replica now.
fn fire_random_timer<P: Protocol>(cluster: &mut Cluster<P>, replicas: &[NodeId], draw: &mut Gen) -> bool {
    let node = replicas[draw.below(replicas.len())];
    let timers = cluster.pending_timers(node);
    if timers.is_empty() {
        return false;
    }
    let (timer, _) = &timers[draw.below(timers.len())];
    cluster.fire_timer(node, timer)
}

/// Crashes a random running replica and restarts it from its durable records.
fn crash_and_restart<P: Protocol>(cluster: &mut Cluster<P>, replicas: &[NodeId], draw: &mut Gen) -> bool {
    let node = replicas[draw.below(replicas.len())];
    if !cluster.is_up(node) {
        return false;
    }
    cluster.crash(node);
    cluster.restart(node);
    true
}

/// A message seen in the network with a few bytes of its encoding changed ([`Gen::mutate_bytes`]).
fn mutate_bytes_seen<P: Protocol>(seen: &[Envelope<P>], draw: &mut Gen) -> Option<P::Message> {
    if seen.is_empty() {
        return None;
    }
    let envelope = &seen[draw.below(seen.len())];
    draw.mutate_bytes(&envelope.message)
}

/// A message seen in the network (from a random point on) that `tweak` accepts and changes,
/// or `None` when it accepts none.
pub fn mutate_seen<P: Protocol>(
    seen: &[Envelope<P>],
    draw: &mut Gen,
    mut tweak: impl FnMut(&mut Gen, &mut P::Message) -> bool,
) -> Option<P::Message> {
    if seen.is_empty() {
        return None;
    }
    let start = draw.below(seen.len());
    for envelope in seen.iter().cycle().skip(start).take(seen.len().min(64)) {
        let mut message = envelope.message.clone();
        if tweak(draw, &mut message) {
            return Some(message);
        }
    }
    None
}

/// Steps of one case: deep enough for views, logs, restarts and forged messages to meet, short
/// enough for 200 cases in seconds in a debug build.
pub const STEPS: usize = 500;

/// Cases of each protocol's property test: 200, or `PROPTEST_CASES` when set (a long run
/// before a release, say); a failure prints its seed (no persistence file).
pub fn cases() -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(200);
    proptest::test_runner::Config { cases, failure_persistence: None, ..Default::default() }
}

/// One case on a fresh cluster laid out as `layout` with `config`: the body every protocol's
/// random-peer property test shares.
pub fn run_on<P: Protocol>(layout: Layout, config: P::Config, seed: u64, forge: Forge<'_, P>) -> RunCounts {
    let topology = layout.topology::<P>(&config);
    let mut cluster = Cluster::with_topology(topology, config, seed);
    run(&mut cluster, seed, STEPS, forge)
}
