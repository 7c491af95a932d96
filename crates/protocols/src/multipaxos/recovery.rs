//! Restart: rebuilds view, last normal view, log and snapshot from the durable records, in the
//! order they were written. The replica then decides its status from them (`Replica::new`):
//!
//! - no records: a fresh node, normal in view 0 (it never promised anything, and as the leader of
//!   view 0 it never sent a `Prepare`, since those wait for its own first persist);
//! - normal in its durable view as a backup: it resumes as a backup (its log is a prefix of the
//!   leader's) and catches up by state transfer;
//! - normal in its durable view as the leader: it lost its pipeline and acknowledgements, so it
//!   starts a view change to the next view rather than lead the same view twice;
//! - in a view change (last normal view below view): it resumes that view change.

use super::Durable;
use super::log::Log;
use super::messages::Snapshot;
use std::sync::Arc;

/// What the durable records say.
#[derive(Debug)]
pub struct Recovered {
    /// The highest view joined.
    pub view: u64,
    /// The latest view the replica was normal in.
    pub last_normal_view: u64,
    /// The latest snapshot, if any.
    pub snapshot: Option<Arc<Snapshot>>,
    /// The log.
    pub log: Log,
    /// True when there were no records at all.
    pub fresh: bool,
}

impl Recovered {
    /// Replays `records` in order.
    pub fn replay(records: &[Durable]) -> Self {
        let mut recovered =
            Recovered { view: 0, last_normal_view: 0, snapshot: None, log: Log::new(0), fresh: records.is_empty() };
        for record in records {
            recovered.apply(record);
            assert!(recovered.last_normal_view <= recovered.view, "a normal view was joined first");
        }
        let snapshot_op = recovered.snapshot.as_ref().map_or(0, |s| s.op);
        assert!(recovered.log.op_number() >= snapshot_op, "the log reaches the snapshot");
        recovered
    }

    fn apply(&mut self, record: &Durable) {
        match record {
            Durable::View { view } => self.view = self.view.max(*view),
            Durable::Entries { view, after, entries } => {
                assert!(*view >= self.last_normal_view, "entries are accepted in non-decreasing views");
                self.log.splice(*after, entries.clone());
                self.view = self.view.max(*view);
                self.last_normal_view = *view;
            }
            Durable::Log { view, log_base, entries } => {
                assert!(*view >= self.last_normal_view, "logs are accepted in non-decreasing views");
                self.log = Log::from_entries(*log_base, entries.clone());
                self.view = self.view.max(*view);
                self.last_normal_view = *view;
            }
            Durable::Checkpoint { view, last_normal_view, snapshot, log_base, entries } => {
                // The log may start before the snapshot (a tail of executed entries kept for
                // replicas that lag) or after it (a log adopted in a view change), never end before it.
                let end = log_base.saturating_add(entries.len() as u64);
                assert!(end >= snapshot.op, "a checkpoint's log reaches its snapshot");
                assert!(last_normal_view <= view, "a checkpoint's normal view was joined");
                self.view = self.view.max(*view);
                self.last_normal_view = *last_normal_view;
                self.snapshot = Some(snapshot.clone());
                self.log = Log::from_entries(*log_base, entries.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multipaxos::messages::Entry;
    use bytes::Bytes;
    use ordo_core::{ClientId, Command, NodeId, RequestId};

    fn entry(number: u64) -> Entry {
        Entry {
            id: RequestId { client: ClientId(1), number },
            acked_below: number,
            reply_to: NodeId(9),
            command: Command::get("k"),
        }
    }

    #[test]
    fn replay_rebuilds_view_log_and_snapshot() {
        // Goal: the records replay to the state they describe. Method: entries, a view change,
        // a replacing splice, then a checkpoint followed by more entries.
        let records = vec![
            Durable::Entries { view: 0, after: 0, entries: vec![entry(1), entry(2)] },
            Durable::Entries { view: 0, after: 2, entries: vec![entry(3)] },
            Durable::View { view: 2 },
        ];
        let recovered = Recovered::replay(&records);
        assert_eq!((recovered.view, recovered.last_normal_view, recovered.log.op_number()), (2, 0, 3));
        assert!(!recovered.fresh);
        let snapshot = Arc::new(Snapshot { op: 2, state: Bytes::new(), client_table: vec![] });
        let records = vec![
            Durable::Checkpoint { view: 2, last_normal_view: 2, snapshot, log_base: 2, entries: vec![entry(3)] },
            Durable::Entries { view: 2, after: 3, entries: vec![entry(4)] },
            Durable::Entries { view: 3, after: 3, entries: vec![entry(40)] },
        ];
        let recovered = Recovered::replay(&records);
        assert_eq!((recovered.view, recovered.last_normal_view), (3, 3));
        assert_eq!((recovered.log.base(), recovered.log.op_number()), (2, 4));
        assert_eq!(recovered.log.get(4).unwrap().id.number, 40);
        assert!(Recovered::replay(&[]).fresh);
    }
}
