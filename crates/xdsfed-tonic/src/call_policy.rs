//! What a route says about the calls it takes: their longest duration
//! (gRFC A31) and their retry policy (gRFC A44). Sans-IO: compiled once per
//! snapshot, read per call; times are passed in.
//!
//! Rules:
//! - **Timeout** (A31): the route's `max_stream_duration` uses
//!   `grpc_timeout_header_max` when set, else `max_stream_duration`; a
//!   route with neither takes the HttpConnectionManager's
//!   `common_http_protocol_options.max_stream_duration`. Zero means no
//!   limit. The call's deadline is the earlier of the application's
//!   (`grpc-timeout`) and the route's. `grpc_timeout_header_offset` is not
//!   applied, as in gRPC.
//! - **Retries** (A44): the route's `retry_policy`, else its virtual
//!   host's. `retry_on` keeps only `cancelled`, `deadline-exceeded`,
//!   `internal`, `resource-exhausted` and `unavailable`; a policy left with
//!   none is no policy. `num_retries` (default 1) gives `num_retries + 1`
//!   attempts, at most 5 (gRFC A6). Backoff: `base_interval` (default
//!   25 ms), `max_interval` (default 10 × base), multiplier 2; retry *n*
//!   waits a uniformly random time in `[0, min(base × 2ⁿ⁻¹, max))` (A6).

use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3::RetryPolicy as EnvoyRetryPolicy;
use envoy_types::pb::envoy::config::route::v3::route_action::MaxStreamDuration;
use tonic::Code;
use xdsfed_core::types::std_duration;

use crate::hash_policy::HashPolicy;

/// gRFC A6: `maxAttempts` above 5 is treated as 5.
pub(crate) const MAX_ATTEMPTS: u32 = 5;
/// gRFC A44: `base_interval` when `retry_back_off` is not set.
const DEFAULT_BASE_INTERVAL: Duration = Duration::from_millis(25);

/// The policy of the calls one route takes.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallPolicy {
    /// The route's longest call; `None` for no limit.
    pub(crate) max_duration: Option<Duration>,
    /// How failed attempts are retried; `None` for never.
    pub(crate) retry: Option<RetryPolicy>,
    /// The request hash RING_HASH picks by (gRFC A42).
    pub(crate) hash_policy: Vec<HashPolicy>,
}

impl CallPolicy {
    /// The deadline of a call under this policy: the earlier of the
    /// application's timeout and the route's (gRFC A31).
    pub(crate) fn timeout(&self, application: Option<Duration>) -> Option<Duration> {
        match (application, self.max_duration) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        }
    }
}

/// A route's retry policy, converted to gRPC's (gRFC A44).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetryPolicy {
    retry_on: Vec<Code>,
    /// Attempts in all, the first included: 2..=5.
    pub(crate) max_attempts: u32,
    base_interval: Duration,
    max_interval: Duration,
}

impl RetryPolicy {
    /// The gRPC retry policy of `policy`, or `None` when it retries on no
    /// status gRPC supports. Fields are as core validation left them.
    pub(crate) fn from_envoy(policy: &EnvoyRetryPolicy) -> Option<Self> {
        let retry_on: Vec<Code> = policy
            .retry_on
            .split(',')
            .filter_map(|c| retryable_code(c.trim()))
            .collect();
        if retry_on.is_empty() {
            return None;
        }
        let retries = policy.num_retries.as_ref().map_or(1, |n| n.value.max(1));
        let back_off = policy.retry_back_off.as_ref();
        let base_interval = back_off
            .and_then(|b| b.base_interval.as_ref())
            .and_then(std_duration)
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_BASE_INTERVAL);
        let max_interval = back_off
            .and_then(|b| b.max_interval.as_ref())
            .and_then(std_duration)
            .filter(|d| !d.is_zero())
            .unwrap_or_else(|| base_interval.saturating_mul(10));
        Some(Self {
            retry_on,
            max_attempts: retries.saturating_add(1).min(MAX_ATTEMPTS),
            base_interval,
            max_interval,
        })
    }

    /// Whether an attempt that ended with `code` may be retried.
    pub(crate) fn retries_on(&self, code: Code) -> bool {
        self.retry_on.contains(&code)
    }

    /// The wait before retry number `retry` (1 for the first), spread by
    /// `random` over `[0, min(base × 2^(retry-1), max))` (gRFC A6).
    pub(crate) fn backoff(&self, retry: u32, random: u64) -> Duration {
        let doublings = retry.saturating_sub(1).min(62);
        let ceiling = self
            .base_interval
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.max_interval);
        // `random` as a fraction in [0, 1).
        let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
        // Truncated to whole nanoseconds, so the interval stays half-open.
        Duration::from_nanos((ceiling.as_nanos() as f64 * unit) as u64)
    }
}

/// The status a `retry_on` condition names, if gRPC retries on it (A44).
fn retryable_code(condition: &str) -> Option<Code> {
    match condition.to_ascii_lowercase().as_str() {
        "cancelled" => Some(Code::Cancelled),
        "deadline-exceeded" => Some(Code::DeadlineExceeded),
        "internal" => Some(Code::Internal),
        "resource-exhausted" => Some(Code::ResourceExhausted),
        "unavailable" => Some(Code::Unavailable),
        _ => None,
    }
}

/// The route's longest call from its `max_stream_duration` (gRFC A31):
/// `Some(None)` when the route sets no limit explicitly (zero), `None`
/// when it says nothing and the listener's default applies.
pub(crate) fn route_max_duration(field: Option<&MaxStreamDuration>) -> Option<Option<Duration>> {
    let field = field?;
    let value = field
        .grpc_timeout_header_max
        .as_ref()
        .or(field.max_stream_duration.as_ref())?;
    Some(std_duration(value).filter(|d| !d.is_zero()))
}

