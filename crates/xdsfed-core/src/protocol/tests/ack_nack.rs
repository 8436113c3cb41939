//! xds-protocol-v3 "Basic Protocol Overview", "ACK/NACK and resource type
//! instance version", "Duplicate Resource Names"; gRFC A46 (partial
//! validity).

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::ack::INVALID_ARGUMENT;
use crate::protocol::{FEATURE_RESOURCE_IN_SOTW, FEATURE_RESOURCE_TTL, StreamEnd};

/// §Basic Protocol Overview: "Only the first request on a stream is
/// guaranteed to carry the node identifier" — we send it on the first only.
#[test]
fn node_is_sent_on_the_first_request_of_each_stream_only() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.subscribe(key(LDS, "l"));
    let first = connect_delta(&mut s, now);
    assert_eq!(first.len(), 2);
    assert!(first[0].node.is_some());
    assert!(first[1].node.is_none());
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let again = connect_delta(&mut s, now);
    assert!(again[0].node.is_some());
    assert!(again[1].node.is_none());
}

#[test]
fn node_carries_the_resource_in_sotw_and_ttl_client_features() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe(key(CDS, "a"));
    let first = connect_sotw(&mut s, now);
    let features = &first[0]
        .node
        .as_ref()
        .expect("first request has a node")
        .client_features;
    assert!(features.iter().any(|f| f == FEATURE_RESOURCE_IN_SOTW));
    assert!(features.iter().any(|f| f == FEATURE_RESOURCE_TTL));
}

/// §ACK: "the version_info will be X" and the nonce is echoed.
#[test]
fn sotw_ack_carries_the_response_version_and_nonce() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let ack = drain_sotw(&mut s, now);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].version_info, "v1");
    assert_eq!(ack[0].response_nonce, "n1");
    assert_eq!(ack[0].resource_names, strs(&["a"]));
    assert!(ack[0].error_detail.is_none());
    assert_eq!(events(&mut s), ["healthy", "upsert a v1"]);
}

#[test]
fn delta_ack_echoes_the_nonce_without_error_detail() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    let ack = drain_delta(&mut s, now);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].response_nonce, "n1");
    assert!(ack[0].error_detail.is_none());
    assert!(ack[0].resource_names_subscribe.is_empty());
}

/// §NACK: "it would reply with error_detail populated and its previous
/// version".
#[test]
fn sotw_nack_keeps_last_acked_version_and_echoes_nonce() {
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
            vec![wrapped("a", Some(bad_cluster("a")), None)],
        ),
    );
    let nack = drain_sotw(&mut s, now);
    assert_eq!(nack[0].version_info, "v1");
    assert_eq!(nack[0].response_nonce, "n2");
    let detail = nack[0]
        .error_detail
        .as_ref()
        .expect("a NACK carries error_detail");
    assert_eq!(detail.code, INVALID_ARGUMENT);
    assert!(
        detail.message.contains("a: alt_stat_name: marked invalid"),
        "{}",
        detail.message
    );
}

#[test]
fn sotw_nack_of_the_first_response_carries_the_empty_version() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![bad_cluster("a")]));
    let nack = drain_sotw(&mut s, now);
    assert_eq!(nack[0].version_info, "");
    assert!(nack[0].error_detail.is_some());
}

/// §NACK: the error_detail lists every bad resource and why.
#[test]
fn nack_error_detail_lists_every_rejected_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b", "c"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres("a", "1", Some(bad_cluster("a"))),
                dres("b", "1", Some(cluster("b"))),
                dres("c", "1", Some(bad_cluster("c"))),
            ],
            &[],
        ),
    );
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert_eq!(detail.code, INVALID_ARGUMENT);
    assert!(
        detail.message.starts_with("2 rejected"),
        "{}",
        detail.message
    );
    assert!(
        detail.message.contains("a: alt_stat_name"),
        "{}",
        detail.message
    );
    assert!(
        detail.message.contains("c: alt_stat_name"),
        "{}",
        detail.message
    );
    assert!(!detail.message.contains("b:"), "{}", detail.message);
}

