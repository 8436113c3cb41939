//! Large responses: xDS TP1's design load puts 100 000 clusters (about
//! 24 MB) in one delta CDS response. The client takes it with default
//! options; a response over the limit fails the stream with an error that
//! names its size and the limit.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::resources::cluster;
use common::{PATIENCE, bootstrap_json, describe};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use prost::Message;
use xdsfed::client::client::XdsClient;
use xdsfed::client::transport::{DEFAULT_MAX_MESSAGE_SIZE, TransportOptions};
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

/// An EDS cluster with an `xdstp://` name and service name, as a federated
/// control plane serves them: about 240 bytes on the wire.
fn federated_cluster(i: usize) -> Cluster {
    let name = format!("xdstp://a.example/envoy.config.cluster.v3.Cluster/svc-{i:06}");
    let service =
        format!("xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i:06}");
    let mut c = cluster(&name, &service);
    c.alt_stat_name = format!("svc-{i:06}.mesh.internal");
    c
}

async fn serve(count: usize) -> (Testbed, usize) {
    let testbed = Testbed::start([ServerSpec::new("big", ["a.example"])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let mut bytes = 0;
    for i in 0..count {
        let c = federated_cluster(i);
        bytes += c.encoded_len();
        server.set_message(&c.name, &c).unwrap();
    }
    (testbed, bytes)
}

fn client(uri: &str, options: TransportOptions) -> XdsClient {
    let json = bootstrap_json(uri, &[("a.example", &[uri])], "");
    XdsClient::builder(Bootstrap::from_json_str(&json).unwrap())
        .transport_options(options)
        .build()
        .unwrap()
}

/// 100 000 clusters in one delta response, default transport options.
///
/// About 10 s in a debug build on the project's 2-core machine, so it runs
/// with every `cargo test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_clusters_in_one_response_are_accepted_by_default() {
    const COUNT: usize = 100_000;
    let (testbed, bytes) = serve(COUNT).await;
    // Over the old 16 MiB default, under the new one.
    assert!(bytes > 16 * 1024 * 1024, "{bytes} bytes");
    assert!(bytes < DEFAULT_MAX_MESSAGE_SIZE);
    let client = client(&testbed.servers()[0].uri(), TransportOptions::default());
    let mut all = client.watch_wildcard::<ClusterType>().unwrap();
    let mut seen = 0;
    let patience = Duration::from_secs(120);
    while seen < COUNT {
        match tokio::time::timeout(patience, all.next()).await {
            Ok(Some((_, WatchEvent::Changed(_)))) => seen += 1,
            Ok(Some((name, other))) => panic!("{name}: {}", describe(&other)),
            Ok(None) => panic!("client gone after {seen}"),
            Err(_) => panic!("only {seen} of {COUNT} clusters within {patience:?}"),
        }
    }
    let status = client.status();
    assert_eq!(status.servers[0].server_failure, 0, "{:?}", status.servers);
    testbed.shutdown().await;
}

/// A response over the limit: the watcher's error, and the row the status
/// dump (`xdsfed dump`) prints, name the response's size and the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_over_the_limit_is_reported_with_its_size_and_the_limit() {
    const LIMIT: usize = 64 * 1024;
    let (testbed, bytes) = serve(1_000).await;
    assert!(bytes > LIMIT);
    let options = TransportOptions {
        max_message_size: LIMIT,
        ..common::fast_transport()
    };
    let client = client(&testbed.servers()[0].uri(), options);
    let name = federated_cluster(7).name;
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    // The named resource alone fits; the wildcard's response does not.
    let _all = client.watch_wildcard::<ClusterType>().unwrap();
    let wanted = format!("bytes is over the message size limit of {LIMIT} bytes");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let event = tokio::time::timeout_at(deadline, watch.next())
            .await
            .expect("an error naming the limit")
            .expect("watch open");
        if let WatchEvent::Error(e) | WatchEvent::AmbientError(e) = &event
            && e.to_string().contains(&wanted)
        {
            break;
        }
    }
    let status = client.status();
    let row = status
        .resources
        .iter()
        .find(|r| r.name == name)
        .expect("a row for the watched cluster");
    let error = row.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(&wanted) && error.contains("a response of "),
        "{error}"
    );
    testbed.shutdown().await;
}
