//! Scenario tests of spec §11 on the testkit cluster of `tests.rs` (`Scenario`): the fast-path rule with f = 1 (T4),
//! contention (T8), real-time order (T10), idle liveness (T12), a crash outside the fast quorums
//! (T13), loss, duplication and reordering (T22), multi-shard stability (T25), cross-shard order
//! (T26) and MStable waits (T28). Recovery scenarios are in `tests_recovery.rs`.

use super::client::ranking;
use super::messages::{Dot, Message};
use super::replica::{Life, Phase, Replica};
use super::tests::{Chaos, Scenario, client_id, dot, topology};
use super::{Config, Tempo, Timer};
use crate::testkit::Cluster;
use ordo_core::{Command, CommandResult, Destinations, Key, NodeId, NodeSpec, RequestId, Role, Topology, shard_of_key};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// The first `count` keys `k0`, `k1`, … that fall in `shard` of `shards`.
fn keys_in_shard(shard: usize, shards: usize, count: usize) -> Vec<String> {
    (0..).map(|i| format!("k{i}")).filter(|k| shard_of_key(k.as_bytes(), shards) == shard).take(count).collect()
}

/// The lowest ⟨ts, dot⟩ among the committed attempts of `request` at `node`: the attempt that
/// runs (a request runs once, at its first attempt in ⟨ts, dot⟩ order).
fn first_attempt(s: &Scenario, node: NodeId, request: RequestId) -> Option<(u64, Dot)> {
    let attempts = Dot { request, attempt: 0 }..=Dot { request, attempt: u32::MAX };
    let replica = s.state(node);
    let held = replica.instances.range(attempts).filter(|(_, instance)| instance.phase.committed());
    let forgotten = replica.gc.forgotten.iter().filter(|(dot, _)| dot.request == request);
    held.map(|(&dot, instance)| (instance.ts, dot)).chain(forgotten.map(|(dot, stamps)| (stamps.last, dot))).min()
}

/// Every replica that knows a command committed it at the same timestamp (P1 across replicas;
/// a crashed replica counts with what it had committed when it crashed).
fn assert_one_timestamp_per_command(s: &Scenario) {
    let mut stamps: BTreeMap<Dot, (NodeId, u64)> = BTreeMap::new();
    for (node, dot, committed) in s.committed() {
        let (first, ts) = *stamps.entry(dot).or_insert((node, committed));
        assert_eq!(committed, ts, "P1: {dot:?} committed at {ts} at {first} but {committed} at {node}");
    }
}

#[test]
fn f_1_always_takes_the_fast_path_t4() {
    // Goal: T4 — with f = 1 the fast-path condition count(max) ≥ f always holds, whatever the
    // proposals. Method: r ∈ {3, 5, 7}, f = 1, random clocks on the key at every replica (so the
    // proposals differ), one command each: never a slow path. Control: the same clocks with
    // f ≥ 2 do give slow paths, so the proposals were varied enough to tell.
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut slow_with_larger_f = 0;
    for r in [3, 5, 7] {
        for _ in 0..20 {
            let clocks: Vec<u64> = (0..r).map(|_| rng.random_range(0..20)).collect();
            for f in 1..=(r - 1) / 2 {
                let mut s = Scenario::new(1, r, f, 1);
                for (rank, &clock) in clocks.iter().enumerate() {
                    s.set_clock(rank, "a", clock);
                }
                let client = s.client();
                s.submit(client, Command::set("a", "1"));
                s.deliver_all();
                let stats = &s.state(s.replica(0)).stats;
                assert_eq!(stats.fast_path_commits + stats.slow_path_commits, 1, "r={r} f={f} {clocks:?}");
                if f == 1 {
                    assert_eq!(stats.slow_path_commits, 0, "r={r} f=1 clocks {clocks:?}: slow path");
                } else {
                    slow_with_larger_f += stats.slow_path_commits;
                }
            }
        }
    }
    assert!(slow_with_larger_f > 0, "control: with f ≥ 2 some of these clocks take the slow path");
}

#[test]
fn high_contention_on_one_key_t8() {
    // Goal: T8 — five coordinators each submit 200 APPENDs to one key with random delays: P1
    // holds, every replica applies the identical sequence, in ⟨ts, id⟩ order, and slow paths
    // occur only for f ≥ 2. Method: inject the submissions pipelined (no client waits for its
    // reply), deliver in a random order between them, let a millisecond pass every 50
    // submissions (well under the recovery time-out: this is contention, not recovery).
    for f in [1, 2] {
        let sites = [0, 1, 2, 3, 4];
        let mut s = Scenario::with_clients_at(1, 5, f, &sites);
        let clients = s.clients();
        let mut rng = ChaCha8Rng::seed_from_u64(80 + f as u64);
        let mut next = [1u64; 5];
        let mut submitted = 0;
        while submitted < 1000 {
            let open: Vec<usize> = (0..5).filter(|&k| next[k] <= 200).collect();
            let k = open[rng.random_range(0..open.len())];
            let command = Command::append("hot", format!("{k}.{};", next[k]));
            let coordinator = s.replica(k);
            s.inject_submit(clients[k], coordinator, next[k], command);
            next[k] += 1;
            submitted += 1;
            for _ in 0..rng.random_range(0..40) {
                s.step_shuffled(&mut rng, Chaos::default());
            }
            if submitted % 50 == 0 {
                s.tick_ms();
            }
        }
        s.deliver_all_shuffled(&mut rng, Chaos::default());
        s.run_ms(5);
        let replicas = s.shard(0);
        let reference = s.applied(replicas[0]);
        assert_eq!(reference.len(), 1000, "f={f}: everything ran");
        for &node in &replicas {
            assert_eq!(s.applied(node), reference, "f={f}: {node} ran another sequence");
            assert_eq!(s.events(node, "recovery"), 0, "f={f}: no recovery was needed");
        }
        assert_one_timestamp_per_command(&s);
        let order: Vec<(u64, Dot)> =
            reference.iter().map(|&request| first_attempt(&s, replicas[0], request).expect("committed")).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "f={f}: the sequence is not in ⟨ts, id⟩ order");
        let fast: u64 = replicas.iter().map(|&n| s.state(n).stats.fast_path_commits).sum();
        let slow: u64 = replicas.iter().map(|&n| s.state(n).stats.slow_path_commits).sum();
        assert_eq!(fast + slow, 1000, "f={f}: each command decided once by its coordinator");
        if f == 1 {
            assert_eq!(slow, 0, "f=1 never takes the slow path");
        } else {
            assert!(slow > 0, "f=2 under contention takes the slow path sometimes");
        }
        let stamps: BTreeSet<u64> = order.iter().map(|(ts, _)| *ts).collect();
        assert!(stamps.len() < 1000, "f={f}: contention gave equal timestamps (ties broken by id)");
    }
}

