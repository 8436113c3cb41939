//! The resource graph driven by the real client against the testbed over
//! loopback delta ADS: a listener on authority A whose routes reach
//! clusters on A and B, with endpoints on both.
//!
//! ```text
//! a.example: Listener front ─► RouteConfiguration front ─┬─ /web    ─► Cluster web    ─► endpoints web    (b.example)
//!                                                        ├─ /local  ─► Cluster local  ─► endpoints local  (a.example)
//!                                                        ├─ /legacy ─► Cluster legacy ─► endpoints legacy (a.example)
//!                                                        └─ /api    ─► Cluster api    ─► endpoints api    (b.example, all on B)
//! ```

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::resources::{CDS, EDS, api_listener, cluster, endpoints, route_config};
use common::{PATIENCE, bootstrap_json, eventually, fast_transport, snapshot_where};
use xdsfed::client::client::XdsClient;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{
    ClusterEndpoints, ClusterSnapshot, ConfigGraph, GraphError, GraphOptions, Snapshot,
};
use xdsfed::testbed::{Faults, Server, ServerSpec, Testbed};

const A: &str = "a.example";
const B: &str = "b.example";

fn listener_name() -> String {
    format!("xdstp://{A}/envoy.config.listener.v3.Listener/front")
}

fn route_name() -> String {
    format!("xdstp://{A}/envoy.config.route.v3.RouteConfiguration/front")
}

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn endpoints_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

/// The route configuration with `/api` sent to cluster `api` on B.
fn routes_to(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("/web", cluster_name(A, "web")),
        ("/local", cluster_name(A, "local")),
        ("/legacy", cluster_name(A, "legacy")),
        ("/api", cluster_name(B, api)),
    ]
}

struct Fixture {
    testbed: Testbed,
    client: XdsClient,
}

impl Fixture {
    fn a(&self) -> &Arc<Server> {
        self.testbed.server("a").expect("server a")
    }

    fn b(&self) -> &Arc<Server> {
        self.testbed.server("b").expect("server b")
    }

    fn set_routes(&self, routes: &[(&str, String)]) {
        let routes: Vec<(&str, &str)> = routes.iter().map(|(p, c)| (*p, c.as_str())).collect();
        self.a()
            .set_message(&route_name(), &route_config(&route_name(), &routes))
            .expect("route configuration stored");
    }

    /// An EDS cluster `id` on `cluster_on`, its endpoints `id` on
    /// `endpoints_on`.
    fn set_cluster(&self, cluster_on: &Server, endpoints_on: &Server, id: &str, port: u32) {
        let (ca, ea) = (authority_of(cluster_on), authority_of(endpoints_on));
        let service = endpoints_name(ea, id);
        cluster_on
            .set_message(
                &cluster_name(ca, id),
                &cluster(&cluster_name(ca, id), &service),
            )
            .expect("cluster stored");
        endpoints_on
            .set_message(&service, &endpoints(&service, &[("127.0.0.1", port)]))
            .expect("endpoints stored");
    }

    fn graph(&self) -> ConfigGraph {
        ConfigGraph::builder(self.client.clone())
            .listener(listener_name())
            // Well past PATIENCE: no snapshot in these tests is published
            // because a warming timer gave up.
            .options(GraphOptions::default().with_warming_timeout(Duration::from_secs(60)))
            .start()
    }
}

fn authority_of(server: &Server) -> &'static str {
    if server.name() == "a" { A } else { B }
}

