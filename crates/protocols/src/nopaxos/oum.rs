//! libOUM's receiver side (paper §3.2, Fig 2, §4.3): stamped messages in, deliveries out, in
//! ⟨session, sequence⟩ order.
//!
//! The replica pulls with [`OumReceiver::get_message`] (libOUM `getMessage`) whenever it is ready for the next OUM position
//! (it stops pulling while it resolves a gap or changes view), so arrivals wait in a bounded
//! buffer meanwhile. A pull returns the next message; a DROP-NOTIFICATION when a later message
//! of the session is already here (the gap is real: the sequencer stamps +1 per message, §4.2);
//! SESSION-TERMINATED once only a higher session's messages remain, again and again until
//! [`OumReceiver::listen`] moves to that session; or nothing. A message below the position
//! already delivered (late, reordered, duplicated) or from an older session is discarded.
//!
//! Numbering: sequence numbers start at 1 in each session; `session_msg_num` is the number of
//! positions consumed in the session (messages and drop notifications), so `listen(s, m)` next
//! delivers position `m + 1`.

use std::collections::BTreeMap;

/// What a pull returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery<T> {
    /// The message at position `seq` of the current session.
    Message {
        /// Its position.
        seq: u64,
        /// The message.
        message: T,
    },
    /// Position `seq` of the current session was lost (a later one arrived).
    Drop {
        /// The lost position.
        seq: u64,
    },
    /// A higher session has begun; the receiver cannot tell what it missed of the current one.
    SessionTerminated {
        /// The lowest newer session heard of.
        session: u64,
    },
}

/// Why an arrival was discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// From a session older than the one listened to.
    OldSession,
    /// At a position already delivered or dropped (late or duplicate).
    Late,
    /// Already buffered (a duplicate).
    Duplicate,
    /// The buffer is full (the message will read as dropped).
    BufferFull,
    /// Sequence number 0 does not exist.
    Malformed,
}

impl Discard {
    /// The counter name.
    pub fn name(self) -> &'static str {
        match self {
            Discard::OldSession => "oum: older session",
            Discard::Late => "oum: late or duplicate",
            Discard::Duplicate => "oum: duplicate",
            Discard::BufferFull => "oum: buffer full",
            Discard::Malformed => "oum: sequence 0",
        }
    }
}

/// The receiver: the session listened to, the next position, and arrivals not yet pulled.
#[derive(Clone, Debug)]
pub struct OumReceiver<T> {
    session: u64,
    /// Next position to deliver (1-based).
    next_seq: u64,
    /// Arrivals at or past `(session, next_seq)`, by ⟨session, seq⟩.
    buffer: BTreeMap<(u64, u64), T>,
    buffer_max: usize,
}

impl<T> OumReceiver<T> {
    /// Listening to `session` from its first message, holding at most `buffer_max` arrivals.
    pub fn new(session: u64, buffer_max: usize) -> Self {
        assert!(buffer_max > 0, "the buffer holds at least one arrival");
        OumReceiver { session, next_seq: 1, buffer: BTreeMap::new(), buffer_max }
    }

    /// The session listened to.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Positions consumed in the session (the paper's session-msg-num).
    pub fn session_msg_num(&self) -> u64 {
        self.next_seq - 1
    }

    /// Arrivals waiting.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// Takes an arrival stamped ⟨session, seq⟩.
    pub fn receive(&mut self, session: u64, seq: u64, message: T) -> Result<(), Discard> {
        if seq == 0 {
            return Err(Discard::Malformed);
        }
        if session < self.session {
            return Err(Discard::OldSession);
        }
        if session == self.session && seq < self.next_seq {
            return Err(Discard::Late);
        }
        if self.buffer.contains_key(&(session, seq)) {
            return Err(Discard::Duplicate);
        }
        if self.buffer.len() >= self.buffer_max {
            return Err(Discard::BufferFull);
        }
        self.buffer.insert((session, seq), message);
        Ok(())
    }

    /// The next delivery, if any (see the module docs).
    pub fn get_message(&mut self) -> Option<Delivery<T>> {
        let (&(session, seq), _) = self.buffer.first_key_value()?;
        assert!((session, seq) >= (self.session, self.next_seq), "nothing delivered stays buffered");
        if session > self.session {
            return Some(Delivery::SessionTerminated { session });
        }
        let at = self.next_seq;
        self.next_seq += 1;
        if seq == at {
            let (_, message) = self.buffer.pop_first().expect("the first arrival is there");
            return Some(Delivery::Message { seq, message });
        }
        Some(Delivery::Drop { seq: at })
    }

    /// Consumes the next position without delivering it (fn 3: a NO-OP was committed there
    /// before the message or its drop notification arrived).
    pub fn skip_one(&mut self) {
        self.buffer.remove(&(self.session, self.next_seq));
        self.next_seq += 1;
    }

    /// Gives back the last position consumed, which the caller did not use (a drop notification
    /// still being resolved when a view change begins): it will be delivered again.
    pub fn unconsume(&mut self) {
        assert!(self.next_seq > 1, "a position was consumed");
        self.next_seq -= 1;
    }

