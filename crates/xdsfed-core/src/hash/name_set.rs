//! A set of shared names that is usually small: the members of one glob
//! collection.
//!
//! The session and the cache each index the names they hold by the glob
//! collection they would belong to, so that releasing or watching a glob
//! costs its members rather than every name of the type. A LEDS glob has
//! a handful of members, and a hundred thousand globs each with a hash
//! table of its own cost some 30 bytes a member in table slack and
//! control bytes. [`NameSet`] holds up to [`NameSet::FEW`] names as an exact
//! boxed slice (16 bytes a member, found by a scan that compares
//! pointers before text) and becomes a table past that: it is a
//! [`NameMap`] without values.

use std::sync::Arc;

use super::NameMap;

/// A set of names: a boxed slice while it has at most [`NameSet::FEW`] of
/// them, a hash table past that.
///
/// ```
/// use std::sync::Arc;
/// use xdsfed_core::hash::NameSet;
///
/// let mut members = NameSet::default();
/// let e1: Arc<str> = Arc::from("xdstp://a/T/c/e1");
/// assert!(members.insert(Arc::clone(&e1)));
/// assert!(!members.insert(Arc::from("xdstp://a/T/c/e1")), "equal text is the same name");
/// assert!(members.insert(Arc::from("xdstp://a/T/c/e2")));
/// assert!(members.remove("xdstp://a/T/c/e1"));
/// assert_eq!(members.iter().map(|n| &**n).collect::<Vec<_>>(), ["xdstp://a/T/c/e2"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct NameSet(NameMap<()>);

impl NameSet {
    /// Up to this many names are held as a slice.
    pub const FEW: usize = NameMap::<()>::FEW;

    /// Adds `name`; false when it was there already.
    pub fn insert(&mut self, name: Arc<str>) -> bool {
        self.0.insert(name, ()).is_none()
    }

    /// Removes `name`; false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.0.remove(name).is_some()
    }

    /// Whether `name` is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// How many names the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set holds no name.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every name, in no promised order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.0.keys()
    }

    /// Keeps the names `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&Arc<str>) -> bool) {
        self.0.retain(|name, ()| keep(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Inserts and removals below, at and past the bound answer as a
    /// `BTreeSet` does.
    #[test]
    fn answers_as_a_set_does_on_both_sides_of_its_bound() {
        let mut set = NameSet::default();
        let mut model = BTreeSet::new();
        let name = |i: usize| Arc::<str>::from(format!("xdstp://a/T/c/e{}", i % 50));
        for i in 0..400 {
            let n = name(i * 7);
            if i % 3 == 2 {
                assert_eq!(set.remove(&n), model.remove(&n), "remove {n}");
            } else {
                assert_eq!(
                    set.insert(Arc::clone(&n)),
                    model.insert(n.clone()),
                    "insert {n}"
                );
            }
            assert_eq!(set.len(), model.len());
            let held: BTreeSet<Arc<str>> = set.iter().cloned().collect();
            assert_eq!(held, model);
            assert!(model.iter().all(|n| set.contains(n)));
        }
        assert!(
            matches!(set.0, NameMap::Many(_)),
            "grew past {}",
            NameSet::FEW
        );
    }

    /// A small set is exactly its names: no slack.
    #[test]
    fn a_small_set_holds_no_room_beyond_its_names() {
        let mut set = NameSet::default();
        for i in 0..10 {
            set.insert(Arc::from(format!("e{i}")));
        }
        let NameMap::Few(few) = &set.0 else {
            panic!("ten names are few");
        };
        assert_eq!(few.len(), 10);
        set.retain(|n| &**n != "e3");
        assert_eq!(set.len(), 9);
        assert!(!set.contains("e3"));
    }
}
