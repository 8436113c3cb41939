//! Wildcard and collection watchers (xDS TP1 globs and lists): which
//! entries they hold, and the queues of names changed since they looked.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use xdsfed_core::hash::HashSet;

use std::time::SystemTime;

use tokio::sync::Notify;

use super::{Cache, DataErrorPolicy, Entry, Inner, Provenance, ResourceStatus, Unwatched};
use xdsfed_core::protocol::{ResourceKey, glob_of, is_glob};

/// Names changed since a wildcard watcher last looked, and a wake-up.
#[derive(Debug, Default)]
pub(crate) struct WildcardQueue {
    pub(crate) dirty: Mutex<indexmap_lite::Dirty>,
    pub(crate) notify: Notify,
}

impl WildcardQueue {
    /// Queues `name` (once, however often it changes before it is read)
    /// and wakes the reader.
    pub(crate) fn mark(self: &Arc<Self>, name: Arc<str>) {
        self.dirty
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name);
        self.wake();
    }

    /// Wakes the reader: now, or when the batch being applied on this
    /// thread is done ([`with_deferred_wakes`]).
    fn wake(self: &Arc<Self>) {
        let deferred = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(queues) => {
                if !queues.iter().any(|q| Arc::ptr_eq(q, self)) {
                    queues.push(Arc::clone(self));
                }
                true
            }
            None => false,
        });
        if !deferred {
            self.notify.notify_one();
        }
    }
}

thread_local! {
    /// The queues whose readers wake once the batch this thread applies is
    /// done; `None` outside a batch.
    static DEFERRED: RefCell<Option<Vec<Arc<WildcardQueue>>>> = const { RefCell::new(None) };
}

/// Runs `f`, waking the readers of the queues it marks once it has
/// returned (or unwound), each once.
///
/// Rule: a response's events wake each reader once, after the cache's lock
/// is let go. Woken at its first member, a reader on another thread read
/// the response half applied, waited on the lock for the rest and was woken
/// again for it (test `a_batch_wakes_its_reader_once_when_done`).
pub(super) fn with_deferred_wakes<R>(f: impl FnOnce() -> R) -> R {
    /// Wakes what was held back, even when `f` panics.
    struct Flush(bool);
    impl Drop for Flush {
        fn drop(&mut self) {
            if !self.0 {
                return;
            }
            let queues = DEFERRED.with(|d| d.borrow_mut().take());
            for queue in queues.into_iter().flatten() {
                queue.notify.notify_one();
            }
        }
    }
    // Nested, the outer batch wakes them.
    let outermost = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        let outermost = d.is_none();
        if outermost {
            *d = Some(Vec::new());
        }
        outermost
    });
    let _flush = Flush(outermost);
    f()
}

