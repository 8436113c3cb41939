//! Collection sets: many glob collections of one type behind one queue.
//!
//! A [`CollectionWatch`](super::CollectionWatch) per collection costs a
//! queue, a wake-up and a stream of its own; a graph that follows LEDS
//! watches a glob per cluster, a hundred thousand of them, and paid that
//! (some 600 bytes a collection) a hundred thousand times. A
//! [`CollectionSet`] subscribes each glob exactly as
//! [`XdsClient::watch_collection`] does (same checks, same authorities,
//! same fallback) but every collection's changes go to one queue, once
//! each however often they change before they are read: a member's change
//! finds its collection by the glob its name belongs to.
//!
//! Rule: a set reports what a [`CollectionWatch`](super::CollectionWatch)
//! of each of its globs would, under the name the glob was inserted with;
//! a collection removed from the set reports nothing more (test
//! `a_set_reports_members_under_their_collection`).

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use xdsfed_core::hash::HashMap;

use futures::Stream;
use xdsfed_core::name::ResourceName;
use xdsfed_core::protocol::{ResourceKey, TypeUrl, is_glob, with_glob_of};
use xdsfed_core::types::ResourceType;

use super::{CollectionEvent, Guard, Release, Wait, member_event, own_event, poll_dirty};
use crate::cache::{Cache, Provenance, ResourceState, WildcardQueue};
use crate::client::{WatchError, XdsClient};

/// One collection's change, as a [`CollectionSet`] reports it.
#[derive(Debug, Clone)]
pub struct CollectionSetEvent<R> {
    /// The collection, by the name it was inserted under.
    pub collection: Arc<str>,
    /// What happened: a member's change, or the collection's own.
    pub event: CollectionEvent<R>,
    /// The state the event was read from: the member's, or the
    /// collection's own for [`CollectionEvent::Empty`] and its errors.
    pub state: ResourceState,
}

/// Many glob collection watches of type `T`, as one [`Stream`] of
/// [`CollectionSetEvent`]s. See the [module docs](self).
///
/// ```no_run
/// # async fn run(client: xdsfed_client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use xdsfed_client::CollectionEvent;
/// use xdsfed_core::types::LbEndpointType;
///
/// let mut localities = client.collection_set::<LbEndpointType>();
/// for id in ["payments-eu", "payments-us"] {
///     let glob: Arc<str> =
///         format!("xdstp://cloud.example/envoy.config.endpoint.v3.LbEndpoint/{id}/*").into();
///     localities.insert_shared(&glob)?;
/// }
/// while let Some(change) = localities.next().await {
///     if let CollectionEvent::Upsert { name, .. } = change.event {
///         println!("{}: {name} changed", change.collection);
///     }
/// }
/// # Ok(()) }
/// ```
pub struct CollectionSet<T: ResourceType> {
    client: XdsClient,
    cache: Arc<Cache>,
    /// The one queue every collection of the set reports to.
    queue: Arc<WildcardQueue>,
    /// By the glob's canonical name, the very copy the cache keys it by.
    collections: HashMap<Arc<str>, Held>,
    /// `T`'s type URL, the process's shared copy: a member's change is
    /// looked up by a key of it, without the interner's lock each time.
    type_url: Arc<str>,
    /// Releases the subscriptions the set took over from their guards
    /// ([`Held::guard`] `None`).
    owner: Option<Arc<dyn Release>>,
    woken: Option<Wait>,
    _type: PhantomData<fn() -> T>,
}

/// A collection of the set.
struct Held {
    /// The name it was inserted under (the key's own copy when that was
    /// canonical).
    label: Arc<str>,
    /// Its subscription's guard, whose drop (after the queue is detached)
    /// unsubscribes; `None` when the set took the subscription over and
    /// releases it itself, sparing a guard a collection. Its provenance is
    /// the cache entry's, read when asked for, not held a hundred thousand
    /// times.
    guard: Option<Arc<Guard>>,
}

impl<T: ResourceType> std::fmt::Debug for CollectionSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollectionSet")
            .field("type_url", &T::TYPE_URL)
            .field("collections", &self.collections.len())
            .finish()
    }
}

impl<T: ResourceType> CollectionSet<T> {
    pub(crate) fn new(client: XdsClient, cache: Arc<Cache>) -> Self {
        CollectionSet {
            client,
            cache,
            queue: Arc::new(WildcardQueue::default()),
            collections: HashMap::default(),
            type_url: T::TYPE_URL.into_type_url(),
            owner: None,
            woken: None,
            _type: PhantomData,
        }
    }

    /// Adds the glob collection `glob`, subscribed as
    /// [`XdsClient::watch_collection`] subscribes it; fails as that fails.
    /// The name is shared, not copied, when it is canonical. A glob already
    /// in the set stays subscribed as it is (its events now carry this
    /// name).
    pub fn insert_shared(&mut self, glob: &Arc<str>) -> Result<(), WatchError> {
        if let Some(key) = self.canonical(glob)
            && let Some(held) = self.collections.get_mut(&*key)
        {
            held.label = Arc::clone(glob);
            return Ok(());
        }
        let (key, watch) = self
            .client
            .subscribe_glob::<T>(glob, Some(glob), &self.queue)?;
        let guard = match Guard::take_over(watch.into_guard()) {
            Ok(owner) => {
                self.owner.get_or_insert(owner);
                None
            }
            Err(guard) => Some(guard),
        };
        // The watch's receiver is gone with it: the set reads the state
        // through the cache, which needs no channel for it.
        self.cache.shed_channel(&key);
        let label = if *key.name == **glob {
            Arc::clone(&key.name)
        } else {
            Arc::clone(glob)
        };
        let held = Held { label, guard };
        self.collections.insert(key.name, held);
        Ok(())
    }

