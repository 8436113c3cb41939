//! Pictures of a snapshot: an indented tree for terminals (80 columns for
//! the usual names), Graphviz dot and Mermaid with one box per authority,
//! and JSON.
//!
//! All four are drawn from one [`Model`]: the snapshot's resources as nodes
//! (kind, name, authority, version, error) and its references as edges
//! (listener → route configuration → cluster → endpoints, aggregate →
//! leaf), so they always agree.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::json;
use xdsfed::graph::{
    ClusterEndpoints, CollectionSnapshot, ResourceKind, RouteBinding, RouteConfigSnapshot,
    Snapshot, Versioned,
};

use super::target::{endpoint_addresses, id_of, route_clusters, short_version};
use super::text::{message, shown};

/// One resource of the snapshot.
#[derive(Debug, Clone)]
struct Node {
    kind: &'static str,
    name: String,
    authority: Option<String>,
    version: Option<String>,
    error: Option<String>,
    ambient_error: Option<String>,
    /// Endpoint lines (`region/zone  host:port`) of an assignment.
    endpoints: Vec<String>,
}

/// A reference from one resource to another.
#[derive(Debug, Clone)]
struct Edge {
    from: usize,
    to: usize,
    /// The route's weight for that cluster, when it splits traffic.
    weight: Option<u32>,
}

/// A snapshot as nodes and edges; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Model {
    generation: u64,
    ok: bool,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    /// Each node's outgoing edges, as indices into `edges`: the tree walks
    /// them once per node, so finding them must not scan every edge.
    out_edges: Vec<Vec<usize>>,
    roots: Vec<usize>,
    index: HashMap<(&'static str, String), usize>,
}

impl Model {
    /// The model of `snapshot`.
    pub(crate) fn of(snapshot: &Snapshot) -> Self {
        let mut model = Model {
            generation: snapshot.generation(),
            ok: snapshot.is_ok(),
            ..Model::default()
        };
        // Members of a collection hang under their collection, not at the top.
        let members: HashSet<&str> = snapshot
            .collections()
            .flat_map(|c| c.members().map(|m| &**m))
            .collect();
        for listener in snapshot.listeners() {
            let id = model.node(
                "Listener",
                &listener.name,
                listener.listener.as_ref(),
                listener.error.as_ref().map(ToString::to_string),
            );
            if !members.contains(&*listener.name) {
                model.roots.push(id);
            }
            for binding in &listener.routes {
                let rc = match binding {
                    RouteBinding::Rds(name) => snapshot.route_config(name).cloned(),
                    RouteBinding::Inline(rc) => Some(rc.clone()),
                };
                if let Some(rc) = rc {
                    let to = model.route_config(snapshot, &rc);
                    model.edge(id, to, None);
                }
            }
        }
        for collection in snapshot.collections() {
            model.collection(snapshot, collection);
        }
        model
    }

    /// A collection root (xDS TP1) and an edge to each member.
    fn collection(&mut self, snapshot: &Snapshot, collection: &CollectionSnapshot) {
        let error = collection.error.as_ref().map(ToString::to_string);
        self.ok &= error.is_none();
        let id = self.bare("Collection", &collection.name, error);
        self.roots.push(id);
        for member in collection.members() {
            let to = match collection.kind {
                ResourceKind::Cluster => Some(self.cluster(snapshot, member, 0)),
                _ => self.index.get(&("Listener", member.to_string())).copied(),
            };
            if let Some(to) = to {
                self.edge(id, to, None);
            }
        }
    }

    fn route_config(&mut self, snapshot: &Snapshot, rc: &RouteConfigSnapshot) -> usize {
        let id = self.node(
            "RouteConfiguration",
            &rc.name,
            rc.route_config.as_ref(),
            rc.error.as_ref().map(ToString::to_string),
        );
        let weights: HashMap<String, Option<u32>> = rc
            .route_config
            .as_ref()
            .map(|v| {
                route_clusters(&v.value)
                    .map(|(name, weight)| (name.to_owned(), weight))
                    .collect()
            })
            .unwrap_or_default();
        for cluster in rc.clusters.iter() {
            let to = self.cluster(snapshot, cluster, 0);
            let weight = weights.get(cluster.as_ref()).copied().flatten();
            self.edge(id, to, weight);
        }
        id
    }

