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
//!
//! A program that follows many resources of one type (a graph's hundred
//! thousand `ClusterLoadAssignment`s) takes a [`WatchSet`] instead of a
//! `Watch` each: one queue of changed names instead of a channel per
//! resource (see [`set`]).
//!
//! Every handle is a [`futures::Stream`] of its events (and `Unpin`), so the
//! combinators of [`futures::StreamExt`] apply; its inherent `next` is the
//! same as `StreamExt::next`. A handle keeps the wait for its next event
//! across polls, so a `next` cancelled by a `select!` loses nothing.
//!
//! ```no_run
//! # async fn run(client: xdsfed_client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
//! use futures::{StreamExt, future, stream};
//! use xdsfed_client::{ClusterType, WatchEvent};
//!
//! let mut watches = Vec::new();
//! for id in ["payments", "billing"] {
//!     let name = format!("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/{id}");
//!     watches.push(client.watch::<ClusterType>(&name)?);
//! }
//! // One stream of both clusters' new versions, errors left out.
//! let mut clusters = stream::select_all(watches).filter_map(|event| {
//!     future::ready(match event {
//!         WatchEvent::Changed(cluster) => Some(cluster),
//!         _ => None,
//!     })
//! });
//! while let Some(cluster) = clusters.next().await {
//!     println!("{} updated", cluster.name());
//! }
//! # Ok(()) }
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::Stream;
use tokio::sync::watch;

use crate::cache::{Provenance, ResourceState, ResourceStatus, WildcardQueue};

pub mod collection_set;
pub mod set;

pub use collection_set::{CollectionSet, CollectionSetEvent};
pub use set::{SetEvent, WatchSet};
use xdsfed_core::error::{ErrorKind, XdsError};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::ResourceType;

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
    /// `None` once [`Guard::take_over`] handed the subscription on.
    pub(crate) owner: Option<Arc<dyn Release>>,
    pub(crate) key: ResourceKey,
    /// Another subscription this one needs (an `#entry=` watch holds its
    /// list collection), released after this one.
    pub(crate) holds: Option<Arc<Guard>>,
}

