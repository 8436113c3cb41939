//! The async driver: a [`GraphEngine`] over a real [`XdsClient`].
//!
//! ```text
//!               ┌──────────────────────────── driver task ───────────────────────────┐
//!  WatchSet × 4 ─┤ sets, then collection ─► on_* ─► GraphEngine ─► poll_snapshot ─────┼─► SnapshotCell ─► readers
//!  CollectionSet ┤ and wildcard streams          │    ▲                               │
//!  collections ──┤                               │    │                               │
//!               │  set.insert / insert_on_server ◄─ poll_watch  └─ handle_timeout ◄──┼── sleep until poll_timeout
//!               └────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! [`ConfigGraph::builder`] names the roots; [`start`](ConfigGraphBuilder::start)
//! spawns one task that owns the engine and every watch the engine asked
//! for. The task:
//!
//! - waits for the next change of anything it watches, then feeds every
//!   change that is ready at that moment before polling the engine, so a
//!   response carrying many resources yields one snapshot. Single resources
//!   are members of a [`WatchSet`](xdsfed_client::WatchSet) per kind, whose
//!   queue of changed names costs the same with ten members or a hundred
//!   thousand; LEDS glob collections, one a cluster, are members of one
//!   [`CollectionSet`](xdsfed_client::CollectionSet) the same way; root
//!   collection, LEDS list collection and wildcard watches are streams
//!   merged in one `futures` `SelectAll`;
//! - publishes each snapshot the engine cuts, then carries out its watch
//!   changes (the engine's [polling order](crate::engine#polling-order));
//! - sleeps until the engine's next warming deadline when nothing arrives.
//!
//! Watches are latest-value channels of the client: the client's stream
//! reader never waits for the graph, and a graph that falls behind sees each
//! resource's newest state, not a backlog.
//!
//! # Carrying out watch changes
//! - `Watch` with [`Via::Bootstrap`] → the kind's set, subscribed as
//!   [`XdsClient::watch`] does: the name's authority in the bootstrap picks
//!   the server.
//! - `Watch` with [`Via::ConfigSource`] → the kind's set, subscribed as
//!   [`XdsClient::watch_on_server`] does, when
//!   the source names a server the client can dial (an `api_config_source`
//!   whose first gRPC service is a `google_grpc` target); otherwise (`ads`,
//!   `self`, `envoy_grpc`) the bootstrap, as above.
//! - `Watch` with [`Via::AllowedGrpcService`] → the same, on the server
//!   the engine resolved with the bootstrap's `allowed_grpc_services`
//!   credentials (gRFC A102).
//! - A watch the client refuses (a malformed name, an authority in neither
//!   the `ConfigSource` nor the bootstrap) is fed back to the engine as
//!   [`Update::Error`] for that resource: the error lands on that edge only.
//! - `Unwatch` takes the resource out of its set, which unsubscribes.
//! - `Watch` of an LEDS collection (kind [`ResourceKind::LbEndpoint`]) →
//!   through the bootstrap, a glob into the LEDS collection set (subscribed
//!   as [`XdsClient::watch_collection`] does), a list collection with
//!   [`XdsClient::watch_list_collection`]; its events fed with
//!   [`GraphEngine::on_leds`].
//! - `WatchAll` → [`XdsClient::watch_wildcard`].
//! - `WatchCollection` → [`XdsClient::watch_collection`] for a glob (a name
//!   ending in `/*`), [`XdsClient::watch_list_collection`] otherwise; the
//!   collection's events go to the engine as [`CollectionUpdate`]s, each
//!   member with the provenance the client's cache records for it (the
//!   server of its own authority for a locator, the redirect target's
//!   server for a redirected glob member). A collection the client refuses
//!   is reported as the collection's error.
//!
//! Unless the options say otherwise, the engine is told which authorities
//! the client's bootstrap defines, so that an unknown authority on a route
//! or aggregate edge shows as [`GraphError::UnknownAuthority`].
//!
//! Dropping the [`ConfigGraph`] (or [`shutdown`](ConfigGraph::shutdown))
//! stops the task and drops its watches.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use xdsfed_core::bootstrap::Bootstrap;
//! use xdsfed_client::client::XdsClient;
//! use xdsfed_graph::{ClusterEndpoints, ConfigGraph, GraphOptions};
//!
//! let client = XdsClient::builder(Bootstrap::from_file("bootstrap.yaml")?).build()?;
//! let mut graph = ConfigGraph::builder(client.clone())
//!     .listener("xdstp://a.example/envoy.config.listener.v3.Listener/front")
//!     .options(GraphOptions::default())
//!     .start();
//! let mut snapshot = graph.ready().await?;
//! loop {
//!     for cluster in snapshot.clusters() {
//!         match (&cluster.endpoints, &cluster.error) {
//!             (_, Some(error)) => println!("{}: {error}", cluster.name),
//!             (ClusterEndpoints::Eds { assignment: Some(a), .. }, None) => {
//!                 println!("{}: {} localities", cluster.name, a.value.localities().len())
//!             }
//!             _ => println!("{}", cluster.name),
//!         }
//!     }
//!     snapshot = graph.changed().await?;
//! }
//! # }
//! ```
//!
//! [`GraphError::UnknownAuthority`]: crate::GraphError::UnknownAuthority
//! [`Watch`]: xdsfed_client::watch::Watch
//! [`Update::Error`]: crate::Update::Error
//! [`CollectionUpdate`]: crate::CollectionUpdate

