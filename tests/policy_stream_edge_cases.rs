//! The policy-distribution stream over loopback gRPC: the client source
//! against the testbed's policy server, one test per row of the spec's
//! "Edge Cases & Scenarios" table (docs/rules.md, "Policy stream").

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{PATIENCE, bootstrap_json, client, describe, eventually, next};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{Watch, WatchEvent};
use xdsfed::core::policy_stream::wire::{ValidatingPolicy, ValidatingPolicySpec, Validation};
use xdsfed::core::types::{VALIDATING_POLICY_TYPE_URL, ValidatingPolicyType};
use xdsfed::testbed::{Protocol, Server, ServerSpec, Testbed};

const ONPREM: &str = "policies.onprem";
/// The node id, and so the client address the server tracks.
const CLIENT: &str = "e2e-node";
/// Timers short enough for tests: the client polls every 50 ms.
const POLICY_STREAM: &str = r#", "protocol": "policy_stream", "policy_stream": {"poll_interval": "0.05s", "health_check_interval": "0.1s"}"#;

fn name(policy: &str) -> String {
    format!("xdstp://{ONPREM}/kyverno.http.v1alpha1.ValidatingPolicy/{policy}")
}

fn policy(name: &str, expression: &str) -> ValidatingPolicy {
    ValidatingPolicy {
        name: name.into(),
        delete: false,
        spec: Some(ValidatingPolicySpec {
            validations: vec![Validation {
                expression: expression.into(),
                ..Default::default()
            }],
            evaluation_mode: "Envoy".into(),
            ..Default::default()
        }),
    }
}

struct Setup {
    testbed: Testbed,
    client: XdsClient,
}

impl Setup {
    async fn start() -> Setup {
        Self::start_with(Protocol::policy_stream()).await
    }

    async fn start_with(protocol: Protocol) -> Setup {
        let testbed = Testbed::start([ServerSpec::new("onprem", [ONPREM]).with_protocol(protocol)])
            .await
            .unwrap();
        let client = new_client(&testbed);
        Setup { testbed, client }
    }

    fn server(&self) -> &Server {
        &self.testbed.servers()[0]
    }

    fn set(&self, name: &str, expression: &str) {
        self.server()
            .set_message(name, &policy(name, expression))
            .unwrap();
    }

    fn watch(&self, policy: &str) -> Watch<ValidatingPolicyType> {
        self.client
            .watch::<ValidatingPolicyType>(&name(policy))
            .unwrap()
    }
}

fn new_client(testbed: &Testbed) -> XdsClient {
    let uri = testbed.servers()[0].uri();
    client(&bootstrap_json(
        &uri,
        &[(ONPREM, &[uri.as_str()])],
        POLICY_STREAM,
    ))
}

/// The expression of the first validation.
fn expression(p: &ValidatingPolicy) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.validations.first())
        .map_or("", |v| v.expression.as_str())
}

/// Waits for the watch to hold the policy with `wanted` as its expression.
async fn expect(watch: &mut Watch<ValidatingPolicyType>, wanted: &str) -> Arc<ValidatingPolicy> {
    common::changed_until(watch, wanted, |p| expression(p) == wanted).await
}

/// Waits for the all-ACKed barrier of the server's current version and
/// says who ACKed it.
async fn acked_by(server: &Server) -> Vec<String> {
    let (version, report) = server.policies().wait_acked(PATIENCE).await;
    assert!(!report.timed_out, "{version}: {report:?}");
    assert_eq!(version, server.policies().current().0);
    report.acked_by
}

/// The first snapshot, and its ACK, reach the barrier.
#[tokio::test]
async fn initial_snapshot_is_applied_and_acked() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    assert_eq!(acked_by(s.server()).await, [CLIENT]);
}

/// Edge case "Network partition": the client's request carries an old nonce
/// and the control plane resends the snapshot. The server goes silent (the
/// partition), moves on two versions, and speaks again: the client's next
/// poll carries the nonce of v1, which is stale, and gets the latest.
#[tokio::test]
async fn network_partition_old_nonce_gets_the_full_snapshot() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    s.server().update_faults(|f| {
        f.silent_types.insert(VALIDATING_POLICY_TYPE_URL.to_owned());
    });
    s.set("require-auth", "v2");
    s.set("require-auth", "v3");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(expression(&watch.current().unwrap()), "v1");
    s.server().update_faults(|f| f.silent_types.clear());
    expect(&mut watch, "v3").await;
    assert_eq!(acked_by(s.server()).await, [CLIENT]);
}

/// Edge case "Client restarts during update" (and "Pod restart after
/// partial ACK"): a client that restarts while a new version is pending
/// connects with empty state, gets the full snapshot and ACKs it.
#[tokio::test]
async fn client_restart_during_update_resyncs_with_a_full_snapshot() {
    let mut s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    s.set("require-auth", "v2");
    drop(watch);
    drop(std::mem::replace(&mut s.client, new_client(&s.testbed)));
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v2").await;
    assert_eq!(acked_by(s.server()).await, [CLIENT]);
}

/// Edge case "Control plane restarts during update": the stream ends, the
/// client reconnects (with backoff, where the spec's client exits) and
/// requests the snapshot, getting the latest version.
#[tokio::test]
async fn control_plane_restart_during_update_reconnects_to_the_latest() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    let (_, nonce_before) = s.server().policies().current();
    s.set("require-auth", "v2");
    s.server()
        .restart(true, Duration::from_millis(100))
        .await
        .unwrap();
    expect(&mut watch, "v2").await;
    assert_ne!(s.server().policies().current().1, nonce_before);
    assert_eq!(acked_by(s.server()).await, [CLIENT]);
}

