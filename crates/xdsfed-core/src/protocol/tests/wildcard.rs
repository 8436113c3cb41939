//! xds-protocol-v3 "How the client specifies what resources to return":
//! the wildcard, its two worked examples and the legacy empty-list rule.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::StreamEnd;

/// The spec's SotW example, with `*` explicit: `[*]`, `[*, A]`, `[A]`, `[]`.
/// The last request is sent although empty: "it is not interpreted as a
/// wildcard subscription, because there has previously been a request on
/// this stream for this resource type that set the resource_names field".
#[test]
fn sotw_wildcard_follows_the_spec_example() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe_wildcard(CDS);
    let r1 = connect_sotw(&mut s, now);
    assert_eq!(r1[0].resource_names, strs(&["*"]));
    s.subscribe(key(CDS, "A"));
    assert_eq!(drain_sotw(&mut s, now)[0].resource_names, strs(&["*", "A"]));
    s.unsubscribe_wildcard(CDS);
    assert_eq!(drain_sotw(&mut s, now)[0].resource_names, strs(&["A"]));
    s.unsubscribe(&key(CDS, "A"));
    let last = drain_sotw(&mut s, now);
    assert_eq!(last.len(), 1, "the empty list is sent: it unsubscribes A");
    assert!(last[0].resource_names.is_empty());
}

/// The spec's incremental example, with `*` explicit.
#[test]
fn delta_wildcard_follows_the_spec_example() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe_wildcard(CDS);
    let r1 = connect_delta(&mut s, now);
    assert_eq!(r1[0].resource_names_subscribe, strs(&["*"]));
    s.subscribe(key(CDS, "A"));
    let r2 = drain_delta(&mut s, now);
    assert_eq!(r2[0].resource_names_subscribe, strs(&["A"]));
    assert!(r2[0].resource_names_unsubscribe.is_empty());
    s.unsubscribe_wildcard(CDS);
    let r3 = drain_delta(&mut s, now);
    assert!(r3[0].resource_names_subscribe.is_empty());
    assert_eq!(r3[0].resource_names_unsubscribe, strs(&["*"]));
    s.unsubscribe(&key(CDS, "A"));
    let r4 = drain_delta(&mut s, now);
    assert_eq!(r4[0].resource_names_unsubscribe, strs(&["A"]));
}

/// Legacy rule: an empty first request means `*`. The client never relies
/// on it, and never sends an empty first request for a type it does not want.
#[test]
fn legacy_empty_request_is_never_sent_first_on_a_stream() {
    let now = t0();
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let mut s = session(variant);
        s.subscribe(key(CDS, "A"));
        s.unsubscribe(&key(CDS, "A"));
        s.handle_connected(now);
        assert!(
            drain(&mut s, now).is_empty(),
            "{variant:?}: nothing wanted, nothing sent"
        );
        s.subscribe(key(EDS, "e"));
        s.unsubscribe(&key(EDS, "e"));
        assert!(
            drain(&mut s, now).is_empty(),
            "{variant:?}: nothing was ever sent for EDS"
        );
    }
}

#[test]
fn legacy_empty_request_is_not_resent_after_reconnect_with_nothing_subscribed() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["A"]);
    s.unsubscribe(&key(CDS, "A"));
    assert_eq!(drain_sotw(&mut s, now).len(), 1);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    assert!(connect_sotw(&mut s, now).is_empty());
}

/// Under `*`, resources nobody named are accepted.
#[test]
fn wildcard_accepts_resources_nobody_named() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe_wildcard(CDS);
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("x", "1", Some(cluster("x")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert x 1"]);
    assert_eq!(s.stats().unrequested_ignored, 0);
}

#[test]
fn sotw_wildcard_accepts_resources_nobody_named() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe_wildcard(LDS);
    let _ = connect_sotw(&mut s, now);
    s.handle_sotw_response(
        now,
        sresp(LDS, "v1", "n1", vec![listener("x"), listener("y")]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert x v1", "upsert y v1"]);
}

/// §Unsubscribing from Resources: with `*` and a name, unsubscribing the
/// name does not drop the resource: "the server must send a response that
/// includes the specific resource in either the removed_resources field [...]
/// or in the resources field".
#[test]
fn unsubscribing_a_name_under_wildcard_keeps_it_until_the_server_says() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe_wildcard(CDS);
    s.subscribe(key(CDS, "a"));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    s.unsubscribe(&key(CDS, "a"));
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("1")
    );
    s.handle_delta_response(now, dresp(CDS, "n2", vec![], &["a"]));
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "removed a"]);
}

/// Dropping `*` forgets what only `*` delivered; later copies of it are
/// unrequested.
#[test]
fn unsubscribing_wildcard_forgets_what_only_wildcard_delivered() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe_wildcard(CDS);
    s.subscribe(key(CDS, "a"));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres("a", "1", Some(cluster("a"))),
                dres("x", "1", Some(cluster("x"))),
            ],
            &[],
        ),
    );
    s.unsubscribe_wildcard(CDS);
    assert_eq!(
        s.held_version(&key(CDS, "x")).map(String::from).as_deref(),
        None
    );
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("1")
    );
    s.handle_delta_response(
        now,
        dresp(CDS, "n2", vec![dres("x", "2", Some(cluster("x")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "upsert x 1"]);
    assert_eq!(s.stats().unrequested_ignored, 1);
}

/// Subscribing `*` twice, or dropping it when not subscribed, sends nothing.
#[test]
fn wildcard_commands_are_idempotent() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe_wildcard(CDS);
    let _ = connect_delta(&mut s, now);
    s.subscribe_wildcard(CDS);
    s.unsubscribe_wildcard(LDS);
    assert!(drain(&mut s, now).is_empty());
    assert!(s.is_wildcard(CDS));
}
