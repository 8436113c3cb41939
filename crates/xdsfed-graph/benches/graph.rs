//! The graph engine at scale: 1 listener, 1 route configuration with 10 000
//! routes, 10 000 EDS clusters with 10 endpoints each (100 000 endpoints).
//!
//! Measures, with resources already decoded (that is the client's work):
//! - cold start: from an empty engine, feeding every resource in the order
//!   the engine asks for it, to the first complete snapshot;
//! - one endpoint change: one ClusterLoadAssignment update to the next
//!   snapshot, repeated over different clusters.
//!
//! Run: `cargo bench -p xdsfed-graph --bench graph`

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress};
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use xdsfed_graph::{
    GraphEngine, GraphOptions, Provenance, ResourceKind, Roots, Update, WatchChange,
};

const CLUSTERS: usize = 10_000;
const ENDPOINTS: usize = 10;
const CHANGES: usize = 1_000;

const LISTENER: &str = "xdstp://a.test/envoy.config.listener.v3.Listener/front";
const ROUTE: &str = "xdstp://a.test/envoy.config.route.v3.RouteConfiguration/front";

/// Half the clusters and their endpoints live on a second authority.
fn authority(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "a.test"
    } else {
        "b.test"
    }
}

fn cluster_name(i: usize) -> String {
    let authority = authority(i);
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/svc-{i}")
}

fn endpoints_name(i: usize) -> String {
    let authority = authority(i);
    format!("xdstp://{authority}/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}")
}

fn listener() -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            route_config_name: ROUTE.into(),
            config_source: None,
        })),
        ..Default::default()
    };
    Listener {
        name: LISTENER.into(),
        api_listener: Some(ApiListener {
            api_listener: Some(Any {
                type_url: "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager".into(),
                value: hcm.encode_to_vec(),
            }),
        }),
        ..Default::default()
    }
}

fn route_config() -> RouteConfiguration {
    let routes = (0..CLUSTERS)
        .map(|i| Route {
            name: format!("r{i}"),
            action: Some(Action::Route(RouteAction {
                cluster_specifier: Some(ClusterSpecifier::Cluster(cluster_name(i))),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    RouteConfiguration {
        name: ROUTE.into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn cluster(i: usize) -> Cluster {
    Cluster {
        name: cluster_name(i),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: None,
            service_name: endpoints_name(i),
        }),
        ..Default::default()
    }
}

fn assignment(i: usize, generation: u32) -> ClusterLoadAssignment {
    let lb_endpoints = (0..ENDPOINTS)
        .map(|e| LbEndpoint {
            host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
                    address: Some(AddressKind::SocketAddress(SocketAddress {
                        address: format!("10.{}.{}.{}", i / 256 % 256, i % 256, e),
                        port_specifier: Some(PortSpecifier::PortValue(8000 + generation)),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: endpoints_name(i),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn provenance(name: &str, version: &str) -> Provenance {
    Provenance::new(
        xdsfed_core::name::authority_of(name),
        "127.0.0.1:18000",
        version,
    )
}

fn main() {
    // Decoded resources, built before the clock starts.
    let listener = Arc::new(listener());
    let route = Arc::new(route_config());
    let clusters: Vec<Arc<Cluster>> = (0..CLUSTERS).map(|i| Arc::new(cluster(i))).collect();
    let assignments: Vec<Arc<ClusterLoadAssignment>> =
        (0..CLUSTERS).map(|i| Arc::new(assignment(i, 0))).collect();
    let index: std::collections::HashMap<String, usize> = (0..CLUSTERS)
        .flat_map(|i| [(cluster_name(i), i), (endpoints_name(i), i)])
        .collect();

    let start = Instant::now();
    let mut engine = GraphEngine::new(
        Roots::new().listener(LISTENER),
        GraphOptions::default(),
        start,
    );
    let mut watches = 0usize;
    let snapshot = loop {
        // The driver's loop: answer each watch with the resource, as a
        // server holding everything would.
        let Some(change) = engine.poll_watch() else {
            match engine.poll_snapshot() {
                Some(s) => break s,
                None => panic!("stalled with {} cold resources", engine.cold_count()),
            }
        };
        let WatchChange::Watch { kind, name, .. } = change else {
            continue;
        };
        watches += 1;
        let now = start;
        match kind {
            ResourceKind::Listener => engine.on_listener(
                now,
                &name,
                Update::Changed(Arc::clone(&listener), provenance(&name, "1")),
            ),
            ResourceKind::RouteConfiguration => engine.on_route_config(
                now,
                &name,
                Update::Changed(Arc::clone(&route), provenance(&name, "1")),
            ),
            ResourceKind::Cluster => engine.on_cluster(
                now,
                &name,
                Update::Changed(Arc::clone(&clusters[index[&*name]]), provenance(&name, "1")),
            ),
            ResourceKind::ClusterLoadAssignment => engine.on_endpoints(
                now,
                &name,
                Update::Changed(
                    Arc::clone(&assignments[index[&*name]]),
                    provenance(&name, "1"),
                ),
            ),
        }
    };
    let cold_start = start.elapsed();
    assert_eq!(snapshot.cluster_count(), CLUSTERS);
    assert!(snapshot.is_ok());
    println!(
        "cold start to ready snapshot: {:.1} ms ({} watches, {} clusters, {} endpoints)",
        ms(cold_start),
        watches,
        snapshot.cluster_count(),
        CLUSTERS * ENDPOINTS
    );

    // One endpoint change at a time, each on a different cluster.
    let changed: Vec<(usize, Arc<ClusterLoadAssignment>)> = (0..CHANGES)
        .map(|k| {
            let i = (k * 7_919) % CLUSTERS;
            (i, Arc::new(assignment(i, 1 + k as u32)))
        })
        .collect();
    let mut times = Vec::with_capacity(CHANGES);
    let mut previous = snapshot;
    for (k, (i, cla)) in changed.into_iter().enumerate() {
        let name = endpoints_name(i);
        let version = format!("{}", k + 2);
        let t = Instant::now();
        engine.on_endpoints(t, &name, Update::Changed(cla, provenance(&name, &version)));
        let next = engine.poll_snapshot();
        times.push(t.elapsed());
        let Some(next) = next else {
            panic!("no snapshot after an endpoint change");
        };
        assert_eq!(next.generation(), previous.generation() + 1);
        previous = next;
    }
    times.sort();
    let pct = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
    println!(
        "one endpoint change to next snapshot ({CHANGES} changes): median {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        us(pct(50)),
        us(pct(99)),
        us(times[times.len() - 1])
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
