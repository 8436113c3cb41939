//! The spread of the policy stream's intervals: sidecars started together
//! (a rollout, a node reboot) must not poll and health-check their
//! control plane in lockstep.
//!
//! Every interval is `interval × (1 ± spread)`, drawn from a small seeded
//! generator (SplitMix64): the session stays sans-IO and deterministic (a
//! test fixes the seed), while the driver seeds it at random.

use std::time::Duration;

use crate::transport::backoff::{random_u64, spread};

/// The default spread either way: each interval is drawn from
/// [0.8, 1.2] × the configured one, as gRPC spreads its backoff.
pub(crate) const DEFAULT_JITTER: f32 = 0.2;

/// A random seed, from the standard library's randomly keyed hasher (also
/// what makes a client address without a node id unique): spread, not
/// secrecy, is wanted.
pub(crate) fn random_seed() -> u64 {
    random_u64()
}

/// A seeded source of jittered intervals.
#[derive(Debug, Clone)]
pub(crate) struct Jitter {
    state: u64,
    spread: f32,
}

impl Jitter {
    /// Intervals spread by `spread` (clamped to [0, 1]) either way, drawn
    /// from `seed`.
    pub(crate) fn new(seed: u64, spread: f32) -> Self {
        Jitter {
            state: seed,
            spread: spread.clamp(0.0, 1.0),
        }
    }

    /// `interval`, spread by the next draw.
    pub(crate) fn interval(&mut self, interval: Duration) -> Duration {
        if self.spread == 0.0 {
            return interval;
        }
        spread(interval, self.spread, self.next_unit())
    }

    /// A number in [0, 1) (also the HTTP CDN source's draws).
    pub(crate) fn next_unit(&mut self) -> f64 {
        // SplitMix64 (Steele, Lea and Flood): one add and a mix per draw.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // 53 bits: exactly representable in an f64.
        (z >> 11) as f64 / (1u64 << 53) as f64
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
