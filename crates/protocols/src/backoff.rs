//! One back-off schedule for work repeated while nothing changes (resends, repairs): act at the
//! 1st, 2nd, 4th, ... turn in a row and then every `spacing_max`-th. Each act may carry
//! megabytes (a log, a large value), so acting at every turn can send data faster than it
//! drains; the spacing bounds how long a lost message waits for its repeat.

/// Whether the `turn`-th repetition in a row (from 1) acts: a power of two, or a multiple of
/// `spacing_max` (a power of two, so that the two rules join without a gap).
pub fn is_due(turn: u64, spacing_max: u64) -> bool {
    debug_assert!(spacing_max.is_power_of_two(), "the spacing is a power of two");
    turn.is_power_of_two() || turn.is_multiple_of(spacing_max)
}

#[cfg(test)]
mod tests {
    #[test]
    fn acts_at_powers_of_two_then_every_spacing() {
        let due: Vec<u64> = (1..=40).filter(|&turn| super::is_due(turn, 8)).collect();
        assert_eq!(due, vec![1, 2, 4, 8, 16, 24, 32, 40]);
    }
}
