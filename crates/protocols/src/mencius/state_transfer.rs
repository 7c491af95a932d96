//! Durability, recovery of a restarted replica, and state transfer (not in the Mencius paper,
//! which assumes crash-stop; the safety argument is in docs/protocols/mencius.md, "Recovery").
//!
//! A replica persists one record, [`Durable::Bound`]: no acceptance, promise, proposal or skip
//! of it names a slot above the bound. It raises the bound (`bound_reserve` slots ahead of its
//! reach) before it acts on a slot beyond it, and acts only on slots the *durable* bound covers,
//! so a crash can never erase what it did in a slot above the record.
//!
//! A restarted replica has lost its instances: it sends nothing but `StateRequest` and ignores
//! every other message until it installs a snapshot executed at or past its durable bound. Every
//! slot its earlier incarnation acted on is then executed, below its window, and it never acts
//! on such a slot again; above the bound it is a fresh acceptor and owner, which it may be
//! because its earlier incarnation did nothing there.
//!
//! A running replica whose next slot the others no longer keep (they executed and truncated it)
//! gets a snapshot in answer to its `Query`, and installs it the same way.

use super::messages::{Message, Snapshot};
use super::replica::{Replica, Status};
use super::{Durable, Mencius};
use crate::client_table::ClientTable;
use ordo_core::{NodeId, Outbox, PersistMode, PersistTicket};

/// What is durable, and what waits for it.
#[derive(Clone, Debug, Default)]
pub struct Durability {
    /// The durable bound: we act on no slot above it.
    pub limit: u64,
    /// A higher bound being written, and its write.
    pub pending: Option<(PersistTicket, u64)>,
    /// The first write of a fresh replica: it takes part once this is durable.
    pub boot: Option<PersistTicket>,
    /// A restarted replica: the lowest executed slot of a snapshot it may install.
    pub need: u64,
    /// Local time a recovering replica last asked for a snapshot.
    pub requested_ns: Option<u64>,
}

impl Durability {
    /// The durable bound of a restarted replica, or `None` for a fresh one.
    pub fn restored(durable: &[Durable]) -> Option<u64> {
        durable.iter().map(|Durable::Bound { slot }| *slot).max()
    }
}

impl Replica {
    /// Writes the bound `slot` (or the highest already written or pending, if higher).
    fn persist_bound(&mut self, slot: u64, out: &mut Outbox<Mencius>) {
        let pending = self.durability.pending.map_or(0, |(_, bound)| bound);
        let bound = slot.max(pending).max(self.durability.limit);
        let ticket = out.persist(Durable::Bound { slot: bound }, PersistMode::Replace);
        self.durability.pending = Some((ticket, bound));
        self.stats.count("bound_write");
    }

    /// A fresh replica's first write: it takes part once this is durable.
    pub(super) fn persist_bound_at_boot(&mut self, out: &mut Outbox<Mencius>) {
        assert_eq!(self.status, Status::Booting, "only a fresh replica boots");
        self.persist_bound(self.config.bound_reserve, out);
        self.durability.boot = out.last_ticket();
    }

    /// Whether the durable bound covers `slot`, so that we may act on it. If not, a write that
    /// covers it is started, and the caller acts later (a proposal is resent, a skip or a
    /// revocation is tried again at a tick, the durable write resumes our own proposals).
    pub(super) fn covered(&mut self, slot: u64, out: &mut Outbox<Mencius>) -> bool {
        if slot <= self.durability.limit {
            return true;
        }
        if self.durability.pending.is_none_or(|(_, bound)| bound < slot) {
            self.persist_bound(slot + self.config.bound_reserve, out);
        }
        self.stats.count("bound_wait");
        false
    }

    /// Keeps the bound `bound_reserve` ahead of everything we may soon act on (our next slot,
    /// the highest slot seen, and a revocation's reach beyond it), so acting rarely waits.
    pub(super) fn reserve_bound(&mut self, out: &mut Outbox<Mencius>) {
        let reach = self.max_seen.max(self.next_own) + self.config.revoke_ahead * self.n;
        let reserve = self.config.bound_reserve;
        if self.durability.pending.is_none() && reach + reserve / 2 > self.durability.limit {
            self.persist_bound(reach + reserve, out);
        }
    }

