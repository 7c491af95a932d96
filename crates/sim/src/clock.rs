//! Simulated clocks: true time plus offset, drift and jitter. Jumps change the offset; drift
//! changes keep the clock continuous at the moment they happen.

use crate::config::ClockSpec;
use ordo_core::ClockReading;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// One node's simulated clock.
#[derive(Clone, Debug)]
pub struct SimClock {
    /// local(t) = t + offset_ns + drift_ppm·(t − drift_origin_ns)/10⁶ (+ jitter).
    offset_ns: i64,
    drift_ppm: f64,
    drift_origin_ns: u64,
    jitter_ns: u64,
    error_bound_ns: u64,
}

impl SimClock {
    /// A clock as `spec` describes it.
    pub fn new(spec: &ClockSpec) -> Self {
        SimClock {
            offset_ns: spec.offset_ns,
            drift_ppm: spec.drift_ppm,
            drift_origin_ns: 0,
            jitter_ns: spec.jitter_ns,
            error_bound_ns: spec.error_bound_ns,
        }
    }

    fn skew_ns(&self, true_ns: u64) -> i64 {
        let elapsed = true_ns.saturating_sub(self.drift_origin_ns) as f64;
        self.offset_ns + (self.drift_ppm * elapsed / 1e6) as i64
    }

    /// The reading at true time `true_ns`.
    pub fn read(&self, true_ns: u64, rng: &mut ChaCha8Rng) -> ClockReading {
        let jitter =
            if self.jitter_ns == 0 { 0 } else { rng.random_range(-(self.jitter_ns as i64)..=self.jitter_ns as i64) };
        let local = true_ns as i64 + self.skew_ns(true_ns) + jitter;
        ClockReading { local_ns: local.max(0) as u64, error_bound_ns: self.error_bound_ns }
    }

    /// The true duration that `local_ns` of this clock's time takes.
    pub fn true_duration_ns(&self, local_ns: u64) -> u64 {
        (local_ns as f64 / (1.0 + self.drift_ppm / 1e6)).round() as u64
    }

    /// The first true time at or after `now_ns` at which the clock (without jitter) reads
    /// `local_ns`.
    pub fn true_time_of(&self, local_ns: u64, now_ns: u64) -> u64 {
        let rate = 1.0 + self.drift_ppm / 1e6;
        let origin = self.drift_origin_ns as f64;
        // local = t + offset + drift·(t − origin)  ⇒  t = (local − offset + drift·origin) / rate
        let t = (local_ns as f64 - self.offset_ns as f64 + self.drift_ppm / 1e6 * origin) / rate;
        (t.ceil().max(0.0) as u64).max(now_ns)
    }

    /// Jumps the clock by `delta_ns`.
    pub fn jump(&mut self, delta_ns: i64) {
        self.offset_ns += delta_ns;
    }

    /// Changes the drift at true time `true_ns` without a discontinuity.
    pub fn set_drift(&mut self, true_ns: u64, drift_ppm: f64) {
        self.offset_ns = self.skew_ns(true_ns);
        self.drift_origin_ns = true_ns;
        self.drift_ppm = drift_ppm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn drift_offset_and_jumps() {
        // Goal: a clock 100 ppm fast gains 100 µs per second, a jump moves it at once (also
        // backwards), and a drift change does not make it jump.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut clock = SimClock::new(&ClockSpec { offset_ns: 5, drift_ppm: 100.0, jitter_ns: 0, error_bound_ns: 7 });
        let reading = clock.read(1_000_000_000, &mut rng);
        assert_eq!(reading.local_ns, 1_000_100_005);
        assert_eq!(reading.error_bound_ns, 7);
        clock.jump(-1_000_000);
        assert_eq!(clock.read(1_000_000_000, &mut rng).local_ns, 999_100_005);
        let before = clock.read(2_000_000_000, &mut rng).local_ns;
        clock.set_drift(2_000_000_000, 0.0);
        assert_eq!(clock.read(2_000_000_000, &mut rng).local_ns, before);
        assert_eq!(clock.read(3_000_000_000, &mut rng).local_ns, before + 1_000_000_000);
        let target = before + 2_000_000_000;
        let when = clock.true_time_of(target, 0);
        assert!(clock.read(when, &mut rng).local_ns >= target);
        assert!(clock.read(when - 1, &mut rng).local_ns < target);
    }
}
