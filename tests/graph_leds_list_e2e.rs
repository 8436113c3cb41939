//! LEDS through a list collection end to end (gRFC A95): a cluster whose
//! ClusterLoadAssignment takes a locality's endpoints from an
//! `LbEndpointCollection` of inline `LbEndpoint`s, served by the testbed
//! over SotW and delta ADS and followed by the real client and graph.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::{cluster, lb_endpoint_collection, leds_list_endpoints};
use common::{bootstrap_json, client_with, snapshot_where};
use envoy_types::pb::envoy::config::core::v3::Node;
use xdsfed::core::bootstrap::ApiVariant;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, Snapshot};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const A: &str = "a.example";
const CLUSTER: &str = "xdstp://a.example/envoy.config.cluster.v3.Cluster/web";
const CLA: &str = "xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/web";
const LIST: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpointCollection/web";
const LIST_TYPE: &str = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpointCollection";
const FEATURE: &str = "xds.endpoint.supports_lb_endpoint_collection";

/// The ports of the cluster's LEDS locality, in entry-name order; `None`
/// while the cluster has no assignment.
fn ports(s: &Snapshot) -> Option<Vec<u32>> {
    let c = s.cluster(CLUSTER)?;
    let ClusterEndpoints::Eds {
        assignment: Some(a),
        ..
    } = &c.endpoints
    else {
        return None;
    };
    let locality = a.value.localities().next()?;
    Some(locality.endpoints().map(|e| u32::from(e.port)).collect())
}

/// The nodes of the first request of each stream, and the type URLs asked
/// for, over `variant`.
fn requests(server: &Server, variant: ApiVariant) -> (Vec<Node>, Vec<String>) {
    let mut nodes = Vec::new();
    let mut types = Vec::new();
    for stream in server.recording().streams() {
        match variant {
            ApiVariant::Delta => {
                for r in stream.delta_requests() {
                    nodes.extend(r.node.clone());
                    types.push(r.type_url.clone());
                }
            }
            ApiVariant::Sotw => {
                for r in stream.sotw_requests() {
                    nodes.extend(r.node.clone());
                    types.push(r.type_url.clone());
                }
            }
        }
    }
    (nodes, types)
}

/// gRFC A95: the locality's endpoints are the collection's inline
/// `LbEndpoint`s; the collection is requested as a list collection and
/// the node advertises `xds.endpoint.supports_lb_endpoint_collection`.
async fn list_leds_entries_reach_the_snapshot_and_follow_updates(variant: ApiVariant) {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = testbed.server("a").unwrap();
    server.set_message(CLUSTER, &cluster(CLUSTER, CLA)).unwrap();
    server
        .set_message(CLA, &leds_list_endpoints(CLA, LIST))
        .unwrap();
    let two = [("e1", "10.0.0.1", 8001), ("e2", "10.0.0.1", 8002)];
    server
        .set_message(LIST, &lb_endpoint_collection(&two))
        .unwrap();
    let uri = server.uri();
    let client = client_with(&bootstrap_json(&uri, &[(A, &[uri.as_str()])], ""), variant);
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let first = snapshot_where(&mut graph, "both entries are in", |s| {
        ports(s) == Some(vec![8001, 8002])
    })
    .await;
    assert!(first.cluster(CLUSTER).unwrap().is_ok());

    // An entry changes and another leaves: the collection is sent whole.
    let one = [("e1", "10.0.0.1", 9001)];
    server
        .set_message(LIST, &lb_endpoint_collection(&one))
        .unwrap();
    snapshot_where(&mut graph, "e1 changed and e2 left", |s| {
        ports(s) == Some(vec![9001])
    })
    .await;

    // No entries: the locality is unreachable.
    server
        .set_message(LIST, &lb_endpoint_collection(&[]))
        .unwrap();
    let last = snapshot_where(&mut graph, "no entries", |s| ports(s) == Some(Vec::new())).await;
    assert!(last.cluster(CLUSTER).unwrap().is_ok());

    let (nodes, types) = requests(server, variant);
    assert!(types.iter().any(|t| t == LIST_TYPE), "{types:?}");
    assert!(!nodes.is_empty());
    for node in nodes {
        assert!(
            node.client_features.iter().any(|f| f == FEATURE),
            "{:?}",
            node.client_features
        );
    }
    graph.shutdown().await;
    testbed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_leds_entries_reach_the_snapshot_and_follow_updates_over_sotw() {
    list_leds_entries_reach_the_snapshot_and_follow_updates(ApiVariant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_leds_entries_reach_the_snapshot_and_follow_updates_over_delta() {
    list_leds_entries_reach_the_snapshot_and_follow_updates(ApiVariant::Delta).await;
}
