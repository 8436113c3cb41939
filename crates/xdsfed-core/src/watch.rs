//! Watch handles: how users receive resources.
//!
//! A [`Watch<T>`] observes one resource's latest state. Events follow gRFC
//! A88: [`WatchEvent::Changed`] with a new resource, [`WatchEvent::DoesNotExist`],
//! [`WatchEvent::Error`] when there is no cached copy to keep serving, and
//! [`WatchEvent::AmbientError`] when the cached copy keeps serving despite an
//! error. Delivery is latest-value: a watcher that falls behind sees the
//! newest state, never a backlog, and never slows a stream down.
//!
//! Dropping the last handle of a resource unsubscribes it.

use std::marker::PhantomData;
use std::sync::Arc;

use tokio::sync::watch;

use crate::cache::{Provenance, ResourceState, ResourceStatus, WildcardQueue};
use crate::error::{ErrorKind, XdsError};
use crate::protocol::ResourceKey;
use crate::types::ResourceType;

/// What a watcher learns about its resource.
#[derive(Debug, Clone)]
pub enum WatchEvent<T> {
    /// A new version of the resource.
    Changed(Arc<T>),
    /// The resource does not exist (deleted, or never sent in time).
    DoesNotExist,
    /// An error, and no cached copy to fall back on.
    Error(XdsError),
    /// An error; the cached copy (see [`Watch::current`]) keeps serving.
    AmbientError(XdsError),
}

impl<T> PartialEq for WatchEvent<T>
where
    T: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (WatchEvent::Changed(a), WatchEvent::Changed(b)) => a == b,
            (WatchEvent::DoesNotExist, WatchEvent::DoesNotExist) => true,
            (WatchEvent::Error(a), WatchEvent::Error(b)) => a == b,
            (WatchEvent::AmbientError(a), WatchEvent::AmbientError(b)) => a == b,
            _ => false,
        }
    }
}

/// Gives a subscription back when its last handle goes.
pub(crate) trait Release: Send + Sync + 'static {
    fn release(&self, key: &ResourceKey);
    fn release_wildcard(&self, type_url: &str, queue: &Arc<WildcardQueue>);
}

pub(crate) struct Guard {
    pub(crate) owner: Arc<dyn Release>,
    pub(crate) key: ResourceKey,
    /// Another subscription this one needs (an `#entry=` watch holds its
    /// list collection), released after this one.
    pub(crate) holds: Option<Arc<Guard>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.owner.release(&self.key);
        // Only then what this one needed.
        drop(self.holds.take());
    }
}

/// A watch of one resource of type `T`. See the [module docs](self).
///
/// ```no_run
/// # async fn run(client: xdsfed_core::client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
/// use xdsfed_core::types::ClusterType;
/// use xdsfed_core::watch::WatchEvent;
///
/// let mut watch = client.watch::<ClusterType>("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments")?;
/// while let Some(event) = watch.next().await {
///     match event {
///         WatchEvent::Changed(cluster) => println!("cluster {} updated", cluster.name),
///         WatchEvent::DoesNotExist => println!("gone"),
///         WatchEvent::Error(e) | WatchEvent::AmbientError(e) => println!("{e}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct Watch<T: ResourceType> {
    rx: watch::Receiver<ResourceState>,
    _guard: Arc<Guard>,
    key: ResourceKey,
    provenance: Provenance,
    _type: PhantomData<fn() -> T>,
}

impl<T: ResourceType> std::fmt::Debug for Watch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("key", &self.key).finish()
    }
}

impl<T: ResourceType> Watch<T> {
    pub(crate) fn new(
        rx: watch::Receiver<ResourceState>,
        guard: Arc<Guard>,
        provenance: Provenance,
    ) -> Self {
        let key = guard.key.clone();
        Watch {
            rx,
            _guard: guard,
            key,
            provenance,
            _type: PhantomData,
        }
    }

    /// The handle that keeps the subscription, without the receiver.
    pub(crate) fn into_guard(self) -> Arc<Guard> {
        self._guard
    }

    /// The resource's authority and the server its subscription is on.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The resource's cache key.
    pub fn key(&self) -> &ResourceKey {
        &self.key
    }