#[test]
fn real_time_order_across_sites_t10() {
    // Goal: T10 — one client's sequential writes and reads of a key, each from another site
    // (each returns before the next is submitted): ts(d) > ts(c), d runs after c everywhere, and
    // each read returns the last write (linearizable). Method: a client at each site takes the
    // next operation once the previous completed; random clocks make the coordinators' first
    // proposals disagree; delivery is in a random order; several seeds.
    for seed in 0..5 {
        let sites = [0, 4, 1, 3, 2];
        let mut s = Scenario::with_clients_at(1, 5, 1, &sites);
        let clients = s.clients();
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        for rank in 0..5 {
            let clock = rng.random_range(0..30);
            s.set_clock(rank, "x", clock);
        }
        let mut numbers: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut requests = Vec::new();
        let mut last_write: Option<String> = None;
        for i in 0..30 {
            let client = clients[i % clients.len()];
            let write = i % 3 != 2;
            let value = format!("v{i}");
            let command = if write { Command::set("x", value.clone()) } else { Command::get("x") };
            let op = s.submit(client, command);
            let number = numbers.entry(client).or_insert(0);
            *number += 1;
            requests.push(RequestId { client: client_id(client), number: *number });
            let mut waited_ms = 0;
            while !s.completed(op) {
                s.run_ms_shuffled(1, &mut rng, Chaos::default());
                waited_ms += 1;
                assert!(waited_ms < 500, "seed {seed}: operation {i} never completed");
            }
            let result = s.result(op);
            if write {
                assert_eq!(result, Some(CommandResult::Ok));
                last_write = Some(value);
            } else {
                let expected = last_write.clone().map_or(CommandResult::Nil, |v| CommandResult::Value(v.into()));
                assert_eq!(result, Some(expected), "seed {seed}: read {i} is not the last write");
            }
        }
        s.run_ms(5);
        assert_one_timestamp_per_command(&s);
        let a = s.replica(0);
        let stamps: Vec<(u64, Dot)> = requests.iter().map(|&r| first_attempt(&s, a, r).expect("committed")).collect();
        for (i, pair) in stamps.windows(2).enumerate() {
            assert!(pair[0].0 < pair[1].0, "seed {seed}: ts of operation {} ≤ ts of {i}: {pair:?}", i + 1);
        }
        for node in s.shard(0) {
            assert_eq!(s.applied(node), requests, "seed {seed}: {node} ran them out of real-time order");
        }
    }
}

#[test]
fn idle_command_executes_within_a_few_promise_periods_t12() {
    // Goal: T12 — one command and then no load at all: it still executes at every replica, through
    // the commit-time bump and the periodic MPromises, within a few promise periods. Method:
    // Table 1c clocks (C at 10; A and B at 0), so the command commits at 11 on the fast path
    // while nobody yet holds the promises 2..11 of a majority: right after the commit no replica
    // may run it; then only promise rounds (one per millisecond here) pass.
    let mut s = Scenario::new(1, 5, 1, 1);
    s.set_clock(2, "a", 10);
    let client = s.client();
    let op = s.submit(client, Command::set("a", "1"));
    s.deliver_all();
    let d = dot(client, 1);
    for node in s.shard(0) {
        assert_eq!(s.ts(node, d), Some(11), "{node}: committed at 11");
        assert_eq!(s.executed(node), 0, "{node}: 11 is not stable before the promises flow");
    }
    let mut rounds = 0;
    while s.shard(0).into_iter().any(|node| s.executed(node) == 0) {
        s.fire(Timer::Promises);
        s.deliver_all();
        rounds += 1;
        assert!(rounds <= 3, "not executed everywhere after 3 promise periods");
    }
    assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
    for node in s.shard(0) {
        assert_eq!(s.events(node, "recovery") + s.events(node, "help"), 0, "{node}: no repair was needed");
    }
}

