//! A map from shared names that is usually small: the members of one glob
//! collection, with what a layer keeps of each.
//!
//! A LEDS glob has a handful of members, and a hundred thousand globs each
//! with a hash table of its own cost some 30 bytes a member in table slack
//! and control bytes. [`NameMap`] holds up to [`NameMap::FEW`] entries as an
//! exact boxed slice (the name's 16 bytes and the value a member, found by
//! a scan that compares pointers before text) and becomes a table past
//! that. [`NameSet`](super::NameSet) is the map without values.

use std::sync::Arc;

use super::HashMap;

/// A map from names: a boxed slice while it has at most [`NameMap::FEW`]
/// entries, a hash table past that.
///
/// ```
/// use std::sync::Arc;
/// use xdsfed_core::hash::NameMap;
///
/// let mut versions = NameMap::default();
/// let e1: Arc<str> = Arc::from("xdstp://a/T/c/e1");
/// assert_eq!(versions.insert(Arc::clone(&e1), 1), None);
/// assert_eq!(versions.insert(Arc::from("xdstp://a/T/c/e1"), 2), Some(1), "equal text is the same name");
/// assert_eq!(versions.get("xdstp://a/T/c/e1"), Some(&2));
/// assert_eq!(versions.remove("xdstp://a/T/c/e1"), Some(2));
/// assert!(versions.is_empty());
/// ```
#[derive(Debug, Clone)]
pub enum NameMap<V> {
    /// At most [`NameMap::FEW`] entries, in the order they came.
    Few(Box<[(Arc<str>, V)]>),
    /// More than [`NameMap::FEW`] once (a table once grown stays a table).
    Many(Box<HashMap<Arc<str>, V>>),
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap::Few(Box::default())
    }
}

impl<V> NameMap<V> {
    /// Up to this many entries are held as a slice; a scan of 32 pointers
    /// is cheaper than hashing a name.
    pub const FEW: usize = 32;

    /// Sets `name` to `value`; the value it had. A name already held keeps
    /// its own copy of the text.
    pub fn insert(&mut self, name: Arc<str>, value: V) -> Option<V> {
        match self {
            NameMap::Few(few) => {
                if let Some(at) = position(few, &name) {
                    return Some(std::mem::replace(&mut few[at].1, value));
                }
                let mut grown = std::mem::take(few).into_vec();
                if grown.len() < Self::FEW {
                    // Exactly one more: the slice holds no room it does
                    // not use.
                    grown.reserve_exact(1);
                    grown.push((name, value));
                    *few = grown.into_boxed_slice();
                } else {
                    let mut table: HashMap<Arc<str>, V> = grown.into_iter().collect();
                    table.insert(name, value);
                    *self = NameMap::Many(Box::new(table));
                }
                None
            }
            // One probe: a table's insert keeps the key it holds.
            NameMap::Many(table) => table.insert(name, value),
        }
    }

    /// Removes `name`; the value it had.
    pub fn remove(&mut self, name: &str) -> Option<V> {
        match self {
            NameMap::Few(few) => {
                let at = position(few, name)?;
                let mut shrunk = std::mem::take(few).into_vec();
                let (_, value) = shrunk.remove(at);
                *few = shrunk.into_boxed_slice();
                Some(value)
            }
            NameMap::Many(table) => table.remove(name),
        }
    }