mod inputs;
mod sets;

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use xdsfed_core::hash::HashMap;

use futures::stream::{AbortHandle, BoxStream, SelectAll, StreamExt};
use tokio::task::JoinHandle;
use xdsfed_client::client::{WatchError, XdsClient};
use xdsfed_core::authority::AuthorityError;
use xdsfed_core::name::ResourceName;
use xdsfed_core::types::{ClusterType, LbEndpointType, ListenerType};

use crate::cell::{PublisherGone, SnapshotCell, SnapshotReader};
use crate::edges::Via;
use crate::engine::{GraphEngine, WatchChange};
use crate::options::{ConfigSourceTrust, GraphOptions, KnownAuthorities, Roots};
use crate::resource::ResourceKind;
use crate::snapshot::Snapshot;
use inputs::{CollectionFollowed, Followed, Input, collection_stream, wildcard_stream};
use sets::Sets;
use xdsfed_core::bootstrap::{ServerConfig, features};

/// At most this many events are fed between two looks at the engine, so
/// that a flood of updates cannot hold a snapshot back indefinitely.
const MAX_BATCH: usize = 4096;

/// Builds a [`ConfigGraph`]: its roots and options.
#[derive(Debug)]
pub struct ConfigGraphBuilder {
    client: XdsClient,
    roots: Roots,
    options: Option<GraphOptions>,
}

