//! Cutting a snapshot: rebuilding the dirty entries only.

use std::sync::Arc;
use xdsfed_core::hash::HashSet;

use super::GraphEngine;
use super::node::{State, Value};
use crate::edges::{ClusterShape, Key};
use crate::error::GraphError;
use crate::resource::{ResourceKind, Versioned};
use crate::snapshot::{
    ClusterEndpoints, ClusterSnapshot, ListenerSnapshot, RouteBinding, RouteConfigSnapshot,
    Snapshot,
};

impl GraphEngine {
    /// Rebuilds the dirty entries into the persistent maps and cuts the next
    /// snapshot from them. Only called when the graph is ready.
    pub(super) fn publish(&mut self) -> Snapshot {
        let dirty = std::mem::take(&mut self.dirty);
        self.marked_leds.clear();
        self.marked_cold = Vec::new();
        for key in &dirty {
            let live = self.nodes.contains_key(key);
            let name = Arc::clone(&key.name);
            match key.kind {
                ResourceKind::Listener if live => {
                    let entry = Arc::new(self.build_listener(key));
                    self.out.listeners.insert(name, entry);
                }
                ResourceKind::Listener => {
                    self.out.listeners.remove(&name);
                }
                ResourceKind::RouteConfiguration if live => {
                    let entry = Arc::new(self.build_route_config(key));
                    self.out.route_configs.insert(name, entry);
                }
                ResourceKind::RouteConfiguration => {
                    self.out.route_configs.remove(&name);
                }
                ResourceKind::Cluster if live => {
                    let entry = Arc::new(self.build_cluster(key));
                    self.out.clusters.insert(name, entry);
                }
                ResourceKind::Cluster => {
                    self.out.clusters.remove(&name);
                }
                ResourceKind::ClusterLoadAssignment | ResourceKind::LbEndpoint => {}
            }
        }
        for name in std::mem::take(&mut self.dirty_collections) {
            match self.build_collection(&name) {
                Some(entry) => self.out.collections.insert(name, Arc::new(entry)),
                None => self.out.collections.remove(&name),
            };
        }
        self.release_retired();
        self.out.generation += 1;
        // O(1) clones of persistent maps.
        self.out.clone()
    }

    /// Builds, ahead of the first snapshot, the entries of the clusters
    /// marked since the last call whose inputs are all present (see the
    /// engine's rule "Building ahead"). An entry built here is exactly the
    /// one [`publish`](Self::publish) would build: anything it reads that
    /// changes later marks it dirty again.
    pub(super) fn prebuild(&mut self) {
        for key in std::mem::take(&mut self.marked_cold) {
            if self.dirty.contains(&key) && self.inputs_present(&key) {
                let entry = Arc::new(self.build_cluster(&key));
                self.out.clusters.insert(Arc::clone(&key.name), entry);
                self.dirty.remove(&key);
            }
        }
    }

    /// Whether cluster `key`'s entry reads only nodes that are present: its
    /// own, and for EDS its assignment, which names no LEDS collection (a
    /// collection's member changes mark clusters through `marked_leds`,
    /// which assumes they stay dirty until the next publication).
    fn inputs_present(&self, key: &Key) -> bool {
        let Some(State::Present {
            value: Value::Cluster { shape, .. },
            ..
        }) = self.nodes.get(key).map(|n| &n.state)
        else {
            return false;
        };
        match shape {
            ClusterShape::Inline(_) | ClusterShape::Invalid(_) => true,
            ClusterShape::Aggregate { .. } => false,
            ClusterShape::Eds { service_name } => {
                let eds = Key::new(
                    ResourceKind::ClusterLoadAssignment,
                    Arc::clone(service_name),
                );
                matches!(
                    self.nodes.get(&eds).map(|n| &n.state),
                    Some(State::Present { value: Value::Endpoints { res }, .. })
                        if !res.has_leds_localities()
                )
            }
        }
    }

    /// The error for a node that is still cold when an entry is built. The
    /// engine builds only when nothing is cold, so this marks a broken
    /// invariant rather than a state a reader should see.
    fn cold_error(&self, key: &Key) -> GraphError {
        GraphError::WarmingTimeout {
            kind: key.kind,
            name: Arc::clone(&key.name),
            after: self.opts.warming_timeout,
            last_error: None,
        }
    }

    /// The node's error, if it is not present.
    pub(super) fn absence(&self, key: &Key) -> Option<GraphError> {
        match self.nodes.get(key).map(|n| &n.state) {
            Some(State::Present { .. }) => None,
            Some(State::Absent(e)) => Some(e.clone()),
            Some(State::Cold { .. }) | None => Some(self.cold_error(key)),
        }
    }

    fn build_listener(&self, key: &Key) -> ListenerSnapshot {
        let name = Arc::clone(&key.name);
        let Some(State::Present {
            value: Value::Listener { res, shape },
            provenance,
            ambient,
            ..
        }) = self.nodes.get(key).map(|n| &n.state)
        else {
            return ListenerSnapshot {
                name,
                listener: None,
                routes: Vec::new(),
                error: self.absence(key),
            };
        };
        // A74: a route configuration problem is the listener's problem.
        let route_error = shape.routes.iter().find_map(|binding| match binding {
            RouteBinding::Rds(rds) => {
                self.absence(&Key::new(ResourceKind::RouteConfiguration, Arc::clone(rds)))
            }
            RouteBinding::Inline(_) => None,
        });
        ListenerSnapshot {
            name,
            listener: Some(Versioned {
                value: Arc::clone(res),
                provenance: provenance.clone(),
                ambient_error: ambient.clone(),
            }),
            routes: shape.routes.clone(),
            error: shape.error.clone().or(route_error),
        }
    }