/// Parses a `grpc-timeout` header value: at most 8 digits and a unit
/// (`H`, `M`, `S`, `m`, `u`, `n`), as the gRPC HTTP/2 protocol defines it.
pub(crate) fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let digits = value.len().checked_sub(1)?;
    if digits == 0 || digits > 8 {
        return None;
    }
    let (number, unit) = value.split_at(digits);
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = number.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Formats `timeout` as a `grpc-timeout` value, rounded up to the finest
/// unit whose count fits in 8 digits.
pub(crate) fn format_grpc_timeout(timeout: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    for (unit, per) in [
        ("n", 1u128),
        ("u", 1_000),
        ("m", 1_000_000),
        ("S", 1_000_000_000),
        ("M", 60_000_000_000),
    ] {
        let count = nanos.div_ceil(per);
        if count <= MAX {
            return format!("{count}{unit}");
        }
    }
    format!("{}H", nanos.div_ceil(3_600_000_000_000).min(MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff;
    use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

    fn ms(n: i32) -> Option<PbDuration> {
        Some(PbDuration {
            seconds: 0,
            nanos: n * 1_000_000,
        })
    }

    /// gRFC A31: the deadline is the earlier of the application's and the
    /// route's; either alone applies.
    #[test]
    fn call_timeout_is_the_earlier_of_application_and_route() {
        let policy = CallPolicy {
            max_duration: Some(Duration::from_secs(2)),
            ..CallPolicy::default()
        };
        let s = Duration::from_secs;
        assert_eq!(policy.timeout(Some(s(1))), Some(s(1)));
        assert_eq!(policy.timeout(Some(s(5))), Some(s(2)));
        assert_eq!(policy.timeout(None), Some(s(2)));
        assert_eq!(CallPolicy::default().timeout(Some(s(5))), Some(s(5)));
    }

    /// gRFC A31: `grpc_timeout_header_max` wins over `max_stream_duration`;
    /// zero means no limit; an empty field defers to the listener.
    #[test]
    fn route_max_duration_prefers_grpc_timeout_header_max() {
        let both = MaxStreamDuration {
            max_stream_duration: ms(500),
            grpc_timeout_header_max: ms(200),
            grpc_timeout_header_offset: None,
        };
        assert_eq!(
            route_max_duration(Some(&both)),
            Some(Some(Duration::from_millis(200)))
        );
        let zero = MaxStreamDuration {
            max_stream_duration: ms(0),
            ..Default::default()
        };
        assert_eq!(route_max_duration(Some(&zero)), Some(None));
        assert_eq!(
            route_max_duration(Some(&MaxStreamDuration::default())),
            None
        );
    }

    /// gRFC A44: only the five gRPC conditions count; a policy with none of
    /// them is no policy; attempts are `num_retries + 1`, at most 5.
    #[test]
    fn retry_policy_keeps_grpc_codes_and_caps_attempts_at_five() {
        let policy = EnvoyRetryPolicy {
            retry_on: "5xx, Unavailable,internal".into(),
            num_retries: Some(UInt32Value { value: 9 }),
            ..Default::default()
        };
        let retry = RetryPolicy::from_envoy(&policy).unwrap();
        assert!(retry.retries_on(Code::Unavailable));
        assert!(retry.retries_on(Code::Internal));
        assert!(!retry.retries_on(Code::NotFound));
        assert_eq!(retry.max_attempts, 5);
        let http_only = EnvoyRetryPolicy {
            retry_on: "5xx,reset".into(),
            ..Default::default()
        };
        assert_eq!(RetryPolicy::from_envoy(&http_only), None);
        let default = EnvoyRetryPolicy {
            retry_on: "cancelled".into(),
            ..Default::default()
        };
        assert_eq!(RetryPolicy::from_envoy(&default).unwrap().max_attempts, 2);
    }

    /// gRFC A6/A44: retry n waits in [0, min(base × 2ⁿ⁻¹, max)); the max
    /// defaults to ten times the base.
    #[test]
    fn retry_backoff_doubles_from_base_up_to_max() {
        let policy = EnvoyRetryPolicy {
            retry_on: "unavailable".into(),
            retry_back_off: Some(RetryBackOff {
                base_interval: ms(100),
                max_interval: None,
            }),
            ..Default::default()
        };
        let retry = RetryPolicy::from_envoy(&policy).unwrap();
        let top = |n| retry.backoff(n, u64::MAX);
        assert_eq!(retry.backoff(1, 0), Duration::ZERO);
        assert!(top(1) < Duration::from_millis(100) && top(1) > Duration::from_millis(99));
        assert!(top(2) > Duration::from_millis(199) && top(2) < Duration::from_millis(200));
        assert!(top(5) > Duration::from_millis(999) && top(5) < Duration::from_millis(1000));
        assert!(top(u32::MAX) < Duration::from_millis(1000));
    }

    /// The gRPC HTTP/2 protocol: `grpc-timeout` is 1 to 8 digits and a unit.
    #[test]
    fn grpc_timeout_round_trips_and_rejects_malformed_values() {
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        for bad in ["", "m", "123456789m", "1x", "-1S", "1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
        for d in [
            Duration::from_nanos(7),
            Duration::from_millis(1500),
            Duration::MAX,
        ] {
            let back = parse_grpc_timeout(&format_grpc_timeout(d)).unwrap();
            assert!(
                back >= d.min(Duration::from_secs(99_999_999 * 3600)),
                "{d:?}"
            );
        }
    }
}