impl Guard {
    /// Hands the subscription over to the caller, who releases it through
    /// the owner returned; the guard then goes without releasing it. A
    /// holder of many subscriptions keeps their keys anyway, and spares an
    /// allocation a subscription this way. The guard comes back as it was
    /// while another handle shares it, or when it holds another
    /// subscription.
    pub(crate) fn take_over(guard: Arc<Guard>) -> Result<Arc<dyn Release>, Arc<Guard>> {
        let mut guard = Arc::try_unwrap(guard)?;
        match (guard.holds.is_none(), guard.owner.take()) {
            (true, Some(owner)) => Ok(owner),
            (_, owner) => {
                guard.owner = owner;
                Err(Arc::new(guard))
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(owner) = &self.owner {
            owner.release(&self.key);
        }
        // Only then what this one needed.
        drop(self.holds.take());
    }
}

/// A wait a handle keeps between polls. It owns what it waits on (a clone of
/// the receiver, the queue), so the handle stays readable meanwhile. Its
/// output is whether more can come (false: the channel closed).
type Wait = Pin<Box<dyn Future<Output = bool> + Send + Sync>>;

/// A watch of one resource of type `T`: a [`Stream`] of its
/// [`WatchEvent`]s. See the [module docs](self).
///
/// ```no_run
/// # async fn run(client: xdsfed_client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
/// use xdsfed_client::{ClusterType, WatchEvent};
///
/// let mut watch = client.watch::<ClusterType>("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments")?;
/// while let Some(event) = watch.next().await {
///     match event {
///         WatchEvent::Changed(cluster) => println!("cluster {} updated", cluster.name()),
///         WatchEvent::DoesNotExist => println!("gone"),
///         WatchEvent::Error(e) | WatchEvent::AmbientError(e) => println!("{e}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct Watch<T: ResourceType> {
    rx: watch::Receiver<ResourceState>,
    /// The wait for `rx`'s next change, on a clone of it.
    changed: Option<Wait>,
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
            changed: None,
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

    /// The subscription's guard and the provenance, the channel dropped.
    pub(crate) fn into_parts(self) -> (Arc<Guard>, Provenance) {
        (self._guard, self.provenance)
    }

    /// The resource's authority and the server its subscription is on.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The resource's cache key.
    pub fn key(&self) -> &ResourceKey {
        &self.key
    }

    /// The next event; `None` once the client is gone. The same as
    /// [`StreamExt::next`](futures::StreamExt::next).
    pub async fn next(&mut self) -> Option<WatchEvent<T::Resource>> {
        futures::StreamExt::next(self).await
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

/// Latest-value delivery: an event is the state when the handle is polled,
/// however many states it skipped; a state the cache left unchanged wakes
/// nobody.
impl<T: ResourceType> Stream for Watch<T> {
    type Item = WatchEvent<T::Resource>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let changed = this.changed.get_or_insert_with(|| {
                let mut rx = this.rx.clone();
                Box::pin(async move { rx.changed().await.is_ok() })
            });
            let open = ready!(changed.as_mut().poll(cx));
            this.changed = None;
            if !open {
                return Poll::Ready(None);
            }
            let state = this.rx.borrow_and_update();
            if let Some(event) = event_of::<T>(&state, &this.key) {
                return Poll::Ready(Some(event));
            }
        }
    }
}

/// The next dirty name of `queue`, waiting in `woken` when there is none.
/// A name marked dirty after the queue was found empty is not missed: its
/// `notify_one` wakes the wait, or leaves a permit for the next one.
fn poll_dirty(
    queue: &Arc<WildcardQueue>,
    woken: &mut Option<Wait>,
    cx: &mut Context<'_>,
) -> Poll<Arc<str>> {
    loop {
        let popped = queue.dirty.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(name) = popped {
            return Poll::Ready(name);
        }
        let wait = woken.get_or_insert_with(|| {
            let queue = Arc::clone(queue);
            Box::pin(async move {
                queue.notify.notified().await;
                true
            })
        });
        ready!(wait.as_mut().poll(cx));
        *woken = None;
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
            None => WatchEvent::Error(
                XdsError::new(
                    ErrorKind::Watch,
                    format!("{key}: cached resource is not a {}", T::TYPE_URL),
                )
                .with_resource(key.clone()),
            ),
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
/// style). A [`Stream`] of `(name, event)` pairs, latest value per name; it
/// does not end while the handle lives.
pub struct WildcardWatch<T: ResourceType> {
    guard: WildcardGuard,
    cache: Arc<crate::cache::Cache>,
    woken: Option<Wait>,
    _type: PhantomData<fn() -> T>,
}

impl<T: ResourceType> std::fmt::Debug for WildcardWatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WildcardWatch")
            .field("type_url", &T::TYPE_URL)
            .finish()
    }
}

impl<T: ResourceType> WildcardWatch<T> {
    pub(crate) fn new(guard: WildcardGuard, cache: Arc<crate::cache::Cache>) -> Self {
        WildcardWatch {
            guard,
            cache,
            woken: None,
            _type: PhantomData,
        }
    }

    /// The next changed resource and what happened to it. The same as
    /// [`StreamExt::next`](futures::StreamExt::next).
    pub async fn next(&mut self) -> Option<(Arc<str>, WatchEvent<T::Resource>)> {
        futures::StreamExt::next(self).await
    }
}

impl<T: ResourceType> Stream for WildcardWatch<T> {
    type Item = (Arc<str>, WatchEvent<T::Resource>);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let name = ready!(poll_dirty(&this.guard.queue, &mut this.woken, cx));
            let key = ResourceKey::new(T::TYPE_URL, Arc::clone(&name));
            let Some(state) = this.cache.state(&key) else {
                continue;
            };
            if let Some(event) = event_of::<T>(&state, &key) {
                return Poll::Ready(Some((name, event)));
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
/// list collection (its locator and inline entries). A [`Stream`] of member
/// changes, latest value per member; it does not end while the handle
/// lives. Dropping it unsubscribes the collection.
pub struct CollectionWatch<T: ResourceType> {
    // Dropped first: the queue goes before the subscription.
    collection: CollectionGuard,
    /// The collection's own subscription. Its state is read through the
    /// cache, and its changes come through the queue like the members':
    /// a channel of its own (some 500 bytes) per collection is not kept.
    glob: Arc<Guard>,
    provenance: Provenance,
    _type: PhantomData<fn() -> T>,
    /// The member list last reported (list collections).
    listed: Option<Arc<[Arc<str>]>>,
    woken: Option<Wait>,
}

impl<T: ResourceType> std::fmt::Debug for CollectionWatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionWatch")
            .field("glob", &self.collection.glob)
            .finish()
    }
}

impl<T: ResourceType> CollectionWatch<T> {
    pub(crate) fn new(collection: CollectionGuard, glob: Watch<T>) -> Self {
        let provenance = glob.provenance().clone();
        let glob = glob.into_guard();
        collection.cache.shed_channel(&glob.key);
        CollectionWatch {
            collection,
            glob,
            provenance,
            _type: PhantomData,
            listed: None,
            woken: None,
        }
    }

