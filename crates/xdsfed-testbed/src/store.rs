//! The resource store of one management server.
//!
//! Resources are kept as `Any` (type URL and encoded bytes), so a server can
//! serve any resource type, Envoy's or a user's own, without knowing its
//! schema. They are indexed by type URL and then by canonical key
//! ([`xdsfed_core::name::canonical_key`]), so that two spellings of one xdstp
//! URN (context parameters in another order, other percent-encoding) are one
//! resource.
//!
//! Every change bumps the revision of its type and of the store and wakes the
//! streams through a `watch` channel: a stream re-evaluates only the types
//! whose revision moved. Setting identical bytes again changes nothing and
//! wakes nobody.
//!
//! Tables are persistent maps, so a stream's snapshot costs nothing to take
//! and a write next to it copies only the path to the changed entry. Each
//! type also keeps a change log (revision → key), so a stream that has seen
//! revision `R` can ask which keys changed after `R` ([`Store::changes`])
//! and look at those alone instead of the whole table.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use envoy_types::pb::google::protobuf::Any;
use tokio::sync::watch;
use xdsfed_core::name::{NameError, canonical_key};

use crate::version;

/// One resource as the server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResource {
    /// The name it was set with (sent on the wire unless a subscription spelled it otherwise).
    pub name: String,
    /// The canonical key of `name`.
    pub key: String,
    /// The resource, type URL and bytes.
    pub resource: Any,
    /// The content-hash version: hex SHA-256 of `resource.value`.
    pub version: String,
}

/// Why a resource cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The name is not a valid resource name.
    #[error("resource name {name:?} is invalid: {source}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        source: Box<NameError>,
    },
    /// The resource's `Any` has no type URL.
    #[error("resource {name:?} has an empty type URL")]
    MissingTypeUrl {
        /// The resource's name.
        name: String,
    },
    /// An xdstp name whose type segment differs from the `Any`'s type.
    #[error("resource {name:?} names type {in_name:?} but its Any holds {type_url:?}")]
    TypeMismatch {
        /// The resource's name.
        name: String,
        /// The type named in the URN.
        in_name: String,
        /// The `Any`'s type URL.
        type_url: String,
    },
}

/// The resources of one type by canonical key: a persistent map, so a
/// snapshot is O(1) and shares its structure with the store's own copy.
pub type TypeTable = imbl::OrdMap<String, Arc<StoredResource>>;

/// How many log entries of deleted keys a type keeps beyond one per stored
/// resource before the oldest are dropped. Streams that fall behind the
/// dropped part diff the whole table instead.
const LOG_SLACK: usize = 4096;

/// What changed in one type's table after some revision.
#[derive(Debug, Clone)]
pub struct Changes {
    /// The type's revision now.
    pub revision: u64,
    /// The type's resources now.
    pub table: TypeTable,
    /// The canonical keys set or deleted after the asked-for revision, or
    /// `None` when the log no longer reaches back that far (the caller must
    /// then compare the whole table).
    pub keys: Option<BTreeSet<String>>,
}

#[derive(Debug, Default)]
struct TypeEntry {
    /// The store revision of the latest change of this type.
    revision: u64,
    table: TypeTable,
    /// Store revision → the key changed at it; each key appears once, at
    /// its latest change.
    log: BTreeMap<u64, String>,
    /// Key → its entry in `log`.
    logged_at: HashMap<String, u64>,
    /// Changes at or before this revision may be missing from `log`.
    log_floor: u64,
}

impl TypeEntry {
    /// Records that `key` changed at store revision `revision`.
    fn changed(&mut self, key: String, revision: u64) {
        self.revision = revision;
        if let Some(previous) = self.logged_at.insert(key.clone(), revision) {
            self.log.remove(&previous);
        }
        self.log.insert(revision, key);
        // Live keys bound the log; only deleted keys could grow it further.
        while self.log.len() > self.table.len() + LOG_SLACK {
            let Some((oldest, key)) = self.log.pop_first() else {
                break;
            };
            self.logged_at.remove(&key);
            self.log_floor = oldest;
        }
    }

