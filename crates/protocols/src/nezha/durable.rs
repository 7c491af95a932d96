//! Durable mode (`Config::durable`; not in the paper, whose replicas are diskless): a replica
//! persists its log, view and crash-vector, and a restarted one resumes from them.
//!
//! The rule is the one every durable replica follows: nothing leaves before what it rests on is
//! durable. A replica handles a message or a timer, then records what the handler changed (a
//! view record, the entries synced, the unsynced entries added and removed, or a whole image
//! when the log was rebuilt), and every message the handler queued waits for those writes
//! (`Outbox::persist_before`; the runtime syncs once per input batch, a group commit). A crash
//! therefore loses only changes no other process has heard of, which is the same as losing the
//! messages that caused them: a restarted replica is a replica that missed some messages, which
//! the protocol already tolerates. It needs no rejoin and no new crash-vector counter (App. H's
//! stray replies are replies of a replica that forgot them; this one did not).
//!
//! What is not recorded is rebuilt: the state machine and client table from the checkpoint and
//! the synced entries (a follower executes them again once the leader's commit point reaches
//! it), the buffers and the leader's bookkeeping from the next messages. A restarted follower
//! that was normal resumes in its view; a leader, or a replica in a view change, starts a view
//! change to the next view, since what it led with is gone.

use super::messages::{Checkpoint, CrashVector, Entry};
use super::replica::{Replica, Slot, Status};
use super::{Durable, Flaw, Nezha};
use crate::nezha::hashes::ConflictTable;
use ordo_core::{Outbox, PersistMode, RequestId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The view a replica is in, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewRecord {
    /// Its view.
    pub view: u64,
    /// The last view it was normal in.
    pub last_normal_view: u64,
    /// True when it is normal in `view`.
    pub normal: bool,
    /// Its crash-vector.
    pub cv: CrashVector,
}

/// A replica's whole log and view: the first record of a durable replica, and the record that
/// replaces all others when the log is rebuilt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The replica's rank (a restart checks it is its own).
    pub rank: usize,
    /// Its view.
    pub view: ViewRecord,
    /// The state below the first synced entry.
    pub checkpoint: Arc<Checkpoint>,
    /// Synced entries, at positions `checkpoint.position + 1 ..`.
    pub synced: Vec<Entry>,
    /// Unsynced entries with the hash of their fast-reply.
    pub unsynced: Vec<(Entry, u64)>,
}

/// What a replica's records hold, as it last wrote them.
pub(super) struct Written {
    view: ViewRecord,
    /// `Replica::log_epoch` when the last image was written: another epoch means the log was
    /// rebuilt (a fold, a view change, a state transfer) and needs a new image; none before
    /// the first image.
    epoch: Option<u64>,
    /// The last synced position recorded.
    sync_point: u64,
    /// The unsynced entries recorded, with their deadline and hash.
    unsynced: HashMap<RequestId, (u64, u64)>,
}

/// A durable replica's records, replayed.
pub(super) struct Replayed {
    view: ViewRecord,
    checkpoint: Arc<Checkpoint>,
    synced: Vec<Entry>,
    unsynced: Vec<(Entry, u64)>,
}

impl Replayed {
    /// Replays a durable replica's records: an image, then the changes recorded after it.
    /// `None` when they are not a durable replica's (a replica that ran in diskless mode: it
    /// must rejoin). Records out of order are a bug of this file or a damaged disk that the
    /// storage's checksums missed: the replica stops rather than resume a wrong log.
    pub(super) fn from_records(rank: usize, records: &[Durable]) -> Option<Replayed> {
        let (Durable::Image(image), changes) = records.split_first()? else { return None };
        assert_eq!(image.rank, rank, "a replica restarts with its own records");
        let mut replayed = Replayed {
            view: image.view.clone(),
            checkpoint: image.checkpoint.clone(),
            synced: image.synced.clone(),
            unsynced: image.unsynced.clone(),
        };
        for change in changes {
            match change {
                Durable::View(view) => replayed.view = view.clone(),
                Durable::Synced { first, entries } => {
                    let expected = replayed.checkpoint.position + replayed.synced.len() as u64 + 1;
                    assert_eq!(*first, expected, "synced entries are recorded in log order");
                    replayed.synced.extend(entries.iter().cloned());
                }
                Durable::Unsynced { removed, added } => {
                    replayed.unsynced.retain(|(entry, _)| !removed.contains(&entry.id));
                    replayed.unsynced.extend(added.iter().cloned());
                }
                Durable::Image(_) | Durable::Launched { .. } => {
                    panic!("an image or launch marker only ever starts a replica's records")
                }
            }
        }
        Some(replayed)
    }
}

impl Replica {
    /// The view as recorded.
    fn view_record(&self) -> ViewRecord {
        ViewRecord {
            view: self.view,
            last_normal_view: self.last_normal_view,
            normal: self.status == Status::Normal,
            cv: self.cv.clone(),
        }
    }

    /// The whole log and view.
    pub(super) fn durable_image(&self) -> Image {
        Image {
            rank: self.rank,
            view: self.view_record(),
            checkpoint: self.checkpoint.clone(),
            synced: self.synced.iter().map(|slot| slot.entry.clone()).collect(),
            unsynced: self.unsynced.iter().map(|slot| (slot.entry.clone(), slot.hash)).collect(),
        }
    }

