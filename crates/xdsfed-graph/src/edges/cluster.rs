//! Cluster → endpoints, or → child clusters.
//!
//! - EDS: one edge to the ClusterLoadAssignment named by
//!   `eds_cluster_config.service_name`, or by the cluster's own name when that
//!   is empty. gRFC A47: with an `xdstp://` cluster name the service name is
//!   required, since the cluster's name is not a valid endpoints name.
//! - Aggregate (`cluster_type` named `envoy.clusters.aggregate`, typed config
//!   `ClusterConfig`): one edge per child cluster, in priority order; a child
//!   listed twice is one edge.
//! - Anything else (STATIC, STRICT_DNS, LOGICAL_DNS, ORIGINAL_DST, other
//!   custom types): a leaf, with its inline `load_assignment` if it has one.

use std::sync::Arc;
use xdsfed_core::hash::HashSet;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;
use prost::Message;
use xdsfed_core::types::LoadAssignment;

use super::{Edge, Key, ParseCx, canonical_name, cluster_edge};
use crate::error::GraphError;
use crate::resource::ResourceKind;

/// The custom cluster type name of aggregate clusters.
pub(crate) const AGGREGATE_CLUSTER_TYPE: &str = "envoy.clusters.aggregate";

/// What kind of cluster it is, as far as the graph cares.
#[derive(Debug, Clone)]
pub(crate) enum ClusterShape {
    /// Endpoints come from EDS under this name.
    Eds { service_name: Arc<str> },
    /// A leaf whose endpoints (if any) are inside the cluster.
    Inline(Option<Arc<LoadAssignment>>),
    /// An aggregate cluster's children, in priority order, each once.
    Aggregate { children: Arc<[Arc<str>]> },
    /// The cluster cannot be used; the error says why.
    Invalid(GraphError),
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
    cluster: &Cluster,
) -> (ClusterShape, Vec<Edge>) {
    match &cluster.cluster_discovery_type {
        Some(ClusterDiscoveryType::ClusterType(custom))
            if custom.name == AGGREGATE_CLUSTER_TYPE =>
        {
            aggregate(cx, name, custom.typed_config.as_ref())
        }
        Some(ClusterDiscoveryType::Type(t)) if *t == DiscoveryType::Eds as i32 => {
            eds(cx, name, cluster)
        }
        _ => inline(name, cluster),
    }
}

fn eds(cx: ParseCx<'_>, name: &Arc<str>, cluster: &Cluster) -> (ClusterShape, Vec<Edge>) {
    let config = cluster.eds_cluster_config.as_ref();
    let raw = config.map_or("", |c| c.service_name.as_str());
    let raw = if raw.is_empty() {
        if xdsfed_core::name::authority_of(name).is_some() {
            return invalid(GraphError::XdstpEdsWithoutServiceName {
                cluster: Arc::clone(name),
            });
        }
        name.as_ref()
    } else {
        raw
    };
    let kind = ResourceKind::ClusterLoadAssignment;
    let service_name = match canonical_name(kind, raw) {
        Ok(n) => n,
        Err(e) => return invalid(e),
    };
    let source = config.and_then(|c| c.eds_config.as_ref());
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

fn aggregate(
    cx: ParseCx<'_>,
    name: &Arc<str>,
    config: Option<&envoy_types::pb::google::protobuf::Any>,
) -> (ClusterShape, Vec<Edge>) {
    let bytes = config.map_or(&[][..], |any| any.value.as_slice());
    let config = match ClusterConfig::decode(bytes) {
        Ok(c) => c,
        Err(e) => {
            return invalid(GraphError::BadAggregateConfig {
                cluster: Arc::clone(name),
                reason: Arc::from(e.to_string()),
            });
        }
    };
    let mut seen = HashSet::default();
    let mut children = Vec::with_capacity(config.clusters.len());
    let mut edges = Vec::with_capacity(config.clusters.len());
    for raw in &config.clusters {
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

/// A leaf, with its inline endpoints held as EDS ones are.
fn inline(name: &Arc<str>, cluster: &Cluster) -> (ClusterShape, Vec<Edge>) {
    let held = cluster.load_assignment.as_ref().map(LoadAssignment::new);
    match held.transpose() {
        Ok(held) => (ClusterShape::Inline(held.map(Arc::new)), Vec::new()),
        Err(e) => invalid(GraphError::BadLoadAssignment {
            cluster: Arc::clone(name),
            reason: Arc::from(e.0),
        }),
    }
}

fn invalid(error: GraphError) -> (ClusterShape, Vec<Edge>) {
    (ClusterShape::Invalid(error), Vec::new())
}