    /// The next event; `None` once the client is gone.
    pub async fn next(&mut self) -> Option<WatchEvent<T::Resource>> {
        loop {
            self.rx.changed().await.ok()?;
            let state = self.rx.borrow_and_update();
            if let Some(event) = event_of::<T>(&state, &self.key) {
                return Some(event);
            }
        }
    }

    /// The cached copy, if any, without waiting.
    pub fn current(&self) -> Option<Arc<T::Resource>> {
        self.rx
            .borrow()
            .resource
            .as_ref()
            .and_then(|r| r.downcast::<T::Resource>())
    }

    /// The full latest state (status, version, error), without waiting.
    pub fn state(&self) -> ResourceState {
        self.rx.borrow().clone()
    }
}

/// The event a state means to a watcher; `None` while nothing is known.
pub(crate) fn event_of<T: ResourceType>(
    state: &ResourceState,
    key: &ResourceKey,
) -> Option<WatchEvent<T::Resource>> {
    match (&state.resource, &state.error) {
        (Some(resource), None) => Some(match resource.downcast::<T::Resource>() {
            Some(value) => WatchEvent::Changed(value),
            None => WatchEvent::Error(XdsError::new(
                ErrorKind::Watch,
                format!("{key}: cached resource is not a {}", T::TYPE_URL),
            )),
        }),
        (Some(_), Some(error)) => Some(WatchEvent::AmbientError(error.clone())),
        (None, _) if state.status == ResourceStatus::DoesNotExist => Some(WatchEvent::DoesNotExist),
        (None, Some(error)) => Some(WatchEvent::Error(error.clone())),
        (None, None) => None,
    }
}

pub(crate) struct WildcardGuard {
    pub(crate) owner: Arc<dyn Release>,
    pub(crate) type_url: &'static str,
    pub(crate) queue: Arc<WildcardQueue>,
}

impl Drop for WildcardGuard {
    fn drop(&mut self) {
        self.owner.release_wildcard(self.type_url, &self.queue);
    }
}

/// A wildcard watch: every resource of type `T` the server has (LDS/CDS
/// style). Yields `(name, event)` pairs, latest value per name.
pub struct WildcardWatch<T: ResourceType> {
    pub(crate) guard: WildcardGuard,
    pub(crate) cache: Arc<crate::cache::Cache>,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T: ResourceType> std::fmt::Debug for WildcardWatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WildcardWatch")
            .field("type_url", &T::TYPE_URL)
            .finish()
    }
}

impl<T: ResourceType> WildcardWatch<T> {
    /// The next changed resource and what happened to it.
    pub async fn next(&mut self) -> Option<(Arc<str>, WatchEvent<T::Resource>)> {
        loop {
            let notified = self.guard.queue.notify.notified();
            let popped = self
                .guard
                .queue
                .dirty
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop();
            match popped {
                Some(name) => {
                    let key = ResourceKey::new(T::TYPE_URL, Arc::clone(&name));
                    let Some(state) = self.cache.state(&key) else {
                        continue;
                    };
                    if let Some(event) = event_of::<T>(&state, &key) {
                        return Some((name, event));
                    }
                }
                None => notified.await,
            }
        }
    }
}

/// A change to a glob or list collection (xDS TP1), as a
/// [`CollectionWatch`] reports it.
#[derive(Debug, Clone)]
pub enum CollectionEvent<T> {
    /// A member was added or changed.
    Upsert {
        /// The member's cache key.
        name: Arc<str>,
        /// Its new value.
        resource: Arc<T>,
    },
    /// A member left the collection (deleted by the server, or no longer
    /// listed).
    Removed {
        /// The member's cache key.
        name: Arc<str>,
    },
    /// The server says the collection is empty (it named the glob in
    /// `removed_resources`), or the list collection does not exist.
    Empty,
    /// A list collection arrived, or its entries changed: these are its
    /// members now, by key, sorted. Members without an answer yet follow as
    /// `Upsert` or `Error` once they have one; members that left are also
    /// reported `Removed`. Glob collections have no member list and never
    /// report this.
    Listed {
        /// Every member's key: locator targets, `…#entry=<name>` and
        /// `…#anonymous=<index>`.
        members: Arc<[Arc<str>]>,
    },
    /// A member or the collection could not be served; `name` is the
    /// member's key, or the glob's.
    Error {
        /// Which member (or the glob).
        name: Arc<str>,
        /// What went wrong.
        error: XdsError,
    },
}

