//! Federation: a server may only deliver names of the authorities mapped to
//! it (xDS TP1); TP3 `resource_errors`.

use super::support::*;
use crate::bootstrap::ApiVariant;

use crate::protocol::{AuthorityFilter, Session};
use envoy_types::pb::envoy::service::discovery::v3::{ResourceError, ResourceName};
use envoy_types::pb::google::rpc::Status;

const A: &str = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1";
const B: &str = "xdstp://b.example/envoy.config.cluster.v3.Cluster/c1";

fn filtered(variant: ApiVariant) -> Session {
    let cfg = config(variant).with_authorities(AuthorityFilter::new().with_authority("a.example"));
    Session::new(cfg, registry())
}

/// Another authority's resource is ignored and counted, not NACKed, even
/// when subscribed (a mis-routed subscription must not let a server inject
/// it).
#[test]
fn foreign_authority_resource_is_ignored_and_counted_not_nacked() {
    let now = t0();
    let mut s = filtered(ApiVariant::Delta);
    s.subscribe(key(CDS, A));
    s.subscribe(key(CDS, B));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres(A, "1", Some(cluster(A))),
                dres(B, "1", Some(bad_cluster(B))),
            ],
            &[B],
        ),
    );
    assert_eq!(
        events(&mut s),
        ["healthy", format!("upsert {A} 1").as_str()]
    );
    assert_eq!(s.stats().foreign_names_ignored, 2);
    assert!(drain_delta(&mut s, now)[0].error_detail.is_none());
}

#[test]
fn foreign_authority_resource_in_sotw_is_ignored_and_counted() {
    let now = t0();
    let mut s = filtered(ApiVariant::Sotw);
    s.subscribe_wildcard(CDS);
    let _ = connect_sotw(&mut s, now);
    s.handle_sotw_response(
        now,
        sresp(
            CDS,
            "v1",
            "n1",
            vec![cluster(A), cluster(B), cluster("old")],
        ),
    );
    assert_eq!(
        events(&mut s),
        ["healthy", format!("upsert {A} v1").as_str()]
    );
    assert_eq!(
        s.stats().foreign_names_ignored,
        2,
        "b.example and the old-style name"
    );
}

#[test]
fn old_style_names_are_accepted_only_when_allowed() {
    let now = t0();
    let cfg =
        config(ApiVariant::Delta).with_authorities(AuthorityFilter::new().with_old_style(true));
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "old"));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("old", "1", Some(cluster("old")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert old 1"]);
}

fn resource_error(name: &str, code: i32) -> ResourceError {
    ResourceError {
        resource_name: Some(ResourceName {
            name: name.into(),
            ..ResourceName::default()
        }),
        error_detail: Some(Status {
            code,
            message: "boom".into(),
            details: vec![],
        }),
    }
}

/// TP3: a server-reported error for a resource reaches the cache.
#[test]
fn resource_errors_are_reported_per_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    let mut r = dresp(CDS, "n1", vec![], &[]);
    r.resource_errors = vec![resource_error("a", 7), resource_error("zz", 7)];
    s.handle_delta_response(now, r);
    assert_eq!(events(&mut s), ["healthy", "error a 7"]);
    assert_eq!(s.poll_timeout(), None, "the server answered: no timeout");
    assert!(drain_delta(&mut s, now)[0].error_detail.is_none());
}

#[test]
fn sotw_resource_errors_are_reported_per_resource() {
    let now = t0();
    let mut s = sotw_subscribed(now, EDS, &["e"]);
    let mut r = sresp(EDS, "v1", "n1", vec![]);
    r.resource_errors = vec![resource_error("e", 14)];
    s.handle_sotw_response(now, r);
    assert_eq!(events(&mut s), ["healthy", "error e 14"]);
}

/// "A resource in this field with a status of NOT_FOUND should be treated
/// the same as a resource listed in the removed_resources".
#[test]
fn resource_error_not_found_is_a_deletion() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    let mut r = dresp(CDS, "n2", vec![], &[]);
    r.resource_errors = vec![
        resource_error("a", crate::error::GrpcCode::NotFound.as_i32()),
        resource_error("b", crate::error::GrpcCode::NotFound.as_i32()),
    ];
    s.handle_delta_response(now, r);
    assert_eq!(
        events(&mut s),
        ["healthy", "upsert a 1", "removed a", "removed b"]
    );
}
