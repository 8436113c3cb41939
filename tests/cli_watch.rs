//! `xdsfed watch`: a line per event, JSON lines, the snapshot tree of a
//! listener as it changes, and the admin endpoint (CSDS over gRPC,
//! Prometheus text on /metrics) of the running client.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use std::io::{Read, Write};

use prost::Message;

use cli_fixture::{
    CLOUD, Fixture, ONPREM, Running, cluster_name, endpoints_name, listener_name, refused,
};
use common::resources::{cluster, cluster_collection, endpoints, locator};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::service::status::v3::ClientStatusRequest;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_client::ClientStatusDiscoveryServiceClient;

#[test]
fn watch_prints_a_line_per_change_of_a_resource() {
    let fx = Fixture::start();
    let name = endpoints_name(ONPREM, "api");
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "endpoint",
        &name,
    ]);
    let first = watch.line_where("CHANGED", |l| l.contains("CHANGED"));
    assert!(first.contains("onprem.example/api"), "{first}");
    assert!(
        first.contains("1 endpoint in 1 locality: 127.0.0.1:9090"),
        "{first}"
    );

    fx.testbed
        .server("onprem")
        .unwrap()
        .set_message(
            &name,
            &endpoints(&name, &[("127.0.0.1", 9091), ("127.0.0.1", 9092)]),
        )
        .unwrap();
    let second = watch.line_where("the update", |l| l.contains("CHANGED"));
    assert!(
        second.contains("2 endpoints in 1 locality: 127.0.0.1:9091, 127.0.0.1:9092"),
        "{second}"
    );

    fx.testbed
        .server("onprem")
        .unwrap()
        .delete_resource(common::resources::EDS, &name)
        .unwrap();
    watch.line_where("the deletion", |l| l.contains("DOES_NOT_EXIST"));
}

#[test]
fn watch_json_prints_one_object_per_line() {
    let fx = Fixture::start();
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--json",
    ]);
    let line = watch.line_where("a JSON event", |l| l.starts_with('{'));
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["event"], "changed");
    assert_eq!(event["type"], "cluster");
    assert_eq!(event["name"], cluster_name(CLOUD, "web").as_str());
    assert!(event["time_unix_ms"].as_u64().is_some());
}

#[test]
fn watch_of_a_listener_prints_the_tree_again_when_it_changes() {
    let fx = Fixture::start();
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        &listener_name(),
    ]);
    watch.line_where("the first snapshot", |l| l.contains("snapshot 1 ·"));
    watch.line_where("the onprem endpoints", |l| l.contains("127.0.0.1:9090"));

    let name = endpoints_name(ONPREM, "api");
    fx.testbed
        .server("onprem")
        .unwrap()
        .set_message(&name, &endpoints(&name, &[("127.0.0.1", 9999)]))
        .unwrap();
    watch.line_where("the new endpoint in a new tree", |l| {
        l.contains("127.0.0.1:9999")
    });
}