pub(crate) struct CollectionGuard {
    pub(crate) cache: Arc<crate::cache::Cache>,
    pub(crate) glob: ResourceKey,
    pub(crate) queue: Arc<WildcardQueue>,
}

impl Drop for CollectionGuard {
    fn drop(&mut self) {
        self.cache.remove_collection(&self.glob, &self.queue);
    }
}

/// A watch of a glob collection (every resource of type `T` directly under
/// the glob's path with its context parameters, delta xDS only) or of a
/// list collection (its locator and inline entries). Yields member
/// changes, latest value per member. Dropping it unsubscribes the
/// collection.
pub struct CollectionWatch<T: ResourceType> {
    // Dropped first: the queue goes before the subscription.
    pub(crate) collection: CollectionGuard,
    pub(crate) glob: Watch<T>,
    /// The member list last reported (list collections).
    pub(crate) listed: Option<Arc<[Arc<str>]>>,
}

impl<T: ResourceType> std::fmt::Debug for CollectionWatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionWatch")
            .field("glob", &self.collection.glob)
            .finish()
    }
}

impl<T: ResourceType> CollectionWatch<T> {
    /// The collection's cache key (the glob, or the list collection).
    pub fn key(&self) -> &ResourceKey {
        &self.collection.glob
    }

    /// The cached state of member `name`, a key this watch reported: its
    /// value, version, and where it came from
    /// ([`ResourceState::source`]: the server, and whether a fallback
    /// server, an `#alt` or a redirect served it).
    pub fn member_state(&self, name: &str) -> Option<ResourceState> {
        self.collection
            .cache
            .state(&ResourceKey::new(T::TYPE_URL, name))
    }

    /// The server the collection itself is subscribed on, and its
    /// authority.
    pub fn provenance(&self) -> &Provenance {
        self.glob.provenance()
    }

    /// The collection's own state: `DOES_NOT_EXIST` while the server says the
    /// collection is empty.
    pub fn state(&self) -> ResourceState {
        self.glob.state()
    }

    /// The next change; `None` once the client is gone.
    pub async fn next(&mut self) -> Option<CollectionEvent<T::Resource>> {
        let queue = Arc::clone(&self.collection.queue);
        loop {
            let notified = queue.notify.notified();
            let popped = queue.dirty.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some(name) = popped else {
                notified.await;
                continue;
            };
            let key = ResourceKey::new(T::TYPE_URL, Arc::clone(&name));
            let list = self.collection.glob.type_url != key.type_url;
            let key = if name == self.collection.glob.name {
                self.collection.glob.clone()
            } else {
                key
            };
            if list
                && key != self.collection.glob
                && !self
                    .collection
                    .cache
                    .is_list_member(&self.collection.glob, &key)
            {
                // Left the list collection.
                return Some(CollectionEvent::Removed { name });
            }
            let Some(state) = self.collection.cache.state(&key) else {
                continue;
            };
            if key == self.collection.glob {
                match (&state.status, &state.error) {
                    (ResourceStatus::DoesNotExist, _) => return Some(CollectionEvent::Empty),
                    (_, Some(error)) => {
                        return Some(CollectionEvent::Error {
                            name,
                            error: error.clone(),
                        });
                    }
                    _ if list => {
                        // Not listed yet: the members follow, and with them
                        // this key again.
                        let Some(members) = self.collection.cache.list_members(&key) else {
                            continue;
                        };
                        let members: Arc<[Arc<str>]> = members.into();
                        if self.listed.as_ref() == Some(&members) {
                            continue;
                        }
                        self.listed = Some(Arc::clone(&members));
                        return Some(CollectionEvent::Listed { members });
                    }
                    _ => continue,
                }
            }
            match event_of::<T>(&state, &key) {
                Some(WatchEvent::Changed(resource)) => {
                    return Some(CollectionEvent::Upsert { name, resource });
                }
                Some(WatchEvent::DoesNotExist) => return Some(CollectionEvent::Removed { name }),
                Some(WatchEvent::Error(error) | WatchEvent::AmbientError(error)) => {
                    return Some(CollectionEvent::Error { name, error });
                }
                None => {}
            }
        }
    }
}
