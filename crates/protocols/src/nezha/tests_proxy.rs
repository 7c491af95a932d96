//! Nezha scenarios of specs/nezha.md §11 that need proxies, on the step-by-step testkit with a
//! topology that has them (`testkit::script::Layout`: replicas, then Nezha's proxies, then
//! clients). They moved here from `crates/sim/tests/nezha_scenarios.rs`, where the old testkit's
//! lack of proxies had put them: there they ran 10–40 random seeds hoping to hit each branch,
//! here each branch is scripted once, deterministically. The sidecar latency check stays in the
//! simulator (it measures a latency distribution over links with delays).

use super::messages::Message;
use super::{Config, Nezha};
use crate::testkit::Cluster;
use crate::testkit::script::Layout;
use ordo_core::{Command, CommandResult, KeyDigest, NodeId, Role};

const MS: u64 = 1_000_000;

fn cluster(config: Config, clients: usize) -> Cluster<Nezha> {
    let topology = Layout::new(3, clients).topology::<Nezha>(&config);
    let mut cluster = Cluster::with_topology(topology, config, 1);
    cluster.keep_sent_log();
    cluster
}

fn two_proxies() -> Config {
    Config { proxies: 2, ..Config::default() }
}

fn incr(key: &'static str) -> Command {
    Command::IncrBy { key: key.into(), delta: 1 }
}

/// Submits `command` at `client` and runs the cluster until it completes.
fn execute(cluster: &mut Cluster<Nezha>, client: NodeId, command: Command) -> CommandResult {
    let op = cluster.submit(client, command);
    assert!(cluster.run_until(100 * MS, |c| c.result(op).is_some()), "op {op} of {client} did not complete");
    cluster.result(op).expect("completed").clone()
}

fn event(cluster: &Cluster<Nezha>, node: NodeId, name: &str) -> u64 {
    cluster.total_stats(node).events.get(name).copied().unwrap_or(0)
}

fn digests(cluster: &Cluster<Nezha>) -> Vec<Vec<KeyDigest>> {
    cluster.replicas().iter().map(|&r| cluster.node(r).state_machine().expect("a replica").key_digests()).collect()
}

/// How far the dead proxy's multicast of the first copy got (spec §11 #9's two branches, and
/// the partial case between them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstCopy {
    /// Every replica appended it and fast-replied; the replies died with the proxy.
    Appended,
    /// The proxy died before multicasting it.
    LostWithProxy,
    /// Only the followers got it (the copy to the leader was lost).
    AtFollowersOnly,
}

/// What one run of scenario #9 showed.
struct Scenario9 {
    /// The retried INCR's result: 1 unless it ran twice.
    result: CommandResult,
    /// A read of the key afterwards.
    read_back: CommandResult,
    /// The client's retries.
    retries: u64,
    /// Duplicates the leader answered from its client table.
    cached_at_leader: u64,
    /// The proxy whose `ClientReply` completed the INCR, and the dead one.
    replied_by: NodeId,
    dead: NodeId,
    dead_status: String,
    /// Whether the replicas hold the same state at the end.
    agree: bool,
}

/// Scenario #9: client c0 sends INCR x through its proxy, which dies with the first copy as
/// far as `first_copy` says; then client c1 runs `traffic` INCRs of another key through the
/// other proxy, and c0's retry (through the next proxy) must complete.
fn scenario_9(config: Config, first_copy: FirstCopy, traffic: usize) -> Scenario9 {
    let mut cluster = cluster(config, 2);
    let (client, other) = (cluster.client(0), cluster.client(1));
    let leader = cluster.replica(0);
    let op = cluster.submit(client, incr("x"));
    let dead = cluster.pending().find(|e| e.from == client).expect("the request to the proxy").to;
    assert_eq!(cluster.topology().node(dead).role, Role::Proxy);
    match first_copy {
        FirstCopy::LostWithProxy => {}
        FirstCopy::Appended => {
            cluster.deliver_all_where(|e| e.from == client || e.from == dead);
            cluster.advance(MS / 2);
            assert!(cluster.status(leader).contains(" log=1 "), "the leader appended: {}", cluster.status(leader));
            let replies = cluster.pending().filter(|e| e.to == dead).count();
            assert!(replies >= 3, "every replica fast-replied to the proxy ({replies})");
        }
        FirstCopy::AtFollowersOnly => {
            cluster.deliver_all_where(|e| e.from == client);
            assert_eq!(cluster.drop_where(|e| e.from == dead && e.to == leader), 1);
            cluster.deliver_all_where(|e| e.from == dead);
        }
    }
    // The proxy dies: messages addressed to it (the request, or the fast-replies) are lost.
    cluster.crash(dead);
    for i in 0..traffic {
        assert_eq!(execute(&mut cluster, other, incr("y")), CommandResult::Integer(i as i64 + 1));
    }
    assert!(cluster.run_until(200 * MS, |c| c.result(op).is_some()), "{first_copy:?}: the retry did not complete");
    let result = cluster.result(op).expect("completed").clone();
    let replied_by = cluster
        .sent_log()
        .iter()
        .rev()
        .find(|e| e.to == client && matches!(e.message, Message::ClientReply { .. }))
        .expect("a reply reached the client")
        .from;
    let read_back = execute(&mut cluster, client, Command::get("x"));
    cluster.run_for(20 * MS);
    let digests = digests(&cluster);
    Scenario9 {
        result,
        read_back,
        retries: event(&cluster, client, "client_retry"),
        cached_at_leader: event(&cluster, leader, "duplicate_reply"),
        replied_by,
        dead,
        dead_status: cluster.status(dead),
        agree: digests.windows(2).all(|pair| pair[0] == pair[1]),
    }
}

