//! The client's watch events, turned into the engine's inputs.
//!
//! Single resources are watched through a watch set per kind (`sets`);
//! each collection and wildcard watch becomes a stream of [`Input`]s, and
//! the driver merges those in one `SelectAll`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;
use xdsfed_core::version::Version;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use futures::stream::{BoxStream, Stream, StreamExt};
use xdsfed_client::WatchError;
use xdsfed_client::cache::{ResourceState, ResourceStatus};
use xdsfed_client::watch::{CollectionEvent, CollectionWatch, WatchEvent, WildcardWatch};
use xdsfed_core::error::{Cause, ErrorKind, XdsError};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::ClusterView;
use xdsfed_core::types::RouteConfigView;
use xdsfed_core::types::{
    ClusterType, EndpointType, LbEndpointType, LedsEndpoint, ListenerType, LoadAssignment,
    RouteConfigurationType,
};

use crate::engine::GraphEngine;
use crate::resource::{CollectionUpdate, Provenance, ResourceKind, Update};

/// One engine input: a resource's name and what happened to it.
#[derive(Debug)]
pub(crate) enum Input {
    Listener(Arc<str>, Update<Listener>),
    RouteConfig(Arc<str>, Update<RouteConfigView>),
    Cluster(Arc<str>, Update<ClusterView>),
    Endpoints(Arc<str>, Update<LoadAssignment>),
    ListenerCollection(Arc<str>, CollectionUpdate<Listener>),
    ClusterCollection(Arc<str>, CollectionUpdate<ClusterView>),
    /// An LEDS glob collection a ClusterLoadAssignment names.
    Leds(Arc<str>, CollectionUpdate<LedsEndpoint>),
    /// What one watch had ready at once, in order (see [`WatchInputs`]).
    Batch(Vec<Input>),
}

/// The most inputs one watch's stream hands over at once.
const MOST_AT_ONCE: usize = 64;

impl Input {
    /// Hands the input to the engine.
    /// How many events this is: a batch counts its inputs, so that the
    /// driver's bound on a batch of inputs bounds the work too.
    pub(crate) fn events(&self) -> usize {
        match self {
            Input::Batch(inputs) => inputs.len(),
            _ => 1,
        }
    }

    pub(crate) fn feed(self, engine: &mut GraphEngine, now: Instant) {
        match self {
            Input::Listener(name, update) => engine.on_listener(now, &name, update),
            Input::RouteConfig(name, update) => engine.on_route_config(now, &name, update),
            Input::Cluster(name, update) => engine.on_cluster(now, &name, update),
            Input::Endpoints(name, update) => engine.on_endpoints(now, &name, update),
            Input::ListenerCollection(name, update) => {
                engine.on_listener_collection(now, &name, update)
            }
            Input::ClusterCollection(name, update) => {
                engine.on_cluster_collection(now, &name, update)
            }
            Input::Leds(name, update) => engine.on_leds_shared(now, name, update),
            Input::Batch(inputs) => {
                for input in inputs {
                    input.feed(engine, now);
                }
            }
        }
    }

    /// The error of resource `name` of `kind`, which the client refused to
    /// watch.
    pub(crate) fn refused(kind: ResourceKind, name: Arc<str>, error: &WatchError) -> Self {
        let error = refusal(kind, &name, error);
        match kind {
            ResourceKind::Listener => Input::Listener(name, Update::Error(error)),
            ResourceKind::RouteConfiguration => Input::RouteConfig(name, Update::Error(error)),
            ResourceKind::Cluster => Input::Cluster(name, Update::Error(error)),
            ResourceKind::ClusterLoadAssignment => Input::Endpoints(name, Update::Error(error)),
            ResourceKind::LbEndpoint => Input::Leds(name, CollectionUpdate::Error(error)),
        }
    }

    /// The error of collection `name` of `kind`, which the client refused
    /// to watch.
    pub(crate) fn collection_refused(
        kind: ResourceKind,
        name: Arc<str>,
        error: &WatchError,
    ) -> Self {
        let error = refusal(kind, &name, error);
        match kind {
            ResourceKind::Listener => {
                Input::ListenerCollection(name, CollectionUpdate::Error(error))
            }
            _ => Input::ClusterCollection(name, CollectionUpdate::Error(error)),
        }
    }
}

/// A watch the client refused, as the watch error (gRFC A88) a watcher of
/// `name` would get: the refusal's message, the resource, and a cause a
/// data plane can act on.
fn refusal(kind: ResourceKind, name: &Arc<str>, error: &WatchError) -> XdsError {
    let cause = match error {
        WatchError::Authority(_) => Cause::UnknownAuthority,
        WatchError::Unsupported(_) => Cause::NotRequested,
        _ => Cause::Other,
    };
    let type_url = format!("type.googleapis.com/{}", kind.message_name());
    XdsError::new(ErrorKind::Watch, error.to_string())
        .with_cause(cause)
        .with_resource(ResourceKey::new(type_url, Arc::clone(name)))
}

