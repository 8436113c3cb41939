//! Snapshots for unit tests, cut by a real `GraphEngine` from resources
//! built here, without a network.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, CustomClusterType,
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, HealthStatus, Locality, SocketAddress, address, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use prost::Message;
use xdsfed_core::types::LoadAssignment;
use xdsfed_core::types::{ClusterView, RouteConfigView};
use xdsfed_graph::{
    GraphEngine, GraphOptions, Provenance, ResourceKind, Roots, Snapshot, Update, WatchChange,
};

/// The resources a test's control plane holds; anything else does not exist.
#[derive(Debug, Default)]
pub(crate) struct Resources {
    pub(crate) listeners: HashMap<String, Listener>,
    pub(crate) route_configs: HashMap<String, RouteConfigView>,
    pub(crate) clusters: HashMap<String, ClusterView>,
    pub(crate) assignments: HashMap<String, LoadAssignment>,
}

impl Resources {
    pub(crate) fn listener(mut self, l: Listener) -> Self {
        self.listeners.insert(l.name.clone(), l);
        self
    }
    pub(crate) fn route_config(mut self, r: RouteConfiguration) -> Self {
        let held = RouteConfigView::new(&r).expect("a valid route configuration");
        self.route_configs.insert(r.name.clone(), held);
        self
    }
    pub(crate) fn cluster(mut self, c: Cluster) -> Self {
        let held = ClusterView::new(&c).expect("a valid cluster");
        self.clusters.insert(c.name.clone(), held);
        self
    }
    pub(crate) fn assignment(mut self, a: ClusterLoadAssignment) -> Self {
        let held = LoadAssignment::new(&a).expect("a valid test assignment");
        self.assignments.insert(a.cluster_name.clone(), held);
        self
    }

    /// The engine's first snapshot from `roots`, answering every watch.
    pub(crate) fn snapshot(&self, roots: Roots) -> Arc<Snapshot> {
        let now = Instant::now();
        let mut engine = GraphEngine::new(roots, GraphOptions::default(), now);
        loop {
            let mut fed = false;
            while let Some(change) = engine.poll_watch() {
                if let WatchChange::Watch { kind, name, .. } = change {
                    self.feed(&mut engine, now, kind, &name);
                    fed = true;
                }
            }
            if !fed {
                break;
            }
        }
        engine.poll_snapshot().expect("every watch was answered")
    }

    fn feed(&self, engine: &mut GraphEngine, now: Instant, kind: ResourceKind, name: &str) {
        fn update<T: Clone>(found: Option<&T>) -> Update<T> {
            match found {
                Some(v) => Update::Changed(Arc::new(v.clone()), Provenance::new(None, "test", "1")),
                None => Update::DoesNotExist,
            }
        }
        match kind {
            ResourceKind::Listener => {
                engine.on_listener(now, name, update(self.listeners.get(name)))
            }
            ResourceKind::RouteConfiguration => {
                engine.on_route_config(now, name, update(self.route_configs.get(name)))
            }
            ResourceKind::Cluster => engine.on_cluster(now, name, update(self.clusters.get(name))),
            ResourceKind::ClusterLoadAssignment => {
                engine.on_endpoints(now, name, update(self.assignments.get(name)))
            }
            // These fixtures carry their endpoints inline, never through LEDS.
            ResourceKind::LbEndpoint => {}
        }
    }
}

/// One endpoint: host, port, health, weight (0: unset).
pub(crate) type Ep<'a> = (&'a str, u32, HealthStatus, u32);

/// A locality: priority, weight (0: unset), endpoints.
pub(crate) fn locality(priority: u32, weight: u32, endpoints: &[Ep<'_>]) -> LocalityLbEndpoints {
    LocalityLbEndpoints {
        locality: Some(Locality {
            zone: format!("zone-{priority}-{weight}-{}", endpoints.len()),
            ..Default::default()
        }),
        priority,
        load_balancing_weight: (weight > 0).then_some(UInt32Value { value: weight }),
        lb_endpoints: endpoints
            .iter()
            .map(|(host, port, health, weight)| LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(Address {
                        address: Some(address::Address::SocketAddress(SocketAddress {
                            address: (*host).into(),
                            port_specifier: Some(socket_address::PortSpecifier::PortValue(*port)),
                            ..Default::default()
                        })),
                    }),
                    ..Default::default()
                })),
                health_status: *health as i32,
                load_balancing_weight: (*weight > 0).then_some(UInt32Value { value: *weight }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub(crate) fn assignment(
    name: &str,
    localities: Vec<LocalityLbEndpoints>,
) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: localities,
        ..Default::default()
    }
}

/// An EDS cluster whose endpoints are under its own name.
pub(crate) fn eds_cluster(name: &str) -> Cluster {
    xdsfed_testbed::resources::cluster(name, "")
}

/// An aggregate cluster over `children`, in priority order.
pub(crate) fn aggregate_cluster(name: &str, children: &[&str]) -> Cluster {
    let config = ClusterConfig {
        clusters: children.iter().map(|c| (*c).to_owned()).collect(),
    };
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: "envoy.clusters.aggregate".into(),
            typed_config: Some(Any {
                type_url:
                    "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig"
                        .into(),
                value: config.encode_to_vec(),
            }),
        })),
        ..Default::default()
    }
}