/// gRFC A46: the valid resources of a NACKed response are applied; the
/// invalid ones are reported, and the last good copy stays held.
#[test]
fn partial_validity_applies_valid_resources_of_a_nacked_response() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    let _ = drain_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n2",
            vec![
                dres("a", "2", Some(bad_cluster("a"))),
                dres("b", "1", Some(cluster("b"))),
            ],
            &[],
        ),
    );
    assert_eq!(
        events(&mut s),
        ["healthy", "upsert a 1", "invalid a", "upsert b 1"]
    );
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("1"),
        "the last good copy stays"
    );
    assert_eq!(s.stats().resource_updates_valid, 2);
    assert_eq!(s.stats().resource_updates_invalid, 1);
    let by_type: Vec<_> = s
        .stats()
        .updates_by_type
        .iter()
        .map(|(t, c)| (t.to_string(), c.valid, c.invalid))
        .collect();
    assert_eq!(
        by_type,
        [(CDS.to_owned(), 2, 1)],
        "gRFC A78: counted per type"
    );
    assert!(drain_delta(&mut s, now)[0].error_detail.is_some());
}

#[test]
fn sotw_partial_validity_applies_valid_resources_and_nacks_with_previous_version() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    let bad_b = wrapped("b", Some(bad_cluster("b")), None);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a"), bad_b]));
    assert_eq!(events(&mut s), ["healthy", "upsert a v1", "invalid b"]);
    let nack = drain_sotw(&mut s, now);
    assert_eq!(nack[0].version_info, "");
    assert!(nack[0].error_detail.is_some());
}

/// §Duplicate Resource Names: "Clients should NACK responses that contain
/// multiple instances of the same resource name."
#[test]
fn duplicate_names_in_one_delta_response_are_nacked_and_not_applied() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres("a", "1", Some(cluster("a"))),
                dres("b", "1", Some(cluster("b"))),
                dres("a", "2", Some(cluster_with("a", "x"))),
            ],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid a", "upsert b 1"]);
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(
        detail.message.contains("a: appears 2 times"),
        "{}",
        detail.message
    );
}

/// A name the client knows, sent once as it was subscribed and once with
/// its context parameters in another order, is one name twice; so is a
/// name new to the client (a glob's member) sent twice.
#[test]
fn duplicates_are_found_however_the_name_is_spelled_and_whether_known_or_not() {
    let now = t0();
    let known = "xdstp://au/envoy.config.cluster.v3.Cluster/c?a=1&b=2";
    let respelled = "xdstp://au/envoy.config.cluster.v3.Cluster/c?b=2&a=1";
    let member = "xdstp://au/envoy.config.cluster.v3.Cluster/g/m";
    let mut s = delta_subscribed(
        now,
        CDS,
        &[known, "xdstp://au/envoy.config.cluster.v3.Cluster/g/*"],
    );
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres(known, "1", Some(cluster(known))),
                dres(respelled, "1", Some(cluster(known))),
                dres(member, "1", Some(cluster(member))),
                dres(member, "2", Some(cluster(member))),
            ],
            &[],
        ),
    );
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(
        detail.message.contains("appears 2 times") && detail.message.contains("g/m"),
        "{}",
        detail.message
    );
    assert_eq!(
        detail.message.matches("appears 2 times").count(),
        2,
        "{}",
        detail.message
    );
}