/// Two servers, A and B, holding the whole graph; a client whose
/// does-not-exist timer is long, so that a resource held back stays cold
/// (the graph's warming, not the client's timer, is under test).
async fn fixture() -> Fixture {
    let testbed = Testbed::start([ServerSpec::new("a", [A]), ServerSpec::new("b", [B])])
        .await
        .expect("testbed starts");
    let (a_uri, b_uri) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
    let bootstrap = bootstrap_json(
        &a_uri,
        &[(A, &[a_uri.as_str()]), (B, &[b_uri.as_str()])],
        "",
    );
    let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).expect("valid bootstrap"))
        .transport_options(fast_transport())
        .does_not_exist_timeout(Duration::from_secs(60))
        .build()
        .expect("inside a tokio runtime");
    let fixture = Fixture { testbed, client };
    let (a, b) = (fixture.a(), fixture.b());
    a.set_message(
        &listener_name(),
        &api_listener(&listener_name(), &route_name()),
    )
    .expect("listener stored");
    fixture.set_routes(&routes_to("api"));
    fixture.set_cluster(a, b, "web", 8001);
    fixture.set_cluster(a, a, "local", 8002);
    fixture.set_cluster(a, a, "legacy", 8003);
    fixture.set_cluster(b, b, "api", 8004);
    fixture
}

fn cluster_of<'s>(s: &'s Snapshot, authority: &str, id: &str) -> &'s Arc<ClusterSnapshot> {
    s.cluster(&cluster_name(authority, id))
        .unwrap_or_else(|| panic!("cluster {id} in snapshot {}", s.generation()))
}

fn routed_clusters(s: &Snapshot) -> BTreeSet<String> {
    s.route_config(&route_name())
        .map(|rc| rc.clusters.iter().map(|c| c.to_string()).collect())
        .unwrap_or_default()
}

/// The endpoint ports a cluster serves, empty when it has none.
fn ports(c: &ClusterSnapshot) -> Vec<u32> {
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &c.endpoints
    else {
        return Vec::new();
    };
    assignment
        .value
        .endpoints()
        .map(|e| u32::from(e.port))
        .collect()
}

/// Whether the cluster or its endpoints carry an ambient error.
fn has_ambient_error(c: &ClusterSnapshot) -> bool {
    let on_endpoints = match &c.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => a.ambient_error.is_some(),
        _ => false,
    };
    on_endpoints
        || c.cluster
            .as_ref()
            .is_some_and(|v| v.ambient_error.is_some())
}

fn assignment_value(c: &ClusterSnapshot) -> Arc<xdsfed::core::types::LoadAssignment> {
    match &c.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => Arc::clone(&a.value),
        other => panic!("{}: no EDS assignment: {other:?}", c.name),
    }
}

fn subscribed(server: &Server, type_url: &str, name: &str) -> bool {
    server.recording().streams().iter().any(|s| {
        s.delta_requests()
            .any(|r| r.type_url == type_url && r.resource_names_subscribe.iter().any(|n| n == name))
    })
}

fn unsubscribed(server: &Server, type_url: &str, name: &str) -> bool {
    server.recording().streams().iter().any(|s| {
        s.delta_requests().any(|r| {
            r.type_url == type_url && r.resource_names_unsubscribe.iter().any(|n| n == name)
        })
    })
}

