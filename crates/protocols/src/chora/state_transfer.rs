//! Recovery of a restarted replica and state transfer (not in the paper, which is crash-stop;
//! the safety argument is in docs/protocols/chora.md, "Recovery").
//!
//! A replica persists one record, [`Durable::State`]: the highest view it entered and a bound
//! on every ack it sent (`ack_limit`, written `ack_reserve` slots ahead so that acks rarely
//! wait for the disk). Anything a view's messages say (votes, proposals, acks) leaves only
//! once the view is durable.
//!
//! A restarted replica has lost its log: it neither acks nor votes until it installs a
//! snapshot committed at or past its durable `ack_limit` (so every slot an earlier
//! incarnation's ack helped commit is in it), and it never votes or proposes in a view up to
//! the durable one (so it cannot vote twice or propose twice in one view). Then it follows the
//! snapshot's view and starts a view change to be listed as a proposer again.
//!
//! A running replica that lags more than `log_keep / 2` slots behind the others' commit point
//! (they may have truncated what it misses) fetches a snapshot the same way.

use super::checker::Observation;
use super::log::{ReplicaLog, Schedule};
use super::messages::{Message, Snapshot};
use super::replica::{Dropped, Replica, Status, ViewRole, commit_point};
use super::{Chora, Durable, Mode, Timer};
use crate::client_table::ClientTable;
use ordo_core::{NodeId, Outbox, PersistMode, PersistTicket};

/// What is durable, and what waits for it.
#[derive(Clone, Debug, Default)]
pub struct Durability {
    /// Our acks name no slot above this: it is durable.
    pub ack_limit: u64,
    /// A higher limit being written, and its write.
    pub limit_pending: Option<(PersistTicket, u64)>,
    /// The write of the current view, while it is not durable: the view's sends wait for it.
    pub view_ticket: Option<PersistTicket>,
    /// Observations of the current view held until it is durable (a crash before would void
    /// the votes and proposals they report).
    pub deferred: Vec<Observation>,
    /// Views below this were (or may have been) entered by an earlier incarnation: we neither
    /// vote nor propose in them.
    pub fresh_from: u64,
    /// The first write of a fresh replica: it takes part once this is durable.
    pub boot: Option<PersistTicket>,
    /// A restarted replica: the lowest commit point of a snapshot it may install.
    pub need: u64,
    /// Local time at which a recovered replica asks for a view change to be listed as a
    /// proposer again, while it owns no slots it may use.
    pub rejoin_at: Option<u64>,
    /// Local time a lagging replica last asked for a snapshot.
    pub requested_ns: Option<u64>,
}

impl Durability {
    /// The durable state of a restarted replica, or `None` for a fresh one.
    pub fn restored(durable: &[Durable]) -> Option<(u64, u64)> {
        durable.iter().map(|Durable::State { view, ack_limit }| (*view, *ack_limit)).max()
    }
}

impl Replica {
    /// Writes the current view and ack limit (`limit`, if higher than the durable one).
    fn persist_state(&mut self, limit: u64, out: &mut Outbox<Chora>) -> PersistTicket {
        let pending = self.durability.limit_pending.map_or(0, |(_, l)| l);
        let ack_limit = limit.max(pending).max(self.durability.ack_limit);
        // A recovered replica may follow a view below one its earlier incarnation entered: the
        // record keeps the higher one.
        let view = self.vs.view.max(self.durability.fresh_from.saturating_sub(1));
        let record = Durable::State { view, ack_limit };
        let ticket = out.persist(record, PersistMode::Replace);
        if ack_limit > self.durability.ack_limit {
            self.durability.limit_pending = Some((ticket, ack_limit));
        }
        ticket
    }

    /// We entered a new view: write it before anything of the view leaves.
    pub(super) fn persist_view(&mut self, out: &mut Outbox<Chora>) {
        let ticket = self.persist_state(0, out);
        self.durability.view_ticket = Some(ticket);
    }

    /// Acks near the durable limit: write a new one `ack_reserve` ahead.
    pub(super) fn reserve_acks(&mut self, out: &mut Outbox<Chora>) {
        let reserve = self.config.ack_reserve;
        // Measured from what we hold, not only what we acked: a long repair backlog must not
        // make every input write again.
        let reach = self.acks.last_ack.max(self.log.last_append());
        if self.durability.limit_pending.is_none() && reach + reserve / 2 > self.durability.ack_limit {
            self.stats.count("ack_reserve");
            self.persist_state(reach + reserve, out);
        }
    }

    /// Our ack as others may count it: never above the durable limit.
    pub(super) fn own_ack(&self) -> u64 {
        self.acks.last_ack.min(self.durability.ack_limit)
    }

    /// Multicasts a message of the current view once the view is durable.
    pub(super) fn multicast_in_view(&mut self, message: Message, out: &mut Outbox<Chora>) {
        match self.durability.view_ticket {
            Some(ticket) => out.multicast_after(ticket, &self.others, message),
            None => out.multicast(&self.others, message),
        }
    }

