//! The policy session in virtual time: no tokio, no sockets; `now` is an
//! `Instant` the test moves.

use std::time::Duration;

use super::*;
use crate::bootstrap::PolicyStreamTiming;
use crate::policy_stream::wire::{ValidatingPolicy, ValidatingPolicySpec, Validation};
use crate::protocol::RemovedReason;

const AUTHORITY: &str = "policies.onprem";
const POLL: Duration = Duration::from_secs(10);
const HEALTH: Duration = Duration::from_secs(30);

fn key(name: &str) -> ResourceKey {
    ResourceKey::new(
        VALIDATING_POLICY_TYPE_URL,
        format!("xdstp://{AUTHORITY}/kyverno.http.v1alpha1.ValidatingPolicy/{name}"),
    )
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

fn snapshot(
    version: &str,
    nonce: &str,
    policies: Vec<ValidatingPolicy>,
) -> PolicyDiscoveryResponse {
    PolicyDiscoveryResponse {
        version_info: version.into(),
        policies,
        nonce: nonce.into(),
    }
}

fn config() -> PolicySessionConfig {
    PolicySessionConfig::new("sidecar-1", [AUTHORITY])
        .with_old_style(false)
        .with_timing(PolicyStreamTiming {
            poll_interval: POLL,
            health_check_interval: HEALTH,
        })
}

/// A session whose intervals are exact (no jitter), so that tests of other
/// rules can name the instants.
fn session() -> PolicySession {
    PolicySession::new(config().with_jitter(0.0, 0))
}

/// Every discovery request written now; health checks are dropped.
fn requests(s: &mut PolicySession, now: Instant) -> Vec<PolicyDiscoveryRequest> {
    std::iter::from_fn(|| s.poll_transmit(now))
        .filter_map(|t| match t {
            PolicyTransmit::Discovery(r) => Some(r),
            PolicyTransmit::HealthCheck(_) => None,
        })
        .collect()
}

fn events(s: &mut PolicySession) -> Vec<CoreEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// A short form of each event: `upsert NAME@VERSION`, `removed NAME`, ….
fn shown(events: &[CoreEvent]) -> Vec<String> {
    let short = |k: &ResourceKey| k.name.rsplit('/').next().unwrap_or("").to_owned();
    events
        .iter()
        .map(|e| match e {
            CoreEvent::Upsert { key, version, .. } => format!("upsert {}@{version}", short(key)),
            CoreEvent::Removed {
                key,
                reason: RemovedReason::NotConsidered,
            } => format!("skipped {}", short(key)),
            CoreEvent::Removed { key, .. } => format!("removed {}", short(key)),
            CoreEvent::DoesNotExist { key } => format!("absent {}", short(key)),
            CoreEvent::Invalid { key, .. } => format!("invalid {}", short(key)),
            CoreEvent::StreamHealthy => "healthy".into(),
            CoreEvent::StreamAccepted => "accepted".into(),
            CoreEvent::StreamFailed { .. } => "failed".into(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// A session on a stream that has its first snapshot (`v1`, nonce `n1`,
/// policies `a` and `b`), with `a` and `b` subscribed; everything drained.
fn streaming(t0: Instant) -> PolicySession {
    let mut s = session();
    s.subscribe(key("a"));
    s.subscribe(key("b"));
    s.handle_connected(t0);
    s.handle_timeout(t0); // the first health check
    let _ = requests(&mut s, t0);
    s.handle_response(
        t0,
        snapshot("v1", "n1", vec![policy("a", "true"), policy("b", "true")]),
    );
    let _ = requests(&mut s, t0);
    let _ = events(&mut s);
    s
}

/// §Connection Lifecycle 2: the initial request has an empty version and
/// nonce, and names the client.
#[test]
fn first_request_of_every_stream_is_the_initial_request() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.handle_stream_end(t0, StreamEnd::new(14, "gone"));
    s.handle_connected(t0);
    let sent = requests(&mut s, t0);
    assert_eq!(
        sent,
        vec![PolicyDiscoveryRequest {
            client_address: "sidecar-1".into(),
            ..Default::default()
        }]
    );
    // The version survives the reconnect; only the request starts afresh.
    assert_eq!(s.version().map(String::from).as_deref(), Some("v1"));
}

/// §Request Processing 1: an ACK carries the snapshot's version and nonce.
#[test]
fn accepted_snapshot_is_acked_with_its_version_and_nonce() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("a"));
    s.handle_connected(t0);
    let _ = requests(&mut s, t0);
    s.handle_response(t0, snapshot("v1", "n1", vec![policy("a", "true")]));
    let ack = requests(&mut s, t0);
    assert_eq!(ack.len(), 1);
    assert_eq!(
        (&*ack[0].version_info, &*ack[0].response_nonce),
        ("v1", "n1")
    );
    assert!(ack[0].error_detail.is_none());
    assert_eq!(shown(&events(&mut s)), ["healthy", "upsert a@v1"]);
}

/// §Request Processing 2: a snapshot with an invalid policy is NACKed with
/// the last good version, the snapshot's nonce and an error naming the
/// policy and the field; the last good set keeps serving.
#[test]
fn invalid_policy_nacks_the_snapshot_and_the_last_good_set_keeps_serving() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    let mut bad = policy("b", "true");
    bad.spec.as_mut().unwrap().failure_policy = Some("Sometimes".into());
    s.handle_response(t0, snapshot("v2", "n2", vec![policy("a", "false"), bad]));
    let nack = requests(&mut s, t0);
    assert_eq!(nack.len(), 1);
    assert_eq!(
        (&*nack[0].version_info, &*nack[0].response_nonce),
        ("v1", "n2")
    );
    let detail = &nack[0].error_detail.as_ref().unwrap().message;
    assert!(
        detail.starts_with("policy \"b\": spec.failure_policy:"),
        "{detail}"
    );
    // `a` changed in the rejected snapshot, but nothing of it applies:
    // its watchers hear of the NACK, their copy serving.
    assert_eq!(shown(&events(&mut s)), ["invalid a", "invalid b"]);
    assert_eq!(s.version().map(String::from).as_deref(), Some("v1"));
    assert_eq!(s.stats().nacks, 1);
}

/// Full snapshots become per-policy events: changed and new policies are
/// upserted, missing ones removed, unchanged ones not repeated.
#[test]
fn snapshots_are_diffed_into_upserts_and_removals() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.subscribe(key("c"));
    assert_eq!(shown(&events(&mut s)), ["removed c"]);
    s.handle_response(
        t0,
        snapshot("v2", "n2", vec![policy("a", "false"), policy("c", "true")]),
    );
    let mut got = shown(&events(&mut s));
    got.sort();
    assert_eq!(got, ["removed b", "upsert a@v2", "upsert c@v2"]);
}

