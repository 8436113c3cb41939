//! The core's one timer table.
//!
//! Every deadline the protocol core keeps lives here: a does-not-exist timer
//! per requested-but-unseen resource (gRFC A57), a TTL expiry per resource
//! the server gave a TTL, and the stream's own deadlines (the handshake,
//! the first response). There can be hundreds of thousands of each, so the
//! table is a sorted map (earliest first) plus an index from timer to its
//! place in it: setting, cancelling and popping are all `O(log n)`, and
//! [`Session::poll_timeout`](super::Session::poll_timeout) is the minimum.
//!
//! The sorted map orders by deadline and then by when the timer was set,
//! never by the timer itself: a cold start arms a timer per resource for one
//! and the same deadline, and ordering those by key compared long names
//! sharing long prefixes at every step of every search.

use crate::hash::HashMap;
use std::collections::BTreeMap;
use std::time::Instant;

use super::event::ResourceKey;

/// What a deadline is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    queue: BTreeMap<Place, Timer>,
    at: HashMap<Timer, Place>,
    /// How many timers were ever set: each setting's place is unique.
    sets: u64,
    /// How many TTL timers are armed: most resources have none, and
    /// disarming the TTL of each accepted resource then costs nothing.
    ttls: usize,
}

/// Where a timer sits in the queue: its deadline, then its setting's
/// sequence number.
type Place = (Instant, u64);

impl Timers {
    /// Arms `timer` for `deadline`, replacing an earlier arming of it.
    pub(crate) fn set(&mut self, timer: Timer, deadline: Instant) {
        self.sets += 1;
        let place = (deadline, self.sets);
        match self.at.insert(timer.clone(), place) {
            Some(old) => {
                self.queue.remove(&old);
            }
            None => self.ttls += usize::from(matches!(timer, Timer::TtlExpiry(_))),
        }
        self.queue.insert(place, timer);
    }

    /// Makes room for `more` timers in the index at once: a cold start arms
    /// one per resource, and a table doubling its way to a million would
    /// hash every name again at each step.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.at.reserve(more);
    }

    /// Disarms `timer`; disarming an unarmed timer does nothing.
    pub(crate) fn cancel(&mut self, timer: &Timer) {
        if self.at.is_empty() {
            return;
        }
        if let Some(old) = self.at.remove(timer) {
            self.queue.remove(&old);
            self.forget(timer);
            crate::hash::shrink_when_sparse(&mut self.at);
        }
    }

    /// Disarms the TTL timer of `key`, if armed.
    pub(crate) fn cancel_ttl(&mut self, key: &ResourceKey) {
        if self.ttls > 0 {
            self.cancel(&Timer::TtlExpiry(key.clone()));
        }
    }

    /// Counts `timer`, just removed from the index, out.
    fn forget(&mut self, timer: &Timer) {
        if matches!(timer, Timer::TtlExpiry(_)) {
            self.ttls -= 1;
        }
    }

    /// Whether `timer` is armed.
    #[cfg(test)]
    pub(crate) fn is_armed(&self, timer: &Timer) -> bool {
        self.at.contains_key(timer)
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.queue.first_key_value().map(|((at, _), _)| *at)
    }

    /// Removes and returns a timer whose deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        let ((deadline, _), _) = self.queue.first_key_value()?;
        if *deadline > now {
            return None;
        }
        let (_, timer) = self.queue.pop_first()?;
        self.at.remove(&timer);
        self.forget(&timer);
        crate::hash::shrink_when_sparse(&mut self.at);
        Some(timer)
    }

    /// Disarms every does-not-exist timer (the stream failed, gRFC A57).
    /// Linear in the number of armed timers, which only a stream failure pays.
    pub(crate) fn cancel_does_not_exist(&mut self) {
        self.queue
            .retain(|_, t| !matches!(t, Timer::DoesNotExist(_)));
        self.at.retain(|t, _| !matches!(t, Timer::DoesNotExist(_)));
        crate::hash::shrink_when_sparse(&mut self.at);
    }

    /// How many timers are armed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.at.len()
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
