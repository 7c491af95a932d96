//! Recovery scenarios of spec §11 on the testkit cluster of `tests.rs` (`Scenario`): a slow (not crashed) initial
//! coordinator (T18), a fast-quorum member that got the payload before the proposal (T19), and
//! competing recoverers (T20). Rules A and B alone are checked in `tests.rs` (T15–T17).

use super::messages::{Dot, Message, RecPhase};
use super::replica::Phase;
use super::tests::{Chaos, Scenario, dot};
use ordo_core::{Command, CommandResult, NodeId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// The ranks of a shard of five: A (the initial coordinator) to E.
fn five(s: &Scenario) -> [NodeId; 5] {
    [s.replica(0), s.replica(1), s.replica(2), s.replica(3), s.replica(4)]
}

/// Every replica of `nodes` committed `dot` at `ts`.
fn assert_committed_everywhere(s: &Scenario, nodes: &[NodeId], dot: Dot, ts: u64) {
    for &node in nodes {
        assert_eq!(s.ts(node, dot), Some(ts), "{node} committed another timestamp");
    }
}

#[test]
fn slow_coordinator_joins_the_recovery_t18() {
    // Goal: T18 — the initial coordinator A is slow, not crashed: its MProposeAcks are late and B
    // recovers. A answers B's MRec and moves to RECOVER-P, so the acks that arrive afterwards are
    // ignored (no fast path); A is in the recovery quorum, so s = true and the timestamp is the
    // maximum over the whole quorum; one timestamp is committed and A learns it by MCommit.
    // Method: D's clock at 20 (D is outside the fast quorum {A, B, C}, which proposes 1), hold
    // the acks to A, call recover at B, deliver step by step.
    let mut s = Scenario::new(1, 5, 1, 1);
    let [a, b, c, d_node, e] = five(&s);
    s.set_clock(3, "a", 20);
    let client = s.client();
    let op = s.submit(client, Command::set("a", "1"));
    let acks_to_a = move |_: NodeId, to: NodeId, m: &Message| to == a && matches!(m, Message::ProposeAck { .. });
    s.deliver_all_holding(acks_to_a);
    let d = dot(client, 1);
    assert_eq!(s.state(a).instances[&d].phase, Phase::Propose);
    assert_eq!(s.held_count(), 2, "B's and C's acks are late");
    s.recover(b, d);
    let next = s.next_message().expect("B's MRec is on its way");
    assert!(next.from == b && next.to == a && matches!(next.message, Message::Rec { .. }), "{next:?}");
    s.step();
    let instance = &s.state(a).instances[&d];
    assert_eq!((instance.phase, instance.bal), (Phase::RecoverP, 7), "A joined B's ballot in RECOVER-P");
    s.release(|_, _, _| true);
    s.deliver_all();
    assert_eq!(s.drops(a, "propose ack while not in propose"), 2, "the late acks were ignored");
    let stats = &s.state(a).stats;
    assert_eq!(stats.fast_path_commits + stats.slow_path_commits, 0, "A decided nothing itself");
    let a_answer = s.sent().iter().find(|e| e.from == a && e.to == b && matches!(e.message, Message::RecAck { .. }));
    assert!(matches!(a_answer.map(|e| &e.message), Some(Message::RecAck { phase: RecPhase::RecoverP, t: 1, .. })));
    // B's quorum is B, A, C, D: A answered, so s holds and D's 21 counts (the fast quorum alone
    // would have given 1).
    assert_committed_everywhere(&s, &[a, b, c, d_node, e], d, 21);
    let commit_to_a = s.sent().iter().any(|e| e.from == b && e.to == a && matches!(e.message, Message::Commit { .. }));
    assert!(commit_to_a, "A learned the timestamp from B's MCommit");
    s.run_ms(3);
    for node in [a, b, c, d_node, e] {
        assert_eq!(s.executed(node), 1, "{node}");
    }
    assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
}

#[test]
fn fast_quorum_member_with_the_payload_first_t19() {
    // Goal: T19 — fast-quorum member C gets the payload forwarded before A's MPropose; B's MRec
    // then makes C compute proposal(id, 0) in RECOVER-R, so the MPropose arriving later (before
    // the recovery decides) is ignored, A never gets all its acks (no fast path), s = true and
    // the timestamp is the maximum over the recovery quorum; one timestamp is committed. Method:
    // E's clock at 30, hold A's MPropose to C, forward D's payload to C, call recover at B with
    // A left out of its quorum (its MRec held), so that s comes from C alone.
    let mut s = Scenario::new(1, 5, 1, 1);
    let [a, b, c, d_node, e] = five(&s);
    s.set_clock(4, "a", 30);
    let client = s.client();
    let op = s.submit(client, Command::set("a", "1"));
    let propose_to_c = move |_: NodeId, to: NodeId, m: &Message| to == c && matches!(m, Message::Propose { .. });
    s.deliver_all_holding(propose_to_c);
    let d = dot(client, 1);
    assert_eq!(s.state(a).instances[&d].acks.len(), 2, "A waits for C's ack");
    let payload = s.state(d_node).instances[&d].payload.clone().expect("D holds the payload");
    s.inject(d_node, c, Message::Payload { dot: d, payload });
    s.step();
    assert_eq!(s.state(c).instances[&d].phase, Phase::Payload);
    s.recover(b, d);
    let rec_to_a = move |_: NodeId, to: NodeId, m: &Message| to == a && matches!(m, Message::Rec { .. });
    s.deliver_until(rec_to_a, |s| s.state(c).instances[&d].phase == Phase::RecoverR);
    // The late MPropose reaches C now, in RECOVER-R, before the recovery decides.
    s.release(move |from, to, m| propose_to_c(from, to, m));
    s.deliver_all_holding(rec_to_a);
    assert_eq!(s.drops(c, "propose for a command not in start"), 1, "the late MPropose was ignored");
    let c_acks = s.sent().iter().filter(|e| e.from == c && matches!(e.message, Message::ProposeAck { .. }));
    assert_eq!(c_acks.count(), 0, "C never answered A's MPropose");
    let c_answer = s.sent().iter().find(|e| e.from == c && e.to == b && matches!(e.message, Message::RecAck { .. }));
    assert!(matches!(c_answer.map(|e| &e.message), Some(Message::RecAck { phase: RecPhase::RecoverR, t: 1, .. })));
    // Quorum B, C, D, E; I = {B, C}; C in RECOVER-R gives s, so E's 31 counts (I alone: 1).
    assert_committed_everywhere(&s, &[a, b, c, d_node, e], d, 31);
    let stats = &s.state(a).stats;
    assert_eq!(stats.fast_path_commits + stats.slow_path_commits, 0, "A could not take the fast path");
    s.release(|_, _, _| true);
    s.run_ms(3);
    for node in [a, b, c, d_node, e] {
        assert_eq!(s.executed(node), 1, "{node}");
    }
    assert_eq!(s.completions(), vec![(op, CommandResult::Ok)]);
}

/// A crashes right after its MPropose and MPayload went out, before any answer (r = 5, f = 1):
/// B and C are left in PROPOSE, D and E in PAYLOAD. Returns the command's dot.
fn coordinator_crashed_after_propose(s: &mut Scenario) -> Dot {
    let a = s.replica(0);
    let client = s.client();
    s.submit(client, Command::set("a", "1"));
    assert!(s.step(), "A handles the MSubmit");
    s.deliver_all_holding(move |_, to, _| to == a);
    // The crash drops every message to A, the held answers too.
    s.crash(a);
    assert_eq!(s.held_count(), 0, "only messages to A were held");
    dot(client, 1)
}

#[test]
fn competing_recoveries_scripted_t20() {
    // Goal: T20 — B and C recover the same command: their ballots differ and are above r, the
    // lower ballot's MConsensus is refused wherever the higher ballot was joined, and only one
    // timestamp is committed. Method: A crashes after MPropose; B recovers at ballot 7 and its
    // MConsensus is held; C recovers at 13 (Rule A adopts B's accepted value); B's MConsensus is
    // then delivered, then C's.
    let mut s = Scenario::new(1, 5, 1, 1);
    let [_, b, c, d_node, e] = five(&s);
    let d = coordinator_crashed_after_propose(&mut s);
    let consensus_from = |senders: Vec<NodeId>| {
        move |from: NodeId, _: NodeId, m: &Message| senders.contains(&from) && matches!(m, Message::Consensus { .. })
    };
    s.recover(b, d);
    s.deliver_all_holding(consensus_from(vec![b]));
    assert_eq!(s.state(b).instances[&d].abal, 7, "B reached phase 2 at ballot 7");
    s.recover(c, d);
    s.deliver_all_holding(consensus_from(vec![b, c]));
    let (ballot_b, ballot_c) = (s.state(b).instances[&d].rec_ballot, s.state(c).instances[&d].rec_ballot);
    assert_eq!((ballot_b, ballot_c), (7, 13));
    assert!(ballot_b > 5 && ballot_c > 5 && ballot_b != ballot_c);
    assert_eq!(s.held_count(), 8, "each recoverer's MConsensus to its four peers (A's copies die on delivery)");
    s.release(consensus_from(vec![b]));
    s.deliver_all();
    for node in [c, d_node, e] {
        assert_eq!(s.drops(node, "consensus at a stale ballot"), 1, "{node} refused ballot 7");
    }
    let acks_7 = s.sent().iter().filter(|e| matches!(e.message, Message::ConsensusAck { ballot: 7, .. })).count();
    assert_eq!(acks_7, 0, "nobody accepted ballot 7 but B itself");
    assert!(s.committed().iter().all(|&(_, committed, _)| committed != d), "nobody committed it yet");
    s.release(|_, _, _| true);
    s.deliver_all();
    assert_committed_everywhere(&s, &[b, c, d_node, e], d, 1);
    let commits_from_b = s.sent().iter().filter(|e| e.from == b && matches!(e.message, Message::Commit { .. }));
    assert_eq!(commits_from_b.count(), 0, "B's recovery never committed");
    s.run_ms(3);
    for node in [b, c, d_node, e] {
        assert_eq!(s.executed(node), 1, "{node}");
    }
}

#[test]
fn competing_recoveries_random_interleavings_t20() {
    // Goal: T20 — B and C call recover(id) at the same moment, with every interleaving the seeds
    // give: at most one timestamp is ever committed, and once the staggered time-outs leave a
    // single recoverer the command commits and runs. Method: A crashes after MPropose, random
    // clocks (so that competing recoverers would pick different values), both recover at once,
    // random delivery, then time passes (recoveries retry on their own).
    let mut values: BTreeSet<u64> = BTreeSet::new();
    for seed in 0..30 {
        let mut s = Scenario::new(1, 5, 1, 1);
        let [_, b, c, d_node, e] = five(&s);
        let mut rng = ChaCha8Rng::seed_from_u64(200 + seed);
        for rank in 1..5 {
            let clock = rng.random_range(0..20);
            s.set_clock(rank, "a", clock);
        }
        let d = coordinator_crashed_after_propose(&mut s);
        s.recover(b, d);
        s.recover(c, d);
        s.deliver_all_shuffled(&mut rng, Chaos::default());
        let mut waited = 0;
        while [b, c, d_node, e].iter().any(|&node| s.executed(node) == 0) {
            s.run_ms_shuffled(1, &mut rng, Chaos::default());
            waited += 1;
            assert!(waited < 1_000, "seed {seed}: the command never ran");
        }
        let ts = s.ts(b, d).expect("committed at B");
        assert_committed_everywhere(&s, &[b, c, d_node, e], d, ts);
        values.insert(ts);
        let mut ballots: BTreeMap<u64, NodeId> = BTreeMap::new();
        for envelope in s.sent() {
            if let Message::Rec { ballot, .. } = envelope.message {
                let owner = *ballots.entry(ballot).or_insert(envelope.from);
                assert_eq!(owner, envelope.from, "seed {seed}: ballot {ballot} used by two recoverers");
                assert!(ballot > 5, "seed {seed}: recovery ballot {ballot} ≤ r");
            }
        }
        assert!(ballots.values().collect::<BTreeSet<_>>().len() >= 2, "seed {seed}: both recovered");
    }
    assert!(values.len() > 1, "the clocks varied the recovered value across seeds");
}