    /// The held copy of `name` and its value.
    pub fn get_key_value(&self, name: &str) -> Option<(&Arc<str>, &V)> {
        match self {
            NameMap::Few(few) => position(few, name).map(|at| (&few[at].0, &few[at].1)),
            NameMap::Many(table) => table.get_key_value(name),
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.get_key_value(name).map(|(_, value)| value)
    }

    /// The value of `name`, to change in place.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        match self {
            NameMap::Few(few) => position(few, name).map(|at| &mut few[at].1),
            NameMap::Many(table) => table.get_mut(name),
        }
    }

    /// Whether `name` is held.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get_key_value(name).is_some()
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        match self {
            NameMap::Few(few) => few.len(),
            NameMap::Many(table) => table.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, in no promised order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        let (few, many) = match self {
            NameMap::Few(few) => (Some(few.iter().map(|(k, v)| (k, v))), None),
            NameMap::Many(table) => (None, Some(table.iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// Every entry, its value to change in place, in no promised order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Arc<str>, &mut V)> {
        let (few, many) = match self {
            NameMap::Few(few) => (Some(few.iter_mut().map(|(k, v)| (&*k, v))), None),
            NameMap::Many(table) => (None, Some(table.iter_mut())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// Every name, in no promised order.
    pub fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(name, _)| name)
    }

    /// Keeps the entries `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&Arc<str>, &mut V) -> bool) {
        match self {
            NameMap::Few(few) => {
                // A boxed slice is a vector without room: taking it apart
                // and back costs no allocation unless an entry goes.
                let mut kept = std::mem::take(few).into_vec();
                kept.retain_mut(|(k, v)| keep(k, v));
                *few = kept.into_boxed_slice();
            }
            NameMap::Many(table) => table.retain(|k, v| keep(k, v)),
        }
    }
}

/// Where `name` is among `few`: by pointer first (the holders share one
/// copy of each name), by text otherwise. [`TypeMap`](super::TypeMap)
/// finds its type URLs so too.
pub(super) fn position<V>(few: &[(Arc<str>, V)], name: &str) -> Option<usize> {
    let pointer = name.as_ptr();
    few.iter()
        .position(|(held, _)| held.as_ptr() == pointer && held.len() == name.len())
        .or_else(|| few.iter().position(|(held, _)| same_text(held, name)))
}

/// Whether `a` and `b` are the same text, their last bytes compared first:
/// the members of one glob share everything up to their last segment, so
/// a comparison from the front would walk the whole shared prefix for
/// each member it passes over.
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Inserts, removals and retains below, at and past the bound answer
    /// as a `BTreeMap` does.
    /// Text that differs anywhere, or only in length, is another name.
    #[test]
    fn names_are_told_apart_wherever_they_differ() {
        let held = "xdstp://a/T/c/endpoint-0001";
        assert!(same_text(held, &String::from(held)));
        for other in [
            "xdstp://a/T/c/endpoint-0002",
            "xdstp://b/T/c/endpoint-0001",
            "xdstp://a/T/c/endpoint-001",
            "xdstp://a/T/c/endpoint-00011",
            "",
        ] {
            assert!(!same_text(held, other), "{other}");
        }
        assert!(same_text("", ""));
        assert!(!same_text("e1", "e2"));
    }

    #[test]
    fn answers_as_a_map_does_on_both_sides_of_its_bound() {
        let mut map = NameMap::default();
        let mut model = BTreeMap::new();
        let name = |i: usize| Arc::<str>::from(format!("xdstp://a/T/c/e{}", i % 50));
        let mut grew = false;
        for i in 0..400 {
            let n = name(i * 7);
            match i % 5 {
                2 => assert_eq!(map.remove(&n), model.remove(&n), "remove {n}"),
                4 if i % 100 == 99 => {
                    let keep = |k: &Arc<str>, v: &mut usize| k.len().is_multiple_of(2) || *v > 300;
                    map.retain(keep);
                    model.retain(keep);
                }
                _ => assert_eq!(
                    map.insert(Arc::clone(&n), i),
                    model.insert(n.clone(), i),
                    "insert {n}"
                ),
            }
            assert_eq!(map.len(), model.len());
            let held: BTreeMap<Arc<str>, usize> =
                map.iter().map(|(k, v)| (Arc::clone(k), *v)).collect();
            assert_eq!(held, model);
            assert!(model.iter().all(|(k, v)| map.get(k) == Some(v)));
            grew |= matches!(map, NameMap::Many(_));
        }
        assert!(grew, "grew past {}", NameMap::<usize>::FEW);

        // Past the bound too, a name set again keeps the copy held.
        let mut map = NameMap::default();
        let first: Arc<str> = Arc::from("e0");
        map.insert(Arc::clone(&first), 0);
        for i in 1..=NameMap::<usize>::FEW {
            map.insert(Arc::from(format!("e{i}")), i);
        }
        assert!(matches!(map, NameMap::Many(_)));
        assert_eq!(map.insert(Arc::from("e0"), 99), Some(0));
        assert!(
            map.get_key_value("e0")
                .is_some_and(|(k, v)| Arc::ptr_eq(k, &first) && *v == 99)
        );
    }

    /// A small map is exactly its entries: no slack, and a name set again
    /// keeps the copy held.
    #[test]
    fn a_small_map_holds_no_room_beyond_its_entries() {
        let mut map = NameMap::default();
        let first: Arc<str> = Arc::from("e0");
        map.insert(Arc::clone(&first), 0);
        for i in 1..10 {
            map.insert(Arc::from(format!("e{i}")), i);
        }
        map.insert(Arc::from("e0"), 10);
        let NameMap::Few(few) = &map else {
            panic!("ten entries are few");
        };
        assert_eq!(few.len(), 10);
        assert!(
            map.get_key_value("e0")
                .is_some_and(|(k, v)| Arc::ptr_eq(k, &first) && *v == 10)
        );
        map.retain(|k, _| &**k != "e3");
        assert_eq!(map.len(), 9);
        assert!(!map.contains_key("e3"));
        if let Some(v) = map.get_mut("e4") {
            *v = 40;
        }
        assert_eq!(map.get("e4"), Some(&40));
    }
}
