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

use std::{
    collections::{BTreeMap, HashMap},
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

/// The resources of one type, shared copy-on-write with the streams that read them.
pub type TypeTable = Arc<BTreeMap<String, Arc<StoredResource>>>;

#[derive(Debug, Default)]
struct Inner {
    types: HashMap<String, (u64, TypeTable)>,
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
        // every mutation is a single insert or remove.
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
        inner.revision += 1;
        let revision = inner.revision;
        let (type_revision, table) = inner
            .types
            .entry(stored.resource.type_url.clone())
            .or_default();
        if table.get(&key).is_some_and(|old| **old == *stored) {
            inner.revision -= 1;
            return Ok(stored);
        }
        *type_revision = revision;
        Arc::make_mut(table).insert(key, stored.clone());
        drop(inner);
        self.changed.send_replace(revision);
        Ok(stored)
    }

    /// Deletes the resource `name` of `type_url`. Returns whether it existed.
    pub fn delete(&self, type_url: &str, name: &str) -> Result<bool, StoreError> {
        let key = checked_key(name)?;
        let mut inner = self.lock();
        let next = inner.revision + 1;
        let Some((type_revision, table)) = inner.types.get_mut(type_url) else {
            return Ok(false);
        };
        if !table.contains_key(&key) {
            return Ok(false);
        }
        Arc::make_mut(table).remove(&key);
        *type_revision = next;
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
        for (type_revision, table) in inner.types.values_mut() {
            *type_revision = revision;
            *table = TypeTable::default();
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
            .and_then(|(_, table)| table.get(&key).cloned())
    }

    /// The revision of `type_url` and its resources. The revision changes
    /// whenever a resource of that type does.
    pub fn table(&self, type_url: &str) -> (u64, TypeTable) {
        self.lock().types.get(type_url).cloned().unwrap_or_default()
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
    fn delete_reports_whether_resource_existed() {
        let store = Store::new();
        store.set("c1", any(b"x")).unwrap();
        assert!(store.delete(CDS, "c1").unwrap());
        assert!(!store.delete(CDS, "c1").unwrap());
        assert!(store.get(CDS, "c1").is_none());
    }
}
