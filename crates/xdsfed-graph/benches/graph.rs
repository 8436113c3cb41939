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

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use xdsfed_core::types::{ClusterView, LoadAssignment, RouteConfigView};
use xdsfed_graph::{
    GraphEngine, GraphOptions, Provenance, ResourceKind, Roots, Update, WatchChange,
};
use xdsfed_testbed::resources;

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
    resources::api_listener(LISTENER, ROUTE)
}

fn route_config() -> RouteConfiguration {
    let routes: Vec<(String, String)> = (0..CLUSTERS)
        .map(|i| (format!("/svc-{i}/"), cluster_name(i)))
        .collect();
    let routes: Vec<(&str, &str)> = routes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    resources::route_config(ROUTE, &routes)
}

fn cluster(i: usize) -> Cluster {
    resources::cluster(&cluster_name(i), &endpoints_name(i))
}

/// Cluster `i`'s endpoints: `ENDPOINTS` hosts, on a port that changes with
/// `generation`.
fn assignment(i: usize, generation: u32) -> LoadAssignment {
    LoadAssignment::new(&assignment_message(i, generation)).expect("a valid assignment")
}

fn assignment_message(i: usize, generation: u32) -> ClusterLoadAssignment {
    let hosts: Vec<String> = (0..ENDPOINTS)
        .map(|e| format!("10.{}.{}.{}", i / 256 % 256, i % 256, e))
        .collect();
    let addrs: Vec<(&str, u32)> = hosts
        .iter()
        .map(|h| (h.as_str(), 8000 + generation))
        .collect();
    resources::endpoints(&endpoints_name(i), &addrs)
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
    let route =
        Arc::new(RouteConfigView::new(&route_config()).expect("a valid route configuration"));
    let clusters: Vec<Arc<ClusterView>> = (0..CLUSTERS)
        .map(|i| Arc::new(ClusterView::new(&cluster(i)).expect("a valid cluster")))
        .collect();
    let assignments: Vec<Arc<LoadAssignment>> =
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
            // The assignments here list their endpoints inline.
            ResourceKind::LbEndpoint => panic!("no LEDS in this benchmark: {name}"),
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
    let changed: Vec<(usize, Arc<LoadAssignment>)> = (0..CHANGES)
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