/// Submits `count` operations one after the other from the first client, each on one of three
/// keys, running 1 ms rounds until each completes; returns each one's latency in ms.
fn sequential_latencies_ms(s: &mut Scenario, count: usize) -> Vec<u64> {
    let client = s.client();
    (0..count)
        .map(|i| {
            let start = s.now_ns();
            let op = s.submit(client, Command::append(format!("k{}", i % 3), format!("{i};")));
            s.deliver_all();
            while !s.completed(op) {
                s.run_ms(1);
                assert!(s.now_ns() - start < 1_000_000_000, "operation {i} never completed");
            }
            (s.now_ns() - start) / 1_000_000
        })
        .collect()
}

#[test]
fn crash_outside_the_fast_quorums_t13() {
    // Goal: T13 — r = 5, f = 1, one replica crashed: coordinators pick fast quorums of 3 among the
    // 4 live replicas, commands commit on the fast path and execute (stability needs only a
    // majority). Variant r = 5, f = 2 with 2 crashed: no fast quorum of 4 is alive, so commands
    // complete only through recovery (MRec to r − f = 3, MConsensus to f + 1 = 3): later, but they
    // complete. Method: crash, let the suspicion time-out pass, submit sequentially, compare.
    let mut baseline = Scenario::new(1, 5, 1, 1);
    let baseline_ms = sequential_latencies_ms(&mut baseline, 10);
    assert!(baseline_ms.iter().all(|&ms| ms <= 3), "no crash: {baseline_ms:?}");

    let mut s = Scenario::new(1, 5, 1, 1);
    let (a, b) = (s.replica(0), s.replica(1));
    s.crash(b);
    s.run_ms(60);
    let latencies = sequential_latencies_ms(&mut s, 20);
    assert!(latencies.iter().all(|&ms| ms <= 3), "f=1, one crash: {latencies:?}");
    let client = s.client();
    for number in 1..=20 {
        let instance = &s.state(a).instances[&dot(client, number)];
        let quorum = instance.payload.as_ref().expect("payload").quorum(0).to_vec();
        assert!(!quorum.contains(&b) && quorum.len() == 3, "fast quorum {quorum:?} among the live replicas");
    }
    assert_eq!(s.state(a).stats.fast_path_commits, 20);
    let live: Vec<NodeId> = s.shard(0).into_iter().filter(|n| *n != b).collect();
    for &node in &live {
        assert_eq!(s.executed(node), 20, "{node}");
        assert_eq!(s.applied(node), s.applied(a), "{node} ran another sequence");
        assert_eq!(s.events(node, "recovery"), 0, "{node}: nothing to recover");
    }

    let mut s = Scenario::new(1, 5, 2, 1);
    let crashed = [s.replica(3), s.replica(4)];
    for node in crashed {
        s.crash(node);
    }
    s.run_ms(60);
    let latencies = sequential_latencies_ms(&mut s, 5);
    let a = s.replica(0);
    assert!(latencies.iter().all(|&ms| ms >= 10), "f=2, two crashes: only recovery decides: {latencies:?}");
    let live: Vec<NodeId> = s.shard(0).into_iter().filter(|n| !crashed.contains(n)).collect();
    let decided: u64 =
        live.iter().map(|&n| s.state(n).stats.fast_path_commits + s.state(n).stats.slow_path_commits).sum();
    assert_eq!(decided, 0, "no fast quorum");
    assert!(live.iter().map(|&n| s.events(n, "recovery_consensus")).sum::<u64>() >= 5, "each one recovered");
    for &node in &live {
        assert_eq!(s.executed(node), 5, "{node}");
        assert_eq!(s.applied(node), s.applied(a), "{node} ran another sequence");
    }
    assert_one_timestamp_per_command(&s);
}

#[test]
fn client_keeps_to_the_replica_that_answered() {
    // Goal: the submitter sends a command to "a responsive replica … close to i" (paper §4), so a
    // crashed coordinator costs a client one retry time-out, not one per request. (Before, every
    // request went first to the closest replica: with it crashed, every operation of a 200-client
    // LAN run waited the 40 ms retry, and throughput fell from 42k to 14k ops/s for good.)
    // Method: r = 3, f = 1, the client's closest replica A crashed; 10 sequential requests: the
    // first completes after the retry (the client's time-out, 40 ms plus five of this topology's
    // 4 ms round trips), every later one within 3 ms, coordinated by B, with no further retry.
    let mut s = Scenario::new(1, 3, 1, 1);
    let (a, b) = (s.replica(0), s.replica(1));
    s.crash(a);
    let latencies = sequential_latencies_ms(&mut s, 10);
    assert!(latencies[0] >= 40, "the first request waits for the retry: {latencies:?}");
    assert!(latencies[1..].iter().all(|&ms| ms <= 3), "later requests go straight to B: {latencies:?}");
    let client = s.client();
    assert_eq!(s.events(client, "client_retry"), 1, "one retry in all");
    assert_eq!(s.events(b, "submit"), 10, "B coordinated every request");
}