/// The client's resource types the graph follows, tied to its inputs.
pub(crate) trait Followed: xdsfed_core::types::ResourceType {
    /// Wraps an update of this type.
    fn input(name: Arc<str>, update: Update<Self::Resource>) -> Input;
}

impl Followed for ListenerType {
    fn input(name: Arc<str>, update: Update<Listener>) -> Input {
        Input::Listener(name, update)
    }
}

/// The types whose glob or list collections the graph follows: listeners
/// and clusters (as roots), and LEDS endpoints.
pub(crate) trait CollectionFollowed: xdsfed_core::types::ResourceType {
    /// Wraps an update of a collection of this type.
    fn collection_input(collection: Arc<str>, update: CollectionUpdate<Self::Resource>) -> Input;
}

impl CollectionFollowed for ListenerType {
    fn collection_input(collection: Arc<str>, update: CollectionUpdate<Listener>) -> Input {
        Input::ListenerCollection(collection, update)
    }
}

impl CollectionFollowed for ClusterType {
    fn collection_input(collection: Arc<str>, update: CollectionUpdate<ClusterView>) -> Input {
        Input::ClusterCollection(collection, update)
    }
}

impl CollectionFollowed for LbEndpointType {
    fn collection_input(collection: Arc<str>, update: CollectionUpdate<LedsEndpoint>) -> Input {
        Input::Leds(collection, update)
    }
}

impl Followed for RouteConfigurationType {
    fn input(name: Arc<str>, update: Update<RouteConfigView>) -> Input {
        Input::RouteConfig(name, update)
    }
}

impl Followed for ClusterType {
    fn input(name: Arc<str>, update: Update<ClusterView>) -> Input {
        Input::Cluster(name, update)
    }
}

impl Followed for EndpointType {
    fn input(name: Arc<str>, update: Update<LoadAssignment>) -> Input {
        Input::Endpoints(name, update)
    }
}

/// A wildcard watch's events as engine inputs. A wildcard watch reports no
/// version per resource, so those provenances carry an empty one; `server`
/// is the default server the subscription is on.
pub(crate) fn wildcard_stream<T: Followed>(
    server: Arc<str>,
    watch: WildcardWatch<T>,
) -> BoxStream<'static, Input> {
    watch
        .map(move |(name, event)| {
            let update = update_of(event, || Provenance {
                authority: xdsfed_core::name::authority_of(&name).map(Arc::from),
                server: Arc::clone(&server),
                version: Version::empty(),
            });
            T::input(name, update)
        })
        .boxed()
}

/// A collection watch's events as engine inputs, reported under
/// `collection` (the name given in the roots). The stream owns the watch.
pub(crate) fn collection_stream<T: CollectionFollowed>(
    collection: Arc<str>,
    watch: CollectionWatch<T>,
) -> BoxStream<'static, Input> {
    WatchInputs::new(watch, move |watch: &CollectionWatch<T>, event| {
        let update = collection_update(watch, &collection, event);
        Some(T::collection_input(Arc::clone(&collection), update))
    })
    .boxed()
}

/// The engine's form of a collection watch's event.
fn collection_update<T: CollectionFollowed>(
    watch: &CollectionWatch<T>,
    collection: &str,
    event: CollectionEvent<T::Resource>,
) -> CollectionUpdate<T::Resource> {
    update_of_collection::<T::Resource>(
        event,
        |name| name == collection || name == &*watch.key().name,
        |name| watch.member_state(Arc::clone(name)),
        || Arc::clone(&watch.provenance().server),
    )
}

/// The engine's form of a collection's event. `is_own` tells the
/// collection's own name from a member's, `state_of` reads a member's
/// state, and `server` is the collection's, for a member whose state
/// records no source.
///
/// A member's error is ambient when the client still holds a copy of it,
/// which keeps serving. A member reported removed is passed on as
/// `DoesNotExist`: the engine knows whether that takes a glob member out or
/// marks a listed one absent.
pub(crate) fn update_of_collection<R: Send + Sync + 'static>(
    event: CollectionEvent<R>,
    is_own: impl FnOnce(&str) -> bool,
    state_of: impl FnOnce(&Arc<str>) -> Option<ResourceState>,
    server: impl FnOnce() -> Arc<str>,
) -> CollectionUpdate<R> {
    match event {
        CollectionEvent::Upsert { name, resource } => {
            let provenance = provenance_of(state_of(&name).as_ref(), &name, server);
            CollectionUpdate::Member(name, Update::Changed(resource, provenance))
        }
        CollectionEvent::Removed { name } => CollectionUpdate::Member(name, Update::DoesNotExist),
        CollectionEvent::Empty => CollectionUpdate::Empty,
        CollectionEvent::Listed { members } => CollectionUpdate::Listed(members),
        CollectionEvent::Error { name, error } if is_own(&name) => CollectionUpdate::Error(error),
        CollectionEvent::Error { name, error } => {
            let state = state_of(&name);
            // A member from the client's state directory: its copy, as for
            // a single watch (see `watch_stream`).
            if let Some(copy) = state
                .as_ref()
                .filter(|s| s.status == ResourceStatus::FromDisk)
                .and_then(|s| s.resource.as_ref())
                .and_then(|r| r.downcast::<R>())
            {
                let provenance = provenance_of(state.as_ref(), &name, server);
                return CollectionUpdate::Member(name, Update::Changed(copy, provenance));
            }
            let kept = state.is_some_and(|s| s.resource.is_some());
            let update = if kept {
                Update::AmbientError(error)
            } else {
                Update::Error(error)
            };
            CollectionUpdate::Member(name, update)
        }
    }
}

