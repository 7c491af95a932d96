//! Recovery (Algorithm 4) and the liveness mechanisms the paper defers to its extended version
//! (spec §6.3): a replica that holds a command uncommitted for too long recovers it; a replica
//! that sees promises attached to a command it does not know, or waits for another shard's
//! timestamp, asks for it (`Help`).
//!
//! Nomination: every replica holding the payload arms a deadline, the initial coordinator's
//! earliest and the others staggered by their distance in rank, with jitter from the node's
//! generator; any ballot activity seen for the command pushes the deadline back. Competing
//! recoveries stay safe (Paxos ballots), the stagger makes them rare.
//!
//! Ballots (spec §6.4): `b = rank + 1 + r·(⌊max(bal − 1, 0)/r⌋ + 1)`, always above `r` and owned
//! by the sender, so a recovery never shares a ballot with an initial coordinator's slow path.

use super::messages::{Dot, Message, Payload, RecPhase};
use super::replica::{Phase, Replica};
use super::{Flaw, Tempo};
use ordo_core::{Destinations, NodeId, Outbox};
use rand::RngExt;
use std::sync::Arc;

/// The recovery ballot of process `rank` (0-based) after joining `bal`, in a shard of `r`.
pub fn recovery_ballot(rank: usize, bal: u64, r: usize) -> u64 {
    let r = r as u64;
    let owner = rank as u64 + 1;
    let ballot = owner + r * (bal.saturating_sub(1) / r + 1);
    assert!(ballot > r, "recovery ballots are above r");
    assert!(ballot > bal, "a recovery ballot is above every ballot joined");
    assert_eq!((ballot - 1) % r, rank as u64, "a ballot is owned by its sender");
    ballot
}

/// The canary's ballot: the printed formula with floor division, which gives `rank + 1` — an
/// initial coordinator's ballot — for a first recovery (spec §6.4).
pub fn recovery_ballot_floor(rank: usize, bal: u64, r: usize) -> u64 {
    let r = r as i64;
    let owner = rank as i64 + 1;
    let bal = bal as i64;
    (owner + r * ((bal - 1).div_euclid(r) + 1)) as u64
}

impl Replica {
    /// Arms the recovery deadline of a command that just became pending here.
    pub(crate) fn schedule_recovery(&mut self, dot: Dot) {
        if self.watch.contains_key(&dot) {
            return;
        }
        let coordinator = self.instances.get(&dot).and_then(|i| i.payload.as_ref()).and_then(|p| {
            p.index(self.shard)?;
            self.rank_of(p.coordinator(self.shard))
        });
        let distance = coordinator.map_or(0, |c| (self.rank + self.r() - c) % self.r()) as u64;
        let timeout = self.config.recovery_timeout_ns;
        let jitter = self.rng.random_range(0..=timeout / 4);
        self.watch.insert(dot, self.now_ns + timeout + distance * timeout / 2 + jitter);
    }

    /// Someone else works on the command: give them time before we step in.
    pub(crate) fn postpone_recovery(&mut self, dot: Dot) {
        let timeout = self.config.recovery_timeout_ns;
        let jitter = self.rng.random_range(0..=timeout);
        if let Some(deadline) = self.watch.get_mut(&dot) {
            *deadline = (*deadline).max(self.now_ns + timeout + jitter);
        }
    }

    /// Periodic: recover what is stuck, ask for what is missing.
    pub(crate) fn tick(&mut self, out: &mut Outbox<Tempo>) {
        let unknown: Vec<Dot> = self
            .promises
            .waiting()
            .filter(|dot| self.instances.get(dot).is_none_or(|i| i.phase == Phase::Start))
            .filter(|dot| !self.watch.contains_key(dot))
            .collect();
        for dot in unknown {
            self.watch.insert(dot, self.now_ns + self.config.recovery_timeout_ns);
        }
        let due: Vec<Dot> = self.watch.iter().filter(|(_, at)| **at <= self.now_ns).map(|(&dot, _)| dot).collect();
        for dot in due {
            let timeout = self.config.recovery_timeout_ns;
            let next = self.now_ns + timeout + self.rng.random_range(0..=timeout);
            self.watch.insert(dot, next);
            let Some(instance) = self.instances.get(&dot) else {
                out.multicast_durable(&self.peers, Message::Help { dot, payload: None });
                continue;
            };
            match instance.phase {
                Phase::Execute => {
                    self.watch.remove(&dot);
                }
                Phase::Commit => {
                    if instance.stable_sent {
                        self.resend_stable(dot, out);
                    } else {
                        self.watch.remove(&dot);
                    }
                }
                Phase::Start => {
                    self.stats.count("help");
                    out.multicast_durable(&self.peers, Message::Help { dot, payload: None });
                }
                _ if instance.shard_ts.contains_key(&self.shard) => {
                    let payload = instance.payload.clone().expect("pending has a payload");
                    let missing: Destinations = payload
                        .shards
                        .iter()
                        .filter(|s| !instance.shard_ts.contains_key(s))
                        .flat_map(|&s| self.topology.replicas_of(s as usize).iter().copied())
                        .collect();
                    self.stats.count("help");
                    out.multicast_durable(&missing, Message::Help { dot, payload: Some(payload) });
                }
                _ => self.recover(dot, out),
            }
        }
    }