#[test]
fn clients_of_a_site_spread_over_its_equally_close_replicas() {
    // Goal: Tempo is leaderless; clients that are equally close to several replicas (a LAN) must
    // not all coordinate at the first one, or it becomes the bottleneck (in the simulator's LAN,
    // 200 clients offering 50k ops/s got 42k, replica 0 at 100% CPU, the others at 40%). Method:
    // replicas 0 and 1 at site 0, replica 2 at site 1; four clients at site 0 and one at site 1.
    // The site-0 clients start at replicas 0 and 1, two each, and rank replica 2 last; the
    // site-1 client starts at replica 2.
    let replicas = [0, 0, 1];
    let client_sites = [0, 0, 0, 0, 1];
    let mut nodes = Vec::new();
    for (index, &site) in replicas.iter().chain(&client_sites).enumerate() {
        let role = if index < replicas.len() { Role::Replica } else { Role::Client };
        let shard = (role == Role::Replica).then_some(0);
        nodes.push(NodeSpec { id: NodeId(index as u32), role, site, shard, machine: None });
    }
    let topology = Topology {
        nodes,
        shards: vec![Destinations::from(vec![NodeId(0), NodeId(1), NodeId(2)])],
        f: 1,
        sites: vec!["near".into(), "far".into()],
        site_delay_ns: vec![vec![40_000, 5_000_000], vec![5_000_000, 40_000]],
    };
    let mut first_choices: BTreeMap<NodeId, usize> = BTreeMap::new();
    for client in 3..7 {
        let ranked = ranking(&topology, NodeId(client), 0);
        assert_eq!(ranked.len(), 3, "every replica ranked");
        assert_eq!(ranked[2], NodeId(2), "the far replica comes last");
        *first_choices.entry(ranked[0]).or_default() += 1;
    }
    assert_eq!(first_choices, BTreeMap::from([(NodeId(0), 2), (NodeId(1), 2)]), "spread over the near replicas");
    assert_eq!(ranking(&topology, NodeId(7), 0)[0], NodeId(2), "the far client starts at its own site");
}

#[test]
fn restarted_replica_stays_down() {
    // Goal: Tempo is crash-stop (paper §2). A replica process that restarts has lost its clocks,
    // promises and ballots; taking part again, it could propose a timestamp below one it promised
    // and that another replica already executed, and replicas would run commands in different
    // orders. A restarted replica must stay out (retired), and the others go on without it.
    // Method (r = 3, f = 1): B is cut off long enough for A to suspect it; A (clock at 5 on k)
    // coordinates x on k with the fast quorum {A, C}: x runs at A and C at timestamp 6. A crashes
    // and restarts; B comes back and coordinates y on k before it hears of x, with the fast quorum
    // {B, A} (it suspects both peers after its silence; A is closer in rank). An amnesic A would
    // propose 1 with B, y would commit at 1 below x, and B would run y before x, C x before y.
    let mut s = Scenario::new(1, 3, 1, 1);
    let (a, b, c) = (s.replica(0), s.replica(1), s.replica(2));
    let client = s.client();
    s.set_clock(0, "k", 5);
    s.cluster.isolate(b);
    s.run_ms(40);
    let x = s.submit(client, Command::set("k", "x"));
    s.deliver_all();
    s.run_ms(3);
    assert!(s.completed(x), "x completed without B");
    let x_dot = dot(client, 1);
    assert_eq!((s.ts(a, x_dot), s.ts(c, x_dot)), (Some(6), Some(6)), "x committed at 6");
    assert_eq!((s.executed(a), s.executed(c)), (1, 1), "x ran at A and C");

    s.crash(a);
    s.cluster.heal(b);
    s.restart(a);
    let sent_before = s.sent().len();
    let y_dot = s.inject_submit(client, b, 2, Command::set("k", "y"));
    s.deliver_all();
    s.run_ms(300);

    assert_eq!(s.state(a).life, Life::Retired, "A knows it restarted");
    assert!(s.sent()[sent_before..].iter().all(|e| e.from != a), "a retired replica sends nothing");
    assert_eq!(s.executed(a), 0, "a retired replica runs nothing");
    let (x_ts, y_ts) = (s.ts(b, x_dot).expect("x committed at B"), s.ts(b, y_dot).expect("y committed at B"));
    assert!(y_ts > x_ts, "y, submitted after x ran, is ordered after it: x at {x_ts}, y at {y_ts}");
    assert_eq!((s.executed(b), s.executed(c)), (2, 2), "B and C ran x and y");
    assert_eq!(s.applied(b), s.applied(c), "B and C ran x and y in one order");
    assert_one_timestamp_per_command(&s);
}