    /// Sends a message of the current view once the view is durable.
    pub(super) fn send_in_view(&mut self, to: NodeId, message: Message, out: &mut Outbox<Chora>) {
        match self.durability.view_ticket {
            Some(ticket) => out.send_after(ticket, to, message),
            None => out.send(to, message),
        }
    }

    /// Reports a vote or proposal once the view it belongs to is durable.
    pub(super) fn observe_in_view(&mut self, observation: Observation, out: &mut Outbox<Chora>) {
        if self.durability.view_ticket.is_some() {
            self.durability.deferred.push(observation);
        } else {
            out.observe(observation);
        }
    }

    /// Writes up to `through` are durable.
    pub(super) fn on_written(&mut self, through: PersistTicket, out: &mut Outbox<Chora>) {
        if let Some((ticket, limit)) = self.durability.limit_pending
            && ticket <= through
        {
            self.durability.ack_limit = self.durability.ack_limit.max(limit);
            self.durability.limit_pending = None;
            self.advance_ack();
        }
        if self.durability.view_ticket.is_some_and(|ticket| ticket <= through) {
            self.durability.view_ticket = None;
            for observation in std::mem::take(&mut self.durability.deferred) {
                out.observe(observation);
            }
        }
    }

    /// A restarted replica (or a lagging one) asks every other replica for a snapshot.
    pub(super) fn request_state(&mut self, now: u64, need: u64, out: &mut Outbox<Chora>) {
        self.durability.requested_ns = Some(now);
        self.stats.count("state_request");
        out.multicast(&self.others, Message::StateRequest { need });
    }

    /// The coordination timer of a running replica: fetch a snapshot when we lag so far
    /// behind the others' commit point that they may have truncated what we miss.
    pub(super) fn check_lag(&mut self, now: u64, out: &mut Outbox<Chora>) {
        let others = commit_point(&self.acks.acked, self.quorum);
        let recently = self.durability.requested_ns.is_some_and(|at| now < at + self.vs.timeout_ns);
        if others > self.acks.last_ack + self.config.log_keep / 2 && !recently {
            self.request_state(now, others, out);
        }
    }

    /// Someone asks for our committed prefix. A request for more than we committed also tells
    /// proposers to skip ahead (§6.7.1), so an idle cluster commits up to `need` soon.
    pub(super) fn on_state_request(&mut self, from: NodeId, need: u64, out: &mut Outbox<Chora>) -> Result<(), Dropped> {
        let rank = self.rank_of(from).ok_or("state request not from a replica")?;
        if rank == self.rank as usize {
            return Err("state request from ourselves");
        }
        let Some(schedule) = self.vs.schedule.clone().filter(|_| self.vs.view_init_committed) else {
            return Err("state request during a view change");
        };
        let last_commit = self.acks.last_commit;
        if need > last_commit {
            // Bounded: a restarted replica needs at most its reserve beyond what was acked.
            if need <= self.latest_horizon() {
                self.proposing.latest_proposed = self.proposing.latest_proposed.max(need);
            }
            return Ok(());
        }
        let floor = self.log.get(last_commit).expect("the committed prefix's last slot is held").clone();
        let snapshot = Snapshot {
            view: self.vs.view,
            base: schedule.base,
            proposers: schedule.proposers.clone(),
            commit: last_commit,
            floor,
            ops: self.exec.ops,
            state: self.exec.state_machine.snapshot().into(),
            client_table: self.exec.table.to_records(),
        };
        out.send(from, Message::StateReply(Box::new(snapshot)));
        Ok(())
    }

    /// A snapshot arrived: a restarted replica installs it once it covers every slot an
    /// earlier incarnation may have acked; a lagging one if it moves it forward in its view.
    pub(super) fn on_state_reply(
        &mut self,
        now: u64,
        snapshot: Snapshot,
        out: &mut Outbox<Chora>,
    ) -> Result<(), Dropped> {
        check_snapshot(&snapshot, self.replicas.len())?;
        let table =
            ClientTable::from_records(self.config.client_table_max, self.config.client_window, &snapshot.client_table)
                .ok_or("snapshot with a malformed client table")?;
        match self.status {
            Status::Recovering if snapshot.commit >= self.durability.need => {
                self.exec.state_machine.restore(&snapshot.state).map_err(|_| "snapshot state does not decode")?;
                self.rejoin(now, snapshot, table, out);
                Ok(())
            }
            Status::Recovering => Err("snapshot below what we may have acked"),
            Status::Running if snapshot.view == self.vs.view && snapshot.commit > self.acks.last_ack => {
                if self.vs.schedule.as_ref().is_some_and(|s| s.base != snapshot.base) {
                    return Err("snapshot of another schedule");
                }
                self.exec.state_machine.restore(&snapshot.state).map_err(|_| "snapshot state does not decode")?;
                self.catch_up(now, snapshot, table, out);
                Ok(())
            }
            _ => Err("snapshot not needed"),
        }
    }