/// The same in a response of more names than are compared one by one:
/// the sets of names find the same duplicates, counted the same way.
#[test]
fn duplicates_are_found_the_same_way_in_a_response_of_many_names() {
    let now = t0();
    let known = "xdstp://au/envoy.config.cluster.v3.Cluster/c?a=1&b=2";
    let respelled = "xdstp://au/envoy.config.cluster.v3.Cluster/c?b=2&a=1";
    let member = "xdstp://au/envoy.config.cluster.v3.Cluster/g/m";
    let others: Vec<String> = (0..10).map(|i| format!("other{i}")).collect();
    let mut subscribed: Vec<&str> = others.iter().map(String::as_str).collect();
    subscribed.extend([known, "xdstp://au/envoy.config.cluster.v3.Cluster/g/*"]);
    let mut s = delta_subscribed(now, CDS, &subscribed);
    let mut resources: Vec<_> = others
        .iter()
        .map(|n| dres(n, "1", Some(cluster(n))))
        .collect();
    resources.extend([
        dres(known, "1", Some(cluster(known))),
        dres(member, "1", Some(cluster(member))),
        dres(respelled, "1", Some(cluster(known))),
        dres(member, "2", Some(cluster(member))),
        dres(member, "3", Some(cluster(member))),
    ]);
    s.handle_delta_response(now, dresp(CDS, "n1", resources, &[]));
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(
        detail.message.contains("appears 2 times") && detail.message.contains("appears 3 times"),
        "{}",
        detail.message
    );
    assert!(!detail.message.contains("other"), "{}", detail.message);
}

#[test]
fn duplicate_names_in_one_sotw_response_are_nacked() {
    let now = t0();
    let mut s = sotw_subscribed(now, EDS, &["e"]);
    s.handle_sotw_response(
        now,
        sresp(EDS, "v1", "n1", vec![endpoints("e"), endpoints("e")]),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid e"]);
    let nack = drain_sotw(&mut s, now);
    assert!(nack[0].error_detail.is_some());
    assert_eq!(nack[0].version_info, "");
}

/// §How the client specifies: "The client will silently ignore any supplied
/// resources that were not explicitly requested."
#[test]
fn unrequested_resources_are_ignored_and_acked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![dres("zz", "1", Some(bad_cluster("zz")))],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy"]);
    assert_eq!(s.stats().unrequested_ignored, 1);
    let ack = drain_delta(&mut s, now);
    assert!(
        ack[0].error_detail.is_none(),
        "an unrequested resource is not even decoded"
    );
}

/// A response of a type the stream never requested is neither ACKed nor
/// NACKed (answering it would, by the legacy rule, subscribe to `*`).
#[test]
fn response_of_an_unknown_type_is_neither_acked_nor_nacked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(UNKNOWN_TYPE, "n1", vec![dres("x", "1", None)], &[]),
    );
    assert!(drain(&mut s, now).is_empty());
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(LDS, "v1", "n1", vec![listener("l")]));
    assert!(drain(&mut s, now).is_empty());
    assert_eq!(s.stats().unknown_type_responses_ignored, 1);
}

/// A subscribed type that no one registered cannot be decoded: NACK it.
#[test]
fn subscribed_but_unregistered_type_is_nacked_naming_the_type() {
    let now = t0();
    let mut s = delta_subscribed(now, UNKNOWN_TYPE, &["x"]);
    let any = envoy_types::pb::google::protobuf::Any {
        type_url: UNKNOWN_TYPE.into(),
        value: vec![],
    };
    s.handle_delta_response(
        now,
        dresp(UNKNOWN_TYPE, "n1", vec![dres("x", "1", Some(any))], &[]),
    );
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(
        detail.message.contains("no resource type registered"),
        "{}",
        detail.message
    );
}

#[test]
fn resource_of_another_type_inside_a_response_is_nacked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(listener("a")))], &[]),
    );
    assert_eq!(events(&mut s), ["healthy", "invalid a"]);
    assert!(drain_delta(&mut s, now)[0].error_detail.is_some());
}

/// §Basic Protocol Overview: "the nonce is valid only in the context of an
/// individual xDS stream; it does not survive stream restarts."
#[test]
fn nonce_is_not_carried_across_streams() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let _ = drain_sotw(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let first = connect_sotw(&mut s, now);
    assert_eq!(first[0].response_nonce, "");
    assert_eq!(first[0].version_info, "v1", "the version survives");
}