/// Issue 6 end to end: ready across two authorities; a repointed route is
/// made before the old cluster is broken; a deleted cluster fails alone; a
/// stopped server's resources keep serving with an ambient error; its
/// restart clears the error without re-publishing what did not change.
#[tokio::test]
async fn graph_follows_two_authorities_through_repoint_delete_and_server_restart() {
    let fx = fixture().await;
    let mut graph = fx.graph();

    // Ready: every reachable resource arrived, from both servers.
    let ready = tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .expect("ready within PATIENCE")
        .expect("the graph's task runs");
    assert!(ready.is_ok(), "{:?}", ready.errors().collect::<Vec<_>>());
    assert_eq!(ready.cluster_count(), 4);
    for c in ready.clusters() {
        assert!(c.is_ok(), "{}: {:?}", c.name, c.error);
        assert_eq!(ports(c).len(), 1, "{} has its endpoints", c.name);
    }
    let web = cluster_of(&ready, A, "web");
    let web_cluster = web.cluster.as_ref().expect("web cluster");
    assert_eq!(web_cluster.provenance.authority.as_deref(), Some(A));
    assert!(web_cluster.provenance.server.contains(&fx.a().uri()));
    let ClusterEndpoints::Eds {
        assignment: Some(web_endpoints),
        ..
    } = &web.endpoints
    else {
        panic!("web has EDS endpoints");
    };
    assert_eq!(web_endpoints.provenance.authority.as_deref(), Some(B));
    assert!(web_endpoints.provenance.server.contains(&fx.b().uri()));
    assert!(!web_endpoints.provenance.version.is_empty());

    // Make before break: `/api` is repointed at `api-v2`, whose endpoints
    // B holds back. Once the client has asked B for them, the graph has read
    // the new route and the new cluster, yet the snapshot serving is still
    // the one routing to `api`.
    let api_v2_endpoints = endpoints_name(B, "api-v2");
    fx.b().set_faults(Faults {
        silent_names: [api_v2_endpoints.clone()].into(),
        ..Faults::default()
    });
    fx.set_cluster(fx.b(), fx.b(), "api-v2", 8005);
    fx.set_routes(&routes_to("api-v2"));
    eventually("the client subscribes to api-v2's endpoints on B", || {
        subscribed(fx.b(), EDS, &api_v2_endpoints)
    })
    .await;
    let serving = graph.load().expect("a snapshot is serving");
    assert!(routed_clusters(&serving).contains(&cluster_name(B, "api")));
    assert!(serving.cluster(&cluster_name(B, "api-v2")).is_none());
    assert!(cluster_of(&serving, B, "api").is_ok());

    // Once the endpoints arrive, the new route goes out with them, and the
    // old cluster is gone from the snapshot.
    fx.b().set_faults(Faults::default());
    fx.b()
        .set_message(
            &api_v2_endpoints,
            &endpoints(&api_v2_endpoints, &[("127.0.0.1", 8006)]),
        )
        .expect("endpoints stored");
    let repointed = snapshot_where(&mut graph, "/api reaches a warm api-v2", |s| {
        routed_clusters(s).contains(&cluster_name(B, "api-v2"))
    })
    .await;
    assert_eq!(ports(cluster_of(&repointed, B, "api-v2")), vec![8006]);
    assert!(repointed.cluster(&cluster_name(B, "api")).is_none());

    // A deleted cluster fails alone: the listener stays usable.
    let local_before = Arc::clone(cluster_of(&repointed, A, "local"));
    assert!(
        fx.a()
            .delete_resource(CDS, &cluster_name(A, "legacy"))
            .expect("deleted")
    );
    let deleted = snapshot_where(&mut graph, "legacy has failed", |s| {
        !cluster_of(s, A, "legacy").is_ok()
    })
    .await;
    assert!(matches!(
        cluster_of(&deleted, A, "legacy").error,
        Some(GraphError::DoesNotExist { .. })
    ));
    assert!(deleted.is_ok(), "cluster errors stay on their cluster");
    assert!(Arc::ptr_eq(cluster_of(&deleted, A, "local"), &local_before));

    // B stops: what came from B keeps serving, marked with an ambient error.
    let api_v2_before = assignment_value(cluster_of(&deleted, B, "api-v2"));
    let listener_before = Arc::clone(deleted.listener(&listener_name()).expect("listener"));
    let route_before = Arc::clone(deleted.route_config(&route_name()).expect("route"));
    fx.b().stop().await;
    let stopped = snapshot_where(&mut graph, "B's resources carry an ambient error", |s| {
        has_ambient_error(cluster_of(s, B, "api-v2")) && has_ambient_error(cluster_of(s, A, "web"))
    })
    .await;
    for (authority, id) in [(B, "api-v2"), (A, "web")] {
        let c = cluster_of(&stopped, authority, id);
        assert!(c.is_ok(), "{id} keeps serving: {:?}", c.error);
        assert_eq!(ports(c).len(), 1, "{id} keeps its last endpoints");
    }
    assert!(Arc::ptr_eq(
        &assignment_value(cluster_of(&stopped, B, "api-v2")),
        &api_v2_before
    ));
    assert!(Arc::ptr_eq(cluster_of(&stopped, A, "local"), &local_before));
    assert!(stopped.is_ok());

    // B comes back with its state: the ambient errors clear, and nothing
    // is re-published that did not change. The resources themselves are the
    // very allocations delivered before the outage (not decoded again), and
    // the entries that read nothing from B are the same entries.
    let web_endpoints_before = assignment_value(cluster_of(&stopped, A, "web"));
    fx.b()
        .restart(true, Duration::from_millis(50))
        .await
        .expect("B restarts");
    let recovered = snapshot_where(&mut graph, "B's ambient errors are cleared", |s| {
        !has_ambient_error(cluster_of(s, B, "api-v2"))
            && !has_ambient_error(cluster_of(s, A, "web"))
    })
    .await;
    assert!(recovered.is_ok());
    assert!(Arc::ptr_eq(
        &assignment_value(cluster_of(&recovered, B, "api-v2")),
        &api_v2_before
    ));
    assert!(Arc::ptr_eq(
        &assignment_value(cluster_of(&recovered, A, "web")),
        &web_endpoints_before
    ));
    assert!(Arc::ptr_eq(
        cluster_of(&recovered, A, "local"),
        &local_before
    ));
    assert!(Arc::ptr_eq(
        recovered.listener(&listener_name()).expect("listener"),
        &listener_before
    ));
    assert!(Arc::ptr_eq(
        recovered.route_config(&route_name()).expect("route"),
        &route_before
    ));
    graph.shutdown().await;
    fx.testbed.shutdown().await;
}