    /// Listens to `session` from position `session_msg_num + 1` (libOUM `listen`); arrivals
    /// below it are discarded.
    pub fn listen(&mut self, session: u64, session_msg_num: u64) {
        self.session = session;
        self.next_seq = session_msg_num + 1;
        self.buffer = self.buffer.split_off(&(session, self.next_seq));
    }

    /// Panics if the buffer holds a position already consumed or exceeds its bound.
    pub fn check_invariants(&self) {
        assert!(self.next_seq >= 1, "positions start at 1");
        assert!(self.buffer.len() <= self.buffer_max, "the buffer respects its bound");
        if let Some((&first, _)) = self.buffer.first_key_value() {
            assert!(first >= (self.session, self.next_seq), "nothing consumed stays buffered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(oum: &mut OumReceiver<&'static str>) -> Vec<Delivery<&'static str>> {
        let mut out = Vec::new();
        while let Some(delivery) = oum.get_message() {
            if matches!(delivery, Delivery::SessionTerminated { .. }) {
                out.push(delivery);
                break;
            }
            out.push(delivery);
        }
        out
    }

    #[test]
    fn a_gap_becomes_a_drop_notification_and_late_or_duplicate_messages_are_discarded() {
        // Goal: spec §11 scenario 5. Method: deliver 1, 2, 4 pulling after each; then the late 3
        // and duplicates of 2 and 4.
        let mut oum = OumReceiver::new(0, 16);
        let mut out = Vec::new();
        for (seq, message) in [(1, "m1"), (2, "m2"), (4, "m4")] {
            oum.receive(0, seq, message).unwrap();
            out.extend(drain(&mut oum));
        }
        assert_eq!(
            out,
            vec![
                Delivery::Message { seq: 1, message: "m1" },
                Delivery::Message { seq: 2, message: "m2" },
                Delivery::Drop { seq: 3 },
                Delivery::Message { seq: 4, message: "m4" },
            ]
        );
        assert_eq!(oum.receive(0, 3, "m3"), Err(Discard::Late));
        assert_eq!(oum.receive(0, 2, "m2"), Err(Discard::Late));
        assert_eq!(oum.receive(0, 4, "m4"), Err(Discard::Late));
        assert_eq!(oum.get_message(), None);
        assert_eq!(oum.session_msg_num(), 4, "a drop notification counts as a consumed position");
        oum.receive(0, 6, "m6").unwrap();
        assert_eq!(oum.receive(0, 6, "m6"), Err(Discard::Duplicate));
        oum.check_invariants();
    }

    #[test]
    fn a_higher_session_terminates_the_current_one_until_listen() {
        // Goal: spec §11 scenario 6. Method: listening to session 0, a message of session 1
        // arrives: SESSION-TERMINATED on every pull, no drop notification, old-session messages
        // no longer delivered after `listen(1, 0)`; `listen(s, m)` skips positions up to m.
        let mut oum = OumReceiver::new(0, 16);
        oum.receive(0, 1, "a").unwrap();
        assert_eq!(oum.get_message(), Some(Delivery::Message { seq: 1, message: "a" }));
        oum.receive(1, 2, "x2").unwrap();
        oum.receive(1, 1, "x1").unwrap();
        for _ in 0..3 {
            assert_eq!(oum.get_message(), Some(Delivery::SessionTerminated { session: 1 }));
        }
        assert_eq!(oum.session_msg_num(), 1, "termination consumes nothing");
        oum.listen(1, 0);
        assert_eq!(oum.receive(0, 2, "old"), Err(Discard::OldSession));
        assert_eq!(oum.get_message(), Some(Delivery::Message { seq: 1, message: "x1" }));
        assert_eq!(oum.get_message(), Some(Delivery::Message { seq: 2, message: "x2" }));
        assert_eq!(oum.get_message(), None);
        // listen(2, 3): positions 1..=3 of session 2 are skipped.
        oum.receive(2, 3, "skipped").unwrap();
        oum.receive(2, 4, "y4").unwrap();
        oum.listen(2, 3);
        assert_eq!(oum.get_message(), Some(Delivery::Message { seq: 4, message: "y4" }));
        oum.check_invariants();
    }

    #[test]
    fn skipping_a_position_keeps_the_count_aligned() {
        // Goal: fn 3's "ignore the next REQUEST or DROP-NOTIFICATION": skip_one consumes the
        // position (a buffered message there is discarded), unconsume gives one back.
        let mut oum = OumReceiver::new(0, 2);
        oum.receive(0, 1, "a").unwrap();
        oum.skip_one();
        assert_eq!(oum.session_msg_num(), 1);
        assert_eq!(oum.get_message(), None);
        oum.receive(0, 3, "c").unwrap();
        assert_eq!(oum.get_message(), Some(Delivery::Drop { seq: 2 }));
        oum.unconsume();
        assert_eq!(oum.session_msg_num(), 1);
        oum.receive(0, 4, "d").unwrap();
        assert_eq!(oum.receive(0, 5, "e"), Err(Discard::BufferFull));
        oum.check_invariants();
    }
}