    /// The keys changed after `since`, if the log still covers that.
    fn since(&self, since: u64) -> Option<BTreeSet<String>> {
        if since < self.log_floor {
            return None;
        }
        Some(
            self.log
                .range(since.saturating_add(1)..)
                .map(|(_, key)| key.clone())
                .collect(),
        )
    }
}

#[derive(Debug, Default)]
struct Inner {
    types: HashMap<String, TypeEntry>,
    revision: u64,
}

/// The resources of one server, by type URL and canonical key.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

impl Default for Store {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated:
        // nothing under it panics short of running out of memory.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates or replaces the resource `name`; its type is `resource.type_url`.
    /// Returns what is now stored, with its version.
    pub fn set(&self, name: &str, resource: Any) -> Result<Arc<StoredResource>, StoreError> {
        let key = checked_key(name)?;
        if resource.type_url.is_empty() {
            return Err(StoreError::MissingTypeUrl { name: name.into() });
        }
        if let Some(in_name) = urn_type(&key)
            && in_name != short_type(&resource.type_url)
        {
            return Err(StoreError::TypeMismatch {
                name: name.into(),
                in_name: in_name.into(),
                type_url: resource.type_url,
            });
        }
        let stored = Arc::new(StoredResource {
            name: name.to_owned(),
            key: key.clone(),
            version: version::of_bytes(&resource.value),
            resource,
        });
        let mut inner = self.lock();
        let revision = inner.revision + 1;
        let entry = inner
            .types
            .entry(stored.resource.type_url.clone())
            .or_default();
        if entry.table.get(&key).is_some_and(|old| **old == *stored) {
            return Ok(stored);
        }
        entry.table.insert(key.clone(), stored.clone());
        entry.changed(key, revision);
        inner.revision = revision;
        drop(inner);
        self.changed.send_replace(revision);
        Ok(stored)
    }

    /// Deletes the resource `name` of `type_url`. Returns whether it existed.
    pub fn delete(&self, type_url: &str, name: &str) -> Result<bool, StoreError> {
        let key = checked_key(name)?;
        let mut inner = self.lock();
        let next = inner.revision + 1;
        let Some(entry) = inner.types.get_mut(type_url) else {
            return Ok(false);
        };
        if entry.table.remove(&key).is_none() {
            return Ok(false);
        }
        entry.changed(key, next);
        inner.revision = next;
        drop(inner);
        self.changed.send_replace(next);
        Ok(true)
    }

    /// Removes every resource.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.revision += 1;
        let revision = inner.revision;
        for entry in inner.types.values_mut() {
            // Everything changed at once: rather than logging every key,
            // send every stream back to a full comparison.
            *entry = TypeEntry {
                revision,
                log_floor: revision,
                ..TypeEntry::default()
            };
        }
        drop(inner);
        self.changed.send_replace(revision);
    }

    /// The resource `name` of `type_url`, if stored.
    pub fn get(&self, type_url: &str, name: &str) -> Option<Arc<StoredResource>> {
        let key = canonical_key(name).ok()?;
        self.lock()
            .types
            .get(type_url)
            .and_then(|entry| entry.table.get(&key).cloned())
    }

    /// The revision of `type_url` and its resources. The revision changes
    /// whenever a resource of that type does.
    pub fn table(&self, type_url: &str) -> (u64, TypeTable) {
        self.lock()
            .types
            .get(type_url)
            .map(|entry| (entry.revision, entry.table.clone()))
            .unwrap_or_default()
    }

    /// The revision and resources of `type_url` and, if the change log
    /// reaches back to `since`, the keys changed after it; taken together
    /// so they agree. Costs O(log n) plus the number of changed keys.
    pub fn changes(&self, type_url: &str, since: u64) -> Changes {
        let inner = self.lock();
        match inner.types.get(type_url) {
            Some(entry) => Changes {
                revision: entry.revision,
                table: entry.table.clone(),
                keys: entry.since(since),
            },
            None => Changes {
                revision: 0,
                table: TypeTable::default(),
                keys: Some(BTreeSet::new()),
            },
        }
    }

    /// The type URLs that have ever held a resource.
    pub fn type_urls(&self) -> Vec<String> {
        let mut types: Vec<String> = self.lock().types.keys().cloned().collect();
        types.sort_unstable();
        types
    }

    /// A receiver that is marked changed after every change of the store.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

