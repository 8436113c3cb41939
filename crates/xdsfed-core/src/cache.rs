//! The resource cache: the latest state of every watched resource.
//!
//! The cache is fed by the ADS streams (through [`Cache::apply`]) and read by
//! watchers. Each entry owns a `tokio::sync::watch` channel holding the
//! resource's latest [`ResourceState`]: a stream never waits on a watcher, a
//! slow watcher simply sees the newest state when it looks (latest-value
//! delivery), and identical bytes wake nobody.
//!
//! How events become watcher-visible states follows gRFC A88, with the
//! server features of gRFC A53/A88 (`ignore_resource_deletion`,
//! `fail_on_data_errors`):
//!
//! | event | cached copy | without one |
//! | --- | --- | --- |
//! | valid update | replaced (wakes only if the bytes differ, even after a NACK) | stored |
//! | NACK | kept, ambient error (dropped with `fail_on_data_errors`); the NACK last reported, again, wakes nobody | error |
//! | deletion by the server | dropped, does not exist (kept with `ignore_resource_deletion`) | does not exist |
//! | does-not-exist timer | — | does not exist |
//! | TP3 resource error | kept, ambient error | error (does not exist for NOT_FOUND) |
//! | stream failure (A57) | kept, ambient error | error |

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::{Notify, watch};

use crate::error::{ErrorKind, XdsError};
use crate::protocol::event::RemovedReason;
use crate::protocol::{CoreEvent, ResourceKey, glob_of, is_glob};
use crate::types::Decoded;

/// A resource's status, as CSDS (`envoy.admin.v3.ClientResourceStatus`) names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResourceStatus {
    /// Subscribed, nothing received yet.
    Requested,
    /// The server says it does not exist, or the does-not-exist timer fired.
    DoesNotExist,
    /// Received and accepted.
    Acked,
    /// The last update was rejected; a previous good copy may still serve.
    Nacked,
    /// The server reported an error for it (TP3).
    ReceivedError,
    /// The does-not-exist timer fired while the server was known to be slow
    /// (`resource_timer_indicates_transient_failure`).
    Timeout,
}

impl ResourceStatus {
    /// The CSDS enum value (`envoy.admin.v3.ClientResourceStatus`).
    pub fn to_csds(self) -> i32 {
        match self {
            ResourceStatus::Requested => 1,
            ResourceStatus::DoesNotExist => 2,
            ResourceStatus::Acked => 3,
            ResourceStatus::Nacked => 4,
            ResourceStatus::ReceivedError => 5,
            ResourceStatus::Timeout => 6,
        }
    }

    /// All statuses, in CSDS order.
    pub const ALL: [ResourceStatus; 6] = [
        ResourceStatus::Requested,
        ResourceStatus::DoesNotExist,
        ResourceStatus::Acked,
        ResourceStatus::Nacked,
        ResourceStatus::ReceivedError,
        ResourceStatus::Timeout,
    ];

    /// The CSDS name, e.g. `ACKED`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceStatus::Requested => "REQUESTED",
            ResourceStatus::DoesNotExist => "DOES_NOT_EXIST",
            ResourceStatus::Acked => "ACKED",
            ResourceStatus::Nacked => "NACKED",
            ResourceStatus::ReceivedError => "RECEIVED_ERROR",
            ResourceStatus::Timeout => "TIMEOUT",
        }
    }
}

/// The latest state of one resource, as watchers and the status dump see it.
#[derive(Debug, Clone)]
pub struct ResourceState {
    /// The last good copy, if any.
    pub resource: Option<Decoded>,
    /// The version of the last good copy.
    pub version: Option<Arc<str>>,
    /// The CSDS status.
    pub status: ResourceStatus,
    /// The last error, cleared by the next good update.
    pub error: Option<XdsError>,
    /// When the last good copy arrived.
    pub last_updated: Option<SystemTime>,
    /// The version of the last rejected update, for CSDS.
    pub failed_version: Option<Arc<str>>,
    /// When the last rejected update arrived, for CSDS
    /// (`UpdateFailureState.last_update_attempt`).
    pub failed_at: Option<SystemTime>,
    /// Where the last good copy came from: which server, under which name,
    /// and whether a fallback server, an `#alt` or a redirect served it.
    /// `None` until a copy arrives. A copy applied without routing (through
    /// [`Cache::apply`]: a wildcard subscription's, say) came directly from
    /// the server it was applied for.
    pub source: Option<Source>,
}