    fn cluster(&mut self, snapshot: &Snapshot, name: &str, depth: usize) -> usize {
        if let Some(&id) = self.index.get(&("Cluster", name.to_owned())) {
            return id;
        }
        let Some(cluster) = snapshot.cluster(name) else {
            return self.bare("Cluster", name, Some("not in the snapshot".to_owned()));
        };
        let id = self.node(
            "Cluster",
            name,
            cluster.cluster.as_ref(),
            cluster.error.as_ref().map(ToString::to_string),
        );
        match &cluster.endpoints {
            ClusterEndpoints::Eds {
                service_name,
                assignment,
            } => {
                let eds = self.node("Endpoints", service_name, assignment.as_ref(), None);
                if let Some(a) = assignment {
                    self.nodes[eds].endpoints = endpoint_lines(&a.value);
                }
                self.edge(id, eds, None);
            }
            ClusterEndpoints::Inline(Some(cla)) => {
                self.nodes[id].endpoints = endpoint_lines(cla);
            }
            ClusterEndpoints::Aggregate { leaves } => {
                // Leaves are never aggregates themselves; the depth bound
                // only guards against a malformed snapshot.
                if depth < 16 {
                    for leaf in leaves.iter() {
                        let to = self.cluster(snapshot, leaf, depth + 1);
                        self.edge(id, to, None);
                    }
                }
            }
            ClusterEndpoints::Inline(None) | ClusterEndpoints::Unavailable => {}
        }
        id
    }

    fn node<T>(
        &mut self,
        kind: &'static str,
        name: &str,
        value: Option<&Versioned<T>>,
        error: Option<String>,
    ) -> usize {
        if let Some(&id) = self.index.get(&(kind, name.to_owned())) {
            return id;
        }
        let id = self.bare(kind, name, error);
        if let Some(v) = value {
            let node = &mut self.nodes[id];
            if let Some(authority) = &v.provenance.authority {
                node.authority = Some(authority.to_string());
            }
            node.version = Some(v.provenance.version.to_string());
            node.ambient_error = v.ambient_error.as_deref().map(ToString::to_string);
        }
        id
    }