    /// `recover(id)` (lines 72–75).
    pub(crate) fn recover(&mut self, dot: Dot, out: &mut Outbox<Tempo>) {
        let r = self.r();
        let rank = self.rank;
        let flaw = self.flaw;
        let instance = self.instances.get_mut(&dot).expect("known");
        assert!(instance.phase.pending(), "only a pending command is recovered");
        let ballot = match flaw {
            Flaw::LowRecoveryBallot => recovery_ballot_floor(rank, instance.bal, r),
            _ => recovery_ballot(rank, instance.bal, r),
        };
        instance.rec_ballot = ballot;
        instance.rec_acks.clear();
        let payload = instance.payload.clone().expect("pending has a payload");
        self.stats.count("recovery");
        out.multicast_durable(&self.peers, Message::Rec { dot, ballot, payload: payload.clone() });
        if let Err(reason) = self.on_rec(self.id, dot, ballot, payload, out) {
            self.stats.drop_input(reason);
        }
    }

    /// `MRec` (lines 76–85). A process without the payload adopts the one carried; a process
    /// that knows the shard's timestamp answers with it.
    pub(crate) fn on_rec(
        &mut self,
        from: NodeId,
        dot: Dot,
        ballot: u64,
        payload: Arc<Payload>,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        let Some(sender) = self.rank_of(from) else { return Err("recovery from outside the shard") };
        let r = self.r() as u64;
        if ballot == 0 || (ballot - 1) % r != sender as u64 {
            return Err("recovery ballot not owned by its sender");
        }
        if ballot <= r && self.flaw != Flaw::LowRecoveryBallot {
            return Err("recovery ballot not above r");
        }
        self.validate_payload(&payload)?;
        if let Some(&decided) = self.instances.get(&dot).and_then(|i| i.shard_ts.get(&self.shard)) {
            self.answer_with_commit(from, dot, decided, out);
            return Ok(());
        }
        if self.instances.get(&dot).is_none_or(|i| i.phase == Phase::Start) {
            self.adopt_payload(dot, &payload);
        }
        let Some(instance) = self.instances.get(&dot) else { return Err("instance table full") };
        if instance.bal >= ballot {
            return Err("recovery at a stale ballot");
        }
        if !instance.phase.pending() {
            return Err("recovery of a command not pending");
        }
        if instance.bal == 0 {
            match instance.phase {
                Phase::Payload => {
                    let keys = instance.keys.clone();
                    let mut fresh = std::mem::take(&mut self.fresh);
                    let proposal = self.clocks.proposal(dot, &keys, 0, &mut fresh);
                    self.fresh = fresh;
                    self.publish_fresh();
                    let instance = self.instances.get_mut(&dot).expect("known");
                    instance.proposal = proposal;
                    instance.phase = Phase::RecoverR;
                }
                Phase::Propose => self.instances.get_mut(&dot).expect("known").phase = Phase::RecoverP,
                phase => panic!("a pending command with ballot 0 is in payload or propose, not {phase:?}"),
            }
        }
        let instance = self.instances.get_mut(&dot).expect("known");
        instance.bal = ballot;
        assert!(instance.abal <= instance.bal, "abal ≤ bal");
        let phase = match instance.phase {
            Phase::Propose | Phase::RecoverP => RecPhase::RecoverP,
            _ => RecPhase::RecoverR,
        };
        let t = if instance.abal > 0 { instance.accepted } else { instance.proposal };
        let abal = instance.abal;
        if from == self.id {
            return self.on_rec_ack(self.id, dot, t, phase, abal, ballot, out);
        }
        self.postpone_recovery(dot);
        out.send_durable(from, Message::RecAck { dot, t, phase, abal, ballot });
        Ok(())
    }

