//! The list commands ([`ListOp`]) on a `VecDeque`, with Redis' answers.

use super::KvStore;
use super::collections::span;
use crate::command::{CommandResult, Key, LPOS_RANK_ZERO, ListEnd, ListOp, Value};
use crate::ids::RequestId;
use std::collections::VecDeque;

type List = VecDeque<Value>;

fn integer(n: usize) -> CommandResult {
    CommandResult::Integer(n as i64)
}

fn error(text: &str) -> CommandResult {
    CommandResult::Error(text.into())
}

impl KvStore {
    /// The list at `key` (`None`: absent), or WRONGTYPE.
    fn list(&self, key: &Key) -> Result<Option<&List>, CommandResult> {
        self.read::<List>(key)
    }

    /// Runs a list command on the list at `key`.
    pub(super) fn execute_list(
        &mut self,
        request: RequestId,
        key: &Key,
        op: &ListOp,
    ) -> Result<CommandResult, CommandResult> {
        match op {
            ListOp::Push { existing_only: true, .. } if self.list(key)?.is_none() => Ok(integer(0)),
            ListOp::Push { end, values, .. } => self.change(request, key, |list: &mut List| {
                values.iter().for_each(|value| push(list, *end, value.clone()));
                (integer(list.len()), !values.is_empty())
            }),
            ListOp::Pop { end, count } => self.change(request, key, |list: &mut List| pop(list, *end, *count)),
            ListOp::Range { start, stop } => {
                let list = self.list(key)?;
                let range = list.and_then(|list| Some((list, span(list.len(), *start, *stop)?)));
                let values = range.into_iter().flat_map(|(list, range)| list.range(range).cloned().map(Some));
                Ok(CommandResult::Values(values.collect()))
            }
            ListOp::Len => Ok(integer(self.list(key)?.map_or(0, List::len))),
            ListOp::Index(index) => {
                let value = self.list(key)?.and_then(|list| Some(list[position(list.len(), *index)?].clone()));
                Ok(value.map_or(CommandResult::Nil, CommandResult::Value))
            }
            ListOp::Set { .. } if self.list(key)?.is_none() => Err(error("ERR no such key")),
            ListOp::Set { index, value } => {
                self.change(request, key, |list: &mut List| match position(list.len(), *index) {
                    Some(at) => {
                        list[at] = value.clone();
                        (CommandResult::Ok, true)
                    }
                    None => (error("ERR index out of range"), false),
                })
            }
            ListOp::Remove { count, value } => self.change(request, key, |list: &mut List| {
                let removed = remove(list, value, *count);
                (integer(removed), removed > 0)
            }),
            ListOp::Trim { start, stop } => self.change(request, key, |list: &mut List| {
                let before = list.len();
                trim(list, *start, *stop);
                (CommandResult::Ok, list.len() < before)
            }),
            ListOp::Insert { .. } if self.list(key)?.is_none() => Ok(integer(0)),
            ListOp::Insert { after, pivot, value } => {
                self.change(request, key, |list: &mut List| match list.iter().position(|v| v == pivot) {
                    Some(at) => {
                        list.insert(at + usize::from(*after), value.clone());
                        (integer(list.len()), true)
                    }
                    None => (CommandResult::Integer(-1), false),
                })
            }
            ListOp::Position { value, rank, count, max_len } => {
                let empty = List::new();
                Ok(find(self.list(key)?.unwrap_or(&empty), value, *rank, *count, *max_len))
            }
        }
    }
}

fn push(list: &mut List, end: ListEnd, value: Value) {
    match end {
        ListEnd::Left => list.push_front(value),
        ListEnd::Right => list.push_back(value),
    }
}

