//! What a watcher hears from a server that sends the same bad update on
//! every stream, against the testbed over loopback gRPC.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::cluster;
use common::{bootstrap_json, changed, client, describe, eventually, next};
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

const C1: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";
const EDS: &str = "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/c1";

/// The server turns bad: every stream gets the same malformed update and
/// then ends. The watcher hears one ambient error, not one per reconnect,
/// and keeps its good copy.
#[tokio::test]
async fn the_same_bad_update_on_every_reconnect_is_heard_once() {
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let uri = server.uri();
    server.set_message(C1, &cluster(C1, EDS)).unwrap();
    let client = client(&bootstrap_json(
        &uri,
        &[("cloud.example", &[uri.as_str()])],
        "",
    ));
    let mut watch = client.watch::<ClusterType>(C1).unwrap();
    let good = changed(&mut watch).await;

    server.update_faults(|f| {
        f.malformed_names.insert(C1.to_owned());
        f.close_after_responses = Some(1);
    });
    let mut next_version = cluster(C1, EDS);
    next_version.alt_stat_name = "v2".into();
    server.set_message(C1, &next_version).unwrap();
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::AmbientError(_)),
        "{}",
        describe(&event)
    );

    let streams = server.recording().stream_count();
    eventually("four more streams, each sent the bad update", || {
        server.recording().stream_count() >= streams + 4
    })
    .await;
    // Each stream's response was handled before the stream ended and the
    // next one opened, so anything said about it is already queued.
    // A zero timeout polls the watch once: only what is already queued counts.
    let queued = tokio::time::timeout(std::time::Duration::ZERO, watch.next()).await;
    if let Ok(Some(event)) = queued {
        panic!(
            "a repeated bad update was reported again: {}",
            describe(&event)
        );
    }
    assert_eq!(watch.current(), Some(good));
    assert_eq!(watch.state().status, ResourceStatus::Nacked);
}
