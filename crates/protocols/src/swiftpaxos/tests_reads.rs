//! SwiftPaxos^reads (spec scenario 30, second half; `reads.rs`): reads run at the fast-quorum
//! replica closest to their client, whose speculative result the client takes only when the
//! leader and a fast quorum report the reader's paths. The global checker (Nontriviality: a
//! result a client took equals the read's execution everywhere; Inv 14) runs after every step.

use super::messages::Message;
use super::reads;
use super::tests::{event, replica};
use super::tests_scenarios::results_under_load;
use super::{Config, SwiftPaxos};
use crate::testkit::{Cluster, Envelope};
use ordo_core::{Command, CommandResult, NodeId};

fn reads_on() -> Config {
    Config { reads: true, ..Config::default() }
}

/// The rank serving `client`'s reads in ballot 0.
fn reader_of(cluster: &Cluster<SwiftPaxos>, client: NodeId) -> usize {
    let leader = replica(cluster, 0);
    reads::reader(&leader.quorums, cluster.topology(), &leader.peers, client, 0)
}

/// The kinds of the messages waiting for `to`, with their senders.
fn waiting_for(cluster: &Cluster<SwiftPaxos>, to: NodeId) -> Vec<(NodeId, &'static str)> {
    cluster.pending().filter(|e| e.to == to).map(|e| (e.from, e.message.name())).collect()
}

#[test]
fn scenario_30_a_read_runs_at_the_closest_fast_quorum_follower() {
    // Goal: with `reads`, a read's result comes from a fast-quorum follower, the leader sends
    // only its FastAck, and the client takes the follower's result on the fast path. Method:
    // five replicas (C2: leader 0, followers 1 and 2); the client's reader is a follower on this
    // LAN (clients spread over the equally close members); a SET then a GET of one key.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 1, reads_on());
    let client = cluster.client(0);
    let reader = reader_of(&cluster, client);
    assert!(reader == 1 || reader == 2, "a fast-quorum follower serves the reads: {reader}");
    let (leader_node, reader_node) = (cluster.replica(0), cluster.replica(reader));
    cluster.submit(client, Command::set("k", "v"));
    cluster.deliver_all();
    let op = cluster.submit(client, Command::get("k"));
    cluster.deliver_all_where(|e| e.to != client);
    let waiting = waiting_for(&cluster, client);
    assert!(waiting.contains(&(reader_node, "reply")), "the reader replies: {waiting:?}");
    assert!(waiting.contains(&(leader_node, "fast_ack")), "the leader sends its FastAck: {waiting:?}");
    assert!(!waiting.contains(&(leader_node, "reply")), "the leader does not reply: {waiting:?}");
    let fast_before = event(&cluster, client, "client_fast");
    cluster.deliver_all();
    assert_eq!(cluster.result(op), Some(&CommandResult::Value("v".into())));
    assert_eq!(event(&cluster, client, "client_fast"), fast_before + 1, "taken on the fast path");
    assert_eq!(event(&cluster, reader_node, "read_served"), 1);
    assert_eq!(event(&cluster, reader_node, "read_answered_on_execution"), 0, "no second answer needed");
}

#[test]
fn scenario_30_a_read_replays_the_unexecuted_write_below_it() {
    // Goal: the reader's result includes a write it accepted but has not executed yet, and the
    // client takes it on the fast path before the reader executes that write. Method: a write
    // of "2" over "1" whose other votes are held back from the reader (it accepts the write
    // from the leader's FastAck but cannot commit it), then a read by the other client.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, reads_on());
    let (client, writer) = (cluster.client(0), cluster.client(1));
    let reader = reader_of(&cluster, client);
    assert_ne!(reader, 0, "a follower serves the reads");
    let (leader_node, reader_node) = (cluster.replica(0), cluster.replica(reader));
    cluster.submit(writer, Command::set("k", "1"));
    cluster.deliver_all();
    let held = move |e: &Envelope<SwiftPaxos>| {
        e.to == reader_node
            && e.from != leader_node
            && matches!(e.message, Message::FastAck { .. } | Message::SlowAck { .. })
    };
    let write = cluster.submit(writer, Command::set("k", "2"));
    cluster.deliver_all_where(|e| !held(e));
    assert_eq!(cluster.result(write), Some(&CommandResult::Ok), "the write committed elsewhere");
    assert_eq!(replica(&cluster, reader).execution.executed, 1, "the reader has not executed it");
    let read = cluster.submit(client, Command::get("k"));
    cluster.deliver_all_where(|e| !held(e));
    assert_eq!(cluster.result(read), Some(&CommandResult::Value("2".into())), "the write is replayed");
    assert_eq!(event(&cluster, client, "client_fast"), 1, "on the fast path");
    assert_eq!(replica(&cluster, reader).execution.executed, 1, "before the reader executed the write");
    cluster.deliver_all();
    assert_eq!(replica(&cluster, reader).execution.executed, 3, "then it ran both");
}

#[test]
fn scenario_30_a_reader_that_missed_a_write_is_not_taken() {
    // Goal: a reader that never received a write answers without it, but its paths differ
    // from the leader's, so the client refuses that stale result and gets the read's executed
    // result instead (from the reader, once the read ran there). Method: the write's
    // Propagate and the leader's FastAck for it never reach the reader before the read.
    let mut cluster = Cluster::<SwiftPaxos>::new(5, 2, reads_on());
    let (client, writer) = (cluster.client(0), cluster.client(1));
    let reader = reader_of(&cluster, client);
    let reader_node = cluster.replica(reader);
    cluster.submit(writer, Command::set("k", "1"));
    cluster.deliver_all();
    let write = cluster.submit(writer, Command::set("k", "2"));
    cluster.drop_where(|e| e.from == writer && e.to == reader_node);
    let held = move |e: &Envelope<SwiftPaxos>| e.to == reader_node && e.from != writer;
    cluster.deliver_all_where(|e| !held(e));
    assert_eq!(cluster.result(write), Some(&CommandResult::Ok));
    let read = cluster.submit(client, Command::get("k"));
    // The read's Propagate reaches the reader first; everything else for it waits.
    assert!(cluster.deliver_first(|e| e.from == client && e.to == reader_node));
    let stale = cluster.pending().any(|e| {
        e.from == reader_node
            && e.to == client
            && matches!(&e.message, Message::Reply { result: CommandResult::Value(v), .. } if v.as_ref() == b"1")
    });
    assert!(stale, "the reader answered from what it knew");
    cluster.run_for(200_000_000);
    assert_eq!(cluster.result(read), Some(&CommandResult::Value("2".into())), "never the stale value");
    assert_eq!(event(&cluster, client, "client_fast"), 0, "the reader's result was refused");
    assert_eq!(event(&cluster, reader_node, "read_answered_on_execution"), 1, "answered after execution");
}

#[test]
fn scenario_30_reads_under_load() {
    // Goal: under contention with reads served by followers, every result a client took
    // equals the command's execution at every replica, and the history is linearizable.
    // Method: scenario 14's load and checks (five replicas, four clients, 1000 random commands
    // on three keys, half reads, random delivery order) with `reads` on.
    // A reader's result whose paths the leader does not share is refused where the leader's
    // slow rule would take its own: somewhat fewer results come from a Reply (470 of 1000).
    let cluster = results_under_load(reads_on(), 400);
    let served: u64 = (1..5).map(|rank| event(&cluster, cluster.replica(rank), "read_served")).sum();
    assert!(served >= 100, "followers served reads: {served}");
}