/// A snapshot without any policy is a valid, empty set (§Edge Cases: empty
/// policy set): ACKed, and every held policy is removed.
#[test]
fn empty_snapshot_is_acked_and_removes_everything() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.handle_response(t0, snapshot("e3b0", "n2", vec![]));
    assert_eq!(requests(&mut s, t0)[0].version_info, "e3b0");
    let mut got = shown(&events(&mut s));
    got.sort();
    assert_eq!(got, ["removed a", "removed b"]);
}

/// A name the first snapshot lacks is deleted: the snapshot is the whole
/// set, the server's answer, so there is nothing to wait for (and no
/// reason for an `#alt`, which is for servers that cannot answer).
#[test]
fn subscribed_name_missing_from_the_snapshot_does_not_exist() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("missing"));
    s.handle_connected(t0);
    let _ = requests(&mut s, t0);
    s.handle_response(t0, snapshot("v1", "n1", vec![policy("a", "true")]));
    assert_eq!(shown(&events(&mut s)), ["healthy", "removed missing"]);
    // Said once: the next snapshot, still without it, says nothing more.
    s.handle_response(t0, snapshot("v2", "n2", vec![policy("a", "false")]));
    assert!(events(&mut s).is_empty());
}

/// Lazy notification: the last ACK is re-sent every poll interval, so that
/// a server that only answers requests can tell of a new version.
#[test]
fn last_answer_is_resent_every_poll_interval() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    assert_eq!(s.poll_timeout(), Some(t0 + POLL));
    s.handle_timeout(t0 + POLL);
    let polled = requests(&mut s, t0 + POLL);
    assert_eq!(polled.len(), 1);
    assert_eq!(
        (&*polled[0].version_info, &*polled[0].response_nonce),
        ("v1", "n1")
    );
    assert_eq!(s.stats().polls, 1);
    assert_eq!(s.poll_timeout(), Some(t0 + POLL * 2));
}

/// A NACK is re-sent as it was, and answered once per new snapshot: no
/// loop against a server that keeps the bad version.
#[test]
fn nack_is_resent_as_the_poll_without_a_loop() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.handle_response(t0, snapshot("v2", "n2", vec![policy("", "true")]));
    let nack = requests(&mut s, t0);
    assert!(nack[0].error_detail.is_some());
    s.handle_timeout(t0 + POLL);
    assert_eq!(requests(&mut s, t0 + POLL), nack);
    assert!(requests(&mut s, t0 + POLL).is_empty());
}

