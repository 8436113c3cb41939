//! Pictures of a snapshot: an indented tree for terminals (80 columns for
//! the usual names), Graphviz dot and Mermaid with one box per authority,
//! and JSON.
//!
//! All four are drawn from one [`Model`]: the snapshot's resources as nodes
//! (kind, name, authority, version, error) and its references as edges
//! (listener → route configuration → cluster → endpoints, aggregate →
//! leaf), so they always agree.
//!
//! # Memory
//! `watch --listener` draws every snapshot of a graph that may reach
//! 100 000 clusters of 10 endpoints each, so drawing must cost memory in
//! proportion to the snapshot's shape, not a second copy of its contents:
//!
//! - The model borrows from the snapshot: names, authorities and versions
//!   are the snapshot's strings, errors its error values, and a node with
//!   endpoints points at its assignment. Errors and endpoint lines are
//!   formatted only as they are drawn. A node or an edge costs a fixed few
//!   dozen bytes however long its names and however many its endpoints.
//! - The output streams: [`Model::tree`], [`Model::dot`] and
//!   [`Model::mermaid`] write to an `io::Write` line by line, and
//!   [`Model::json`] is serialized by serde as it is written, so the text
//!   (tens of megabytes for such a graph) never exists as one `String` or
//!   `serde_json::Value`.
//!
//! The model as owned copies, with the text built before it was printed,
//! cost about 2 KB per cluster at 10 000 clusters.

mod diagrams;
mod json;
mod tree;

use std::collections::{HashMap, HashSet};
use std::fmt;

use xdsfed::core::error::XdsError;
use xdsfed::core::types::{EndpointView, LoadAssignment, LocalityView};
use xdsfed::core::version::Version;
use xdsfed::graph::{
    ClusterEndpoints, ClusterSnapshot, CollectionSnapshot, GraphError, ListenerSnapshot,
    ResourceKind, RouteBinding, RouteConfigSnapshot, Snapshot, Versioned,
};

use super::target::route_clusters;

pub(crate) use json::Json;

/// One resource of the snapshot: a reference to what the snapshot holds
/// of it, read only as it is drawn (24 bytes a node, where copying out its
/// kind, name, authority, version and errors took 104).
#[derive(Debug, Clone, Copy)]
enum Node<'a> {
    Listener(&'a ListenerSnapshot),
    RouteConfig(&'a RouteConfigSnapshot),
    Cluster(&'a ClusterSnapshot),
    /// An EDS cluster's assignment, read from the cluster.
    Endpoints(&'a ClusterSnapshot),
    Collection(&'a CollectionSnapshot),
    /// A cluster the snapshot does not hold, by the name a reference gave.
    Missing(&'a str),
}

/// What a node's value says of where it came from.
struct Stamp<'a> {
    authority: Option<&'a str>,
    version: &'a Version,
    ambient_error: Option<&'a XdsError>,
}

impl<'a> Stamp<'a> {
    fn of<T>(value: Option<&'a Versioned<T>>) -> Option<Self> {
        value.map(|v| Stamp {
            authority: v.provenance.authority.as_deref(),
            version: &v.provenance.version,
            ambient_error: v.ambient_error.as_deref(),
        })
    }
}

impl<'a> Node<'a> {
    fn kind(&self) -> &'static str {
        match self {
            Self::Listener(_) => "Listener",
            Self::RouteConfig(_) => "RouteConfiguration",
            Self::Cluster(_) | Self::Missing(_) => "Cluster",
            Self::Endpoints(_) => "Endpoints",
            Self::Collection(_) => "Collection",
        }
    }

    fn name(&self) -> &'a str {
        match *self {
            Self::Listener(l) => &l.name,
            Self::RouteConfig(rc) => &rc.name,
            Self::Cluster(c) => &c.name,
            Self::Endpoints(c) => match &c.endpoints {
                ClusterEndpoints::Eds { service_name, .. } => service_name,
                _ => &c.name,
            },
            Self::Collection(c) => &c.name,
            Self::Missing(name) => name,
        }
    }

    fn stamp(&self) -> Option<Stamp<'a>> {
        match *self {
            Self::Listener(l) => Stamp::of(l.listener.as_ref()),
            Self::RouteConfig(rc) => Stamp::of(rc.route_config.as_ref()),
            Self::Cluster(c) => Stamp::of(c.cluster.as_ref()),
            Self::Endpoints(c) => match &c.endpoints {
                ClusterEndpoints::Eds { assignment, .. } => Stamp::of(assignment.as_ref()),
                _ => None,
            },
            Self::Collection(_) | Self::Missing(_) => None,
        }
    }

    /// The authority its provenance names, else the one in its name.
    fn authority(&self) -> Option<&'a str> {
        self.stamp()
            .and_then(|s| s.authority)
            .or_else(|| authority_in(self.name()))
    }

    fn version(&self) -> Option<&'a Version> {
        self.stamp().map(|s| s.version)
    }

    fn ambient_error(&self) -> Option<&'a XdsError> {
        self.stamp().and_then(|s| s.ambient_error)
    }

    fn error(&self) -> Option<Failure<'a>> {
        let error = match *self {
            Self::Listener(l) => l.error.as_ref(),
            Self::RouteConfig(rc) => rc.error.as_ref(),
            Self::Cluster(c) => c.error.as_ref(),
            Self::Collection(c) => c.error.as_ref(),
            Self::Endpoints(_) => None,
            Self::Missing(_) => return Some(Failure::Missing),
        };
        error.map(Failure::Graph)
    }

    /// The assignment whose endpoints hang under this node: an EDS node's,
    /// or a cluster's own inline one.
    fn endpoints(&self) -> Option<&'a LoadAssignment> {
        match *self {
            Self::Cluster(c) => match &c.endpoints {
                ClusterEndpoints::Inline(Some(cla)) => Some(&**cla),
                _ => None,
            },
            Self::Endpoints(c) => match &c.endpoints {
                ClusterEndpoints::Eds { assignment, .. } => assignment.as_ref().map(|a| &*a.value),
                _ => None,
            },
            _ => None,
        }
    }

    fn endpoint_count(&self) -> usize {
        self.endpoints().map_or(0, LoadAssignment::endpoint_count)
    }

    /// One line per endpoint, `region/zone  host:port`, in the
    /// assignment's order.
    fn endpoint_lines(&self) -> impl Iterator<Item = EndpointLine<'a>> + use<'a> {
        self.endpoints()
            .into_iter()
            .flat_map(LoadAssignment::localities)
            .flat_map(|locality| {
                locality
                    .endpoints()
                    .map(move |endpoint| EndpointLine { locality, endpoint })
            })
    }
}

