//! A key's state in the model: absent, or a string built by a write and the appends after it,
//! with the stamp after which it expires (if the write set one; appends keep it).
//!
//! Why not a plain `String`: appends would copy the whole value each time, which is quadratic
//! on an append-heavy key. The state is a persistent list of pieces (the written value, then
//! each appended value) that configurations share, plus the length and a polynomial hash of
//! the whole string, so that appending costs one small allocation and most comparisons are
//! settled by length and hash. The hash only filters: equality is always confirmed on the
//! bytes, so a collision costs time, never a wrong verdict.
//!
//! The expiry is kept in the head node of the chain rather than next to it: no operation changes
//! a key's expiry without also making a new head (a write, or an append), so every state still
//! fits in one pointer, and histories without expiry pay for it only in node size.

use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// The polynomial hash works modulo this Mersenne prime, 2^61 - 1.
const MODULUS: u64 = (1 << 61) - 1;
/// The base of the polynomial hash: any number well inside the field works.
const BASE: u64 = 0x1f2e_3d4c_5b6a_7988 % MODULUS;

fn reduce(value: u64) -> u64 {
    let folded = (value & MODULUS) + (value >> 61);
    if folded >= MODULUS { folded - MODULUS } else { folded }
}

fn multiply(left: u64, right: u64) -> u64 {
    let product = u128::from(left) * u128::from(right);
    let low = (product as u64) & MODULUS;
    let high = (product >> 61) as u64;
    reduce(low + high)
}

/// The polynomial hash of `text` and `BASE` to the power of its length: what a state holding
/// `text` hashes to, and what appending `text` to another string needs.
pub(super) fn text_hash(text: &str) -> (u64, u64) {
    let (mut hash, mut power) = (0, 1);
    for &byte in text.as_bytes() {
        hash = reduce(multiply(hash, BASE) + u64::from(byte));
        power = multiply(power, BASE);
    }
    (hash, power)
}

/// The hash of a string hashing `prefix` followed by one hashing `suffix` with `suffix_power`.
pub(super) fn concatenated_hash(prefix: u64, suffix: u64, suffix_power: u64) -> u64 {
    reduce(multiply(prefix, suffix_power) + suffix)
}

/// A value as written, appended or read, with its hash precomputed once per operation.
#[derive(Debug)]
pub(super) struct Piece {
    text: Box<str>,
    hash: u64,
    /// BASE to the power of the length, to append this piece's hash to another's.
    power: u64,
}

impl Piece {
    /// Prepares `text` for the model.
    pub(super) fn new(text: &str) -> Rc<Piece> {
        let (hash, power) = text_hash(text);
        Rc::new(Piece { text: text.into(), hash, power })
    }

    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// The expiry of a state that never expires. No stamp is greater than it, so a state with this
/// expiry behaves exactly as one without; storing it instead of an `Option` keeps a node at the
/// size it had before expiry was modelled, one allocation size class smaller.
const NEVER: u64 = u64::MAX;

/// One link of a state's list: the whole string is `prefix` followed by `piece`. `expires_ms`
/// belongs to the state this node heads; a prefix's own expiry plays no part in it.
#[derive(Debug)]
struct Node {
    length: usize,
    hash: u64,
    /// `NEVER` when the state does not expire.
    expires_ms: u64,
    piece: Rc<Piece>,
    prefix: Option<Rc<Node>>,
}

impl Drop for Node {
    /// Unlinks the chain iteratively: the default recursive drop would overflow the stack on a
    /// key appended to a hundred thousand times.
    fn drop(&mut self) {
        let mut next = self.prefix.take();
        while let Some(node) = next {
            match Rc::try_unwrap(node) {
                Ok(mut owned) => next = owned.prefix.take(),
                Err(_) => break,
            }
        }
    }
}

impl Node {
    /// The pieces from last to first.
    fn pieces(&self) -> impl Iterator<Item = &Piece> {
        std::iter::successors(Some(self), |node| node.prefix.as_deref()).map(|node| &*node.piece)
    }

    /// The whole string; only for the rare comparisons hashes cannot settle, and for reports.
    fn collect(&self) -> Vec<u8> {
        let mut pieces: Vec<&[u8]> = self.pieces().map(Piece::bytes).collect();
        pieces.reverse();
        pieces.concat()
    }

