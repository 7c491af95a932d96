//! Identifiers of nodes, clients and requests.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node of a cluster: a replica, a client, a proxy, a sequencer... Every role is a node.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index of this node, for vectors indexed by node.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// The identity under which a client's requests are deduplicated (the client table key).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct ClientId(pub u64);

impl fmt::Debug for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

impl ClientId {
    /// The client node that issued the requests (the low 32 bits; the high 32 bits tell its
    /// incarnations apart, see `NodeContext::client_id`).
    pub fn node(self) -> NodeId {
        NodeId(self.0 as u32)
    }
}

impl From<NodeId> for ClientId {
    fn from(node: NodeId) -> Self {
        ClientId(u64::from(node.0))
    }
}

/// A request: the client that sent it and the client's own sequence number, starting at 1.
/// A client has at most one request outstanding, so numbers only grow.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct RequestId {
    /// Who sent the request.
    pub client: ClientId,
    /// The client's sequence number for it.
    pub number: u64,
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}#{}", self.client, self.number)
    }
}