#[test]
fn first_boot_sends_wait_for_the_boot_marker() {
    // Goal: a crash before the boot marker is durable must leave no trace of the incarnation
    // (style rule 2: the wait is data), and a replica that finds the marker stays out. Method, on
    // the testkit's cluster with manual durability at A (r = 3): A boots, writing the marker, and
    // is made to send (its promise timer fires, it coordinates a submission): nothing reaches the
    // network. A crashes before the flush: its sends are lost with the marker, and it boots again
    // as new. Once the marker is flushed, the sends held for it leave, and later sends leave at
    // once. A crashes again and restarts with the marker on disk: it retires, arms no timer and
    // answers nothing.
    let mut cluster: Cluster<Tempo> = Cluster::stopped_with_topology(topology(1, 3, 1, &[0]), Config::default(), 1);
    cluster.keep_sent_log();
    let a = cluster.replica(0);
    cluster.set_manual_durability(a, true);
    for index in 0..4 {
        cluster.start(NodeId(index));
    }
    let from_a = |cluster: &Cluster<Tempo>| cluster.sent_log().iter().filter(|e| e.from == a).count();
    assert_eq!(cluster.unflushed_count(a), 1, "A wrote its boot marker");
    assert!(cluster.fire_timer(a, &Timer::Promises), "A's promise timer is armed");
    let op = cluster.submit(cluster.client(0), Command::set("k", "v"));
    cluster.deliver_all();
    assert!(cluster.node_as::<Replica>(a).instances.values().any(|i| i.phase == Phase::Propose), "A proposed");
    assert_eq!(from_a(&cluster), 0, "A's sends wait for its marker");

    cluster.crash(a);
    assert!(cluster.durable(a).is_empty(), "the marker was lost with the crash");
    cluster.restart(a);
    assert!(matches!(cluster.node_as::<Replica>(a).life, Life::Booting(_)), "A boots as new: no trace is left");
    assert!(cluster.fire_timer(a, &Timer::Promises), "A's promise timer is armed");
    assert_eq!(from_a(&cluster), 0, "A's sends wait for its new marker");
    cluster.flush(a);
    assert_eq!(cluster.node_as::<Replica>(a).life, Life::Running, "the marker is durable");
    let released = from_a(&cluster);
    assert_eq!(released, 4, "the held MPromises and MExecuted to B and C left");
    assert!(cluster.fire_timer(a, &Timer::Promises), "A's promise timer is armed");
    assert_eq!(cluster.unflushed_count(a), 0, "A wrote nothing more");
    assert_eq!(from_a(&cluster), released + 4, "now A's sends leave at once");
    assert_eq!(cluster.result(op), None, "the submission died with A's first incarnation");

    cluster.crash(a);
    cluster.restart(a);
    assert_eq!(cluster.durable(a).len(), 1, "one marker on disk");
    assert_eq!(cluster.node_as::<Replica>(a).life, Life::Retired, "A knows it restarted");
    assert!(cluster.pending_timers(a).is_empty(), "a retired replica arms no timer");
    let sent_before = cluster.sent_log().len();
    cluster.inject(cluster.replica(1), a, Message::Help { dot: dot(a, 1), payload: None });
    cluster.deliver_all();
    assert!(cluster.sent_log()[sent_before..].iter().all(|e| e.from != a), "a retired replica sends nothing");
    assert_eq!(cluster.stats(a).dropped.get("restarted replica stays down (crash-stop)"), Some(&1));
}

/// One client operation of a scenario workload.
struct Op {
    request: RequestId,
    /// Keys of the command, with their shard.
    keys: Vec<(u32, Key)>,
    id: u64,
    submitted_round: u64,
    completed_round: Option<u64>,
}

/// Runs a closed-loop workload: in each 1 ms round every idle client with operations left
/// submits the next command `next` draws, then the network drains as `chaos` says; after
/// `chaos_rounds` rounds the network stops losing and duplicating (it still reorders). Stops once
/// every operation completed and `settle_rounds` more rounds passed; fails after `rounds_max`.
struct Drive {
    per_client: usize,
    chaos: Chaos,
    chaos_rounds: u64,
    settle_rounds: u64,
    rounds_max: u64,
}

impl Drive {
    fn run(&self, s: &mut Scenario, rng: &mut ChaCha8Rng, mut next: impl FnMut(&mut ChaCha8Rng) -> Command) -> Vec<Op> {
        let clients = s.clients();
        let shards = s.shards();
        let mut ops: Vec<Op> = Vec::new();
        let mut outstanding: BTreeMap<NodeId, usize> = BTreeMap::new();
        let mut issued: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut seen = 0;
        let mut settled = 0;
        for round in 0..self.rounds_max {
            for &client in &clients {
                if outstanding.contains_key(&client)
                    || issued.get(&client).copied().unwrap_or(0) >= self.per_client as u64
                {
                    continue;
                }
                let command = next(rng);
                let mut keys = Vec::new();
                command.for_each_key(|key| keys.push((shard_of_key(key, shards) as u32, key.clone())));
                let id = s.submit(client, command);
                let number = issued.entry(client).or_insert(0);
                *number += 1;
                let request = RequestId { client: client_id(client), number: *number };
                outstanding.insert(client, ops.len());
                ops.push(Op { request, keys, id, submitted_round: round, completed_round: None });
            }
            let chaos = if round < self.chaos_rounds { self.chaos } else { Chaos::default() };
            s.run_ms_shuffled(1, rng, chaos);
            for completion in &s.cluster.completions()[seen..] {
                if let Some(index) = ops.iter().position(|op| op.id == completion.op && op.completed_round.is_none()) {
                    ops[index].completed_round = Some(round);
                    outstanding.retain(|_, &mut i| i != index);
                }
            }
            seen = s.cluster.completions().len();
            let finished = clients.iter().all(|c| issued.get(c).copied().unwrap_or(0) == self.per_client as u64);
            if finished && outstanding.is_empty() {
                settled += 1;
                if settled > self.settle_rounds {
                    return ops;
                }
            }
        }
        panic!("{} of {} operations still outstanding after {} rounds", outstanding.len(), ops.len(), self.rounds_max);
    }
}

