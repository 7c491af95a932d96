//! Proposal recovery (§6.3, §6.6, §6.7.3): nacks for gaps, recovers answering them, and the
//! coordination timer that detects drops and sends our own uncommitted proposals again.
//!
//! A nack names a range of slots. Answers depend on where the slot lies:
//! - at or below the view-base (repair during a view change, §6.5): any replica whose
//!   verified prefix (`last-ack`) covers the slot answers, so a recovered entry always agrees
//!   with the initiator's log; a replica never recovers an old slot above its `last-ack`;
//! - above the view-base (normal operation): only the slot's owner answers
//!   (proposer-accountable recovery, §6.7.3).

use super::checker::Observation;
use super::log::Schedule;
use super::messages::Entry;
use super::replica::{Dropped, Replica};
use std::collections::BTreeMap;

/// Repair waiting for our next pulse.
#[derive(Clone, Debug, Default)]
pub struct Repair {
    /// The slots we will nack.
    pub nack: Option<(u64, u64)>,
    /// Entries we will send again, by slot (at most `recover_max`).
    pub recovers: BTreeMap<u64, Entry>,
    /// Our own proposals, reported to the checker when the pulse carrying them leaves.
    pub pending_observations: Vec<Observation>,
    /// `last-commit` when the coordination timer last fired.
    pub commit_at_last_check: u64,
    /// Coordination timeouts in a row without a commit: the back-off of [`is_due`].
    pub idle_checks: u64,
    /// Responsive mode: the next pulse carries our view-init again.
    pub resend_view_init: bool,
}

/// Most coordination timeouts between two repairs while nothing commits.
pub const REPAIR_SPACING_MAX: u64 = 8;

/// Whether the `idle_checks`-th coordination timeout in a row without a commit repairs: the
/// 1st, 2nd, 4th and 8th, then every 8th ([`crate::backoff::is_due`]). Why (issue 20): a
/// proposal carrying a 16 MiB value takes a few hundred milliseconds to reach the others and
/// commit, and resending it at every timeout sent the megabytes again and again, which delayed
/// the commit further.
fn is_due(idle_checks: u64) -> bool {
    crate::backoff::is_due(idle_checks, REPAIR_SPACING_MAX)
}

impl Repair {
    /// Forgets everything pending (a new view).
    pub fn clear(&mut self) {
        self.nack = None;
        self.recovers.clear();
    }

    /// Checks the bounds.
    pub fn check(&self, recover_max: usize) {
        assert!(self.recovers.len() <= recover_max, "recovers per pulse are bounded");
        if let Some((start, until)) = self.nack {
            assert!(start <= until, "a nack names at least one slot");
            assert!(until - start < recover_max as u64, "a nack names at most recover_max slots");
        }
    }
}

impl Replica {
    /// Someone misses `start..=until`: queue what we may send again.
    pub(super) fn on_nack(&mut self, start: u64, until: u64) {
        let Some(schedule) = self.vs.schedule.clone() else { return };
        let until = until.min(start.saturating_add(self.config.recover_max as u64 - 1));
        let mut answers = Vec::new();
        for (slot, entry) in self.log.range(start, until) {
            if self.may_recover(&schedule, slot, entry) {
                answers.push((slot, entry.clone()));
            }
        }
        for (slot, entry) in answers {
            if self.repair.recovers.len() >= self.config.recover_max {
                break;
            }
            if slot <= schedule.base {
                assert!(slot <= self.acks.last_ack, "never recover an old slot above last-ack (§6.5)");
            }
            self.repair.recovers.insert(slot, entry);
        }
    }

    fn may_recover(&self, schedule: &Schedule, slot: u64, entry: &Entry) -> bool {
        if slot <= schedule.base {
            slot <= self.acks.last_ack
        } else {
            entry.view == self.vs.view && schedule.owner(slot) == Some(self.rank)
        }
    }

