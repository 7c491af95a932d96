//! Replica agreement: replicas apply the same writes to each key in the same order.
//!
//! State machine replication's safety property (Schneider, 1990): replicas that have applied
//! the same number of writes to a key must have applied the same writes in the same order. The
//! state machine summarizes each key as a [`KeyDigest`]: a version (how many writes) and a hash
//! chained over the writes' request ids. Equal versions with different chains mean two replicas
//! diverged; a key a replica never wrote counts as version 0 with chain 0. Once a run quiesces,
//! every replica must also have reached the same version of every key ([`check_converged`]).

use ordo_core::{Key, KeyDigest, NodeId};
use std::collections::{BTreeMap, BTreeSet};

/// A broken agreement property.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgreementViolation {
    /// Two replicas applied the same number of writes to a key, but not the same writes in
    /// the same order.
    #[error(
        "key \"{}\": replicas {first} and {second} both applied {version} writes, but different ones \
         or in a different order (chains {first_chain:#018x} and {second_chain:#018x})",
        key.escape_ascii()
    )]
    Diverged {
        /// The key.
        key: Key,
        /// One replica.
        first: NodeId,
        /// Another replica.
        second: NodeId,
        /// Their common version.
        version: u64,
        /// The first replica's chain.
        first_chain: u64,
        /// The second replica's chain.
        second_chain: u64,
    },
    /// After quiescence, two replicas applied different numbers of writes to a key.
    #[error(
        "key \"{}\": replica {first} is at version {first_version} (chain {first_chain:#018x}) but \
         replica {second} is at version {second_version} (chain {second_chain:#018x})",
        key.escape_ascii()
    )]
    NotConverged {
        /// The key.
        key: Key,
        /// One replica.
        first: NodeId,
        /// Its version.
        first_version: u64,
        /// Its chain.
        first_chain: u64,
        /// Another replica.
        second: NodeId,
        /// Its version.
        second_version: u64,
        /// Its chain.
        second_chain: u64,
    },
    /// A replica's digests list a key twice, so they cannot be compared.
    #[error("replica {replica} lists key \"{}\" more than once", key.escape_ascii())]
    DuplicateKey {
        /// The replica.
        replica: NodeId,
        /// The key.
        key: Key,
    },
}

/// One replica's version and chain of a key.
#[derive(Clone, Copy)]
struct Position {
    replica: NodeId,
    version: u64,
    chain: u64,
}

/// Checks that replicas at the same version of a key have the same chain.
pub fn check_agreement(replicas: &[(NodeId, Vec<KeyDigest>)]) -> Result<(), AgreementViolation> {
    for (key, positions) in positions_by_key(replicas)? {
        let mut first_at_version: BTreeMap<u64, Position> = BTreeMap::new();
        for position in positions {
            let first = *first_at_version.entry(position.version).or_insert(position);
            if first.chain != position.chain {
                return Err(AgreementViolation::Diverged {
                    key: key.clone(),
                    first: first.replica,
                    second: position.replica,
                    version: position.version,
                    first_chain: first.chain,
                    second_chain: position.chain,
                });
            }
        }
    }
    Ok(())
}

/// Checks agreement, and that every replica reached the same version of every key: what must
/// hold once a run has quiesced.
pub fn check_converged(replicas: &[(NodeId, Vec<KeyDigest>)]) -> Result<(), AgreementViolation> {
    check_agreement(replicas)?;
    for (key, positions) in positions_by_key(replicas)? {
        let Some((&first, others)) = positions.split_first() else { continue };
        if let Some(&second) = others.iter().find(|position| position.version != first.version) {
            return Err(AgreementViolation::NotConverged {
                key: key.clone(),
                first: first.replica,
                first_version: first.version,
                first_chain: first.chain,
                second: second.replica,
                second_version: second.version,
                second_chain: second.chain,
            });
        }
    }
    Ok(())
}

