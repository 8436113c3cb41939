//! A set that is usually of one element.
//!
//! Per-resource bookkeeping keeps sets whose common size is one: the
//! entries a fetched key feeds (its own), the parents of a graph node (the
//! one resource that names it). A [`HashSet`] allocates its table on the
//! first insert and carries its own hasher state, so a million such sets
//! cost a million tables. [`SmallSet`] holds zero or one element inline and
//! only becomes a table at the second element.

use std::hash::Hash;

use super::HashSet;

/// A set of `T` held inline while it has at most one element.
///
/// ```
/// use xdsfed_core::hash::SmallSet;
///
/// let mut parents: SmallSet<&str> = SmallSet::default();
/// assert!(parents.insert("listener"));
/// assert!(!parents.insert("listener"));
/// assert!(parents.insert("route"));
/// assert_eq!(parents.len(), 2);
/// assert!(parents.remove(&"listener"));
/// assert_eq!(parents.iter().collect::<Vec<_>>(), [&"route"]);
/// ```
#[derive(Debug, Clone, Default)]
pub enum SmallSet<T> {
    /// No element.
    #[default]
    Empty,
    /// Exactly one element.
    One(T),
    /// Two or more (or, after removals, fewer: a table once grown stays).
    Many(Box<HashSet<T>>),
}

impl<T: Hash + Eq> SmallSet<T> {
    /// Adds `value`; false when it was already there.
    pub fn insert(&mut self, value: T) -> bool {
        match self {
            SmallSet::Empty => {
                *self = SmallSet::One(value);
                true
            }
            SmallSet::One(held) if *held == value => false,
            SmallSet::One(_) => {
                let SmallSet::One(held) = std::mem::take(self) else {
                    return false;
                };
                let mut table = HashSet::default();
                table.insert(held);
                table.insert(value);
                *self = SmallSet::Many(Box::new(table));
                true
            }
            SmallSet::Many(table) => table.insert(value),
        }
    }

    /// Removes `value`; false when it was not there.
    pub fn remove(&mut self, value: &T) -> bool {
        match self {
            SmallSet::One(held) if held == value => {
                *self = SmallSet::Empty;
                true
            }
            SmallSet::Many(table) => table.remove(value),
            SmallSet::Empty | SmallSet::One(_) => false,
        }
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: &T) -> bool {
        match self {
            SmallSet::Empty => false,
            SmallSet::One(held) => held == value,
            SmallSet::Many(table) => table.contains(value),
        }
    }

    /// How many elements it has.
    pub fn len(&self) -> usize {
        match self {
            SmallSet::Empty => 0,
            SmallSet::One(_) => 1,
            SmallSet::Many(table) => table.len(),
        }
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every element, and the table with them.
    pub fn clear(&mut self) {
        *self = SmallSet::Empty;
    }

    /// Every element, in no particular order.
    pub fn iter(&self) -> Iter<'_, T> {
        match self {
            SmallSet::Empty => Iter::Inline(None),
            SmallSet::One(held) => Iter::Inline(Some(held)),
            SmallSet::Many(table) => Iter::Table(table.iter()),
        }
    }
}

/// The elements of a [`SmallSet`], in no particular order.
#[derive(Debug)]
pub enum Iter<'a, T> {
    /// The element held inline, if any, not yet given.
    Inline(Option<&'a T>),
    /// The table's elements.
    Table(std::collections::hash_set::Iter<'a, T>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Inline(held) => held.take(),
            Iter::Table(table) => table.next(),
        }
    }
}

impl<T: Hash + Eq> FromIterator<T> for SmallSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut set = SmallSet::Empty;
        for value in iter {
            set.insert(value);
        }
        set
    }
}

impl<'a, T: Hash + Eq> IntoIterator for &'a SmallSet<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain set, over a sequence that grows, shrinks to one and
    /// to none, and grows again: the same answers at every step.
    #[test]
    fn answers_as_a_hash_set_does() {
        let mut small: SmallSet<u32> = SmallSet::default();
        let mut plain: HashSet<u32> = HashSet::default();
        let steps = [
            (true, 1),
            (true, 1),
            (false, 2),
            (true, 2),
            (true, 3),
            (false, 1),
            (false, 3),
            (false, 2),
            (true, 4),
            (false, 4),
            (false, 4),
        ];
        for (add, v) in steps {
            let (a, b) = if add {
                (small.insert(v), plain.insert(v))
            } else {
                (small.remove(&v), plain.remove(&v))
            };
            assert_eq!(a, b, "{} {v}", if add { "insert" } else { "remove" });
            assert_eq!(small.len(), plain.len());
            let mut held: Vec<u32> = small.iter().copied().collect();
            held.sort_unstable();
            let mut want: Vec<u32> = plain.iter().copied().collect();
            want.sort_unstable();
            assert_eq!(held, want);
            for probe in 0..5 {
                assert_eq!(small.contains(&probe), plain.contains(&probe));
            }
        }
    }

    /// One element is held without a table: the point of the type.
    #[test]
    fn one_element_is_inline() {
        let set: SmallSet<u32> = [7].into_iter().collect();
        assert!(matches!(set, SmallSet::One(7)));
        let mut set = set;
        set.insert(8);
        assert!(matches!(set, SmallSet::Many(_)));
        set.clear();
        assert!(matches!(set, SmallSet::Empty));
    }
}