    /// The collection's cache key (the glob, or the list collection).
    pub fn key(&self) -> &ResourceKey {
        &self.collection.glob
    }

    /// The cached state of member `name`, a key this watch reported: its
    /// value, version, and where it came from
    /// ([`ResourceState::source`]: the server, and whether a fallback
    /// server, an `#alt` or a redirect served it). Given the `Arc<str>`
    /// an event named it with, the lookup allocates nothing.
    pub fn member_state(&self, name: impl Into<Arc<str>>) -> Option<ResourceState> {
        self.collection
            .cache
            .state(&ResourceKey::new(T::TYPE_URL, name))
    }

    /// The server the collection itself is subscribed on, and its
    /// authority.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The collection's own state: `DOES_NOT_EXIST` while the server says the
    /// collection is empty.
    pub fn state(&self) -> ResourceState {
        self.collection
            .cache
            .state(&self.glob.key)
            .unwrap_or_else(ResourceState::requested)
    }

    /// The next change. The same as
    /// [`StreamExt::next`](futures::StreamExt::next).
    pub async fn next(&mut self) -> Option<CollectionEvent<T::Resource>> {
        futures::StreamExt::next(self).await
    }

    /// What the dirty key `name` means to this watch now; `None` when
    /// nothing is to be reported.
    fn event_for(&mut self, name: Arc<str>) -> Option<CollectionEvent<T::Resource>> {
        let glob = &self.collection.glob;
        let list = *glob.type_url != *T::TYPE_URL;
        let key = if name == glob.name {
            glob.clone()
        } else {
            ResourceKey::new(T::TYPE_URL, Arc::clone(&name))
        };
        if list && key != *glob && !self.collection.cache.is_list_member(glob, &key) {
            // Left the list collection.
            return Some(CollectionEvent::Removed { name });
        }
        let state = self.collection.cache.state(&key)?;
        if key == *glob {
            return self.collection_event(name, &state, list);
        }
        member_event::<T>(name, &state, &key)
    }

