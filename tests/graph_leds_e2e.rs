//! LEDS end to end (xDS TP1): a cluster whose ClusterLoadAssignment takes a
//! locality's endpoints from an `LbEndpoint` glob collection, served by the
//! testbed over delta ADS and followed by the real client and graph. A
//! member endpoint joins, changes and leaves; each travels as one small
//! `LbEndpoint` resource and reaches the snapshot in the assignment's
//! locality.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::{LEDS, cluster, lb_endpoint, leds_endpoints};
use common::{bootstrap_json, client, snapshot_where};
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, Snapshot};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const A: &str = "a.example";
const CLUSTER: &str = "xdstp://a.example/envoy.config.cluster.v3.Cluster/web";
const CLA: &str = "xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/web";
const GLOB: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpoint/web/*";

fn member(id: &str) -> String {
    GLOB.replace('*', id)
}

fn set_member(server: &Server, id: &str, port: u32) {
    server
        .set_message(&member(id), &lb_endpoint("10.0.0.1", port))
        .unwrap();
}

/// The ports of the cluster's LEDS locality, in member-name order.
fn ports(s: &Snapshot) -> Vec<u32> {
    let Some(c) = s.cluster(CLUSTER) else {
        return Vec::new();
    };
    let ClusterEndpoints::Eds {
        assignment: Some(a),
        ..
    } = &c.endpoints
    else {
        return Vec::new();
    };
    a.value.localities().next().map_or(Vec::new(), |l| {
        l.endpoints().map(|e| u32::from(e.port)).collect()
    })
}

/// How many LbEndpoint resources the server has sent in delta responses.
fn leds_resources_sent(server: &Server) -> usize {
    server
        .recording()
        .streams()
        .iter()
        .flat_map(|s| s.delta_responses().cloned().collect::<Vec<_>>())
        .filter(|r| r.type_url == LEDS)
        .map(|r| r.resources.len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leds_member_joins_changes_and_leaves_through_the_graph() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = testbed.server("a").unwrap();
    server.set_message(CLUSTER, &cluster(CLUSTER, CLA)).unwrap();
    server.set_message(CLA, &leds_endpoints(CLA, GLOB)).unwrap();
    set_member(server, "e1", 8001);
    set_member(server, "e2", 8002);
    let uri = server.uri();
    let client = client(&bootstrap_json(&uri, &[(A, &[uri.as_str()])], ""));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let first = snapshot_where(&mut graph, "both members are in", |s| {
        ports(s) == [8001, 8002]
    })
    .await;
    assert!(first.cluster(CLUSTER).unwrap().is_ok());
    let sent = leds_resources_sent(server);
    assert_eq!(sent, 2, "the first answer carries the two members");

    // Join: one new resource on the wire.
    set_member(server, "e3", 8003);
    snapshot_where(&mut graph, "e3 joined", |s| ports(s) == [8001, 8002, 8003]).await;
    assert_eq!(leds_resources_sent(server), sent + 1);

    // Change: one resource again; the others are the same allocation's
    // content, and the assignment itself was not sent again.
    set_member(server, "e1", 9001);
    snapshot_where(&mut graph, "e1 changed", |s| ports(s) == [9001, 8002, 8003]).await;
    assert_eq!(leds_resources_sent(server), sent + 2);

    // Leave: a removal, no resource.
    assert!(server.delete_resource(LEDS, &member("e2")).unwrap());
    let last = snapshot_where(&mut graph, "e2 left", |s| ports(s) == [9001, 8003]).await;
    assert_eq!(leds_resources_sent(server), sent + 2);
    assert!(last.cluster(CLUSTER).unwrap().is_ok());
    graph.shutdown().await;
    testbed.shutdown().await;
}

/// Whether the client has asked the server to unsubscribe `name` of LEDS.
fn leds_unsubscribed(server: &Server, name: &str) -> bool {
    server.recording().streams().iter().any(|s| {
        s.delta_requests()
            .any(|r| r.type_url == LEDS && r.resource_names_unsubscribe.iter().any(|n| n == name))
    })
}

/// The assignment moves its locality to another glob: the graph follows
/// the new collection, unsubscribes the old one, and a change under the
/// old glob no longer reaches a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_that_moves_to_another_glob_leaves_the_old_one() {
    const OTHER: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpoint/web-v2/*";
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = testbed.server("a").unwrap();
    server.set_message(CLUSTER, &cluster(CLUSTER, CLA)).unwrap();
    server.set_message(CLA, &leds_endpoints(CLA, GLOB)).unwrap();
    set_member(server, "e1", 8001);
    let moved = OTHER.replace('*', "n1");
    server
        .set_message(&moved, &lb_endpoint("10.0.0.2", 7001))
        .unwrap();
    let uri = server.uri();
    let client = client(&bootstrap_json(&uri, &[(A, &[uri.as_str()])], ""));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    snapshot_where(&mut graph, "the first glob's member", |s| {
        ports(s) == [8001]
    })
    .await;

    server
        .set_message(CLA, &leds_endpoints(CLA, OTHER))
        .unwrap();
    snapshot_where(&mut graph, "the other glob's member", |s| {
        ports(s) == [7001]
    })
    .await;
    let deadline = tokio::time::Instant::now() + common::PATIENCE;
    while !leds_unsubscribed(server, GLOB) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old glob was never unsubscribed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // Changes under both globs: the snapshot follows the new one's.
    set_member(server, "e1", 8101);
    server
        .set_message(&moved, &lb_endpoint("10.0.0.2", 7101))
        .unwrap();
    let last = snapshot_where(&mut graph, "the new glob's change", |s| ports(s) == [7101]).await;
    assert!(last.cluster(CLUSTER).unwrap().is_ok());
    graph.shutdown().await;
    testbed.shutdown().await;
}
