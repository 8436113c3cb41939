//! What an answer's caching headers say about when to ask again: the
//! freshness a shared cache gives it (`Cache-Control: max-age` less `Age`,
//! else `Expires` less `Date`) and `Retry-After`. Pure functions of the
//! header values and the wall clock the caller passes in.

use std::time::{Duration, SystemTime};

/// The longest freshness or `Retry-After` taken from a server: a hostile
/// or mistaken `max-age=31536000` must not stop polling for a year.
pub const MAX_SERVER_DELAY: Duration = Duration::from_secs(3600);

/// The caching headers of one answer, as sent (the driver keeps each only
/// when it is short, visible ASCII).
#[derive(Debug, Clone, Copy, Default)]
pub struct CachingHeaders<'a> {
    /// `Cache-Control`.
    pub cache_control: Option<&'a str>,
    /// `Age`: seconds the answer has spent in caches.
    pub age: Option<&'a str>,
    /// `Expires`: an HTTP date.
    pub expires: Option<&'a str>,
    /// `Date`: when the origin answered.
    pub date: Option<&'a str>,
}

/// How long the answer stays fresh in a shared cache from `now` (RFC 9111
/// §4.2): `max-age` less `Age`; without `max-age`, `Expires` less `Date`
/// (or less `now` without a `Date`). `None` when it is not fresh, when
/// nothing says, or with `no-cache` / `no-store` (the cache then asks the
/// origin each time, so polling sooner does find newer copies). At most
/// [`MAX_SERVER_DELAY`].
pub fn freshness(h: CachingHeaders<'_>, now: SystemTime) -> Option<Duration> {
    let directives = h.cache_control.unwrap_or_default();
    let mut max_age = None;
    for directive in directives.split(',').map(str::trim) {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        let name = name.trim();
        if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            return None;
        }
        if name.eq_ignore_ascii_case("max-age") {
            max_age = Some(seconds(value.trim().trim_matches('"'))?);
        }
    }
    let fresh = match max_age {
        Some(max_age) => {
            let age = h.age.and_then(|a| seconds(a.trim())).unwrap_or_default();
            max_age.checked_sub(age)?
        }
        None => {
            let expires = httpdate::parse_http_date(h.expires?.trim()).ok()?;
            let date = h
                .date
                .and_then(|d| httpdate::parse_http_date(d.trim()).ok())
                .unwrap_or(now);
            expires.duration_since(date).ok()?
        }
    };
    (!fresh.is_zero()).then(|| fresh.min(MAX_SERVER_DELAY))
}

/// The delay a `Retry-After` value asks for (RFC 9110 §10.2.3): seconds,
/// or an HTTP date less `now`. At most [`MAX_SERVER_DELAY`]; `None` when
/// it is neither.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = match seconds(value) {
        Some(delay) => delay,
        None => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .unwrap_or_default(),
    };
    Some(delay.min(MAX_SERVER_DELAY))
}

/// A delta-seconds value: ASCII digits only (RFC 9111 §1.2.2), saturating.
fn seconds(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(date: &str) -> SystemTime {
        httpdate::parse_http_date(date).unwrap()
    }

    const NOW: &str = "Thu, 26 Nov 2026 12:00:00 GMT";

    fn cc(cache_control: &str, age: Option<&str>) -> Option<Duration> {
        let h = CachingHeaders {
            cache_control: Some(cache_control),
            age,
            ..Default::default()
        };
        freshness(h, at(NOW))
    }

    #[test]
    fn max_age_less_age_is_the_freshness() {
        assert_eq!(
            cc("public, max-age=60", None),
            Some(Duration::from_secs(60))
        );
        assert_eq!(cc("max-age=60", Some("45")), Some(Duration::from_secs(15)));
        assert_eq!(cc("max-age=60", Some("60")), None);
        assert_eq!(cc("max-age=60", Some("600")), None);
        assert_eq!(cc("max-age=-1", None), None);
        assert_eq!(
            cc("max-age=99999999999999999999999", None),
            Some(MAX_SERVER_DELAY)
        );
    }

    #[test]
    fn no_cache_and_no_store_give_no_freshness() {
        assert_eq!(cc("no-cache, max-age=60", None), None);
        assert_eq!(cc("max-age=60, No-Store", None), None);
    }

    #[test]
    fn expires_counts_from_date_and_only_without_max_age() {
        let h = CachingHeaders {
            expires: Some("Thu, 26 Nov 2026 12:00:30 GMT"),
            date: Some("Thu, 26 Nov 2026 12:00:10 GMT"),
            ..Default::default()
        };
        assert_eq!(freshness(h, at(NOW)), Some(Duration::from_secs(20)));
        let no_date = CachingHeaders { date: None, ..h };
        assert_eq!(freshness(no_date, at(NOW)), Some(Duration::from_secs(30)));
        let with_max_age = CachingHeaders {
            cache_control: Some("max-age=5"),
            ..h
        };
        assert_eq!(
            freshness(with_max_age, at(NOW)),
            Some(Duration::from_secs(5))
        );
        let invalid = CachingHeaders {
            expires: Some("0"),
            ..Default::default()
        };
        assert_eq!(freshness(invalid, at(NOW)), None);
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let now = at(NOW);
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Thu, 26 Nov 2026 12:00:07 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after("Thu, 26 Nov 2026 11:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("86400", now), Some(MAX_SERVER_DELAY));
        assert_eq!(retry_after("soon", now), None);
    }
}