    /// What the records hold once the log as it is now is written.
    pub(super) fn written_now(&self) -> Written {
        Written {
            view: self.view_record(),
            epoch: Some(self.log_epoch),
            sync_point: self.sync_point(),
            unsynced: self.unsynced.iter().map(|slot| (slot.entry.id, (slot.entry.deadline, slot.hash))).collect(),
        }
    }

    /// Durable mode, at the end of every handler: records what the handler changed and holds
    /// every message it queued (from effect `handler_start` on) until the records are durable.
    /// The first record is an image: at the first boot, or once a replica that had to rejoin
    /// (its records were a diskless replica's) has a log again; nothing is recorded while it
    /// rejoins, so a crash then leaves it rejoining again.
    pub(super) fn persist_changes(&mut self, out: &mut Outbox<Nezha>, handler_start: usize) {
        if !self.config.durable || self.status == Status::Recovering {
            return;
        }
        let mut written = self.written.take().unwrap_or_else(|| Written { epoch: None, ..self.written_now() });
        let volatile = self.flaw == Flaw::VolatileLog && written.epoch.is_some();
        let records = if volatile { Vec::new() } else { self.changes(&mut written) };
        self.written = Some(written);
        if out.persist_before(handler_start, records).is_some() {
            self.stats.count("durable_write");
        }
    }

    /// The records that bring `written` to the log as it is now (and brings `written` along).
    fn changes(&self, written: &mut Written) -> Vec<(Durable, PersistMode)> {
        if written.epoch != Some(self.log_epoch) {
            *written = self.written_now();
            return vec![(Durable::Image(Arc::new(self.durable_image())), PersistMode::Replace)];
        }
        let mut records = Vec::new();
        let view = self.view_record();
        if view != written.view {
            records.push((Durable::View(view.clone()), PersistMode::Append));
            written.view = view;
        }
        if self.sync_point() > written.sync_point {
            let first = written.sync_point + 1;
            let entries = (first..=self.sync_point())
                .map(|position| self.slot(position).expect("synced positions above the checkpoint are held"))
                .map(|slot| slot.entry.clone())
                .collect();
            records.push((Durable::Synced { first, entries }, PersistMode::Append));
            written.sync_point = self.sync_point();
        }
        // Most handlers leave the unsynced entries as they were: the same count, each recorded
        // as it is, means the same set, found without building one.
        let recorded = |slot: &Slot| written.unsynced.get(&slot.entry.id) == Some(&(slot.entry.deadline, slot.hash));
        if self.unsynced.len() == written.unsynced.len() && self.unsynced.iter().all(recorded) {
            return records;
        }
        let now: HashMap<RequestId, (u64, u64)> =
            self.unsynced.iter().map(|slot| (slot.entry.id, (slot.entry.deadline, slot.hash))).collect();
        let removed: Vec<RequestId> =
            written.unsynced.iter().filter(|(id, was)| now.get(id) != Some(was)).map(|(id, _)| *id).collect();
        let added: Vec<(Entry, u64)> =
            self.unsynced.iter().filter(|slot| !recorded(slot)).map(|slot| (slot.entry.clone(), slot.hash)).collect();
        records.push((Durable::Unsynced { removed, added }, PersistMode::Append));
        written.unsynced = now;
        records
    }

    /// Durable mode, at a restart: takes the replayed log and view as ours. True when the
    /// replica must start a view change (it led its view, or was in a view change).
    pub(super) fn resume(&mut self, replayed: Replayed) -> bool {
        let Replayed { view, checkpoint, synced, unsynced } = replayed;
        self.restore(&checkpoint);
        let mut table = ConflictTable::new(self.config.commutativity);
        let restored = table.restore_hashes(&checkpoint.hashes);
        assert!(restored, "a replica's own checkpoint has its bucket count");
        let deadlines = synced.iter().chain(unsynced.iter().map(|(entry, _)| entry)).map(|entry| entry.deadline);
        table.raise_all(deadlines.fold(checkpoint.deadline_max, u64::max));
        self.checkpoint = checkpoint;
        self.cv = view.cv.clone();
        for entry in synced {
            let print = table.footprint(&entry.command);
            table.add(&entry, &print);
            let hash = table.reply_hash(&print, &self.cv);
            self.positions.insert(entry.id, self.checkpoint.position + 1 + self.synced.len() as u64);
            self.synced.push(Slot { entry, print, hash });
        }
        self.synced_hashes = table.write_hashes().clone();
        for (entry, hash) in unsynced {
            let print = table.footprint(&entry.command);
            table.add(&entry, &print);
            self.unsynced.push_back(Slot { entry, print, hash });
        }
        self.conflicts = table;
        let end = self.sync_point();
        self.commit = self.checkpoint.position;
        self.cv_since = end + 1;
        self.unannounced = end + 1;
        self.acked[self.rank] = end;
        self.view = view.view;
        self.last_normal_view = view.last_normal_view;
        self.stats.count("durable_resume");
        let follower = view.normal && !self.is_leader();
        // A resumed leader or voter is not normal until its view change ends.
        self.status = if follower { Status::Normal } else { Status::ViewChange };
        self.written = Some(Written { view, ..self.written_now() });
        !follower
    }
}
