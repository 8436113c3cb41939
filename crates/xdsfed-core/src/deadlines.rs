//! Deadlines keyed by what they are for, earliest first: the timer table
//! of the protocol core's session (all but its does-not-exist timers,
//! which queue in the order armed: `protocol::timers`).
//!
//! There can be a deadline per resource (a TTL), hundreds of thousands at
//! once, most
//! set in one batch for one and the same instant. So the table orders by
//! deadline and then by when each was set, never by key: ordered by key,
//! every insertion and removal compared long names sharing long prefixes at
//! each step of its search. An index from key to place makes setting,
//! cancelling and popping `O(log n)` integer comparisons plus one hash.
//! The index gives its room back once empty ([`release_when_empty`]): the
//! deadlines of a cold start are all cancelled as resources arrive (or
//! expire), and a hash table keeps its largest size otherwise.
//!
//! Deadlines that fall on the same instant come out in the order they were
//! set.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use xdsfed_core::deadlines::Deadlines;
//!
//! let t0 = Instant::now();
//! let mut timers = Deadlines::default();
//! timers.set("b", t0);
//! timers.set("a", t0);
//! timers.set("late", t0 + Duration::from_secs(5));
//! assert_eq!(timers.pop_expired(t0), Some("b"));
//! timers.cancel(&"a");
//! assert_eq!(timers.pop_expired(t0), None);
//! assert_eq!(timers.first(), Some((t0 + Duration::from_secs(5), &"late")));
//! ```

use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::Instant;

use crate::hash::{HashMap, release_when_empty};

/// Where a deadline sits: its instant, then its setting's sequence number.
type Place = (Instant, u64);

/// Deadlines keyed by `K`, earliest first. See the [module docs](self).
#[derive(Debug)]
pub struct Deadlines<K> {
    queue: BTreeMap<Place, K>,
    at: HashMap<K, Place>,
    /// How many deadlines were ever set: each setting's place is unique.
    sets: u64,
}

impl<K> Default for Deadlines<K> {
    fn default() -> Self {
        Self {
            queue: BTreeMap::new(),
            at: HashMap::default(),
            sets: 0,
        }
    }
}

impl<K: Hash + Eq + Clone> Deadlines<K> {
    /// Sets `key`'s deadline, replacing an earlier one. Returns whether
    /// `key` had none.
    pub fn set(&mut self, key: K, deadline: Instant) -> bool {
        self.sets += 1;
        let place = (deadline, self.sets);
        let old = self.at.insert(key.clone(), place);
        if let Some(old) = &old {
            self.queue.remove(old);
        }
        self.queue.insert(place, key);
        old.is_none()
    }

    /// Cancels `key`'s deadline. Returns whether it had one.
    pub fn cancel(&mut self, key: &K) -> bool {
        if self.at.is_empty() {
            return false;
        }
        let Some(old) = self.at.remove(key) else {
            return false;
        };
        self.queue.remove(&old);
        release_when_empty(&mut self.at);
        true
    }

    /// Makes room for `more` deadlines in the index at once, rather than
    /// the table doubling its way there (hashing every key again at each
    /// step).
    pub fn reserve(&mut self, more: usize) {
        self.at.reserve(more);
    }

    /// The earliest deadline and its key.
    pub fn first(&self) -> Option<(Instant, &K)> {
        self.queue
            .first_key_value()
            .map(|((deadline, _), key)| (*deadline, key))
    }

    /// Removes and returns a key whose deadline is at or before `now`.
    pub fn pop_expired(&mut self, now: Instant) -> Option<K> {
        let (deadline, _) = self.first()?;
        if deadline > now {
            return None;
        }
        let (_, key) = self.queue.pop_first()?;
        self.at.remove(&key);
        release_when_empty(&mut self.at);
        Some(key)
    }

    /// Keeps the deadlines whose keys `keep` accepts. Linear in how many
    /// there are.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.queue.retain(|_, key| keep(key));
        self.at.retain(|key, _| keep(key));
        release_when_empty(&mut self.at);
    }

    /// Whether `key` has a deadline.
    pub fn contains(&self, key: &K) -> bool {
        self.at.contains_key(key)
    }

    /// How many deadlines there are.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn deadlines_pop_in_order_ties_in_setting_order_and_only_when_due() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        assert!(d.set("late", t0 + Duration::from_secs(2)));
        assert!(d.set("b", t0));
        assert!(d.set("a", t0));
        assert_eq!(d.first(), Some((t0, &"b")));
        assert_eq!(d.pop_expired(t0), Some("b"));
        assert_eq!(d.pop_expired(t0), Some("a"));
        assert_eq!(d.pop_expired(t0), None);
        assert_eq!(d.pop_expired(t0 + Duration::from_secs(2)), Some("late"));
        assert!(d.is_empty());
    }

    #[test]
    fn setting_again_replaces_and_cancelling_forgets() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        assert!(d.set("a", t0));
        assert!(!d.set("a", t0 + Duration::from_secs(9)));
        assert_eq!(d.len(), 1);
        assert_eq!(d.pop_expired(t0 + Duration::from_secs(1)), None);
        assert!(d.cancel(&"a"));
        assert!(!d.cancel(&"a"));
        assert_eq!(d.first(), None);
    }

    #[test]
    fn the_index_gives_its_room_back_once_empty() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        d.reserve(10_000);
        for i in 0..10_000u32 {
            d.set(i, t0);
        }
        for i in 0..9_990u32 {
            d.cancel(&i);
        }
        d.retain(|k| k % 2 == 0);
        assert_eq!(d.len(), 5);
        assert!(d.at.capacity() > 0);
        assert_eq!(d.pop_expired(t0), Some(9_990));
        while d.pop_expired(t0).is_some() {}
        assert_eq!(d.at.capacity(), 0);
    }
}