    fn bare(&mut self, kind: &'static str, name: &str, error: Option<String>) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            kind,
            name: name.to_owned(),
            authority: authority_in(name),
            version: None,
            error,
            ambient_error: None,
            endpoints: Vec::new(),
        });
        self.index.insert((kind, name.to_owned()), id);
        id
    }

    fn edge(&mut self, from: usize, to: usize, weight: Option<u32>) {
        if self.out_edges.len() <= from {
            self.out_edges.resize_with(from + 1, Vec::new);
        }
        self.out_edges[from].push(self.edges.len());
        self.edges.push(Edge { from, to, weight });
    }

    fn children(&self, id: usize) -> impl Iterator<Item = &Edge> {
        let out = self.out_edges.get(id).map_or(&[][..], Vec::as_slice);
        out.iter().map(|&e| &self.edges[e])
    }

    /// The indented tree, one line per resource, endpoints as leaves.
    pub(crate) fn tree(&self) -> String {
        let mut out = format!(
            "snapshot {} · {} resources · {}\n",
            self.generation,
            self.nodes.len(),
            if self.ok { "ok" } else { "has errors" }
        );
        for &root in &self.roots {
            self.tree_node(&mut out, root, None, "", "", &mut Vec::new());
        }
        out
    }

    fn tree_node(
        &self,
        out: &mut String,
        id: usize,
        weight: Option<u32>,
        first: &str,
        rest: &str,
        path: &mut Vec<usize>,
    ) {
        let node = &self.nodes[id];
        let mut line = format!("{first}{} {}", node.kind, shown(id_of(&node.name)));
        if let Some(w) = weight {
            line.push_str(&format!(" ({w})"));
        }
        if let Some(a) = &node.authority {
            line.push_str(&format!(" · {}", shown(a)));
        }
        let children: Vec<&Edge> = self.children(id).collect();
        match &node.version {
            Some(v) => line.push_str(&format!(" · {}", shown(short_version(v)))),
            None if node.kind == "Collection" => {
                let n = children.len();
                line.push_str(&format!(" · {n} member{}", if n == 1 { "" } else { "s" }));
            }
            None if node.error.is_none() => line.push_str(" · (none)"),
            None => {}
        }
        out.push_str(&line);
        out.push('\n');
        let mut notes: Vec<String> = Vec::new();
        if let Some(e) = &node.error {
            notes.push(format!("✗ {}", message(e)));
        }
        if let Some(e) = &node.ambient_error {
            notes.push(format!("⚠ still serving, but: {}", message(e)));
        }
        notes.extend(node.endpoints.iter().map(|e| shown(e)));
        if path.contains(&id) {
            return;
        }
        path.push(id);
        let total = notes.len() + children.len();
        for (i, note) in notes.iter().enumerate() {
            let last = i + 1 == total;
            out.push_str(&format!(
                "{rest}{}{note}\n",
                if last { "└─ " } else { "├─ " }
            ));
        }
        for (i, edge) in children.iter().enumerate() {
            let last = notes.len() + i + 1 == total;
            let (f, r) = if last {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            self.tree_node(
                out,
                edge.to,
                edge.weight,
                &format!("{rest}{f}"),
                &format!("{rest}{r}"),
                path,
            );
        }
        path.pop();
    }

    /// Nodes grouped by authority (`None`: old-style names).
    fn by_authority(&self) -> BTreeMap<Option<&str>, Vec<usize>> {
        let mut groups: BTreeMap<Option<&str>, Vec<usize>> = BTreeMap::new();
        for (id, node) in self.nodes.iter().enumerate() {
            groups
                .entry(node.authority.as_deref())
                .or_default()
                .push(id);
        }
        groups
    }

    fn label(&self, id: usize, newline: &str) -> String {
        let node = &self.nodes[id];
        let mut label = format!("{}{newline}{}", node.kind, shown(id_of(&node.name)));
        if let Some(v) = &node.version {
            label.push_str(&format!("{newline}v {}", shown(short_version(v))));
        }
        if !node.endpoints.is_empty() {
            let n = node.endpoints.len();
            let s = if n == 1 { "" } else { "s" };
            label.push_str(&format!("{newline}{n} endpoint{s}"));
        }
        if node.error.is_some() {
            label.push_str(&format!("{newline}✗ failed"));
        } else if node.ambient_error.is_some() {
            label.push_str(&format!("{newline}⚠ ambient error"));
        }
        label
    }

    /// Graphviz dot: a `cluster_*` subgraph per authority.
    pub(crate) fn dot(&self) -> String {
        let mut out = String::from(
            "digraph xdsfed {\n  rankdir=LR;\n  node [shape=box, style=rounded, fontname=\"monospace\"];\n",
        );
        for (i, (authority, ids)) in self.by_authority().into_iter().enumerate() {
            let title = authority.map_or("old-style names (default servers)".to_owned(), shown);
            out.push_str(&format!(
                "  subgraph cluster_{i} {{\n    label={};\n    style=dashed;\n",
                dot_quote(&title)
            ));
            for id in ids {
                let colour = if self.nodes[id].error.is_some() {
                    ", color=red, fontcolor=red"
                } else if self.nodes[id].ambient_error.is_some() {
                    ", color=orange"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "    n{id} [label={}{colour}];\n",
                    dot_quote(&self.label(id, "\n"))
                ));
            }
            out.push_str("  }\n");
        }
        for e in &self.edges {
            match e.weight {
                Some(w) => out.push_str(&format!("  n{} -> n{} [label=\"{w}\"];\n", e.from, e.to)),
                None => out.push_str(&format!("  n{} -> n{};\n", e.from, e.to)),
            }
        }
        out.push_str("}\n");
        out
    }

    /// Mermaid flowchart: a subgraph per authority.
    pub(crate) fn mermaid(&self) -> String {
        let mut out = String::from("flowchart LR\n");
        for (i, (authority, ids)) in self.by_authority().into_iter().enumerate() {
            let title = authority.map_or("old-style names (default servers)".to_owned(), shown);
            out.push_str(&format!("  subgraph a{i}[\"{}\"]\n", mermaid_text(&title)));
            for id in ids {
                out.push_str(&format!(
                    "    n{id}[\"{}\"]\n",
                    mermaid_text(&self.label(id, "<br/>"))
                ));
            }
            out.push_str("  end\n");
        }
        for e in &self.edges {
            match e.weight {
                Some(w) => out.push_str(&format!("  n{} -->|{w}| n{}\n", e.from, e.to)),
                None => out.push_str(&format!("  n{} --> n{}\n", e.from, e.to)),
            }
        }
        let failed: Vec<String> = (0..self.nodes.len())
            .filter(|&id| self.nodes[id].error.is_some())
            .map(|id| format!("n{id}"))
            .collect();
        if !failed.is_empty() {
            out.push_str("  classDef failed stroke:#d00,color:#d00\n");
            out.push_str(&format!("  class {} failed\n", failed.join(",")));
        }
        out
    }

    /// The model as one JSON value.
    pub(crate) fn json(&self) -> serde_json::Value {
        let nodes: Vec<serde_json::Value> = self
            .nodes
            .iter()
            .map(|n| {
                json!({
                    "kind": n.kind,
                    "name": n.name,
                    "authority": n.authority,
                    "version": n.version,
                    "error": n.error,
                    "ambient_error": n.ambient_error,
                    "endpoints": n.endpoints,
                })
            })
            .collect();
        let edges: Vec<serde_json::Value> = self
            .edges
            .iter()
            .map(|e| {
                json!({
                    "from": self.nodes[e.from].name,
                    "to": self.nodes[e.to].name,
                    "weight": e.weight,
                })
            })
            .collect();
        json!({
            "generation": self.generation,
            "ok": self.ok,
            "resources": nodes,
            "edges": edges,
        })
    }
}

fn endpoint_lines(cla: &xdsfed::core::types::LoadAssignment) -> Vec<String> {
    endpoint_addresses(cla)
        .into_iter()
        .map(|(locality, address)| {
            if locality.is_empty() {
                address
            } else {
                format!("{locality}  {address}")
            }
        })
        .collect()
}

/// The authority of an `xdstp://` name.
fn authority_in(name: &str) -> Option<String> {
    name.strip_prefix("xdstp://")
        .and_then(|rest| rest.split('/').next())
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
}

/// A dot string literal.
fn dot_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text inside a Mermaid `["…"]` label: quotes become entities.
fn mermaid_text(text: &str) -> String {
    text.replace('"', "#quot;")
}

#[cfg(test)]
mod tests;
