//! Node references: how a fault plan names a node, by id or by role and index, and how a
//! reference resolves to a node id against a topology.

use ordo_core::{Role, Topology};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A node as a fault plan names it. In a file: an integer is a node id (`node = 3`); a string is
/// a role and an index, `"ROLE:INDEX"` (`"proxy:2"`, the third proxy in id order), `"ROLE"` for
/// index 0 (`"sequencer"`), and `"shardS/replica:RANK"` for a replica of shard S (`"replica:1"`
/// is rank 1 of shard 0). Roles are [`Role`]'s variants in lower case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRef {
    /// A node id: the topology's numbering (replicas shard by shard, then the protocol's extra
    /// roles, then clients).
    Id(u32),
    /// The `index`-th node of `role` in id order; for replicas, rank `index` of `shard`.
    Role {
        /// The role.
        role: Role,
        /// For replicas, the shard (`None`: shard 0); always `None` for other roles.
        shard: Option<usize>,
        /// Position among the role's nodes (a replica's rank in its shard).
        index: usize,
    },
}

/// Every role, to parse names (`role_name` is exhaustive, so a new role is named there).
const ROLES: [Role; 5] = [Role::Replica, Role::Client, Role::Proxy, Role::Sequencer, Role::Controller];

/// A role's name in plans and reports (`Role`'s variant in lower case), and its plural.
fn role_name(role: Role) -> (&'static str, &'static str) {
    match role {
        Role::Replica => ("replica", "replicas"),
        Role::Client => ("client", "clients"),
        Role::Proxy => ("proxy", "proxies"),
        Role::Sequencer => ("sequencer", "sequencers"),
        Role::Controller => ("controller", "controllers"),
    }
}

fn role_names() -> String {
    ROLES.iter().map(|&role| role_name(role).0).collect::<Vec<_>>().join(", ")
}

impl NodeRef {
    /// The node id this reference names in `topology`; fails when the topology has no such node.
    pub fn resolve(self, topology: &Topology) -> Result<u32, String> {
        match self {
            NodeRef::Id(id) => match topology.nodes.get(id as usize) {
                Some(_) => Ok(id),
                None => Err(format!("the plan names node {id} but the cluster has {} nodes", topology.nodes.len())),
            },
            NodeRef::Role { role: Role::Replica, shard, index } => {
                let shard_index = shard.unwrap_or(0);
                let Some(replicas) = topology.shards.get(shard_index) else {
                    let shards = topology.shards.len();
                    return Err(format!("the plan names {self} but the cluster has {shards} shard(s)"));
                };
                let count = replicas.len();
                let id = replicas
                    .get(index)
                    .ok_or_else(|| format!("the plan names {self} but shard {shard_index} has {count} replicas"))?;
                Ok(id.0)
            }
            NodeRef::Role { role, shard, index } => {
                assert!(shard.is_none(), "only replica references carry a shard (checked when parsed)");
                if let Some(id) = topology.with_role(role).nth(index) {
                    return Ok(id.0);
                }
                let count = topology.with_role(role).count();
                let (singular, plural) = role_name(role);
                let noun = if count == 1 { singular } else { plural };
                Err(format!("the plan names {self} but the cluster has {count} {noun}"))
            }
        }
    }
}

impl From<u32> for NodeRef {
    fn from(id: u32) -> Self {
        NodeRef::Id(id)
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NodeRef::Id(id) => write!(out, "{id}"),
            NodeRef::Role { role, shard: Some(shard), index } => {
                write!(out, "shard{shard}/{}:{index}", role_name(role).0)
            }
            NodeRef::Role { role, shard: None, index } => write!(out, "{}:{index}", role_name(role).0),
        }
    }
}

impl FromStr for NodeRef {
    type Err = String;

    /// Reads `"ROLE"`, `"ROLE:INDEX"`, `"shardS/replica:RANK"` or a node id in digits.
    fn from_str(text: &str) -> Result<Self, String> {
        if let Ok(id) = text.parse::<u32>() {
            return Ok(NodeRef::Id(id));
        }
        let malformed = || {
            format!(
                "malformed node reference {text:?}: expected a node id, ROLE, ROLE:INDEX or shardS/replica:RANK \
                 (ROLE one of {})",
                role_names()
            )
        };
        let number = |digits: &str| match digits.bytes().all(|byte| byte.is_ascii_digit()) {
            true => digits.parse::<usize>().map_err(|_| malformed()),
            false => Err(malformed()),
        };
        let (shard, rest) = match text.split_once('/') {
            Some((prefix, rest)) => (Some(number(prefix.strip_prefix("shard").ok_or_else(malformed)?)?), rest),
            None => (None, text),
        };
        let (name, index) = match rest.split_once(':') {
            Some((name, index)) => (name, number(index)?),
            None => (rest, 0),
        };
        let role = ROLES.into_iter().find(|&role| role_name(role).0 == name).ok_or_else(|| {
            if name.is_empty() || !name.bytes().all(|byte| byte.is_ascii_alphabetic()) {
                malformed()
            } else {
                format!("unknown role {name:?} in node reference {text:?}: roles are {}", role_names())
            }
        })?;
        if shard.is_some() && role != Role::Replica {
            return Err(format!("node reference {text:?}: only replicas belong to a shard"));
        }
        Ok(NodeRef::Role { role, shard, index })
    }
}

/// An integer as a node id, a string as a role reference; written back the same way.
impl Serialize for NodeRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            NodeRef::Id(id) => serializer.serialize_u32(*id),
            NodeRef::Role { .. } => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for NodeRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeRefVisitor)
    }
}

struct NodeRefVisitor;

impl serde::de::Visitor<'_> for NodeRefVisitor {
    type Value = NodeRef;

    fn expecting(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        out.write_str("a node id (3) or a role and index (\"proxy:2\", \"sequencer\", \"shard1/replica:0\")")
    }

    fn visit_u64<E: serde::de::Error>(self, id: u64) -> Result<NodeRef, E> {
        u32::try_from(id).map(NodeRef::Id).map_err(|_| E::custom(format!("node id {id} is out of range")))
    }

    fn visit_i64<E: serde::de::Error>(self, id: i64) -> Result<NodeRef, E> {
        u64::try_from(id).map_err(|_| E::custom(format!("node id {id} is negative"))).and_then(|id| self.visit_u64(id))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<NodeRef, E> {
        text.parse().map_err(E::custom)
    }
}
