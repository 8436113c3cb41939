//! gRFC A71 server fallback and switch-back, per authority.

use super::support::{Harness, cluster, upsert};
use crate::entry::ResourceStatus;
use crate::error::{Cause, ErrorKind};

#[test]
fn a71_falls_back_when_the_active_server_fails_with_a_resource_unanswered() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    assert_eq!(h.subscribed(&c1), ["a1"]);
    h.fail("a1");
    assert_eq!(
        h.subscribed(&c1),
        ["a1", "a2"],
        "the primary keeps retrying"
    );
    let state = h.state(&c1);
    assert_eq!(state.status, ResourceStatus::Requested);
    assert!(
        state.error.is_none(),
        "a watcher without a copy waits for the fallback server"
    );
    h.upsert("a2", &c1, "from-a2");
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a2"));
    assert!(h.state(&c1).source.as_ref().is_some_and(|s| s.fallback));
}

#[test]
fn a71_no_fallback_while_every_resource_is_answered() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.upsert("a1", &c1, "v1");
    h.fail("a1");
    assert_eq!(h.subscribed(&c1), ["a1"]);
    let state = h.state(&c1);
    assert_eq!(h.tag(&c1).as_deref(), Some("v1"), "the copy keeps serving");
    let error = state.error.as_ref().expect("an ambient error");
    assert_eq!(error.kind(), ErrorKind::Transient);
    assert_eq!(error.cause(), &Cause::StreamFailed);
}

#[test]
fn a71_a_fallback_keeps_copies_serving_with_an_ambient_error() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    let c2 = h.watch(&cluster("a", "c2").name);
    h.upsert("a1", &c1, "v1");
    h.fail("a1");
    assert_eq!(h.subscribed(&c2), ["a1", "a2"]);
    assert_eq!(h.tag(&c1).as_deref(), Some("v1"));
    assert!(h.state(&c1).error.is_some());
    assert!(h.state(&c2).error.is_none());
}

#[test]
fn a71_switch_back_on_the_first_response_of_a_higher_priority_server_closes_the_fallback() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.fail("a1");
    h.upsert("a2", &c1, "from-a2");
    h.healthy("a1");
    assert_eq!(h.subscribed(&c1), ["a1"]);
    assert_eq!(h.closed, ["a2"], "the fallback stream is closed at once");
    assert_eq!(
        h.tag(&c1).as_deref(),
        Some("from-a2"),
        "the fallback's copy serves until the primary replaces it"
    );
    h.upsert("a1", &c1, "from-a1");
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a1"));
    assert!(h.state(&c1).source.as_ref().is_some_and(|s| !s.fallback));
}

#[test]
fn a71_switch_back_leaves_open_a_fallback_server_with_other_subscriptions() {
    let bootstrap = super::support::BOOTSTRAP.replace("b1:1", "a2:1");
    let mut h = Harness::with(&bootstrap, 8);
    let c1 = h.watch(&cluster("a", "c1").name);
    let b1 = h.watch(&cluster("b", "x").name);
    assert_eq!(h.subscribed(&b1), ["a2"]);
    h.fail("a1");
    h.healthy("a1");
    assert_eq!(h.subscribed(&c1), ["a1"]);
    assert_eq!(h.subscribed(&b1), ["a2"]);
    assert!(h.closed.is_empty(), "a2 is authority b's primary");
}

#[test]
fn a71_answers_from_a_server_after_the_active_one_are_dropped() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.upsert("a2", &c1, "stray");
    assert_eq!(h.tag(&c1), None);
    h.fail("a1");
    h.healthy("a1");
    h.upsert("a2", &c1, "in-flight");
    assert_eq!(h.tag(&c1), None, "a2 is no longer active");
}

#[test]
fn a71_failures_of_a_higher_priority_server_still_retrying_are_not_reported() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.fail("a1");
    h.upsert("a2", &c1, "from-a2");
    h.fail("a1");
    assert!(h.state(&c1).error.is_none());
    assert_eq!(h.subscribed(&c1), ["a1", "a2"]);
}

#[test]
fn a71_the_last_server_failing_reports_to_every_watcher() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.fail("a1");
    h.fail("a2");
    let error = h.state(&c1).error.as_ref().expect("an error");
    assert_eq!(error.kind(), ErrorKind::Transient);
    assert_eq!(error.server(), Some(h.server("a2").to_string().as_str()));
}

#[test]
fn a71_authorities_fall_back_independently() {
    let mut h = Harness::new();
    let a = h.watch(&cluster("a", "c1").name);
    let b = h.watch(&cluster("b", "c1").name);
    h.fail("a1");
    assert_eq!(h.subscribed(&a), ["a1", "a2"]);
    assert_eq!(h.subscribed(&b), ["b1"]);
    let event = upsert(&b, "b");
    h.events("b1", vec![event]);
    assert_eq!(h.tag(&b).as_deref(), Some("b"));
}

#[test]
fn a71_an_authority_with_nothing_left_to_fetch_returns_to_its_primary() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    h.fail("a1");
    h.unwatch(&c1);
    let c2 = h.watch(&cluster("a", "c2").name);
    assert_eq!(h.subscribed(&c2), ["a1"]);
}