impl ConfigGraphBuilder {
    /// Adds a listener root by name (`xdstp://` or old-style).
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.roots = self.roots.listener(name);
        self
    }

    /// Adds the listener a gRPC channel target reaches as a root:
    /// `xds:///svc` through the bootstrap's
    /// `client_default_listener_resource_name_template`, `xds://authority/svc`
    /// through that authority's `client_listener_resource_name_template`
    /// (gRFC A47; [`AuthorityRegistry::listener_resource_name`] resolves it).
    ///
    /// Fails, naming the target, when it is not an `xds:` URI or names an
    /// authority the bootstrap does not define.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use xdsfed_core::bootstrap::Bootstrap;
    /// use xdsfed_client::client::XdsClient;
    /// use xdsfed_graph::ConfigGraph;
    ///
    /// let client = XdsClient::builder(Bootstrap::from_env()?).build()?;
    /// let mut graph = ConfigGraph::builder(client).target("xds:///greeter")?.start();
    /// let snapshot = graph.ready().await?;
    /// println!("{} clusters", snapshot.clusters().count());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`AuthorityRegistry::listener_resource_name`]: xdsfed_core::authority::AuthorityRegistry::listener_resource_name
    pub fn target(self, target: &str) -> Result<Self, AuthorityError> {
        let listener = self.client.registry().listener_resource_name(target)?;
        Ok(self.listener(listener.to_string()))
    }

    /// Adds a cluster root by name.
    pub fn cluster(mut self, name: impl Into<String>) -> Self {
        self.roots = self.roots.cluster(name);
        self
    }

    /// Follows every listener the default servers offer (wildcard LDS).
    pub fn all_listeners(mut self) -> Self {
        self.roots = self.roots.all_listeners();
        self
    }

    /// Follows every cluster the default servers offer (wildcard CDS).
    pub fn all_clusters(mut self) -> Self {
        self.roots = self.roots.all_clusters();
        self
    }

    /// Adds these roots to the ones given so far.
    pub fn roots(mut self, roots: Roots) -> Self {
        let Roots {
            listeners,
            clusters,
            all_listeners,
            all_clusters,
            listener_collections,
            cluster_collections,
        } = roots;
        self.roots.listener_collections.extend(listener_collections);
        self.roots.cluster_collections.extend(cluster_collections);
        self.roots.listeners.extend(listeners);
        self.roots.clusters.extend(clusters);
        self.roots.all_listeners |= all_listeners;
        self.roots.all_clusters |= all_clusters;
        self
    }

    /// Adds a listener collection root: a glob or list collection whose
    /// members are followed (see [`Roots::listener_collection`]).
    pub fn listener_collection(mut self, name: impl Into<String>) -> Self {
        self.roots = self.roots.listener_collection(name);
        self
    }

    /// Adds a cluster collection root (see [`Roots::cluster_collection`]).
    pub fn cluster_collection(mut self, name: impl Into<String>) -> Self {
        self.roots = self.roots.cluster_collection(name);
        self
    }

    /// Replaces the engine's options. With
    /// [`KnownAuthorities::Any`] (the default) the driver fills in the
    /// authorities of the client's bootstrap.
    pub fn options(mut self, options: GraphOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Spawns the driver task on the client's runtime
    /// ([`XdsClient::runtime`], beside the streams that feed it) and returns
    /// the graph's handle. The first snapshot arrives once every reachable
    /// resource is warm (see [`ConfigGraph::ready`]).
    pub fn start(self) -> ConfigGraph {
        let mut options = self.options.unwrap_or_default();
        if options.known_authorities == KnownAuthorities::Any {
            options.known_authorities = bootstrap_authorities(&self.client);
        }
        if options.config_source_trust.is_none() {
            options.config_source_trust = Some(bootstrap_trust(&self.client));
        }
        let cell = SnapshotCell::new();
        let reader = cell.reader();
        let runtime = self.client.runtime().clone();
        let wildcard_server = default_server(&self.client);
        let engine = GraphEngine::new(self.roots, options, now());
        let sets = Sets::new(&self.client);
        let driver = Driver {
            client: self.client,
            engine,
            cell,
            sets,
            streams: SelectAll::new(),
            leds: HashMap::default(),
            wildcards: HashMap::default(),
            collections: HashMap::default(),
            wildcard_server,
        };
        ConfigGraph {
            reader,
            task: Some(runtime.spawn(driver.run())),
        }
    }
}

/// A running resource graph: a task that follows the graph through the
/// client and publishes complete snapshots. See the [module docs](self).
///
/// Readers get snapshots lock-free with [`load`](Self::load), or wait for
/// them with [`ready`](Self::ready) and [`changed`](Self::changed); more
/// readers come from [`reader`](Self::reader). Dropping the graph stops the
/// task and unsubscribes everything it watched.
#[derive(Debug)]
pub struct ConfigGraph {
    reader: SnapshotReader,
    task: Option<JoinHandle<()>>,
}

impl ConfigGraph {
    /// Starts describing a graph that follows resources through `client`.
    pub fn builder(client: XdsClient) -> ConfigGraphBuilder {
        ConfigGraphBuilder {
            client,
            roots: Roots::new(),
            options: None,
        }
    }

    /// The current snapshot, or the first one once every reachable resource
    /// is warm or has failed (gRPC A74's "ready"). A later
    /// [`changed`](Self::changed) waits for a newer one. Fails only when the
    /// driver task is gone.
    pub async fn ready(&mut self) -> Result<Arc<Snapshot>, PublisherGone> {
        self.reader.ready().await
    }

    /// The current snapshot, if one was published. Lock-free.
    pub fn load(&self) -> Option<Arc<Snapshot>> {
        self.reader.load()
    }