/// Garbage collection: once the snapshot no longer uses a cluster, the
/// client unsubscribes it and its endpoints on their server.
#[tokio::test]
async fn repointed_route_unsubscribes_the_old_cluster_and_its_endpoints() {
    let fx = fixture().await;
    let mut graph = fx.graph();
    tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .expect("ready within PATIENCE")
        .expect("the graph's task runs");

    fx.set_cluster(fx.b(), fx.b(), "api-v2", 8005);
    fx.set_routes(&routes_to("api-v2"));
    snapshot_where(&mut graph, "/api reaches api-v2", |s| {
        routed_clusters(s).contains(&cluster_name(B, "api-v2"))
    })
    .await;
    eventually("B sees api and its endpoints unsubscribed", || {
        unsubscribed(fx.b(), CDS, &cluster_name(B, "api"))
            && unsubscribed(fx.b(), EDS, &endpoints_name(B, "api"))
    })
    .await;
    assert!(!unsubscribed(fx.b(), CDS, &cluster_name(B, "api-v2")));
    fx.testbed.shutdown().await;
}

/// TP1: a cluster whose authority the bootstrap does not define is an
/// error on that cluster only; the rest of the graph is ready.
#[tokio::test]
async fn cluster_of_an_unknown_authority_fails_alone() {
    let fx = fixture().await;
    let stray = cluster_name("nowhere.example", "stray");
    let mut routes = routes_to("api");
    routes.push(("/stray", stray.clone()));
    fx.set_routes(&routes);
    let mut graph = fx.graph();
    let snapshot = snapshot_where(&mut graph, "the stray cluster is listed", |s| {
        s.cluster(&stray).is_some()
    })
    .await;
    assert!(snapshot.is_ok());
    assert!(matches!(
        snapshot.cluster(&stray).and_then(|c| c.error.as_ref()),
        Some(GraphError::UnknownAuthority { .. })
    ));
    assert!(cluster_of(&snapshot, B, "api").is_ok());
    fx.testbed.shutdown().await;
}

/// Dropping the graph drops its watches: the client unsubscribes them.
#[tokio::test]
async fn dropping_the_graph_unsubscribes_what_it_watched() {
    let fx = fixture().await;
    let mut graph = fx.graph();
    tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .expect("ready within PATIENCE")
        .expect("the graph's task runs");
    let mut reader = graph.reader();
    drop(graph);
    assert!(
        tokio::time::timeout(PATIENCE, reader.changed())
            .await
            .expect("the task ends")
            .is_err(),
        "no snapshot after the graph is dropped"
    );
    eventually("A sees the listener unsubscribed", || {
        unsubscribed(fx.a(), common::resources::LDS, &listener_name())
    })
    .await;
    fx.testbed.shutdown().await;
}