impl Cache {
    /// Makes `key`'s entry (which a watch holds, so it exists) report its
    /// changes to `queue` as `label`; a state already known counts as
    /// changed.
    pub(crate) fn join_set(&self, key: &ResourceKey, queue: &Arc<WildcardQueue>, label: &Arc<str>) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(key) else {
            return;
        };
        // Exactly sized: an entry is nearly always in one set, and a Vec's
        // first push reserves room for four.
        let joined = (Arc::clone(queue), Arc::clone(label));
        entry.sets = std::mem::take(&mut entry.sets)
            .into_vec()
            .into_iter()
            .chain([joined])
            .collect();
        // The watch that subscribed the member is gone: the set reads the
        // state through the cache.
        entry.slot.shed_unused_channel();
        if entry.slot.with(|s| s.status != ResourceStatus::Requested) {
            queue.mark(Arc::clone(label));
        }
    }

    /// Stops `key`'s entry reporting to `queue` as `label`.
    pub(crate) fn leave_set(&self, key: &ResourceKey, queue: &Arc<WildcardQueue>, label: &str) {
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.full_mut(key) {
            let mut sets = std::mem::take(&mut entry.sets).into_vec();
            sets.retain(|(q, l)| !(Arc::ptr_eq(q, queue) && **l == *label));
            entry.sets = sets.into_boxed_slice();
        }
        inner.entries.shrink(key);
    }

    pub(crate) fn add_wildcard(
        &self,
        type_url: &str,
        provenance: Provenance,
        policy: DataErrorPolicy,
    ) -> (Arc<WildcardQueue>, bool) {
        let mut inner = self.lock();
        let queue = Arc::new(WildcardQueue::default());
        {
            // Everything already cached of this type counts as changed.
            let mut dirty = queue.dirty.lock().unwrap_or_else(|e| e.into_inner());
            for (key, entry) in inner.entries.iter() {
                if &*key.type_url == type_url && entry.status() != ResourceStatus::Requested {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
        }
        let type_url: Arc<str> = type_url.into();
        let list = inner.wildcard.get_or_insert_with(&type_url, Vec::new);
        let first = list.is_empty();
        list.push(Arc::clone(&queue));
        let _ = (provenance, policy);
        (queue, first)
    }

    /// Adds a watcher of the members of the glob collection `glob`, which
    /// queues their changes on `queue` (shared by the collections of a
    /// [`CollectionSet`](crate::watch::CollectionSet)) or on a queue of its
    /// own; members already cached count as changed.
    pub(crate) fn add_collection(
        &self,
        glob: &ResourceKey,
        queue: Option<&Arc<WildcardQueue>>,
    ) -> Arc<WildcardQueue> {
        let mut inner = self.lock();
        inner.index_globs_of(&glob.type_url);
        let queue = queue.map_or_else(|| Arc::new(WildcardQueue::default()), Arc::clone);
        {
            let mut dirty = queue.dirty.lock().unwrap_or_else(|e| e.into_inner());
            for (key, entry) in inner.under_glob(glob) {
                if entry.status() != ResourceStatus::Requested {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
            // A list collection's members (and the collection itself).
            let listed = inner.members.get(glob).into_iter().flatten();
            for key in listed.chain(std::iter::once(glob)) {
                if inner
                    .entries
                    .get(key)
                    .is_some_and(|e| e.status() != ResourceStatus::Requested)
                {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
        }
        let inner = &mut *inner;
        let watchers = inner.collections.entry(glob.clone()).or_default();
        if watchers.is_empty() {
            *inner
                .collection_types
                .get_or_insert_with(&glob.type_url, usize::default) += 1;
            inner.list_collections += usize::from(!is_glob(&glob.name));
        }
        // Exactly sized: a glob nearly always has one watcher (a graph's
        // collection set), and a Vec's first push reserves room for four.
        let mut grown = std::mem::take(watchers).into_vec();
        grown.reserve_exact(1);
        grown.push(Arc::clone(&queue));
        *watchers = grown.into_boxed_slice();
        queue
    }

    /// Removes a collection watcher; with the last one, the member entries
    /// nobody else watches go.
    pub(crate) fn remove_collection(&self, glob: &ResourceKey, queue: &Arc<WildcardQueue>) {
        let mut inner = self.lock();
        let Some(list) = inner.collections.get_mut(glob) else {
            return;
        };
        let mut kept = std::mem::take(list).into_vec();
        kept.retain(|q| !Arc::ptr_eq(q, queue));
        *list = kept.into_boxed_slice();
        if !list.is_empty() {
            return;
        }
        inner.collections.remove(glob);
        inner.list_collections -= usize::from(!is_glob(&glob.name));
        if let Some(count) = inner.collection_types.get_mut(&glob.type_url) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                inner.collection_types.remove(&glob.type_url);
            }
        }
        if inner.wildcard.contains_key(&glob.type_url) {
            return;
        }
        let orphaned: Vec<ResourceKey> = inner
            .under_glob(glob)
            .filter(|(_, e)| e.watchers() == 0)
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphaned {
            inner.remove_entry(&key);
        }
    }

    /// Sets the members of the list collection `collection` (xDS TP1): its
    /// watchers hear of members that joined with an answer already, and of
    /// members that left (as removed). Entries of members that left and
    /// that nobody watches go.
    pub(crate) fn set_list_members(&self, collection: &ResourceKey, members: HashSet<ResourceKey>) {
        let mut inner = self.lock();
        let old = inner.members.remove(collection).unwrap_or_default();
        let first = inner.listed.insert(collection.clone());
        let relisted = first || old != members;
        let mut changed: Vec<ResourceKey> = Vec::new();
        for left in old.difference(&members) {
            if let Some(of) = inner.member_of.get_mut(left) {
                of.remove(collection);
                if of.is_empty() {
                    inner.member_of.remove(left);
                }
            }
            changed.push(left.clone());
        }
        for joined in members.difference(&old) {
            inner
                .member_of
                .entry(joined.clone())
                .or_default()
                .insert(collection.clone());
            if inner
                .entries
                .get(joined)
                .is_some_and(|e| e.status() != ResourceStatus::Requested)
            {
                changed.push(joined.clone());
            }
        }
        if relisted {
            // The watchers' member list changed too (`CollectionEvent::Listed`).
            changed.push(collection.clone());
        }
        if !members.is_empty() {
            inner.members.insert(collection.clone(), members);
        }
        if let Some(queues) = inner.collections.get(collection) {
            for queue in queues {
                let mut dirty = queue.dirty.lock().unwrap_or_else(|e| e.into_inner());
                for key in &changed {
                    dirty.insert(Arc::clone(&key.name));
                }
                drop(dirty);
                queue.wake();
            }
        }
        for left in old {
            let orphaned = !inner.member_of.contains_key(&left)
                && inner.entries.get(&left).is_some_and(|e| e.watchers() == 0)
                && !inner.wildcard.contains_key(&left.type_url)
                && inner.collection_of(&left).is_none();
            if orphaned {
                inner.remove_entry(&left);
            }
        }
    }

    /// The members of the list collection `collection`, by key, sorted;
    /// `None` until they have been set once.
    pub(crate) fn list_members(&self, collection: &ResourceKey) -> Option<Vec<Arc<str>>> {
        let inner = self.lock();
        if !inner.listed.contains(collection) {
            return None;
        }
        let mut members: Vec<Arc<str>> = inner
            .members
            .get(collection)
            .into_iter()
            .flatten()
            .map(|k| Arc::clone(&k.name))
            .collect();
        members.sort_unstable();
        Some(members)
    }

    /// Forgets that `collection` was ever listed: it is no longer fetched,
    /// and a later watch must wait for its members afresh.
    pub(crate) fn forget_list(&self, collection: &ResourceKey) {
        self.set_list_members(collection, HashSet::default());
        self.lock().listed.remove(collection);
    }

    /// Whether `key` is a member of the list collection `collection`.
    pub(crate) fn is_list_member(&self, collection: &ResourceKey, key: &ResourceKey) -> bool {
        self.lock()
            .members
            .get(collection)
            .is_some_and(|m| m.contains(key))
    }

    pub(crate) fn remove_wildcard(&self, type_url: &str, queue: &Arc<WildcardQueue>) -> bool {
        let mut inner = self.lock();
        let Some(list) = inner.wildcard.get_mut(type_url) else {
            return false;
        };
        list.retain(|q| !Arc::ptr_eq(q, queue));
        if !list.is_empty() {
            return false;
        }
        inner.wildcard.remove(type_url);
        // Entries held only for the wildcard go with it.
        let orphaned: Vec<ResourceKey> = inner
            .entries
            .iter()
            .filter(|(k, e)| &*k.type_url == type_url && e.watchers() == 0)
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphaned {
            inner.remove_entry(&key);
        }
        true
    }
}

impl Inner {
    /// A member arrived: its glob collection, if watched and still waiting,
    /// has its answer (CSDS shows it `ACKED`; gRFC A71 counts it as cached,
    /// so a failing server with the members held causes no fallback).
    pub(super) fn answer_glob_of(&mut self, member: &ResourceKey) {
        if self.glob_entries == 0 {
            return;
        }
        let Some(glob) = glob_of(&member.name) else {
            return;
        };
        let glob = ResourceKey::new(Arc::clone(&member.type_url), glob);
        // Answered nearly always, by the glob's first member: its status
        // is then read in place, not built into a state for each member.
        if let Some(entry) = self.entries.full_mut(&glob)
            && entry.slot.status() == ResourceStatus::Requested
        {
            entry.slot.modify(|state| {
                if state.status != ResourceStatus::Requested {
                    return false;
                }
                state.status = ResourceStatus::Acked;
                state.last_updated = Some(SystemTime::now());
                // Watchers of the glob hear of its members, not of this.
                false
            });
        }
    }

    /// Whether `key` has an entry, created when a wildcard or collection
    /// watcher of its type wants it.
    pub(super) fn has_entry_for_wildcard(
        &mut self,
        key: &ResourceKey,
        server: &Arc<str>,
        policy: DataErrorPolicy,
    ) -> bool {
        if self.entries.contains_key(key) {
            return true;
        }
        if !self.wants_entry(key) {
            return false;
        }
        let Unwatched {
            provenance, policy, ..
        } = self.unwatched_entry(key, server, policy);
        self.insert_entry(key, Entry::new(provenance, policy));
        true
    }

    /// Whether a wildcard or collection watcher of `key`'s type wants an
    /// entry for it.
    pub(super) fn wants_entry(&self, key: &ResourceKey) -> bool {
        self.wildcard.contains_key(&key.type_url)
            || self.collection_of(key).is_some()
            || self.member_of.contains_key(key)
    }

    /// A new entry for a wildcard or collection watcher of `key`, held for
    /// `server`.
    pub(super) fn unwatched_entry(
        &mut self,
        key: &ResourceKey,
        server: &Arc<str>,
        policy: DataErrorPolicy,
    ) -> Unwatched {
        let provenance = Provenance {
            authority: xdsfed_core::name::authority_of(&key.name)
                .map(|a| self.authorities.0.shared(a)),
            server: Arc::clone(server),
        };
        Unwatched {
            provenance,
            policy,
            reported: None,
        }
    }

    /// The watched glob collection `key` is a member of, if any.
    pub(super) fn collection_of(&self, key: &ResourceKey) -> Option<&[Arc<WildcardQueue>]> {
        // Most changes are of types no collection is watched of: that
        // answer is a lookup, not a glob formatted from the name.
        if !self.collection_types.contains_key(&key.type_url) {
            return None;
        }
        let glob = glob_of(&key.name)?;
        self.collections
            .get(&ResourceKey::new(Arc::clone(&key.type_url), glob))
            .map(|queues| &queues[..])
    }

    pub(super) fn mark_wildcard_dirty(&self, key: &ResourceKey) {
        if let Some(entry) = self.entries.get(key) {
            entry.mark_sets();
        }
        self.mark_collections_dirty(key);
    }

    /// Queues `key` for the collection and wildcard watchers it concerns
    /// (not for the watch sets of its entry: [`Entry::mark_sets`]).
    pub(super) fn mark_collections_dirty(&self, key: &ResourceKey) {
        // A member of a watched glob, or the glob itself (empty, TP1 §Glob).
        let lists = self
            .member_of
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|c| self.collections.get(c))
            .map(|queues| &queues[..]);
        // The collection itself: a glob, or a list (none for most names).
        let own = (self.list_collections > 0 || is_glob(&key.name))
            .then(|| self.collections.get(key))
            .flatten();
        let collection = self
            .collection_of(key)
            .into_iter()
            .chain(own.map(|queues| &queues[..]))
            .chain(lists);
        for queue in collection.flatten() {
            queue.mark(Arc::clone(&key.name));
        }
        if let Some(list) = self.wildcard.get(&key.type_url) {
            for queue in list {
                queue.mark(Arc::clone(&key.name));
            }
        }
    }
}

/// A small insertion-ordered set of names without duplicates.
pub(crate) mod indexmap_lite {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use xdsfed_core::hash::HashSet;

    /// Names in the order they first changed.
    ///
    /// A few names are told apart by a look along the queue; a set is
    /// built only for a longer one (a cold start changes a whole
    /// collection at once). The room of a burst is given back once the
    /// queue is read empty: a graph follows a collection per cluster, and
    /// each keeping the room of its largest burst was some 56 bytes per
    /// LEDS endpoint.
    #[derive(Debug, Default)]
    pub(crate) struct Dirty {
        order: VecDeque<Arc<str>>,
        /// Empty, or every name of `order`.
        set: HashSet<Arc<str>>,
    }

    /// The longest queue told apart without a set.
    const SCANNED: usize = 8;

    impl Dirty {
        pub(crate) fn insert(&mut self, name: Arc<str>) {
            let queued = if self.set.is_empty() && self.order.len() < SCANNED {
                self.order.contains(&name)
            } else {
                if self.set.is_empty() {
                    self.set.extend(self.order.iter().cloned());
                }
                !self.set.insert(Arc::clone(&name))
            };
            if !queued {
                self.order.push_back(name);
            }
        }

        pub(crate) fn pop(&mut self) -> Option<Arc<str>> {
            let name = self.order.pop_front()?;
            if self.order.is_empty() {
                // A set was built only for a long queue: a short one has
                // none to give back (and a new one draws a seed).
                if self.set.capacity() > 0 {
                    self.set = HashSet::default();
                }
                if self.order.capacity() > SCANNED {
                    self.order = VecDeque::new();
                }
            } else if !self.set.is_empty() {
                self.set.remove(&name);
            }
            Some(name)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Each name once, in the order first changed, whether the queue
        /// is told apart by a look along it or by a set; the room of a
        /// burst goes once it is read.
        #[test]
        fn each_name_is_queued_once_in_order_and_a_bursts_room_is_given_back() {
            let name = |i: usize| -> Arc<str> { Arc::from(format!("n{}", i % 20)) };
            let mut dirty = Dirty::default();
            for i in 0..60 {
                dirty.insert(name(i));
            }
            let read: Vec<Arc<str>> = std::iter::from_fn(|| dirty.pop()).collect();
            let expected: Vec<Arc<str>> = (0..20).map(name).collect();
            assert_eq!(read, expected);
            assert_eq!(dirty.order.capacity(), 0);
            assert_eq!(dirty.set.capacity(), 0);

            for i in [1, 2, 1, 3, 2] {
                dirty.insert(name(i));
            }
            assert_eq!(dirty.pop().as_deref(), Some("n1"));
            dirty.insert(name(1));
            let read: Vec<Arc<str>> = std::iter::from_fn(|| dirty.pop()).collect();
            assert_eq!(read, [name(2), name(3), name(1)]);
            assert!(dirty.set.is_empty(), "a short queue builds no set");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn deferred() -> Option<usize> {
        DEFERRED.with(|d| d.borrow().as_ref().map(Vec::len))
    }

    /// Rule of [`with_deferred_wakes`]: inside a batch, marking a queue
    /// queues the name and wakes nobody; the reader is woken when the
    /// batch is done, and a queue marked twice is held back once.
    #[test]
    fn a_batch_wakes_its_reader_once_when_done() {
        let queue = Arc::new(WildcardQueue::default());
        with_deferred_wakes(|| {
            queue.mark(Arc::from("a"));
            queue.mark(Arc::from("b"));
            with_deferred_wakes(|| queue.mark(Arc::from("c")));
            assert!(
                queue.notify.notified().now_or_never().is_none(),
                "no wake-up inside the batch, nor at the end of a nested one"
            );
            assert_eq!(deferred(), Some(1), "the queue is held back once");
        });
        assert_eq!(deferred(), None);
        assert!(queue.notify.notified().now_or_never().is_some());
        let mut dirty = queue.dirty.lock().expect("not poisoned");
        assert_eq!(std::iter::from_fn(|| dirty.pop()).count(), 3);
        drop(dirty);

        queue.mark(Arc::from("d"));
        assert!(
            queue.notify.notified().now_or_never().is_some(),
            "outside a batch, at once"
        );
    }

    /// A batch that panics still wakes the readers it held back, and
    /// leaves the thread waking at once again.
    #[test]
    fn a_batch_that_panics_still_wakes() {
        let queue = Arc::new(WildcardQueue::default());
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_deferred_wakes(|| {
                queue.mark(Arc::from("a"));
                panic!("a batch fails");
            })
        }));
        assert!(unwound.is_err());
        assert_eq!(deferred(), None);
        assert!(queue.notify.notified().now_or_never().is_some());
    }
}
