//! Retry throttling (gRFC A6 "Throttling Retry Attempts", kept by A44): a
//! token bucket per channel, configured as gRPC's service config
//! `retryThrottling` configures it, since xDS carries no throttling.
//!
//! - The bucket starts full, at `max_tokens` (1..=1000).
//! - An attempt that fails with a status its route retries on takes 1
//!   token; a call that succeeds gives back `token_ratio` (above 0, three
//!   decimals at most), never beyond `max_tokens`.
//! - Retries are made only while more than `max_tokens / 2` tokens are
//!   left.
//!
//! Tokens are counted in thousandths, so the arithmetic is exact.

use std::sync::Mutex;

/// Milli-tokens per token.
const MILLI: u64 = 1000;

/// The retry throttling of a channel: `max_tokens` and `token_ratio`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryThrottling {
    max_milli: u64,
    ratio_milli: u64,
}

impl RetryThrottling {
    /// Throttling with gRPC's `retryThrottling` parameters, or why they are
    /// out of range (`max_tokens` in 1..=1000, `token_ratio` above 0 and
    /// counted to three decimals).
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, String> {
        if !(1..=1000).contains(&max_tokens) {
            return Err(format!(
                "retry throttling max_tokens {max_tokens} is not in 1..=1000"
            ));
        }
        let ratio_milli = (token_ratio * MILLI as f64).round();
        if !ratio_milli.is_finite() || ratio_milli < 1.0 || ratio_milli > (1000 * MILLI) as f64 {
            return Err(format!(
                "retry throttling token_ratio {token_ratio} is not in 0.001..=1000"
            ));
        }
        Ok(Self {
            max_milli: u64::from(max_tokens) * MILLI,
            // In range, checked above.
            ratio_milli: ratio_milli as u64,
        })
    }
}

/// The token bucket of one channel.
#[derive(Debug)]
pub(crate) struct RetryBucket {
    config: RetryThrottling,
    milli_tokens: Mutex<u64>,
}

impl RetryBucket {
    pub(crate) fn new(config: RetryThrottling) -> Self {
        Self {
            config,
            milli_tokens: Mutex::new(config.max_milli),
        }
    }

    fn with_tokens<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
        // A plain counter: a panic elsewhere cannot leave it torn.
        let mut tokens = self.milli_tokens.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut tokens)
    }

    /// An attempt failed with a retryable status: takes a token, then says
    /// whether a retry is still allowed.
    pub(crate) fn handle_retryable_failure(&self) -> bool {
        let half = self.config.max_milli / 2;
        self.with_tokens(|t| {
            *t = t.saturating_sub(MILLI);
            *t > half
        })
    }

    /// A call succeeded: gives back `token_ratio`.
    pub(crate) fn handle_success(&self) {
        let (max, ratio) = (self.config.max_milli, self.config.ratio_milli);
        self.with_tokens(|t| *t = t.saturating_add(ratio).min(max));
    }

    #[cfg(test)]
    fn tokens(&self) -> f64 {
        self.with_tokens(|t| *t as f64 / MILLI as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gRFC A6: failures take one token each; retries stop once the bucket
    /// is at or below half; successes refill by `token_ratio` up to the
    /// maximum.
    #[test]
    fn retry_bucket_stops_retries_at_half_and_refills_by_ratio() {
        let bucket = RetryBucket::new(RetryThrottling::new(4, 0.5).unwrap());
        assert!(bucket.handle_retryable_failure(), "3 of 4 left");
        assert!(
            !bucket.handle_retryable_failure(),
            "2 of 4 left: not above half"
        );
        assert!(!bucket.handle_retryable_failure());
        assert_eq!(bucket.tokens(), 1.0);
        bucket.handle_success();
        bucket.handle_success();
        bucket.handle_success();
        assert_eq!(bucket.tokens(), 2.5);
        assert!(!bucket.handle_retryable_failure(), "1.5 left");
        for _ in 0..20 {
            bucket.handle_success();
        }
        assert_eq!(bucket.tokens(), 4.0, "never above max_tokens");
        for _ in 0..10 {
            bucket.handle_retryable_failure();
        }
        assert_eq!(bucket.tokens(), 0.0, "never below zero");
    }

    /// gRFC A6: `max_tokens` in 1..=1000, `token_ratio` above 0.
    #[test]
    fn retry_throttling_rejects_out_of_range_parameters() {
        assert!(RetryThrottling::new(0, 1.0).is_err());
        assert!(RetryThrottling::new(1001, 1.0).is_err());
        assert!(RetryThrottling::new(10, 0.0).is_err());
        assert!(RetryThrottling::new(10, f64::NAN).is_err());
        assert!(RetryThrottling::new(10, 0.1).is_ok());
    }
}