    /// Waits for a snapshot newer than the last one this handle returned
    /// from `changed` or [`ready`](Self::ready), and returns the current one.
    pub async fn changed(&mut self) -> Result<Arc<Snapshot>, PublisherGone> {
        self.reader.changed().await
    }

    /// Another reader of this graph's snapshots, for other tasks.
    pub fn reader(&self) -> SnapshotReader {
        self.reader.clone()
    }

    /// Stops the driver task and waits until it has dropped its watches.
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Cancelled is the expected outcome; a panic inside the task has
            // already been reported by the runtime.
            let _ = task.await;
        }
    }
}

impl Drop for ConfigGraph {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The task's state: the engine, the client, a watch set per kind, and a
/// stream per live collection or wildcard watch.
struct Driver {
    client: XdsClient,
    engine: GraphEngine,
    cell: SnapshotCell,
    /// Every live collection and wildcard watch's events, merged.
    streams: SelectAll<futures::stream::Abortable<BoxStream<'static, Input>>>,
    /// The single-resource watches, a set per kind.
    sets: Sets,
    /// How to stop each LEDS list collection's stream (which drops the
    /// watch); glob collections are in `sets`.
    leds: HashMap<Arc<str>, AbortHandle>,
    /// Wildcard watches by type; kept for the graph's lifetime.
    wildcards: HashMap<ResourceKind, AbortHandle>,
    /// Collection watches by name; kept for the graph's lifetime.
    collections: HashMap<Arc<str>, AbortHandle>,
    /// The server wildcard subscriptions go to, for their provenance.
    wildcard_server: Arc<str>,
}

impl Driver {
    async fn run(mut self) {
        let mut busy = false;
        loop {
            busy |= self.settle();
            if busy {
                // A full batch, or watches just handed to the transport's
                // tasks: let the scheduler run them (they may sit behind
                // this task on its worker) rather than feed the next batch.
                tokio::task::yield_now().await;
            }
            let deadline = self.engine.poll_timeout();
            let inputs = (&mut self.sets, &mut self.streams);
            let engine = &mut self.engine;
            busy = tokio::select! {
                fed = feed_ready(inputs, engine) => fed >= MAX_BATCH,
                () = sleep_until(deadline) => {
                    self.engine.handle_timeout(now());
                    false
                }
            };
        }
    }

    /// Publishes and carries out watch changes until the engine has nothing
    /// more to say: a refused watch is fed back as an error, which can make
    /// the graph ready or retire more resources. Says whether it carried
    /// out any watch change.
    fn settle(&mut self) -> bool {
        let mut watched = false;
        loop {
            let mut progressed = false;
            while let Some(snapshot) = self.engine.poll_snapshot() {
                tracing::debug!(
                    generation = snapshot.generation(),
                    clusters = snapshot.cluster_count(),
                    "publishing snapshot"
                );
                self.cell.publish(snapshot);
                progressed = true;
            }
            while let Some(change) = self.engine.poll_watch() {
                self.apply(change);
                progressed = true;
                watched = true;
            }
            if !progressed {
                return watched;
            }
        }
    }

    fn apply(&mut self, change: WatchChange) {
        match change {
            WatchChange::Watch { kind, name, via } => self.watch(kind, name, &via),
            WatchChange::Unwatch { kind, name } => {
                // An LEDS list collection has a stream of its own: aborted,
                // it ends at its next poll and drops its watch, which
                // unsubscribes.
                if !self.sets.unwatch(kind, &name)
                    && let Some(handle) = self.leds.remove(&name)
                {
                    handle.abort();
                }
            }
            WatchChange::WatchCollection { kind, name } => self.watch_collection(kind, name),
            WatchChange::WatchAll { kind } => {
                let opened = match kind {
                    ResourceKind::Listener => self.open_wildcard::<ListenerType>(),
                    ResourceKind::Cluster => self.open_wildcard::<ClusterType>(),
                    // The engine asks only for wildcard LDS and CDS.
                    ResourceKind::RouteConfiguration
                    | ResourceKind::ClusterLoadAssignment
                    | ResourceKind::LbEndpoint => {
                        return;
                    }
                };
                match opened {
                    Ok(stream) => {
                        let (stream, handle) = futures::stream::abortable(stream);
                        self.streams.push(stream);
                        if let Some(old) = self.wildcards.insert(kind, handle) {
                            old.abort();
                        }
                    }
                    // The engine has no input for a refused wildcard: it
                    // publishes without those resources at its warming
                    // timeout, as for a silent server.
                    Err(e) => tracing::warn!(%kind, error = %e, "wildcard watch refused"),
                }
            }
        }
    }

