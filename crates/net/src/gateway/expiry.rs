//! Expiry at the gateway. Every replicated command leaves the gateway stamped with its wall
//! clock ([`Command::Timed`]), so the replicas decide expiry from the command, never from their
//! own clocks. The gateway also remembers the keys whose expiry it set, and a sweep task sends
//! one replicated [`Command::ExpireSweep`] for the keys that are due, so that expired keys do
//! not stay in the replicas' memory until their next write. Keys whose expiry another gateway
//! set are swept by that gateway; a key tracked past [`TRACKED_MAX`] is freed at its next
//! write instead (counted in `untracked`).

use super::pipeline::submit;
use crate::host::Request;
use ordo_core::command::SetExpiry;
use ordo_core::{Command, Key};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Most keys a gateway tracks for its sweep (about 60 bytes each).
pub const TRACKED_MAX: usize = 1_000_000;

/// Most keys in one sweep command.
pub const SWEEP_KEYS_MAX: usize = 512;

/// How often the sweep looks for due keys: a key is gone from the replicas' memory within
/// about this long (plus a commit) after it expires.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(20);

/// The gateway's wall clock in Unix milliseconds: the stamp of the commands it sends.
pub fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

/// The keys whose expiry this gateway set, by due time.
#[derive(Debug, Default)]
pub struct Expiring {
    due: BinaryHeap<Reverse<(i64, Key)>>,
    /// Keys not tracked because [`TRACKED_MAX`] were.
    pub untracked: u64,
}

impl Expiring {
    /// Remembers the keys `command` (stamped `now`) gives an expiry.
    pub fn note(&mut self, command: &Command, now: i64) {
        match command {
            Command::Set { key, expiry: SetExpiry::Set(time), .. } => self.track(time.resolve(now), key),
            Command::Expire { key, time, .. } => self.track(time.resolve(now), key),
            Command::Transaction { commands, .. } => commands.iter().for_each(|command| self.note(command, now)),
            Command::Timed { command, now_ms } => self.note(command, *now_ms),
            _ => {}
        }
    }

    fn track(&mut self, at: i64, key: &Key) {
        if self.due.len() >= TRACKED_MAX {
            self.untracked += 1;
            return;
        }
        self.due.push(Reverse((at, key.clone())));
    }

    /// Up to `max` keys whose expiry has passed at `now` (strictly, as the store decides), each
    /// once even if it was given several expiries.
    pub fn take_due(&mut self, now: i64, max: usize) -> Vec<Key> {
        let mut keys: Vec<Key> = Vec::new();
        while keys.len() < max && self.due.peek().is_some_and(|Reverse((at, _))| *at < now) {
            let Reverse((_, key)) = self.due.pop().expect("peeked");
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// Keys tracked.
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// True when no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

/// Sends a sweep for the due keys every [`SWEEP_PERIOD`], one at a time, for as long as the
/// gateway runs. Its outcome is not waited on by any client; a lost sweep leaves the keys to
/// the next write of each.
pub async fn sweep(expiring: Rc<RefCell<Expiring>>, requests: mpsc::Sender<Request>) {
    let mut ticks = tokio::time::interval(SWEEP_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = wall_ms();
        let keys = expiring.borrow_mut().take_due(now, SWEEP_KEYS_MAX);
        if !keys.is_empty() {
            submit(&requests, &expiring, Command::ExpireSweep { keys }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_core::command::{ExpiryTime, SetCondition};

    #[test]
    fn due_keys_come_out_once_after_their_time() {
        // Goal: a key is swept only strictly after its expiry (as the store decides), once,
        // in due order, and a transaction's expiries count too.
        let mut expiring = Expiring::default();
        let set = |key: &'static str, ms| Command::Set {
            key: key.into(),
            value: "v".into(),
            condition: SetCondition::Always,
            expiry: SetExpiry::Set(ExpiryTime::In(ms)),
        };
        expiring.note(&set("a", 10).timed(1_000), 0);
        expiring.note(&Command::Transaction { watched: vec![], commands: vec![set("b", 5), set("a", 20)] }, 1_000);
        expiring.note(&Command::set("c", "v"), 1_000);
        assert_eq!(expiring.len(), 3);
        assert!(expiring.take_due(1_005, 10).is_empty());
        assert_eq!(expiring.take_due(1_006, 10), vec![Key::from("b")]);
        assert_eq!(expiring.take_due(1_100, 10), vec![Key::from("a")]);
        assert!(expiring.is_empty());
    }
}
