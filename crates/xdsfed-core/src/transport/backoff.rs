//! Reconnect backoff: exponential (backon) with gRPC's symmetric jitter.
//!
//! gRPC's connection backoff: the first delay is 1 s, each next one 1.6×
//! the last, capped at 120 s, and every delay is spread by ±20 % so that a
//! fleet that lost its server does not come back in lockstep. backon's own
//! jitter only adds (0–100 %), so the spread is applied here.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// The reconnect backoff policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// The first delay (gRPC: 1 s).
    pub initial: Duration,
    /// The growth factor (gRPC: 1.6).
    pub multiplier: f32,
    /// The spread, as a fraction of the delay, either way (gRPC: 0.2).
    pub jitter: f32,
    /// The cap (gRPC: 120 s).
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_secs(1),
            multiplier: 1.6,
            jitter: 0.2,
            max: Duration::from_secs(120),
        }
    }
}

/// The delays between reconnect attempts; [`Backoff::reset`] after a
/// response starts over.
#[derive(Debug)]
pub(crate) struct Backoff {
    cfg: BackoffConfig,
    delays: ExponentialBackoff,
}

impl Backoff {
    pub(crate) fn new(cfg: BackoffConfig) -> Self {
        Backoff {
            cfg,
            delays: Self::build(&cfg),
        }
    }

    fn build(cfg: &BackoffConfig) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(cfg.initial)
            .with_factor(cfg.multiplier.max(1.0))
            .with_max_delay(cfg.max)
            .without_max_times()
            .build()
    }

    /// Starts over from the initial delay.
    pub(crate) fn reset(&mut self) {
        self.delays = Self::build(&self.cfg);
    }

    /// The next delay, jittered.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.delays.next().unwrap_or(self.cfg.max);
        spread(base, self.cfg.jitter, unit_random())
    }
}

/// `base` × (1 ± `jitter`), with `r` in [0, 1) choosing where.
fn spread(base: Duration, jitter: f32, r: f64) -> Duration {
    let jitter = f64::from(jitter.clamp(0.0, 1.0));
    let factor = 1.0 + jitter * (2.0 * r - 1.0);
    Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(base)
}

/// A number in [0, 1) from the standard library's randomly keyed hasher;
/// jitter needs spread, not cryptographic randomness.
fn unit_random() -> f64 {
    let bits = RandomState::new().build_hasher().finish() >> 11;
    // 53 bits: exactly representable in an f64.
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_multiplier_within_the_jitter_and_caps() {
        let mut b = Backoff::new(BackoffConfig::default());
        let mut expected = 1.0f64;
        for _ in 0..20 {
            let d = b.next_delay().as_secs_f64();
            let base = expected.min(120.0);
            assert!(
                d >= base * 0.8 - 1e-6 && d <= base * 1.2 + 1e-6,
                "{d} not within 20% of {base}"
            );
            expected *= 1.6;
        }
    }

    #[test]
    fn backoff_reset_starts_over_from_the_initial_delay() {
        let mut b = Backoff::new(BackoffConfig::default());
        for _ in 0..5 {
            let _ = b.next_delay();
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(1200));
    }

    #[test]
    fn spread_covers_both_sides_of_the_base() {
        let base = Duration::from_secs(10);
        let near = |d: Duration, secs: f64| (d.as_secs_f64() - secs).abs() < 1e-3;
        assert!(near(spread(base, 0.2, 0.0), 8.0));
        assert!(near(spread(base, 0.2, 0.5), 10.0));
        assert!(near(spread(base, 0.2, 0.999_999), 12.0));
    }
}
