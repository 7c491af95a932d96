//! When an optional (info or unfinished) operation stops mattering.
//!
//! An optional write or append may take effect at any time after its invocation, so without
//! more knowledge it would stay open to the end of the history, and every step of the search
//! would consider applying it: thousands of timed-out operations would make a long faulty run
//! unbearably slow. But the whole history is known in advance, so the checker can tell when the
//! last read that could observe the operation completes, and retire the operation then.
//!
//! Why retiring is sound: take a valid linearization that applies an optional operation O and
//! compare it with the same linearization without O. The two agree up to O; after it they may
//! differ until a write or a delete (which set the key whatever it held) or until they agree
//! again: call that stretch O's span. Updates in the span are legal either way, and reads
//! outside it see the same state. So dropping O keeps the linearization valid unless a read in
//! the span returns what it could not return without O, and the test below marks every such
//! read as one that "could observe" O. If O is applied after the last read that could observe
//! it completed, every read of its span is linearized after O, so completes later, so is not
//! such a read, and O can be dropped: retiring O then loses nothing.
//!
//! What reads in O's span return, by what O is (no assumption on the order of the stamps):
//!
//! - A write of `v` without expiry: the key holds `v` then appended values, and never expires
//!   (no append starts afresh, no sweep removes it).
//! - An append of `a` that starts afresh (absent or expired key): `a` then appended values,
//!   never expiring. One that extends a value keeps its expiry, so both runs hold the same
//!   expiry and differ only in the string: every expiry decision in the span is the same in
//!   both, a read returns a string with `a` among its pieces or `null` in both runs, and an
//!   append that starts afresh ends the span.
//! - A delete, a sweep that removes the key, or a write with an expiry: the key may be absent
//!   or expired, or restarted by appends: reads return `null` or appended values alone (and,
//!   for the write, also `v` then appended values). A sweep that removes nothing has no span.
//!
//! Which reads could observe O: a read's value is the last write's value (or nothing, if the
//! key was absent, expired or removed) followed by the values of the appends since, so a read
//! can observe an append of `a` only if its value splits into a write value or nothing, then
//! append values, with one of the pieces being that `a`; and a write of `v` only if its value is
//! `v` followed by append values. A delete, an expire or a write with an expiry is, on top of
//! that, observed by every read of `null` and every read whose value splits into append values
//! alone (conservatively: such a read need not have seen the key go). The checker tests exactly
//! these splits, using every write and append value of the key (which over-approximates the
//! operations that could really be there, so it never retires too early). Occurrences of values
//! are found with Aho-Corasick automata, in time linear in the text of the reads plus the
//! occurrences. A plain substring test would not do: with values like `.12` and `.123`, every
//! read holding `.123` would keep `.12` alive to the end.

use crate::history::{OpKind, OperationView, Outcome};

/// The last times reads could observe each optional operation of one key.
pub(super) struct Observers<'a> {
    /// Completion of the key's last ok read.
    last_read_ns: Option<u64>,
    /// Completion of the key's last ok read of `null` or of append values alone: the reads that
    /// could observe a delete, an expire or a write with an expiry.
    reset_observed_ns: Option<u64>,
    /// Distinct write values, sorted, and the last completion of a read that could observe each.
    write_values: Vec<&'a str>,
    write_observed_ns: Vec<Option<u64>>,
    /// The same for append values.
    append_values: Vec<&'a str>,
    append_observed_ns: Vec<Option<u64>>,
}

