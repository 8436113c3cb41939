//! Hostile servers at the transport level, over loopback: a tarpit that
//! accepts TCP and never speaks (the handshake deadline, gRFC A57 failure
//! counting and A71 fallback), and a server that ends every stream with OK
//! after one response (backoff on every stream end).

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{PATIENCE, bootstrap_json, changed_until, describe, eventually};
use tonic::Code;
use xdsfed::client::client::XdsClient;
use xdsfed::client::transport::{BackoffConfig, TransportOptions};
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::{ApiVariant, Bootstrap};
use xdsfed::core::status::ServerStatus;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Tarpit, Testbed};

const CLOUD: &str = "cloud.example";

/// The handshake deadline the tests configure.
const HANDSHAKE: Duration = Duration::from_millis(300);

fn cluster_name(id: &str) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/{id}")
}

/// Short deadlines, a 100 ms backoff base, and a does-not-exist timeout
/// longer than the handshake deadline (as the defaults are: 15 s < 20 s
/// would otherwise let the timer decide first).
fn options() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        connect_timeout: HANDSHAKE,
        does_not_exist_timeout: Duration::from_millis(200),
        idle_grace: Duration::from_millis(200),
        backoff: BackoffConfig {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            ..defaults.backoff
        },
        ..defaults
    }
}

fn client(bootstrap: &str) -> XdsClient {
    let bootstrap = Bootstrap::from_json_str(bootstrap).expect("test bootstrap is valid");
    build(bootstrap)
}

/// A client whose every server is pinned to state-of-the-world ADS, where
/// each new stream is answered in full.
fn sotw_client(bootstrap: &str) -> XdsClient {
    let mut bootstrap = Bootstrap::from_json_str(bootstrap).expect("test bootstrap is valid");
    let servers = bootstrap.xds_servers.iter_mut().chain(
        bootstrap
            .authorities
            .values_mut()
            .flat_map(|a| a.xds_servers.iter_mut()),
    );
    for server in servers {
        server.api = ApiVariant::Sotw;
        server.api_pinned = true;
    }
    build(bootstrap)
}

fn build(bootstrap: Bootstrap) -> XdsClient {
    XdsClient::builder(bootstrap)
        .transport_options(options())
        .build()
        .expect("inside a tokio runtime")
}

fn server_status(client: &XdsClient, uri: &str) -> Option<ServerStatus> {
    client
        .status()
        .servers
        .into_iter()
        .find(|s| s.server.contains(uri))
}

/// Issue 19, defect 1: a server that accepts TCP and never speaks is a
/// connection failure once the handshake deadline passes: the watch hears
/// an error (not "does not exist"), status() counts the failure and shows
/// the server not connected, and the client keeps retrying on fresh
/// connections.
#[tokio::test]
async fn tarpit_is_a_connection_failure_and_is_retried() {
    let tarpit = Tarpit::bind().await.unwrap();
    let client = client(&bootstrap_json(&tarpit.uri(), &[], ""));
    let mut watch = client.watch::<ClusterType>("c1").unwrap();

    let started = Instant::now();
    let event = common::next(&mut watch).await;
    assert!(
        matches!(&event, WatchEvent::Error(e) if e.to_string().contains("did not answer")),
        "expected the handshake deadline's error, got {}",
        describe(&event)
    );
    assert!(
        started.elapsed() < PATIENCE / 2,
        "the failure shows within the deadline plus a backoff step, generously bounded"
    );
    let status = server_status(&client, &tarpit.addr().to_string()).unwrap();
    assert!(status.server_failure >= 1, "{status:?}");
    assert!(!status.connected, "{status:?}");
    assert!(
        client.status().to_json().contains("\"server_failure\": "),
        "the dump carries the counter"
    );

    eventually("the client retries on a new connection", || {
        tarpit.accepted() >= 3
    })
    .await;
    let status = server_status(&client, &tarpit.addr().to_string()).unwrap();
    assert!(
        status.server_failure >= 2,
        "every attempt counts: {status:?}"
    );

    // The admin endpoint's gRFC A78 metrics say the same.
    let metrics = metrics_of(&client).await;
    let labels = format!("{{grpc_target=\"t\",grpc_xds_server=\"{}\"}}", tarpit.uri());
    assert!(
        metrics.contains(&format!("grpc_xds_client_connected{labels} 0")),
        "{metrics}"
    );
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("grpc_xds_client_server_failure_total{labels} ")))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(failures.is_some_and(|n| n >= 2), "{metrics}");
}

/// `GET /metrics` from an admin endpoint serving `client`.
async fn metrics_of(client: &XdsClient) -> String {
    let addr = "127.0.0.1:0".parse().unwrap();
    let (admin, task) = xdsfed::admin::serve(client.clone(), addr, "t".into())
        .await
        .unwrap();
    let text = common::http_get(admin, "/metrics").await;
    task.abort();
    text
}

/// Issue 19, Done-when: with `[tarpit, healthy]` as an authority's servers,
/// gRFC A71 falls back to the healthy server within the handshake deadline
/// plus one backoff step (bounded generously), and the tarpit is reported
/// as failing.
#[tokio::test]
async fn authority_falls_back_from_a_tarpit_to_a_healthy_server() {
    let tarpit = Tarpit::bind().await.unwrap();
    let testbed = Testbed::start([ServerSpec::new("healthy", [CLOUD])])
        .await
        .unwrap();
    let healthy = &testbed.servers()[0];
    let name = cluster_name("payments");
    healthy
        .set_message(&name, &common::resources::cluster(&name, "healthy"))
        .unwrap();
    let client = client(&bootstrap_json(
        &tarpit.uri(),
        &[(CLOUD, &[tarpit.uri().as_str(), healthy.uri().as_str()])],
        "",
    ));

    let started = Instant::now();
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    changed_until(&mut watch, "the healthy server's copy", |_| true).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fallback took {:?}: far more than the 300 ms deadline plus a 100 ms backoff step",
        started.elapsed()
    );
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.name == name).unwrap();
    let source = entry.source.as_ref().expect("the copy's source");
    assert!(source.fallback, "{source:?}");
    assert!(source.server.contains(&healthy.uri()), "{source:?}");
    let tarpit_status = server_status(&client, &tarpit.addr().to_string()).unwrap();
    assert!(tarpit_status.server_failure >= 1, "{tarpit_status:?}");
    assert!(!tarpit_status.connected, "{tarpit_status:?}");
}

/// Issue 19, defect 3: a server that ends every stream with OK right after
/// its first response (state of the world: every new stream gets one) is
/// reconnected to at most once per backoff interval, not in a storm.
#[tokio::test]
async fn stream_ending_ok_after_a_response_is_reconnected_with_backoff() {
    let testbed = Testbed::start([ServerSpec::new("closer", [CLOUD])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let name = cluster_name("payments");
    server
        .set_message(&name, &common::resources::cluster(&name, "closer"))
        .unwrap();
    server.update_faults(|f| {
        f.close_after_responses = Some(1);
        f.close_code = Some(Code::Ok);
    });
    let uri = server.uri();
    let client = sotw_client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    changed_until(&mut watch, "the first copy", |_| true).await;

    let before = server.recording().stream_count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let streams = server.recording().stream_count() - before;
    // A 100 ms backoff base allows about 20 streams in 2 s; a storm opens
    // hundreds.
    assert!(streams >= 2, "the client keeps reconnecting: {streams}");
    assert!(streams < 40, "{streams} streams in 2 s: a reconnect storm");
}
