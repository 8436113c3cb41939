//! Reconnect backoff: exponential with gRPC's symmetric jitter, the rule
//! for when the next stream may start, and the seeded random source every
//! jitter draws from.
//!
//! gRPC's connection backoff: the first delay is 1 s, each next one 1.6×
//! the last, capped at 120 s, and every delay is spread by ±20 % so that a
//! fleet that lost its server does not come back in lockstep.
//!
//! [`ReconnectPolicy`] applies it to every stream end, OK or not: a stream
//! that had a response resets the backoff (the next attempt waits only the
//! initial delay), yet streams never start more often than once per delay,
//! counted from the start of the last one. A server that ends each stream
//! with OK right after one response is thus reconnected to once per
//! initial delay, not in a storm.
//!
//! Sans-IO: no clock (`now` is passed in) and no randomness of its own.
//! Each backoff draws its jitter from a [`SeededRandom`] its owner seeds:
//! a driver seeds it from the process's random source, a test with a fixed
//! number, and the same seed gives the same delays.

use std::time::{Duration, Instant};

mod jitter;

pub use jitter::{DEFAULT_JITTER, Jitter, SeededRandom};

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
#[derive(Debug, Clone)]
pub struct Backoff {
    cfg: BackoffConfig,
    /// The next delay before jitter.
    base: Duration,
    random: SeededRandom,
}

impl Backoff {
    /// Delays by `cfg`, jittered from `seed`.
    pub fn new(cfg: BackoffConfig, seed: u64) -> Self {
        Backoff {
            cfg,
            base: cfg.initial.min(cfg.max),
            random: SeededRandom::new(seed),
        }
    }

    /// Starts over from the initial delay.
    pub fn reset(&mut self) {
        self.base = self.cfg.initial.min(self.cfg.max);
    }

    /// The next delay, jittered.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.base;
        let grown = base.mul_f64(f64::from(self.cfg.multiplier.max(1.0)).min(1e6));
        self.base = grown.min(self.cfg.max);
        spread(base, self.cfg.jitter, self.random.next_unit())
    }
}

/// When the next stream to a server may start, after each end.
#[derive(Debug, Clone)]
pub struct ReconnectPolicy {
    backoff: Backoff,
    /// When the current (or last) attempt started.
    started: Option<Instant>,
}

impl ReconnectPolicy {
    /// Backoff by `cfg`, jittered from `seed`.
    pub fn new(cfg: BackoffConfig, seed: u64) -> Self {
        ReconnectPolicy {
            backoff: Backoff::new(cfg, seed),
            started: None,
        }
    }

    /// An attempt starts at `now`.
    pub fn started(&mut self, now: Instant) {
        self.started = Some(now);
    }

    /// The stream ended at `now`, with or without a response on it: when
    /// the next attempt may start. A response resets the backoff; either
    /// way the next start is at least one delay after the last start (gRPC
    /// connection backoff: the delay runs from the start of an attempt).
    pub fn ended(&mut self, now: Instant, had_response: bool) -> Instant {
        if had_response {
            self.backoff.reset();
        }
        let delay = self.backoff.next_delay();
        let from = self.started.take().unwrap_or(now);
        from.checked_add(delay).unwrap_or(now).max(now)
    }

    /// The client closed the stream itself (nothing left to watch): the
    /// next one, opened on new interest, starts at once and afresh.
    pub fn closed_locally(&mut self) {
        self.backoff.reset();
        self.started = None;
    }
}

/// `base` × (1 ± `jitter`), with `r` in [0, 1) choosing where.
pub fn spread(base: Duration, jitter: f32, r: f64) -> Duration {
    let jitter = f64::from(jitter.clamp(0.0, 1.0));
    let factor = 1.0 + jitter * (2.0 * r - 1.0);
    Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_multiplier_within_the_jitter_and_caps() {
        let mut b = Backoff::new(BackoffConfig::default(), 7);
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
        let mut b = Backoff::new(BackoffConfig::default(), 7);
        for _ in 0..5 {
            let _ = b.next_delay();
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(1200));
    }

    fn exact(initial_ms: u64) -> BackoffConfig {
        BackoffConfig {
            initial: Duration::from_millis(initial_ms),
            multiplier: 2.0,
            jitter: 0.0,
            max: Duration::from_secs(10),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Delays grow in floating point: equal to within a microsecond.
    #[track_caller]
    fn assert_at(got: Instant, want: Instant) {
        let off = got.max(want) - got.min(want);
        assert!(off < Duration::from_micros(1), "{got:?} is not {want:?}");
    }

    /// Issue 19: a stream that ends OK right after a response is not
    /// reopened at once; the next start is one (reset) delay after the
    /// last start, so a server closing every stream after one response
    /// sees one stream per initial delay.
    #[test]
    fn stream_ending_after_a_response_waits_out_the_rest_of_the_delay() {
        let t0 = Instant::now();
        let mut p = ReconnectPolicy::new(exact(100), 7);
        let mut start = t0;
        for _ in 0..5 {
            p.started(start);
            let next = p.ended(start + ms(3), true);
            assert_at(next, start + ms(100));
            start = next;
        }
    }

    /// A stream that lived longer than the delay reconnects at once after a
    /// response (the reset delay has passed), not a full delay later.
    #[test]
    fn long_lived_stream_reconnects_at_once_after_a_response() {
        let t0 = Instant::now();
        let mut p = ReconnectPolicy::new(exact(100), 7);
        p.started(t0);
        assert_at(p.ended(t0 + ms(50), false), t0 + ms(100));
        p.started(t0 + ms(100));
        let end = t0 + Duration::from_secs(60);
        assert_at(p.ended(end, true), end);
    }

    /// Failures before any response grow the delay; each counts from the
    /// attempt's start, and never lies in the past.
    #[test]
    fn failures_grow_the_delay_from_each_attempt_start() {
        let t0 = Instant::now();
        let mut p = ReconnectPolicy::new(exact(100), 7);
        p.started(t0);
        assert_at(p.ended(t0 + ms(1), false), t0 + ms(100));
        p.started(t0 + ms(100));
        assert_at(p.ended(t0 + ms(101), false), t0 + ms(300));
        // An attempt that took longer than its delay (a handshake deadline)
        // retries at once.
        p.started(t0 + ms(300));
        assert_at(p.ended(t0 + ms(900), false), t0 + ms(900));
        // A response starts over.
        p.started(t0 + ms(900));
        assert_at(p.ended(t0 + ms(901), true), t0 + ms(1000));
    }

    #[test]
    fn local_close_starts_over_without_a_delay() {
        let t0 = Instant::now();
        let mut p = ReconnectPolicy::new(exact(100), 7);
        p.started(t0);
        let _ = p.ended(t0, false);
        let _ = p.ended(t0, false);
        p.closed_locally();
        p.started(t0 + ms(5));
        assert_at(p.ended(t0 + ms(6), false), t0 + ms(105));
    }

    /// The same seed gives the same delays: a backoff is reproducible in a
    /// test and differs between clients only by their seeds.
    #[test]
    fn same_seed_gives_the_same_delays() {
        let delays = |seed| {
            let mut b = Backoff::new(BackoffConfig::default(), seed);
            (0..10).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(delays(3), delays(3));
        assert_ne!(delays(3), delays(4));
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
