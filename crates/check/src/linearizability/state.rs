//! A key's state in the model: absent, or a string built by a write and the appends after it.
//!
//! Why not a plain `String`: appends would copy the whole value each time, which is quadratic
//! on an append-heavy key. The state is a persistent list of pieces (the written value, then
//! each appended value) that configurations share, plus the length and a polynomial hash of
//! the whole string, so that appending costs one small allocation and most comparisons are
//! settled by length and hash. The hash only filters: equality is always confirmed on the
//! bytes, so a collision costs time, never a wrong verdict.

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
        let (mut hash, mut power) = (0, 1);
        for &byte in text.as_bytes() {
            hash = reduce(multiply(hash, BASE) + u64::from(byte));
            power = multiply(power, BASE);
        }
        Rc::new(Piece { text: text.into(), hash, power })
    }

    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// One link of a state's list: the whole string is `prefix` followed by `piece`.
#[derive(Debug)]
struct Node {
    length: usize,
    hash: u64,
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

/// What a key holds in one configuration: `None` when absent, else the chain of the string.
/// Cloning shares the pieces.
#[derive(Clone, Debug)]
pub(super) struct KeyState(Option<Rc<Node>>);

impl KeyState {
    /// A key never written.
    pub(super) const ABSENT: KeyState = KeyState(None);

    /// The state after writing `piece`.
    pub(super) fn written(piece: &Rc<Piece>) -> KeyState {
        let node = Node { length: piece.text.len(), hash: piece.hash, piece: piece.clone(), prefix: None };
        KeyState(Some(Rc::new(node)))
    }

    /// The state after appending `piece` to this one; absent counts as empty.
    pub(super) fn appended(&self, piece: &Rc<Piece>) -> KeyState {
        let Some(prefix) = &self.0 else { return KeyState::written(piece) };
        let node = Node {
            length: prefix.length + piece.text.len(),
            hash: reduce(multiply(prefix.hash, piece.power) + piece.hash),
            piece: piece.clone(),
            prefix: Some(prefix.clone()),
        };
        KeyState(Some(Rc::new(node)))
    }

    /// Whether a read returning `expected` (`None` = absent) is legal in this state.
    pub(super) fn matches(&self, expected: Option<&Piece>) -> bool {
        match (&self.0, expected) {
            (None, None) => true,
            (Some(node), Some(piece)) => {
                node.length == piece.text.len() && node.hash == piece.hash && node.ends_with_all(piece.bytes())
            }
            _ => false,
        }
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
            (Some(left), Some(right)) => Rc::ptr_eq(left, right) || nodes_equal(left, right),
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
        let ab = KeyState::ABSENT.appended(&a).appended(&b);
        assert_eq!(text(&ab).as_deref(), Some("ab"));
        assert!(ab.matches(Some(&Piece::new("ab"))));
        assert!(!ab.matches(Some(&Piece::new("ba"))));
        assert!(!ab.matches(None));
        assert!(KeyState::ABSENT.matches(None));
        assert!(!KeyState::ABSENT.matches(Some(&Piece::new(""))));
        let xyz = KeyState::written(&Piece::new("x")).appended(&Piece::new("yz"));
        assert!(xyz.matches(Some(&Piece::new("xyz"))));
    }

    #[test]
    fn equality_ignores_how_the_string_was_split() {
        // Goal: states are compared by content, not by the pieces that built them, and equal
        // states hash equally. Method: "abc" built three ways, and a same-length different string.
        let one = KeyState::written(&Piece::new("abc"));
        let two = KeyState::written(&Piece::new("a")).appended(&Piece::new("bc"));
        let three = KeyState::ABSENT.appended(&Piece::new("ab")).appended(&Piece::new("")).appended(&Piece::new("c"));
        assert_eq!(one, two);
        assert_eq!(two, three);
        let hash_of = |state: &KeyState| {
            let mut hasher = rustc_hash::FxHasher::default();
            state.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash_of(&one), hash_of(&three));
        assert_ne!(one, KeyState::written(&Piece::new("abd")));
        assert_ne!(one, KeyState::ABSENT);
        assert_ne!(KeyState::written(&Piece::new("")), KeyState::ABSENT);
    }

    #[test]
    fn long_chains_drop_without_overflow() {
        // Goal: a key appended to many times does not overflow the stack when dropped.
        // Method: 200,000 appends, then compare and drop.
        let piece = Piece::new("z");
        let mut state = KeyState::ABSENT;
        for _ in 0..200_000 {
            state = state.appended(&piece);
        }
        assert!(state.matches(Some(&Piece::new(&"z".repeat(200_000)))));
        drop(state);
    }
}
