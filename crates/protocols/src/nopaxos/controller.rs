//! The controller (paper §4.3): watches the active sequencer and, when it fails, installs a
//! sequencer with a strictly higher session number.
//!
//! Session `s` is stamped by `sequencers[s % k]`, so clients find the active sequencer from the
//! session number replicas' replies carry. The controller pings every sequencer each
//! `controller_ping_ns`; a sequencer answers with its incarnation (`boot`) and session. When the
//! active one stops answering for `sequencer_timeout_ns`, or answers without the session issued
//! (it restarted), the controller picks a live sequencer (another one first), takes the next
//! session that maps to it, **persists it, and only then** sends `SetSession` (ordering as data:
//! `send_after` the ticket). On restart it reads back the highest session it ever issued, so
//! session numbers only grow across its own crashes (scenario 29) and no session is ever issued
//! twice.

use super::messages::Message;
use super::{Config, Durable, NoPaxos, Timer};
use ordo_core::{ClockReading, Node, NodeContext, NodeId, NodeStats, Outbox, PersistMode, PersistTicket, Role};
use std::collections::BTreeMap;

/// What the controller last heard from one sequencer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Heard {
    boot: u64,
    session: Option<u64>,
    at_ns: u64,
}

/// A session issued and not yet confirmed by its sequencer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Installing {
    session: u64,
    boot: u64,
    /// The write of the session; `SetSession` waits for it.
    ticket: PersistTicket,
    durable: bool,
}

/// The NOPaxos controller.
pub struct Controller {
    config: Config,
    sequencers: Vec<NodeId>,
    /// The highest session ever issued (durable before it is announced).
    issued: Option<u64>,
    heard: BTreeMap<NodeId, Heard>,
    installing: Option<Installing>,
    /// When the controller started watching (a fresh controller gives sequencers one timeout).
    started_ns: u64,
    stats: NodeStats,
}

impl Controller {
    /// A controller, fresh or restarted with the sessions it issued.
    pub fn new(context: NodeContext<NoPaxos>, durable: Vec<Durable>) -> Self {
        let sequencers: Vec<NodeId> = context.topology.with_role(Role::Sequencer).collect();
        assert!(!sequencers.is_empty(), "the topology has a sequencer");
        let issued = durable
            .iter()
            .filter_map(|record| match record {
                Durable::Issued { session } => Some(*session),
                _ => None,
            })
            .max();
        Controller {
            config: context.config,
            sequencers,
            issued,
            heard: BTreeMap::new(),
            installing: None,
            started_ns: 0,
            stats: NodeStats::default(),
        }
    }

    /// The highest session issued.
    pub fn issued(&self) -> Option<u64> {
        self.issued
    }

    fn sequencer_of(&self, session: u64) -> NodeId {
        self.sequencers[(session % self.sequencers.len() as u64) as usize]
    }

    /// True when the active sequencer answered recently with the session issued.
    fn active_is_healthy(&self, now_ns: u64) -> bool {
        let Some(session) = self.issued else { return false };
        let Some(heard) = self.heard.get(&self.sequencer_of(session)) else {
            return now_ns.saturating_sub(self.started_ns) < self.config.sequencer_timeout_ns;
        };
        let recent = now_ns.saturating_sub(heard.at_ns) < self.config.sequencer_timeout_ns;
        recent && heard.session == Some(session)
    }

    /// A live sequencer to install next: the one after the active one first, in ring order.
    fn pick(&self, now_ns: u64) -> Option<(usize, Heard)> {
        let k = self.sequencers.len();
        let start = self.issued.map_or(0, |s| (s as usize + 1) % k);
        (0..k).map(|i| (start + i) % k).find_map(|index| {
            let heard = *self.heard.get(&self.sequencers[index])?;
            (now_ns.saturating_sub(heard.at_ns) < self.config.sequencer_timeout_ns).then_some((index, heard))
        })
    }

    /// Issues the next session, mapped to sequencer `index`: persisted before it is sent.
    fn fail_over(&mut self, now_ns: u64, out: &mut Outbox<NoPaxos>) {
        let Some((index, heard)) = self.pick(now_ns) else { return };
        let k = self.sequencers.len() as u64;
        let floor = self.issued.map_or(0, |s| s + 1);
        let session = floor + (index as u64 + k - floor % k) % k;
        assert!(self.issued.is_none_or(|issued| session > issued), "sessions only grow");
        assert_eq!(self.sequencer_of(session), self.sequencers[index], "the session maps to the sequencer picked");
        let ticket = out.persist(Durable::Issued { session }, PersistMode::Append);
        self.issued = Some(session);
        self.installing = Some(Installing { session, boot: heard.boot, ticket, durable: false });
        let message = Message::SetSession { session, boot: heard.boot };
        out.send_after(ticket, self.sequencers[index], message);
        self.stats.count("session_change");
    }

