//! A resource's name on the wire against the name inside it (rule 6 of
//! `protocol::ingest`): a resource that claims one name outside and
//! another inside is NACKed, naming both, and the last good copy stays.

use super::support::*;
use crate::protocol::ack::INVALID_ARGUMENT;

/// The message of the one NACK the session owes after a delta response.
fn delta_nack(s: &mut crate::protocol::Session, now: std::time::Instant) -> String {
    let nack = drain_delta(s, now);
    assert_eq!(nack.len(), 1);
    let detail = nack[0].error_detail.as_ref().expect("a NACK");
    assert_eq!(detail.code, INVALID_ARGUMENT);
    detail.message.clone()
}

#[test]
fn delta_resource_whose_inner_name_differs_is_nacked_naming_both() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    let _ = drain_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(CDS, "n2", vec![dres("a", "2", Some(cluster("other")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert a 1", "invalid a"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("1"),
        "the last good copy stays"
    );
    assert_eq!(
        delta_nack(&mut s, now),
        "1 rejected type.googleapis.com/envoy.config.cluster.v3.Cluster resource: \
         a: resource name mismatch: sent as \"a\", but the resource names itself \"other\""
    );
    assert_eq!(s.stats().resource_updates_invalid, 1);
}

/// Every type that carries its name inside is checked, each by its own
/// field (`Listener.name`, `ClusterLoadAssignment.cluster_name`).
#[test]
fn delta_mismatch_is_nacked_for_listeners_and_endpoints() {
    let now = t0();
    for (type_url, body) in [(LDS, listener("other")), (EDS, endpoints("other"))] {
        let mut s = delta_subscribed(now, type_url, &["a"]);
        s.handle_delta_response(
            now,
            dresp(type_url, "n1", vec![dres("a", "1", Some(body))], &[]),
        );
        assert_eq!(events(&mut s), ["healthy", "invalid a"], "{type_url}");
        let message = delta_nack(&mut s, now);
        assert!(
            message.contains("sent as \"a\", but the resource names itself \"other\""),
            "{message}"
        );
    }
}

/// The wire name keys the rejection, so a resource cannot update another
/// subscription by naming it inside: the inner name's watcher sees nothing.
#[test]
fn delta_mismatch_does_not_touch_the_resource_named_inside() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("b")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid a"]);
    assert_eq!(
        s.held_version(&key(CDS, "b")).map(String::from).as_deref(),
        None
    );
    assert!(delta_nack(&mut s, now).contains("names itself \"b\""));
}

/// A SotW resource in a `Resource` wrapper has two names, like delta.
#[test]
fn sotw_wrapped_resource_whose_inner_name_differs_is_nacked_naming_both() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let _ = drain_sotw(&mut s, now);
    s.handle_sotw_response(
        now,
        sresp(
            CDS,
            "v2",
            "n2",
            vec![wrapped("a", Some(cluster("other")), None)],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", "upsert a v1", "invalid a"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("v1")
    );
    let nack = drain_sotw(&mut s, now);
    assert_eq!(nack[0].version_info, "v1");
    let message = &nack[0].error_detail.as_ref().expect("a NACK").message;
    assert!(
        message.contains(
            "a: resource name mismatch: sent as \"a\", but the resource names itself \"other\""
        ),
        "{message}"
    );
}

/// A SotW resource without the wrapper has only its inner name: it is the
/// resource of that name, and nothing can disagree.
#[test]
fn sotw_unwrapped_resource_goes_by_its_inner_name() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "other"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("other")]));
    assert_eq!(events(&mut s), ["healthy", "upsert other v1"]);
    assert!(drain_sotw(&mut s, now)[0].error_detail.is_none());
}

/// xdstp names are compared by canonical key: the order of context
/// parameters and the spelling of percent-escapes do not make two names.
#[test]
fn xdstp_names_that_differ_only_in_spelling_are_the_same_name() {
    let now = t0();
    let wire = "xdstp://a/envoy.config.cluster.v3.Cluster/c~1?a=%2F&b=2";
    let inner = "xdstp://a/envoy.config.cluster.v3.Cluster/c%7e1?b=2&a=%2f";
    let mut s = delta_subscribed(now, CDS, &[wire]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres(wire, "1", Some(cluster(inner)))], &[]),
    );
    assert_eq!(
        events(&mut s),
        ["healthy".to_owned(), format!("upsert {wire} 1")]
    );
    assert!(drain_delta(&mut s, now)[0].error_detail.is_none());
}

/// An xdstp name with another id is another resource.
#[test]
fn xdstp_names_of_different_resources_mismatch() {
    let now = t0();
    let wire = "xdstp://a/envoy.config.cluster.v3.Cluster/c1?k=v";
    let inner = "xdstp://a/envoy.config.cluster.v3.Cluster/c1?k=w";
    let mut s = delta_subscribed(now, CDS, &[wire]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres(wire, "1", Some(cluster(inner)))], &[]),
    );
    assert_eq!(events(&mut s).len(), 2);
    let message = delta_nack(&mut s, now);
    assert!(
        message.contains(&format!("names itself {inner:?}")),
        "{message}"
    );
}

/// Old-style names are opaque: compared byte for byte.
#[test]
fn old_style_names_compare_exactly() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["svc"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("svc", "1", Some(cluster("SVC")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid svc"]);
    assert!(delta_nack(&mut s, now).contains("names itself \"SVC\""));
}

/// A mismatch is one bad resource among good ones (gRFC A46): the others of
/// the response are applied.
#[test]
fn mismatch_rejects_only_that_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres("a", "1", Some(cluster("x"))),
                dres("b", "1", Some(cluster("b"))),
            ],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid a", "upsert b 1"]);
    assert!(delta_nack(&mut s, now).starts_with("1 rejected"));
}