impl<'a> Observers<'a> {
    /// Indexes the key's relevant operations (no failed operations, only ok reads).
    pub(super) fn new(operations: &[&OperationView<'a>]) -> Self {
        let write_values = distinct_values(operations, OpKind::Write);
        let append_values = distinct_values(operations, OpKind::Append);
        let mut observers = Observers {
            last_read_ns: None,
            reset_observed_ns: None,
            write_observed_ns: vec![None; write_values.len()],
            append_observed_ns: vec![None; append_values.len()],
            write_values,
            append_values,
        };
        // Without appends a read observes exactly the write of its value: no automaton needed.
        let matchers = (!observers.append_values.is_empty())
            .then(|| (Matcher::new(&observers.write_values), Matcher::new(&observers.append_values)));
        for operation in operations {
            let (OpKind::Read, Outcome::Ok, Some(completion_ns)) =
                (operation.op, operation.outcome, operation.completion_ns)
            else {
                continue;
            };
            observers.last_read_ns = observers.last_read_ns.max(Some(completion_ns));
            let Some(text) = operation.value else {
                raise(&mut observers.reset_observed_ns, completion_ns);
                continue;
            };
            match &matchers {
                Some((writes, appends)) => observers.observe(text, completion_ns, writes, appends),
                None => {
                    if let Ok(pattern) = observers.write_values.binary_search(&text) {
                        raise(&mut observers.write_observed_ns[pattern], completion_ns);
                    }
                }
            }
        }
        observers
    }

    /// Records what a read returning `text` could have observed, on a key with appends.
    fn observe(&mut self, text: &str, completion_ns: u64, writes: &Matcher, appends: &Matcher) {
        let length = text.len();
        let bases = writes.prefixes(text);
        let mut pieces = Vec::new();
        appends.for_each_match(text, |pattern, start| {
            pieces.push((start, start + self.append_values[pattern].len(), pattern))
        });
        pieces.sort_unstable();
        // reachable[i]: text[..i] is a base followed by append values; finishing[i]: text[i..]
        // is append values. Absent is a base, so position 0 is reachable.
        let mut reachable = vec![false; length + 1];
        reachable[0] = true;
        for &pattern in &bases {
            reachable[self.write_values[pattern].len()] = true;
        }
        for &(start, end, _) in &pieces {
            reachable[end] |= reachable[start];
        }
        let mut finishing = vec![false; length + 1];
        finishing[length] = true;
        for &(start, end, _) in pieces.iter().rev() {
            finishing[start] |= finishing[end];
        }
        if finishing[0] {
            raise(&mut self.reset_observed_ns, completion_ns);
        }
        for pattern in bases {
            if finishing[self.write_values[pattern].len()] {
                raise(&mut self.write_observed_ns[pattern], completion_ns);
            }
        }
        for (start, end, pattern) in pieces {
            if reachable[start] && finishing[end] {
                raise(&mut self.append_observed_ns[pattern], completion_ns);
            }
        }
    }

    /// When the last read that could observe the optional `operation` completes; `None` if no
    /// read could.
    pub(super) fn last_observation_ns(&self, operation: &OperationView<'_>) -> Option<u64> {
        let may_remove = match operation.op {
            OpKind::Read => return None,
            OpKind::Expire | OpKind::Delete => return self.reset_observed_ns,
            OpKind::Write => operation.expires_ms.is_some(),
            OpKind::Append => false,
        };
        let by_value = self.value_observation_ns(operation);
        if may_remove { by_value.max(self.reset_observed_ns) } else { by_value }
    }

    /// [`Self::last_observation_ns`] for reads that show a write's or an append's value.
    fn value_observation_ns(&self, operation: &OperationView<'_>) -> Option<u64> {
        let value = operation.value?;
        let (values, observed_ns) = match operation.op {
            OpKind::Read | OpKind::Expire | OpKind::Delete => return None,
            // The automata do not report empty values, which every read could observe.
            _ if value.is_empty() => return self.last_read_ns,
            OpKind::Write => (&self.write_values, &self.write_observed_ns),
            OpKind::Append => (&self.append_values, &self.append_observed_ns),
        };
        let pattern = values.binary_search(&value).ok()?;
        observed_ns[pattern]
    }
}

fn distinct_values<'a>(operations: &[&OperationView<'a>], op: OpKind) -> Vec<&'a str> {
    let mut values: Vec<&str> =
        operations.iter().filter(|operation| operation.op == op).filter_map(|operation| operation.value).collect();
    values.sort_unstable();
    values.dedup();
    values
}

fn raise(slot: &mut Option<u64>, time_ns: u64) {
    *slot = (*slot).max(Some(time_ns));
}

/// An Aho-Corasick automaton: a trie of the patterns, where each node also knows the longest
/// proper suffix of its string that is a trie node (`fallback`) and the nearest such suffix
/// that ends a pattern (`output_link`).
struct Matcher {
    nodes: Vec<MatchNode>,
    pattern_lengths: Vec<usize>,
}

#[derive(Default)]
struct MatchNode {
    children: Vec<(u8, usize)>,
    fallback: usize,
    /// The pattern ending here (patterns are distinct, so at most one).
    output: Option<usize>,
    output_link: Option<usize>,
}

const ROOT: usize = 0;

impl Matcher {
    /// An automaton for the patterns; empty patterns are never reported.
    fn new(patterns: &[&str]) -> Self {
        let mut matcher = Matcher { nodes: vec![MatchNode::default()], pattern_lengths: Vec::new() };
        for (index, pattern) in patterns.iter().enumerate() {
            matcher.pattern_lengths.push(pattern.len());
            if !pattern.is_empty() {
                let node = matcher.insert(pattern.as_bytes());
                matcher.nodes[node].output = Some(index);
            }
        }
        matcher.link_fallbacks();
        matcher
    }