    /// The coordination timer (§6.6): when nothing committed since it last fired, nack the
    /// gaps we see and send our own uncommitted proposals again.
    pub(super) fn on_coordination(&mut self, _now: u64) {
        let last_commit = self.acks.last_commit;
        self.repair.resend_view_init = !self.vs.view_init_committed;
        if last_commit != self.repair.commit_at_last_check {
            self.repair.commit_at_last_check = last_commit;
            self.repair.idle_checks = 0;
            return;
        }
        self.repair.idle_checks += 1;
        if !is_due(self.repair.idle_checks) {
            return;
        }
        let recover_max = self.config.recover_max as u64;
        let Some(schedule) = self.vs.schedule.clone() else {
            // We adopted a view whose view-init we never got: ask for it.
            if let Some(base) = self.vs.announced_base {
                self.repair.nack = Some((base, base));
            }
            return;
        };
        let known = self.proposing.latest_proposed.max(self.log.last_slot());
        let last_ack = self.acks.last_ack;
        if last_ack < known {
            self.repair.nack = Some((last_ack + 1, known.min(last_ack + recover_max)));
            self.stats.count("coordination_nack");
        }
        if let Some(next) = self.proposing.next_propose {
            let mut slot = schedule.next_owned(self.rank, last_commit.max(schedule.base));
            while slot < next && self.repair.recovers.len() < self.config.recover_max {
                if let Some(entry) = self.log.get(slot) {
                    self.repair.recovers.insert(slot, entry.clone());
                }
                slot = schedule.next_owned(self.rank, slot);
            }
            if slot > schedule.next_owned(self.rank, last_commit.max(schedule.base)) {
                self.stats.count("coordination_resend");
            }
        }
    }

    /// Repair made progress: ask for the next stretch at once rather than at the next
    /// coordination timeout, so a long unverified suffix is repaired at one stretch per round
    /// trip; and count it as progress, so the view-change timeout does not cut it short.
    pub(super) fn continue_repair(&mut self, now: u64, ack_before: u64) {
        let Some(schedule) = &self.vs.schedule else { return };
        let last_ack = self.acks.last_ack;
        if last_ack <= ack_before || self.repair.nack.is_some() {
            return;
        }
        let recover_max = self.config.recover_max as u64;
        if last_ack < schedule.base {
            self.vs.progress_ns = now;
            let until = (schedule.base - 1).min(last_ack + recover_max);
            if until > last_ack {
                self.repair.nack = Some((last_ack + 1, until));
            }
            return;
        }
        // A replica more than a few rounds behind the latest proposal (back from a partition,
        // or after losses) catches up the same way; one within them is merely in the pipeline.
        let lag_slots = 4 * schedule.proposers.len() as u64;
        let latest = self.proposing.latest_proposed;
        if latest > last_ack + lag_slots {
            self.repair.nack = Some((last_ack + 1, latest.min(last_ack + recover_max)));
        }
    }

    /// An entry of an earlier view, sent again during repair: appended only right after our
    /// verified prefix, and it replaces an entry of another view (§6.5).
    pub(super) fn on_old_entry(&mut self, schedule: &Schedule, slot: u64, entry: Entry) -> Result<(), Dropped> {
        if slot >= schedule.base {
            return Err("old-view entry at or above the view-base");
        }
        if slot <= self.acks.last_ack {
            return Err("entry verified already");
        }
        if slot != self.acks.last_ack + 1 {
            return Err("recover ahead of our verified prefix");
        }
        match self.log.get(slot) {
            Some(held) if held.view == entry.view => {}
            Some(_) => {
                // Another view's entry: everything from here to the view-base is suspect.
                self.stats.count("repair_truncate");
                self.log.remove_range(slot, schedule.base);
                self.log.insert(slot, entry);
            }
            None => self.log.insert(slot, entry),
        }
        self.acks.last_ack = slot;
        self.advance_ack();
        Ok(())
    }
}
