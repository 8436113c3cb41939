//! xds-protocol-v3 "Deleting Resources" and "Knowing When a Requested
//! Resource Does Not Exist" (incremental); gRFC A53.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{Session, SessionConfig};

/// §Deleting Resources: "the server signals the client that a resource
/// should be deleted via the removed_resources field".
#[test]
fn delta_removed_resources_deletes_a_held_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    s.handle_delta_response(now, dresp(CDS, "n2", vec![], &["a"]));
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "removed a"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        None
    );
    assert!(s.is_subscribed(&key(CDS, "a")), "the subscription stays");
}

/// §Knowing When a Requested Resource Does Not Exist (incremental): a
/// subscribed name in removed_resources that was never received does not
/// exist, at once, without waiting for the timer. It is reported as the
/// server's deletion, not as the timer: the server answered (an `#alt`
/// alternative is for when nobody does).
#[test]
fn delta_removed_resources_reports_does_not_exist_for_an_unreceived_name() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    assert!(s.poll_timeout().is_some());
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &["a"]));
    assert_eq!(events(&mut s), ["healthy", "removed a"]);
    assert_eq!(s.poll_timeout(), None, "the timer is cancelled");
}

#[test]
fn delta_removed_name_not_subscribed_is_ignored() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &["zz"]));
    assert_eq!(events(&mut s), ["healthy"]);
}

/// §Deleting Resources (SotW): "For Listener and Cluster resource types, if
/// a previously seen resource is not present in a new response, that
/// indicates that the resource has been removed".
#[test]
fn sotw_absence_deletes_full_state_resources() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    s.handle_sotw_response(
        now,
        sresp(CDS, "v1", "n1", vec![cluster("a"), cluster("b")]),
    );
    s.handle_sotw_response(now, sresp(CDS, "v2", "n2", vec![cluster("a")]));
    assert_eq!(
        events(&mut s),
        [
            "healthy",
            "upsert a v1",
            "upsert b v1",
            "upsert a v2",
            "removed b"
        ]
    );
}

/// "a response containing no resources means to delete all resources of
/// that type".
#[test]
fn sotw_empty_full_state_response_deletes_every_held_resource() {
    let now = t0();
    let mut s = sotw_subscribed(now, LDS, &["l"]);
    s.handle_sotw_response(now, sresp(LDS, "v1", "n1", vec![listener("l")]));
    s.handle_sotw_response(now, sresp(LDS, "v2", "n2", vec![]));
    assert_eq!(events(&mut s), ["healthy", "upsert l v1", "removed l"]);
}

/// "For those resource types, an empty DiscoveryResponse is effectively a
/// no-op from the client's perspective."
#[test]
fn sotw_absence_does_not_delete_non_full_state_resources() {
    let now = t0();
    let mut s = sotw_subscribed(now, EDS, &["e", "f"]);
    s.handle_sotw_response(
        now,
        sresp(EDS, "v1", "n1", vec![endpoints("e"), endpoints("f")]),
    );
    s.handle_sotw_response(now, sresp(EDS, "v2", "n2", vec![endpoints("e")]));
    s.handle_sotw_response(now, sresp(EDS, "v3", "n3", vec![]));
    assert_eq!(
        events(&mut s),
        ["healthy", "upsert e v1", "upsert f v1", "upsert e v2"]
    );
}

/// Absence deletes only what was seen: a newly requested name may simply
/// not be in a response computed before the server saw the request.
#[test]
fn sotw_absence_of_a_never_received_name_is_not_a_deletion() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    s.subscribe(key(CDS, "b"));
    s.handle_sotw_response(now, sresp(CDS, "v2", "n2", vec![cluster("a")]));
    assert_eq!(events(&mut s), ["healthy", "upsert a v1", "upsert a v2"]);
}

/// An invalid resource is present, not deleted: its last good copy stays.
#[test]
fn sotw_invalid_resource_is_not_deleted_by_absence() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    s.handle_sotw_response(
        now,
        sresp(
            CDS,
            "v2",
            "n2",
            vec![wrapped("a", Some(bad_cluster("a")), None)],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert a v1", "invalid a"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("v1")
    );
}

/// When a resource of the response cannot be named, the client cannot
/// know what is absent, and deletes nothing.
#[test]
fn sotw_response_with_an_unnamed_invalid_resource_deletes_nothing() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    s.handle_sotw_response(
        now,
        sresp(CDS, "v1", "n1", vec![cluster("a"), cluster("b")]),
    );
    s.handle_sotw_response(now, sresp(CDS, "v2", "n2", vec![cluster("a"), cluster("")]));
    assert_eq!(
        events(&mut s),
        ["healthy", "upsert a v1", "upsert b v1", "upsert a v2"]
    );
}

/// gRFC A53: with `ignore_resource_deletion`, a deleted Listener or Cluster
/// keeps serving; the deletion is counted.
#[test]
fn ignore_resource_deletion_keeps_full_state_resources() {
    let now = t0();
    let mut cfg = config(ApiVariant::Sotw);
    cfg.ignore_resource_deletion = true;
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "a"));
    let _ = connect_sotw(&mut s, now);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    s.handle_sotw_response(now, sresp(CDS, "v2", "n2", vec![]));
    assert_eq!(events(&mut s), ["healthy", "upsert a v1"]);
    assert_eq!(s.stats().deletions_ignored, 1);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("v1")
    );
}

#[test]
fn ignore_resource_deletion_does_not_apply_to_other_types() {
    let now = t0();
    let cfg = SessionConfig {
        ignore_resource_deletion: true,
        ..config(ApiVariant::Delta)
    };
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(EDS, "e"));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(EDS, "n1", vec![dres("e", "1", Some(endpoints("e")))], &[]),
    );
    s.handle_delta_response(now, dresp(EDS, "n2", vec![], &["e"]));
    assert_eq!(events(&mut s), ["healthy", "upsert e 1", "removed e"]);
}