    fn child(&self, node: usize, byte: u8) -> Option<usize> {
        self.nodes[node].children.iter().find(|&&(label, _)| label == byte).map(|&(_, child)| child)
    }

    fn insert(&mut self, bytes: &[u8]) -> usize {
        let mut node = ROOT;
        for &byte in bytes {
            node = match self.child(node, byte) {
                Some(child) => child,
                None => {
                    self.nodes.push(MatchNode::default());
                    let child = self.nodes.len() - 1;
                    self.nodes[node].children.push((byte, child));
                    child
                }
            };
        }
        node
    }

    /// Breadth first, so that a node's fallback is complete before its children need it.
    fn link_fallbacks(&mut self) {
        let mut queue: Vec<usize> = self.nodes[ROOT].children.iter().map(|&(_, child)| child).collect();
        let mut head = 0;
        while let Some(&node) = queue.get(head) {
            head += 1;
            for index in 0..self.nodes[node].children.len() {
                let (byte, child) = self.nodes[node].children[index];
                let fallback = if node == ROOT { ROOT } else { self.next(self.nodes[node].fallback, byte) };
                let fallback_node = &self.nodes[fallback];
                let output_link =
                    if fallback_node.output.is_some() { Some(fallback) } else { fallback_node.output_link };
                self.nodes[child].fallback = fallback;
                self.nodes[child].output_link = output_link;
                queue.push(child);
            }
        }
    }

    /// The node reached from `node` by `byte`, following fallbacks when there is no child.
    fn next(&self, mut node: usize, byte: u8) -> usize {
        loop {
            if let Some(child) = self.child(node, byte) {
                return child;
            }
            if node == ROOT {
                return ROOT;
            }
            node = self.nodes[node].fallback;
        }
    }

    /// Calls `found(pattern, start)` for every occurrence of a non-empty pattern in `text`.
    fn for_each_match(&self, text: &str, mut found: impl FnMut(usize, usize)) {
        let mut node = ROOT;
        for (position, &byte) in text.as_bytes().iter().enumerate() {
            node = self.next(node, byte);
            let mut ending = if self.nodes[node].output.is_some() { Some(node) } else { self.nodes[node].output_link };
            while let Some(matched) = ending {
                let pattern = self.nodes[matched].output.expect("output links lead to pattern ends");
                found(pattern, position + 1 - self.pattern_lengths[pattern]);
                ending = self.nodes[matched].output_link;
            }
        }
    }

    /// The non-empty patterns `text` starts with: a walk down the trie, no fallbacks.
    fn prefixes(&self, text: &str) -> Vec<usize> {
        let mut found = Vec::new();
        let mut node = ROOT;
        for &byte in text.as_bytes() {
            let Some(child) = self.child(node, byte) else { break };
            node = child;
            found.extend(self.nodes[node].output);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(patterns: &[&str], text: &str) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        Matcher::new(patterns).for_each_match(text, |pattern, start| found.push((pattern, start)));
        found.sort_unstable();
        found
    }

    #[test]
    fn matcher_finds_every_occurrence() {
        // Goal: the automaton reports each occurrence with its start, overlapping ones
        // included. Method: compare with a naive search on texts chosen to need fallbacks.
        let patterns = ["he", "she", "his", "hers", "", "s"];
        for text in ["ushers", "hishe", "sssh", "", "hehehe"] {
            let mut naive = Vec::new();
            for (index, pattern) in patterns.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
                for start in 0..text.len() {
                    if text[start..].starts_with(pattern) {
                        naive.push((index, start));
                    }
                }
            }
            naive.sort_unstable();
            assert_eq!(matches(&patterns, text), naive, "{text}");
            let starts: Vec<usize> =
                naive.iter().filter(|&&(_, start)| start == 0).map(|&(pattern, _)| pattern).collect();
            let mut prefixes = Matcher::new(&patterns).prefixes(text);
            prefixes.sort_unstable();
            assert_eq!(prefixes, starts, "{text}");
        }
    }

