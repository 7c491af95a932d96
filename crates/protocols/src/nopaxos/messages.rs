//! Every message of NOPaxos (paper §4.3, §5.2; sync and sequencer control: spec §5), with the
//! view-id and log-entry types they carry.

use ordo_core::{Command, CommandResult, RequestId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A view: ⟨leader-num, session-num⟩ (§5.2). Only partially ordered (fn 2), so it has no `Ord`:
/// compare with [`ViewId::covered_by`]; [`ViewId::rank`] is a total order that agrees with it on
/// comparable views (all views that start are comparable, fn 4).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ViewId {
    /// Incremented each time a new leader is needed; the leader is `replicas[leader_num % n]`.
    pub leader_num: u64,
    /// The OUM session the view listens to.
    pub session_num: u64,
}

impl ViewId {
    /// A view id.
    pub fn new(leader_num: u64, session_num: u64) -> Self {
        ViewId { leader_num, session_num }
    }

    /// `self ≤ other` in the paper's partial order: both components are at most `other`'s.
    pub fn covered_by(self, other: ViewId) -> bool {
        self.leader_num <= other.leader_num && self.session_num <= other.session_num
    }

    /// `self < other`: covered and different.
    pub fn below(self, other: ViewId) -> bool {
        self.covered_by(other) && self != other
    }

    /// The component-wise maximum (§5.2.3: "appropriately increments").
    pub fn join(self, other: ViewId) -> ViewId {
        ViewId::new(self.leader_num.max(other.leader_num), self.session_num.max(other.session_num))
    }

    /// A total order consistent with `covered_by` on comparable views.
    pub fn rank(self) -> (u64, u64) {
        (self.leader_num, self.session_num)
    }
}

impl fmt::Debug for ViewId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{},{}>", self.leader_num, self.session_num)
    }
}

/// A client's request: its id (client-id + request-id, for duplicate detection) and command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Client and number.
    pub id: RequestId,
    /// What to execute.
    pub command: Command,
}

/// One log slot: a sequenced request, or a NO-OP the leader committed in its place (§5.2.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    /// A client request.
    Request(Arc<Request>),
    /// A dropped request, permanently skipped.
    NoOp,
}

impl Entry {
    /// The request id, `None` for a NO-OP.
    pub fn id(&self) -> Option<RequestId> {
        match self {
            Entry::Request(request) => Some(request.id),
            Entry::NoOp => None,
        }
    }

    /// True for a NO-OP.
    pub fn is_no_op(&self) -> bool {
        matches!(self, Entry::NoOp)
    }
}

/// A log (checkpoint and held entries, `log.rs`), shared between messages without copying.
pub type SharedLog = Arc<super::log::Log>;

/// What a leader hands a recovering replica: the log, the OUM position that goes with it, and
/// how far it is synchronised (so the recovered follower executes only committed slots).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryState {
    /// OUM positions of the view's session the log accounts for.
    pub session_msg_num: u64,
    /// The leader's sync-point.
    pub sync_point: u64,
    /// The leader's log.
    pub log: SharedLog,
}

