//! JSON and YAML bodies have a size bound of their own, below the binary
//! one (`TransportOptions::max_text_message_size`): over loopback REST and
//! with filesystem sources, a text body over it is refused and the
//! watcher's error names the limit, while a binary file of the same size is
//! read.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;
use xdsfed_core::types::ClusterView;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::{Message as _, Name as _};
use xdsfed_client::client::XdsClient;
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_client::watch::WatchEvent;
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::types::ClusterType;
use xdsfed_testbed::resources::cluster;
use xdsfed_testbed::{Protocol, ServerSpec, Testbed};

const PATIENCE: Duration = Duration::from_secs(10);
/// The text bound the clients below are given.
const TEXT_LIMIT: usize = 4096;

fn options() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        max_text_message_size: TEXT_LIMIT,
        backoff: BackoffConfig {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
            ..defaults.backoff
        },
        ..defaults
    }
}

fn client(server: &str) -> XdsClient {
    let json = format!(r#"{{"xds_servers": [{server}], "node": {{"id": "text-bodies"}}}}"#);
    XdsClient::builder(Bootstrap::from_json_str(&json).unwrap())
        .transport_options(options())
        .build()
        .unwrap()
}

/// `count` clusters `c0`, `c1`, … in one response.
fn response(count: usize) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: "1".into(),
        type_url: Cluster::type_url(),
        resources: (0..count)
            .map(|i| envoy_types::pb::google::protobuf::Any {
                type_url: Cluster::type_url(),
                value: cluster(&format!("c{i}"), "svc").encode_to_vec(),
            })
            .collect(),
        ..Default::default()
    }
}

/// The first event on `c0` other than does-not-exist.
async fn first_event(client: &XdsClient) -> WatchEvent<ClusterView> {
    let mut watch = client.watch::<ClusterType>("c0").unwrap();
    loop {
        let event = tokio::time::timeout(PATIENCE, watch.next())
            .await
            .expect("an event in time")
            .unwrap();
        if !matches!(event, WatchEvent::DoesNotExist) {
            return event;
        }
    }
}

fn says_over_the_limit(event: &WatchEvent<ClusterView>, limit: &str) {
    match event {
        WatchEvent::Error(e) | WatchEvent::AmbientError(e) => {
            assert!(e.message().contains(limit), "{}", e.message());
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A `.json` or `.yaml` file of a filesystem source over the text bound is
/// refused unread; the same response as binary protobuf is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_source_refuses_a_text_file_over_the_text_limit() {
    let dir = tempfile::tempdir().unwrap();
    let response = response(100);
    let json = xdsfed_core::json::discovery_response_to_json(&response).unwrap();
    assert!(json.len() > TEXT_LIMIT);
    for (name, bytes) in [("big.json", json.clone()), ("big.yaml", json)] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let server = format!(r#"{{"server_uri": "file://{}"}}"#, path.display());
        says_over_the_limit(&first_event(&client(&server)).await, "4096 bytes");
    }
    let path = dir.path().join("big.pb");
    std::fs::write(&path, response.encode_to_vec()).unwrap();
    let server = format!(r#"{{"server_uri": "file://{}"}}"#, path.display());
    assert!(matches!(
        first_event(&client(&server)).await,
        WatchEvent::Changed(_)
    ));
}

/// A REST-JSON response over the text bound is refused unread: a failure
/// of the source whose error names the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_source_refuses_a_json_body_over_the_text_limit() {
    let testbed = Testbed::start([
        ServerSpec::new("rest", Vec::<String>::new()).with_protocol(Protocol::Rest)
    ])
    .await
    .unwrap();
    let rest = &testbed.servers()[0];
    for i in 0..100 {
        let name = format!("c{i}");
        rest.set_message(&name, &cluster(&name, "svc")).unwrap();
    }
    let server = format!(
        r#"{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}],
             "api_type": "REST", "refresh_delay": "0.05s", "request_timeout": "1s"}}"#,
        rest.uri()
    );
    let client = client(&server);
    // Every cluster is asked for: the answer holds all hundred.
    let _all = client.watch_wildcard::<ClusterType>().unwrap();
    says_over_the_limit(&first_event(&client).await, "max_text_message_size");
}