    /// Starts watching collection `name` and feeds the engine from it; a
    /// collection the client refuses is fed back as its error.
    fn watch_collection(&mut self, kind: ResourceKind, name: Arc<str>) {
        let opened = match kind {
            ResourceKind::Listener => self.open_collection::<ListenerType>(&name),
            ResourceKind::Cluster => self.open_collection::<ClusterType>(&name),
            // The roots hold listener and cluster collections only.
            ResourceKind::RouteConfiguration
            | ResourceKind::ClusterLoadAssignment
            | ResourceKind::LbEndpoint => return,
        };
        match opened {
            Ok(stream) => {
                let (stream, handle) = futures::stream::abortable(stream);
                self.streams.push(stream);
                if let Some(old) = self.collections.insert(name, handle) {
                    old.abort();
                }
            }
            Err(e) => {
                tracing::debug!(%kind, %name, error = %e, "collection watch refused");
                Input::collection_refused(kind, name, &e).feed(&mut self.engine, now());
            }
        }
    }

    /// A glob (`…/*`) goes to [`XdsClient::watch_collection`], anything
    /// else to [`XdsClient::watch_list_collection`], which refuses what is
    /// not a list collection of `T`.
    fn open_collection<T: CollectionFollowed>(
        &self,
        name: &Arc<str>,
    ) -> Result<BoxStream<'static, Input>, WatchError> {
        let watch = if is_glob(name) {
            self.client.watch_collection::<T>(name)?
        } else {
            self.client.watch_list_collection::<T>(name)?
        };
        Ok(collection_stream(Arc::clone(name), watch))
    }

    /// Starts watching `name` through `via`; a watch the client refuses is
    /// fed back as that resource's error.
    fn watch(&mut self, kind: ResourceKind, name: Arc<str>, via: &Via) {
        let watched = if kind == ResourceKind::LbEndpoint && is_glob(&name) {
            self.sets.watch_locality(&name)
        } else if kind == ResourceKind::LbEndpoint {
            self.open_leds(&name).map(|stream| {
                let (stream, handle) = futures::stream::abortable(stream);
                self.streams.push(stream);
                if let Some(old) = self.leds.insert(Arc::clone(&name), handle) {
                    old.abort();
                }
            })
        } else {
            let server = match via {
                Via::ConfigSource(source) => crate::edges::named_server::server_of(source),
                Via::AllowedGrpcService(server) => Some(ServerConfig::clone(server)),
                Via::Bootstrap => None,
            };
            self.sets.watch(kind, &name, server.as_ref())
        };
        if let Err(e) = watched {
            tracing::debug!(%kind, %name, error = %e, "watch refused");
            Input::refused(kind, name, &e).feed(&mut self.engine, now());
        }
    }

    /// An LEDS list collection (`LbEndpointCollection`, gRFC A95), through
    /// the bootstrap, with [`XdsClient::watch_list_collection`]; globs are
    /// in the [`Sets`]' collection set. The client watches collections by
    /// their authority only, so a `leds_config` that names a server of its
    /// own is not dialled (the authority must be in the bootstrap).
    fn open_leds(&self, name: &Arc<str>) -> Result<BoxStream<'static, Input>, WatchError> {
        self.open_collection::<LbEndpointType>(name)
    }

    fn open_wildcard<T: Followed>(&self) -> Result<BoxStream<'static, Input>, WatchError> {
        let watch = self.client.watch_wildcard::<T>()?;
        Ok(wildcard_stream(Arc::clone(&self.wildcard_server), watch))
    }
}

/// Whether `name` is a glob collection's (`xdstp://…/*`).
fn is_glob(name: &str) -> bool {
    ResourceName::parse_user_supplied(name).is_ok_and(|n| n.as_xdstp().is_some_and(|x| x.is_glob()))
}

