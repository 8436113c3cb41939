//! The core's timers.
//!
//! Every deadline the protocol core keeps lives here, in two tables: a
//! does-not-exist timer per requested-but-unseen resource (gRFC A57), a
//! TTL expiry per resource the server gave a TTL, and the stream's own
//! deadlines (the handshake, the first response). There can be hundreds of thousands of each.
//! TTLs and the stream's deadlines are a [`Deadlines`] (earliest first,
//! ties in the order set).
//!
//! Does-not-exist timers have a table of their own, [`Absences`] (its
//! module says how and why), because of how they are used: a cold start
//! arms one per resource, all for the same instant, and stops each as its
//! resource arrives a moment later. Arming and stopping cost one hash
//! operation each, where an ordered map cost a tree insertion and removal
//! besides. Rule: a timer fires only if its name is armed by that very
//! arming; a name stopped, or armed again since, does not fire early; names
//! that never arrive hold about 56 bytes each until
//! they fire. [`Session::poll_timeout`](super::Session::poll_timeout) is
//! the earlier of the two tables' first deadlines; a skipped entry can
//! make it early once (a spurious wake-up is a no-op). Of two timers due
//! at the same instant, one of each table, the does-not-exist timer comes
//! second.

use std::time::Instant;

use super::absences::Absences;
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
    absences: Absences,
    /// How many TTL timers are armed: most resources have none, and
    /// disarming the TTL of each accepted resource then costs nothing.
    ttls: usize,
}

impl Timers {
    /// Arms `timer` for `deadline`, replacing an earlier arming of it.
    pub(crate) fn set(&mut self, timer: Timer, deadline: Instant) {
        if let Timer::DoesNotExist(key) = timer {
            return self.absences.set(key, deadline);
        }
        let ttl = matches!(timer, Timer::TtlExpiry(_));
        if self.deadlines.set(timer, deadline) && ttl {
            self.ttls += 1;
        }
    }

    /// Makes room for `more` timers at once: a cold start arms one per
    /// resource.
    pub(crate) fn reserve_does_not_exist(&mut self, more: usize) {
        self.absences.reserve(more);
    }

    /// Disarms `timer`; disarming an unarmed timer does nothing.
    pub(crate) fn cancel(&mut self, timer: &Timer) {
        if let Timer::DoesNotExist(key) = timer {
            self.absences.cancel(key);
        } else if self.deadlines.cancel(timer) {
            self.forget(timer);
        }
    }

    /// Disarms the does-not-exist timer of `key`, if armed; as
    /// [`Timers::cancel`], without making a `Timer` of a copy of the key.
    pub(crate) fn stop_does_not_exist(&mut self, key: &ResourceKey) {
        self.absences.cancel(key);
    }

    /// Whether any does-not-exist timer is armed: when none is, a caller
    /// need not work out which to stop.
    pub(crate) fn any_does_not_exist(&self) -> bool {
        !self.absences.is_empty()
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
        match timer {
            Timer::DoesNotExist(key) => self.absences.is_armed(key),
            _ => self.deadlines.contains(timer),
        }
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let other = self.deadlines.first().map(|(deadline, _)| deadline);
        match (self.absences.first(), other) {
            (Some(a), Some(o)) => Some(a.min(o)),
            (a, o) => a.or(o),
        }
    }

    /// Removes and returns a timer whose deadline is at or before `now`;
    /// of a does-not-exist timer and another due at the same instant, the
    /// other first.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        loop {
            let other = self.deadlines.first().map(|(deadline, _)| deadline);
            match self.absences.first() {
                Some(a) if a <= now && other.is_none_or(|o| a < o) => {
                    if let Some(key) = self.absences.pop_front() {
                        return Some(Timer::DoesNotExist(key));
                    }
                }
                _ => {
                    let timer = self.deadlines.pop_expired(now)?;
                    self.forget(&timer);
                    return Some(timer);
                }
            }
        }
    }

    /// Disarms every does-not-exist timer (the stream failed, gRFC A57).
    pub(crate) fn cancel_does_not_exist(&mut self) {
        self.absences.clear();
    }

    /// How many timers are armed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.deadlines.len() + self.absences.len()
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

    #[test]
    fn a_stopped_or_rearmed_does_not_exist_timer_does_not_fire_early() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut timers = Timers::default();
        timers.set(Timer::DoesNotExist(key("a")), t0 + s(1));
        timers.set(Timer::DoesNotExist(key("b")), t0 + s(1));
        timers.set(Timer::DoesNotExist(key("c")), t0 + s(1));
        timers.cancel(&Timer::DoesNotExist(key("b")));
        // Stopped, then armed again later: only the second arming counts.
        timers.cancel(&Timer::DoesNotExist(key("c")));
        timers.set(Timer::DoesNotExist(key("c")), t0 + s(3));
        assert_eq!(timers.len(), 2);
        assert_eq!(
            timers.pop_expired(t0 + s(2)),
            Some(Timer::DoesNotExist(key("a")))
        );
        assert_eq!(timers.pop_expired(t0 + s(2)), None);
        assert_eq!(timers.next_deadline(), Some(t0 + s(3)));
        assert_eq!(
            timers.pop_expired(t0 + s(3)),
            Some(Timer::DoesNotExist(key("c")))
        );
        assert_eq!(timers.len(), 0);
        assert_eq!(timers.next_deadline(), None);
    }

    #[test]
    fn does_not_exist_timers_hold_nothing_once_all_are_stopped() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.reserve_does_not_exist(3);
        for name in ["a", "b", "c"] {
            timers.set(Timer::DoesNotExist(key(name)), t0);
        }
        for name in ["b", "a", "c"] {
            timers.cancel(&Timer::DoesNotExist(key(name)));
        }
        assert_eq!(timers.next_deadline(), None);
        assert_eq!(timers.absences.capacity(), (0, 0));
    }

    #[test]
    fn does_not_exist_timers_stay_in_deadline_order_when_the_clock_goes_back() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut timers = Timers::default();
        timers.set(Timer::DoesNotExist(key("late")), t0 + s(5));
        timers.set(Timer::DoesNotExist(key("early")), t0 + s(1));
        timers.set(Timer::TtlExpiry(key("ttl")), t0 + s(1));
        assert_eq!(timers.next_deadline(), Some(t0 + s(1)));
        assert_eq!(
            timers.pop_expired(t0 + s(1)),
            Some(Timer::TtlExpiry(key("ttl")))
        );
        assert_eq!(
            timers.pop_expired(t0 + s(1)),
            Some(Timer::DoesNotExist(key("early")))
        );
        assert_eq!(timers.pop_expired(t0 + s(4)), None);
        assert_eq!(
            timers.pop_expired(t0 + s(5)),
            Some(Timer::DoesNotExist(key("late")))
        );
    }
}