/// The early snapshot of a server with no policies yet (§Edge Cases: early
/// connection) has an empty version; its ACK is empty too, and re-sent, so
/// that the spec's server answers it (case 4) once policies load.
#[test]
fn early_empty_snapshot_is_acked_and_polled_with_empty_version() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("a"));
    s.handle_connected(t0);
    let _ = requests(&mut s, t0);
    s.handle_response(t0, snapshot("", "", vec![]));
    let ack = requests(&mut s, t0);
    assert_eq!((&*ack[0].version_info, &*ack[0].response_nonce), ("", ""));
    assert_eq!(shown(&events(&mut s)), ["healthy", "removed a"]);
    s.handle_timeout(t0 + POLL);
    assert_eq!(requests(&mut s, t0 + POLL), ack);
}

/// §Health Checks: one at connect, then every interval; a failure is
/// counted and the stream goes on.
#[test]
fn health_checks_go_out_at_connect_and_every_interval() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("a"));
    s.handle_connected(t0);
    s.handle_timeout(t0);
    let checks = |s: &mut PolicySession, now| {
        std::iter::from_fn(|| s.poll_transmit(now))
            .filter(|t| matches!(t, PolicyTransmit::HealthCheck(_)))
            .count()
    };
    assert_eq!(checks(&mut s, t0), 1);
    s.handle_health_check(t0, Err("UNIMPLEMENTED".into()));
    assert_eq!(s.stats().health_checks_failed, 1);
    assert!(s.poll_close().is_none());
    s.handle_response(t0, snapshot("v1", "n1", vec![]));
    s.handle_timeout(t0 + HEALTH);
    assert_eq!(checks(&mut s, t0 + HEALTH), 1);
}

/// Deadlines: a stream not accepted within the handshake timeout is closed
/// as UNAVAILABLE; an accepted one without a snapshot within the
/// first-response timeout as DEADLINE_EXCEEDED.
#[test]
fn silent_streams_are_closed_by_their_deadlines() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("a"));
    s.handle_connected(t0);
    let handshake = s.config().handshake_timeout;
    s.handle_timeout(t0 + handshake);
    assert_eq!(s.poll_close().map(|e| e.code.as_i32()), Some(14));

    s.handle_stream_end(t0 + handshake, StreamEnd::new(14, "closed"));
    s.handle_connected(t0);
    s.handle_stream_accepted(t0);
    let first = s.config().first_response_timeout;
    s.handle_timeout(t0 + first);
    assert_eq!(s.poll_close().map(|e| e.code.as_i32()), Some(4));
}

/// gRFC A57: a stream that ends before any snapshot is a server failure;
/// one that ends after a snapshot is not. Either way the held policies
/// stay: no removal.
#[test]
fn stream_end_before_a_snapshot_fails_and_held_policies_stay() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.handle_stream_end(t0, StreamEnd::new(14, "reset"));
    assert!(events(&mut s).is_empty());
    s.handle_connected(t0);
    s.handle_stream_end(t0, StreamEnd::new(14, "refused"));
    assert_eq!(shown(&events(&mut s)), ["failed"]);
    assert_eq!(s.stats().server_failure, 1);
    assert_eq!(s.policy_names().collect::<Vec<_>>(), ["a", "b"]);
}

/// After a reconnect the first snapshot restates held copies (the cache
/// compares bytes); later snapshots only say what changed.
#[test]
fn reconnect_restates_copies_once() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.handle_stream_end(t0, StreamEnd::new(0, "closed"));
    s.handle_connected(t0);
    let _ = requests(&mut s, t0);
    let same = || snapshot("v1", "n9", vec![policy("a", "true"), policy("b", "true")]);
    s.handle_response(t0, same());
    assert_eq!(
        shown(&events(&mut s)),
        ["healthy", "upsert a@v1", "upsert b@v1"]
    );
    s.handle_response(t0, same());
    assert!(events(&mut s).is_empty());
}

/// `*` delivers every policy, also later ones; dropping it forgets them.
#[test]
fn wildcard_delivers_every_policy() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.subscribe_wildcard(VALIDATING_POLICY_TYPE_URL);
    s.unsubscribe(&key("a"));
    s.unsubscribe(&key("b"));
    let _ = events(&mut s);
    s.handle_response(
        t0,
        snapshot("v2", "n2", vec![policy("a", "true"), policy("z", "true")]),
    );
    let mut got = shown(&events(&mut s));
    got.sort();
    assert_eq!(got, ["removed b", "upsert z@v2"]);
}

