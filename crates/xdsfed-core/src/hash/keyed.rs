//! A table of boxed values that carry their own key.
//!
//! Tables that hold a value per resource box it either way (a table that
//! grows to a million entries then moves pointers, not values, when it
//! rehashes). Keeping the key in the box beside the value, rather than in
//! the table beside the pointer, makes a slot of the table 8 bytes instead
//! of 40 for a [`ResourceKey`](crate::protocol::ResourceKey): a million
//! entries take a table of 16 MB instead of 80, a size the processor's
//! last-level cache can still hold much of, where a lookup of a table five
//! times larger goes to memory. Comparing keys reads the box, which the
//! caller reads next anyway. Rule: one key, one box; `insert` replaces.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::NameHasher;

/// A value and the key it is held under.
struct Keyed<K, V> {
    key: K,
    value: V,
}

/// Boxed values, each with its key, hashed by [`NameHasher`]; it answers
/// as a `HashMap<K, Box<V>>` would, with a slot of one pointer.
///
/// ```
/// use xdsfed_core::hash::KeyedTable;
///
/// let mut table = KeyedTable::default();
/// table.insert("a".to_string(), 1);
/// table.insert("a".to_string(), 2);
/// assert_eq!(table.get(&"a".to_string()), Some(&2));
/// assert_eq!(table.len(), 1);
/// ```
pub struct KeyedTable<K, V> {
    table: HashTable<Box<Keyed<K, V>>>,
    hasher: NameHasher,
}

impl<K, V> Default for KeyedTable<K, V> {
    fn default() -> Self {
        KeyedTable {
            table: HashTable::new(),
            hasher: NameHasher::default(),
        }
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for KeyedTable<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Hash + Eq, V> KeyedTable<K, V> {
    fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &K) -> bool {
        self.get_key_value(key).is_some()
    }

    /// The value of `key`.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.get_key_value(key).map(|(_, value)| value)
    }

    /// The value of `key`, with the key as the table holds it.
    pub fn get_key_value(&self, key: &K) -> Option<(&K, &V)> {
        if self.table.is_empty() {
            return None;
        }
        self.table
            .find(self.hash(key), |held| held.key == *key)
            .map(|held| (&held.key, &held.value))
    }

    /// The value of `key`, to change in place.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        if self.table.is_empty() {
            return None;
        }
        let hash = self.hash(key);
        self.table
            .find_mut(hash, |held| held.key == *key)
            .map(|held| &mut held.value)
    }

    /// Holds `value` under `key`, replacing what was held.
    pub fn insert(&mut self, key: K, value: V) {
        let hash = self.hash(&key);
        let hasher = &self.hasher;
        match self.table.entry(
            hash,
            |held| held.key == key,
            |held| hasher.hash_one(&held.key),
        ) {
            Entry::Occupied(mut held) => held.get_mut().value = value,
            Entry::Vacant(slot) => {
                slot.insert(Box::new(Keyed { key, value }));
            }
        }
    }

    /// Forgets `key`; its value, if it had one.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.remove_entry(key).map(|(_, value)| value)
    }

    /// Forgets `key`; the key as held and its value, if it had one.
    pub fn remove_entry(&mut self, key: &K) -> Option<(K, V)> {
        if self.table.is_empty() {
            return None;
        }
        let hash = self.hash(key);
        let held = self
            .table
            .find_entry(hash, |held| held.key == *key)
            .ok()?
            .remove()
            .0;
        let Keyed { key, value } = *held;
        Some((key, value))
    }
}

impl<K, V> KeyedTable<K, V> {
    /// Every key and value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.table.iter().map(|held| (&held.key, &held.value))
    }

    /// Every key and value, the values to change in place.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.table.iter_mut().map(|held| {
            let Keyed { key, value } = &mut **held;
            (&*key, value)
        })
    }

    /// Every key, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.table.iter().map(|held| &held.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ResourceKey;

    fn key(name: &str) -> ResourceKey {
        ResourceKey::new("type.googleapis.com/envoy.config.cluster.v3.Cluster", name)
    }

    /// It answers as a map would: one value per key, replaced by a second
    /// insert, found under an equal key that is another copy, gone once
    /// removed; and a slot is one pointer.
    #[test]
    fn it_holds_one_value_per_key_as_a_map_does() {
        let mut table = KeyedTable::default();
        for i in 0..1000 {
            table.insert(key(&format!("c{i}")), i);
        }
        table.insert(key("c7"), 70);
        assert_eq!(table.len(), 1000);
        assert_eq!(table.get(&key("c7")), Some(&70));
        assert_eq!(table.get(&key("c8")), Some(&8));
        assert!(!table.contains_key(&key("c1000")));
        if let Some(value) = table.get_mut(&key("c9")) {
            *value = 90;
        }
        assert_eq!(table.remove_entry(&key("c9")), Some((key("c9"), 90)));
        assert_eq!(table.remove(&key("c9")), None);
        assert_eq!(table.len(), 999);
        let sum: usize = table.iter().map(|(_, v)| *v).sum();
        assert_eq!(sum, (0..1000).sum::<usize>() - 7 + 70 - 9);
        for (_, value) in table.iter_mut() {
            *value = 0;
        }
        assert!(table.iter().all(|(_, v)| *v == 0));
        assert_eq!(table.keys().count(), 999);
        assert_eq!(std::mem::size_of::<Box<Keyed<ResourceKey, usize>>>(), 8);
    }
}