/// Checks that every operation ran exactly once at every replica of each shard it accesses,
/// and that the order ↦ of spec §2.5 — per key, the execution order at each replica of the key's
/// shard, plus real time (c completed in an earlier round than d was submitted) — has no cycle.
fn check_executed_once_and_acyclic(s: &Scenario, ops: &[Op]) {
    let index: BTreeMap<RequestId, usize> = ops.iter().enumerate().map(|(i, op)| (op.request, i)).collect();
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    for shard in 0..s.shards() {
        let replicas = s.shard(shard);
        let shard = shard as u32;
        for &node in &replicas {
            let applied = s.applied(node);
            let mut last_on_key: BTreeMap<&Key, usize> = BTreeMap::new();
            let mut ran: BTreeSet<usize> = BTreeSet::new();
            for request in &applied {
                let i = index[request];
                assert!(ran.insert(i), "{node} ran {request:?} twice");
                for (_, key) in ops[i].keys.iter().filter(|(s, _)| *s == shard) {
                    if let Some(before) = last_on_key.insert(key, i) {
                        edges.insert((before, i));
                    }
                }
            }
            for (i, op) in ops.iter().enumerate() {
                let accessed = op.keys.iter().any(|(s, _)| *s == shard);
                assert_eq!(ran.contains(&i), accessed, "{node} (shard {shard}) and {:?}", op.request);
            }
        }
    }
    for (c, before) in ops.iter().enumerate() {
        for (d, after) in ops.iter().enumerate() {
            if before.completed_round.is_some_and(|done| done < after.submitted_round) {
                edges.insert((c, d));
            }
        }
    }
    // Kahn's algorithm: every operation must come off the graph.
    let mut incoming = vec![0usize; ops.len()];
    for &(_, to) in &edges {
        incoming[to] += 1;
    }
    let mut ready: Vec<usize> = (0..ops.len()).filter(|&i| incoming[i] == 0).collect();
    let mut removed = 0;
    while let Some(i) = ready.pop() {
        removed += 1;
        for &(_, to) in edges.range((i, 0)..=(i, usize::MAX)) {
            incoming[to] -= 1;
            if incoming[to] == 0 {
                ready.push(to);
            }
        }
    }
    assert_eq!(removed, ops.len(), "the order ↦ (execution order per key plus real time) has a cycle");
}

/// Per key, every replica of the key's shard ran the operations touching it in the same order
/// (each key is a partition of its own: operations on different keys may run in either order).
fn assert_same_order_per_key(s: &Scenario, ops: &[Op]) {
    let index: BTreeMap<RequestId, usize> = ops.iter().enumerate().map(|(i, op)| (op.request, i)).collect();
    for (shard, replicas) in s.cluster.topology().shards.iter().enumerate() {
        let keys: BTreeSet<&Key> =
            ops.iter().flat_map(|op| op.keys.iter()).filter(|(s, _)| *s as usize == shard).map(|(_, k)| k).collect();
        for key in keys {
            let orders: BTreeSet<Vec<RequestId>> = replicas
                .iter()
                .map(|&node| {
                    let applied = s.applied(node);
                    applied.into_iter().filter(|r| ops[index[r]].keys.iter().any(|(_, k)| k == key)).collect()
                })
                .collect();
            assert_eq!(orders.len(), 1, "replicas of shard {shard} ran the operations on {key:?} in different orders");
        }
    }
}

#[test]
fn loss_duplication_and_reordering_t22() {
    // Goal: T22 — 10–30% of messages lost, 10% duplicated, delivery in random order: safety
    // always (P1, one sequence for all replicas), duplicate MPropose / MPayload ignored, and once
    // loss stops every operation completes and runs everywhere. Tempo's own repair is the
    // retransmission: reliable MPromises, Help, recovery, client retries. Method: five clients
    // at five sites, closed loop on two keys, 300 lossy rounds then a clean network.
    let mut duplicates_ignored = 0;
    for (seed, loss) in [(1u64, 0.1), (2, 0.2), (3, 0.3)] {
        let mut s = Scenario::with_clients_at(1, 5, 1, &[0, 1, 2, 3, 4]);
        let mut rng = ChaCha8Rng::seed_from_u64(220 + seed);
        let drive = Drive {
            per_client: 12,
            chaos: Chaos { loss, duplicate: 0.1 },
            chaos_rounds: 300,
            settle_rounds: 200,
            rounds_max: 5_000,
        };
        let mut unique = 0;
        let ops = drive.run(&mut s, &mut rng, |rng| {
            unique += 1;
            match rng.random_range(0..3) {
                0 => Command::set("x", format!("s{unique}")),
                1 => Command::append("y", format!("a{unique};")),
                _ => Command::get("x"),
            }
        });
        assert_eq!(ops.len(), 60);
        assert_one_timestamp_per_command(&s);
        assert_same_order_per_key(&s, &ops);
        for node in s.shard(0) {
            assert_eq!(s.executed(node), 60, "loss {loss}: {node} ran every request once");
            duplicates_ignored += s.drops(node, "propose for a command not in start")
                + s.drops(node, "payload for a command not in start");
        }
        check_executed_once_and_acyclic(&s, &ops);
    }
    assert!(duplicates_ignored > 0, "duplicated MPropose / MPayload arrived and were ignored");
}

#[test]
fn commit_before_payload_is_kept_until_the_payload_arrives_t22() {
    // Goal: T22 — an MCommit that overtakes the MPayload is kept (the replica cannot commit in
    // START) and applied once the payload arrives; a duplicate MPropose changes nothing.
    // Method: hold A's MPayload to D, deliver the rest, then deliver the payload; resend an
    // MPropose to B.
    let mut s = Scenario::new(1, 5, 1, 1);
    let (a, b, d_node) = (s.replica(0), s.replica(1), s.replica(3));
    let client = s.client();
    s.submit(client, Command::set("a", "1"));
    s.deliver_all_holding(|from, to, m| from == a && to == d_node && matches!(m, Message::Payload { .. }));
    let d = dot(client, 1);
    let instance = &s.state(d_node).instances[&d];
    assert_eq!(instance.phase, Phase::Start, "no payload, no commit");
    assert_eq!(instance.shard_ts.get(&0), Some(&1), "the commit's timestamp is kept");
    let proposal = s.state(b).instances[&d].proposal;
    let propose = s.sent().iter().find(|e| e.to == b && matches!(e.message, Message::Propose { .. })).cloned();
    let propose = propose.expect("A proposed to B");
    s.inject(propose.from, propose.to, propose.message);
    s.release(|_, _, _| true);
    s.deliver_all();
    assert_eq!(s.ts(d_node, d), Some(1), "committed once the payload arrived");
    assert_eq!(s.drops(b, "propose for a command not in start"), 1, "the duplicate MPropose was ignored");
    assert_eq!(s.state(b).instances[&d].proposal, proposal);
    s.run_ms(3);
    for node in s.shard(0) {
        assert_eq!(s.executed(node), 1, "{node}");
    }
}

