//! The replay window: with a cluster key, each authenticated datagram is accepted at most once,
//! so a recorded datagram sent again by someone else is dropped.
//!
//! A sender's datagrams carry its start time (`boot`) and a sequence number. Per sender address
//! the receiver keeps the latest boot and which of the last [`WINDOW`] sequence numbers it has
//! seen, as IPsec does. A later boot starts a fresh window (the process restarted); an earlier
//! one is dropped, unless the sender has been silent for [`STALE_BOOT_SILENCE_NS`]: then its
//! machine's clock may have stepped back across a restart, and refusing it would cut it off for
//! good. A replayed datagram is at worst an old message delivered late, which the protocols
//! tolerate anyway (the simulator delays and duplicates messages); the window keeps it from
//! becoming a flood.

use std::collections::HashMap;
use std::net::SocketAddr;

/// Sequence numbers a sender's stream may be reordered by and still be accepted.
pub const WINDOW: u64 = 4_096;
/// Senders remembered; beyond this, the one heard from longest ago is forgotten.
pub const SENDERS_MAX: usize = 4_096;
/// How long a sender must have been silent before an earlier boot of it is believed.
pub const STALE_BOOT_SILENCE_NS: u64 = 10_000_000_000;

const WORDS: usize = (WINDOW / 64) as usize;

/// Why the window refused a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// This sequence number was accepted before.
    Duplicate,
    /// Older than the window.
    TooOld,
    /// From an earlier incarnation of a sender heard from recently.
    StaleBoot,
}

impl Replay {
    /// The drop reason counted in the metrics.
    pub fn reason(self) -> &'static str {
        match self {
            Replay::Duplicate => "replayed",
            Replay::TooOld => "replay_window_passed",
            Replay::StaleBoot => "stale_boot",
        }
    }
}

/// One sender's window.
struct Window {
    boot: u64,
    highest: u64,
    /// Bit `s % WINDOW` is set when sequence number `s` (within the window) was accepted.
    seen: Box<[u64; WORDS]>,
    last_ns: u64,
}

impl Window {
    fn new(boot: u64, sequence: u64, now_ns: u64) -> Self {
        let mut window = Window { boot, highest: sequence, seen: Box::new([0; WORDS]), last_ns: now_ns };
        window.mark(sequence);
        window
    }

    fn bit(sequence: u64) -> (usize, u64) {
        let at = sequence % WINDOW;
        ((at / 64) as usize, 1 << (at % 64))
    }

    fn mark(&mut self, sequence: u64) {
        let (word, bit) = Window::bit(sequence);
        self.seen[word] |= bit;
    }

    fn accept(&mut self, sequence: u64) -> Result<(), Replay> {
        if sequence > self.highest {
            if sequence - self.highest >= WINDOW {
                self.seen.fill(0);
            } else {
                for skipped in self.highest + 1..sequence {
                    let (word, bit) = Window::bit(skipped);
                    self.seen[word] &= !bit;
                }
            }
            self.highest = sequence;
            self.mark(sequence);
            return Ok(());
        }
        if self.highest - sequence >= WINDOW {
            return Err(Replay::TooOld);
        }
        let (word, bit) = Window::bit(sequence);
        if self.seen[word] & bit != 0 {
            return Err(Replay::Duplicate);
        }
        self.seen[word] |= bit;
        Ok(())
    }
}

/// The windows of every sender heard from.
#[derive(Default)]
pub struct ReplayGuard {
    senders: HashMap<SocketAddr, Window>,
}

impl ReplayGuard {
    /// Accepts the datagram `sequence` of the incarnation `boot` of the process at `source`, or
    /// says why it is a replay. Call it only for datagrams whose MAC was verified.
    pub fn accept(&mut self, source: SocketAddr, boot: u64, sequence: u64, now_ns: u64) -> Result<(), Replay> {
        if !self.senders.contains_key(&source) && self.senders.len() >= SENDERS_MAX {
            self.forget_the_quietest();
        }
        let window = match self.senders.get_mut(&source) {
            None => {
                self.senders.insert(source, Window::new(boot, sequence, now_ns));
                return Ok(());
            }
            Some(window) => window,
        };
        let silent = now_ns.saturating_sub(window.last_ns) >= STALE_BOOT_SILENCE_NS;
        if boot > window.boot || (boot < window.boot && silent) {
            *window = Window::new(boot, sequence, now_ns);
            return Ok(());
        }
        if boot < window.boot {
            return Err(Replay::StaleBoot);
        }
        window.accept(sequence)?;
        window.last_ns = now_ns;
        Ok(())
    }

