//! The resource cache: the latest state of every watched resource.
//!
//! The cache is fed by the federation core's deliveries and read by
//! watchers. Each entry holds the resource's latest [`ResourceState`]: in a
//! `tokio::sync::watch` channel while single watchers hold receivers, bare
//! otherwise; watch sets, wildcard and collection watchers are told through
//! queues of changed names instead. A stream never waits on a watcher, a
//! slow watcher simply sees the newest state when it looks (latest-value
//! delivery), and identical bytes wake nobody. How an event changes a state
//! (gRFC A88) is decided by the federation core's pure transitions, which
//! the cache runs on each entry's state.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;
use xdsfed_core::hash::{HashMap, HashSet, TypeMap};
use xdsfed_core::version::Version;

use tokio::sync::watch;

mod collections;
mod entries;
mod from_disk;
mod slot;
#[cfg(test)]
mod tests;

pub(crate) use collections::WildcardQueue;
use entries::{Entries, Held, HeldMut, Plain, Unwatched};
use slot::Slot;
pub use xdsfed_core::entry::{DataErrorPolicy, Provenance, ResourceState, ResourceStatus, Source};

use xdsfed_core::entry::{self, Context, ReportedNack};
use xdsfed_core::error::XdsError;
use xdsfed_core::federation::Answers;
use xdsfed_core::protocol::{CoreEvent, ResourceKey, StreamFailure, is_glob};

struct Entry {
    /// The state, in a channel while single watchers hold receivers.
    slot: Slot,
    /// Explicit watchers; entries with none are held for wildcard watchers.
    watchers: usize,
    provenance: Provenance,
    policy: DataErrorPolicy,
    /// The last NACK its watchers heard of, until a different copy arrives:
    /// a server that sends the same bad update again, typically on every
    /// reconnect, is not news.
    reported_nack: ReportedNack,
    /// The watch sets this entry is a member of, each with the name the
    /// set knows it by: a change queues that name rather than waking a
    /// channel receiver per resource.
    sets: Box<[(Arc<WildcardQueue>, Arc<str>)]>,
}

#[derive(Default)]
struct Inner {
    /// Full or plain ([`entries`]), boxed either way with its key
    /// ([`KeyedTable`](xdsfed_core::hash::KeyedTable)): a slot of a table is one pointer, so the table (its
    /// empty slots included) and every rehash as it grows to a million
    /// entries move 8 bytes a slot rather than 160 (rehashing was a fifth
    /// of the client's CPU in a cold start of 1 000 000 LEDS endpoints),
    /// and a table of a million entries fits the processor's cache. A stream failure finds
    /// its server's entries by their provenance, in one pass: an index by
    /// server was a second table of every key (some 110 bytes a resource)
    /// and a hash insert per watch, for an event that comes once per lost
    /// connection.
    entries: Entries,
    /// Wildcard watchers per type URL.
    wildcard: TypeMap<Vec<Arc<WildcardQueue>>>,
    /// Glob collection watchers per glob (xDS TP1): members arriving under a
    /// watched glob get entries, and changes are queued for its watchers.
    collections: HashMap<ResourceKey, Box<[Arc<WildcardQueue>]>>,
    /// How many collections of each type are watched.
    collection_types: TypeMap<usize>,
    /// How many of `collections` are list collections, not globs: with
    /// none, a changed name that is no glob is not looked up there, a
    /// probe each LEDS endpoint update would miss.
    list_collections: usize,
    /// How many entries are glob collections: with none, an arriving
    /// member has no glob to answer, and working its glob out (three
    /// allocations) is skipped.
    glob_entries: usize,
    /// List collection members (xDS TP1): each member's collections, and
    /// each collection's members.
    member_of: HashMap<ResourceKey, HashSet<ResourceKey>>,
    members: HashMap<ResourceKey, HashSet<ResourceKey>>,
    /// List collections whose members have been set at least once: until
    /// then the collection's body may be cached with its members not yet
    /// known, and a watcher must not take that for an empty list.
    listed: HashSet<ResourceKey>,
    /// Servers whose current stream has delivered a response: only they
    /// can say a copy from the state directory does not exist.
    answered: HashSet<Arc<str>>,
    /// The state directory's writer, when the client has one.
    writer: Option<crate::state_dir::Writer>,
    /// The authorities of entries made for wildcard and collection
    /// watchers, one shared copy each rather than one per entry.
    authorities: SharedAuthorities,
}

