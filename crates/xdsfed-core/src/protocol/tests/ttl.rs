//! xds-protocol-v3 "TTL" and "SotW TTL".

use super::support::*;
use crate::protocol::{CoreEvent, StreamEnd};

fn with_ttl(
    mut r: envoy_types::pb::envoy::service::discovery::v3::Resource,
    s: i64,
) -> envoy_types::pb::envoy::service::discovery::v3::Resource {
    r.ttl = Some(pb_secs(s));
    r
}

/// "Each resource will have its own TTL expiry time, at which point the
/// resource will be expired."
#[test]
fn ttl_expiry_removes_the_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    assert_eq!(s.poll_timeout(), Some(now + secs(30)));
    s.handle_timeout(now + secs(30));
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "expired a"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        None
    );
}

#[test]
fn upsert_reports_the_ttl() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    let ttl = std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        CoreEvent::Upsert { ttl, .. } => Some(ttl),
        _ => None,
    });
    assert_eq!(ttl, Some(Some(secs(30))));
}

/// TTL keeps running while disconnected: that is its purpose ("remove a set
/// of resources after a specified period of time if contact with the
/// management server is lost").
#[test]
fn ttl_runs_while_the_stream_is_down() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    s.handle_stream_end(now + secs(1), StreamEnd::new(14, "gone"));
    s.handle_timeout(now + secs(30));
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "expired a"]);
}

/// "a response can be sent that provides a Resource with the resource unset
/// and version matching the most recently sent version can be used to update
/// the TTL. These resources will not be treated as resource updates".
#[test]
fn heartbeat_only_refreshes_the_ttl() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    let _ = drain(&mut s, now);
    s.handle_delta_response(
        now + secs(20),
        dresp(CDS, "n2", vec![with_ttl(dres("a", "1", None), 30)], &[]),
    );
    assert_eq!(
        events(&mut s),
        ["healthy", "upsert a 1"],
        "no update for a heartbeat"
    );
    assert_eq!(s.poll_timeout(), Some(now + secs(50)));
    let ack = drain_delta(&mut s, now + secs(20));
    assert!(ack[0].error_detail.is_none());
    s.handle_timeout(now + secs(49));
    assert!(events(&mut s).is_empty());
}

/// A bodiless resource at another version is not a heartbeat: NACK it.
#[test]
fn heartbeat_with_another_version_is_nacked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    let _ = drain(&mut s, now);
    s.handle_delta_response(now, dresp(CDS, "n2", vec![dres("a", "2", None)], &[]));
    let nack = drain_delta(&mut s, now);
    assert!(nack[0].error_detail.is_some());
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("1")
    );
}

/// "To remove the TTL, the management server resends the resource with the
/// TTL field unset."
#[test]
fn resending_without_ttl_removes_the_ttl() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), 30)],
            &[],
        ),
    );
    s.handle_delta_response(
        now,
        dresp(CDS, "n2", vec![dres("a", "2", Some(cluster("a")))], &[]),
    );
    assert_eq!(s.poll_timeout(), None);
}

/// "In order to use TTL with SotW xDS, the relevant resources must be
/// wrapped in a Resource"; heartbeats work there too.
#[test]
fn sotw_wrapped_resource_carries_a_ttl_and_heartbeats_refresh_it() {
    let now = t0();
    let mut s = sotw_subscribed(now, EDS, &["e"]);
    s.handle_sotw_response(
        now,
        sresp(
            EDS,
            "v1",
            "n1",
            vec![wrapped("e", Some(endpoints("e")), Some(pb_secs(10)))],
        ),
    );
    assert_eq!(s.poll_timeout(), Some(now + secs(10)));
    s.handle_sotw_response(
        now + secs(5),
        sresp(EDS, "v2", "n2", vec![wrapped("e", None, Some(pb_secs(10)))]),
    );
    assert_eq!(s.poll_timeout(), Some(now + secs(15)));
    s.handle_timeout(now + secs(15));
    assert_eq!(events(&mut s), ["healthy", "upsert e v1", "expired e"]);
}

/// A heartbeat keeps a full-state resource present (it is not deleted by
/// absence).
#[test]
fn sotw_heartbeat_counts_as_present_for_full_state_types() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(
        now,
        sresp(
            CDS,
            "v1",
            "n1",
            vec![wrapped("a", Some(cluster("a")), Some(pb_secs(10)))],
        ),
    );
    s.handle_sotw_response(
        now,
        sresp(CDS, "v2", "n2", vec![wrapped("a", None, Some(pb_secs(10)))]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert a v1"]);
}

#[test]
fn negative_ttl_is_nacked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![with_ttl(dres("a", "1", Some(cluster("a"))), -1)],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid a"]);
    assert!(drain_delta(&mut s, now)[0].error_detail.is_some());
}