/// Where a cached copy came from (see [`ResourceState::source`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The server that sent it.
    pub server: Arc<str>,
    /// The authority of the name it was fetched as (`None` for old-style).
    pub authority: Option<Arc<str>>,
    /// The name it was fetched as: the watched name itself, or the `#alt`
    /// or redirect target that stood in for it.
    pub fetched_as: Arc<str>,
    /// Served by a fallback server of its authority (gRFC A71), not the first.
    pub fallback: bool,
    /// Served by the watched name's `#alt` alternative (xDS TP1).
    pub alt: bool,
    /// Reached through one or more `ResourceLocator` redirects (xDS TP1).
    pub redirected: bool,
}

impl Source {
    /// A copy `server` sent under `key`'s own name, with no fallback, `#alt`
    /// or redirect known to have been in between.
    fn direct(server: &Arc<str>, key: &ResourceKey) -> Self {
        Source {
            server: Arc::clone(server),
            authority: crate::name::authority_of(&key.name).map(Arc::from),
            fetched_as: Arc::from(""),
            fallback: false,
            alt: false,
            redirected: false,
        }
    }
}

impl ResourceState {
    fn requested() -> Self {
        ResourceState {
            resource: None,
            version: None,
            status: ResourceStatus::Requested,
            error: None,
            last_updated: None,
            failed_version: None,
            failed_at: None,
            source: None,
        }
    }
}

/// Where a resource comes from, for the status dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The resource's authority (`None` for old-style names).
    pub authority: Option<Arc<str>>,
    /// The server the subscription is on.
    pub server: Arc<str>,
}

/// Server behaviour that changes how events become states (server features).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataErrorPolicy {
    /// `ignore_resource_deletion` (gRFC A53): keep a deleted resource.
    pub ignore_resource_deletion: bool,
    /// `fail_on_data_errors` (gRFC A88): drop the cached copy on a NACK.
    pub fail_on_data_errors: bool,
    /// `resource_timer_indicates_transient_failure` (gRFC A88).
    pub timer_is_transient: bool,
}

impl DataErrorPolicy {
    /// The policy that a server's features ask for.
    pub fn from_features(features: &[String]) -> Self {
        let has = |f: &str| features.iter().any(|x| x == f);
        DataErrorPolicy {
            ignore_resource_deletion: has("ignore_resource_deletion"),
            fail_on_data_errors: has("fail_on_data_errors"),
            timer_is_transient: has("resource_timer_indicates_transient_failure"),
        }
    }
}

struct Entry {
    tx: watch::Sender<ResourceState>,
    /// Explicit watchers; entries with none are held for wildcard watchers.
    watchers: usize,
    provenance: Provenance,
    policy: DataErrorPolicy,
    /// The last NACK its watchers heard of (failed version and message),
    /// until a different copy arrives: a server that sends the same bad
    /// update again, typically on every reconnect, is not news.
    reported_nack: Option<(Arc<str>, String)>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<ResourceKey, Entry>,
    /// Keys per server, so a stream failure touches only that server's entries.
    by_server: HashMap<Arc<str>, HashSet<ResourceKey>>,
    /// Wildcard watchers per type URL.
    wildcard: HashMap<Arc<str>, Vec<Arc<WildcardQueue>>>,
    /// Glob collection watchers per glob (xDS TP1): members arriving under a
    /// watched glob get entries, and changes are queued for its watchers.
    collections: HashMap<ResourceKey, Vec<Arc<WildcardQueue>>>,
    /// List collection members (xDS TP1): each member's collections, and
    /// each collection's members.
    member_of: HashMap<ResourceKey, HashSet<ResourceKey>>,
    members: HashMap<ResourceKey, HashSet<ResourceKey>>,
    /// List collections whose members have been set at least once: until
    /// then the collection's body may be cached with its members not yet
    /// known, and a watcher must not take that for an empty list.
    listed: HashSet<ResourceKey>,
}

