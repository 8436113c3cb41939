//! The immutable, complete view the engine publishes.
//!
//! A [`Snapshot`] holds every listener root, every route configuration they
//! use and every cluster reachable from them, each cluster with its endpoints
//! or its error, and each resource with its [`Provenance`]. It is never
//! changed after publication; the next update produces a new one.
//!
//! # Sharing
//! The three maps are persistent ordered maps (`imbl::OrdMap`, a B-tree whose
//! nodes are reference counted): cloning one is O(1), and inserting into the
//! clone copies only the O(log n) nodes on the path to the changed key. Every
//! entry is an `Arc`, so a snapshot that differs from the previous one by a
//! single cluster's endpoints shares every other entry, pointer for pointer,
//! with it.
//!
//! [`Provenance`]: crate::Provenance

use std::sync::Arc;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use imbl::{OrdMap, OrdSet};
use xdsfed_core::types::ClusterView;
use xdsfed_core::types::LoadAssignment;
use xdsfed_core::types::RouteConfigView;

use crate::edges::RouteScan;
use crate::error::GraphError;
use crate::resource::{ResourceKind, Versioned};

/// A complete, consistent view of the graph at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub(crate) generation: u64,
    pub(crate) listeners: OrdMap<Arc<str>, Arc<ListenerSnapshot>>,
    pub(crate) route_configs: OrdMap<Arc<str>, Arc<RouteConfigSnapshot>>,
    pub(crate) clusters: OrdMap<Arc<str>, Arc<ClusterSnapshot>>,
    pub(crate) collections: OrdMap<Arc<str>, Arc<CollectionSnapshot>>,
}

impl Snapshot {
    /// Counts the snapshots an engine has published, starting at 1.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A root listener by name.
    pub fn listener(&self, name: &str) -> Option<&Arc<ListenerSnapshot>> {
        self.listeners.get(name)
    }

    /// The root listeners, ordered by name.
    pub fn listeners(&self) -> impl Iterator<Item = &Arc<ListenerSnapshot>> {
        self.listeners.values()
    }

    /// A route configuration fetched through RDS, by name. Inline route
    /// configurations are found on their listener.
    pub fn route_config(&self, name: &str) -> Option<&Arc<RouteConfigSnapshot>> {
        self.route_configs.get(name)
    }

    /// The route configurations fetched through RDS, ordered by name.
    pub fn route_configs(&self) -> impl Iterator<Item = &Arc<RouteConfigSnapshot>> {
        self.route_configs.values()
    }

    /// A reachable cluster by name: one a route, an aggregate cluster or the
    /// roots name.
    pub fn cluster(&self, name: &str) -> Option<&Arc<ClusterSnapshot>> {
        self.clusters.get(name)
    }

    /// Every reachable cluster, ordered by name, including the children of
    /// aggregate clusters.
    pub fn clusters(&self) -> impl Iterator<Item = &Arc<ClusterSnapshot>> {
        self.clusters.values()
    }

    /// A collection root by name, as given to
    /// [`Roots::listener_collection`](crate::Roots::listener_collection) or
    /// [`Roots::cluster_collection`](crate::Roots::cluster_collection).
    pub fn collection(&self, name: &str) -> Option<&Arc<CollectionSnapshot>> {
        self.collections.get(name)
    }

    /// The collection roots, ordered by name.
    pub fn collections(&self) -> impl Iterator<Item = &Arc<CollectionSnapshot>> {
        self.collections.values()
    }

    /// How many clusters the snapshot holds.
    pub fn cluster_count(&self) -> usize {
        self.clusters.len()
    }

    /// The errors that make a listener unusable: listener and route
    /// configuration problems (A74). Cluster and endpoint errors are not
    /// here; they stay on their [`ClusterSnapshot`].
    pub fn errors(&self) -> impl Iterator<Item = &GraphError> {
        self.listeners.values().filter_map(|l| l.error.as_ref())
    }

    /// Whether no listener has an error.
    pub fn is_ok(&self) -> bool {
        self.errors().next().is_none()
    }
}

/// A collection root (xDS TP1) and its members at the snapshot's moment.
/// The members themselves are in the snapshot as listeners or clusters.
#[derive(Debug)]
pub struct CollectionSnapshot {
    /// The collection's name: a glob (`…/pool/*`) or a list collection
    /// (`…Collection/pool`).
    pub name: Arc<str>,
    /// What its members are: [`ResourceKind::Listener`] or
    /// [`ResourceKind::Cluster`].
    pub kind: ResourceKind,
    /// Why the collection itself could not be fetched, if it could not; the
    /// members it had keep serving.
    pub error: Option<GraphError>,
    /// Shared with the engine's copy: a snapshot costs O(1) here however
    /// large the collection.
    pub(crate) members: OrdSet<Arc<str>>,
}