    fn forget_the_quietest(&mut self) {
        let quietest = self.senders.iter().min_by_key(|(_, w)| w.last_ns).map(|(source, _)| *source);
        if let Some(source) = quietest {
            self.senders.remove(&source);
        }
    }

    /// Senders remembered.
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// True when no sender is remembered.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn each_datagram_is_accepted_once() {
        // Goal: reordered datagrams within the window are accepted, each once; older ones are
        // refused; another sender has a window of its own.
        let mut guard = ReplayGuard::default();
        for sequence in [5, 3, 4, 9, 6] {
            assert_eq!(guard.accept(at(1), 100, sequence, 0), Ok(()), "{sequence}");
        }
        assert_eq!(guard.accept(at(1), 100, 4, 0), Err(Replay::Duplicate));
        assert_eq!(guard.accept(at(1), 100, 9, 0), Err(Replay::Duplicate));
        assert_eq!(guard.accept(at(1), 100, 7, 0), Ok(()), "skipped, so not seen");
        assert_eq!(guard.accept(at(2), 100, 4, 0), Ok(()));
        assert_eq!(guard.accept(at(1), 100, 9 + WINDOW, 0), Ok(()));
        assert_eq!(guard.accept(at(1), 100, 9, 0), Err(Replay::TooOld));
        assert_eq!(guard.accept(at(1), 100, 10, 0), Ok(()), "inside the window, not seen");
    }

    #[test]
    fn a_restart_starts_a_fresh_window_and_an_earlier_incarnation_is_refused() {
        // Goal: a sender's later boot is accepted from sequence 0; its earlier boot is a replay
        // while it is heard from, and believed again after a long silence (a clock stepped back).
        let mut guard = ReplayGuard::default();
        assert_eq!(guard.accept(at(1), 100, 50, 0), Ok(()));
        assert_eq!(guard.accept(at(1), 200, 0, 1), Ok(()));
        assert_eq!(guard.accept(at(1), 100, 51, 2), Err(Replay::StaleBoot));
        assert_eq!(guard.accept(at(1), 200, 0, 3), Err(Replay::Duplicate));
        assert_eq!(guard.accept(at(1), 150, 0, 3 + STALE_BOOT_SILENCE_NS), Ok(()));
    }

    #[test]
    fn senders_are_bounded() {
        // Goal: memory stays bounded whatever the number of sources; the quietest is forgotten.
        let mut guard = ReplayGuard::default();
        for port in 0..SENDERS_MAX as u16 + 10 {
            assert_eq!(guard.accept(at(port), 1, 0, u64::from(port)), Ok(()));
        }
        assert_eq!(guard.len(), SENDERS_MAX);
        assert_eq!(guard.accept(at(0), 1, 0, u64::MAX), Ok(()), "forgotten, so new again");
    }

    proptest! {
        #[test]
        fn agrees_with_a_set_of_everything_seen(sequences in proptest::collection::vec(0u64..3 * WINDOW, 1..400)) {
            // Goal: the window accepts a sequence number exactly when it is new and not older
            // than the window below the highest accepted, as a set of all seen numbers says.
            let mut guard = ReplayGuard::default();
            let mut seen = std::collections::BTreeSet::new();
            for sequence in sequences {
                let highest = seen.last().copied().unwrap_or(0);
                let expected = if seen.contains(&sequence) {
                    Err(Replay::Duplicate)
                } else if !seen.is_empty() && sequence < highest && highest - sequence >= WINDOW {
                    Err(Replay::TooOld)
                } else {
                    Ok(())
                };
                let expected = match expected {
                    Err(Replay::Duplicate) if highest - sequence >= WINDOW => Err(Replay::TooOld),
                    other => other,
                };
                prop_assert_eq!(guard.accept(at(1), 1, sequence, 0), expected);
                if expected.is_ok() {
                    seen.insert(sequence);
                }
            }
        }
    }
}
