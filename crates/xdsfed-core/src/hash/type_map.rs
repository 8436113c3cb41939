//! A map keyed by type URL: a handful of entries, found without a hash.
//!
//! A session keeps its state per resource type, and a cache its queues per
//! type; every resource received looks its type up there two or three
//! times. A type URL is some sixty bytes, hashed anew at each lookup and
//! compared byte by byte when found, where the table holds five entries
//! at most (the types a client registers) and the key looked up is nearly
//! always the very copy the table holds ([`TypeUrl`](crate::protocol::TypeUrl)
//! shares one per type). [`TypeMap`] scans its entries for that copy's
//! address, then for the text.

use std::sync::Arc;

/// A small map from type URLs, in the order they were inserted.
///
/// ```
/// use std::sync::Arc;
/// use xdsfed_core::hash::TypeMap;
///
/// let cds: Arc<str> = Arc::from("type.googleapis.com/envoy.config.cluster.v3.Cluster");
/// let mut subscribed = TypeMap::default();
/// *subscribed.get_or_insert_with(&cds, || 0) += 2;
/// assert_eq!(subscribed.get("type.googleapis.com/envoy.config.cluster.v3.Cluster"), Some(&2));
/// assert_eq!(subscribed.remove(&*cds), Some(2));
/// assert!(subscribed.is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct TypeMap<V> {
    entries: Vec<(Arc<str>, V)>,
}

impl<V> Default for TypeMap<V> {
    fn default() -> Self {
        TypeMap {
            entries: Vec::new(),
        }
    }
}

impl<V> TypeMap<V> {
    /// Where `type_url` is: by the shared copy's address first, by its
    /// text otherwise.
    fn position(&self, type_url: &str) -> Option<usize> {
        super::name_map::position(&self.entries, type_url)
    }

    /// The value of `type_url`.
    pub fn get(&self, type_url: &str) -> Option<&V> {
        self.position(type_url).map(|at| &self.entries[at].1)
    }

    /// The value of `type_url`, to change in place.
    pub fn get_mut(&mut self, type_url: &str) -> Option<&mut V> {
        self.position(type_url).map(|at| &mut self.entries[at].1)
    }

    /// The map's own copy of `type_url`, and its value.
    pub fn get_key_value(&self, type_url: &str) -> Option<(&Arc<str>, &V)> {
        self.position(type_url)
            .map(|at| (&self.entries[at].0, &self.entries[at].1))
    }

    /// Whether `type_url` has a value.
    pub fn contains_key(&self, type_url: &str) -> bool {
        self.position(type_url).is_some()
    }

    /// The value of `type_url`, made by `make` (under `type_url` itself)
    /// when there is none.
    pub fn get_or_insert_with(&mut self, type_url: &Arc<str>, make: impl FnOnce() -> V) -> &mut V {
        let at = match self.position(type_url) {
            Some(at) => at,
            None => {
                self.entries.push((Arc::clone(type_url), make()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[at].1
    }

    /// Sets `type_url` to `value`; the value it had.
    pub fn insert(&mut self, type_url: Arc<str>, value: V) -> Option<V> {
        match self.position(&type_url) {
            Some(at) => Some(std::mem::replace(&mut self.entries[at].1, value)),
            None => {
                self.entries.push((type_url, value));
                None
            }
        }
    }

    /// Takes `type_url`'s value out.
    pub fn remove(&mut self, type_url: &str) -> Option<V> {
        let at = self.position(type_url)?;
        Some(self.entries.swap_remove(at).1)
    }

    /// How many types have a value.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no type has a value.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, in no promised order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The entries, values to change in place.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Arc<str>, &mut V)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The values.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The values, to change in place.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// The type URLs.
    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.entries.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Inserts, lookups by another copy of the text, and removals answer
    /// as a sorted map does.
    #[test]
    fn answers_as_a_map_does() {
        let mut map = TypeMap::default();
        let mut model = BTreeMap::new();
        let url = |i: usize| Arc::<str>::from(format!("type.googleapis.com/t{}", i % 7));
        for i in 0..100 {
            let key = url(i * 3);
            match i % 4 {
                0 => assert_eq!(map.remove(&key), model.remove(&key), "remove {key}"),
                1 => *map.get_or_insert_with(&key, || 0) += i,
                _ => assert_eq!(
                    map.insert(Arc::clone(&key), i),
                    model.insert(Arc::clone(&key), i)
                ),
            }
            if i % 4 == 1 {
                *model.entry(Arc::clone(&key)).or_insert(0) += i;
            }
            let copy = String::from(&*key);
            assert_eq!(map.get(&copy), model.get(&key), "get {key}");
            assert_eq!(map.len(), model.len());
        }
        let mut held: Vec<_> = map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        held.sort();
        let expected: Vec<_> = model.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(held, expected);
    }

    /// The copy a lookup hands back is the map's own, whatever copy asked.
    #[test]
    fn the_held_copy_is_handed_back() {
        let mut map = TypeMap::default();
        let held: Arc<str> = Arc::from("type.googleapis.com/a");
        map.insert(Arc::clone(&held), ());
        let (key, ()) = map
            .get_key_value(&String::from("type.googleapis.com/a"))
            .expect("found by its text");
        assert!(Arc::ptr_eq(key, &held));
    }
}