impl CollectionSnapshot {
    /// The members' names, sorted. Look each up with
    /// [`Snapshot::listener`] or [`Snapshot::cluster`].
    pub fn members(&self) -> impl Iterator<Item = &Arc<str>> {
        self.members.iter()
    }

    /// How many members the collection has.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// Whether `name` is a member.
    pub fn contains(&self, name: &str) -> bool {
        self.members.contains(name)
    }
}

/// One root listener and where its routes come from.
#[derive(Debug)]
pub struct ListenerSnapshot {
    /// The listener's name.
    pub name: Arc<str>,
    /// The listener resource, if one is usable.
    pub listener: Option<Versioned<Listener>>,
    /// Its route configurations, one per HttpConnectionManager (usually one).
    pub routes: Vec<RouteBinding>,
    /// Why the listener cannot be used: its own problem, or the first problem
    /// of a route configuration it needs.
    pub error: Option<GraphError>,
}

/// Where a listener's routes are.
#[derive(Debug, Clone)]
pub enum RouteBinding {
    /// Fetched through RDS; look it up with [`Snapshot::route_config`].
    Rds(Arc<str>),
    /// Inline in the listener's HttpConnectionManager.
    Inline(Arc<RouteConfigSnapshot>),
}

/// A route configuration and what it points at.
#[derive(Debug)]
pub struct RouteConfigSnapshot {
    /// Its name (empty for an unnamed inline configuration).
    pub name: Arc<str>,
    /// The resource, if one is usable.
    pub route_config: Option<Versioned<RouteConfigView>>,
    /// The clusters its routes can send to, each once, in first-use order.
    pub clusters: Arc<[Arc<str>]>,
    /// Header names whose value selects a cluster per request
    /// (`cluster_header`); those clusters are not followed ahead of time.
    pub dynamic_cluster_headers: Arc<[Arc<str>]>,
    /// Why the configuration cannot be used.
    pub error: Option<GraphError>,
}

impl RouteConfigSnapshot {
    pub(crate) fn present(
        name: Arc<str>,
        route_config: Versioned<RouteConfigView>,
        scan: &RouteScan,
    ) -> Self {
        Self {
            name,
            route_config: Some(route_config),
            clusters: scan.clusters.as_slice().into(),
            dynamic_cluster_headers: scan.dynamic_cluster_headers.as_slice().into(),
            error: None,
        }
    }

    pub(crate) fn failed(name: Arc<str>, error: GraphError) -> Self {
        Self {
            name,
            route_config: None,
            clusters: Arc::new([]),
            dynamic_cluster_headers: Arc::new([]),
            error: Some(error),
        }
    }

    /// How many virtual hosts it has (0 when unusable). Choosing one by
    /// domain is the data plane's job, on the full message
    /// (`route_config.value.decode()`).
    pub fn virtual_host_count(&self) -> usize {
        self.route_config
            .as_ref()
            .map_or(0, |rc| rc.value.virtual_host_count())
    }
}

/// One cluster: the resource, its endpoints, or why it cannot be used.
#[derive(Debug)]
pub struct ClusterSnapshot {
    /// The cluster's name.
    pub name: Arc<str>,
    /// The cluster resource, if one is usable.
    pub cluster: Option<Versioned<ClusterView>>,
    /// Its endpoints, by cluster type.
    pub endpoints: ClusterEndpoints,
    /// Why traffic cannot go to this cluster. Affects this cluster only.
    pub error: Option<GraphError>,
}

impl ClusterSnapshot {
    /// Whether the cluster can take traffic.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Where a cluster's endpoints are.
#[derive(Debug, Clone)]
pub enum ClusterEndpoints {
    /// None: the cluster itself is unusable.
    Unavailable,
    /// From EDS, under `service_name`.
    Eds {
        /// The ClusterLoadAssignment's name.
        service_name: Arc<str>,
        /// The assignment, if one is usable.
        assignment: Option<Versioned<LoadAssignment>>,
    },
    /// Inside the cluster resource (STATIC, STRICT_DNS, LOGICAL_DNS, …);
    /// `None` when the cluster has no `load_assignment`.
    Inline(Option<Arc<LoadAssignment>>),
    /// An aggregate cluster: its leaf clusters, highest priority first,
    /// duplicates merged (gRFC A37). Each leaf has its own entry in the
    /// snapshot.
    Aggregate {
        /// The leaf cluster names.
        leaves: Arc<[Arc<str>]>,
    },
}