/// Older edition, "Incremental xDS": spontaneous requests omit
/// `response_nonce`.
#[test]
fn delta_spontaneous_request_omits_the_nonce() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    let _ = drain_delta(&mut s, now);
    s.subscribe(key(CDS, "b"));
    let req = drain_delta(&mut s, now);
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].response_nonce, "");
    assert_eq!(req[0].resource_names_subscribe, strs(&["b"]));
    assert!(req[0].initial_resource_versions.is_empty());
}

/// §Resource updates: a SotW request that only changes names carries the
/// current version and the last nonce, so the server does not take it for a
/// NACK or a stale request.
#[test]
fn sotw_spontaneous_request_carries_last_version_and_nonce() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let _ = drain_sotw(&mut s, now);
    s.subscribe(key(CDS, "b"));
    let req = drain_sotw(&mut s, now);
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].version_info, "v1");
    assert_eq!(req[0].response_nonce, "n1");
    assert_eq!(req[0].resource_names, strs(&["a", "b"]));
}

/// Versions are per type: a NACK of CDS leaves the LDS version alone.
#[test]
fn versions_are_kept_per_type() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe(key(CDS, "a"));
    s.subscribe(key(LDS, "l"));
    let _ = connect_sotw(&mut s, now);
    s.handle_sotw_response(now, sresp(LDS, "L1", "n1", vec![listener("l")]));
    s.handle_sotw_response(now, sresp(CDS, "C1", "n2", vec![bad_cluster("a")]));
    let reqs = drain_sotw(&mut s, now);
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        (reqs[0].type_url.as_str(), reqs[0].version_info.as_str()),
        (LDS, "L1")
    );
    assert_eq!(
        (reqs[1].type_url.as_str(), reqs[1].version_info.as_str()),
        (CDS, "")
    );
}

/// Every response is answered, in order, even when several arrive before
/// the driver writes.
#[test]
fn every_response_is_answered_in_order() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(bad_cluster("a")))], &[]),
    );
    s.handle_delta_response(
        now,
        dresp(CDS, "n2", vec![dres("a", "2", Some(cluster("a")))], &[]),
    );
    let reqs = drain_delta(&mut s, now);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].response_nonce, "n1");
    assert!(reqs[0].error_detail.is_some());
    assert_eq!(reqs[1].response_nonce, "n2");
    assert!(reqs[1].error_detail.is_none());
}

/// A name that does not parse is an invalid resource, NACKed by name.
#[test]
fn unparsable_name_is_nacked_naming_it() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("", "1", Some(cluster("a")))], &[]),
    );
    let nack = drain_delta(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(detail.message.contains("\"\""), "{}", detail.message);
}

/// SotW without the wrapper: a resource that fails to decode is named by
/// its position.
#[test]
fn sotw_unnamed_invalid_resource_is_nacked_by_position() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a"), cluster("")]));
    let nack = drain_sotw(&mut s, now);
    let detail = nack[0].error_detail.as_ref().expect("NACK");
    assert!(
        detail.message.contains("resource #1: name: empty"),
        "{}",
        detail.message
    );
}

/// `poll_events` hands over every event `poll_event` would give, in the
/// same order, and leaves none behind.
#[test]
fn poll_events_gives_every_event_in_order() {
    let now = t0();
    let response = || {
        dresp(
            CDS,
            "1",
            vec![
                dres("a", "1", Some(cluster("a"))),
                dres("b", "1", Some(bad_cluster("b"))),
                dres("c", "1", Some(cluster("c"))),
            ],
            &[],
        )
    };
    let mut one_by_one = delta_subscribed(now, CDS, &["a", "b", "c"]);
    one_by_one.handle_delta_response(now, response());
    let mut at_once = delta_subscribed(now, CDS, &["a", "b", "c"]);
    at_once.handle_delta_response(now, response());
    let all: Vec<String> = at_once.poll_events().iter().map(summary).collect();
    assert_eq!(all, events(&mut one_by_one));
    assert!(all.iter().any(|e| e.starts_with("invalid b")), "{all:?}");
    assert!(at_once.poll_event().is_none());
}