    fn resend_installing(&self, out: &mut Outbox<NoPaxos>) {
        let Some(installing) = self.installing else { return };
        let message = Message::SetSession { session: installing.session, boot: installing.boot };
        out.send_after(installing.ticket, self.sequencer_of(installing.session), message);
    }

    fn on_tick(&mut self, now_ns: u64, out: &mut Outbox<NoPaxos>) {
        for &sequencer in &self.sequencers {
            out.send(sequencer, Message::Ping);
        }
        if self.active_is_healthy(now_ns) {
            return;
        }
        match self.installing {
            // Still waiting for the sequencer installed to confirm: resend while it is the same
            // incarnation and alive; a new incarnation must get a new session.
            Some(installing) if self.installing_alive(installing, now_ns) => self.resend_installing(out),
            _ if self.waiting_for_first_contact(now_ns) => {}
            _ => self.fail_over(now_ns, out),
        }
    }

    fn installing_alive(&self, installing: Installing, now_ns: u64) -> bool {
        let issued_at = self.heard.get(&self.sequencer_of(installing.session));
        let same = issued_at.is_some_and(|h| h.boot == installing.boot);
        let recent = issued_at.is_some_and(|h| now_ns.saturating_sub(h.at_ns) < self.config.sequencer_timeout_ns);
        same && recent
    }

    /// For one timeout after it starts, the controller lets the sequencer it expects (the
    /// active one after a restart, the first one in a fresh cluster) announce itself before it
    /// picks another.
    fn waiting_for_first_contact(&self, now_ns: u64) -> bool {
        let expected = self.issued.map_or(self.sequencers[0], |session| self.sequencer_of(session));
        !self.heard.contains_key(&expected) && now_ns.saturating_sub(self.started_ns) < self.config.sequencer_timeout_ns
    }

    fn on_pong(&mut self, now_ns: u64, from: NodeId, boot: u64, session: Option<u64>, out: &mut Outbox<NoPaxos>) {
        self.heard.insert(from, Heard { boot, session, at_ns: now_ns });
        if let Some(installing) = self.installing
            && session == Some(installing.session)
        {
            self.installing = None;
        }
        // A fresh cluster: the first sequencer gets the first session as soon as it announces
        // itself (session 0, the one replicas listen to from the start).
        if self.issued.is_none() && from == self.sequencers[0] {
            self.fail_over(now_ns, out);
        }
    }
}

impl Node<NoPaxos> for Controller {
    fn on_start(&mut self, now: ClockReading, out: &mut Outbox<NoPaxos>) {
        self.started_ns = now.local_ns;
        out.set_timer(Timer::ControllerTick, self.config.controller_ping_ns);
    }

    fn on_message(&mut self, now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<NoPaxos>) {
        match message {
            Message::Pong { boot, session } if self.sequencers.contains(&from) => {
                self.on_pong(now.local_ns, from, boot, session, out)
            }
            _ => self.stats.drop_input("message not for the controller"),
        }
    }

    fn on_timer(&mut self, now: ClockReading, timer: Timer, out: &mut Outbox<NoPaxos>) {
        if timer != Timer::ControllerTick {
            self.stats.drop_input("timer not for the controller");
            return;
        }
        self.on_tick(now.local_ns, out);
        out.set_timer(Timer::ControllerTick, self.config.controller_ping_ns);
    }

    fn on_durable(&mut self, _now: ClockReading, through: PersistTicket, _out: &mut Outbox<NoPaxos>) {
        if let Some(installing) = &mut self.installing
            && installing.ticket <= through
        {
            installing.durable = true;
        }
    }

    fn check_invariants(&self) {
        if let Some(installing) = self.installing {
            assert_eq!(Some(installing.session), self.issued, "only the latest session is being installed");
        }
        assert!(self.heard.keys().all(|s| self.sequencers.contains(s)), "only sequencers are heard");
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        let installing = self.installing.map_or("no".to_string(), |i| format!("{}(durable={})", i.session, i.durable));
        format!("controller issued={:?} installing={installing}", self.issued)
    }
}