#[test]
fn client_retries_through_another_proxy_after_its_proxy_dies() {
    // Goal: (spec §11 #9) a proxy dying between its multicast and its reply costs its client a
    // retry through another proxy, and no command runs twice. Method: 3 replicas, 2 proxies;
    // the client's INCR goes through proxy P1, which dies (for good) with the first copy
    // appended everywhere (the replies die with it), or before multicasting it, or with only
    // the followers holding it. In each case the client retries through the other proxy (once,
    // or, in the last case, up to three times) and gets 1 (a second execution would give 2,
    // and a read afterwards 2), and the replicas agree. When the first copy was appended, the
    // leader answers the retry from its client table (`duplicate_reply`); when it never
    // reached the leader, the leader appends the retry as new.
    for first_copy in [FirstCopy::Appended, FirstCopy::LostWithProxy, FirstCopy::AtFollowersOnly] {
        let run = scenario_9(two_proxies(), first_copy, 0);
        let what = format!("{first_copy:?}");
        assert_eq!(run.result, CommandResult::Integer(1), "{what}: the INCR ran once");
        assert_eq!(run.read_back, CommandResult::Value("1".into()), "{what}");
        if first_copy == FirstCopy::AtFollowersOnly {
            // The followers appended the first copy naming the dead proxy as its sender; after
            // the leader's sync they slow-reply there, not to the proxy of the retry. That proxy
            // commits once a later retry reaches followers already synced (the third: the
            // second goes to the dead proxy again). Slower, but still once.
            assert!((1..=3).contains(&run.retries), "{what}: {} retries", run.retries);
        } else {
            assert_eq!(run.retries, 1, "{what}: one retry");
        }
        assert_ne!(run.replied_by, run.dead, "{what}: the reply came through another proxy");
        assert_eq!(run.dead_status, "down", "{what}");
        assert!(run.agree, "{what}: replicas disagree");
        match first_copy {
            FirstCopy::Appended => assert_eq!(run.cached_at_leader, 1, "{what}: the leader resent its cached reply"),
            FirstCopy::LostWithProxy => assert_eq!(run.cached_at_leader, 0, "{what}: nothing to resend"),
            // The leader appended the first retry as a new request; later retries are cached.
            FirstCopy::AtFollowersOnly => {
                assert!(run.cached_at_leader < run.retries, "{what}: the leader never had it")
            }
        }
    }
}

#[test]
fn scenario_9_catches_a_replica_that_forgets_executed_requests() {
    // Goal: the scenario's checks can fail on a double execution. Method: the appended branch
    // with at-most-once crippled through Nezha's options (a client table of one entry, the log
    // folded every 8 positions) and 30 INCRs of another client before the retry: the retried
    // request's first copy is then neither in the client table nor in the log, so it runs
    // again and the INCR returns 2. The same run with the default options returns 1.
    let crippled = Config { client_table_max: 1, checkpoint_interval: 8, ..two_proxies() };
    let run = scenario_9(crippled, FirstCopy::Appended, 30);
    assert_eq!(run.result, CommandResult::Integer(2), "the crippled replicas ran the retry again");
    assert_eq!(run.read_back, CommandResult::Value("2".into()));
    let run = scenario_9(two_proxies(), FirstCopy::Appended, 30);
    assert_eq!(run.result, CommandResult::Integer(1), "control: the real replicas run it once");
    assert_eq!(run.cached_at_leader, 1);
}

#[test]
fn sidecar_clients_send_to_the_proxy_on_their_machine() {
    // Goal: (spec §3.2, paper §3 "co-locating the proxy with the client") with proxies on the
    // clients' machines, each client sends its requests to its own machine's proxy, and
    // correctness is unchanged. Method: 4 sidecar proxies, 8 clients (client i on proxy i % 4's
    // machine; with 4, not 3, a client's id modulo the proxy count would not pick its own
    // machine by chance); each client runs one INCR; every request goes to a proxy on the
    // sender's machine and every result is right. (The latency this saves is measured by the
    // simulator test `sidecar_proxies_serve_the_clients_on_their_machine`.)
    let config = Config { proxies: 4, ..Config::default() };
    let topology = Layout { sidecar: true, ..Layout::new(3, 8) }.topology::<Nezha>(&config);
    let mut cluster = Cluster::with_topology(topology, config, 1);
    cluster.keep_sent_log();
    let clients = cluster.clients();
    for (i, &client) in clients.iter().enumerate() {
        assert_eq!(execute(&mut cluster, client, incr("k")), CommandResult::Integer(i as i64 + 1));
    }
    let topology = cluster.topology().clone();
    let mut requests = 0;
    for envelope in cluster.sent_log() {
        if matches!(envelope.message, Message::ClientRequest { .. }) {
            requests += 1;
            assert!(topology.same_machine(envelope.from, envelope.to), "{} sent to {}", envelope.from, envelope.to);
        }
    }
    assert_eq!(requests, clients.len(), "one request per client, no retry");
    // Control: a client that chose by its id alone (node 7 → proxy 7 % 4 = 3) would leave its
    // machine (client 0 shares proxy 0's), so the check above tells the two choices apart.
    let client = clients[0];
    let by_id = topology.with_role(Role::Proxy).nth(client.index() % 4).expect("a proxy");
    assert!(!topology.same_machine(client, by_id), "the choice by id alone would leave the client's machine");
}
