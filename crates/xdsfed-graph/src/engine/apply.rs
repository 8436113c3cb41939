//! Applying what the client reported to one node.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use xdsfed_core::error::XdsError;
use xdsfed_core::types::ClusterView;
use xdsfed_core::types::LoadAssignment;
use xdsfed_core::types::RouteConfigView;

use super::node::{Node, State, Value};
use super::{GraphEngine, Listing};
use crate::edges::{
    Edge, Key, ParseCx, leds_edges, parse_cluster, parse_listener, scan_route_config,
};
use crate::error::GraphError;
use crate::resource::{Provenance, ResourceKind, Update};

/// A typed resource the engine can read edges out of.
pub(super) trait GraphResource: Sized {
    /// Reads the value and edges of resource `name`.
    fn read(
        res: Arc<Self>,
        name: &Arc<str>,
        provenance: &Provenance,
        cx: ParseCx<'_>,
    ) -> (Value, Vec<Edge>);
}

impl GraphResource for Listener {
    fn read(
        res: Arc<Self>,
        name: &Arc<str>,
        p: &Provenance,
        cx: ParseCx<'_>,
    ) -> (Value, Vec<Edge>) {
        let (shape, edges) = parse_listener(cx, name, &res, p);
        let shape = Arc::new(shape);
        (Value::Listener { res, shape }, edges)
    }
}

impl GraphResource for RouteConfigView {
    fn read(
        res: Arc<Self>,
        name: &Arc<str>,
        _: &Provenance,
        cx: ParseCx<'_>,
    ) -> (Value, Vec<Edge>) {
        let scan = scan_route_config(cx, &res, name);
        let value = Value::Route {
            clusters: scan.clusters.into(),
            headers: scan.dynamic_cluster_headers.into(),
            res,
        };
        (value, scan.edges)
    }
}

impl GraphResource for ClusterView {
    fn read(
        res: Arc<Self>,
        name: &Arc<str>,
        _: &Provenance,
        cx: ParseCx<'_>,
    ) -> (Value, Vec<Edge>) {
        let (shape, edges) = parse_cluster(cx, name, &res);
        (Value::Cluster { res, shape }, edges)
    }
}

impl GraphResource for LoadAssignment {
    fn read(
        res: Arc<Self>,
        name: &Arc<str>,
        _: &Provenance,
        cx: ParseCx<'_>,
    ) -> (Value, Vec<Edge>) {
        let edges = leds_edges(cx, name, &res);
        (Value::Endpoints { res }, edges)
    }
}

impl GraphEngine {
    pub(super) fn on_update<T: GraphResource>(
        &mut self,
        now: Instant,
        kind: ResourceKind,
        name: &str,
        update: Update<T>,
    ) {
        let key = self.key_of(kind, name);
        let mut wildcard_on = false;
        if let Some(w) = self.wildcard_mut(kind) {
            wildcard_on = *w != Listing::Off;
            if let Listing::Waiting { .. } = *w {
                // The first delivery of a wildcard subscription ends its wait.
                *w = Listing::Synced;
            }
        }
        let Some(state) = self.state_of(kind, &key, update) else {
            return;
        };
        let present = matches!(state, State::Present { .. });
        if !(wildcard_on && present)
            && let Some(node) = self.retired.get_mut(&key)
        {
            // Still watched until the next publication: keep it current in
            // case it is referenced again before then.
            node.state = state;
            return;
        }
        if !self.nodes.contains_key(&key) {
            if !(wildcard_on && present) {
                tracing::debug!(%kind, %name, "update for a resource the graph does not reach");
                return;
            }
            // A new (or re-added) member of a wildcard subscription is a root
            // of its own. It starts edgeless: a retired node's edges were
            // released when it was retired; `replace_state` links the new ones.
            let placeholder = State::Absent(GraphError::DoesNotExist {
                kind,
                name: Arc::clone(&key.name),
            });
            let mut node = match self.retired.remove(&key) {
                Some(mut node) => {
                    node.parents.clear();
                    node.state = placeholder;
                    node
                }
                None => Box::new(Node::new(placeholder)),
            };
            node.wildcard_member = true;
            self.insert_node(key.clone(), node);
        }
        self.replace_state(now, &key, state);
        if wildcard_on && let Some(node) = self.nodes.get_mut(&key) {
            // Under a wildcard subscription, presence is membership.
            node.wildcard_member = present;
            if !present {
                self.retire_if_orphan(&key);
            }
        }
    }

