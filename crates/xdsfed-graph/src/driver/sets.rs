//! The graph's single-resource watches, one [`WatchSet`] per kind, and its
//! LEDS glob collections, one [`CollectionSet`].
//!
//! A graph of a hundred thousand clusters watches a hundred thousand
//! `ClusterLoadAssignment`s, and with LEDS as many glob collections. A set
//! per kind keeps that to five queues the driver polls, instead of a
//! stream (and a wake-up) per resource: a change costs the same however
//! many resources are watched, and nothing is polled that did not change.

use std::sync::Arc;
use std::task::{Context, Poll};
use xdsfed_core::hash::HashMap;
use xdsfed_core::version::Version;

use futures::{Stream, StreamExt};
use xdsfed_client::cache::ResourceStatus;
use xdsfed_client::watch::{CollectionSet, CollectionSetEvent, SetEvent, WatchSet};
use xdsfed_client::{CollectionEvent, WatchError, WatchEvent, XdsClient};
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::error::XdsError;
use xdsfed_core::types::{
    ClusterType, EndpointType, LbEndpointType, ListenerType, RouteConfigurationType,
};

use super::inputs::{CollectionFollowed, Followed, Input, update_of, update_of_collection};
use crate::resource::{Provenance, ResourceKind};

/// A watch set of one kind, and what its stream last said of each member.
struct Followers<T: Followed> {
    set: WatchSet<T>,
    /// The ambient error last reported per member. While a server is down,
    /// every reconnection attempt reports the same failure, and each would
    /// otherwise cost a snapshot that differs in nothing.
    last_ambient: HashMap<Arc<str>, XdsError>,
}

impl<T: Followed> Followers<T> {
    fn new(client: &XdsClient) -> Self {
        Followers {
            set: client.watch_set::<T>(),
            last_ambient: HashMap::default(),
        }
    }

    /// Watches `name`, which the engine holds too: the client keys it by
    /// the engine's copy.
    fn watch(&mut self, name: &Arc<str>, server: Option<&ServerConfig>) -> Result<(), WatchError> {
        self.set.insert_shared(name, server)
    }

    fn unwatch(&mut self, name: &str) {
        self.set.remove(name);
        self.last_ambient.remove(name);
    }

    /// The next member change worth an input.
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Input> {
        first_input(self, cx, |f| &mut f.set, Self::input_of)
    }

    /// The engine's form of a member's change; `None` for an ambient error
    /// that repeats the last one.
    fn input_of(&mut self, change: SetEvent<T::Resource>) -> Option<Input> {
        let SetEvent { name, event, state } = change;
        let event = match (event, &state.resource) {
            // A copy from the client's state directory arrives with its
            // ambient error ("not confirmed yet"); the copy is what the
            // graph needs to warm.
            (WatchEvent::AmbientError(_), Some(copy))
                if state.status == ResourceStatus::FromDisk =>
            {
                match copy.downcast::<T::Resource>() {
                    Some(copy) => WatchEvent::Changed(copy),
                    None => return None,
                }
            }
            (event, _) => event,
        };
        if let WatchEvent::AmbientError(e) = &event {
            // Compared by message: the same failure, seen again.
            if self
                .last_ambient
                .get(&name)
                .is_some_and(|last| last.message() == e.message())
            {
                return None;
            }
            self.last_ambient.insert(Arc::clone(&name), e.clone());
        } else {
            self.last_ambient.remove(&name);
        }
        let update = update_of(event, || {
            let from = self.set.provenance(&name);
            // The server that sent the copy: after gRFC A71 fallback, an
            // `#alt` or a redirect, not the one the watch started on.
            let server = match (&state.source, from) {
                (Some(source), _) => Arc::clone(&source.server),
                (None, Some(from)) => Arc::clone(&from.server),
                (None, None) => Arc::from(""),
            };
            Provenance {
                authority: from.and_then(|f| f.authority.clone()),
                server,
                version: state.version.clone().unwrap_or_else(Version::empty),
            }
        });
        Some(T::input(name, update))
    }
}

/// The first change ready in `owner`'s stream that `input_of` makes an
/// input of; the others (a repeated ambient error, say) are skipped.
fn first_input<O, S: Stream + Unpin>(
    owner: &mut O,
    cx: &mut Context<'_>,
    stream: impl Fn(&mut O) -> &mut S,
    mut input_of: impl FnMut(&mut O, S::Item) -> Option<Input>,
) -> Poll<Input> {
    loop {
        let Poll::Ready(Some(change)) = stream(owner).poll_next_unpin(cx) else {
            return Poll::Pending;
        };
        if let Some(input) = input_of(owner, change) {
            return Poll::Ready(input);
        }
    }
}

