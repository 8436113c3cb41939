//! When a CDN source asks its server again: after an answer, the next
//! poll of that file; after a failure, the one backoff of the whole
//! server. Sans-IO: times come in, the random draws come from a seeded
//! generator the session owns.
//!
//! - A poll is due `refresh_delay × (1 ± poll_jitter)` (default
//!   [`POLL_JITTER`]) after its answer,
//!   so clients started together drift out of phase; never sooner than
//!   the answer stays fresh in a shared cache (`headers::freshness`),
//!   since polling a fresh copy only buys `304`s from the cache.
//! - A failure starts (or continues) the server's backoff: the first delay
//!   is `max(backoff.initial, refresh_delay)`, each next one `multiplier`
//!   times the last, capped at `max(backoff.max, refresh_delay)`, each
//!   drawn from `[1, 1 + jitter]` × the base so that no retry comes sooner
//!   than a poll would have; a `Retry-After` lengthens it. While it runs,
//!   nothing of the server is fetched; failures of fetches already in
//!   flight join it without growing it. An answer ends it.

use std::time::{Duration, Instant};

use crate::backoff::{BackoffConfig, SeededRandom, spread};

/// The default spread of each poll either way: `refresh_delay × [0.8,
/// 1.2]` (the mean stays `refresh_delay`, as gRPC spreads its backoff).
pub(crate) const POLL_JITTER: f32 = 0.2;

/// The poll and backoff timing of one CDN server.
#[derive(Debug, Clone)]
pub(crate) struct Pacing {
    refresh: Duration,
    backoff: BackoffConfig,
    poll_jitter: f32,
    draws: SeededRandom,
    /// Failures since the last answer.
    failures: u32,
    /// The end of the backoff, while one runs (or ran, until an answer).
    until: Option<Instant>,
}

impl Pacing {
    /// Polls every `refresh` spread by `poll_jitter` either way, backing
    /// off by `backoff`, drawing from `seed`.
    pub(crate) fn new(
        refresh: Duration,
        poll_jitter: f32,
        backoff: BackoffConfig,
        seed: u64,
    ) -> Self {
        Pacing {
            refresh,
            backoff,
            poll_jitter: poll_jitter.clamp(0.0, 1.0),
            draws: SeededRandom::new(seed),
            failures: 0,
            until: None,
        }
    }

    /// The delay before the next poll of a file just answered, whose
    /// answer stays fresh in a shared cache for `fresh_for`.
    pub(crate) fn next_poll(&mut self, fresh_for: Option<Duration>) -> Duration {
        let poll = if self.poll_jitter == 0.0 {
            self.refresh
        } else {
            spread(self.refresh, self.poll_jitter, self.draws.next_unit())
        };
        poll.max(fresh_for.unwrap_or_default())
    }

    /// The server answered: the backoff ends.
    pub(crate) fn answered(&mut self) {
        self.failures = 0;
        self.until = None;
    }

    /// A fetch failed at `now` (the server asked for `retry_after`, if it
    /// did): when the server may be asked again.
    pub(crate) fn failed(&mut self, now: Instant, retry_after: Option<Duration>) -> Instant {
        let asked = retry_after.map_or(now, |d| now.checked_add(d).unwrap_or(now));
        if let Some(until) = self.backing_off(now) {
            // A fetch that left before the backoff began: it joins it.
            let until = until.max(asked);
            self.until = Some(until);
            return until;
        }
        let delay = self.backoff_delay();
        self.failures = self.failures.saturating_add(1);
        let until = now.checked_add(delay).unwrap_or(now).max(asked);
        self.until = Some(until);
        until
    }

    /// The end of the current or last backoff, until an answer.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// The end of the backoff, while it runs at `now`.
    pub(crate) fn backing_off(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|until| *until > now)
    }

    /// The next backoff delay: never shorter than a poll.
    fn backoff_delay(&mut self) -> Duration {
        let first = self.backoff.initial.max(self.refresh);
        let cap = self.backoff.max.max(first);
        let growth = f64::from(self.backoff.multiplier.max(1.0))
            .powi(i32::try_from(self.failures).unwrap_or(i32::MAX));
        let base = Duration::try_from_secs_f64(first.as_secs_f64() * growth)
            .unwrap_or(cap)
            .min(cap);
        let jitter = f64::from(self.backoff.jitter.clamp(0.0, 1.0));
        base.mul_f64(1.0 + jitter * self.draws.next_unit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BackoffConfig {
        BackoffConfig {
            initial: Duration::from_secs(1),
            multiplier: 2.0,
            jitter: 0.2,
            max: Duration::from_secs(60),
        }
    }

    #[test]
    fn polls_spread_around_the_refresh_delay_and_respect_freshness() {
        let refresh = Duration::from_secs(10);
        let mut p = Pacing::new(refresh, POLL_JITTER, cfg(), 7);
        let polls: Vec<Duration> = (0..200).map(|_| p.next_poll(None)).collect();
        assert!(
            polls
                .iter()
                .all(|d| *d >= refresh.mul_f64(0.8) && *d <= refresh.mul_f64(1.2))
        );
        assert!(polls.iter().any(|d| *d < refresh.mul_f64(0.9)));
        assert!(polls.iter().any(|d| *d > refresh.mul_f64(1.1)));
        let fresh = Duration::from_secs(30);
        assert_eq!(p.next_poll(Some(fresh)), fresh);
    }

    #[test]
    fn backoff_starts_at_the_refresh_delay_grows_and_caps() {
        let refresh = Duration::from_secs(5);
        let mut p = Pacing::new(refresh, POLL_JITTER, cfg(), 7);
        let t0 = Instant::now();
        let mut now = t0;
        let mut base = 5.0f64;
        for _ in 0..8 {
            let until = p.failed(now, None);
            let delay = (until - now).as_secs_f64();
            let want = base.min(60.0);
            assert!(
                delay >= want && delay <= want * 1.2 + 1e-6,
                "{delay} vs {want}"
            );
            now = until;
            base *= 2.0;
        }
        p.answered();
        assert_eq!(p.backing_off(now), None);
        let delay = p.failed(now, None) - now;
        assert!(delay >= refresh && delay <= refresh.mul_f64(1.2));
    }
}