    /// The state `update` puts node `key` in; an ambient error is applied
    /// at once and gives `None`, since it keeps the state.
    pub(super) fn state_of<T: GraphResource>(
        &mut self,
        kind: ResourceKind,
        key: &Key,
        update: Update<T>,
    ) -> Option<State> {
        Some(match update {
            Update::Changed(res, provenance) => {
                let cx = ParseCx {
                    known: &self.opts.known_authorities,
                    trust: self.opts.trust(),
                    server: &provenance.server,
                };
                let (value, edges) = T::read(res, &key.name, &provenance, cx);
                State::Present {
                    value,
                    provenance,
                    ambient: None,
                    edges: edges.into(),
                }
            }
            Update::DoesNotExist => State::Absent(GraphError::DoesNotExist {
                kind,
                name: Arc::clone(&key.name),
            }),
            Update::Error(error) => State::Absent(GraphError::Resource {
                kind,
                name: Arc::clone(&key.name),
                error: Arc::new(error),
            }),
            Update::AmbientError(error) => {
                self.on_ambient(key, error);
                return None;
            }
        })
    }

    pub(super) fn on_ambient(&mut self, key: &Key, error: XdsError) {
        let node = match self.nodes.get_mut(key) {
            Some(node) => node,
            None => match self.retired.get_mut(key) {
                Some(node) => node,
                None => return,
            },
        };
        match &mut node.state {
            State::Present { ambient, .. } => *ambient = Some(Arc::new(error)),
            State::Cold { last_error, .. } => {
                // Not definite: the resource may still arrive. Quoted if the
                // warming timeout fires.
                *last_error = Some(Arc::new(error));
                return;
            }
            State::Absent(_) => return,
        }
        let key = key.clone();
        self.mark_changed(&key, false);
    }

    /// Gives live node `key` its new state, moves its edges, and marks what
    /// depends on it.
    pub(super) fn replace_state(&mut self, now: Instant, key: &Key, state: State) {
        let Some(node) = self.nodes.get(key) else {
            return;
        };
        let old_edges = node.edges();
        let shape_changed = self.set_state(key, state);
        let new_edges = self.nodes.get(key).map(|n| n.edges()).unwrap_or_default();
        self.relink(now, key, &old_edges, &new_edges);
        self.mark_changed(key, shape_changed);
    }

    /// The warming timer armed for `key` at `deadline` has come: it fires
    /// if the node is still cold for that deadline, and is stale otherwise
    /// (the node arrived, left, or went cold again later).
    pub(super) fn fire_warming_timeout(&mut self, key: &Key, deadline: Instant) {
        let last_error = match self.nodes.get(key).map(|n| &n.state) {
            Some(State::Cold {
                deadline: cold_until,
                last_error,
            }) if *cold_until == deadline => last_error.clone(),
            _ => return,
        };
        tracing::debug!(kind = %key.kind, name = %key.name, "warming timeout");
        let error = GraphError::WarmingTimeout {
            kind: key.kind,
            name: Arc::clone(&key.name),
            after: self.opts.warming_timeout,
            last_error,
        };
        self.set_state(key, State::Absent(error));
        self.mark_changed(key, false);
    }

    /// Marks the snapshot entries that read node `key`.
    pub(super) fn mark_changed(&mut self, key: &Key, shape_changed: bool) {
        match key.kind {
            ResourceKind::Listener => self.mark_dirty(key),
            ResourceKind::RouteConfiguration => {
                self.mark_dirty(key);
                self.mark_parents(key);
            }
            ResourceKind::Cluster if shape_changed => {
                self.mark_cluster_and_aggregate_ancestors(key)
            }
            ResourceKind::Cluster => self.mark_dirty(key),
            ResourceKind::ClusterLoadAssignment => self.mark_parents(key),
            ResourceKind::LbEndpoint => {
                if self.marked_leds.insert(key.clone()) {
                    self.mark_grandparents(key);
                }
            }
        }
    }

    /// Marks the clusters that use an LEDS collection: the parents of the
    /// assignments that name it.
    fn mark_grandparents(&mut self, key: &Key) {
        let parents: Vec<Key> = match self.nodes.get(key) {
            Some(node) => node.parents.iter().cloned().collect(),
            None => return,
        };
        for parent in &parents {
            self.mark_parents(parent);
        }
    }

    fn mark_parents(&mut self, key: &Key) {
        let parents: Vec<Key> = match self.nodes.get(key) {
            Some(node) => node.parents.iter().cloned().collect(),
            None => return,
        };
        for parent in &parents {
            self.mark_dirty(parent);
        }
    }

    fn wildcard_mut(&mut self, kind: ResourceKind) -> Option<&mut Listing> {
        match kind {
            ResourceKind::Listener => Some(&mut self.wildcard_listeners),
            ResourceKind::Cluster => Some(&mut self.wildcard_clusters),
            ResourceKind::RouteConfiguration
            | ResourceKind::ClusterLoadAssignment
            | ResourceKind::LbEndpoint => None,
        }
    }
}