    /// Removes collection `glob`, which unsubscribes it unless something
    /// else watches it. Returns whether it was in the set. A change already
    /// queued for it is not reported.
    pub fn remove(&mut self, glob: &str) -> bool {
        let Some(key) = self.canonical(glob) else {
            return false;
        };
        let Some((name, held)) = self.collections.remove_entry(&*key) else {
            return false;
        };
        self.release(name, held);
        true
    }

    /// Ends collection `name`'s part in the set. The queue first: no
    /// change of a collection on its way out is queued for the set.
    fn release(&self, name: Arc<str>, held: Held) {
        let key = ResourceKey::new(&self.type_url, name);
        self.cache.remove_collection(&key, &self.queue);
        match (held.guard, &self.owner) {
            (Some(guard), _) => drop(guard),
            (None, Some(owner)) => owner.release(&key),
            (None, None) => {}
        }
    }

    /// Whether collection `glob` is in the set.
    pub fn contains(&self, glob: &str) -> bool {
        self.canonical(glob)
            .is_some_and(|key| self.collections.contains_key(&*key))
    }

    /// Whether `name` is, exactly, the canonical name of a collection of
    /// the set: the name a [`CollectionEvent::Error`] of the collection
    /// itself carries (a member's carries the member's).
    pub fn is_collection(&self, name: &str) -> bool {
        self.collections.contains_key(name)
    }

    /// How many collections the set has.
    pub fn len(&self) -> usize {
        self.collections.len()
    }

    /// Whether the set has no collections.
    pub fn is_empty(&self) -> bool {
        self.collections.is_empty()
    }

    /// Collection `glob`'s authority and the server its subscription is on.
    pub fn provenance(&self, glob: &str) -> Option<Provenance> {
        let key = self.canonical(glob)?;
        let (name, _) = self.collections.get_key_value(&*key)?;
        self.cache
            .provenance(&ResourceKey::new(&self.type_url, Arc::clone(name)))
    }

    /// The next change; `None` never, while the handle lives. The same as
    /// [`StreamExt::next`](futures::StreamExt::next).
    pub async fn next(&mut self) -> Option<CollectionSetEvent<T::Resource>> {
        futures::StreamExt::next(self).await
    }

    /// The canonical form of `glob`, the set's key: `glob` itself, without
    /// a parse, when it is in the set so.
    fn canonical<'a>(&self, glob: &'a str) -> Option<std::borrow::Cow<'a, str>> {
        if self.collections.contains_key(glob) {
            return Some(std::borrow::Cow::Borrowed(glob));
        }
        let parsed = ResourceName::parse_user_supplied(glob).ok()?;
        Some(std::borrow::Cow::Owned(parsed.canonical().into_owned()))
    }

    /// What the dirty key `name` means to the set: a collection's own
    /// change, or a member's under its glob; `None` when nothing is to be
    /// reported (or the collection left the set).
    fn event_for(&self, name: Arc<str>) -> Option<CollectionSetEvent<T::Resource>> {
        // The set holds globs only: a member's name is not looked up among
        // them, a probe that would miss on each endpoint update.
        let own = is_glob(&name)
            .then(|| self.collections.get_key_value(&*name))
            .flatten();
        if let Some((own, held)) = own {
            let state = self
                .cache
                .state(&ResourceKey::new(&self.type_url, Arc::clone(own)))?;
            let event = own_event(name, &state)?;
            return Some(CollectionSetEvent {
                collection: Arc::clone(&held.label),
                event,
                state,
            });
        }
        let held = with_glob_of(&name, |glob| self.collections.get(glob)).flatten()?;
        let key = ResourceKey::new(&self.type_url, Arc::clone(&name));
        let state = self.cache.state(&key)?;
        let event = member_event::<T>(name, &state, &key)?;
        Some(CollectionSetEvent {
            collection: Arc::clone(&held.label),
            event,
            state,
        })
    }
}

impl<T: ResourceType> Drop for CollectionSet<T> {
    fn drop(&mut self) {
        for (name, held) in std::mem::take(&mut self.collections) {
            self.release(name, held);
        }
    }
}

impl<T: ResourceType> Stream for CollectionSet<T> {
    type Item = CollectionSetEvent<T::Resource>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let name = ready!(poll_dirty(&this.queue, &mut this.woken, cx));
            if let Some(event) = this.event_for(name) {
                return Poll::Ready(Some(event));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdsfed_core::bootstrap::Bootstrap;
    use xdsfed_core::types::ClusterType;

    const BOOTSTRAP: &str = r#"{
      "xds_servers": [{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}]}],
      "node": {"id": "test"},
      "authorities": {"a.example": {}}
    }"#;

    /// A collection of the set keeps no channel in the cache: the set reads
    /// its state through the cache, and a channel is some 480 bytes a
    /// collection.
    #[tokio::test]
    async fn a_collection_of_the_set_keeps_no_channel() {
        let bootstrap = Bootstrap::from_json_str(BOOTSTRAP).expect("a valid bootstrap");
        let client = XdsClient::builder(bootstrap).build().expect("a client");
        let mut set = client.collection_set::<ClusterType>();
        let glob: Arc<str> = "xdstp://a.example/envoy.config.cluster.v3.Cluster/svc/*".into();
        set.insert_shared(&glob).expect("subscribed");
        let key = ResourceKey::new(ClusterType::TYPE_URL, Arc::clone(&glob));
        assert!(set.cache.state(&key).is_some(), "the glob is in the cache");
        assert!(!set.cache.has_channel(&key));
    }
}