/// LPOP, RPOP: Nil for an empty (that is, absent) list whatever the count.
fn pop(list: &mut List, end: ListEnd, count: Option<u64>) -> (CommandResult, bool) {
    if list.is_empty() {
        return (CommandResult::Nil, false);
    }
    let take = |list: &mut List| match end {
        ListEnd::Left => list.pop_front(),
        ListEnd::Right => list.pop_back(),
    };
    match count {
        None => (take(list).map_or(CommandResult::Nil, CommandResult::Value), true),
        Some(count) => {
            let count = usize::try_from(count).unwrap_or(usize::MAX).min(list.len());
            let popped: Vec<Option<Value>> = (0..count).map(|_| take(list)).collect();
            (CommandResult::Values(popped), count > 0)
        }
    }
}

/// The position of LINDEX's and LSET's `index` in a list of `len` values, if it is inside.
fn position(len: usize, index: i64) -> Option<usize> {
    let index = if index < 0 { len as i64 + index } else { index };
    usize::try_from(index).ok().filter(|&at| at < len)
}

/// LREM: removes up to `|count|` values equal to `value` (all for 0), from the tail when
/// `count` is negative; returns how many.
fn remove(list: &mut List, value: &Value, count: i64) -> usize {
    let limit = if count == 0 { usize::MAX } else { usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX) };
    let mut removed = 0;
    let mut keep = |v: &Value| {
        let drop = removed < limit && v == value;
        removed += usize::from(drop);
        !drop
    };
    if count >= 0 {
        list.retain(|v| keep(v));
    } else {
        // From the tail: the same pass over the reversed list.
        list.make_contiguous().reverse();
        list.retain(|v| keep(v));
        list.make_contiguous().reverse();
    }
    removed
}

/// LTRIM: keeps the values from `start` to `stop`, or none when that range is empty.
fn trim(list: &mut List, start: i64, stop: i64) {
    match span(list.len(), start, stop) {
        Some(kept) => {
            list.truncate(kept.end() + 1);
            list.drain(..*kept.start());
        }
        None => list.clear(),
    }
}

