//! The core's one timer table.
//!
//! Every deadline the protocol core keeps lives here: a does-not-exist timer
//! per requested-but-unseen resource (gRFC A57), a TTL expiry per resource
//! the server gave a TTL, and the stream's own deadlines (the handshake,
//! the first response). There can be hundreds of thousands of each; the
//! table is a [`Deadlines`] (earliest first, ties in the order set), and
//! [`Session::poll_timeout`](super::Session::poll_timeout) is its minimum.

use std::time::Instant;

use super::event::ResourceKey;
use crate::deadlines::Deadlines;

/// What a deadline is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Timer {
    /// The resource was requested on a connected stream and has not arrived.
    DoesNotExist(ResourceKey),
    /// The resource's TTL passes without a refresh.
    TtlExpiry(ResourceKey),
    /// The new stream is still unanswered: no response headers, no response.
    Handshake,
    /// The accepted stream still has no response.
    FirstResponse,
}

/// Deadlines, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    deadlines: Deadlines<Timer>,
    /// How many TTL timers are armed: most resources have none, and
    /// disarming the TTL of each accepted resource then costs nothing.
    ttls: usize,
}

impl Timers {
    /// Arms `timer` for `deadline`, replacing an earlier arming of it.
    pub(crate) fn set(&mut self, timer: Timer, deadline: Instant) {
        let ttl = matches!(timer, Timer::TtlExpiry(_));
        if self.deadlines.set(timer, deadline) && ttl {
            self.ttls += 1;
        }
    }

    /// Makes room for `more` timers at once: a cold start arms one per
    /// resource.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.deadlines.reserve(more);
    }

    /// Disarms `timer`; disarming an unarmed timer does nothing.
    pub(crate) fn cancel(&mut self, timer: &Timer) {
        if self.deadlines.cancel(timer) {
            self.forget(timer);
        }
    }

    /// Disarms the TTL timer of `key`, if armed.
    pub(crate) fn cancel_ttl(&mut self, key: &ResourceKey) {
        if self.ttls > 0 {
            self.cancel(&Timer::TtlExpiry(key.clone()));
        }
    }

    /// Counts `timer`, just disarmed, out.
    fn forget(&mut self, timer: &Timer) {
        if matches!(timer, Timer::TtlExpiry(_)) {
            self.ttls -= 1;
        }
    }

    /// Whether `timer` is armed.
    #[cfg(test)]
    pub(crate) fn is_armed(&self, timer: &Timer) -> bool {
        self.deadlines.contains(timer)
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(deadline, _)| deadline)
    }

    /// Removes and returns a timer whose deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        let timer = self.deadlines.pop_expired(now)?;
        self.forget(&timer);
        Some(timer)
    }

    /// Disarms every does-not-exist timer (the stream failed, gRFC A57).
    /// Linear in the number of armed timers, which only a stream failure pays.
    pub(crate) fn cancel_does_not_exist(&mut self) {
        self.deadlines
            .retain(|t| !matches!(t, Timer::DoesNotExist(_)));
    }

    /// How many timers are armed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.deadlines.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(n: &str) -> ResourceKey {
        ResourceKey::new("t", n)
    }

    #[test]
    fn timers_pop_in_deadline_order_and_only_when_due() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.set(Timer::TtlExpiry(key("b")), t0 + Duration::from_secs(2));
        timers.set(Timer::DoesNotExist(key("a")), t0 + Duration::from_secs(1));
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(timers.pop_expired(t0), None);
        assert_eq!(
            timers.pop_expired(t0 + Duration::from_secs(5)),
            Some(Timer::DoesNotExist(key("a")))
        );
        assert_eq!(
            timers.pop_expired(t0 + Duration::from_secs(5)),
            Some(Timer::TtlExpiry(key("b")))
        );
        assert_eq!(timers.pop_expired(t0 + Duration::from_secs(5)), None);
    }

    #[test]
    fn timers_set_again_replaces_the_deadline() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.set(Timer::TtlExpiry(key("a")), t0 + Duration::from_secs(1));
        timers.set(Timer::TtlExpiry(key("a")), t0 + Duration::from_secs(9));
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.pop_expired(t0 + Duration::from_secs(2)), None);
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_secs(9)));
    }

    #[test]
    fn ttl_timers_are_counted_through_every_way_out() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.set(Timer::TtlExpiry(key("a")), t0);
        timers.set(Timer::TtlExpiry(key("a")), t0);
        timers.set(Timer::TtlExpiry(key("b")), t0 + Duration::from_secs(9));
        timers.set(Timer::DoesNotExist(key("c")), t0);
        assert_eq!(timers.ttls, 2);
        assert_eq!(timers.pop_expired(t0), Some(Timer::TtlExpiry(key("a"))));
        assert_eq!(timers.ttls, 1);
        timers.cancel_ttl(&key("b"));
        assert_eq!(timers.ttls, 0);
        assert!(timers.is_armed(&Timer::DoesNotExist(key("c"))));
        timers.set(Timer::TtlExpiry(key("d")), t0);
        timers.cancel_ttl(&key("d"));
        assert_eq!(timers.len(), 1);
    }

    #[test]
    fn timers_cancel_does_not_exist_keeps_ttl_timers() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.set(Timer::TtlExpiry(key("a")), t0);
        timers.set(Timer::DoesNotExist(key("b")), t0);
        timers.cancel_does_not_exist();
        assert!(timers.is_armed(&Timer::TtlExpiry(key("a"))));
        assert!(!timers.is_armed(&Timer::DoesNotExist(key("b"))));
        assert_eq!(timers.len(), 1);
    }
}