#[test]
fn admin_serves_csds_and_a78_metrics_of_the_running_client() {
    let fx = Fixture::start();
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        &listener_name(),
        "--admin",
        "127.0.0.1:0",
    ]);
    let admin_line = watch.line_where("the admin address", |l| l.starts_with("admin "));
    let admin = admin_line.split(' ').nth(1).unwrap().to_owned();
    assert!(
        admin.starts_with("127.0.0.1:") && !admin.ends_with(":0"),
        "{admin_line}"
    );
    watch.line_where("the first snapshot", |l| l.contains("snapshot 1 ·"));

    let (fetched, streamed) = fx.runtime.block_on(async {
        let mut csds = ClientStatusDiscoveryServiceClient::connect(format!("http://{admin}"))
            .await
            .unwrap();
        let fetched = csds
            .fetch_client_status(ClientStatusRequest::default())
            .await
            .unwrap()
            .into_inner();
        let requests = tokio_stream::iter([ClientStatusRequest::default()]);
        let mut stream = csds
            .stream_client_status(requests)
            .await
            .unwrap()
            .into_inner();
        let streamed = stream.message().await.unwrap().unwrap();
        (fetched, streamed)
    });
    // `--admin` names the client by the channel target of the listener.
    let target = format!("xds://{CLOUD}/front");
    for response in [&fetched, &streamed] {
        let config = &response.config[0];
        assert_eq!(config.node.as_ref().unwrap().id, "cli-test");
        assert_eq!(config.client_scope, target);
        let listener = config
            .generic_xds_configs
            .iter()
            .find(|c| c.name == listener_name())
            .expect("the listener is in the dump");
        // envoy.admin.v3.ClientResourceStatus.ACKED
        assert_eq!(listener.client_status, 3);
        assert!(!listener.version_info.is_empty());
        let any = listener.xds_config.as_ref().expect("the resource itself");
        assert_eq!(any.type_url, listener.type_url);
        let decoded = Listener::decode(any.value.as_slice()).unwrap();
        assert_eq!(decoded.name, listener_name());
        assert_eq!(config.generic_xds_configs.len(), 6);
        assert!(
            config
                .generic_xds_configs
                .iter()
                .all(|c| c.xds_config.is_some()),
            "every ACKed entry carries its resource"
        );
    }

    let mut http = std::net::TcpStream::connect(&admin).unwrap();
    write!(
        http,
        "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let cloud = fx.testbed.server("cloud").unwrap().addr().to_string();
    for wanted in [
        format!(
            "grpc_xds_client_connected{{grpc_target=\"{target}\",grpc_xds_server=\"{cloud}\"}} 1"
        ),
        format!(
            "grpc_xds_client_server_failure_total{{grpc_target=\"{target}\",grpc_xds_server=\"{cloud}\"}} 0"
        ),
        format!(
            "grpc_xds_client_resource_updates_valid_total{{grpc_target=\"{target}\",grpc_xds_server=\"{cloud}\",grpc_xds_resource_type=\"envoy.config.listener.v3.Listener\"}} "
        ),
        "# TYPE grpc_xds_client_resource_updates_invalid_total counter".to_owned(),
        format!(
            "grpc_xds_client_resources{{grpc_target=\"{target}\",grpc_xds_authority=\"{ONPREM}\",grpc_xds_cache_state=\"acked\",grpc_xds_resource_type=\"envoy.config.cluster.v3.Cluster\"}} 1"
        ),
    ] {
        assert!(text.contains(&wanted), "{wanted} in:\n{text}");
    }
}

#[test]
fn watch_with_a_bad_bootstrap_names_the_field_and_exits_2() {
    let fx = Fixture::start();
    let bad = fx.write("bad.json", r#"{"xds_servers": [], "node": {"id": "n"}}"#);
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        bad.to_str().unwrap(),
        "--wildcard",
        "listener",
    ]);
    assert!(stderr.contains("xds_servers"), "{stderr}");
}

/// The state directory's files: a `--state-dir` that is a regular file is
/// bad input, named with the flag, not a client that retries forever.
#[test]
fn watch_refuses_a_state_dir_that_is_a_regular_file_and_exits_2() {
    let fx = Fixture::start();
    let file = fx.write("state", "a file");
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--state-dir",
        file.to_str().unwrap(),
    ]);
    assert!(stderr.contains("--state-dir"), "{stderr}");
    assert!(stderr.contains(file.to_str().unwrap()), "{stderr}");
    assert!(stderr.contains("not a directory"), "{stderr}");
}

#[test]
fn watch_needs_exactly_one_target() {
    let fx = Fixture::start();
    refused(&["watch", "--bootstrap", fx.bootstrap()]);
    refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        "a",
        "--wildcard",
        "cluster",
    ]);
    refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--collection",
        "cluster",
        "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/*",
    ]);
}

/// `--collection` takes a glob (`…/*`) or a list collection
/// (`…Collection/…`); anything else is bad input with both forms as a hint.
#[test]
fn watch_collection_refuses_a_name_that_is_no_collection() {
    let fx = Fixture::start();
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--collection",
        "cluster",
        &cluster_name(CLOUD, "web"),
    ]);
    assert!(
        stderr.contains("neither a glob collection nor a list collection"),
        "{stderr}"
    );
    assert!(
        stderr.contains("/pool/*") && stderr.contains("ClusterCollection/foo"),
        "{stderr}"
    );

    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--collection",
        "endpoint",
        "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignmentCollection/foo",
    ]);
    assert!(stderr.contains("listener and cluster only"), "{stderr}");
}

