//! Time and clocks. All times are nanoseconds in `u64`.
//!
//! Protocol code never reads a clock: the driver reads the node's clock and passes the
//! [`ClockReading`] in with every input. The reading carries an error bound in the style of
//! TrueTime / ClockBound: true time lies in `[earliest_ns, latest_ns]` when the clock is honest.

use serde::{Deserialize, Serialize};

/// One nanosecond.
pub const NANOS_PER_MICRO: u64 = 1_000;
/// One millisecond in nanoseconds.
pub const NANOS_PER_MILLI: u64 = 1_000_000;
/// One second in nanoseconds.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// A node's clock reading: the local time and the bound the clock claims on its error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockReading {
    /// Local wall-clock time in nanoseconds (may be skewed, and may jump backwards).
    pub local_ns: u64,
    /// The clock's claimed bound on `|local - true|` in nanoseconds.
    pub error_bound_ns: u64,
}

impl ClockReading {
    /// A reading with no claimed error (tests).
    pub fn exact(local_ns: u64) -> Self {
        ClockReading { local_ns, error_bound_ns: 0 }
    }

    /// The earliest true time this reading allows.
    pub fn earliest_ns(&self) -> u64 {
        self.local_ns.saturating_sub(self.error_bound_ns)
    }

    /// The latest true time this reading allows.
    pub fn latest_ns(&self) -> u64 {
        self.local_ns.saturating_add(self.error_bound_ns)
    }
}

/// A source of clock readings. The simulator's clocks are driven by simulated true time; the
/// real runtime's clock is the system clock with an optional injected offset and drift.
pub trait Clock {
    /// Reads the clock now.
    fn now(&mut self) -> ClockReading;
}
