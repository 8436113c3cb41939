//! Does-not-exist timers (gRFC A57): one per requested name not seen yet.
//!
//! A cold start arms one per resource, all for about the same instant, and
//! stops each as its resource arrives a moment later: a million names are
//! a million armings and a million stops within a second. Deadlines are
//! the session's `now` plus its fixed timeout, so they queue in the order
//! armed, and the n-th arming is the n-th entry of the queue: the table of
//! armed names holds arming numbers only (8 bytes a slot), and finds a
//! name's entry in the queue by its number. A table of names and numbers
//! took 40 bytes a slot, 80 MB for a million names, far past the
//! processor's caches, and stops came in the order of arming anyway.
//!
//! Rules:
//! - a timer fires only if its name is armed by that very arming: a name
//!   stopped, or armed again since, does not fire early (its entry stays in
//!   the queue until it comes due, and is skipped then);
//! - the queue is given back when no name is armed, so after a cold start
//!   whose resources all arrived it holds nothing; a name that never
//!   arrives holds about 56 bytes until it fires;
//! - an arming whose deadline comes before the last one's (a caller whose
//!   clock went back) still fires at its own deadline: it is also kept in
//!   a small ordered set, read before the queue.

use std::collections::{BTreeSet, VecDeque};
use std::hash::BuildHasher;
use std::time::Instant;

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::event::ResourceKey;
use crate::hash::NameHasher;

/// Does-not-exist deadlines in the order armed (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Absences {
    /// Deadline and name of each arming, in the order armed: the entry at
    /// index `i` is arming number `first + i`.
    queue: VecDeque<(Instant, ResourceKey)>,
    /// The arming number of the queue's first entry.
    first: u64,
    /// The arming number of each armed name.
    armed: HashTable<u64>,
    hasher: NameHasher,
    /// Armings whose deadline is before an earlier arming's, by deadline.
    early: BTreeSet<(Instant, u64)>,
    /// The latest deadline queued in order (not in `early`).
    latest: Option<Instant>,
}

impl Absences {
    /// The name of arming number `arming`, while its entry is queued.
    fn name_of(
        queue: &VecDeque<(Instant, ResourceKey)>,
        first: u64,
        arming: u64,
    ) -> Option<&ResourceKey> {
        let at = usize::try_from(arming.checked_sub(first)?).ok()?;
        queue.get(at).map(|(_, key)| key)
    }

    /// The arming number `key` is armed by, if it is.
    fn arming_of(&self, key: &ResourceKey) -> Option<u64> {
        if self.armed.is_empty() {
            return None;
        }
        let (queue, first) = (&self.queue, self.first);
        self.armed
            .find(self.hasher.hash_one(key), |&a| {
                Self::name_of(queue, first, a) == Some(key)
            })
            .copied()
    }