/// The authority names the cache's entries share (bounded: names come
/// from servers).
struct SharedAuthorities(xdsfed_core::hash::Interner);

impl Default for SharedAuthorities {
    fn default() -> Self {
        Self(xdsfed_core::hash::Interner::new(1024))
    }
}

/// The cache. Cheap to share; every method takes `&self`.
#[derive(Default)]
pub struct Cache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("entries", &self.lock().entries.len())
            .finish()
    }
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache that persists every copy it accepts through `writer`.
    pub(crate) fn with_writer(writer: Option<crate::state_dir::Writer>) -> Self {
        let cache = Self::default();
        cache.lock().writer = writer;
        cache
    }

    /// Whether `server`'s current stream has delivered a response: set on
    /// its first response, cleared when the stream fails.
    pub(crate) fn set_answered(&self, server: &Arc<str>, answered: bool) {
        let mut inner = self.lock();
        if answered {
            inner.answered.insert(Arc::clone(server));
        } else {
            inner.answered.remove(server);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave an entry half-written
        // in a way later readers could misread, so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a watcher of `key`. Returns the receiver and whether this is the
    /// first watcher. Public for the in-process benchmarks and fuzz targets
    /// only: an embedder watches through [`crate::client::XdsClient`].
    #[doc(hidden)]
    pub fn add_watcher(
        &self,
        key: &ResourceKey,
        provenance: Provenance,
        policy: DataErrorPolicy,
    ) -> (watch::Receiver<ResourceState>, bool) {
        let mut inner = self.lock();
        let Some(entry) = inner.watched_entry(key, provenance, policy) else {
            return (
                watch::Sender::new(ResourceState::requested()).subscribe(),
                false,
            );
        };
        let first = entry.watchers == 0;
        entry.watchers += 1;
        let mut rx = entry.slot.subscribe();
        if entry.slot.with(|s| s.status != ResourceStatus::Requested) {
            // A late joiner sees what is cached at once.
            rx.mark_changed();
        }
        (rx, first)
    }

    /// Adds a watcher of `key` that reads its state through the cache (a
    /// watch set's member): counted as a watcher, without a channel.
    pub(crate) fn add_quiet_watcher(
        &self,
        key: &ResourceKey,
        provenance: Provenance,
        policy: DataErrorPolicy,
    ) {
        if let Some(entry) = self.lock().watched_entry(key, provenance, policy) {
            entry.watchers += 1;
        }
    }

    /// Removes a watcher of `key`; the entry goes with the last one unless a
    /// wildcard watcher or a watched collection still holds it.
    pub(crate) fn remove_watcher(&self, key: &ResourceKey) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(key) else {
            return;
        };
        entry.watchers = entry.watchers.saturating_sub(1);
        let held = entry.watchers > 0
            || inner.wildcard.contains_key(&key.type_url)
            || inner.member_of.contains_key(key)
            || inner.collection_of(key).is_some();
        if !held {
            inner.remove_entry(key);
        } else if let Some(entry) = inner.entries.get_mut(key) {
            // Held for queues only now, perhaps: they need no channel, and
            // perhaps not a full entry either.
            entry.slot.shed_unused_channel();
            inner.entries.shrink(key);
        }
    }

    /// Gives up `key`'s channel if no receiver is left: its watcher reads
    /// the state through the cache.
    pub(crate) fn shed_channel(&self, key: &ResourceKey) {
        if let Some(entry) = self.lock().entries.full_mut(key) {
            entry.slot.shed_unused_channel();
        }
    }

    /// Whether `key`'s entry keeps a channel for single watchers.
    #[cfg(test)]
    pub(crate) fn has_channel(&self, key: &ResourceKey) -> bool {
        self.lock()
            .entries
            .full_mut(key)
            .is_some_and(|entry| matches!(entry.slot, Slot::Watched(_)))
    }

    /// The authority of `key`'s entry and the server its subscription is
    /// on, if it is in the cache.
    pub(crate) fn provenance(&self, key: &ResourceKey) -> Option<Provenance> {
        self.lock().entries.get(key).map(|held| held.provenance())
    }

    /// The current state of `key`, if it is in the cache.
    pub fn state(&self, key: &ResourceKey) -> Option<ResourceState> {
        self.lock().entries.get(key).map(|e| e.state())
    }

    /// Calls `f` with every entry's key, provenance and state.
    pub fn for_each(&self, mut f: impl FnMut(&ResourceKey, &Provenance, &ResourceState)) {
        let inner = self.lock();
        for (key, entry) in inner.entries.iter() {
            entry.with(|provenance, state| f(&key, provenance, state));
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies what one server's stream reported, unrouted: each event is
    /// for the entry its key names.
    pub fn apply(&self, server: &Arc<str>, policy: DataErrorPolicy, events: Vec<CoreEvent>) {
        collections::with_deferred_wakes(|| {
            let mut inner = self.lock();
            // One reading of the clock for the events of one response.
            let now = SystemTime::now();
            for event in events {
                inner.apply_one(server, policy, &event, None, now);
            }
        });
    }

    /// Applies events already routed to the entries they are for (their keys
    /// are the entries' keys), each with where it came from; `events` is
    /// left empty, its room kept.
    pub(crate) fn apply_routed(
        &self,
        policy: DataErrorPolicy,
        events: &mut Vec<(CoreEvent, Source)>,
    ) {
        collections::with_deferred_wakes(|| {
            let mut inner = self.lock();
            let now = SystemTime::now();
            for (event, source) in events.drain(..) {
                let server = entry::named_server(&source);
                inner.apply_one(&server, policy, &event, Some(source), now);
            }
        });
    }

    /// Reports a transient error (gRFC A57) to `key`: an ambient error where
    /// a copy serves, an error where none does.
    pub(crate) fn transient_error(&self, key: &ResourceKey, error: &XdsError) {
        let mut inner = self.lock();
        inner.modify(key, |state| entry::transient(state, error));
    }

    /// The stream to `server` has a response again (gRFC A57: it is
    /// healthy), so the transient errors its failure left on entries served
    /// by it are over. A reconnect whose versions all match sends no
    /// resource, so without this the errors would outlive the outage.
    pub(crate) fn stream_healthy(&self, server: &Arc<str>) {
        let mut inner = self.lock();
        let healed = inner
            .entries
            .modify_each(|entry| entry.served_by(server), entry::healthy_again);
        for key in &healed {
            inner.mark_wildcard_dirty(key);
        }
    }

    /// Reports a stream failure of `server` to the entries held only for
    /// wildcard watchers of that server (watched entries are the router's).
    pub(crate) fn stream_failed_unwatched(&self, server: &Arc<str>, error: &XdsError) {
        self.lock()
            .transient_on(server, error, |entry| entry.watchers() == 0);
    }

    /// Reports a permanent error for `key` (a refused redirect, a list
    /// member that cannot be fetched): like a NACK, the last good copy keeps
    /// serving. A member of a watched glob collection gets an entry if it
    /// has none, so its watchers hear of it.
    pub(crate) fn data_error(&self, key: &ResourceKey, server: &Arc<str>, error: XdsError) {
        let mut inner = self.lock();
        if inner.has_entry_for_wildcard(key, server, DataErrorPolicy::default()) {
            inner.modify(key, |state| entry::data_error(state, error));
        }
    }
}

impl Answers for Cache {
    fn is_answered(&self, key: &ResourceKey) -> bool {
        self.lock().entries.get(key).is_some_and(|e| {
            // A copy from the state directory serves, but answers
            // nothing: fallback (gRFC A71) proceeds as if it were not
            // there, so a reachable server can confirm or replace it.
            e.with(|_, state| {
                state.status != ResourceStatus::FromDisk && entry::is_answered(key, state)
            })
        })
    }

    fn has_copy(&self, key: &ResourceKey) -> bool {
        // Nor does a copy from the state directory stand in for a server's:
        // `#alt` is fetched while no server has delivered, as A71 falls
        // back, so that a reachable source confirms or replaces it.
        self.lock()
            .entries
            .get(key)
            .is_some_and(|e| e.has_copy() && e.status() != ResourceStatus::FromDisk)
    }
}

/// What the state directory does after an event.
enum Persist {
    Put(crate::state_dir::Record),
    Remove,
}

/// An accepted copy that differs (bytes or version) from what was cached
/// is written; a copy the event dropped is deleted. `differs` says whether
/// the bytes changed (or a copy from disk was confirmed by another server
/// or with other bytes). Only hands over reference-counted values: no
/// resource bytes are copied here.
fn persistence(
    event: &CoreEvent,
    had: bool,
    old_version: Option<Version>,
    server: Arc<str>,
    state: &ResourceState,
    differs: bool,
) -> Option<Persist> {
    match (&state.resource, event) {
        (Some(resource), CoreEvent::Upsert { key, version, .. })
            if differs || old_version.as_ref() != Some(version) =>
        {
            Some(Persist::Put(crate::state_dir::Record {
                type_url: Arc::clone(&key.type_url),
                name: Arc::clone(&key.name),
                version: Arc::from(&*version.as_str()),
                server,
                resource: resource.raw().clone(),
            }))
        }
        (None, _) if had => Some(Persist::Remove),
        _ => None,
    }
}

/// One event's transition of one entry's state.
struct Step<'a> {
    key: &'a ResourceKey,
    event: &'a CoreEvent,
    server: &'a Arc<str>,
    now: SystemTime,
    /// Whether a state directory records accepted copies.
    persisting: bool,
    /// Whether the server that sent it has delivered a response on its
    /// current stream.
    answered: bool,
}

/// What a step did: whether watchers wake, and what the state directory
/// records.
type Outcome = (bool, Option<Persist>);

impl Step<'_> {
    /// Runs the event's gRFC A88 transition on `state`, that of an entry
    /// with `policy` and `authority` and the NACK last `reported` to its
    /// watchers, for a copy from `source` (its server directly when none).
    /// Says whether its watchers wake, and what the state directory does.
    fn run(
        &self,
        state: &mut ResourceState,
        policy: DataErrorPolicy,
        authority: &Option<Arc<str>>,
        reported: &mut ReportedNack,
        source: Option<Source>,
    ) -> Outcome {
        let cx = Context {
            server: self.server,
            policy,
            now: self.now,
        };
        let source = source.unwrap_or_else(|| Source::direct_under(self.server, authority.clone()));
        let answered = self.answered;
        let had = state.resource.is_some();
        let old_version = state.version.clone();
        let sent_by = Arc::clone(&source.server);
        let unconfirmed = state.status == ResourceStatus::FromDisk;
        let persisted = unconfirmed.then(|| from_disk::Persisted::of(state));
        let woke = match self.event {
            CoreEvent::DoesNotExist { .. } if unconfirmed && answered => {
                from_disk::disk_copy_not_found(state, self.key, &cx)
            }
            _ => entry::apply(state, reported, self.event, source, &cx),
        };
        // A copy from disk confirmed as it was persisted wakes its
        // watchers (its status changed) but is on disk already.
        let differs = woke && !persisted.is_some_and(|p| p.is(state, &sent_by));
        let persist = if self.persisting {
            persistence(self.event, had, old_version, sent_by, state, differs)
        } else {
            None
        };
        (woke, persist)
    }

    /// [`Step::run`] on a plain entry: in place for a new copy from where
    /// its copy came from ([`Plain::update_in_place`]; nothing to persist
    /// then, as a persisted step needs the states before and after),
    /// through its full state otherwise. Gives back the entry and state
    /// when they must be held full.
    fn run_plain(
        &self,
        plain: &mut Plain,
        source: Option<Source>,
    ) -> (Outcome, Option<(Unwatched, ResourceState)>) {
        if let CoreEvent::Upsert {
            resource, version, ..
        } = self.event
            && !self.persisting
            && let Some(changed) =
                plain.update_in_place(resource, version, source.as_ref(), self.server, self.now)
        {
            return ((changed, None), None);
        }
        let mut entry = plain.unwatched();
        let mut state = plain.state();
        let outcome = self.run_unwatched(&mut state, &mut entry, source);
        (outcome, plain.update(entry, state))
    }

    /// [`Step::run`] on an unwatched entry, its state apart.
    fn run_unwatched(
        &self,
        state: &mut ResourceState,
        entry: &mut Unwatched,
        source: Option<Source>,
    ) -> Outcome {
        let authority = &entry.provenance.authority;
        self.run(state, entry.policy, authority, &mut entry.reported, source)
    }
}