    /// Whether the string equals `expected`, given equal lengths: walks the pieces from the end.
    fn ends_with_all(&self, expected: &[u8]) -> bool {
        let mut end = expected.len();
        for piece in self.pieces() {
            let start = end - piece.bytes().len();
            if &expected[start..end] != piece.bytes() {
                return false;
            }
            end = start;
        }
        end == 0
    }
}

/// What a key holds in one configuration: `None` when absent, else the chain of the string and
/// its expiry. Cloning shares the pieces.
#[derive(Clone, Debug)]
pub(super) struct KeyState(Option<Rc<Node>>);

impl KeyState {
    /// A key never written.
    pub(super) const ABSENT: KeyState = KeyState(None);

    /// The state after writing `piece`, expiring after `expires_ms` if given.
    pub(super) fn written(piece: &Rc<Piece>, expires_ms: Option<u64>) -> KeyState {
        let expires_ms = expires_ms.unwrap_or(NEVER);
        let node = Node { length: piece.text.len(), hash: piece.hash, expires_ms, piece: piece.clone(), prefix: None };
        KeyState(Some(Rc::new(node)))
    }

    /// Whether the key has expired for an operation stamped `at_ms`: strictly after its expiry,
    /// as in Redis. An operation without a stamp sees nothing expired.
    pub(super) fn expired_at(&self, at_ms: Option<u64>) -> bool {
        match (&self.0, at_ms) {
            (Some(node), Some(at_ms)) => at_ms > node.expires_ms,
            _ => false,
        }
    }

    /// The state after appending `piece` at `at_ms`: an absent or expired key counts as empty
    /// and the result never expires; otherwise the expiry is kept.
    pub(super) fn appended(&self, piece: &Rc<Piece>, at_ms: Option<u64>) -> KeyState {
        let Some(prefix) = self.0.as_ref().filter(|_| !self.expired_at(at_ms)) else {
            return KeyState::written(piece, None);
        };
        let node = Node {
            length: prefix.length + piece.text.len(),
            hash: concatenated_hash(prefix.hash, piece.hash, piece.power),
            expires_ms: prefix.expires_ms,
            piece: piece.clone(),
            prefix: Some(prefix.clone()),
        };
        KeyState(Some(Rc::new(node)))
    }

    /// The state after the store's sweep at `at_ms`: absent if expired by then, else unchanged.
    pub(super) fn swept(&self, at_ms: Option<u64>) -> KeyState {
        if self.expired_at(at_ms) { KeyState::ABSENT } else { self.clone() }
    }

    /// Whether a read stamped `at_ms` returning `expected` (`None` = absent) is legal in this
    /// state: an expired key reads as absent.
    pub(super) fn matches(&self, expected: Option<&Piece>, at_ms: Option<u64>) -> bool {
        if self.expired_at(at_ms) {
            return expected.is_none();
        }
        self.holds(expected)
    }

    /// Whether the string is `expected` (`None` = absent), whatever the expiry.
    fn holds(&self, expected: Option<&Piece>) -> bool {
        match (&self.0, expected) {
            (None, None) => true,
            (Some(node), Some(piece)) => {
                node.length == piece.text.len() && node.hash == piece.hash && node.ends_with_all(piece.bytes())
            }
            _ => false,
        }
    }

    /// The stamp after which the state expires, if any.
    pub(super) fn expires_ms(&self) -> Option<u64> {
        self.0.as_ref().map(|node| node.expires_ms).filter(|&expires_ms| expires_ms != NEVER)
    }

    /// The state as a string, for reports (`None` = absent).
    pub(super) fn to_report(&self) -> Option<String> {
        self.0.as_ref().map(|node| String::from_utf8_lossy(&node.collect()).into_owned())
    }
}

impl PartialEq for KeyState {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(left), Some(right)) => {
                Rc::ptr_eq(left, right) || (left.expires_ms == right.expires_ms && nodes_equal(left, right))
            }
            _ => false,
        }
    }
}

impl Eq for KeyState {}

/// Whether two chains spell the same string: length and hash first, then piece by piece while
/// the piece boundaries line up (sharing makes that the usual case), then the bytes.
fn nodes_equal(left: &Node, right: &Node) -> bool {
    if left.length != right.length || left.hash != right.hash {
        return false;
    }
    let (mut left, mut right) = (left, right);
    loop {
        if std::ptr::eq(left, right) {
            return true;
        }
        if left.piece.text.len() != right.piece.text.len() {
            return left.collect() == right.collect();
        }
        if !Rc::ptr_eq(&left.piece, &right.piece) && left.piece.text != right.piece.text {
            return false;
        }
        match (left.prefix.as_deref(), right.prefix.as_deref()) {
            (None, None) => return true,
            (Some(next_left), Some(next_right)) => (left, right) = (next_left, next_right),
            // Equal lengths so far, yet one chain ends first: the other holds empty pieces.
            _ => return left.collect() == right.collect(),
        }
    }
}