/// A watch's events as engine inputs: a `filter_map` whose closure also
/// sees the watch, to read a version or a member's state right after the
/// event that announced it.
///
/// What the watch has ready at once goes out as one [`Input::Batch`] (up
/// to [`MOST_AT_ONCE`]): the driver merges a stream per collection, and
/// the merge allocates a task each time a stream yields, so the members of
/// a collection that change in one response cost one, not one each.
struct WatchInputs<W, F> {
    watch: W,
    input_of: F,
    /// The watch ended while a batch was being gathered.
    ended: bool,
}

impl<W, F> WatchInputs<W, F>
where
    W: Stream + Unpin,
    F: FnMut(&W, W::Item) -> Option<Input> + Unpin,
{
    fn new(watch: W, input_of: F) -> Self {
        WatchInputs {
            watch,
            input_of,
            ended: false,
        }
    }

    /// The watch's next input: events it has no input for are skipped.
    /// `Ready(None)` once it ended, which is remembered.
    fn poll_input(&mut self, cx: &mut Context<'_>) -> Poll<Option<Input>> {
        while !self.ended {
            match ready!(self.watch.poll_next_unpin(cx)) {
                Some(event) => {
                    if let Some(input) = (self.input_of)(&self.watch, event) {
                        return Poll::Ready(Some(input));
                    }
                }
                None => self.ended = true,
            }
        }
        Poll::Ready(None)
    }
}

impl<W, F> Stream for WatchInputs<W, F>
where
    W: Stream + Unpin,
    F: FnMut(&W, W::Item) -> Option<Input> + Unpin,
{
    type Item = Input;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Input>> {
        let this = self.get_mut();
        let Some(first) = ready!(this.poll_input(cx)) else {
            return Poll::Ready(None);
        };
        let Poll::Ready(Some(second)) = this.poll_input(cx) else {
            return Poll::Ready(Some(first));
        };
        let mut batch = Vec::with_capacity(8);
        batch.extend([first, second]);
        while batch.len() < MOST_AT_ONCE {
            let Poll::Ready(Some(input)) = this.poll_input(cx) else {
                break;
            };
            batch.push(input);
        }
        Poll::Ready(Some(Input::Batch(batch)))
    }
}

/// Where member `name`'s copy, in `state`, came from: its source, or
/// (none recorded) `name`'s authority and the collection's `server`.
fn provenance_of(
    state: Option<&ResourceState>,
    name: &Arc<str>,
    server: impl FnOnce() -> Arc<str>,
) -> Provenance {
    let source = state.and_then(|s| s.source.as_ref());
    Provenance {
        authority: match source {
            Some(source) => source.authority.clone(),
            None => xdsfed_core::name::authority_of(name).map(Arc::from),
        },
        server: match source {
            Some(source) => Arc::clone(&source.server),
            None => server(),
        },
        version: state
            .and_then(|s| s.version.clone())
            .unwrap_or_else(Version::empty),
    }
}

/// The engine's form of a client event; `provenance` is asked for only
/// when the event carries a resource.
pub(crate) fn update_of<R>(
    event: WatchEvent<R>,
    provenance: impl FnOnce() -> Provenance,
) -> Update<R> {
    match event {
        WatchEvent::Changed(resource) => Update::Changed(resource, provenance()),
        WatchEvent::DoesNotExist => Update::DoesNotExist,
        WatchEvent::Error(e) => Update::Error(e),
        WatchEvent::AmbientError(e) => Update::AmbientError(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused watch reaches the graph as the client's typed watch error
    /// (gRFC A88), its message the refusal's, unchanged.
    #[test]
    fn refused_watch_is_a_typed_watch_error_about_the_resource() {
        let refused = WatchError::Unsupported("glob collections need delta xDS".into());
        let error = refusal(ResourceKind::Cluster, &Arc::from("c"), &refused);
        assert_eq!(error.kind(), ErrorKind::Watch);
        assert_eq!(error.cause(), &Cause::NotRequested);
        assert_eq!(error.to_string(), refused.to_string());
        assert_eq!(
            error.resource(),
            Some(&ResourceKey::new(
                "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                "c"
            ))
        );
    }
}
