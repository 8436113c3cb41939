//! The task behind a channel: turns each snapshot into the routing that
//! requests read.
//!
//! ```text
//! SnapshotReader ──► apply(snapshot) ──┬─► per cluster: EndpointSet ─► watch ─► its balancer's discovery
//!                                      ├─► RouteTable (routes → balancers or failures)
//!                                      └─► Routing stored (ArcSwap), generation bumped ─► waiting requests
//! ```
//!
//! Order matters, and is the channel's promise: every cluster's new
//! endpoint set is handed to its balancer *before* the routing is stored.
//! A request that starts once the routing is stored picks through a
//! balancer that applies the new set first, so no request reaches an
//! endpoint the published snapshot removed.
//!
//! Balancers live as long as a route reaches their cluster with the same
//! policy: an endpoint that stays keeps its connection across snapshots. A
//! cluster no route reaches any more is dropped with the routing that last
//! used it, once its requests are done. If the graph stops (its task is
//! gone), the last routing keeps serving.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use tokio::sync::watch;
use xdsfed_core::types::UpstreamTls;
use xdsfed_graph::{ConfigGraph, RouteBinding, Snapshot, SnapshotReader};

use crate::balancer::ClusterBalancer;
use crate::connector::Connector;
use crate::discover::ClusterContext;
use crate::endpoints::EndpointSet;
use crate::error::{Unservable, cleaned, shown};
use crate::outlier::OutlierConfig;
use crate::policy::LbPolicy;
use crate::routing::RouteTable;

/// Where a route's cluster leads.
#[derive(Debug)]
pub(crate) enum Target {
    Cluster(Arc<ClusterBalancer>),
    Unavailable(Unservable),
}

/// What requests read: the snapshot and its compiled routes, or why the
/// listener cannot be used.
#[derive(Debug)]
pub(crate) struct Routing {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) table: Result<RouteTable<Arc<Target>>, Unservable>,
}

/// What a balancer is built with; a change builds a new one.
#[derive(Debug, Clone, PartialEq)]
struct BalancerConfig {
    policy: LbPolicy,
    connect_timeout: Option<Duration>,
    outlier: Option<OutlierConfig>,
    /// A change of TLS makes new connections with the new certificates.
    tls: Option<Arc<UpstreamTls>>,
}

struct ClusterState {
    config: BalancerConfig,
    endpoints: watch::Sender<Arc<EndpointSet>>,
    balancer: Arc<ClusterBalancer>,
}

/// The follower's state; [`run`](Self::run) is its task.
pub(crate) struct Follower {
    pub(crate) listener: Arc<str>,
    pub(crate) authority: Arc<str>,
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) routing: Arc<ArcSwapOption<Routing>>,
    pub(crate) generation: watch::Sender<u64>,
    clusters: HashMap<Arc<str>, ClusterState>,
}

impl Follower {
    pub(crate) fn new(
        listener: Arc<str>,
        authority: Arc<str>,
        connector: Arc<dyn Connector>,
        routing: Arc<ArcSwapOption<Routing>>,
        generation: watch::Sender<u64>,
    ) -> Self {
        Self {
            listener,
            authority,
            connector,
            routing,
            generation,
            clusters: HashMap::new(),
        }
    }

    /// Applies every snapshot `reader` sees until the graph is gone. `graph`
    /// is held so that the graph lives as long as this task.
    pub(crate) async fn run(mut self, mut reader: SnapshotReader, graph: Option<ConfigGraph>) {
        let _graph = graph;
        let mut next = reader.ready().await;
        while let Ok(snapshot) = next {
            self.apply(snapshot);
            next = reader.changed().await;
        }
        tracing::warn!(listener = %self.listener, "xDS graph stopped; the last routing keeps serving");
    }

    /// Hands every cluster its endpoints, then publishes the routing.
    pub(crate) fn apply(&mut self, snapshot: Arc<Snapshot>) {
        let mut targets: HashMap<Arc<str>, Arc<Target>> = HashMap::new();
        let authority = Arc::clone(&self.authority);
        let listener = Arc::clone(&self.listener);
        let max_duration = listener_max_duration(&snapshot, &listener);
        let table = route_config(&snapshot, &listener).map(|config| {
            RouteTable::compile_with(&config, &authority, max_duration, |name| {
                if let Some(target) = targets.get(name) {
                    return Arc::clone(target);
                }
                let target = Arc::new(self.target(&snapshot, name));
                targets.insert(name.into(), Arc::clone(&target));
                target
            })
        });
        self.clusters.retain(|name, _| targets.contains_key(name));
        tracing::debug!(
            generation = snapshot.generation(),
            clusters = self.clusters.len(),
            "routing updated"
        );
        self.routing
            .store(Some(Arc::new(Routing { snapshot, table })));
        self.generation.send_modify(|g| *g += 1);
    }