/// A subscription after the snapshot is answered from what is held, and
/// `forget_version` makes the next snapshot state it again.
#[test]
fn late_subscription_is_answered_from_the_held_snapshot() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.unsubscribe(&key("a"));
    s.subscribe(key("a"));
    assert_eq!(shown(&events(&mut s)), ["upsert a@v1"]);
    s.forget_version(&key("a"));
    s.handle_response(
        t0,
        snapshot("v1", "n2", vec![policy("a", "true"), policy("b", "true")]),
    );
    assert_eq!(shown(&events(&mut s)), ["upsert a@v1"]);
}

/// Other types and glob collections have nothing on a policy stream.
#[test]
fn other_types_are_absent_and_globs_are_not_requested() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    let cluster = ResourceKey::new(
        "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        format!("xdstp://{AUTHORITY}/envoy.config.cluster.v3.Cluster/c"),
    );
    s.subscribe(cluster);
    s.subscribe(key("*"));
    let got = events(&mut s);
    assert!(matches!(got[0], CoreEvent::Removed { .. }));
    assert!(matches!(got[1], CoreEvent::NotRequested { .. }));
}

// ----- against independent peers -----

/// §Connection Lifecycle 2: a stream starts with the initial request, and
/// until the server answers it, it is what a poll sends again: a server
/// that only answers requests and missed the first one is asked again one
/// poll later, not after the first-response deadline.
#[test]
fn initial_request_is_resent_every_poll_until_the_first_snapshot() {
    let t0 = Instant::now();
    let mut s = session();
    s.subscribe(key("a"));
    s.handle_connected(t0);
    let initial = requests(&mut s, t0);
    assert_eq!(initial.len(), 1);
    s.handle_stream_accepted(t0);
    assert_eq!(s.poll_timeout(), Some(t0));
    s.handle_timeout(t0); // the first health check
    assert_eq!(s.poll_timeout(), Some(t0 + POLL));
    s.handle_timeout(t0 + POLL);
    assert_eq!(requests(&mut s, t0 + POLL), initial);
    assert!(s.poll_close().is_none());
    assert_eq!(s.stats().polls, 1);
    // Answered: from now on the poll is the ACK.
    let t1 = t0 + POLL * 2;
    s.handle_timeout(t1);
    assert_eq!(requests(&mut s, t1), initial);
    s.handle_response(t1, snapshot("v1", "n1", vec![policy("a", "true")]));
    let ack = requests(&mut s, t1);
    s.handle_timeout(t1 + POLL);
    assert_eq!(requests(&mut s, t1 + POLL), ack);
}

/// The upstream plugin considers only policies of its evaluation mode:
/// one without `evaluation_mode`, or of another mode, is skipped (not an
/// error, no NACK), reported to its watchers as not considered; the rest
/// of the snapshot is held and ACKed.
#[test]
fn policy_for_another_evaluator_is_skipped_and_the_snapshot_acked() {
    let t0 = Instant::now();
    let mut s = session();
    for name in ["a", "kubernetes", "unset"] {
        s.subscribe(key(name));
    }
    s.handle_connected(t0);
    let _ = requests(&mut s, t0);
    let policies_again = || {
        let mut kubernetes = policy("kubernetes", "true");
        kubernetes.spec.as_mut().unwrap().evaluation_mode = "Kubernetes".into();
        // Not even valid otherwise: a policy not considered is not checked.
        let mut unset = policy("unset", "");
        unset.spec.as_mut().unwrap().evaluation_mode = String::new();
        vec![policy("a", "true"), kubernetes, unset]
    };
    s.handle_response(t0, snapshot("v1", "n1", policies_again()));
    let ack = requests(&mut s, t0);
    assert_eq!(ack.len(), 1);
    assert_eq!(
        (&*ack[0].version_info, &*ack[0].response_nonce),
        ("v1", "n1")
    );
    assert!(ack[0].error_detail.is_none());
    let mut got = shown(&events(&mut s));
    got.sort();
    assert_eq!(
        got,
        [
            "healthy",
            "skipped kubernetes",
            "skipped unset",
            "upsert a@v1"
        ]
    );
    assert_eq!(s.policy_names().collect::<Vec<_>>(), ["a"]);
    assert_eq!(
        s.skipped_policies().collect::<Vec<_>>(),
        ["kubernetes", "unset"]
    );
    assert_eq!(s.stats().policies_skipped, 2);
    // Said once: the same snapshot again says nothing more.
    s.handle_response(t0, snapshot("v1", "n2", policies_again()));
    let _ = requests(&mut s, t0);
    assert!(events(&mut s).is_empty());
    // Gone from the set: now they are deleted, which is news.
    s.handle_response(t0, snapshot("v2", "n3", vec![policy("a", "true")]));
    let _ = requests(&mut s, t0);
    let mut got = shown(&events(&mut s));
    got.sort();
    assert_eq!(got, ["removed kubernetes", "removed unset"]);
}