    /// Writes up to `through` are durable: the bound moves, and proposals that waited for it go.
    pub(super) fn on_written(&mut self, through: PersistTicket, out: &mut Outbox<Mencius>) {
        let Some((ticket, bound)) = self.durability.pending else { return };
        if ticket > through {
            return;
        }
        assert!(bound >= self.durability.limit, "the bound only rises");
        self.durability.limit = bound;
        self.durability.pending = None;
        if self.status == Status::Running {
            self.propose_commands(out);
        }
    }

    /// A recovering replica asks every other replica for a snapshot (at most once per tick
    /// period times four, so a slow snapshot is not asked for again at every tick).
    pub(super) fn request_state(&mut self, now: u64, out: &mut Outbox<Mencius>) {
        if self.durability.requested_ns.is_some_and(|at| now < at + 4 * self.config.tick_ns) {
            return;
        }
        self.durability.requested_ns = Some(now);
        self.stats.count("state_request");
        out.multicast(&self.others, Message::StateRequest { need: self.durability.need });
    }

    /// Our executed prefix, as a snapshot.
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            executed: self.executed,
            ops: self.ops,
            state: self.state_machine.snapshot().into(),
            client_table: self.table.to_records(),
        }
    }

    /// Sends our snapshot to `to`.
    pub(super) fn send_snapshot(&mut self, to: NodeId, out: &mut Outbox<Mencius>) {
        assert!(self.executed > 0, "a snapshot holds at least one executed slot");
        self.stats.count("snapshot_sent");
        out.send(to, Message::StateReply(Box::new(self.snapshot())));
    }

    /// A restarted replica asks for a snapshot executed through `need`. If we are not there
    /// yet, we treat `need` as a slot seen: owners skip up to it and a silent owner's slots
    /// below it are revoked, so an idle cluster reaches it within a revocation.
    pub(super) fn on_state_request(
        &mut self,
        from: NodeId,
        need: u64,
        out: &mut Outbox<Mencius>,
    ) -> Result<(), &'static str> {
        self.rank_of(from).ok_or("state request not from a replica")?;
        if need <= self.executed && self.executed > 0 {
            self.send_snapshot(from, out);
            return Ok(());
        }
        // Bounded: a restarted replica's bound lies at most a reserve and a revocation's reach
        // beyond what it saw, which was within our window.
        if need > self.executed + self.config.window_max {
            return Err("state request beyond our window");
        }
        self.max_seen = self.max_seen.max(need);
        Ok(())
    }

    /// A snapshot arrived: a recovering replica installs it once it covers every slot its
    /// earlier incarnation may have acted on; a running one if it moves it forward.
    pub(super) fn on_state_reply(&mut self, snapshot: Snapshot, out: &mut Outbox<Mencius>) -> Result<(), &'static str> {
        if snapshot.executed == 0 {
            return Err("empty snapshot");
        }
        match self.status {
            Status::Recovering if snapshot.executed < self.durability.need => {
                return Err("snapshot below our durable bound");
            }
            Status::Recovering => {}
            Status::Running if snapshot.executed > self.executed => {}
            _ => return Err("snapshot not needed"),
        }
        let table =
            ClientTable::from_records(self.config.client_table_max, self.config.client_window, &snapshot.client_table)
                .ok_or("snapshot with a malformed client table")?;
        self.state_machine.restore(&snapshot.state).map_err(|_| "snapshot state does not decode")?;
        self.install(snapshot, table, out);
        Ok(())
    }

    /// Folds a snapshot in (the state machine is restored already). Slots up to its executed
    /// one leave our window: we never accept, promise or propose there again, and we answer
    /// no prepare reaching below it (`promise`), since we no longer hold those values.
    fn install(&mut self, snapshot: Snapshot, table: ClientTable, out: &mut Outbox<Mencius>) {
        let executed = snapshot.executed;
        assert!(executed > self.executed, "a snapshot moves us forward");
        self.table = table;
        self.ops = snapshot.ops;
        self.executed = executed;
        self.instances = self.instances.split_off(&(executed + 1));
        self.chosen.clear();
        self.waiting.clear();
        self.revocation = None;
        self.max_seen = self.max_seen.max(executed);
        if self.next_own <= executed {
            self.next_own = self.next_owned(self.rank, executed);
        }
        self.stalled_at = executed;
        self.stats.count("state_transfer");
        if self.status == Status::Recovering {
            assert!(executed >= self.durability.need, "the snapshot covers our earlier incarnation");
            self.status = Status::Running;
        }
        self.execute(out);
        self.propose_commands(out);
    }
}
