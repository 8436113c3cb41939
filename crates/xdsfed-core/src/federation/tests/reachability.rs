//! gRFC A95's `fallback_on_reachability_only`: an authority that falls back
//! whenever its primary is unreachable, cached resources or not, and
//! returns to it when it answers again. Authority `a` has the knob, `b`
//! has not (see [`BOOTSTRAP`](super::support::BOOTSTRAP)).

use super::support::{Harness, cluster, with_reachability_only};
use crate::error::{Cause, ErrorKind};
use crate::protocol::CoreEvent;
use crate::types::ValidationError;

/// The harness bootstrap with `fallback_on_reachability_only` set on authority `a`.
fn reachability_only() -> String {
    with_reachability_only(&["a"])
}

/// A harness on [`reachability_only`] with `c1` of authority `a` cached
/// from its primary `a1`.
fn cached_on_the_primary() -> (Harness, crate::protocol::ResourceKey) {
    let mut h = Harness::with(&reachability_only(), 8);
    let c1 = h.watch(&cluster("a", "c1").name);
    h.upsert("a1", &c1, "from-a1");
    (h, c1)
}

/// gRFC A95: "If set to true, then we will fallback when the primary
/// server is unreachable, even if we do not have any uncached resources."
#[test]
fn a95_falls_back_when_the_primary_is_unreachable_even_with_every_resource_cached() {
    let (mut h, c1) = cached_on_the_primary();
    h.fail("a1");
    assert_eq!(
        h.subscribed(&c1),
        ["a1", "a2"],
        "the secondary is asked; the primary keeps retrying"
    );
    assert_eq!(
        h.tag(&c1).as_deref(),
        Some("from-a1"),
        "the cached copy serves until the secondary answers"
    );
    let error = h.state(&c1).error.as_ref().expect("an ambient error");
    assert_eq!(error.kind(), ErrorKind::Transient);
    assert_eq!(error.cause(), &Cause::StreamFailed);
    h.upsert("a2", &c1, "from-a2");
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a2"));
    assert!(h.state(&c1).source.as_ref().is_some_and(|s| s.fallback));
}

/// gRFC A95 builds on A71: the first response of the primary's stream
/// makes it active again, the secondary is left and its stream closed,
/// and the primary's copies replace the secondary's.
#[test]
fn a95_switches_back_when_the_primary_is_reachable_again() {
    let (mut h, c1) = cached_on_the_primary();
    h.fail("a1");
    h.upsert("a2", &c1, "from-a2");
    h.healthy("a1");
    assert_eq!(h.subscribed(&c1), ["a1"]);
    assert_eq!(h.closed, ["a2"], "the fallback stream is closed at once");
    h.upsert("a1", &c1, "from-a1-again");
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a1-again"));
    assert!(h.state(&c1).source.as_ref().is_some_and(|s| !s.fallback));
}

/// gRFC A95: the knob is "per-authority", and "we make fallback decisions
/// on a per-authority basis": on a primary both authorities share, only
/// the one with the knob leaves its cached resources for its secondary.
#[test]
fn a95_the_knob_is_per_authority() {
    let bootstrap = reachability_only().replace("b1:1", "a1:1");
    let mut h = Harness::with(&bootstrap, 8);
    let a = h.watch(&cluster("a", "c1").name);
    let b = h.watch(&cluster("b", "c1").name);
    h.upsert("a1", &a, "a");
    h.upsert("a1", &b, "b");
    h.fail("a1");
    assert_eq!(h.subscribed(&a), ["a1", "a2"]);
    assert_eq!(
        h.subscribed(&b),
        ["a1"],
        "gRFC A71 for b: everything it watches is cached"
    );
}

/// gRFC A95 falls back on reachability: a resource the primary rejects
/// (a NACK) or reports missing is an answer from a reachable server, not
/// a reason to leave it.
#[test]
fn a95_a_data_error_or_a_missing_resource_is_no_reason_to_fall_back() {
    let (mut h, c1) = cached_on_the_primary();
    let c2 = h.watch(&cluster("a", "c2").name);
    let invalid = CoreEvent::Invalid {
        key: c1.clone(),
        error: ValidationError::field("lb_policy", "unsupported"),
        version: crate::version::Version::from("v2"),
    };
    let missing = CoreEvent::DoesNotExist { key: c2.clone() };
    h.events("a1", vec![invalid, missing]);
    assert_eq!(h.subscribed(&c1), ["a1"]);
    assert_eq!(h.subscribed(&c2), ["a1"]);
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a1"));
}

/// gRFC A71, unchanged by A95: while the secondary serves, failures of the
/// primary (still retrying) are not reported and change nothing.
#[test]
fn a95_the_primary_failing_again_while_the_secondary_serves_changes_nothing() {
    let (mut h, c1) = cached_on_the_primary();
    h.fail("a1");
    h.upsert("a2", &c1, "from-a2");
    h.fail("a1");
    assert_eq!(h.subscribed(&c1), ["a1", "a2"]);
    assert!(h.state(&c1).error.is_none());
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a2"));
}

/// gRFC A71, unchanged by A95: with no server left to fall back to, the
/// watchers hear of the failure and the last copy keeps serving.
#[test]
fn a95_the_last_server_failing_reports_and_keeps_the_copy() {
    let (mut h, c1) = cached_on_the_primary();
    h.fail("a1");
    h.fail("a2");
    assert_eq!(h.subscribed(&c1), ["a1", "a2"]);
    assert_eq!(h.tag(&c1).as_deref(), Some("from-a1"));
    let error = h.state(&c1).error.as_ref().expect("an ambient error");
    assert_eq!(error.server(), Some(h.server("a2").to_string().as_str()));
}

/// gRFC A71's "starting afresh", kept under A95: an authority with nothing
/// watched has nothing to fall back for, and the next watch starts on the
/// primary.
#[test]
fn a95_an_authority_with_nothing_watched_stays_on_its_primary() {
    let mut h = Harness::with(&reachability_only(), 8);
    let c1 = h.watch(&cluster("a", "c1").name);
    h.unwatch(&c1);
    h.fail("a1");
    let c2 = h.watch(&cluster("a", "c2").name);
    assert_eq!(h.subscribed(&c2), ["a1"]);
    assert!(h.closed.is_empty());
}
