//! The edges of the resource graph, read out of validated resources.
//!
//! ```text
//! Listener ──(HttpConnectionManager: rds.route_config_name | inline route_config)──► RouteConfiguration
//! RouteConfiguration ──(route.cluster | weighted_clusters | request_mirror_policies)──► Cluster
//! Cluster(EDS) ──(eds_cluster_config.service_name, default: the cluster's name)──► ClusterLoadAssignment
//! Cluster(aggregate) ──(ClusterConfig.clusters, in priority order)──► Cluster
//! Cluster(STATIC, STRICT_DNS, LOGICAL_DNS, …) : a leaf with its inline load_assignment
//! ClusterLoadAssignment ──(locality leds_cluster_locality_config.leds_collection_name)──► LbEndpoint glob collection
//! ```
//!
//! Each edge also says how its target is fetched ([`Via`]). xDS TP1 lets a
//! `ConfigSource` sit beside a name (`rds.config_source`,
//! `eds_cluster_config.eds_config`): when its `authorities` list the name's
//! authority, that source is used; otherwise the authority must be one the
//! bootstrap defines. A name whose authority is in neither is an error on
//! that edge only: the parent (or, for route and aggregate edges, which
//! carry no `ConfigSource`, the target cluster) is marked failed, and the
//! rest of the graph is unaffected.

mod cluster;
mod endpoints;
mod listener;
pub(crate) mod named_server;
mod route;
mod trust;

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::ConfigSource;
use xdsfed_core::bootstrap::ServerConfig;

use crate::error::GraphError;
use crate::options::{ConfigSourceTrust, KnownAuthorities};
use crate::resource::ResourceKind;

pub(crate) use cluster::{ClusterShape, parse_cluster};
pub(crate) use endpoints::{leds_edges, leds_key};
pub(crate) use listener::{ListenerShape, parse_listener};
pub(crate) use route::{RouteScan, scan_route_config};

/// How a resource the graph reached is to be fetched.
#[derive(Debug, Clone, PartialEq)]
pub enum Via {
    /// Through the bootstrap: the servers of the name's authority, or the
    /// default servers for an old-style name.
    Bootstrap,
    /// Through the `ConfigSource` found beside the name, whose `authorities`
    /// list the name's authority.
    ConfigSource(Arc<ConfigSource>),
    /// Through the server the `ConfigSource` beside the name names, which
    /// came from a server without `trusted_xds_server`: its target is in
    /// the bootstrap's `allowed_grpc_services`, and the server carries the
    /// credentials listed there, not the source's (gRFC A102).
    AllowedGrpcService(Arc<ServerConfig>),
}

/// A resource identity inside the engine: its kind and its canonical name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) kind: ResourceKind,
    pub(crate) name: Arc<str>,
}

impl Key {
    pub(crate) fn new(kind: ResourceKind, name: Arc<str>) -> Self {
        Self { kind, name }
    }
}

/// A node's identity as a table of [`Key`]s can be searched by without an
/// `Arc` of the name: `&(kind, name) as &dyn KeyView`. An update names its
/// resource as text, and the node it is for mostly exists already; its key
/// is then shared rather than allocated again.
pub(crate) trait KeyView {
    fn kind(&self) -> ResourceKind;
    fn name(&self) -> &str;
}

impl KeyView for Key {
    fn kind(&self) -> ResourceKind {
        self.kind
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl KeyView for (ResourceKind, &str) {
    fn kind(&self) -> ResourceKind {
        self.0
    }
    fn name(&self) -> &str {
        self.1
    }
}

/// Hashes as the derived `Hash` of [`Key`] does (its kind, then its name
/// as a `str`), as `Borrow` requires.
impl std::hash::Hash for dyn KeyView + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind().hash(state);
        self.name().hash(state);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.name() == other.name()
    }
}

impl Eq for dyn KeyView + '_ {}

impl<'a> std::borrow::Borrow<dyn KeyView + 'a> for Key {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// One outgoing edge: the target and how it resolves. A target that cannot
/// be fetched still gets a node (in error), so that it shows up where it is
/// used; edges with a `ConfigSource` never do, their error goes on the parent.
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    pub(crate) target: Key,
    /// The error boxed: rare, and a node's every edge would hold its room.
    pub(crate) via: Result<Via, Box<GraphError>>,
}

/// What parsing needs from the engine's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParseCx<'a> {
    pub(crate) known: &'a KnownAuthorities,
    /// Which `ConfigSource`s may add servers.
    pub(crate) trust: &'a ConfigSourceTrust,
    /// The server the resource being read came from (empty for the roots).
    pub(crate) server: &'a str,
}

impl ParseCx<'_> {
    /// Resolves the edge `referrer → name` (TP1 § authority resolution).
    pub(crate) fn resolve(
        &self,
        kind: ResourceKind,
        name: &Arc<str>,
        source: Option<&ConfigSource>,
        referrer: &Arc<str>,
    ) -> Result<Via, GraphError> {
        let Some(authority) = xdsfed_core::name::authority_of(name) else {
            return Ok(Via::Bootstrap);
        };
        if let Some(source) = source
            && source.authorities.iter().any(|a| a.name == authority)
        {
            let named = trust::Named {
                kind,
                name,
                authority,
                referrer,
                referrer_server: self.server,
            };
            if let Some(decided) = trust::via_source(source, &named, self.trust) {
                return decided;
            }
        }
        if self.known.contains(authority) {
            return Ok(Via::Bootstrap);
        }
        Err(GraphError::UnknownAuthority {
            kind,
            name: Arc::clone(name),
            authority: Arc::from(authority),
            referrer: Arc::clone(referrer),
        })
    }
}

/// The canonical form of a name found inside a resource, so that it keys the
/// same node however the referring resource spelled it.
pub(crate) fn canonical_name(kind: ResourceKind, raw: &str) -> Result<Arc<str>, GraphError> {
    match xdsfed_core::name::canonical_key_of(raw) {
        Ok(key) => Ok(Arc::from(key)),
        Err(e) => Err(GraphError::InvalidName {
            kind,
            name: Arc::from(raw),
            why: Arc::from(e.to_string()),
        }),
    }
}

/// [`canonical_name`] of a name held in an `Arc`: that `Arc` itself when
/// the name is canonical already, as names mostly are.
pub(crate) fn canonical_shared(kind: ResourceKind, raw: &Arc<str>) -> Result<Arc<str>, GraphError> {
    match xdsfed_core::name::canonical_key_of(raw) {
        Ok(std::borrow::Cow::Borrowed(_)) => Ok(Arc::clone(raw)),
        Ok(std::borrow::Cow::Owned(key)) => Ok(Arc::from(key)),
        Err(_) => canonical_name(kind, raw),
    }
}

/// An edge to a cluster named in a route or an aggregate cluster. Those
/// places carry no `ConfigSource`, so only the bootstrap can resolve them.
pub(crate) fn cluster_edge(cx: ParseCx<'_>, raw: &str, referrer: &Arc<str>) -> Edge {
    match canonical_name(ResourceKind::Cluster, raw) {
        Ok(name) => Edge {
            via: cx
                .resolve(ResourceKind::Cluster, &name, None, referrer)
                .map_err(Box::new),
            target: Key::new(ResourceKind::Cluster, name),
        },
        Err(e) => Edge {
            target: Key::new(ResourceKind::Cluster, Arc::from(raw)),
            via: Err(Box::new(e)),
        },
    }
}