/// Names changed since a wildcard watcher last looked, and a wake-up.
#[derive(Debug, Default)]
pub(crate) struct WildcardQueue {
    pub(crate) dirty: Mutex<indexmap_lite::Dirty>,
    pub(crate) notify: Notify,
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave an entry half-written
        // in a way later readers could misread, so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a watcher of `key`. Returns the receiver and whether this is the
    /// first watcher (the caller then subscribes on the stream).
    pub fn add_watcher(
        &self,
        key: &ResourceKey,
        provenance: Provenance,
        policy: DataErrorPolicy,
    ) -> (watch::Receiver<ResourceState>, bool) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let first;
        let entry = match inner.entries.get_mut(key) {
            Some(entry) => {
                first = entry.watchers == 0;
                entry
            }
            None => {
                first = true;
                inner
                    .by_server
                    .entry(Arc::clone(&provenance.server))
                    .or_default()
                    .insert(key.clone());
                inner.entries.entry(key.clone()).or_insert_with(|| Entry {
                    tx: watch::Sender::new(ResourceState::requested()),
                    watchers: 0,
                    provenance,
                    policy,
                    reported_nack: None,
                })
            }
        };
        entry.watchers += 1;
        let mut rx = entry.tx.subscribe();
        if entry.tx.borrow().status != ResourceStatus::Requested {
            // A late joiner sees what is cached at once.
            rx.mark_changed();
        }
        (rx, first)
    }

    /// Removes a watcher of `key`. Returns true when it was the last one (the
    /// caller then unsubscribes); the entry is dropped then.
    pub fn remove_watcher(&self, key: &ResourceKey) -> bool {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(key) else {
            return false;
        };
        entry.watchers = entry.watchers.saturating_sub(1);
        if entry.watchers > 0 || inner.wildcard.contains_key(&key.type_url) {
            return false;
        }
        if inner.member_of.contains_key(key) {
            // A member of a list collection: still the collection's.
            return true;
        }
        if let Some(entry) = inner.entries.remove(key)
            && let Some(keys) = inner.by_server.get_mut(&entry.provenance.server)
        {
            keys.remove(key);
        }
        true
    }

    /// The current state of `key`, if it is in the cache.
    pub fn state(&self, key: &ResourceKey) -> Option<ResourceState> {
        self.lock().entries.get(key).map(|e| e.tx.borrow().clone())
    }

    /// Calls `f` with every entry's key, provenance and state.
    pub fn for_each(&self, mut f: impl FnMut(&ResourceKey, &Provenance, &ResourceState)) {
        let inner = self.lock();
        for (key, entry) in &inner.entries {
            f(key, &entry.provenance, &entry.tx.borrow());
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
            for (key, entry) in &inner.entries {
                if &*key.type_url == type_url
                    && entry.tx.borrow().status != ResourceStatus::Requested
                {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
        }
        let type_url: Arc<str> = type_url.into();
        let list = inner.wildcard.entry(Arc::clone(&type_url)).or_default();
        let first = list.is_empty();
        list.push(Arc::clone(&queue));
        let _ = (provenance, policy);
        (queue, first)
    }

    /// Adds a watcher of the members of the glob collection `glob`; members
    /// already cached count as changed.
    pub(crate) fn add_collection(&self, glob: &ResourceKey) -> Arc<WildcardQueue> {
        let mut inner = self.lock();
        let queue = Arc::new(WildcardQueue::default());
        {
            let mut dirty = queue.dirty.lock().unwrap_or_else(|e| e.into_inner());
            for (key, entry) in &inner.entries {
                if key.type_url == glob.type_url
                    && glob_of(&key.name).is_some_and(|g| *g == *glob.name)
                    && entry.tx.borrow().status != ResourceStatus::Requested
                {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
            // A list collection's members (and the collection itself).
            let listed = inner.members.get(glob).into_iter().flatten();
            for key in listed.chain(std::iter::once(glob)) {
                if inner
                    .entries
                    .get(key)
                    .is_some_and(|e| e.tx.borrow().status != ResourceStatus::Requested)
                {
                    dirty.insert(Arc::clone(&key.name));
                }
            }
        }
        inner
            .collections
            .entry(glob.clone())
            .or_default()
            .push(Arc::clone(&queue));
        queue
    }

    /// Removes a collection watcher; with the last one, the member entries
    /// nobody else watches go.
    pub(crate) fn remove_collection(&self, glob: &ResourceKey, queue: &Arc<WildcardQueue>) {
        let mut inner = self.lock();
        let Some(list) = inner.collections.get_mut(glob) else {
            return;
        };
        list.retain(|q| !Arc::ptr_eq(q, queue));
        if !list.is_empty() {
            return;
        }
        inner.collections.remove(glob);
        if inner.wildcard.contains_key(&glob.type_url) {
            return;
        }
        let orphaned: Vec<ResourceKey> = inner
            .entries
            .iter()
            .filter(|(k, e)| {
                e.watchers == 0
                    && k.type_url == glob.type_url
                    && glob_of(&k.name).is_some_and(|g| *g == *glob.name)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphaned {
            if let Some(entry) = inner.entries.remove(&key)
                && let Some(keys) = inner.by_server.get_mut(&entry.provenance.server)
            {
                keys.remove(&key);
            }
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
                .is_some_and(|e| e.tx.borrow().status != ResourceStatus::Requested)
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
                queue.notify.notify_one();
            }
        }
        for left in old {
            let orphaned = !inner.member_of.contains_key(&left)
                && inner.entries.get(&left).is_some_and(|e| e.watchers == 0)
                && !inner.wildcard.contains_key(&left.type_url)
                && inner.collection_of(&left).is_none();
            if orphaned
                && let Some(entry) = inner.entries.remove(&left)
                && let Some(keys) = inner.by_server.get_mut(&entry.provenance.server)
            {
                keys.remove(&left);
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
        self.set_list_members(collection, HashSet::new());
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
            .filter(|(k, e)| &*k.type_url == type_url && e.watchers == 0)
            .map(|(k, _)| k.clone())
            .collect();
        for key in orphaned {
            if let Some(entry) = inner.entries.remove(&key)
                && let Some(keys) = inner.by_server.get_mut(&entry.provenance.server)
            {
                keys.remove(&key);
            }
        }
        true
    }

    /// Applies what one server's stream reported.
    pub fn apply(&self, server: &Arc<str>, policy: DataErrorPolicy, events: Vec<CoreEvent>) {
        let mut inner = self.lock();
        for event in events {
            inner.apply_one(server, policy, event, None);
        }
    }

    /// Applies events already routed to the entries they are for (their keys
    /// are the entries' keys), each with where it came from. `server` in
    /// each [`Source`] is what error messages name.
    pub(crate) fn apply_routed(&self, policy: DataErrorPolicy, events: Vec<(CoreEvent, Source)>) {
        let mut inner = self.lock();
        for (event, source) in events {
            let server = if source.fetched_as.is_empty() {
                Arc::clone(&source.server)
            } else {
                Arc::from(format!("{} (as {})", source.server, source.fetched_as))
            };
            inner.apply_one(&server, policy, event, Some(source));
        }
    }

    /// Reports a transient error (the stream to the entries' server failed,
    /// gRFC A57) to each of `keys`: an ambient error where a copy serves,
    /// an error where none does.
    pub(crate) fn transient_error(&self, keys: &[ResourceKey], error: &XdsError) {
        let inner = self.lock();
        for key in keys {
            if let Some(entry) = inner.entries.get(key) {
                entry
                    .tx
                    .send_modify(|state| state.error = Some(error.clone()));
                inner.mark_wildcard_dirty(key);
            }
        }
    }

    /// The stream to `server` has a response again (gRFC A57: it is
    /// healthy), so the transient errors its failure left on entries served
    /// by it are over. A reconnect whose versions all match sends no
    /// resource, so without this the errors would outlive the outage.
    /// Runs once per recovery, not per update.
    pub(crate) fn stream_healthy(&self, server: &Arc<str>) {
        let inner = self.lock();
        for (key, entry) in &inner.entries {
            let stale = {
                let state = entry.tx.borrow();
                let served_by = entry.provenance.server == *server
                    || state.source.as_ref().is_some_and(|s| s.server == *server);
                served_by
                    && state.status != ResourceStatus::Timeout
                    && state
                        .error
                        .as_ref()
                        .is_some_and(|e| e.kind() == ErrorKind::Transient)
            };
            if stale {
                entry.tx.send_modify(|state| state.error = None);
                inner.mark_wildcard_dirty(key);
            }
        }
    }

    /// Reports a stream failure of `server` to the entries held only for
    /// wildcard watchers of that server (watched entries are the router's).
    pub(crate) fn stream_failed_unwatched(&self, server: &Arc<str>, error: &XdsError) {
        let inner = self.lock();
        let Some(keys) = inner.by_server.get(server) else {
            return;
        };
        for key in keys {
            if let Some(entry) = inner.entries.get(key)
                && entry.watchers == 0
            {
                entry
                    .tx
                    .send_modify(|state| state.error = Some(error.clone()));
                inner.mark_wildcard_dirty(key);
            }
        }
    }

    /// Whether `key` has an answer: a copy, or a known absence. gRFC A71
    /// counts both as cached; a watcher of anything else is waiting.
    pub(crate) fn is_answered(&self, key: &ResourceKey) -> bool {
        self.lock().entries.get(key).is_some_and(|e| {
            let state = e.tx.borrow();
            state.resource.is_some()
                || state.status == ResourceStatus::DoesNotExist
                // A glob holds no copy of its own: a member answers for it.
                || state.status == ResourceStatus::Acked && is_glob(&key.name)
        })
    }

    /// `key`'s copy, its version and the server that sent it, if it holds
    /// one: for a new reader of an already fetched key, which the server
    /// will not send again.
    pub(crate) fn copy_of(&self, key: &ResourceKey) -> Option<(Decoded, Arc<str>, Source)> {
        let inner = self.lock();
        let entry = inner.entries.get(key)?;
        let state = entry.tx.borrow();
        let resource = state.resource.clone()?;
        let version = state.version.clone().unwrap_or_else(|| Arc::from(""));
        let source = state.source.clone().unwrap_or_else(|| Source {
            server: Arc::clone(&entry.provenance.server),
            authority: entry.provenance.authority.clone(),
            fetched_as: Arc::from(""),
            fallback: false,
            alt: false,
            redirected: false,
        });
        Some((resource, version, source))
    }

    /// Whether `key` holds a copy.
    pub(crate) fn has_copy(&self, key: &ResourceKey) -> bool {
        self.lock()
            .entries
            .get(key)
            .is_some_and(|e| e.tx.borrow().resource.is_some())
    }

    /// Reports a permanent error for `key` (a refused redirect, a malformed
    /// collection): like a NACK, the last good copy keeps serving. A member
    /// of a watched glob collection gets an entry if it has none, so its
    /// watchers hear of it.
    pub(crate) fn data_error(
        &self,
        key: &ResourceKey,
        server: &Arc<str>,
        policy: DataErrorPolicy,
        error: XdsError,
    ) {
        let mut inner = self.lock();
        if let Some(entry) = inner.entry_for_wildcard(key, server, policy) {
            entry.tx.send_modify(|state| {
                state.status = ResourceStatus::ReceivedError;
                state.error = Some(error.clone());
            });
            inner.mark_wildcard_dirty(key);
        }
    }
}

impl Inner {
    fn apply_one(
        &mut self,
        server: &Arc<str>,
        policy: DataErrorPolicy,
        event: CoreEvent,
        source: Option<Source>,
    ) {
        match event {
            CoreEvent::Upsert {
                key,
                resource,
                version,
                ..
            } => self.apply_upsert(server, policy, key, resource, version, source),
            CoreEvent::Invalid {
                key,
                error,
                version,
            } => self.apply_invalid(server, &key, &error, version),
            CoreEvent::Removed { key, reason } => {
                let Some(entry) = self.entries.get(&key) else {
                    return;
                };
                let keep =
                    entry.policy.ignore_resource_deletion && reason == RemovedReason::Deleted;
                let why = match reason {
                    RemovedReason::Deleted => "deleted by",
                    RemovedReason::TtlExpired => "expired (TTL) from",
                };
                let message = format!(
                    "{} {} {why} server {}",
                    short_type(&key.type_url),
                    key.name,
                    server
                );
                entry.tx.send_modify(|state| {
                    if keep && state.resource.is_some() {
                        state.error = Some(XdsError::new(ErrorKind::NotFound, message));
                    } else {
                        state.resource = None;
                        state.version = None;
                        state.status = ResourceStatus::DoesNotExist;
                        state.error = Some(XdsError::new(ErrorKind::NotFound, message));
                    }
                });
                self.mark_wildcard_dirty(&key);
            }
            CoreEvent::DoesNotExist { key } => {
                let Some(entry) = self.entries.get(&key) else {
                    return;
                };
                let transient = entry.policy.timer_is_transient;
                let message = format!(
                    "{} {} not received from server {} before the does-not-exist timer fired",
                    short_type(&key.type_url),
                    key.name,
                    server
                );
                entry.tx.send_modify(|state| {
                    if state.resource.is_some() {
                        return; // A57: the timer never applies to cached resources.
                    }
                    if transient {
                        state.status = ResourceStatus::Timeout;
                        state.error = Some(XdsError::new(ErrorKind::Transient, message));
                    } else {
                        state.status = ResourceStatus::DoesNotExist;
                        state.error = Some(XdsError::new(ErrorKind::NotFound, message));
                    }
                });
                self.mark_wildcard_dirty(&key);
            }
            CoreEvent::ResourceError { key, code, message } => {
                let Some(entry) = self.entries.get(&key) else {
                    return;
                };
                let text = format!(
                    "server {} reported an error for {} {}: {} (code {code})",
                    server,
                    short_type(&key.type_url),
                    key.name,
                    message
                );
                // NOT_FOUND (5) and PERMISSION_DENIED (7) may drop a cached copy (A88).
                let drop_cached = entry.policy.fail_on_data_errors && (code == 5 || code == 7);
                entry.tx.send_modify(|state| {
                    if drop_cached {
                        state.resource = None;
                    }
                    if state.resource.is_none() && code == 5 {
                        state.status = ResourceStatus::DoesNotExist;
                        state.error = Some(XdsError::new(ErrorKind::NotFound, text));
                    } else {
                        state.status = ResourceStatus::ReceivedError;
                        state.error = Some(XdsError::new(ErrorKind::ServerError, text));
                    }
                });
                self.mark_wildcard_dirty(&key);
            }
            CoreEvent::StreamFailed { error } => {
                let Some(keys) = self.by_server.get(server) else {
                    return;
                };
                let error = XdsError::new(ErrorKind::Transient, error);
                let mut touched = Vec::new();
                for key in keys {
                    if let Some(entry) = self.entries.get(key) {
                        entry
                            .tx
                            .send_modify(|state| state.error = Some(error.clone()));
                        touched.push(key.clone());
                    }
                }
                for key in touched {
                    self.mark_wildcard_dirty(&key);
                }
            }
            CoreEvent::Redirect { key, target, .. } => {
                let Some(entry) = self.entries.get(&key) else {
                    return;
                };
                let message = format!(
                    "{} {} redirected by server {} to {}: refused, xDS TP1 allows redirects only for list collections and members of glob collections",
                    short_type(&key.type_url),
                    key.name,
                    server,
                    target
                );
                entry.tx.send_modify(|state| {
                    state.status = ResourceStatus::ReceivedError;
                    state.error = Some(XdsError::new(ErrorKind::ServerError, message));
                });
                self.mark_wildcard_dirty(&key);
            }
            CoreEvent::NotRequested { key, reason } => {
                let Some(entry) = self.entries.get(&key) else {
                    return;
                };
                let message = format!(
                    "{} {} not requested from server {}: {reason}",
                    short_type(&key.type_url),
                    key.name,
                    server
                );
                entry.tx.send_modify(|state| {
                    state.error = Some(XdsError::new(ErrorKind::Watch, message));
                });
                self.mark_wildcard_dirty(&key);
            }
            CoreEvent::StreamHealthy => {}
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    /// A valid copy: stored; watchers wake only if its bytes differ from
    /// the copy they hold.
    fn apply_upsert(
        &mut self,
        server: &Arc<str>,
        policy: DataErrorPolicy,
        key: ResourceKey,
        resource: Decoded,
        version: Arc<str>,
        source: Option<Source>,
    ) {
        let source = source.unwrap_or_else(|| Source::direct(server, &key));
        let entry = self.entry_for_wildcard(&key, server, policy);
        let Some(entry) = entry else { return };
        let changed = entry.tx.send_if_modified(|state| {
            let same_bytes = state.resource.as_ref().map(|r| r.raw()) == Some(resource.raw());
            state.version = Some(version);
            state.source = Some(source);
            state.status = ResourceStatus::Acked;
            state.error = None;
            state.failed_version = None;
            state.failed_at = None;
            if !same_bytes {
                state.resource = Some(resource);
                state.last_updated = Some(SystemTime::now());
            }
            // The copy the watchers hold, sent again (after a
            // reconnect, or after a NACK), is no news: the state is
            // brought up to date without waking them.
            !same_bytes
        });
        if changed {
            entry.reported_nack = None;
        }
        if changed {
            self.mark_wildcard_dirty(&key);
        }
        self.answer_glob_of(&key);
    }

    /// A rejected copy (NACK): the last good one keeps serving; the same
    /// NACK as the one last reported wakes nobody.
    fn apply_invalid(
        &mut self,
        server: &Arc<str>,
        key: &ResourceKey,
        error: &crate::types::ValidationError,
        version: Arc<str>,
    ) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        let fail = entry.policy.fail_on_data_errors;
        let message = format!(
            "{} {} rejected (NACKed) from server {}: {}",
            short_type(&key.type_url),
            key.name,
            server,
            error
        );
        let nack = (version, message);
        let repeated = entry.reported_nack.as_ref() == Some(&nack);
        let changed = entry.tx.send_if_modified(|state| {
            state.status = ResourceStatus::Nacked;
            state.failed_version = Some(Arc::clone(&nack.0));
            state.failed_at = Some(SystemTime::now());
            state.error = Some(XdsError::new(ErrorKind::Nacked, nack.1.clone()));
            if fail {
                state.resource = None;
            }
            !repeated || fail
        });
        entry.reported_nack = Some(nack);
        if changed {
            self.mark_wildcard_dirty(key);
        }
    }

    /// A member arrived: its glob collection, if watched and still waiting,
    /// has its answer (CSDS shows it `ACKED`; gRFC A71 counts it as cached,
    /// so a failing server with the members held causes no fallback).
    fn answer_glob_of(&self, member: &ResourceKey) {
        let Some(glob) = glob_of(&member.name) else {
            return;
        };
        let glob = ResourceKey::new(Arc::clone(&member.type_url), glob);
        if let Some(entry) = self.entries.get(&glob) {
            entry.tx.send_if_modified(|state| {
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

    /// The entry for `key`, created when a wildcard watcher of its type wants it.
    fn entry_for_wildcard(
        &mut self,
        key: &ResourceKey,
        server: &Arc<str>,
        policy: DataErrorPolicy,
    ) -> Option<&mut Entry> {
        if !self.entries.contains_key(key) {
            if !self.wildcard.contains_key(&key.type_url)
                && self.collection_of(key).is_none()
                && !self.member_of.contains_key(key)
            {
                return None;
            }
            self.by_server
                .entry(Arc::clone(server))
                .or_default()
                .insert(key.clone());
            self.entries.insert(
                key.clone(),
                Entry {
                    tx: watch::Sender::new(ResourceState::requested()),
                    watchers: 0,
                    provenance: Provenance {
                        authority: crate::name::authority_of(&key.name).map(Arc::from),
                        server: Arc::clone(server),
                    },
                    policy,
                    reported_nack: None,
                },
            );
        }
        self.entries.get_mut(key)
    }

    /// The watched glob collection `key` is a member of, if any.
    fn collection_of(&self, key: &ResourceKey) -> Option<&Vec<Arc<WildcardQueue>>> {
        if self.collections.is_empty() {
            return None;
        }
        let glob = glob_of(&key.name)?;
        self.collections
            .get(&ResourceKey::new(Arc::clone(&key.type_url), glob))
    }

    fn mark_wildcard_dirty(&self, key: &ResourceKey) {
        // A member of a watched glob, or the glob itself (empty, TP1 §Glob).
        let lists = self
            .member_of
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|c| self.collections.get(c));
        let collection = self
            .collection_of(key)
            .into_iter()
            .chain(self.collections.get(key))
            .chain(lists);
        for queue in collection.flatten() {
            queue
                .dirty
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(Arc::clone(&key.name));
            queue.notify.notify_one();
        }
        if let Some(list) = self.wildcard.get(&key.type_url) {
            for queue in list {
                queue
                    .dirty
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(Arc::clone(&key.name));
                queue.notify.notify_one();
            }
        }
    }
}

/// `envoy.config.cluster.v3.Cluster` from its type URL.
pub(crate) fn short_type(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// A small insertion-ordered set of names without duplicates.
pub(crate) mod indexmap_lite {
    use std::collections::{HashSet, VecDeque};
    use std::sync::Arc;

    /// Names in the order they first changed.
    #[derive(Debug, Default)]
    pub(crate) struct Dirty {
        order: VecDeque<Arc<str>>,
        set: HashSet<Arc<str>>,
    }

    impl Dirty {
        pub(crate) fn insert(&mut self, name: Arc<str>) {
            if self.set.insert(Arc::clone(&name)) {
                self.order.push_back(name);
            }
        }

        pub(crate) fn pop(&mut self) -> Option<Arc<str>> {
            let name = self.order.pop_front()?;
            self.set.remove(&name);
            Some(name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";
    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    /// A list collection's body can be cached before its members are set;
    /// until they are, the member list is unknown, not empty (a watcher
    /// would otherwise report an empty list first). An empty list, once
    /// set, is a list; a collection let go is unknown again.
    #[test]
    fn list_members_are_unknown_until_set_and_after_the_list_is_forgotten() {
        let cache = Cache::new();
        let list = ResourceKey::new(
            LIST,
            "xdstp://a/envoy.config.cluster.v3.ClusterCollection/c",
        );
        assert_eq!(cache.list_members(&list), None);

        cache.set_list_members(&list, HashSet::new());
        assert_eq!(cache.list_members(&list), Some(Vec::new()));

        let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/m");
        cache.set_list_members(&list, HashSet::from([member.clone()]));
        assert_eq!(
            cache.list_members(&list),
            Some(vec![Arc::clone(&member.name)])
        );
        assert!(cache.is_list_member(&list, &member));

        cache.forget_list(&list);
        assert_eq!(cache.list_members(&list), None);
        assert!(!cache.is_list_member(&list, &member));
    }

    fn cluster_copy(name: &str, alt_stat_name: &str) -> Decoded {
        use crate::types::{ClusterType, Erased, ErasedType};
        use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
        use envoy_types::pb::envoy::config::core::v3::{
            Address, SocketAddress, address, socket_address,
        };
        use envoy_types::pb::envoy::config::endpoint::v3::{
            ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
        };
        use prost::Message;
        let cluster = Cluster {
            name: name.into(),
            alt_stat_name: alt_stat_name.into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::LogicalDns as i32,
            )),
            load_assignment: Some(ClusterLoadAssignment {
                cluster_name: name.into(),
                endpoints: vec![LocalityLbEndpoints {
                    lb_endpoints: vec![LbEndpoint {
                        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                            address: Some(Address {
                                address: Some(address::Address::SocketAddress(SocketAddress {
                                    address: "example.com".into(),
                                    port_specifier: Some(socket_address::PortSpecifier::PortValue(
                                        443,
                                    )),
                                    ..Default::default()
                                })),
                            }),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        Erased::<ClusterType>::new()
            .decode(cluster.encode_to_vec().into())
            .expect("a valid cluster")
    }

    /// A server that sends the copy the watchers hold again, and the same
    /// bad update again, as a server does on every reconnect, is heard once:
    /// one change, one ambient error, then nothing until something differs.
    #[test]
    fn the_same_copy_and_the_same_nack_again_do_not_wake_watchers() {
        let cache = Cache::new();
        let server: Arc<str> = Arc::from("s");
        let key = ResourceKey::new(CDS, "c1");
        let provenance = Provenance {
            authority: None,
            server: Arc::clone(&server),
        };
        let (mut rx, _) = cache.add_watcher(&key, provenance, DataErrorPolicy::default());
        let upsert = |alt: &str| CoreEvent::Upsert {
            key: key.clone(),
            resource: cluster_copy("c1", alt),
            version: Arc::from("1"),
            ttl: None,
        };
        let nack = |why: &str| CoreEvent::Invalid {
            key: key.clone(),
            error: crate::types::ValidationError(why.into()),
            version: Arc::from("2"),
        };
        let mut woken = || {
            let woke = rx.has_changed().unwrap_or(false);
            rx.mark_unchanged();
            woke
        };

        cache.apply(&server, DataErrorPolicy::default(), vec![upsert("a")]);
        assert!(woken(), "the first copy is news");
        cache.apply(&server, DataErrorPolicy::default(), vec![nack("bad")]);
        assert!(woken(), "the first NACK is news");
        for _ in 0..3 {
            cache.apply(&server, DataErrorPolicy::default(), vec![upsert("a")]);
            assert!(!woken(), "the same copy again is no news");
            assert_eq!(
                cache.state(&key).map(|s| s.status),
                Some(ResourceStatus::Acked)
            );
            cache.apply(&server, DataErrorPolicy::default(), vec![nack("bad")]);
            assert!(!woken(), "the same NACK again is no news");
            assert_eq!(
                cache.state(&key).map(|s| s.status),
                Some(ResourceStatus::Nacked)
            );
        }
        cache.apply(&server, DataErrorPolicy::default(), vec![nack("worse")]);
        assert!(woken(), "another NACK is news");
        cache.apply(&server, DataErrorPolicy::default(), vec![upsert("b")]);
        assert!(woken(), "another copy is news");
        cache.apply(&server, DataErrorPolicy::default(), vec![nack("worse")]);
        assert!(woken(), "after another copy, the old NACK is news again");
    }
}