/// Edge cases "Rapid sequential updates" and "Concurrent policy version
/// changes": the latest version replaces the pending one; ACKs of earlier
/// versions do not count for it, and the client ends on the latest.
#[tokio::test]
async fn rapid_sequential_updates_end_on_the_latest_version() {
    let s = Setup::start().await;
    s.set("require-auth", "v0");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v0").await;
    acked_by(s.server()).await;
    for i in 1..=20 {
        s.set("require-auth", &format!("v{i}"));
    }
    let latest = s.server().policies().current().0;
    expect(&mut watch, "v20").await;
    let (version, report) = s.server().policies().wait_acked(PATIENCE).await;
    assert_eq!(version, latest);
    assert_eq!(report.acked_by, [CLIENT]);
}

/// Edge case "Empty policy set": the control plane sends an empty snapshot
/// array; the client ACKs it and its policies go.
#[tokio::test]
async fn empty_policy_set_is_an_empty_snapshot_that_removes_everything() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    // ACKed before the change: only a poll can tell of it.
    acked_by(s.server()).await;
    s.server()
        .delete_resource(VALIDATING_POLICY_TYPE_URL, "require-auth")
        .unwrap();
    assert!(s.server().policies().snapshot().policies.is_empty());
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    assert_eq!(acked_by(s.server()).await, [CLIENT]);
}

/// Edge case "Client NACKs update": a policy failing validation is NACKed,
/// naming it and the field; the server marks the client done, does not
/// retry, and carries on; the client keeps serving its last good policy.
#[tokio::test]
async fn client_nack_is_marked_done_and_the_last_good_policy_serves() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    acked_by(s.server()).await;
    let mut bad = policy("require-auth", "v2");
    bad.spec.as_mut().unwrap().failure_policy = Some("Sometimes".into());
    s.server().set_message("require-auth", &bad).unwrap();
    let (_, report) = s.server().policies().wait_acked(PATIENCE).await;
    assert!(!report.timed_out);
    assert_eq!(report.nacked_by.len(), 1, "{report:?}");
    let error = &report.nacked_by[0].error;
    assert!(
        error.contains("\"require-auth\"") && error.contains("spec.failure_policy"),
        "{error}"
    );
    assert_eq!(expression(&watch.current().unwrap()), "v1");
    // No retry: the version stays NACKed while the client keeps polling.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (_, again) = s.server().policies().wait_acked(PATIENCE).await;
    assert_eq!(again.nacked_by.len(), 1);
    // A fixed policy is the next version, and applies.
    s.set("require-auth", "v3");
    expect(&mut watch, "v3").await;
}

/// Edge case "Early connection before policies loaded": the client gets an
/// empty initial snapshot (empty version and nonce), and the policies once
/// they load.
#[tokio::test]
async fn early_connection_gets_an_empty_snapshot_then_the_policies() {
    let s = Setup::start().await;
    let mut watch = s.watch("require-auth");
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    assert_eq!(
        s.server().policies().current(),
        (String::new(), String::new())
    );
    // Let the ACK of the empty snapshot arrive first, so that what brings
    // the policies is a later poll (the spec's case 4).
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.set("require-auth", "v1");
    expect(&mut watch, "v1").await;
}

/// Edge case "Leader election": the control plane restarts as a new leader
/// with its own policy set (state not kept); clients reconnect and follow
/// it, dropping what the old leader had.
#[tokio::test]
async fn leader_election_restart_clients_follow_the_new_leader() {
    let s = Setup::start().await;
    s.set("require-auth", "old-leader");
    s.set("rate-limit", "old-leader");
    let mut auth = s.watch("require-auth");
    let mut rate = s.watch("rate-limit");
    expect(&mut auth, "old-leader").await;
    expect(&mut rate, "old-leader").await;
    s.server()
        .restart(false, Duration::from_millis(100))
        .await
        .unwrap();
    s.set("require-auth", "new-leader");
    expect(&mut auth, "new-leader").await;
    loop {
        match next(&mut rate).await {
            WatchEvent::DoesNotExist => break,
            WatchEvent::Changed(_) | WatchEvent::AmbientError(_) => {}
            other => panic!("{}", describe(&other)),
        }
    }
}

/// Edge case "Stream errors": where the spec's client exits and waits for
/// a pod restart, this one reconnects with backoff and keeps serving.
#[tokio::test]
async fn stream_errors_reconnect_and_keep_serving() {
    let s = Setup::start().await;
    s.set("require-auth", "v1");
    s.server()
        .update_faults(|f| f.close_after_responses = Some(1));
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    s.set("require-auth", "v2");
    expect(&mut watch, "v2").await;
    assert_eq!(expression(&watch.current().unwrap()), "v2");
    let status = s.client.status();
    assert_eq!(status.servers[0].server_failure, 0);
}

/// §Health Checks: the client reports at its interval; a client that stops
/// is flushed from the control plane's map.
#[tokio::test]
async fn health_checks_arrive_and_inactive_clients_are_flushed() {
    let s = Setup::start_with(Protocol::PolicyStream {
        max_client_inactive: Duration::from_millis(300),
    })
    .await;
    s.set("require-auth", "v1");
    let mut watch = s.watch("require-auth");
    expect(&mut watch, "v1").await;
    let server = Arc::clone(&s.testbed.servers()[0]);
    let plane = server.policies();
    eventually("the client health-checked", || {
        plane
            .clients()
            .iter()
            .any(|c| c.client_address == CLIENT && c.last_health_check.is_some())
    })
    .await;
    drop(watch);
    drop(s.client);
    eventually("the client was flushed", || plane.clients().is_empty()).await;
}
