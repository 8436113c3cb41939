//! gRFC A102 `allowed_grpc_services` end to end: a cluster from a server
//! without `trusted_xds_server` whose `eds_config` names a second server
//! gets its endpoints from that server only when the bootstrap lists the
//! target, and then over the listed credentials (TLS and a JWT call
//! credential here, where the `GrpcService` asks for plaintext); an
//! unlisted target is refused on the cluster, naming the target. The rule
//! is in docs/federation.md ("ConfigSources beside names").

use std::path::Path;

use super::common::credentials::{jwt, pki};
use super::common::resources::{cluster, endpoints};
use super::common::{client, snapshot_where};
use super::{A, B, CLA, CLUSTER, source_naming};
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, GraphError, Snapshot};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

/// A bootstrap whose only server, `a` at `uri`, is not trusted, with the
/// `allowed_grpc_services` map `allowed` (JSON).
fn bootstrap(uri: &str, allowed: &str) -> String {
    format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "n", "cluster": "c"}},
            "authorities": {{"{A}": {{}}}},
            "allowed_grpc_services": {allowed}}}"#
    )
}

/// Serves the cluster on `a` with a ConfigSource naming `b`'s bare
/// `host:port` (a scheme would choose the transport), and its endpoints on
/// `b`; returns that target.
fn web_through(a: &Server, b: &Server) -> String {
    let target = b.addr().to_string();
    let mut web = cluster(CLUSTER, CLA);
    web.eds_cluster_config.as_mut().unwrap().eds_config = Some(source_naming(&target, B));
    a.set_message(CLUSTER, &web).unwrap();
    b.set_message(CLA, &endpoints(CLA, &[("10.0.0.7", 8080)]))
        .unwrap();
    target
}

/// `target` listed with TLS trusting `ca` and the JWT in `token`.
fn listed_with_tls(target: &str, ca: &Path, token: &Path) -> String {
    format!(
        r#"{{"{target}": {{
              "channel_creds": [{{"type": "tls", "config": {{"ca_certificate_file": "{}"}}}}],
              "call_creds": [{{"type": "jwt_token_file", "config": {{"jwt_token_file": "{}"}}}}]}}}}"#,
        ca.display(),
        token.display()
    )
}

/// The cluster has its endpoints, or is in error: either settles the test.
fn settled(s: &Snapshot) -> bool {
    s.cluster(CLUSTER).is_some_and(|c| {
        c.error.is_some()
            || matches!(
                &c.endpoints,
                ClusterEndpoints::Eds {
                    assignment: Some(_),
                    ..
                }
            )
    })
}

/// gRFC A102: "If the specified target URI *is* present in the map, then
/// the `GrpcService` proto will be considered valid, but gRPC will ignore
/// the credential information from the `GrpcService` proto; instead, it
/// will use the channel credentials and call credentials specified in the
/// map." The second server speaks only TLS: plaintext, as the source asks,
/// would never reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_servers_source_naming_a_listed_target_is_dialled_with_the_listed_credentials()
{
    let (tls, ca_pem) = pki();
    let testbed = Testbed::start([
        ServerSpec::new("a", [A]),
        ServerSpec::new("b", [B]).with_tls(tls),
    ])
    .await
    .unwrap();
    let (a, b) = (testbed.server("a").unwrap(), testbed.server("b").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (ca, token) = (dir.path().join("ca.pem"), dir.path().join("token.jwt"));
    std::fs::write(&ca, ca_pem).unwrap();
    let jwt = jwt("allowed");
    std::fs::write(&token, &jwt).unwrap();
    let target = web_through(a, b);
    let client = client(&bootstrap(&a.uri(), &listed_with_tls(&target, &ca, &token)));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let ready = snapshot_where(&mut graph, "the cluster settled", settled).await;
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
        assignment.provenance.server.starts_with(&target),
        "delivered by {}",
        assignment.provenance.server
    );
    assert_eq!(assignment.value.endpoint_count(), 1);
    let streams = b.recording().streams();
    let asked = streams
        .iter()
        .flat_map(|s| s.delta_requests())
        .any(|r| r.resource_names_subscribe.iter().any(|n| n == CLA));
    assert!(asked, "the second server was asked for {CLA}");
    assert_eq!(
        streams[0].authorization,
        vec![format!("Bearer {jwt}")],
        "the listed call credential"
    );
    graph.shutdown().await;
    testbed.shutdown().await;
}

/// gRFC A102: "If the specified target URI is not present in the map, then
/// the `GrpcService` proto will be considered invalid": the cluster is in
/// error naming the target, and the target is never dialled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_servers_source_naming_an_unlisted_target_is_refused_naming_it() {
    let testbed = Testbed::start([ServerSpec::new("a", [A]), ServerSpec::new("b", [B])])
        .await
        .unwrap();
    let (a, b) = (testbed.server("a").unwrap(), testbed.server("b").unwrap());
    let target = web_through(a, b);
    let other = r#"{"127.0.0.1:9": {"channel_creds": [{"type": "insecure"}]}}"#;
    let client = client(&bootstrap(&a.uri(), other));
    let mut graph = ConfigGraph::builder(client.clone())
        .cluster(CLUSTER)
        .start();
    let settled = snapshot_where(&mut graph, "the cluster settled", settled).await;
    let error = settled.cluster(CLUSTER).unwrap().error.clone();
    let Some(error @ GraphError::ConfigSourceRefused { .. }) = error else {
        panic!("not refused: {error:?}");
    };
    let text = error.to_string();
    assert!(text.contains(&format!("{target:?}")), "{text}");
    assert!(text.contains("allowed_grpc_services"), "{text}");
    assert!(b.recording().streams().is_empty(), "the target was dialled");
    graph.shutdown().await;
    testbed.shutdown().await;
}