/// The LEDS glob collections the graph follows, as one set.
struct Localities {
    set: CollectionSet<LbEndpointType>,
}

impl Localities {
    /// The next change worth an input.
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Input> {
        first_input(self, cx, |l| &mut l.set, |l, change| l.input_of(change))
    }

    /// The engine's form of a collection's change; `None` for what a glob
    /// does not report (a member list).
    fn input_of(
        &self,
        change: CollectionSetEvent<<LbEndpointType as xdsfed_core::types::ResourceType>::Resource>,
    ) -> Option<Input> {
        let CollectionSetEvent {
            collection,
            event,
            state,
        } = change;
        if matches!(event, CollectionEvent::Listed { .. }) {
            return None;
        }
        let update = update_of_collection(
            event,
            |name| *name == *collection || self.set.is_collection(name),
            |_| Some(state),
            || {
                self.set
                    .provenance(&collection)
                    .map_or_else(|| Arc::from(""), |p| p.server)
            },
        );
        Some(LbEndpointType::collection_input(collection, update))
    }
}

/// The four kinds the graph watches one resource at a time, and the LEDS
/// glob collections.
pub(crate) struct Sets {
    listeners: Followers<ListenerType>,
    routes: Followers<RouteConfigurationType>,
    clusters: Followers<ClusterType>,
    endpoints: Followers<EndpointType>,
    localities: Localities,
    /// The kind polled first next time: the one that gave the last input,
    /// until it has given [`RUN`] in a row.
    next: usize,
    /// How many inputs in a row `next` has given.
    run: u32,
}

/// How many inputs in a row one kind gives before the others are polled
/// first: a busy kind cannot starve them, and a burst of one kind (LEDS
/// churn) does not poll four idle queues, each a lock or two, per input.
const RUN: u32 = 64;

impl Sets {
    pub(crate) fn new(client: &XdsClient) -> Self {
        Sets {
            listeners: Followers::new(client),
            routes: Followers::new(client),
            clusters: Followers::new(client),
            endpoints: Followers::new(client),
            localities: Localities {
                set: client.collection_set(),
            },
            next: 0,
            run: 0,
        }
    }

    /// Watches `name` of `kind`, on `server` when one is given, else on the
    /// servers the bootstrap names for its authority. LEDS collections are
    /// not single watches: the driver watches them as collections
    /// ([`Sets::watch_locality`] for a glob).
    pub(crate) fn watch(
        &mut self,
        kind: ResourceKind,
        name: &Arc<str>,
        server: Option<&ServerConfig>,
    ) -> Result<(), WatchError> {
        match kind {
            ResourceKind::Listener => self.listeners.watch(name, server),
            ResourceKind::RouteConfiguration => self.routes.watch(name, server),
            ResourceKind::Cluster => self.clusters.watch(name, server),
            ResourceKind::ClusterLoadAssignment => self.endpoints.watch(name, server),
            ResourceKind::LbEndpoint => Ok(()),
        }
    }

    /// Stops watching `name` of `kind`. Says whether it was watched here:
    /// an LEDS list collection is not.
    pub(crate) fn unwatch(&mut self, kind: ResourceKind, name: &str) -> bool {
        match kind {
            ResourceKind::Listener => self.listeners.unwatch(name),
            ResourceKind::RouteConfiguration => self.routes.unwatch(name),
            ResourceKind::Cluster => self.clusters.unwatch(name),
            ResourceKind::ClusterLoadAssignment => self.endpoints.unwatch(name),
            ResourceKind::LbEndpoint => return self.localities.set.remove(name),
        }
        true
    }

    /// Watches the LEDS glob collection `glob`.
    pub(crate) fn watch_locality(&mut self, glob: &Arc<str>) -> Result<(), WatchError> {
        self.localities.set.insert_shared(glob)
    }

    /// The next change of any kind: of the kind that gave the last one
    /// while it has more, [`RUN`] at most, then starting from the next kind.
    pub(crate) fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Input> {
        for turn in 0..5 {
            let kind = (self.next + turn) % 5;
            let polled = match kind {
                0 => self.listeners.poll_input(cx),
                1 => self.routes.poll_input(cx),
                2 => self.clusters.poll_input(cx),
                3 => self.endpoints.poll_input(cx),
                _ => self.localities.poll_input(cx),
            };
            if let Poll::Ready(input) = polled {
                self.run = if kind == self.next { self.run + 1 } else { 1 };
                self.next = kind;
                if self.run >= RUN {
                    (self.next, self.run) = ((kind + 1) % 5, 0);
                }
                return Poll::Ready(input);
            }
        }
        Poll::Pending
    }
}