impl Entry {
    fn new(provenance: Provenance, policy: DataErrorPolicy) -> Self {
        Self::with_slot(provenance, policy, Slot::new())
    }

    fn with_slot(provenance: Provenance, policy: DataErrorPolicy, slot: Slot) -> Self {
        Entry {
            slot,
            watchers: 0,
            provenance,
            policy,
            reported_nack: None,
            sets: Box::default(),
        }
    }

    /// Queues the entry's change for the watch sets it is a member of.
    fn mark_sets(&self) {
        for (queue, label) in &self.sets {
            queue.mark(Arc::clone(label));
        }
    }
}

impl Inner {
    /// The entry of `key` a new watcher is counted in: made if there is
    /// none, adopted if it holds a copy from the state directory.
    fn watched_entry(
        &mut self,
        key: &ResourceKey,
        provenance: Provenance,
        policy: DataErrorPolicy,
    ) -> Option<&mut Entry> {
        if self.entries.contains_key(key) {
            self.adopt_from_disk(key, &provenance, policy);
        } else {
            self.insert_entry(key, Entry::new(provenance, policy));
        }
        self.entries.get_mut(key)
    }

    /// Runs the gRFC A88 transition of `event` on its entry (made for a
    /// wildcard or collection watcher that wants it, for an update).
    fn apply_one(
        &mut self,
        server: &Arc<str>,
        policy: DataErrorPolicy,
        event: &CoreEvent,
        source: Option<Source>,
        now: SystemTime,
    ) {
        let key = match event {
            CoreEvent::StreamFailed { failure } => {
                self.stream_failed(server, failure);
                return;
            }
            CoreEvent::StreamHealthy | CoreEvent::StreamAccepted => return,
            other => match xdsfed_core::federation::key_of(other) {
                Some(key) => key,
                None => return,
            },
        };
        let sent_by = source.as_ref().map_or(server, |s| &s.server);
        let step = Step {
            key,
            event,
            server,
            now,
            persisting: self.writer.is_some(),
            answered: self.answered.contains(sent_by),
        };
        // One lookup for an entry that exists, as nearly every one does.
        let (changed, persist) = match self.entries.locate_mut(key) {
            Some(HeldMut::Full(entry)) => {
                let Entry {
                    slot,
                    provenance,
                    policy,
                    reported_nack,
                    ..
                } = &mut *entry;
                let mut persist = None;
                let changed = slot.modify(|state| {
                    let woke;
                    (woke, persist) =
                        step.run(state, *policy, &provenance.authority, reported_nack, source);
                    woke
                });
                if changed {
                    entry.mark_sets();
                }
                if entry.is_unwatched() {
                    // Full only for what it no longer has (a NACK since
                    // replaced, a watcher gone): plain again if it can be.
                    self.entries.shrink(key);
                }
                (changed, persist)
            }
            Some(HeldMut::Plain(plain)) => {
                let (outcome, full) = step.run_plain(plain, source);
                if let Some((entry, state)) = full {
                    self.entries.put(key.clone(), entry, state);
                }
                outcome
            }
            None => {
                let upsert = matches!(event, CoreEvent::Upsert { .. });
                if !(upsert && self.wants_entry(key)) {
                    return;
                }
                let mut entry = self.unwatched_entry(key, server, policy);
                let mut state = ResourceState::requested();
                let outcome = step.run_unwatched(&mut state, &mut entry, source);
                self.insert_unwatched(key, entry, state);
                outcome
            }
        };
        self.after_step(key, event, changed, persist);
    }