/// Every message any NOPaxos role sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// client → sequencer: a request for the OUM group (libOUM `send`).
    Request(Arc<Request>),
    /// sequencer → replicas: the request stamped with ⟨session, sequence⟩ (§4.2; sequence
    /// numbers start at 1 in each session).
    Stamped {
        /// OUM session.
        session: u64,
        /// Position in the session, from 1.
        seq: u64,
        /// The request.
        request: Arc<Request>,
    },
    /// replica → client (§5.2.1): `result` only from the leader.
    Reply {
        /// The replica's view.
        view: ViewId,
        /// Log slot of the request.
        slot: u64,
        /// The request.
        id: RequestId,
        /// The leader's result; `None` from other replicas.
        result: Option<CommandResult>,
    },
    /// follower → a peer follower, then the leader: "what is in slot `slot`?" (a follower's
    /// DROP-NOTIFICATION, §5.2.2).
    SlotLookup {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        slot: u64,
    },
    /// leader or peer → replica: the sender's entry at `slot`.
    SlotContent {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        slot: u64,
        /// The entry (request or NO-OP).
        entry: Entry,
    },
    /// peer → replica: "I have nothing at `slot` either": ask the leader.
    SlotMissing {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        slot: u64,
    },
    /// leader → replicas: "do you have slot `slot`?" (the optional optimisation of §5.2.2).
    GapFind {
        /// Leader's view.
        view: ViewId,
        /// The slot.
        slot: u64,
    },
    /// replica → leader: answer to `GapFind`; `request` if the replica holds one there.
    GapFound {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        slot: u64,
        /// Its request at the slot, if it has one.
        request: Option<Arc<Request>>,
    },
    /// leader → replicas: commit a NO-OP at `slot` (§5.2.2).
    GapCommit {
        /// Leader's view.
        view: ViewId,
        /// The slot.
        slot: u64,
    },
    /// replica → leader: the NO-OP is in my log at `slot`.
    GapCommitRep {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        slot: u64,
    },
    /// replica → replicas: "I moved to view `view`" (§5.2.3).
    ViewChangeReq {
        /// The new view.
        view: ViewId,
    },
    /// replica → leader of `view`: its log for the merge (§5.2.3).
    ViewChange {
        /// The new view.
        view: ViewId,
        /// Last view in which the sender was Normal (v').
        last_normal: ViewId,
        /// OUM messages accounted for by `log` in `last_normal`'s session.
        session_msg_num: u64,
        /// The sender's log.
        log: SharedLog,
    },
    /// new leader → replicas: the merged log of `view` (§5.2.3).
    StartView {
        /// The view.
        view: ViewId,
        /// Where to listen in `view.session_num`.
        session_msg_num: u64,
        /// The merged log.
        log: SharedLog,
    },
    /// replica → leader: `StartView` of `view` installed (fn 5).
    StartViewAck {
        /// The view.
        view: ViewId,
    },
    /// leader → replica: heartbeat and synchronisation proposal (§5.2.4, spec §6.5): my log is
    /// final through `through`; the NO-OPs among slots `from + 1 ..= through` are `no_ops`.
    SyncPrepare {
        /// Leader's view.
        view: ViewId,
        /// Slots up to here the receiver already agreed to.
        from: u64,
        /// The proposed sync-point.
        through: u64,
        /// The leader's NO-OP slots in `from + 1 ..= through`, ascending.
        no_ops: Vec<u64>,
    },
    /// replica → leader: my log now equals yours through `through`.
    SyncRep {
        /// Sender's view.
        view: ViewId,
        /// The slot.
        through: u64,
    },
    /// leader → replicas: every slot through `through` is committed (the sync-point).
    SyncCommit {
        /// Leader's view.
        view: ViewId,
        /// The new sync-point.
        through: u64,
    },
    /// A restarted replica asks for the group's state (§5.2.5, VR's RECOVERY); `nonce` is its
    /// incarnation, so answers to an earlier incarnation are told apart.
    Recovery {
        /// The recovering replica's incarnation.
        nonce: u64,
    },
    /// A Normal replica's answer to `Recovery`: its view; the leader adds its state.
    RecoveryResponse {
        /// The responder's view (it is Normal in it).
        view: ViewId,
        /// The nonce of the `Recovery` answered.
        nonce: u64,
        /// The leader's log, OUM position and sync-point; `None` from a follower.
        state: Option<RecoveryState>,
    },
    /// controller → sequencer: are you alive, which session do you stamp?
    Ping,
    /// sequencer → controller: alive, in incarnation `boot`, stamping `session` (if any).
    Pong {
        /// A number drawn at each start of the sequencer.
        boot: u64,
        /// The session it stamps.
        session: Option<u64>,
    },
    /// controller → sequencer: stamp `session` from sequence 1, if you are still `boot`.
    SetSession {
        /// The new session.
        session: u64,
        /// The incarnation the controller addressed (an older one must not take it).
        boot: u64,
    },
}