/// Why a node cannot be used. The snapshot's own error, so that nothing is
/// formatted unless it is drawn.
#[derive(Debug, Clone, Copy)]
enum Failure<'a> {
    Graph(&'a GraphError),
    /// A reference to a cluster the snapshot does not hold.
    Missing,
}

impl fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Graph(error) => fmt::Display::fmt(error, f),
            Self::Missing => f.write_str("not in the snapshot"),
        }
    }
}

/// One endpoint of an assignment as a line: its locality's non-empty
/// parts joined by `/`, two spaces, `host:port` (no locality: only
/// `host:port`).
#[derive(Debug, Clone, Copy)]
struct EndpointLine<'a> {
    locality: LocalityView<'a>,
    endpoint: EndpointView<'a>,
}

impl fmt::Display for EndpointLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            self.locality.region(),
            self.locality.zone(),
            self.locality.sub_zone(),
        ];
        let mut placed = false;
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            if placed {
                f.write_str("/")?;
            }
            f.write_str(part)?;
            placed = true;
        }
        if placed {
            f.write_str("  ")?;
        }
        write!(f, "{}:{}", self.endpoint.address, self.endpoint.port)
    }
}

/// A reference from one resource to another.
#[derive(Debug, Clone, Copy)]
struct Edge {
    from: usize,
    to: usize,
    /// The route's weight for that cluster, when it splits traffic.
    weight: Option<u32>,
}

/// A snapshot as nodes and edges that borrow from it; see the
/// [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Model<'a> {
    generation: u64,
    ok: bool,
    nodes: Vec<Node<'a>>,
    /// In the order the references were followed: dot, Mermaid and JSON
    /// list them so.
    edges: Vec<Edge>,
    /// Indices into `edges`, grouped by source node and in `edges`' order
    /// within a group: the tree finds a node's children by binary search
    /// instead of scanning every edge, at one index per edge.
    by_source: Vec<usize>,
    roots: Vec<usize>,
}

impl<'a> Model<'a> {
    /// The model of `snapshot`.
    pub(crate) fn of(snapshot: &'a Snapshot) -> Self {
        // Sized up front: at 100 000 clusters, growing by doubling would
        // hold the old and the new table at once, on top of the snapshot.
        let nodes = snapshot.listeners().count()
            + snapshot.route_configs().count()
            + snapshot.collections().count()
            + 2 * snapshot.cluster_count();
        let mut builder = Builder {
            snapshot,
            model: Model {
                generation: snapshot.generation(),
                ok: snapshot.is_ok(),
                nodes: Vec::with_capacity(nodes),
                edges: Vec::with_capacity(nodes),
                ..Model::default()
            },
            index: HashMap::with_capacity(nodes),
        };
        builder.listeners();
        for collection in snapshot.collections() {
            builder.collection(collection);
        }
        builder.finish()
    }

