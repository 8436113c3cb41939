//! The seeded random source every jitter draws from, and the spread of
//! the policy stream's intervals: sidecars started together (a rollout, a
//! node reboot) must not poll and health-check their control plane in
//! lockstep.
//!
//! Every interval is `interval × (1 ± spread)`, drawn from a small seeded
//! generator (SplitMix64): sessions stay sans-IO and deterministic (a test
//! fixes the seed), while their drivers seed them at random.

use std::time::Duration;

use super::spread;

/// The default spread either way: each interval is drawn from
/// [0.8, 1.2] × the configured one, as gRPC spreads its backoff.
pub const DEFAULT_JITTER: f32 = 0.2;

/// A small deterministic generator (SplitMix64): spread, not secrecy, is
/// wanted, and the same seed gives the same draws.
#[derive(Debug, Clone)]
pub struct SeededRandom {
    state: u64,
}

impl SeededRandom {
    /// Draws from `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRandom { state: seed }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        // SplitMix64 (Steele, Lea and Flood): one add and a mix per draw.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub fn next_unit(&mut self) -> f64 {
        // 53 bits: exactly representable in an f64.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A seeded source of jittered intervals.
#[derive(Debug, Clone)]
pub struct Jitter {
    random: SeededRandom,
    spread: f32,
}

impl Jitter {
    /// Intervals spread by `spread` (clamped to [0, 1]) either way, drawn
    /// from `seed`.
    pub fn new(seed: u64, spread: f32) -> Self {
        Jitter {
            random: SeededRandom::new(seed),
            spread: spread.clamp(0.0, 1.0),
        }
    }

    /// `interval`, spread by the next draw.
    pub fn interval(&mut self, interval: Duration) -> Duration {
        if self.spread == 0.0 {
            return interval;
        }
        spread(interval, self.spread, self.random.next_unit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_within_the_spread_and_cover_both_sides() {
        let base = Duration::from_secs(10);
        let mut jitter = Jitter::new(42, 0.2);
        let draws: Vec<Duration> = (0..1000).map(|_| jitter.interval(base)).collect();
        assert!(
            draws
                .iter()
                .all(|d| *d >= base.mul_f64(0.8) && *d <= base.mul_f64(1.2))
        );
        assert!(draws.iter().any(|d| *d < base.mul_f64(0.9)));
        assert!(draws.iter().any(|d| *d > base.mul_f64(1.1)));
    }

    #[test]
    fn no_spread_is_the_interval_itself() {
        let mut jitter = Jitter::new(42, 0.0);
        assert_eq!(
            jitter.interval(Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }
}
