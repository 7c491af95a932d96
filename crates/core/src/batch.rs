//! Batches bounded in bytes as well as in count. A batch travels in one protocol message (a
//! proposal, a multicast, a catch-up), and a count alone lets 64 values of 16 MiB make one
//! message of a gigabyte: past the transport's large-message limit, it is dropped and resent
//! for ever, and below it, it still holds every other message on its link for seconds.

use crate::Command;

/// Encoded bytes a batch of commands reaches before it takes no more. One command of any size
/// is always taken (its own message carries it alone).
pub const BATCH_BYTES_MAX: usize = 4 << 20;

/// How many of `commands`, in order, one batch takes: at most `count_max`, and none that would
/// take the batch's encoded bytes past [`BATCH_BYTES_MAX`]; at least one when there is one.
pub fn batch_len<'a>(commands: impl IntoIterator<Item = &'a Command>, count_max: usize) -> usize {
    let mut bytes = 0;
    let mut taken = 0;
    for command in commands.into_iter().take(count_max) {
        let len = command.encoded_len();
        if taken > 0 && bytes + len > BATCH_BYTES_MAX {
            break;
        }
        bytes += len;
        taken += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_stops_at_its_count_or_its_bytes_but_takes_one_of_any_size() {
        let small: Vec<Command> = (0..10).map(|i| Command::set(format!("k{i}"), "v")).collect();
        assert_eq!(batch_len(&small, 4), 4);
        assert_eq!(batch_len(&small, 64), 10);
        assert_eq!(batch_len(&[], 64), 0);
        let big = || Command::set("k", vec![0u8; BATCH_BYTES_MAX / 3]);
        let bigs: Vec<Command> = (0..5).map(|_| big()).collect();
        assert_eq!(batch_len(&bigs, 64), 2, "a third of the bound each: two fit, three pass it");
        let huge = vec![Command::set("k", vec![0u8; BATCH_BYTES_MAX * 2]), big()];
        assert_eq!(batch_len(&huge, 64), 1, "one command past the bound still goes, alone");
    }
}