    /// The edges out of node `id`, in the order they were followed.
    fn children(&self, id: usize) -> impl ExactSizeIterator<Item = &Edge> {
        let start = self.by_source.partition_point(|&e| self.edges[e].from < id);
        let end = self
            .by_source
            .partition_point(|&e| self.edges[e].from <= id);
        self.by_source[start..end].iter().map(|&e| &self.edges[e])
    }
}

/// Builds a [`Model`]: walks the snapshot from its roots and gives each
/// resource one node, however many references reach it.
struct Builder<'a> {
    snapshot: &'a Snapshot,
    model: Model<'a>,
    /// Each resource's node by kind and name, both borrowed. Only needed
    /// while building: dropped before anything is drawn.
    index: HashMap<(&'static str, &'a str), usize>,
}

impl<'a> Builder<'a> {
    /// Each listener and the route configurations it uses. A listener
    /// that is a member of a collection hangs under the collection, not at
    /// the top.
    fn listeners(&mut self) {
        let snapshot = self.snapshot;
        let members: HashSet<&str> = snapshot
            .collections()
            .flat_map(|c| c.members().map(|m| &**m))
            .collect();
        for listener in snapshot.listeners() {
            let id = self.node(Node::Listener(listener));
            if !members.contains(&*listener.name) {
                self.model.roots.push(id);
            }
            for binding in &listener.routes {
                let rc = match binding {
                    RouteBinding::Rds(name) => snapshot.route_config(name).map(|rc| &**rc),
                    RouteBinding::Inline(rc) => Some(&**rc),
                };
                if let Some(rc) = rc {
                    let to = self.route_config(rc);
                    self.edge(id, to, None);
                }
            }
        }
    }

    /// A collection root (xDS TP1) and an edge to each member.
    fn collection(&mut self, collection: &'a CollectionSnapshot) {
        self.model.ok &= collection.error.is_none();
        let id = self.node(Node::Collection(collection));
        self.model.roots.push(id);
        for member in collection.members() {
            let to = match collection.kind {
                ResourceKind::Cluster => Some(self.cluster(member, 0)),
                _ => self.index.get(&("Listener", &**member)).copied(),
            };
            if let Some(to) = to {
                self.edge(id, to, None);
            }
        }
    }

    fn route_config(&mut self, rc: &'a RouteConfigSnapshot) -> usize {
        let id = self.node(Node::RouteConfig(rc));
        let weights: HashMap<&str, Option<u32>> = rc
            .route_config
            .as_ref()
            .map(|v| route_clusters(&v.value).collect())
            .unwrap_or_default();
        for cluster in rc.clusters.iter() {
            let to = self.cluster(cluster, 0);
            let weight = weights.get(&**cluster).copied().flatten();
            self.edge(id, to, weight);
        }
        id
    }

    fn cluster(&mut self, name: &'a str, depth: usize) -> usize {
        if let Some(&id) = self.index.get(&("Cluster", name)) {
            return id;
        }
        let Some(cluster) = self.snapshot.cluster(name) else {
            return self.node(Node::Missing(name));
        };
        let id = self.node(Node::Cluster(cluster));
        match &cluster.endpoints {
            ClusterEndpoints::Eds { .. } => {
                let eds = self.node(Node::Endpoints(cluster));
                self.edge(id, eds, None);
            }
            ClusterEndpoints::Aggregate { leaves } => {
                // Leaves are never aggregates themselves; the depth bound
                // only guards against a malformed snapshot.
                if depth < 16 {
                    for leaf in leaves.iter() {
                        let to = self.cluster(leaf, depth + 1);
                        self.edge(id, to, None);
                    }
                }
            }
            ClusterEndpoints::Inline(_) | ClusterEndpoints::Unavailable => {}
        }
        id
    }

    /// The node of a resource: the one it already has, or a new one.
    fn node(&mut self, node: Node<'a>) -> usize {
        let key = (node.kind(), node.name());
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.model.nodes.len();
        self.model.nodes.push(node);
        self.index.insert(key, id);
        id
    }

    fn edge(&mut self, from: usize, to: usize, weight: Option<u32>) {
        self.model.edges.push(Edge { from, to, weight });
    }

    /// The model, its edges grouped by source for [`Model::children`].
    fn finish(self) -> Model<'a> {
        let mut model = self.model;
        let mut by_source: Vec<usize> = (0..model.edges.len()).collect();
        // Stable: a node's children keep the order they were followed in.
        by_source.sort_by_key(|&e| model.edges[e].from);
        model.by_source = by_source;
        model
    }
}

/// The authority of an `xdstp://` name.
fn authority_in(name: &str) -> Option<&str> {
    name.strip_prefix("xdstp://")
        .and_then(|rest| rest.split('/').next())
        .filter(|a| !a.is_empty())
}

#[cfg(test)]
mod tests;