#[test]
fn bump_alone_does_not_make_the_final_timestamp_stable_t25() {
    // Goal: T25 — Fig. 4 with H proposing 11: partition 0 commits 6, partition 1 commits 11 (F and
    // G propose 10). The MBumps move B to 10 and C to 11, which is not enough: at A the final
    // timestamp 11 becomes stable only through the commit-time bump (line 59) of the other
    // replicas of partition 0, and then it executes. Control (T24's case): with H proposing 10
    // the MBumps alone make 10 stable at A. Method: hold every MCommit to partition 0 except A's,
    // exchange promises, look at A; then release.
    let k0 = keys_in_shard(0, 2, 1).remove(0);
    let k1 = keys_in_shard(1, 2, 1).remove(0);
    for (h_clock, final_ts) in [(10, 11), (9, 10)] {
        let mut s = Scenario::new(2, 5, 1, 1);
        let (shard0, shard1) = (s.shard(0), s.shard(1));
        for &node in &shard0[..3] {
            s.set_clock_of(node, &k0, 5);
        }
        s.set_clock_of(shard1[0], &k1, 9);
        s.set_clock_of(shard1[1], &k1, 9);
        s.set_clock_of(shard1[2], &k1, h_clock);
        let client = s.client();
        let op = s.submit(
            client,
            Command::MSet { pairs: vec![(k0.clone().into(), "x".into()), (k1.clone().into(), "y".into())] },
        );
        let a = shard0[0];
        let hold =
            |_: NodeId, to: NodeId, m: &Message| matches!(m, Message::Commit { .. }) && shard0.contains(&to) && to != a;
        s.deliver_all_holding(hold);
        for _ in 0..3 {
            s.fire(Timer::Promises);
            s.deliver_all_holding(hold);
        }
        let d = dot(client, 1);
        let key = Key::from(k0.clone());
        assert_eq!(s.ts(a, d), Some(final_ts), "the final timestamp is the maximum");
        assert_eq!(s.state(shard0[1]).clocks.clock(&key), 10, "G's MBump moved B");
        assert_eq!(s.state(shard0[2]).clocks.clock(&key), h_clock + 1, "H's MBump moved C");
        let stable = s.state(a).promises.stable(&key);
        if final_ts == 11 {
            assert_eq!(stable, 10, "MBumps and A's own commit leave 11 unstable at A");
            assert_eq!(s.executed(a), 0, "A cannot run it yet");
            s.release(|_, _, _| true);
            s.deliver_all();
            s.run_ms(3);
            assert!(s.state(a).promises.stable(&key) >= 11, "the commit-time bumps made 11 stable");
        } else {
            assert!(stable >= 10, "control: the MBumps alone made 10 stable at A");
            assert_eq!(s.executed(a), 1, "control: A ran it before the others committed");
            s.release(|_, _, _| true);
            s.run_ms(3);
        }
        for &node in shard0.iter().chain(&shard1) {
            assert_eq!(s.executed(node), 1, "{node} ran it once");
            assert_eq!(s.ts(node, d), Some(final_ts));
        }
        assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
    }
}

#[test]
fn cross_shard_commands_run_in_one_order_t26() {
    // Goal: T26 — concurrent two-shard commands from different sites, mixed with single-shard
    // traffic on the same keys: commands on the same two partitions {x0, y0} run in the same
    // relative order in both shards, every key's commands run in one order at all its replicas,
    // and the order ↦ (per-key execution order everywhere plus real time) is acyclic. Method:
    // 2 shards of 3, six clients at three sites, MSETs on {x0, y0} and {x1, y0}, SETs and
    // APPENDs on x0, x1, y0, y1, random delivery, five seeds.
    let x = keys_in_shard(0, 2, 2);
    let y = keys_in_shard(1, 2, 2);
    for seed in 0..5 {
        let mut s = Scenario::with_clients_at(2, 3, 1, &[0, 1, 2, 0, 1, 2]);
        let mut rng = ChaCha8Rng::seed_from_u64(260 + seed);
        let drive =
            Drive { per_client: 8, chaos: Chaos::default(), chaos_rounds: 0, settle_rounds: 10, rounds_max: 2_000 };
        let mut unique = 0;
        let ops = drive.run(&mut s, &mut rng, |rng| {
            unique += 1;
            let value = format!("v{unique}");
            match rng.random_range(0..10) {
                0..5 => Command::MSet {
                    pairs: vec![(x[0].clone().into(), value.clone().into()), (y[0].clone().into(), value.into())],
                },
                5 => Command::set(x[0].clone(), value),
                6 => Command::append(y[0].clone(), value),
                7 => Command::MSet {
                    pairs: vec![(x[1].clone().into(), value.clone().into()), (y[0].clone().into(), value.into())],
                },
                8 => Command::append(x[1].clone(), value),
                _ => Command::append(y[1].clone(), value),
            }
        });
        check_executed_once_and_acyclic(&s, &ops);
        assert_same_order_per_key(&s, &ops);
        let pair: BTreeSet<Key> = [x[0].clone().into(), y[0].clone().into()].into();
        let both: BTreeSet<RequestId> = ops
            .iter()
            .filter(|op| op.keys.iter().map(|(_, k)| k.clone()).collect::<BTreeSet<Key>>() == pair)
            .map(|op| op.request)
            .collect();
        let orders: BTreeSet<Vec<RequestId>> = s
            .all_replicas()
            .into_iter()
            .map(|node| s.applied(node).into_iter().filter(|r| both.contains(r)).collect())
            .collect();
        assert_eq!(orders.len(), 1, "seed {seed}: commands on {{x0, y0}} ran in different orders in the two shards");
        assert!(both.len() >= 10, "seed {seed}: only {} commands on {{x0, y0}}", both.len());
        assert_one_timestamp_per_command(&s);
    }
}