/// LPOS: the positions of `value`, searched from the head (or the tail for a negative rank),
/// skipping the first `|rank| - 1` matches and comparing at most `max_len` values.
fn find(list: &List, value: &Value, rank: i64, count: Option<u64>, max_len: u64) -> CommandResult {
    if rank == 0 {
        // The gateway refuses it; a command from elsewhere gets Redis' answer, not a panic.
        return error(LPOS_RANK_ZERO);
    }
    let len = list.len();
    let compared = if max_len == 0 { len } else { usize::try_from(max_len).unwrap_or(usize::MAX).min(len) };
    let at = |step: usize| if rank > 0 { step } else { len - 1 - step };
    let skipped = usize::try_from(rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
    let wanted = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let found = (0..compared).map(at).filter(|&i| list[i] == *value).skip(skipped).take(wanted);
    match count {
        None => found.map(integer).next().unwrap_or(CommandResult::Nil),
        Some(_) => CommandResult::Values(found.map(|i| Some(Value::from(i.to_string()))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::kv::tests_collections::{Store, is_error, values};

    fn list(op: ListOp) -> Command {
        Command::List { key: "l".into(), op }
    }

    fn push(end: ListEnd, items: &[&str]) -> Command {
        let values = items.iter().map(|v| Value::from(v.to_string())).collect();
        list(ListOp::Push { end, values, existing_only: false })
    }

    fn pop(end: ListEnd, count: Option<u64>) -> Command {
        list(ListOp::Pop { end, count })
    }

    #[test]
    fn lists_answer_as_redis() {
        // Goal: the list commands give redis-server 7.0.15's answers, edge cases included (each
        // line was run against it). Method: one list built up and taken apart.
        let mut s = Store::new();
        assert_eq!(s.run(pop(ListEnd::Left, None)), CommandResult::Nil);
        assert_eq!(s.run(pop(ListEnd::Left, Some(2))), CommandResult::Nil, "a null array for an absent list");
        assert_eq!(s.run(push(ListEnd::Right, &["a", "b", "c"])), CommandResult::Integer(3));
        assert_eq!(s.run(pop(ListEnd::Left, Some(0))), values(&[]));
        assert_eq!(s.run(pop(ListEnd::Left, Some(5))), values(&["a", "b", "c"]));
        assert!(!s.kv.exists(&"l".into()), "an emptied list is deleted");
        let pushx = list(ListOp::Push { end: ListEnd::Left, values: vec!["a".into()], existing_only: true });
        assert_eq!(s.run(pushx.clone()), CommandResult::Integer(0));
        assert_eq!(s.run(list(ListOp::Len)), CommandResult::Integer(0));
        assert_eq!(s.run(list(ListOp::Range { start: 0, stop: -1 })), values(&[]));
        assert_eq!(s.run(list(ListOp::Index(0))), CommandResult::Nil);
        let set = |index, value: &str| list(ListOp::Set { index, value: value.to_string().into() });
        assert!(is_error(&s.run(set(0, "a")), "ERR no such key"));
        assert_eq!(s.run(push(ListEnd::Left, &["c", "b", "a"])), CommandResult::Integer(3), "each pushed at the head");
        assert_eq!(s.run(pushx), CommandResult::Integer(4));
        assert_eq!(s.run(pop(ListEnd::Left, None)), CommandResult::Value("a".into()));
        assert!(is_error(&s.run(set(5, "a")), "ERR index out of range"));
        assert_eq!(s.run(set(-1, "z")), CommandResult::Ok);
        assert_eq!(s.run(list(ListOp::Range { start: 0, stop: -1 })), values(&["a", "b", "z"]));
        assert_eq!(s.run(list(ListOp::Remove { count: 0, value: "zz".into() })), CommandResult::Integer(0));
        let insert =
            |after, pivot: &str| list(ListOp::Insert { after, pivot: pivot.to_string().into(), value: "b".into() });
        assert_eq!(s.run(insert(false, "zz")), CommandResult::Integer(-1));
        assert_eq!(s.run(insert(true, "a")), CommandResult::Integer(4));
        assert_eq!(s.run(list(ListOp::Range { start: -100, stop: 100 })), values(&["a", "b", "b", "z"]));
        assert_eq!(s.run(list(ListOp::Range { start: 2, stop: 1 })), values(&[]));
        assert_eq!(s.run(list(ListOp::Index(-1))), CommandResult::Value("z".into()));
        assert_eq!(s.run(list(ListOp::Trim { start: 1, stop: -2 })), CommandResult::Ok);
        assert_eq!(s.run(list(ListOp::Range { start: 0, stop: -1 })), values(&["b", "b"]));
        assert_eq!(s.run(list(ListOp::Trim { start: 5, stop: 10 })), CommandResult::Ok);
        assert!(!s.kv.exists(&"l".into()), "trimmed to nothing, deleted");
        let absent_insert = Command::List {
            key: "none".into(),
            op: ListOp::Insert { after: false, pivot: "a".into(), value: "b".into() },
        };
        assert_eq!(s.run(absent_insert), CommandResult::Integer(0));
    }

    #[test]
    fn lrem_and_lpos_count_from_either_end() {
        // Goal: LREM's and LPOS's signs and limits as redis-server 7.0.15 applies them, on its
        // own example list a b c a b c a.
        let mut s = Store::new();
        s.run(push(ListEnd::Right, &["a", "b", "c", "a", "b", "c", "a"]));
        let lpos = |rank, count, max_len| list(ListOp::Position { value: "a".into(), rank, count, max_len });
        assert_eq!(s.run(lpos(1, None, 0)), CommandResult::Integer(0));
        assert_eq!(s.run(lpos(2, None, 0)), CommandResult::Integer(3));
        assert_eq!(s.run(lpos(-1, None, 0)), CommandResult::Integer(6));
        assert_eq!(s.run(lpos(1, Some(0), 0)), values(&["0", "3", "6"]));
        assert_eq!(s.run(lpos(1, Some(2), 0)), values(&["0", "3"]));
        assert_eq!(s.run(lpos(-1, Some(2), 0)), values(&["6", "3"]));
        assert_eq!(s.run(lpos(1, Some(0), 3)), values(&["0"]));
        assert_eq!(s.run(lpos(4, None, 0)), CommandResult::Nil);
        assert!(is_error(&s.run(lpos(0, None, 0)), "ERR RANK can't be zero"));
        let absent = Command::List {
            key: "none".into(),
            op: ListOp::Position { value: "a".into(), rank: 1, count: Some(1), max_len: 0 },
        };
        assert_eq!(s.run(absent), values(&[]));
        assert_eq!(s.run(list(ListOp::Remove { count: -2, value: "a".into() })), CommandResult::Integer(2));
        assert_eq!(s.run(list(ListOp::Range { start: 0, stop: -1 })), values(&["a", "b", "c", "b", "c"]));
        assert_eq!(s.run(list(ListOp::Remove { count: 1, value: "b".into() })), CommandResult::Integer(1));
        assert_eq!(s.run(list(ListOp::Remove { count: 0, value: "c".into() })), CommandResult::Integer(2));
        assert_eq!(s.run(list(ListOp::Range { start: 0, stop: -1 })), values(&["a", "b"]));
    }

    #[test]
    fn list_versions_move_only_on_change() {
        // Goal: WATCH sees a list write only when the list changed (and LSET, which Redis
        // counts as a write even of the same value). Method: each command's effect on the
        // version.
        let mut s = Store::new();
        s.run(pop(ListEnd::Right, None));
        assert!(!s.has_entry("l"), "a pop of nothing leaves no trace");
        s.run(push(ListEnd::Right, &["a", "b"]));
        assert_eq!(s.version("l"), 1);
        for unchanged in [
            list(ListOp::Remove { count: 0, value: "x".into() }),
            list(ListOp::Trim { start: 0, stop: -1 }),
            list(ListOp::Insert { after: true, pivot: "x".into(), value: "y".into() }),
            pop(ListEnd::Left, Some(0)),
            list(ListOp::Set { index: 9, value: "x".into() }),
            list(ListOp::Range { start: 0, stop: -1 }),
        ] {
            s.run(unchanged.clone());
            assert_eq!(s.version("l"), 1, "{unchanged:?} moved the version");
        }
        s.run(list(ListOp::Set { index: 0, value: "a".into() }));
        assert_eq!(s.version("l"), 2);
        s.run(pop(ListEnd::Left, Some(5)));
        assert_eq!((s.version("l"), s.has_entry("l")), (3, true), "the deletion is a write; the chain stays");
    }

    #[test]
    fn lists_and_other_types_refuse_each_other() {
        // Goal: Redis' WRONGTYPE both ways, and TYPE says `list`.
        let mut s = Store::new();
        s.run(Command::set("s", "x"));
        for op in [
            ListOp::Pop { end: ListEnd::Left, count: Some(0) },
            ListOp::Push { end: ListEnd::Left, values: vec!["a".into()], existing_only: true },
            ListOp::Len,
            ListOp::Set { index: 0, value: "a".into() },
            ListOp::Position { value: "a".into(), rank: 1, count: None, max_len: 0 },
            ListOp::Trim { start: 0, stop: 1 },
        ] {
            let result = s.run(Command::List { key: "s".into(), op: op.clone() });
            assert!(is_error(&result, "WRONGTYPE Operation against a key"), "{op:?}: {result:?}");
        }
        s.run(push(ListEnd::Left, &["a"]));
        assert!(is_error(&s.run(Command::get("l")), "WRONGTYPE"));
        assert!(is_error(&s.run(Command::HGet { key: "l".into(), field: "f".into() }), "WRONGTYPE"));
        assert_eq!(s.run(Command::Type { key: "l".into() }), CommandResult::Value("list".into()));
        assert_eq!(s.run(Command::set("l", "now a string")), CommandResult::Ok, "SET overwrites any type");
    }
}