    fn operation(op: OpKind, value: Option<&str>, outcome: Outcome, completion_ns: u64) -> OperationView<'_> {
        OperationView {
            client: 1,
            id: None,
            op,
            key: "k",
            value,
            at_ms: None,
            expires_ms: None,
            invoke_ns: 0,
            completion_ns: Some(completion_ns),
            outcome,
        }
    }

    #[test]
    fn last_observations_follow_the_model() {
        // Goal: an optional write is observable by reads made of its value then append values,
        // an optional append by reads where it is one of the pieces. Method: one key with
        // appends, reads that do and do not split into the key's values, and a key without
        // appends, where only equal values observe a write.
        let write = operation(OpKind::Write, Some("ab"), Outcome::Info, 1);
        let append = operation(OpKind::Append, Some("cd"), Outcome::Info, 1);
        let empty = operation(OpKind::Append, Some(""), Outcome::Info, 1);
        let reads = [
            operation(OpKind::Read, Some("abcd"), Outcome::Ok, 10),
            operation(OpKind::Read, Some("xcdab"), Outcome::Ok, 20),
            operation(OpKind::Read, None, Outcome::Ok, 30),
        ];
        let all: Vec<&OperationView> = [&write, &append, &empty].into_iter().chain(&reads).collect();
        let observers = Observers::new(&all);
        assert_eq!(observers.last_observation_ns(&write), Some(10));
        assert_eq!(observers.last_observation_ns(&append), Some(10), "\"xcdab\" is not made of the key's values");
        assert_eq!(observers.last_observation_ns(&empty), Some(30));
        let never = operation(OpKind::Write, Some("zz"), Outcome::Info, 1);
        assert_eq!(observers.last_observation_ns(&never), None);

        let plain = [&write, &reads[0], &reads[1]];
        let observers = Observers::new(&plain);
        assert_eq!(observers.last_observation_ns(&write), None, "no read returns exactly \"ab\"");
    }

    #[test]
    fn values_inside_other_values_are_not_observed() {
        // Goal: an append whose value is a prefix of another append's value is not kept alive by
        // reads holding only the longer one. Method: appends ".12" and ".123", a read of
        // "w.123" (observes ".123" only) and a later one of "w.12.123" (observes both).
        let base = operation(OpKind::Write, Some("w"), Outcome::Ok, 1);
        let short = operation(OpKind::Append, Some(".12"), Outcome::Info, 1);
        let long = operation(OpKind::Append, Some(".123"), Outcome::Info, 1);
        let first = operation(OpKind::Read, Some("w.123"), Outcome::Ok, 10);
        let second = operation(OpKind::Read, Some("w.12.123"), Outcome::Ok, 20);
        let observers = Observers::new(&[&base, &short, &long, &first]);
        assert_eq!(observers.last_observation_ns(&short), None);
        assert_eq!(observers.last_observation_ns(&long), Some(10));
        let observers = Observers::new(&[&base, &short, &long, &first, &second]);
        assert_eq!(observers.last_observation_ns(&short), Some(20));
        assert_eq!(observers.last_observation_ns(&long), Some(20));
    }

    #[test]
    fn removals_are_observed_by_null_and_appended_only_reads() {
        // Goal: a delete, a sweep and a write with an expiry are observable by every read of
        // null and every read made of append values alone, on top of the value rule; a write
        // without expiry and an append keep the value rule alone. Method: one key's reads of
        // "abcd" (a write then an append), null, "xy" (made of nothing known), then "cd" (an
        // append alone), with the last observation of each optional update.
        let delete = operation(OpKind::Delete, None, Outcome::Info, 1);
        let sweep = OperationView { at_ms: Some(5), ..operation(OpKind::Expire, None, Outcome::Info, 1) };
        let expiring = OperationView { expires_ms: Some(9), ..operation(OpKind::Write, Some("ab"), Outcome::Info, 1) };
        let plain = operation(OpKind::Write, Some("ab"), Outcome::Info, 1);
        let append = operation(OpKind::Append, Some("cd"), Outcome::Info, 1);
        let reads = [
            operation(OpKind::Read, Some("abcd"), Outcome::Ok, 10),
            operation(OpKind::Read, None, Outcome::Ok, 20),
            operation(OpKind::Read, Some("xy"), Outcome::Ok, 40),
            operation(OpKind::Read, Some("cd"), Outcome::Ok, 30),
        ];
        let updates = [&delete, &sweep, &expiring, &plain, &append];
        let last = |reads: &[OperationView<'_>]| {
            let all: Vec<&OperationView> = updates.into_iter().chain(reads).collect();
            let observers = Observers::new(&all);
            updates.map(|update| observers.last_observation_ns(update))
        };
        assert_eq!(last(&reads[..3]), [Some(20), Some(20), Some(20), Some(10), Some(10)]);
        assert_eq!(last(&reads), [Some(30), Some(30), Some(30), Some(10), Some(30)]);
        assert_eq!(last(&reads[2..3]), [None; 5], "\"xy\" observes none of them");
    }
}