#[test]
fn cross_shard_real_time_order_waits_for_mstable_t26() {
    // Goal: T26 (real time across shards) — c = MSET{x, y} spans shards p and q; a read of x that
    // runs after c at p returns, and only then a read of y is submitted at q: the read of y must
    // see c too (otherwise c ↦_p read-x ⇝ read-y ↦_q c is a cycle). The MStable exchange is what
    // keeps c from running at p before it is stable at q. Method: p's clocks at 10, so c's final
    // timestamp 11 comes from p while q proposes 1; c's MCommits to q's replicas are held (c is
    // committed at p only) while the read of x is submitted and promises flow; the read of y is
    // submitted as soon as the read of x returned; then the MCommits are released. c's MBumps to
    // q are held too: they would move q's clocks past 11 and mask a missing MStable wait here,
    // but they are only an optimisation (a lost MBump must not break real-time order).
    let x = keys_in_shard(0, 2, 1).remove(0);
    let y = keys_in_shard(1, 2, 1).remove(0);
    let mut s = Scenario::with_clients_at(2, 3, 1, &[0, 1, 2]);
    let clients = s.clients();
    let (p, q) = (s.shard(0), s.shard(1));
    for &node in &p {
        s.set_clock_of(node, &x, 10);
    }
    let c_op = s.submit(
        clients[0],
        Command::MSet { pairs: vec![(x.clone().into(), "c".into()), (y.clone().into(), "c".into())] },
    );
    let c = dot(clients[0], 1);
    let hold = |_: NodeId, to: NodeId, m: &Message| {
        q.contains(&to) && matches!(m, Message::Commit { dot, .. } | Message::Bump { dot, .. } if *dot == c)
    };
    s.deliver_all_holding(hold);
    assert_eq!(s.ts(p[0], c), Some(11), "c is committed at p");
    let read_x = s.submit(clients[1], Command::get(x.clone()));
    let mut read_y = None;
    for _ in 0..10 {
        s.fire(Timer::Promises);
        s.deliver_all_holding(hold);
        if read_y.is_none() && s.completed(read_x) {
            read_y = Some(s.submit(clients[2], Command::get(y.clone())));
        }
    }
    s.release(|_, _, _| true);
    let mut waited_ms = 0;
    while ![Some(c_op), Some(read_x), read_y].iter().all(|op| op.is_some_and(|op| s.completed(op))) {
        s.run_ms(1);
        if read_y.is_none() && s.completed(read_x) {
            read_y = Some(s.submit(clients[2], Command::get(y.clone())));
        }
        waited_ms += 1;
        assert!(waited_ms < 500, "the operations never completed");
    }
    let result = |op: Option<u64>| op.and_then(|op| s.result(op));
    let saw_c = Some(CommandResult::Value("c".into()));
    assert_eq!(result(Some(read_x)), saw_c, "the read of x follows c at p");
    assert_eq!(result(read_y), saw_c, "the read of y, submitted after the read of x saw c, missed c");
}

#[test]
fn overlapping_multi_shard_commands_never_deadlock_t28() {
    // Goal: T28 — many overlapping multi-shard commands under random interleavings: every one
    // eventually runs in every shard it accesses (no cycle of MStable waits). Method: 3 shards of
    // 3, nine clients at three sites, every command an MSET over two or three shards drawn from
    // six keys, random delivery, five seeds.
    let keys: Vec<Vec<String>> = (0..3).map(|shard| keys_in_shard(shard, 3, 2)).collect();
    for seed in 0..5 {
        let mut s = Scenario::with_clients_at(3, 3, 1, &[0, 1, 2, 0, 1, 2, 0, 1, 2]);
        let mut rng = ChaCha8Rng::seed_from_u64(280 + seed);
        let drive =
            Drive { per_client: 10, chaos: Chaos::default(), chaos_rounds: 0, settle_rounds: 10, rounds_max: 3_000 };
        let mut unique = 0;
        let ops = drive.run(&mut s, &mut rng, |rng| {
            unique += 1;
            let mut shards: Vec<usize> = vec![0, 1, 2];
            shards.swap(0, rng.random_range(0..3));
            shards.truncate(rng.random_range(2..=3));
            let pairs = shards
                .iter()
                .map(|&s| (keys[s][rng.random_range(0..2)].clone().into(), format!("v{unique}").into()))
                .collect();
            Command::MSet { pairs }
        });
        assert_eq!(ops.len(), 90, "seed {seed}");
        check_executed_once_and_acyclic(&s, &ops);
        assert_same_order_per_key(&s, &ops);
        assert_one_timestamp_per_command(&s);
    }
}