/// Feeds the engine every event ready now, waiting for the first one.
/// Resolves with how many were fed: at least one, and past [`MAX_BATCH`]
/// by less than one watch's batch of inputs.
async fn feed_ready<S>(
    (sets, streams): (&mut Sets, &mut SelectAll<S>),
    engine: &mut GraphEngine,
) -> usize
where
    S: futures::Stream<Item = Input> + Unpin,
{
    let mut at = None;
    poll_fn(|cx| {
        let mut fed = 0;
        while fed < MAX_BATCH {
            let input = match sets.poll_input(cx) {
                Poll::Ready(input) => input,
                Poll::Pending => match streams.poll_next_unpin(cx) {
                    Poll::Ready(Some(input)) => input,
                    // `None` means no stream is left: nothing to wait for
                    // until the driver adds one, which it does outside this
                    // future.
                    Poll::Ready(None) | Poll::Pending => break,
                },
            };
            // One clock reading per batch: the batch is one moment.
            let now = *at.get_or_insert_with(now);
            fed += input.events();
            input.feed(engine, now);
        }
        if fed > 0 {
            Poll::Ready(fed)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// The driver's clock: tokio's, so that a runtime with paused time (tests)
/// moves the engine's warming timers too.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Every authority the client's bootstrap defines.
fn bootstrap_authorities(client: &XdsClient) -> KnownAuthorities {
    let registry = client.registry();
    KnownAuthorities::only(
        registry
            .server_ids()
            .flat_map(|server| registry.authorities_for(server))
            .map(str::to_owned),
    )
}

/// The bootstrap's authority-to-server map, its trusted servers and its
/// `allowed_grpc_services`, for ConfigSources beside names.
fn bootstrap_trust(client: &XdsClient) -> ConfigSourceTrust {
    let registry = client.registry();
    let mut trust = ConfigSourceTrust {
        allowed_grpc_services: registry.allowed_grpc_services().clone(),
        ..ConfigSourceTrust::default()
    };
    for server in registry.server_ids() {
        for authority in registry.authorities_for(server) {
            trust
                .mapped
                .entry(authority.to_owned())
                .or_default()
                .insert(registry.uri(server).to_string());
        }
        if registry
            .key(server)
            .features
            .contains(&features::TRUSTED_XDS_SERVER)
        {
            trust
                .trusted_servers
                .insert(registry.name(server).to_string());
        }
    }
    trust
}

/// The default server, as the client names it in provenances: the
/// registry's shared name.
fn default_server(client: &XdsClient) -> Arc<str> {
    let registry = client.registry();
    match registry.resolve_ids(&ResourceName::OldStyle(String::new())) {
        Ok([first, ..]) => Arc::clone(registry.name(*first)),
        _ => Arc::from(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Update;
    use xdsfed_core::bootstrap::Bootstrap;

    /// The bound on one feed counts events, not what carried them: a
    /// watch hands over up to 64 inputs as one batch, and a feed that
    /// counted batches would take 64 times its bound (a whole cold start's
    /// collection) before the driver looked at the engine again.
    #[tokio::test]
    async fn one_feed_takes_its_bound_in_events_however_they_are_batched() {
        let bootstrap = Bootstrap::from_json_str(
            r#"{"xds_servers": [{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "n"}}"#,
        )
        .expect("a valid bootstrap");
        let client = XdsClient::builder(bootstrap).build().expect("a client");
        let mut sets = Sets::new(&client);
        let mut engine = GraphEngine::new(Roots::new(), GraphOptions::default(), now());
        let batches = (0..2 * MAX_BATCH / 64).map(|i| {
            Input::Batch(
                (0..64)
                    .map(|j| Input::Cluster(Arc::from(format!("c{i}-{j}")), Update::DoesNotExist))
                    .collect(),
            )
        });
        let mut streams = SelectAll::new();
        streams.push(futures::stream::iter(batches).boxed());
        let fed = feed_ready((&mut sets, &mut streams), &mut engine).await;
        assert!(
            (MAX_BATCH..MAX_BATCH + 64).contains(&fed),
            "fed {fed} events in one look"
        );
        let rest = feed_ready((&mut sets, &mut streams), &mut engine).await;
        assert_eq!(fed + rest, 2 * MAX_BATCH);
    }
}