    /// What follows an event's transition of `key`'s entry: its collection
    /// and wildcard watchers hear of a change, the state directory records
    /// it, and a member's glob has its answer.
    fn after_step(
        &mut self,
        key: &ResourceKey,
        event: &CoreEvent,
        changed: bool,
        persist: Option<Persist>,
    ) {
        if changed {
            self.mark_collections_dirty(key);
        }
        if let (Some(writer), Some(persist)) = (&self.writer, persist) {
            match persist {
                Persist::Put(record) => writer.put(record),
                Persist::Remove => writer.remove(key.clone()),
            }
        }
        if matches!(event, CoreEvent::Upsert { .. }) {
            self.answer_glob_of(key);
        }
    }

    /// Runs `f` on `key`'s state; wakes its watchers if `f` says so.
    fn modify(&mut self, key: &ResourceKey, f: impl FnOnce(&mut ResourceState) -> bool) {
        if self.entries.modify(key, f) {
            self.mark_wildcard_dirty(key);
        }
    }

    /// gRFC A57: every entry of `server` keeps its copy, with an error.
    fn stream_failed(&mut self, server: &Arc<str>, failure: &StreamFailure) {
        let error = XdsError::stream_failed(failure, Arc::clone(server));
        self.transient_on(server, &error, |_| true);
    }