    /// The target for cluster `name`: its balancer (kept or new, with the
    /// snapshot's endpoints), or why it cannot take traffic.
    fn target(&mut self, snapshot: &Snapshot, name: &str) -> Target {
        let set = match EndpointSet::of(snapshot, name) {
            Ok(set) => Arc::new(set),
            Err(why) => return Target::Unavailable(Unservable::Route(why.into())),
        };
        let cluster = snapshot
            .cluster(name)
            .and_then(|c| c.cluster.as_ref())
            .map(|c| &*c.value);
        let policy = match cluster.map_or(Ok(LbPolicy::RoundRobin), LbPolicy::of) {
            Ok(policy) => policy,
            Err(why) => {
                let message = format!("cluster {}: {}", shown(name), cleaned(&why));
                return Target::Unavailable(Unservable::Route(message.into()));
            }
        };
        let connect_timeout = cluster.and_then(|c| c.connect_timeout());
        let outlier = OutlierConfig::of(cluster.and_then(|c| c.outlier_detection()));
        // Validated when the cluster was decoded.
        let tls = cluster.and_then(|c| c.upstream_tls()).cloned();
        let config = BalancerConfig {
            policy,
            connect_timeout,
            outlier,
            tls: tls.clone(),
        };
        if let Some(state) = self.clusters.get(name).filter(|s| s.config == config) {
            state.endpoints.send_if_modified(|current| {
                let changed = **current != *set;
                if changed {
                    *current = Arc::clone(&set);
                }
                changed
            });
            return Target::Cluster(Arc::clone(&state.balancer));
        }
        let (endpoints, receiver) = watch::channel(set);
        let context = ClusterContext {
            cluster: name.into(),
            authority: Arc::clone(&self.authority),
            connect_timeout,
            policy,
            outlier,
            connector: Arc::clone(&self.connector),
            tls,
        };
        let balancer = Arc::new(ClusterBalancer::new(context, receiver));
        self.clusters.insert(
            name.into(),
            ClusterState {
                config,
                endpoints,
                balancer: Arc::clone(&balancer),
            },
        );
        Target::Cluster(balancer)
    }
}

/// The HttpConnectionManager's `max_stream_duration`, which routes that set
/// none take (gRFC A31); zero or absent is no limit.
fn listener_max_duration(snapshot: &Snapshot, listener: &str) -> Option<Duration> {
    let listener = snapshot.listener(listener)?.listener.as_ref()?;
    let hcm = xdsfed_core::types::http_connection_manager(&listener.value).ok()??;
    hcm.common_http_protocol_options?
        .max_stream_duration
        .as_ref()
        .and_then(xdsfed_core::types::std_duration)
        .filter(|d| !d.is_zero())
}

/// The listener's route configuration, decoded from the bytes the graph
/// holds (the routing table is compiled from the full message), or why it
/// cannot be used.
fn route_config(snapshot: &Snapshot, listener: &str) -> Result<RouteConfiguration, Unservable> {
    let unusable = |why: String| Unservable::Listener(why.into());
    let entry = snapshot.listener(listener).ok_or_else(|| {
        unusable(format!(
            "listener {} is not in the snapshot",
            shown(listener)
        ))
    })?;
    if let Some(error) = &entry.error {
        return Err(unusable(cleaned(&error.to_string())));
    }
    let config = match entry.routes.first() {
        Some(RouteBinding::Rds(name)) => snapshot.route_config(name),
        Some(RouteBinding::Inline(config)) => Some(config),
        None => None,
    };
    let held = config
        .and_then(|c| c.route_config.as_ref())
        .ok_or_else(|| {
            unusable(format!(
                "listener {} has no usable route configuration",
                shown(listener)
            ))
        })?;
    // The bytes were decoded and validated when they arrived.
    held.value.decode().map_err(|e| {
        unusable(format!(
            "listener {}: route configuration: {}",
            shown(listener),
            cleaned(&e.to_string())
        ))
    })
}

#[cfg(test)]
mod tests;