/// A collection of an authority the bootstrap does not know is refused
/// before anything is sent.
#[test]
fn watch_collection_of_an_unknown_authority_exits_2() {
    let fx = Fixture::start();
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--collection",
        "cluster",
        "xdstp://elsewhere.example/envoy.config.cluster.v3.Cluster/pool/*",
    ]);
    assert!(stderr.contains("elsewhere.example"), "{stderr}");
}

/// `--graph` with a cluster list collection: each member cluster is a root,
/// drawn under the collection with its endpoints, each from its own
/// authority; in JSON, the collection is a resource with an edge to each
/// member.
#[test]
fn watch_graph_of_a_cluster_list_collection_draws_each_member_with_its_endpoints() {
    let fx = Fixture::start();
    let pool = "xdstp://cloud.example/envoy.config.cluster.v3.ClusterCollection/pool";
    let (web, api) = (cluster_name(CLOUD, "web"), cluster_name(ONPREM, "api"));
    fx.testbed
        .server("cloud")
        .unwrap()
        .set_resource(pool, cluster_collection(vec![locator(&web), locator(&api)]))
        .unwrap();
    let args = [
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--graph",
        "--collection",
        "cluster",
        pool,
    ];
    let mut watch = Running::spawn(&args);
    watch.line_where("the collection", |l| {
        l == "Collection pool · cloud.example · 2 members"
    });
    // Members in name order: cloud.example's, then onprem.example's.
    watch.line_where("web's endpoint", |l| l.ends_with("127.0.0.1:8080"));
    watch.line_where("api's endpoint", |l| l.ends_with("127.0.0.1:9090"));

    let mut args = args.to_vec();
    args.push("--json");
    let mut json = Running::spawn(&args);
    let line = json.line_where("a snapshot", |l| l.contains(r#""event":"snapshot""#));
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    let edges = event["snapshot"]["edges"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for member in [&web, &api] {
        assert!(
            edges
                .iter()
                .any(|e| e["from"] == pool && e["to"] == member.as_str()),
            "an edge from the collection to {member}: {edges:?}"
        );
    }
}

/// `--graph` follows listener and cluster collections only, and needs
/// `--collection`.
#[test]
fn watch_graph_refuses_other_kinds_and_needs_a_collection() {
    let fx = Fixture::start();
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--graph",
        "--collection",
        "endpoint",
        "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/pool/*",
    ]);
    assert!(
        stderr.contains("listener and cluster collections"),
        "{stderr}"
    );
    let stderr = refused(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--graph",
        "--listener",
        "xdstp://cloud.example/envoy.config.listener.v3.Listener/front",
    ]);
    assert!(
        stderr.contains("--graph goes with --collection"),
        "{stderr}"
    );
}

/// A server's name with a newline, a forged event line and an ANSI escape
/// stays on its own line, escaped (issue 19, defect 2).
#[test]
fn watch_text_escapes_names_that_would_forge_lines() {
    let fx = Fixture::start();
    let forged = "evil\n00:00:00.000 CHANGED         cluster  forged\x1b[31m";
    fx.testbed
        .server("cloud")
        .unwrap()
        .set_message(forged, &cluster(forged, "svc"))
        .unwrap();
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
    ]);
    let line = watch.line_where("the hostile name", |l| l.contains("evil"));
    assert!(
        line.contains("evil\\n00:00:00.000 CHANGED         cluster  forged\\x1b[31m"),
        "{line}"
    );
    if !watch.seen.iter().any(|l| l.contains("/web")) {
        watch.line_where("the web cluster", |l| l.contains("/web"));
    }
    for seen in &watch.seen {
        assert!(!seen.contains('\x1b'), "an escape reached stdout: {seen:?}");
        assert!(!seen.starts_with("00:00:00.000"), "a forged line: {seen}");
    }
}

/// `watch --wildcard --json` events say the version and the server that
/// sent each copy, as `--resource` events do (issue 19, defect 9).
#[test]
fn watch_wildcard_json_events_carry_version_and_source() {
    let fx = Fixture::start();
    let cloud = fx.testbed.server("cloud").unwrap().addr().to_string();
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--json",
    ]);
    let web = cluster_name(CLOUD, "web");
    let line = watch.line_where("web's event", |l| l.contains(&format!("\"{web}\"")));
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["event"], "changed", "{line}");
    assert!(
        event["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{line}"
    );
    assert!(
        event["source"]["server"]
            .as_str()
            .is_some_and(|s| s.contains(&cloud)),
        "{line}"
    );
}
