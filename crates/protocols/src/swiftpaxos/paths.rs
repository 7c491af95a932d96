//! Dependency paths (`pset`, L37–39) as one digest, trimmed after the first accepted or
//! committed dependency (§4.1).
//!
//! A path set is the set of lists that start at a command and follow dependency edges down to a
//! command without dependencies. It is determined by the tree the dependency graph unfolds into
//! (children of a node have distinct ids), so a hash computed bottom-up over that tree, children
//! sorted, stands for the set. Trimming: a path stops at the first dependency that is `Accept`
//! or `Commit` here, because what lies below it is the leader's ordering at every replica that
//! accepted it (L23, Inv 13). **A trimmed end is hashed apart from a complete end**: without
//! that, the leader's `[c3, c2…]` (c2 accepted, with c1 below it) would equal a follower's
//! `[c3, c2]` (c2 proposed with no dependency), which is exactly the mismatch of Fig 2 the
//! client must see (spec scenario 6).

use super::messages::Phase;
use ordo_core::RequestId;
use std::collections::{BTreeMap, BTreeSet};
use xxhash_rust::xxh3::xxh3_64;

const END: u8 = 0;
const TRIMMED: u8 = 1;
const INNER: u8 = 2;

fn node_hash(id: RequestId, tag: u8, children: &[u64]) -> u64 {
    let mut bytes = Vec::with_capacity(17 + children.len() * 8);
    bytes.push(tag);
    bytes.extend_from_slice(&id.client.0.to_le_bytes());
    bytes.extend_from_slice(&id.number.to_le_bytes());
    for child in children {
        bytes.extend_from_slice(&child.to_le_bytes());
    }
    xxh3_64(&bytes)
}

/// The digest of `root`'s trimmed paths, where `root` has dependencies `deps` and `view(id)`
/// gives another command's phase and dependencies here (`None`: unknown or none proposed).
pub fn digest<'a>(
    root: RequestId,
    deps: &BTreeSet<RequestId>,
    view: impl Fn(RequestId) -> (Phase, Option<&'a BTreeSet<RequestId>>),
) -> u64 {
    let mut memo: BTreeMap<RequestId, u64> = BTreeMap::new();
    let mut children: Vec<u64> = deps.iter().map(|&dep| below(dep, &view, &mut memo, 0)).collect();
    children.sort_unstable();
    if children.is_empty() { node_hash(root, END, &[]) } else { node_hash(root, INNER, &children) }
}

/// Depth bound of the walk: proposals only point at commands received earlier, so the graph
/// below a proposal is acyclic; the bound only guards against a bug turning into a hang.
const DEPTH_MAX: usize = 4_096;

fn below<'a>(
    id: RequestId,
    view: &impl Fn(RequestId) -> (Phase, Option<&'a BTreeSet<RequestId>>),
    memo: &mut BTreeMap<RequestId, u64>,
    depth: usize,
) -> u64 {
    if let Some(&hash) = memo.get(&id) {
        return hash;
    }
    let (phase, deps) = view(id);
    let hash = match (phase, deps) {
        (Phase::Accept | Phase::Commit, _) => node_hash(id, TRIMMED, &[]),
        (_, Some(deps)) if !deps.is_empty() && depth < DEPTH_MAX => {
            let mut children: Vec<u64> = deps.iter().map(|&dep| below(dep, view, memo, depth + 1)).collect();
            children.sort_unstable();
            node_hash(id, INNER, &children)
        }
        _ => node_hash(id, END, &[]),
    };
    memo.insert(id, hash);
    hash
}
