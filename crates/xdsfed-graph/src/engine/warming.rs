//! The warming deadlines of the cold live nodes, earliest first.
//!
//! A cold start makes every node cold at once, with one and the same
//! deadline. Ordered by deadline and then by node, every insertion and
//! removal compared long names sharing long prefixes at each step of its
//! search; ordered by deadline and then by when the timer was set, with an
//! index from node to its place, each costs a hash and integer comparisons.
//! The index gives its room back as the nodes warm: a hash table keeps its
//! largest size otherwise, and every node of a cold start was once in it.

use std::collections::BTreeMap;
use std::time::Instant;

use xdsfed_core::hash::HashMap;

use crate::edges::Key;

/// Where a timer sits: its deadline, then its setting's sequence number.
type Place = (Instant, u64);

/// One warming deadline per cold node.
#[derive(Debug, Default)]
pub(super) struct WarmingTimers {
    queue: BTreeMap<Place, Key>,
    at: HashMap<Key, Place>,
    /// How many timers were ever set: each setting's place is unique.
    sets: u64,
}

impl WarmingTimers {
    /// Arms `key`'s timer for `deadline`, replacing an earlier arming.
    pub(super) fn insert(&mut self, deadline: Instant, key: Key) {
        self.sets += 1;
        let place = (deadline, self.sets);
        if let Some(old) = self.at.insert(key.clone(), place) {
            self.queue.remove(&old);
        }
        self.queue.insert(place, key);
    }

    /// Disarms `key`'s timer, if armed.
    pub(super) fn remove(&mut self, key: &Key) {
        if let Some(old) = self.at.remove(key) {
            self.queue.remove(&old);
            xdsfed_core::hash::shrink_when_sparse(&mut self.at);
        }
    }

    /// The earliest deadline and its node.
    pub(super) fn first(&self) -> Option<(Instant, &Key)> {
        self.queue
            .first_key_value()
            .map(|((deadline, _), key)| (*deadline, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ResourceKind;
    use std::sync::Arc;
    use std::time::Duration;

    fn key(name: &str) -> Key {
        Key::new(ResourceKind::Cluster, Arc::from(name))
    }

    #[test]
    fn the_earliest_comes_first_and_ties_in_setting_order() {
        let t0 = Instant::now();
        let mut timers = WarmingTimers::default();
        timers.insert(t0 + Duration::from_secs(2), key("late"));
        timers.insert(t0, key("b"));
        timers.insert(t0, key("a"));
        assert_eq!(timers.first(), Some((t0, &key("b"))));
        timers.remove(&key("b"));
        assert_eq!(timers.first(), Some((t0, &key("a"))));
        // Armed again: the new deadline replaces the old.
        timers.insert(t0 + Duration::from_secs(5), key("a"));
        assert_eq!(
            timers.first(),
            Some((t0 + Duration::from_secs(2), &key("late")))
        );
        timers.remove(&key("late"));
        timers.remove(&key("late"));
        assert_eq!(
            timers.first(),
            Some((t0 + Duration::from_secs(5), &key("a")))
        );
        timers.remove(&key("a"));
        assert_eq!(timers.first(), None);
    }
}