    /// `MRecAck` from `r − f` processes (lines 86–96): Rule A, else Rule B.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_rec_ack(
        &mut self,
        from: NodeId,
        dot: Dot,
        t: u64,
        phase: RecPhase,
        abal: u64,
        ballot: u64,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if self.rank_of(from).is_none() {
            return Err("recovery ack from outside the shard");
        }
        let needed = self.r() - self.f;
        let shard = self.shard;
        let Some(instance) = self.instances.get_mut(&dot) else { return Err("recovery ack for an unknown command") };
        if instance.rec_ballot != ballot || instance.bal != ballot {
            return Err("recovery ack for a ballot we left");
        }
        if instance.shard_ts.contains_key(&shard) {
            return Err("recovery ack for a decided command");
        }
        if instance.rec_acks.contains_key(&from) {
            return Err("duplicate recovery ack");
        }
        if abal > ballot {
            return Err("recovery ack with an accepted ballot above its own");
        }
        instance.rec_acks.insert(from, (t, phase, abal));
        if instance.rec_acks.len() != needed {
            return Ok(());
        }
        let payload = instance.payload.clone().expect("pending has a payload");
        let chosen = choose_timestamp(&instance.rec_acks, &payload, shard);
        self.stats.count("recovery_consensus");
        self.start_consensus(dot, chosen, ballot, out);
        Ok(())
    }

    /// `Help`: send what we know of a command. A payload carried from another shard makes a
    /// command its coordinator never started here pending, so that we recover it.
    pub(crate) fn on_help(
        &mut self,
        from: NodeId,
        dot: Dot,
        payload: Option<Arc<Payload>>,
        out: &mut Outbox<Tempo>,
    ) -> Result<(), &'static str> {
        if let Some(payload) = payload
            && self.instances.get(&dot).is_none_or(|i| i.phase == Phase::Start)
        {
            self.validate_payload(&payload)?;
            self.stats.count("payload_from_other_shard");
            self.adopt_payload(dot, &payload);
            self.try_commit(dot, out);
        }
        let Some(instance) = self.instances.get(&dot) else { return Err("help for an unknown command") };
        if let Some(&t) = instance.shard_ts.get(&self.shard) {
            self.answer_with_commit(from, dot, t, out);
            return Ok(());
        }
        match &instance.payload {
            Some(payload) if self.rank_of(from).is_some() => {
                out.send_durable(from, Message::Payload { dot, payload: payload.clone() });
                Ok(())
            }
            _ => Err("help we cannot give yet"),
        }
    }
}

/// Rules A and B (lines 88–95) over the `MRecAck`s of a recovery quorum: the value accepted at
/// the highest ballot if any; otherwise the highest proposal over the quorum when the fast path
/// cannot have been taken, and over its intersection with the fast quorum when it may have.
pub fn choose_timestamp(
    acks: &std::collections::BTreeMap<NodeId, (u64, RecPhase, u64)>,
    payload: &Payload,
    shard: u32,
) -> u64 {
    assert!(!acks.is_empty(), "a recovery quorum is not empty");
    if let Some((_, &(t, _, _))) =
        acks.iter().filter(|(_, (_, _, abal))| *abal > 0).max_by_key(|(_, (_, _, abal))| *abal)
    {
        return t;
    }
    let initial = payload.coordinator(shard);
    let quorum = payload.quorum(shard);
    let intersection: Vec<(&NodeId, &(u64, RecPhase, u64))> =
        acks.iter().filter(|(node, _)| quorum.contains(node)).collect();
    assert!(!intersection.is_empty(), "a recovery quorum meets the fast quorum in ⌊r/2⌋ processes");
    let s = intersection.iter().any(|(node, (_, phase, _))| **node == initial || *phase == RecPhase::RecoverR);
    if s {
        acks.values().map(|(t, _, _)| *t).max().expect("not empty")
    } else {
        intersection.iter().map(|(_, (t, _, _))| *t).max().expect("not empty")
    }
}