    fn build_route_config(&self, key: &Key) -> RouteConfigSnapshot {
        let name = Arc::clone(&key.name);
        match self.nodes.get(key).map(|n| &n.state) {
            Some(State::Present {
                value:
                    Value::Route {
                        res,
                        clusters,
                        headers,
                    },
                provenance,
                ambient,
                ..
            }) => RouteConfigSnapshot {
                name,
                route_config: Some(Versioned {
                    value: Arc::clone(res),
                    provenance: provenance.clone(),
                    ambient_error: ambient.clone(),
                }),
                clusters: Arc::clone(clusters),
                dynamic_cluster_headers: Arc::clone(headers),
                error: None,
            },
            _ => {
                let error = self.absence(key).unwrap_or_else(|| self.cold_error(key));
                RouteConfigSnapshot::failed(name, error)
            }
        }
    }

    fn build_cluster(&self, key: &Key) -> ClusterSnapshot {
        let name = Arc::clone(&key.name);
        let Some(State::Present {
            value: Value::Cluster { res, shape },
            provenance,
            ambient,
            ..
        }) = self.nodes.get(key).map(|n| &n.state)
        else {
            return ClusterSnapshot {
                name,
                cluster: None,
                endpoints: ClusterEndpoints::Unavailable,
                error: self.absence(key),
            };
        };
        let (endpoints, error) = match shape {
            ClusterShape::Eds { service_name } => {
                let eds = Key::new(
                    ResourceKind::ClusterLoadAssignment,
                    Arc::clone(service_name),
                );
                let (assignment, error) = match self.nodes.get(&eds).map(|n| &n.state) {
                    Some(State::Present {
                        value: Value::Endpoints { res },
                        provenance,
                        ambient,
                        edges,
                    }) => {
                        let (value, leds_error) = self.with_leds_endpoints(res, edges);
                        let assignment = Versioned {
                            value,
                            provenance: provenance.clone(),
                            ambient_error: ambient.clone(),
                        };
                        (Some(assignment), leds_error)
                    }
                    _ => (None, self.absence(&eds)),
                };
                let endpoints = ClusterEndpoints::Eds {
                    service_name: Arc::clone(service_name),
                    assignment,
                };
                (endpoints, error)
            }
            ClusterShape::Inline(cla) => (ClusterEndpoints::Inline(cla.clone()), None),
            ClusterShape::Aggregate { children } => match self.flatten(&name, children) {
                Ok(leaves) => (ClusterEndpoints::Aggregate { leaves }, None),
                Err(e) => (
                    ClusterEndpoints::Aggregate {
                        leaves: Arc::new([]),
                    },
                    Some(e),
                ),
            },
            ClusterShape::Invalid(e) => (ClusterEndpoints::Unavailable, Some(GraphError::clone(e))),
        };
        ClusterSnapshot {
            name,
            cluster: Some(Versioned {
                value: Arc::clone(res),
                provenance: provenance.clone(),
                ambient_error: ambient.clone(),
            }),
            endpoints,
            error,
        }
    }

    /// The leaf clusters of aggregate cluster `root`, highest priority first
    /// (gRFC A37): depth first through the children in order; a cluster
    /// reached again on another path is merged into its first place; one
    /// reached again on the same path is a cycle; deeper than
    /// `max_aggregate_depth` levels (the root is level 1) is refused. A child
    /// that is not a usable aggregate cluster is a leaf (its own entry
    /// carries its error, if any).
    fn flatten(
        &self,
        root: &Arc<str>,
        children: &Arc<[Arc<str>]>,
    ) -> Result<Arc<[Arc<str>]>, GraphError> {
        let mut walk = Flatten {
            engine: self,
            root,
            path: vec![Arc::clone(root)],
            seen: HashSet::from_iter([Arc::clone(root)]),
            leaves: Vec::new(),
        };
        walk.children(children, 2)?;
        if walk.leaves.is_empty() {
            return Err(GraphError::AggregateEmpty {
                cluster: Arc::clone(root),
            });
        }
        Ok(walk.leaves.into())
    }
}

struct Flatten<'a> {
    engine: &'a GraphEngine,
    root: &'a Arc<str>,
    path: Vec<Arc<str>>,
    seen: HashSet<Arc<str>>,
    leaves: Vec<Arc<str>>,
}

impl Flatten<'_> {
    // Recursion is bounded by `max_aggregate_depth`: deeper calls fail first.
    fn children(&mut self, children: &[Arc<str>], depth: usize) -> Result<(), GraphError> {
        for child in children {
            if self.path.contains(child) {
                return Err(GraphError::AggregateCycle {
                    cluster: Arc::clone(self.root),
                    through: Arc::clone(child),
                });
            }
            if depth > self.engine.opts.max_aggregate_depth {
                return Err(GraphError::AggregateTooDeep {
                    cluster: Arc::clone(self.root),
                    max_depth: self.engine.opts.max_aggregate_depth,
                });
            }
            if !self.seen.insert(Arc::clone(child)) {
                continue;
            }
            let key = Key::new(ResourceKind::Cluster, Arc::clone(child));
            match self
                .engine
                .nodes
                .get(&key)
                .and_then(|n| n.aggregate_children())
            {
                Some(grandchildren) => {
                    self.path.push(Arc::clone(child));
                    self.children(grandchildren, depth + 1)?;
                    self.path.pop();
                }
                None => self.leaves.push(Arc::clone(child)),
            }
        }
        Ok(())
    }
}