    /// Gives `error` to the entries of `server` that `which` picks. In
    /// place, naming only the entries it changed: a server that stays down
    /// fails each retry alike, and then none changes (a copy of every key
    /// per retry was 35 MB at a million resources).
    fn transient_on(
        &mut self,
        server: &Arc<str>,
        error: &XdsError,
        which: impl Fn(Held<'_>) -> bool,
    ) {
        let changed = self.entries.modify_each(
            |entry| **entry.server() == **server && which(entry),
            |state| entry::transient(state, error),
        );
        for key in &changed {
            self.mark_wildcard_dirty(key);
        }
    }

    fn insert_entry(&mut self, key: &ResourceKey, entry: Entry) {
        self.index_new_entry(key);
        self.entries.insert(key.clone(), entry);
    }

    /// Holds a new unwatched entry in `state`: plain if it can be.
    fn insert_unwatched(&mut self, key: &ResourceKey, entry: Unwatched, state: ResourceState) {
        self.index_new_entry(key);
        self.entries.put(key.clone(), entry, state);
    }

    fn index_new_entry(&mut self, key: &ResourceKey) {
        if is_glob(&key.name) {
            self.glob_entries += 1;
        }
    }

    /// Removes `key`'s entry and its index entries.
    fn remove_entry(&mut self, key: &ResourceKey) {
        if !self.entries.remove(key) {
            return;
        }
        if is_glob(&key.name) {
            self.glob_entries = self.glob_entries.saturating_sub(1);
        }
    }

    /// Indexes the entries of `type_url` by glob, from now on and the ones
    /// already cached, unless that was done already.
    pub(super) fn index_globs_of(&mut self, type_url: &Arc<str>) {
        self.entries.index_globs_of(type_url);
    }

    /// The cached entries that would be members of glob `glob`.
    fn under_glob<'a>(
        &'a self,
        glob: &'a ResourceKey,
    ) -> impl Iterator<Item = (ResourceKey, Held<'a>)> {
        self.entries.under_glob(glob)
    }
}