impl Hash for KeyState {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.0 {
            None => state.write_u8(0),
            Some(node) => {
                state.write_u8(1);
                state.write_usize(node.length);
                state.write_u64(node.hash);
                // Only an expiring state hashes its expiry, so states without one hash as before.
                if node.expires_ms != NEVER {
                    state.write_u64(node.expires_ms);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(state: &KeyState) -> Option<String> {
        state.to_report()
    }

    #[test]
    fn appends_build_the_concatenation() {
        // Goal: writes and appends give the strings the model defines. Method: build "ab" from
        // absent, and "xyz" from a write, then compare with reads.
        let (a, b) = (Piece::new("a"), Piece::new("b"));
        let ab = KeyState::ABSENT.appended(&a, None).appended(&b, None);
        assert_eq!(text(&ab).as_deref(), Some("ab"));
        assert!(ab.matches(Some(&Piece::new("ab")), None));
        assert!(!ab.matches(Some(&Piece::new("ba")), None));
        assert!(!ab.matches(None, None));
        assert!(KeyState::ABSENT.matches(None, None));
        assert!(!KeyState::ABSENT.matches(Some(&Piece::new("")), None));
        let xyz = KeyState::written(&Piece::new("x"), None).appended(&Piece::new("yz"), None);
        assert!(xyz.matches(Some(&Piece::new("xyz")), None));
    }

    #[test]
    fn equality_ignores_how_the_string_was_split() {
        // Goal: states are compared by content, not by the pieces that built them, and equal
        // states hash equally. Method: "abc" built three ways, and a same-length different string.
        let one = KeyState::written(&Piece::new("abc"), None);
        let two = KeyState::written(&Piece::new("a"), None).appended(&Piece::new("bc"), None);
        let three = KeyState::ABSENT
            .appended(&Piece::new("ab"), None)
            .appended(&Piece::new(""), None)
            .appended(&Piece::new("c"), None);
        assert_eq!(one, two);
        assert_eq!(two, three);
        let hash_of = |state: &KeyState| {
            let mut hasher = rustc_hash::FxHasher::default();
            state.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash_of(&one), hash_of(&three));
        assert_ne!(one, KeyState::written(&Piece::new("abd"), None));
        assert_ne!(one, KeyState::ABSENT);
        assert_ne!(KeyState::written(&Piece::new(""), None), KeyState::ABSENT);
    }

    #[test]
    fn long_chains_drop_without_overflow() {
        // Goal: a key appended to many times does not overflow the stack when dropped.
        // Method: 200,000 appends, then compare and drop.
        let piece = Piece::new("z");
        let mut state = KeyState::ABSENT;
        for _ in 0..200_000 {
            state = state.appended(&piece, None);
        }
        assert!(state.matches(Some(&Piece::new(&"z".repeat(200_000))), None));
        drop(state);
    }

    #[test]
    fn expiry_follows_the_model() {
        // Goal: a key expires strictly after its stamp, only for stamped operations; appends keep
        // the expiry or, on an expired key, start afresh without one; a sweep removes only an
        // expired key; equal strings with other expiries are other states. Method: one key
        // written with expiry 10, probed at 10, 11 and without a stamp.
        let (v, a) = (Piece::new("v"), Piece::new("a"));
        let state = KeyState::written(&v, Some(10));
        assert!(state.matches(Some(&v), Some(10)) && state.matches(Some(&v), None));
        assert!(state.matches(None, Some(11)) && !state.matches(Some(&v), Some(11)));
        let kept = state.appended(&a, Some(10));
        assert!(kept.matches(Some(&Piece::new("va")), Some(5)));
        assert_eq!(kept.expires_ms(), Some(10));
        let fresh = state.appended(&a, Some(11));
        assert!(fresh.matches(Some(&a), Some(1_000)));
        assert_eq!(fresh.expires_ms(), None);
        assert_eq!(state.swept(Some(10)), state);
        assert_eq!(state.swept(None), state);
        assert_eq!(state.swept(Some(11)), KeyState::ABSENT);
        assert_ne!(state, KeyState::written(&v, None));
        assert_ne!(state, KeyState::written(&v, Some(11)));
        assert_eq!(KeyState::written(&v, Some(u64::MAX)), KeyState::written(&v, None), "u64::MAX never passes");
        assert_eq!(state, KeyState::written(&Piece::new("v"), Some(10)));
    }
}