fn checked_key(name: &str) -> Result<String, StoreError> {
    canonical_key(name).map_err(|source| StoreError::InvalidName {
        name: name.to_owned(),
        source: Box::new(source),
    })
}

/// `envoy.config.cluster.v3.Cluster` for `type.googleapis.com/envoy.config.cluster.v3.Cluster`.
pub fn short_type(type_url: &str) -> &str {
    type_url.rsplit_once('/').map_or(type_url, |(_, t)| t)
}

/// The type segment of a canonical xdstp key.
fn urn_type(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("xdstp://")?;
    let (_, rest) = rest.split_once('/')?;
    Some(rest.split_once('/').map_or(rest, |(t, _)| t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn any(bytes: &[u8]) -> Any {
        Any {
            type_url: CDS.into(),
            value: bytes.to_vec(),
        }
    }

    #[test]
    fn set_identical_bytes_does_not_bump_revision() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        let (rev, _) = store.table(CDS);
        store.set("c1", any(b"x")).unwrap();
        assert_eq!(store.table(CDS).0, rev);
        store.set("c1", any(b"y")).unwrap();
        assert!(store.table(CDS).0 > rev);
    }

    #[test]
    fn set_rejects_urn_whose_type_differs_from_any() {
        let store = Store::new();
        let err = store
            .set("xdstp://a/envoy.config.listener.v3.Listener/l", any(b"x"))
            .unwrap_err();
        assert!(matches!(err, StoreError::TypeMismatch { .. }), "{err}");
    }

    #[test]
    fn changes_lists_keys_changed_after_a_revision() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        let (seen, _) = store.table(CDS);
        store.set("c2", any(b"y")).unwrap();
        store.set("c1", any(b"z")).unwrap();
        store.delete(CDS, "c2").unwrap();
        let changes = store.changes(CDS, seen);
        assert_eq!(changes.revision, store.table(CDS).0);
        let keys: Vec<String> = changes.keys.unwrap().into_iter().collect();
        assert_eq!(keys, ["c1", "c2"]);
        assert!(
            store
                .changes(CDS, changes.revision)
                .keys
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn changes_sends_streams_behind_a_clear_to_a_full_diff() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        let (seen, _) = store.table(CDS);
        store.clear();
        assert!(store.changes(CDS, seen).keys.is_none());
        let (now, _) = store.table(CDS);
        assert!(store.changes(CDS, now).keys.unwrap().is_empty());
    }

    #[test]
    fn change_log_of_deleted_keys_is_trimmed() {
        let store = Store::new();
        for i in 0..LOG_SLACK + 10 {
            let name = format!("c{i}");
            store.set(&name, any(b"x")).unwrap();
            store.delete(CDS, &name).unwrap();
        }
        assert!(store.changes(CDS, 0).keys.is_none(), "start trimmed");
        let (now, _) = store.table(CDS);
        assert!(store.changes(CDS, now - 1).keys.is_some());
    }

    #[test]
    fn snapshot_is_unaffected_by_later_writes() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        let (_, snapshot) = store.table(CDS);
        store.set("c2", any(b"y")).unwrap();
        assert_eq!(snapshot.len(), 1);
        assert_eq!(store.table(CDS).1.len(), 2);
    }

    #[test]
    fn delete_reports_whether_resource_existed() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        assert!(store.delete(CDS, "c1").unwrap());
        assert!(!store.delete(CDS, "c1").unwrap());
        assert!(store.get(CDS, "c1").is_none());
    }
}