    /// Forgets `key`'s arming; whether it had one.
    fn disarm(&mut self, key: &ResourceKey) -> bool {
        if self.armed.is_empty() {
            return false;
        }
        let (queue, first) = (&self.queue, self.first);
        let hash = self.hasher.hash_one(key);
        match self
            .armed
            .find_entry(hash, |&a| Self::name_of(queue, first, a) == Some(key))
        {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Arms `key` for `deadline`, replacing an earlier arming of it: one
    /// probe of the table either way.
    pub(super) fn set(&mut self, key: ResourceKey, deadline: Instant) {
        let arming = self.first + self.queue.len() as u64;
        let hash = self.hasher.hash_one(&key);
        let (queue, first, hasher) = (&self.queue, self.first, &self.hasher);
        match self.armed.entry(
            hash,
            |&a| Self::name_of(queue, first, a) == Some(&key),
            |&a| Self::name_of(queue, first, a).map_or(0, |key| hasher.hash_one(key)),
        ) {
            Entry::Occupied(mut earlier) => *earlier.get_mut() = arming,
            Entry::Vacant(slot) => {
                slot.insert(arming);
            }
        }
        match self.latest {
            Some(latest) if latest > deadline => {
                self.early.insert((deadline, arming));
            }
            _ => self.latest = Some(deadline),
        }
        self.queue.push_back((deadline, key));
    }

    pub(super) fn reserve(&mut self, more: usize) {
        let (queue, first, hasher) = (&self.queue, self.first, &self.hasher);
        self.armed.reserve(more, |&a| {
            Self::name_of(queue, first, a).map_or(0, |key| hasher.hash_one(key))
        });
        self.queue.reserve(more);
    }

    pub(super) fn cancel(&mut self, key: &ResourceKey) {
        // Past a cold start none is armed, and then no key is hashed.
        if self.disarm(key) && self.armed.is_empty() {
            self.clear();
        }
    }

    pub(super) fn clear(&mut self) {
        self.first += self.queue.len() as u64;
        self.armed = HashTable::new();
        self.queue = VecDeque::new();
        self.early.clear();
        self.latest = None;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.armed.len()
    }

    #[cfg(test)]
    pub(super) fn is_armed(&self, key: &ResourceKey) -> bool {
        self.arming_of(key).is_some()
    }

    /// The room the queue and the table keep.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> (usize, usize) {
        (self.queue.capacity(), self.armed.capacity())
    }

    /// The earliest deadline queued.
    pub(super) fn first(&self) -> Option<Instant> {
        let queued = self.queue.front().map(|(deadline, _)| *deadline);
        match (self.early.first().map(|(deadline, _)| *deadline), queued) {
            (Some(e), Some(q)) => Some(e.min(q)),
            (e, q) => e.or(q),
        }
    }

    /// Takes the earliest entry: its name, if that entry is its arming now.
    pub(super) fn pop_front(&mut self) -> Option<ResourceKey> {
        let queued = self.queue.front().map(|(deadline, _)| *deadline);
        let key = match self.early.first().copied() {
            Some((deadline, arming)) if queued.is_none_or(|q| deadline < q) => {
                self.early.pop_first();
                let key = Self::name_of(&self.queue, self.first, arming)
                    .filter(|key| self.arming_of(key) == Some(arming))
                    .cloned()?;
                // Its entry stays queued, skipped when it comes to the front.
                self.cancel(&key);
                key
            }
            _ => {
                let (_, key) = self.queue.pop_front()?;
                let arming = self.first;
                self.first += 1;
                self.forget_arming(&key, arming).then_some(key)?
            }
        };
        Some(key)
    }

    /// Forgets arming number `arming` of `key`, whose entry just left the
    /// queue, if that is how `key` is armed; says whether it was.
    fn forget_arming(&mut self, key: &ResourceKey, arming: u64) -> bool {
        let hash = self.hasher.hash_one(key);
        match self.armed.find_entry(hash, |&a| a == arming) {
            Ok(entry) => {
                entry.remove();
                if self.armed.is_empty() {
                    self.clear();
                }
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(name: &str) -> ResourceKey {
        ResourceKey::new("type.googleapis.com/envoy.config.cluster.v3.Cluster", name)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// What fires by `now`, in order.
    fn due(a: &mut Absences, now: Instant) -> Vec<String> {
        let mut fired = Vec::new();
        while a.first().is_some_and(|first| first <= now) {
            if let Some(key) = a.pop_front() {
                fired.push(key.name.to_string());
            }
        }
        fired
    }

    /// A name armed again fires at its new deadline only; a stopped name
    /// never; the others in order.
    #[test]
    fn only_the_latest_arming_of_a_name_fires() {
        let t0 = Instant::now();
        let mut a = Absences::default();
        a.set(key("a"), t0 + secs(1));
        a.set(key("b"), t0 + secs(1));
        a.set(key("c"), t0 + secs(2));
        a.cancel(&key("b"));
        a.set(key("a"), t0 + secs(3));
        assert_eq!(a.len(), 2);
        assert_eq!(due(&mut a, t0 + secs(1)), Vec::<String>::new());
        assert_eq!(due(&mut a, t0 + secs(2)), ["c"]);
        assert!(a.is_armed(&key("a")));
        assert_eq!(due(&mut a, t0 + secs(3)), ["a"]);
        assert!(a.is_empty());
        assert_eq!(a.first(), None);
    }

    /// A caller whose clock went back: each arming fires at its own
    /// deadline, whatever came before it, and one stopped does not.
    #[test]
    fn armings_out_of_order_fire_at_their_own_deadlines() {
        let t0 = Instant::now();
        let mut a = Absences::default();
        a.set(key("five"), t0 + secs(5));
        a.set(key("one"), t0 + secs(1));
        a.set(key("three"), t0 + secs(3));
        a.set(key("two"), t0 + secs(2));
        a.set(key("four"), t0 + secs(4));
        a.cancel(&key("four"));
        assert_eq!(a.first(), Some(t0 + secs(1)));
        assert_eq!(due(&mut a, t0 + secs(1)), ["one"]);
        assert_eq!(due(&mut a, t0 + secs(2)), ["two"]);
        assert_eq!(due(&mut a, t0 + secs(3)), ["three"]);
        assert_eq!(due(&mut a, t0 + secs(4)), Vec::<String>::new());
        assert_eq!(due(&mut a, t0 + secs(5)), ["five"]);
        assert!(a.is_empty());
    }

    /// A cold start: every name armed, every one stopped in the order its
    /// resource arrives; nothing is left, and the room is given back. Then
    /// the numbering goes on: a name armed after fires.
    #[test]
    fn a_cold_start_stopped_whole_holds_nothing() {
        let t0 = Instant::now();
        let mut a = Absences::default();
        a.reserve(10_000);
        for i in 0..10_000 {
            a.set(key(&format!("c{i}")), t0 + secs(15));
        }
        assert_eq!(a.len(), 10_000);
        for i in (0..10_000).rev().step_by(2).chain((0..10_000).step_by(2)) {
            assert!(a.is_armed(&key(&format!("c{i}"))), "c{i}");
            a.cancel(&key(&format!("c{i}")));
        }
        assert!(a.is_empty());
        assert_eq!(a.capacity(), (0, 0));
        a.set(key("late"), t0 + secs(20));
        assert_eq!(due(&mut a, t0 + secs(20)), ["late"]);
    }
}
