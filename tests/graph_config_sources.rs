//! ConfigSources beside names, end to end (xDS TP1 "Transport network
//! addressing"): a cluster's `eds_config` that names its own server and lists
//! the authorities it serves sends the endpoints there, beside the
//! bootstrap's servers; one that claims an authority the bootstrap maps to
//! another server is refused on the cluster, with the reason; one that names
//! a file (`path_config_source`) has the endpoints read from it. The trust rule
//! is in docs/federation.md ("ConfigSources beside names").

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "graph_config_sources/allowed_grpc_services.rs"]
mod allowed_grpc_services;
mod common;

use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::grpc_service::{GoogleGrpc, TargetSpecifier};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ConfigSource, GrpcService, PathConfigSource,
};
use envoy_types::pb::xds::core::v3::Authority;

use common::resources::{cluster, endpoints};
use common::{client, snapshot_where};
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, GraphError};
use xdsfed::testbed::{ServerSpec, Testbed};

const A: &str = "a.example";
const B: &str = "b.example";
const CLUSTER: &str = "xdstp://a.example/envoy.config.cluster.v3.Cluster/web";
const CLA: &str = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/web";

/// A ConfigSource that serves `authority` from the delta ADS server `uri`.
fn source_naming(uri: &str, authority: &str) -> ConfigSource {
    let target = uri.trim_start_matches("http://");
    ConfigSource {
        authorities: vec![Authority {
            name: authority.into(),
        }],
        config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
            api_type: 6, // AGGREGATED_DELTA_GRPC
            grpc_services: vec![GrpcService {
                target_specifier: Some(TargetSpecifier::GoogleGrpc(GoogleGrpc {
                    target_uri: target.into(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A bootstrap whose authority `a.example` (and the default) is `first`,
/// trusted, plus any `extra` authorities.
fn bootstrap(first: &str, extra: &str) -> String {
    let server = |uri: &str, features: &str| {
        format!(
            r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}], "server_features": [{features}]}}"#
        )
    };
    let trusted = server(first, r#""trusted_xds_server""#);
    format!(
        r#"{{"xds_servers": [{trusted}], "node": {{"id": "n", "cluster": "c"}},
            "authorities": {{"{A}": {{"xds_servers": [{trusted}]}}{extra}}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_come_from_the_server_the_clusters_config_source_names() {
    let testbed = Testbed::start([ServerSpec::new("a", [A]), ServerSpec::new("b", [B])])
        .await
        .unwrap();
    let (a, b) = (testbed.server("a").unwrap(), testbed.server("b").unwrap());
    let mut web = cluster(CLUSTER, CLA);
    web.eds_cluster_config.as_mut().unwrap().eds_config = Some(source_naming(&b.uri(), B));
    a.set_message(CLUSTER, &web).unwrap();
    b.set_message(CLA, &endpoints(CLA, &[("10.0.0.7", 8080)]))
        .unwrap();
    // The bootstrap knows only a.example: b.example exists for this client
    // only through the cluster's ConfigSource.
    let client = client(&bootstrap(&a.uri(), ""));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let ready = snapshot_where(&mut graph, "the endpoints arrived from b", |s| {
        s.cluster(CLUSTER).is_some_and(|c| {
            matches!(
                &c.endpoints,
                ClusterEndpoints::Eds {
                    assignment: Some(_),
                    ..
                }
            )
        })
    })
    .await;
    let web = ready.cluster(CLUSTER).unwrap();
    assert!(web.is_ok(), "{:?}", web.error);
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &web.endpoints
    else {
        unreachable!()
    };
    assert!(
        assignment
            .provenance
            .server
            .starts_with(&b.addr().to_string()),
        "delivered by {}",
        assignment.provenance.server
    );
    assert_eq!(assignment.value.endpoint_count(), 1);
    graph.shutdown().await;
    testbed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_come_from_the_file_the_clusters_config_source_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("endpoints.yaml");
    std::fs::write(
        &file,
        format!(
            r#"version_info: "3"
resources:
  - "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
    cluster_name: {CLA}
    endpoints:
      - lb_endpoints:
          - endpoint: {{address: {{socket_address: {{address: 10.0.0.8, port_value: 9090}}}}}}
"#
        ),
    )
    .unwrap();
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let a = testbed.server("a").unwrap();
    let mut web = cluster(CLUSTER, CLA);
    web.eds_cluster_config.as_mut().unwrap().eds_config = Some(ConfigSource {
        authorities: vec![Authority { name: B.into() }],
        config_source_specifier: Some(ConfigSourceSpecifier::PathConfigSource(PathConfigSource {
            path: file.display().to_string(),
            ..Default::default()
        })),
        ..Default::default()
    });
    a.set_message(CLUSTER, &web).unwrap();
    let client = client(&bootstrap(&a.uri(), ""));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let ready = snapshot_where(&mut graph, "the endpoints arrived from the file", |s| {
        s.cluster(CLUSTER).is_some_and(|c| {
            matches!(
                &c.endpoints,
                ClusterEndpoints::Eds {
                    assignment: Some(_),
                    ..
                }
            )
        })
    })
    .await;
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &ready.cluster(CLUSTER).unwrap().endpoints
    else {
        unreachable!()
    };
    assert!(
        assignment.provenance.server.starts_with("file://"),
        "delivered by {}",
        assignment.provenance.server
    );
    assert_eq!(assignment.provenance.version, "3");
    graph.shutdown().await;
    testbed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_source_claiming_an_authority_the_bootstrap_maps_elsewhere_is_refused() {
    let testbed = Testbed::start([
        ServerSpec::new("a", [A]),
        ServerSpec::new("b", [B]),
        ServerSpec::new("rogue", [B]),
    ])
    .await
    .unwrap();
    let a = testbed.server("a").unwrap();
    let b = testbed.server("b").unwrap();
    let rogue = testbed.server("rogue").unwrap();
    let mut web = cluster(CLUSTER, CLA);
    web.eds_cluster_config.as_mut().unwrap().eds_config = Some(source_naming(&rogue.uri(), B));
    a.set_message(CLUSTER, &web).unwrap();
    b.set_message(CLA, &endpoints(CLA, &[("10.0.0.7", 8080)]))
        .unwrap();
    rogue
        .set_message(CLA, &endpoints(CLA, &[("10.6.6.6", 6666)]))
        .unwrap();
    let b_server = format!(
        r#"{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}]}}"#,
        b.uri()
    );
    let extra = format!(r#", "{B}": {{"xds_servers": [{b_server}]}}"#);
    let client = client(&bootstrap(&a.uri(), &extra));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let refused = snapshot_where(&mut graph, "the cluster is refused", |s| {
        s.cluster(CLUSTER).is_some_and(|c| c.error.is_some())
    })
    .await;
    let error = refused.cluster(CLUSTER).unwrap().error.clone().unwrap();
    assert!(
        matches!(error, GraphError::ConfigSourceRefused { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&rogue.uri().replace("http://", "")) && text.contains(B),
        "{text}"
    );
    // The rogue server was never asked for anything.
    assert!(rogue.recording().streams().is_empty());
    graph.shutdown().await;
    testbed.shutdown().await;
}
