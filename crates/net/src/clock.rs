//! The real clock: `CLOCK_REALTIME` with an injected offset and drift, and the monotonic clock
//! that timers are armed on.

use crate::config::ClockOptions;
use ordo_core::ClockReading;

fn read(clock: libc::clockid_t) -> u64 {
    let mut spec = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `spec` is a valid, writable timespec; clock_gettime only writes it.
    let status = unsafe { libc::clock_gettime(clock, &mut spec) };
    assert_eq!(status, 0, "CLOCK_REALTIME and CLOCK_MONOTONIC always exist on Linux");
    spec.tv_sec as u64 * 1_000_000_000 + spec.tv_nsec as u64
}

/// Nanoseconds of the monotonic clock (timers, durations).
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of the unskewed system clock (history timestamps).
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// The system clock seen through an injected offset and drift: local = real + offset + drift ×
/// (monotonic time since the clock was made). Changing drift later keeps the reading continuous.
#[derive(Clone, Debug)]
pub struct SkewedClock {
    offset_ns: i64,
    drift_ppm: f64,
    drift_since_mono_ns: u64,
    drift_accumulated_ns: f64,
    error_bound_ns: u64,
}

impl SkewedClock {
    /// A clock with the node's options.
    pub fn new(options: &ClockOptions) -> Self {
        SkewedClock {
            offset_ns: options.offset_ns,
            drift_ppm: options.drift_ppm,
            drift_since_mono_ns: monotonic_ns(),
            drift_accumulated_ns: 0.0,
            error_bound_ns: options.error_bound_ns,
        }
    }

    fn drift_ns(&self, mono_ns: u64) -> f64 {
        self.drift_accumulated_ns + mono_ns.saturating_sub(self.drift_since_mono_ns) as f64 * self.drift_ppm * 1e-6
    }

    /// Reads the clock.
    pub fn now(&self) -> ClockReading {
        let mono = monotonic_ns();
        let local = realtime_ns() as i128 + self.offset_ns as i128 + self.drift_ns(mono) as i128;
        ClockReading { local_ns: local.max(0) as u64, error_bound_ns: self.error_bound_ns }
    }

    /// The monotonic time at which the clock will read `local_ns` (now if it already does).
    pub fn monotonic_at(&self, local_ns: u64) -> u64 {
        let now = self.now().local_ns;
        let ahead = local_ns.saturating_sub(now) as f64 / (1.0 + self.drift_ppm * 1e-6).max(1e-3);
        monotonic_ns() + ahead as u64
    }

    /// Monotonic nanoseconds that `local_elapsed_ns` of this clock's time take.
    pub fn monotonic_duration(&self, local_elapsed_ns: u64) -> u64 {
        (local_elapsed_ns as f64 / (1.0 + self.drift_ppm * 1e-6).max(1e-3)) as u64
    }

    /// Jumps the clock (fault injection).
    pub fn jump(&mut self, delta_ns: i64) {
        self.offset_ns = self.offset_ns.saturating_add(delta_ns);
    }

    /// Changes the drift from now on (fault injection).
    pub fn set_drift(&mut self, drift_ppm: f64) {
        let mono = monotonic_ns();
        self.drift_accumulated_ns = self.drift_ns(mono);
        self.drift_since_mono_ns = mono;
        self.drift_ppm = drift_ppm;
    }
}

impl ordo_core::Clock for SkewedClock {
    fn now(&mut self) -> ClockReading {
        SkewedClock::now(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_and_drift_show_in_readings() {
        // Goal: an injected offset moves readings; drift changes keep them continuous.
        let plain = SkewedClock::new(&ClockOptions::default());
        let mut skewed = SkewedClock::new(&ClockOptions { offset_ns: 5_000_000_000, ..Default::default() });
        let gap = skewed.now().local_ns as i64 - plain.now().local_ns as i64;
        assert!((gap - 5_000_000_000).abs() < 50_000_000, "gap {gap}");
        let before = skewed.now().local_ns;
        skewed.set_drift(1_000.0);
        assert!(skewed.now().local_ns >= before);
        skewed.jump(-1_000_000_000);
        assert!(skewed.now().local_ns < before);
    }
}