/// For every key any replica has, each replica's position in replica order (absent = 0, 0).
fn positions_by_key(
    replicas: &[(NodeId, Vec<KeyDigest>)],
) -> Result<BTreeMap<&Key, Vec<Position>>, AgreementViolation> {
    let mut digests_by_replica: Vec<BTreeMap<&Key, &KeyDigest>> = Vec::with_capacity(replicas.len());
    let mut keys: BTreeSet<&Key> = BTreeSet::new();
    for (replica, digests) in replicas {
        let mut by_key = BTreeMap::new();
        for digest in digests {
            if by_key.insert(&digest.key, digest).is_some() {
                return Err(AgreementViolation::DuplicateKey { replica: *replica, key: digest.key.clone() });
            }
            keys.insert(&digest.key);
        }
        digests_by_replica.push(by_key);
    }
    let positions = keys
        .into_iter()
        .map(|key| {
            let row = replicas.iter().zip(&digests_by_replica).map(|((replica, _), digests)| {
                let (version, chain) = digests.get(key).map_or((0, 0), |digest| (digest.version, digest.chain));
                Position { replica: *replica, version, chain }
            });
            (key, row.collect())
        })
        .collect();
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(key: &str, version: u64, chain: u64) -> KeyDigest {
        KeyDigest { key: Key::copy_from_slice(key.as_bytes()), version, chain }
    }

    #[test]
    fn replicas_at_different_versions_agree_if_chains_match_per_version() {
        // Goal: a lagging replica is not a violation, and identical replicas converge.
        // Method: two replicas at version 2 with the same chain, one at version 1, one without
        // the key; then three identical replicas.
        let replicas = vec![
            (NodeId(0), vec![digest("a", 2, 22), digest("b", 1, 11)]),
            (NodeId(1), vec![digest("a", 2, 22)]),
            (NodeId(2), vec![digest("a", 1, 7)]),
        ];
        assert_eq!(check_agreement(&replicas), Ok(()));
        assert!(matches!(check_converged(&replicas), Err(AgreementViolation::NotConverged { .. })));
        let same = vec![(NodeId(0), vec![digest("a", 3, 9)]), (NodeId(1), vec![digest("a", 3, 9)])];
        assert_eq!(check_converged(&same), Ok(()));
        assert_eq!(check_converged(&[]), Ok(()));
    }

    #[test]
    fn diverged_chains_are_reported() {
        // Goal: two replicas at the same version with different chains are caught, naming the
        // key, both replicas, the version and both chains. Method: version 2 with chains 5 and 6.
        let replicas = vec![
            (NodeId(0), vec![digest("k", 2, 5)]),
            (NodeId(1), vec![digest("k", 1, 4)]),
            (NodeId(3), vec![digest("k", 2, 6)]),
        ];
        let violation = check_agreement(&replicas).unwrap_err();
        assert_eq!(
            violation,
            AgreementViolation::Diverged {
                key: "k".into(),
                first: NodeId(0),
                second: NodeId(3),
                version: 2,
                first_chain: 5,
                second_chain: 6
            }
        );
        let text = violation.to_string();
        assert!(
            text.contains("\"k\"") && text.contains("n0") && text.contains("n3") && text.contains("2 writes"),
            "{text}"
        );
        assert_eq!(check_converged(&replicas), Err(violation));
    }

    #[test]
    fn absent_key_counts_as_version_zero() {
        // Goal: a key missing at a replica is version 0, chain 0. Method: a replica reporting
        // version 0 with a nonzero chain disagrees with one lacking the key; a replica lacking a
        // key others wrote is not converged.
        let replicas = vec![(NodeId(0), vec![digest("k", 0, 9)]), (NodeId(1), vec![])];
        assert!(matches!(check_agreement(&replicas), Err(AgreementViolation::Diverged { version: 0, .. })));
        let lagging = vec![(NodeId(0), vec![]), (NodeId(1), vec![digest("k", 1, 3)])];
        assert_eq!(check_agreement(&lagging), Ok(()));
        let Err(AgreementViolation::NotConverged { first, first_version, second, second_version, .. }) =
            check_converged(&lagging)
        else {
            panic!("a replica without the key has not converged");
        };
        assert_eq!((first, first_version, second, second_version), (NodeId(0), 0, NodeId(1), 1));
    }

    #[test]
    fn duplicate_keys_are_malformed() {
        // Goal: digests that list a key twice are rejected rather than half compared.
        // Method: one replica with two digests for "k".
        let replicas = vec![(NodeId(4), vec![digest("k", 1, 1), digest("k", 2, 2)])];
        let violation = check_agreement(&replicas).unwrap_err();
        assert_eq!(violation, AgreementViolation::DuplicateKey { replica: NodeId(4), key: "k".into() });
        assert!(violation.to_string().contains("more than once"));
    }
}
