//! One shared copy of each of a few names that many resources carry.
//!
//! A type URL, an authority: a million resources name a handful of them,
//! and a copy each is a million allocations of the same text. An
//! [`Interner`] hands out one `Arc<str>` per distinct name. It is bounded:
//! names a server chose (a redirect's authority) cannot grow it without
//! limit; past the bound a name gets a copy of its own, as before.

use std::sync::Arc;

use super::HashSet;

/// One shared copy per distinct name, up to a bound.
///
/// ```
/// use std::sync::Arc;
/// use xdsfed_core::hash::Interner;
///
/// let mut names = Interner::new(2);
/// let a = names.shared("cloud.example");
/// assert!(Arc::ptr_eq(&a, &names.shared("cloud.example")));
/// names.shared("onprem.example");
/// let past = names.shared("third.example");
/// assert!(!Arc::ptr_eq(&past, &names.shared("third.example")));
/// ```
#[derive(Debug, Default)]
pub struct Interner {
    names: HashSet<Arc<str>>,
    bound: usize,
    /// The name handed out last: the resources of one response mostly
    /// name the same one, compared without a hash.
    last: Option<Arc<str>>,
}

impl Interner {
    /// An interner that shares at most `bound` names.
    pub fn new(bound: usize) -> Self {
        Interner {
            names: HashSet::default(),
            bound,
            last: None,
        }
    }

    /// The shared copy of `name`, kept for later while there is room.
    pub fn shared(&mut self, name: &str) -> Arc<str> {
        if let Some(last) = &self.last
            && **last == *name
        {
            return Arc::clone(last);
        }
        let Some(held) = self.names.get(name) else {
            let copy: Arc<str> = Arc::from(name);
            if self.names.len() < self.bound {
                self.names.insert(Arc::clone(&copy));
            }
            return copy;
        };
        let held = Arc::clone(held);
        self.last = Some(Arc::clone(&held));
        held
    }

    /// How many names it shares.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it shares none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