/// A NACK is visible to the operator: every policy the client serves from
/// this stream (the ones the rejected snapshot would have changed) gets an
/// error naming the snapshot's version and the reason, its last good copy
/// serving; names with no copy hear nothing. The next good snapshot states
/// the copies again, which clears the error.
#[test]
fn nack_reports_an_ambient_error_to_every_served_policy() {
    let t0 = Instant::now();
    let mut s = streaming(t0);
    s.subscribe(key("missing"));
    assert_eq!(shown(&events(&mut s)), ["removed missing"]);
    // An entry without a name: nothing to pin the error on but the set.
    let bad = snapshot("v2", "n2", vec![policy("a", "false"), policy("", "true")]);
    s.handle_response(t0, bad);
    let nack = requests(&mut s, t0);
    assert!(nack[0].error_detail.is_some());
    let got = events(&mut s);
    assert_eq!(shown(&got), ["invalid a", "invalid b"]);
    for event in &got {
        let CoreEvent::Invalid { error, version, .. } = event else {
            panic!("{event:?}");
        };
        assert_eq!(*version, "v2");
        assert!(error.0.contains("policies[1]"), "{error}");
    }
    assert_eq!(s.stats().nacks, 1);
    s.handle_response(
        t0,
        snapshot("v3", "n3", vec![policy("a", "true"), policy("b", "true")]),
    );
    let _ = requests(&mut s, t0);
    assert_eq!(shown(&events(&mut s)), ["upsert a@v3", "upsert b@v3"]);
}

/// The poll times of a session over a few intervals after its first
/// snapshot: (`poll` or `health`, time since the snapshot).
fn schedule(cfg: PolicySessionConfig) -> Vec<(&'static str, Duration)> {
    let t0 = Instant::now();
    let mut s = PolicySession::new(cfg);
    s.subscribe(key("a"));
    s.handle_connected(t0);
    s.handle_timeout(t0);
    let _ = std::iter::from_fn(|| s.poll_transmit(t0)).count();
    s.handle_response(t0, snapshot("v1", "n1", vec![policy("a", "true")]));
    let _ = std::iter::from_fn(|| s.poll_transmit(t0)).count();
    let mut fired = Vec::new();
    while fired.len() < 20 {
        let at = s.poll_timeout().unwrap();
        s.handle_timeout(at);
        for sent in std::iter::from_fn(|| s.poll_transmit(at)).collect::<Vec<_>>() {
            let kind = match sent {
                PolicyTransmit::Discovery(_) => "poll",
                PolicyTransmit::HealthCheck(_) => "health",
            };
            fired.push((kind, at - t0));
        }
    }
    fired
}

/// Every poll and health-check interval is spread by the seeded random
/// source within ±20 % (the documented bounds): one seed gives one
/// schedule, another seed another.
#[test]
fn jitter_is_drawn_from_the_seed_within_its_bounds() {
    let seeded = |seed| schedule(config().with_jitter(0.2, seed));
    let one = seeded(7);
    assert_eq!(one, seeded(7));
    assert_ne!(one, seeded(8));
    for kind in ["poll", "health"] {
        let base = if kind == "poll" { POLL } else { HEALTH };
        let times: Vec<Duration> = one
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, at)| *at)
            .collect();
        assert!(times.len() >= 2, "{one:?}");
        for pair in times.windows(2) {
            let interval = pair[1] - pair[0];
            assert!(
                interval >= base.mul_f64(0.8) && interval <= base.mul_f64(1.2),
                "{kind}: {interval:?} of {base:?}"
            );
        }
    }
    let exact = schedule(config().with_jitter(0.0, 7));
    let polls: Vec<Duration> = exact
        .iter()
        .filter(|(k, _)| *k == "poll")
        .map(|(_, at)| *at)
        .collect();
    assert_eq!(polls[0], POLL);
    assert_eq!(polls[1], POLL * 2);
}
