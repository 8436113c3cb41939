//! Collections as roots of the resource graph (xDS TP1, Envoy's
//! `lds_resources_locator` / `cds_resources_locator`), driven by the real
//! client against the testbed over loopback delta ADS.
//!
//! ```text
//! a.example: Listener glob edge/* ─┬─ edge/one ─► RouteConfiguration one ─► Cluster api (b.example) ─► endpoints api (b.example)
//!                                  └─ edge/two ─► RouteConfiguration two ─┘      (joins later)
//!
//! a.example: ClusterCollection pool ─┬─ locator ─► Cluster local (a.example) ─► endpoints local (a.example)
//!                                    ├─ locator ─► Cluster remote (b.example) ─► endpoints remote (b.example)
//!                                    └─ inline entry `inline` (STATIC-less EDS cluster) ─► endpoints inline (a.example)
//! ```

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::resources::{
    CDS, LDS, api_listener, cluster, cluster_collection, endpoints, inline, locator, route_config,
};
use common::{bootstrap_json, fast_transport, snapshot_where, summary};
use xdsfed::client::client::XdsClient;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, GraphOptions, Snapshot};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const A: &str = "a.example";
const B: &str = "b.example";

fn name(authority: &str, kind: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.{kind}/{id}")
}

fn listener(id: &str) -> String {
    name(A, "listener.v3.Listener", id)
}

fn route(id: &str) -> String {
    name(A, "route.v3.RouteConfiguration", id)
}

fn cluster_name(authority: &str, id: &str) -> String {
    name(authority, "cluster.v3.Cluster", id)
}

fn endpoints_name(authority: &str, id: &str) -> String {
    name(authority, "endpoint.v3.ClusterLoadAssignment", id)
}

struct Fixture {
    testbed: Testbed,
    client: XdsClient,
}

impl Fixture {
    async fn start() -> Self {
        let testbed = Testbed::start([ServerSpec::new("a", [A]), ServerSpec::new("b", [B])])
            .await
            .expect("testbed starts");
        let (a, b) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
        let bootstrap = bootstrap_json(&a, &[(A, &[a.as_str()]), (B, &[b.as_str()])], "");
        let client =
            XdsClient::builder(Bootstrap::from_json_str(&bootstrap).expect("valid bootstrap"))
                .transport_options(fast_transport())
                .build()
                .expect("inside a tokio runtime");
        Self { testbed, client }
    }

    fn a(&self) -> &Arc<Server> {
        self.testbed.server("a").expect("server a")
    }

    fn b(&self) -> &Arc<Server> {
        self.testbed.server("b").expect("server b")
    }

    /// An EDS cluster `id` on `server` of `authority`, with one endpoint.
    fn set_cluster(&self, server: &Server, authority: &str, id: &str, port: u32) {
        let (c, e) = (cluster_name(authority, id), endpoints_name(authority, id));
        server.set_message(&c, &cluster(&c, &e)).expect("stored");
        server
            .set_message(&e, &endpoints(&e, &[("127.0.0.1", port)]))
            .expect("stored");
    }

    /// Listener `id` on A, routing everything to cluster `api` on B.
    fn set_listener(&self, id: &str) {
        let api = cluster_name(B, "api");
        self.a()
            .set_message(&route(id), &route_config(&route(id), &[("/", &api)]))
            .expect("stored");
        self.a()
            .set_message(&listener(id), &api_listener(&listener(id), &route(id)))
            .expect("stored");
    }

    fn graph(
        &self,
        build: impl FnOnce(xdsfed::graph::ConfigGraphBuilder) -> xdsfed::graph::ConfigGraphBuilder,
    ) -> ConfigGraph {
        let builder = ConfigGraph::builder(self.client.clone())
            // Well past PATIENCE: no snapshot here is published because a
            // warming timer gave up.
            .options(GraphOptions::default().with_warming_timeout(Duration::from_secs(60)));
        build(builder).start()
    }
}

fn members(s: &Snapshot, collection: &str) -> Vec<String> {
    s.collection(collection)
        .map(|c| c.members().map(|m| m.to_string()).collect())
        .unwrap_or_default()
}

/// Whether cluster `name` is usable with an endpoint on `port`.
fn serves(s: &Snapshot, name: &str, port: u32) -> bool {
    let Some(c) = s.cluster(name).filter(|c| c.is_ok()) else {
        return false;
    };
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &c.endpoints
    else {
        return false;
    };
    assignment
        .value
        .endpoints()
        .any(|e| u32::from(e.port) == port)
}

