//! The client's watch events, turned into the engine's inputs.
//!
//! Each [`Watch`] becomes a stream of [`Input`]s; the driver merges them in
//! one `SelectAll`, which polls only the streams that were woken, so an
//! event costs the same however many resources are watched.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use futures::stream::{self, BoxStream, StreamExt};
use xdsfed_core::types::{ClusterType, EndpointType, ListenerType, RouteConfigurationType};
use xdsfed_core::watch::{Watch, WatchEvent, WildcardWatch};

use crate::engine::GraphEngine;
use crate::resource::{Provenance, ResourceKind, Update};

/// One engine input: a resource's name and what happened to it.
#[derive(Debug)]
pub(crate) enum Input {
    Listener(Arc<str>, Update<Listener>),
    RouteConfig(Arc<str>, Update<RouteConfiguration>),
    Cluster(Arc<str>, Update<Cluster>),
    Endpoints(Arc<str>, Update<ClusterLoadAssignment>),
}

impl Input {
    /// Hands the input to the engine.
    pub(crate) fn feed(self, engine: &mut GraphEngine, now: Instant) {
        match self {
            Input::Listener(name, update) => engine.on_listener(now, &name, update),
            Input::RouteConfig(name, update) => engine.on_route_config(now, &name, update),
            Input::Cluster(name, update) => engine.on_cluster(now, &name, update),
            Input::Endpoints(name, update) => engine.on_endpoints(now, &name, update),
        }
    }

    /// An error for resource `name` of `kind`, which could not be watched.
    pub(crate) fn error(kind: ResourceKind, name: Arc<str>, message: String) -> Self {
        match kind {
            ResourceKind::Listener => Input::Listener(name, Update::Error(message)),
            ResourceKind::RouteConfiguration => Input::RouteConfig(name, Update::Error(message)),
            ResourceKind::Cluster => Input::Cluster(name, Update::Error(message)),
            ResourceKind::ClusterLoadAssignment => Input::Endpoints(name, Update::Error(message)),
        }
    }
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

impl Followed for RouteConfigurationType {
    fn input(name: Arc<str>, update: Update<RouteConfiguration>) -> Input {
        Input::RouteConfig(name, update)
    }
}

impl Followed for ClusterType {
    fn input(name: Arc<str>, update: Update<Cluster>) -> Input {
        Input::Cluster(name, update)
    }
}

impl Followed for EndpointType {
    fn input(name: Arc<str>, update: Update<ClusterLoadAssignment>) -> Input {
        Input::Endpoints(name, update)
    }
}

/// A watch's events as engine inputs, reported under `name` (the engine's
/// canonical name). The stream owns the watch: dropping it unsubscribes.
///
/// An ambient error repeating the one just reported is skipped: while a
/// server is down, every reconnection attempt reports the same failure, and
/// each would otherwise cost a snapshot that differs in nothing.
pub(crate) fn watch_stream<T: Followed>(
    name: Arc<str>,
    watch: Watch<T>,
) -> BoxStream<'static, Input> {
    let start = (watch, None::<String>);
    stream::unfold(start, move |(mut watch, mut last_ambient)| {
        let name = Arc::clone(&name);
        async move {
            let update = loop {
                let event = watch.next().await?;
                if let WatchEvent::AmbientError(e) = &event {
                    let message = e.to_string();
                    if last_ambient.as_ref() == Some(&message) {
                        continue;
                    }
                    last_ambient = Some(message);
                } else {
                    last_ambient = None;
                }
                break update_of(event, || {
                    let from = watch.provenance();
                    // Read right after the event; a newer version arriving in
                    // between is delivered as the next event anyway.
                    let version = watch.state().version.unwrap_or_else(|| Arc::from(""));
                    Provenance {
                        authority: from.authority.clone(),
                        server: Arc::clone(&from.server),
                        version,
                    }
                });
            };
            Some((T::input(name, update), (watch, last_ambient)))
        }
    })
    .boxed()
}

/// A wildcard watch's events as engine inputs. A wildcard watch reports no
/// version per resource, so those provenances carry an empty one; `server`
/// is the default server the subscription is on.
pub(crate) fn wildcard_stream<T: Followed>(
    server: Arc<str>,
    watch: WildcardWatch<T>,
) -> BoxStream<'static, Input> {
    stream::unfold(watch, move |mut watch| {
        let server = Arc::clone(&server);
        async move {
            let (name, event) = watch.next().await?;
            let update = update_of(event, || Provenance {
                authority: xdsfed_core::name::authority_of(&name).map(Arc::from),
                server,
                version: Arc::from(""),
            });
            Some((T::input(name, update), watch))
        }
    })
    .boxed()
}

/// The engine's form of a client event; `provenance` is asked for only
/// when the event carries a resource.
fn update_of<R>(event: WatchEvent<R>, provenance: impl FnOnce() -> Provenance) -> Update<R> {
    match event {
        WatchEvent::Changed(resource) => Update::Changed(resource, provenance()),
        WatchEvent::DoesNotExist => Update::DoesNotExist,
        WatchEvent::Error(e) => Update::Error(e.to_string()),
        WatchEvent::AmbientError(e) => Update::AmbientError(e.to_string()),
    }
}
