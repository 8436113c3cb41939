//! Cluster → endpoints, or → child clusters.
//!
//! Clusters arrive validated ([`ClusterView`]), so what is read here is
//! already known to be well formed:
//!
//! - EDS: one edge to the ClusterLoadAssignment named by
//!   `eds_cluster_config.service_name`, or by the cluster's own name when that
//!   is empty (validation requires it for an `xdstp://` cluster, gRFC A47).
//! - Aggregate (gRFC A37): one edge per child cluster, in priority order; a
//!   child listed twice is one edge.
//! - STATIC and LOGICAL_DNS: a leaf, with its inline `load_assignment`.

use std::sync::Arc;
use xdsfed_core::hash::HashSet;

use envoy_types::pb::envoy::config::core::v3::ConfigSource;
use xdsfed_core::types::{ClusterDiscovery, ClusterView, LoadAssignment};

use super::{Edge, Key, ParseCx, canonical_name, cluster_edge};
use crate::error::GraphError;
use crate::resource::ResourceKind;

/// What kind of cluster it is, as far as the graph cares.
#[derive(Debug, Clone)]
pub(crate) enum ClusterShape {
    /// Endpoints come from EDS under this name.
    Eds { service_name: Arc<str> },
    /// A leaf whose endpoints (if any) are inside the cluster.
    Inline(Option<Arc<LoadAssignment>>),
    /// An aggregate cluster's children, in priority order, each once.
    Aggregate { children: Arc<[Arc<str>]> },
    /// The cluster cannot be used; the error says why. Boxed: rare, and
    /// every cluster node would otherwise hold its room.
    Invalid(Box<GraphError>),
}

impl ClusterShape {
    /// The children when this is an aggregate cluster. Aggregate ancestors
    /// depend on exactly this, so a change in it is what dirties them.
    pub(crate) fn aggregate_children(&self) -> Option<&Arc<[Arc<str>]>> {
        match self {
            Self::Aggregate { children } => Some(children),
            _ => None,
        }
    }
}

/// Reads the shape and edges of cluster `name`.
pub(crate) fn parse_cluster(
    cx: ParseCx<'_>,
    name: &Arc<str>,
    cluster: &ClusterView,
) -> (ClusterShape, Vec<Edge>) {
    match cluster.discovery() {
        ClusterDiscovery::Aggregate { children } => aggregate(cx, name, children),
        ClusterDiscovery::Eds { service_name } => {
            eds(cx, name, service_name, cluster.eds_config().as_deref())
        }
        ClusterDiscovery::Static { load_assignment }
        | ClusterDiscovery::LogicalDns { load_assignment } => inline(load_assignment),
    }
}

fn eds(
    cx: ParseCx<'_>,
    name: &Arc<str>,
    raw: &str,
    source: Option<&ConfigSource>,
) -> (ClusterShape, Vec<Edge>) {
    // Validation NACKs an xdstp cluster without a service name (gRFC A47).
    let raw = if raw.is_empty() { name.as_ref() } else { raw };
    let kind = ResourceKind::ClusterLoadAssignment;
    let service_name = match canonical_name(kind, raw) {
        Ok(n) => n,
        Err(e) => return invalid(e),
    };
    match cx.resolve(kind, &service_name, source, name) {
        Ok(via) => {
            let edge = Edge {
                target: Key::new(kind, Arc::clone(&service_name)),
                via: Ok(via),
            };
            (ClusterShape::Eds { service_name }, vec![edge])
        }
        // The EDS edge's error belongs to this cluster; no endpoints node.
        Err(e) => invalid(e),
    }
}

fn aggregate(cx: ParseCx<'_>, name: &Arc<str>, listed: &[Box<str>]) -> (ClusterShape, Vec<Edge>) {
    let mut seen = HashSet::default();
    let mut children = Vec::with_capacity(listed.len());
    let mut edges = Vec::with_capacity(listed.len());
    for raw in listed {
        let edge = cluster_edge(cx, raw, name);
        if seen.insert(Arc::clone(&edge.target.name)) {
            children.push(Arc::clone(&edge.target.name));
            edges.push(edge);
        }
    }
    let shape = ClusterShape::Aggregate {
        children: children.into(),
    };
    (shape, edges)
}

/// A leaf, with its inline endpoints held as EDS ones are (validated and
/// viewed when the cluster was).
fn inline(held: Option<&Arc<LoadAssignment>>) -> (ClusterShape, Vec<Edge>) {
    (ClusterShape::Inline(held.cloned()), Vec::new())
}

fn invalid(error: GraphError) -> (ClusterShape, Vec<Edge>) {
    (ClusterShape::Invalid(Box::new(error)), Vec::new())
}
