//! The sequencer (paper §4.2, §4.3): stamps every request for the replica group with
//! ⟨session, sequence⟩, the sequence +1 per message, and multicasts it to the replicas.
//!
//! It is an end-host sequencer (§4.2.3) with no durable state, like a switch: after a start it
//! stamps nothing until the controller hands it a session, and it takes a session only when the
//! controller addressed its current incarnation (`boot`). That keeps the OUM guarantee across
//! restarts: a restarted sequencer whose counter went back to 1 never stamps again in a session
//! it stamped before, even if a delayed or duplicated `SetSession` reaches it.

use super::messages::{Message, Request};
use super::{NoPaxos, Timer};
use ordo_core::{ClockReading, Destinations, Node, NodeContext, NodeId, NodeStats, Outbox, Role};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// The session a sequencer stamps and its counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamping {
    session: u64,
    /// The last sequence number stamped (0: none yet).
    last_seq: u64,
}

/// A NOPaxos sequencer.
pub struct Sequencer {
    replicas: Destinations,
    controller: NodeId,
    /// This incarnation's number (from the seeded RNG and the incarnation count).
    boot: u64,
    stamping: Option<Stamping>,
    stats: NodeStats,
}

impl Sequencer {
    /// A sequencer that waits for its session.
    pub fn new(context: NodeContext<NoPaxos>) -> Self {
        let controller = context.topology.with_role(Role::Controller).next().expect("the topology has a controller");
        let mut rng = ChaCha8Rng::seed_from_u64(context.seed ^ context.incarnation.rotate_left(17));
        // Odd so that it is never the zero of a default value.
        let boot = rng.next_u64() | 1;
        Sequencer {
            replicas: context.topology.replicas().clone(),
            controller,
            boot,
            stamping: None,
            stats: NodeStats::default(),
        }
    }

    /// The session stamped, if any.
    pub fn session(&self) -> Option<u64> {
        self.stamping.map(|s| s.session)
    }

    fn pong(&self) -> Message {
        Message::Pong { boot: self.boot, session: self.session() }
    }

    fn on_request(&mut self, request: Arc<Request>, out: &mut Outbox<NoPaxos>) -> Result<(), &'static str> {
        let stamping = self.stamping.as_mut().ok_or("sequencer has no session")?;
        stamping.last_seq += 1;
        let (session, seq) = (stamping.session, stamping.last_seq);
        out.multicast(&self.replicas, Message::Stamped { session, seq, request });
        Ok(())
    }

    fn on_set_session(
        &mut self,
        from: NodeId,
        session: u64,
        boot: u64,
        out: &mut Outbox<NoPaxos>,
    ) -> Result<(), &'static str> {
        if from != self.controller {
            return Err("set-session not from the controller");
        }
        if boot != self.boot {
            return Err("set-session for an earlier incarnation");
        }
        if self.session().is_some_and(|current| current >= session) {
            out.send(self.controller, self.pong());
            return Err("set-session not above the current session");
        }
        self.stamping = Some(Stamping { session, last_seq: 0 });
        self.stats.count("session_installed");
        out.send(self.controller, self.pong());
        Ok(())
    }
}

impl Node<NoPaxos> for Sequencer {
    fn on_start(&mut self, _now: ClockReading, out: &mut Outbox<NoPaxos>) {
        // Announce this incarnation at once, so the controller need not wait for its next ping.
        out.send(self.controller, self.pong());
    }

    fn on_message(&mut self, _now: ClockReading, from: NodeId, message: Message, out: &mut Outbox<NoPaxos>) {
        let handled = match message {
            Message::Request(request) => self.on_request(request, out),
            Message::SetSession { session, boot } => self.on_set_session(from, session, boot, out),
            Message::Ping if from == self.controller => {
                out.send(self.controller, self.pong());
                Ok(())
            }
            _ => Err("message not for a sequencer"),
        };
        if let Err(reason) = handled {
            self.stats.drop_input(reason);
        }
    }

    fn on_timer(&mut self, _now: ClockReading, _timer: Timer, _out: &mut Outbox<NoPaxos>) {
        self.stats.drop_input("sequencer has no timer");
    }

    fn check_invariants(&self) {
        assert_eq!(self.boot & 1, 1, "boot numbers are odd");
        assert!(!self.replicas.is_empty(), "the group has members");
    }

    fn stats(&self) -> &NodeStats {
        &self.stats
    }

    fn status(&self) -> String {
        match self.stamping {
            Some(s) => format!("sequencer session={} seq={}", s.session, s.last_seq),
            None => "sequencer idle".to_string(),
        }
    }
}
