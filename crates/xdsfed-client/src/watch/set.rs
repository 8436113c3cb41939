//! Watch sets: many resources of one type behind one queue.
//!
//! A [`Watch`](super::Watch) per resource costs a channel receiver, a pending wait and a
//! wake-up per change; a program following a hundred thousand
//! `ClusterLoadAssignment`s pays that a hundred thousand times, and its
//! executor polls a stream per resource. A [`WatchSet`] subscribes each
//! resource exactly as [`XdsClient::watch`] does (same names, same
//! authorities, same fallback) but the cache queues the names of the
//! members that changed, once each however often they change before they
//! are read, and wakes one task: a change costs a queue push, and reading
//! it costs a lookup.
//!
//! Delivery is latest-value, as for a [`Watch`](super::Watch): a member's event is its
//! state when the set reads it.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use xdsfed_core::hash::HashMap;

use futures::Stream;

use super::{Guard, Wait, WatchEvent, event_of, poll_dirty};
use crate::cache::{Cache, Provenance, ResourceState, WildcardQueue};
use crate::client::{WatchError, XdsClient};
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::types::ResourceType;

/// One member's change, as a [`WatchSet`] reports it.
#[derive(Debug, Clone)]
pub struct SetEvent<R> {
    /// The member, by the name it was inserted under.
    pub name: Arc<str>,
    /// What happened to it.
    pub event: WatchEvent<R>,
    /// The state the event was read from: version, status, and where the
    /// copy came from.
    pub state: ResourceState,
}

/// Many watches of resources of type `T`, as one [`Stream`] of
/// [`SetEvent`]s. See the [module docs](self).
///
/// ```no_run
/// # async fn run(client: xdsfed_client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
/// use xdsfed_core::types::EndpointType;
/// use xdsfed_client::WatchEvent;
///
/// let mut endpoints = client.watch_set::<EndpointType>();
/// for id in ["payments", "billing"] {
///     endpoints.insert(&format!(
///         "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}"
///     ))?;
/// }
/// while let Some(change) = endpoints.next().await {
///     if let WatchEvent::Changed(assignment) = change.event {
///         println!("{}: {} localities", change.name, assignment.localities().len());
///     }
/// }
/// # Ok(()) }
/// ```
pub struct WatchSet<T: ResourceType> {
    client: XdsClient,
    cache: Arc<Cache>,
    queue: Arc<WildcardQueue>,
    members: HashMap<Arc<str>, Member>,
    woken: Option<Wait>,
    _type: PhantomData<fn() -> T>,
}

/// A member's subscription, and where it is subscribed.
struct Member {
    /// Dropping it (after leaving the set) unsubscribes.
    guard: Arc<Guard>,
    provenance: Provenance,
}

impl<T: ResourceType> std::fmt::Debug for WatchSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSet")
            .field("type_url", &T::TYPE_URL)
            .field("members", &self.members.len())
            .finish()
    }
}

impl<T: ResourceType> WatchSet<T> {
    pub(crate) fn new(client: XdsClient, cache: Arc<Cache>) -> Self {
        WatchSet {
            client,
            cache,
            queue: Arc::new(WildcardQueue::default()),
            members: HashMap::default(),
            woken: None,
            _type: PhantomData,
        }
    }

    /// Adds `name`, subscribed as [`XdsClient::watch`] subscribes it; fails
    /// as `watch` fails. A member of the same name is replaced: the new
    /// subscription is taken before the old one is released, so a resource
    /// subscribed both times stays subscribed throughout.
    pub fn insert(&mut self, name: &str) -> Result<(), WatchError> {
        let (guard, provenance) = self.client.member_given::<T>(name, None)?;
        self.join(name, guard, provenance);
        Ok(())
    }

    /// [`insert`](Self::insert), or [`insert_on_server`](Self::insert_on_server)
    /// with a `server`, of a name the caller holds shared: when it is
    /// canonical, the client keys the resource by this very copy, so a
    /// caller that keeps the name too (a graph of a hundred thousand
    /// clusters does) holds it once.
    pub fn insert_shared(
        &mut self,
        name: &Arc<str>,
        server: Option<&ServerConfig>,
    ) -> Result<(), WatchError> {
        let (guard, provenance) = match server {
            Some(server) => self
                .client
                .member_on_server_given::<T>(name, server, Some(name))?,
            None => self.client.member_given::<T>(name, Some(name))?,
        };
        self.join(name, guard, provenance);
        Ok(())
    }

    /// Adds `name`, subscribed on `server` as
    /// [`XdsClient::watch_on_server`] subscribes it. A member of the same
    /// name is replaced, as by [`insert`](Self::insert).
    pub fn insert_on_server(
        &mut self,
        name: &str,
        server: &ServerConfig,
    ) -> Result<(), WatchError> {
        let (guard, provenance) = self
            .client
            .member_on_server_given::<T>(name, server, None)?;
        self.join(name, guard, provenance);
        Ok(())
    }

    /// Removes `name`, which unsubscribes it unless something else watches
    /// it. Returns whether it was a member. A change already queued for it
    /// is not reported.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(member) = self.members.remove(name) else {
            return false;
        };
        self.cache.leave_set(&member.guard.key, &self.queue, name);
        true
    }

    /// Whether `name` is a member.
    pub fn contains(&self, name: &str) -> bool {
        self.members.contains_key(name)
    }

    /// How many members the set has.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Member `name`'s authority and the server its subscription is on.
    pub fn provenance(&self, name: &str) -> Option<&Provenance> {
        self.members.get(name).map(|m| &m.provenance)
    }

    /// The next member's change; `None` never, while the handle lives. The
    /// same as [`StreamExt::next`](futures::StreamExt::next).
    pub async fn next(&mut self) -> Option<SetEvent<T::Resource>> {
        futures::StreamExt::next(self).await
    }

    /// Keeps `watch`'s subscription as member `name`; the cache queues the
    /// member's changes from now on, and its state now if it has one. A
    /// member it replaces is released last.
    fn join(&mut self, name: &str, guard: Arc<Guard>, provenance: Provenance) {
        // A name given in its canonical form is the cache's key: share it
        // rather than hold a second copy per member.
        let name = if *guard.key.name == *name {
            Arc::clone(&guard.key.name)
        } else {
            Arc::from(name)
        };
        let replaced = self.members.remove(&name);
        if let Some(old) = &replaced {
            self.cache.leave_set(&old.guard.key, &self.queue, &name);
        }
        self.cache.join_set(&guard.key, &self.queue, &name);
        self.members.insert(name, Member { guard, provenance });
        drop(replaced);
    }
}

impl<T: ResourceType> Drop for WatchSet<T> {
    fn drop(&mut self) {
        for (name, member) in self.members.drain() {
            self.cache.leave_set(&member.guard.key, &self.queue, &name);
        }
    }
}

impl<T: ResourceType> Stream for WatchSet<T> {
    type Item = SetEvent<T::Resource>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let name = ready!(poll_dirty(&this.queue, &mut this.woken, cx));
            // Removed since it was queued.
            let Some(member) = this.members.get(&name) else {
                continue;
            };
            let key = &member.guard.key;
            let Some(state) = this.cache.state(key) else {
                continue;
            };
            if let Some(event) = event_of::<T>(&state, key) {
                return Poll::Ready(Some(SetEvent { name, event, state }));
            }
        }
    }
}