    /// What a change of the collection's own state means: empty, failed,
    /// or (a list collection) a new member list.
    fn collection_event(
        &mut self,
        name: Arc<str>,
        state: &ResourceState,
        list: bool,
    ) -> Option<CollectionEvent<T::Resource>> {
        if state.status == ResourceStatus::DoesNotExist || state.error.is_some() || !list {
            return own_event(name, state);
        }
        // Not listed yet: the members follow, and with them this key again.
        let members = self.collection.cache.list_members(&self.collection.glob)?;
        let members: Arc<[Arc<str>]> = members.into();
        if self.listed.as_ref() == Some(&members) {
            return None;
        }
        self.listed = Some(Arc::clone(&members));
        Some(CollectionEvent::Listed { members })
    }
}

/// What member `key`'s `state` means to a watcher of its collection;
/// `None` while nothing is known of it.
pub(crate) fn member_event<T: ResourceType>(
    name: Arc<str>,
    state: &ResourceState,
    key: &ResourceKey,
) -> Option<CollectionEvent<T::Resource>> {
    match event_of::<T>(state, key)? {
        WatchEvent::Changed(resource) => Some(CollectionEvent::Upsert { name, resource }),
        WatchEvent::DoesNotExist => Some(CollectionEvent::Removed { name }),
        WatchEvent::Error(error) | WatchEvent::AmbientError(error) => {
            Some(CollectionEvent::Error { name, error })
        }
    }
}

/// What a collection's own `state` (named `name`) means to its watcher:
/// empty, failed, or nothing to report.
pub(crate) fn own_event<R>(name: Arc<str>, state: &ResourceState) -> Option<CollectionEvent<R>> {
    match (&state.status, &state.error) {
        (ResourceStatus::DoesNotExist, _) => Some(CollectionEvent::Empty),
        (_, Some(error)) => Some(CollectionEvent::Error {
            name,
            error: error.clone(),
        }),
        _ => None,
    }
}

impl<T: ResourceType> Stream for CollectionWatch<T> {
    type Item = CollectionEvent<T::Resource>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let name = ready!(poll_dirty(&this.collection.queue, &mut this.woken, cx));
            if let Some(event) = this.event_for(name) {
                return Poll::Ready(Some(event));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Waker;

    use futures::FutureExt;
    use futures::task::{ArcWake, waker};

    use super::*;
    use xdsfed_core::types::ClusterType;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    struct Unwatched;

    impl Release for Unwatched {
        fn release(&self, _: &ResourceKey) {}
        fn release_wildcard(&self, _: &str, _: &Arc<WildcardQueue>) {}
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl ArcWake for Wakes {
        fn wake_by_ref(arc_self: &Arc<Self>) {
            arc_self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting_waker() -> (Arc<Wakes>, Waker) {
        let wakes = Arc::new(Wakes::default());
        (Arc::clone(&wakes), waker(wakes))
    }

    fn state(status: ResourceStatus, error: Option<&str>) -> ResourceState {
        ResourceState {
            resource: None,
            version: None,
            status,
            error: error.map(|m| XdsError::new(ErrorKind::Transient, m)),
            last_updated: None,
            failed_update: None,
            source: None,
        }
    }

    fn watch_of(rx: watch::Receiver<ResourceState>) -> Watch<ClusterType> {
        let key = ResourceKey::new(CDS, "xdstp://a.example/envoy.config.cluster.v3.Cluster/c");
        let guard = Guard {
            owner: Some(Arc::new(Unwatched)),
            key,
            holds: None,
        };
        let provenance = Provenance {
            authority: Some(Arc::from("a.example")),
            server: Arc::from("server"),
        };
        Watch::new(rx, Arc::new(guard), provenance)
    }

    fn assert_unpin_stream<S: Stream + Unpin + Send + Sync>() {}

    /// Counts the releases of its subscriptions.
    #[derive(Default)]
    struct Releases(AtomicUsize);

    impl Release for Releases {
        fn release(&self, _: &ResourceKey) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn release_wildcard(&self, _: &str, _: &Arc<WildcardQueue>) {}
    }

    fn guard_of(owner: &Arc<Releases>, holds: Option<Arc<Guard>>) -> Arc<Guard> {
        Arc::new(Guard {
            owner: Some(Arc::clone(owner) as Arc<dyn Release>),
            key: ResourceKey::new(CDS, "c"),
            holds,
        })
    }

    /// A guard taken over goes without releasing its subscription, which its
    /// new holder releases once; a guard another handle shares, or one that
    /// holds another subscription, comes back as it was and releases as a
    /// guard does.
    #[test]
    fn a_guard_taken_over_leaves_the_release_to_its_taker() {
        let releases = Arc::new(Releases::default());
        let count = || releases.0.load(Ordering::SeqCst);
        let Ok(owner) = Guard::take_over(guard_of(&releases, None)) else {
            panic!("a sole guard is taken over");
        };
        assert_eq!(count(), 0, "the guard went without releasing");
        owner.release(&ResourceKey::new(CDS, "c"));
        assert_eq!(count(), 1);

        let shared = guard_of(&releases, None);
        let other = Arc::clone(&shared);
        let Err(back) = Guard::take_over(shared) else {
            panic!("a shared guard is not taken over");
        };
        drop((back, other));
        assert_eq!(count(), 2, "released as a guard, once");

        let holding = guard_of(&releases, Some(guard_of(&releases, None)));
        let Err(back) = Guard::take_over(holding) else {
            panic!("a guard holding another is not taken over");
        };
        drop(back);
        assert_eq!(count(), 4, "it and what it held");
    }

    /// Every handle is an `Unpin` stream that can move between tasks.
    #[test]
    fn handles_are_unpin_send_and_sync_streams() {
        assert_unpin_stream::<Watch<ClusterType>>();
        assert_unpin_stream::<WildcardWatch<ClusterType>>();
        assert_unpin_stream::<CollectionWatch<ClusterType>>();
    }

    /// Latest-value delivery: states the handle was not polled for are
    /// skipped, and a state already delivered is not delivered again.
    #[test]
    fn watch_stream_delivers_only_the_latest_state() {
        let (tx, rx) = watch::channel(state(ResourceStatus::Requested, None));
        let mut watch = watch_of(rx);
        tx.send_replace(state(ResourceStatus::ReceivedError, Some("first")));
        tx.send_replace(state(ResourceStatus::DoesNotExist, None));

        let event = watch.next().now_or_never();
        assert_eq!(event, Some(Some(WatchEvent::DoesNotExist)));
        assert_eq!(watch.next().now_or_never(), None);
    }

    /// A state that means nothing to a watcher yet (requested, no answer)
    /// is not an event: the stream waits for the next one.
    #[test]
    fn watch_stream_skips_a_state_with_nothing_to_report() {
        let (tx, rx) = watch::channel(state(ResourceStatus::Requested, None));
        let mut watch = watch_of(rx);
        tx.send_replace(state(ResourceStatus::Requested, None));
        assert_eq!(watch.next().now_or_never(), None);

        tx.send_replace(state(ResourceStatus::ReceivedError, Some("down")));
        let Some(Some(WatchEvent::Error(error))) = watch.next().now_or_never() else {
            panic!("expected the error");
        };
        assert_eq!(error.to_string(), "down");
    }

    /// A poll that found nothing leaves its wait registered: the next state
    /// wakes the task that polled, even when the `next` it polled through
    /// was dropped (cancelled by a `select!`, say).
    #[test]
    fn watch_stream_wakes_its_poller_after_a_cancelled_next() {
        let (tx, rx) = watch::channel(state(ResourceStatus::Requested, None));
        let mut watch = watch_of(rx);
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        {
            let next = std::pin::pin!(watch.next());
            assert!(next.poll(&mut cx).is_pending());
        }

        tx.send_replace(state(ResourceStatus::DoesNotExist, None));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        let polled = Pin::new(&mut watch).poll_next(&mut cx);
        assert_eq!(polled, Poll::Ready(Some(WatchEvent::DoesNotExist)));
    }

    /// The stream ends when nothing can update it any more, after the last
    /// state it had not seen.
    #[test]
    fn watch_stream_ends_after_the_last_state_when_the_sender_goes() {
        let (tx, rx) = watch::channel(state(ResourceStatus::Requested, None));
        let mut watch = watch_of(rx);
        tx.send_replace(state(ResourceStatus::DoesNotExist, None));
        drop(tx);

        let event = watch.next().now_or_never();
        assert_eq!(event, Some(Some(WatchEvent::DoesNotExist)));
        assert_eq!(watch.next().now_or_never(), Some(None));
    }

    /// A wildcard or collection handle that found its queue empty wakes
    /// when a name is marked dirty, and hands out each name once.
    #[test]
    fn queue_wait_wakes_for_a_name_marked_after_it_found_none() {
        let queue = Arc::new(WildcardQueue::default());
        let mut woken = None;
        let (wakes, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(poll_dirty(&queue, &mut woken, &mut cx).is_pending());

        let name: Arc<str> = Arc::from("xdstp://a.example/envoy.config.cluster.v3.Cluster/c");
        queue.dirty.lock().unwrap().insert(Arc::clone(&name));
        queue.dirty.lock().unwrap().insert(Arc::clone(&name));
        queue.notify.notify_one();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_dirty(&queue, &mut woken, &mut cx), Poll::Ready(name));
        assert!(poll_dirty(&queue, &mut woken, &mut cx).is_pending());
    }
}