    /// Folds a snapshot's committed prefix in (the state machine is restored already).
    fn fold_in(&mut self, snapshot: &Snapshot, table: ClientTable) {
        self.exec.table = table;
        self.exec.ops = snapshot.ops;
        self.exec.executed = snapshot.commit;
        self.exec.waiting.clear();
        self.acks.last_commit = snapshot.commit;
        self.acks.last_ack = self.acks.last_ack.max(snapshot.commit);
        self.stats.count("state_transfer");
    }

    /// A lagging replica jumps over what it missed, in its own view. One that adopted the view
    /// without its view-init (truncated by now everywhere) learns the schedule from it.
    fn catch_up(&mut self, now: u64, snapshot: Snapshot, table: ClientTable, out: &mut Outbox<Chora>) {
        self.log.install_floor(snapshot.commit, snapshot.floor.clone());
        self.fold_in(&snapshot, table);
        if self.vs.schedule.is_none() {
            // We never had the view-init, so we proposed nothing in this view.
            let schedule = Schedule::new(snapshot.base, snapshot.proposers.clone());
            let usable = schedule.is_proposer(self.rank) && snapshot.view >= self.durability.fresh_from;
            self.proposing.next_propose = usable.then(|| schedule.next_owned(self.rank, snapshot.commit));
            self.vs.schedule = Some(schedule);
            self.vs.view_init_committed = true;
            self.vs.announced_base = None;
            self.vs.role = ViewRole::Follower;
        }
        if let (Some(next), Some(schedule)) = (self.proposing.next_propose, &self.vs.schedule)
            && next <= snapshot.commit
        {
            // Only a forged snapshot commits past a slot of ours we have not proposed; we
            // must not write below the floor, so our next slot moves past it.
            self.stats.count("next_propose_past_snapshot");
            self.proposing.next_propose = Some(schedule.next_owned(self.rank, snapshot.commit));
        }
        self.repair.clear();
        self.vs.progress_ns = now;
        self.after_progress(now, out);
    }

    /// A restarted replica takes part again: it follows the snapshot's view, and may use its
    /// slots there only if no earlier incarnation entered that view.
    fn rejoin(&mut self, now: u64, snapshot: Snapshot, table: ClientTable, out: &mut Outbox<Chora>) {
        let mut log = ReplicaLog::new(self.log.get(0).expect("a fresh log holds slot 0").clone());
        log.install_floor(snapshot.commit, snapshot.floor.clone());
        self.log = log;
        self.fold_in(&snapshot, table);
        let schedule = Schedule::new(snapshot.base, snapshot.proposers.clone());
        self.vs.view = snapshot.view;
        self.vs.role = ViewRole::Follower;
        self.vs.schedule = Some(schedule.clone());
        self.vs.view_init_committed = true;
        self.vs.progress_ns = now;
        self.vs.timeout_ns = self.random_timeout();
        self.acks.acked.fill(0);
        self.proposing.latest_proposed = snapshot.commit;
        let usable = schedule.is_proposer(self.rank) && snapshot.view >= self.durability.fresh_from;
        self.proposing.next_propose = usable.then(|| schedule.next_owned(self.rank, snapshot.commit));
        if !usable {
            self.durability.rejoin_at = Some(now + self.config.coordination_ns);
        }
        if snapshot.view >= self.durability.fresh_from {
            self.persist_view(out);
        }
        self.heard_ns.fill(now);
        self.status = Status::Running;
        self.start_timers(out);
        self.after_progress(now, out);
    }

    /// Starts the timers of a replica that takes part.
    pub(super) fn start_timers(&mut self, out: &mut Outbox<Chora>) {
        if !self.rounds.responsive || self.config.mode == Mode::Adaptive {
            out.set_timer(Timer::Round, self.config.round_ns);
        }
        out.set_timer(Timer::Coordination, self.config.coordination_ns);
        out.set_timer(Timer::Watchdog, self.config.coordination_ns);
    }

    /// The watchdog of a recovered replica that owns no usable slots: it asks for a view change
    /// so that the next view lists it, and tries again after a view-change timeout.
    pub(super) fn maybe_rejoin(&mut self, now: u64, out: &mut Outbox<Chora>) {
        if self.proposing.next_propose.is_some() || self.vs.role != ViewRole::Follower {
            return;
        }
        let Some(at) = self.durability.rejoin_at else { return };
        if now >= at {
            self.durability.rejoin_at = Some(now + self.vs.timeout_ns);
            self.stats.count("rejoin_candidacy");
            let view = (self.vs.view + 1).max(self.durability.fresh_from);
            self.start_candidacy(now, view, out);
        }
    }
}

/// Rejects a snapshot no replica could have sent.
fn check_snapshot(snapshot: &Snapshot, n: usize) -> Result<(), Dropped> {
    let mut sorted = snapshot.proposers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() || sorted.len() != snapshot.proposers.len() || sorted.iter().any(|&r| r as usize >= n) {
        return Err("snapshot with a malformed proposer list");
    }
    if snapshot.commit < snapshot.base || snapshot.commit == 0 || snapshot.floor.view > snapshot.view {
        return Err("malformed snapshot");
    }
    Ok(())
}