/// A glob of listeners on A: each member is followed to its routes and on
/// to a cluster on B; a member added on the server joins the graph, a
/// member deleted leaves it, and the empty glob empties the collection.
#[tokio::test]
async fn glob_of_listeners_is_a_root_whose_members_come_and_go() {
    let fx = Fixture::start().await;
    fx.set_cluster(fx.b(), B, "api", 9001);
    fx.set_listener("edge/one");
    let glob = listener("edge/*");
    let mut graph = fx.graph(|b| b.listener_collection(glob.clone()));

    let first = graph.ready().await.expect("the graph's task runs");
    assert_eq!(members(&first, &glob), [listener("edge/one")]);
    let one = first.listener(&listener("edge/one"));
    assert!(one.is_some_and(|l| l.error.is_none()), "{one:?}");
    assert!(
        serves(&first, &cluster_name(B, "api"), 9001),
        "{}",
        summary(&first)
    );
    let api = first.cluster(&cluster_name(B, "api"));
    let server = api
        .and_then(|c| c.cluster.as_ref())
        .map(|v| v.provenance.server.to_string())
        .unwrap_or_default();
    assert!(server.starts_with(&fx.b().uri()), "from B, not {server}");

    fx.set_listener("edge/two");
    snapshot_where(&mut graph, "edge/two joined", |s| {
        members(s, &glob) == [listener("edge/one"), listener("edge/two")]
            && s.listener(&listener("edge/two"))
                .is_some_and(|l| l.error.is_none())
            && s.route_config(&route("edge/two")).is_some()
    })
    .await;

    fx.a()
        .delete_resource(LDS, &listener("edge/one"))
        .expect("deleted");
    let s = snapshot_where(&mut graph, "edge/one left", |s| {
        members(s, &glob) == [listener("edge/two")]
    })
    .await;
    assert!(s.listener(&listener("edge/one")).is_none());
    assert!(
        s.route_config(&route("edge/one")).is_none(),
        "its route is no longer reached"
    );
    assert!(
        serves(&s, &cluster_name(B, "api"), 9001),
        "edge/two still reaches api"
    );

    fx.a()
        .delete_resource(LDS, &listener("edge/two"))
        .expect("deleted");
    let s = snapshot_where(&mut graph, "the glob is empty", |s| {
        members(s, &glob).is_empty()
    })
    .await;
    assert_eq!(s.listeners().count(), 0);
    assert_eq!(s.cluster_count(), 0, "nothing reaches api any more");
}

/// A cluster list collection on A with locators on A and B and an inline
/// entry: the first snapshot waits for every member and its endpoints,
/// each fetched from its own authority; a member the collection drops
/// leaves the graph.
#[tokio::test]
async fn list_collection_of_clusters_is_followed_across_authorities() {
    let fx = Fixture::start().await;
    fx.set_cluster(fx.a(), A, "local", 9101);
    fx.set_cluster(fx.b(), B, "remote", 9102);
    let inline_endpoints = endpoints_name(A, "inline");
    fx.a()
        .set_message(
            &inline_endpoints,
            &endpoints(&inline_endpoints, &[("127.0.0.1", 9103)]),
        )
        .expect("stored");
    let pool = name(A, "cluster.v3.ClusterCollection", "pool");
    let (local, remote) = (cluster_name(A, "local"), cluster_name(B, "remote"));
    fx.a()
        .set_resource(
            &pool,
            cluster_collection(vec![
                locator(&local),
                locator(&remote),
                inline("inline", &inline_endpoints),
            ]),
        )
        .expect("stored");
    let mut graph = fx.graph(|b| b.cluster_collection(pool.clone()));

    let first = graph.ready().await.expect("the graph's task runs");
    let inline_member = format!("{pool}#entry=inline");
    assert_eq!(
        members(&first, &pool),
        [local.clone(), inline_member.clone(), remote.clone()],
        "sorted by name"
    );
    assert!(serves(&first, &local, 9101), "{}", summary(&first));
    assert!(serves(&first, &remote, 9102), "{}", summary(&first));
    assert!(serves(&first, &inline_member, 9103), "{}", summary(&first));
    let from = |n: &str| {
        first
            .cluster(n)
            .and_then(|c| c.cluster.as_ref())
            .map(|v| v.provenance.server.to_string())
    };
    let (from_local, from_remote) = (
        from(&local).unwrap_or_default(),
        from(&remote).unwrap_or_default(),
    );
    assert!(from_local.starts_with(&fx.a().uri()), "{from_local}");
    assert!(
        from_remote.starts_with(&fx.b().uri()),
        "fetched on its own authority, not {from_remote}"
    );

    fx.a()
        .set_resource(&pool, cluster_collection(vec![locator(&local)]))
        .expect("stored");
    let s = snapshot_where(&mut graph, "the collection dropped two members", |s| {
        members(s, &pool) == [local.clone()]
    })
    .await;
    assert!(s.cluster(&remote).is_none());
    assert!(s.cluster(&inline_member).is_none());
    assert!(serves(&s, &local, 9101));

    // A cluster deleted on its server while listed stays listed, failed.
    fx.a().delete_resource(CDS, &local).expect("deleted");
    let s = snapshot_where(&mut graph, "the listed member is gone", |s| {
        s.cluster(&local).is_some_and(|c| !c.is_ok())
    })
    .await;
    assert_eq!(members(&s, &pool), std::slice::from_ref(&local));
}
