//! A snapshot names the server that really sent each copy: after gRFC A71
//! fallback from an unreachable gRPC server to a filesystem source, the
//! cluster's provenance is the file, not the authority's first server.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{client, snapshot_where};
use xdsfed::graph::ConfigGraph;

const CLUSTER: &str = "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/db";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provenance_names_the_fallback_file_that_served_the_copy() {
    // A port nothing listens on: the authority's first server is down.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_uri = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("onprem.yaml");
    std::fs::write(
        &file,
        format!(
            r#"version_info: "7"
resources:
  - "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
    name: {CLUSTER}
    type: STATIC
    load_assignment:
      cluster_name: {CLUSTER}
      endpoints:
        - lb_endpoints:
            - endpoint: {{address: {{socket_address: {{address: 10.0.0.5, port_value: 5432}}}}}}
"#
        ),
    )
    .unwrap();
    let grpc =
        format!(r#"{{"server_uri": "{dead_uri}", "channel_creds": [{{"type": "insecure"}}]}}"#);
    let local = format!(r#"{{"server_uri": "file://{}"}}"#, file.display());
    let bootstrap = format!(
        r#"{{"xds_servers": [{grpc}], "node": {{"id": "n"}},
            "authorities": {{"onprem.example": {{"xds_servers": [{grpc}, {local}]}}}}}}"#
    );
    let client = client(&bootstrap);
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let ready = snapshot_where(&mut graph, "the cluster arrived from the file", |s| {
        s.cluster(CLUSTER).is_some_and(|c| c.cluster.is_some())
    })
    .await;
    let copy = ready.cluster(CLUSTER).unwrap().cluster.clone().unwrap();
    assert!(
        copy.provenance.server.starts_with("file://"),
        "the snapshot says {} sent it",
        copy.provenance.server
    );
    assert_eq!(copy.provenance.version, "7");
    graph.shutdown().await;
}
