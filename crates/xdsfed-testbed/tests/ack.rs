//! ACK tracking per client and version, and liveness, as in the policy
//! distribution protocol (a NACK counts as done), with pushes at once.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{CDS, Delta, Sotw, WAIT, cluster};
use xdsfed_testbed::{Nack, ServerSpec, Testbed};

const C1: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";

async fn testbed() -> Testbed {
    Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .expect("the testbed starts")
}

/// Policy protocol §NACK Treatment: the wait ends when every client answered,
/// and the report names who NACKed with what error.
#[tokio::test]
async fn wait_acked_reports_one_ack_and_one_nack_from_two_clients() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();

    let mut good = Delta::open(server, "good-client").await;
    let mut bad = Sotw::open(server, "bad-client").await;
    good.subscribe(CDS, &[C1]).await;
    bad.request(CDS, &[C1], None).await;
    let to_good = good.recv().await;
    let to_bad = bad.recv().await;
    good.ack(&to_good).await;
    bad.nack(&to_bad, &[C1], "cluster c1: connect_timeout too short")
        .await;

    let report = server.wait_acked(CDS, C1, None, WAIT).await.unwrap();
    assert!(!report.timed_out, "{report:?}");
    assert_eq!(report.acked_by, ["good-client"]);
    let peer = report.nacked_by.first().and_then(|n| n.peer);
    assert!(peer.is_some_and(|p| p.ip().is_loopback()), "{report:?}");
    assert_eq!(
        report.nacked_by,
        [Nack {
            node_id: "bad-client".into(),
            peer,
            error: "cluster c1: connect_timeout too short".into()
        }]
    );
    assert!(report.pending.is_empty());
}

/// A pushed update is waited for per version: until the client answers the
/// new version it is pending, and the old answer does not count.
#[tokio::test]
async fn wait_acked_times_out_with_pending_client_until_new_version_is_answered() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    let mut client = Delta::open(server, "slow").await;
    client.subscribe(CDS, &[C1]).await;
    let first = client.recv().await;
    client.ack(&first).await;
    server.wait_acked(CDS, C1, None, WAIT).await.unwrap();

    let v2 = server.set_resource(C1, cluster(C1, 2)).unwrap();
    let pushed = client.recv().await;
    let report = server
        .wait_acked(CDS, C1, Some(&v2.version), Duration::from_millis(50))
        .await
        .unwrap();
    assert!(report.timed_out);
    assert_eq!(report.pending, ["slow"]);

    client.ack(&pushed).await;
    let report = server
        .wait_acked(CDS, C1, Some(&v2.version), WAIT)
        .await
        .unwrap();
    assert_eq!(report.acked_by, ["slow"]);
}

/// Policy protocol §Client Disconnection: a client that goes away leaves
/// the tracker, so nobody waits for it.
#[tokio::test]
async fn disconnected_client_leaves_tracker_and_wait() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    let mut stays = Delta::open(server, "stays").await;
    let mut leaves = Delta::open(server, "leaves").await;
    stays.subscribe(CDS, &[C1]).await;
    leaves.subscribe(CDS, &[C1]).await;
    let response = stays.recv().await;
    leaves.recv().await;
    stays.ack(&response).await;
    server
        .recording()
        .wait_until(WAIT, |streams| {
            streams
                .iter()
                .filter(|s| s.delta_requests().count() == 2)
                .count()
                == 1
        })
        .await
        .unwrap();
    let names: Vec<String> = server.clients().into_iter().map(|c| c.node_id).collect();
    assert_eq!(names, ["leaves", "stays"]);

    drop(leaves);
    let report = server.wait_acked(CDS, C1, None, WAIT).await.unwrap();
    assert!(!report.timed_out, "{report:?}");
    assert_eq!(report.acked_by, ["stays"]);
    server
        .recording()
        .wait_until(WAIT, |streams| {
            streams.iter().filter(|s| s.closed.is_some()).count() == 1
        })
        .await
        .unwrap();
    let names: Vec<String> = server.clients().into_iter().map(|c| c.node_id).collect();
    assert_eq!(names, ["stays"]);
}

/// Liveness: the tracker keeps each client's last request time.
#[tokio::test]
async fn client_liveness_tracks_last_request_time() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &["missing"]).await;
    client.recv().await;
    let first = server.clients();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].streams, 1);
    let sent_at = std::time::SystemTime::now();
    client.subscribe(CDS, &["missing-too"]).await;
    client.recv().await;
    let after = server.clients();
    assert!(
        after[0].last_request >= sent_at,
        "the second request refreshed the client's liveness"
    );
}

/// `wait_acked` without a version needs the resource to exist.
#[tokio::test]
async fn wait_acked_without_version_names_missing_resource() {
    let tb = testbed().await;
    let err = tb.servers()[0]
        .wait_acked(CDS, C1, None, WAIT)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(C1), "{err}");
}
