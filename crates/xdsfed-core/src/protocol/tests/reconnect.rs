//! Stream lifecycle: reconnects (xds-protocol-v3 "Incremental xDS", ACK/NACK
//! versions across streams) and gRFC A57 stream health.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::error::GrpcCode;
use crate::protocol::{CoreEvent, Phase, Session, SourceKind, StreamEnd, StreamFailure};

/// "Because no state is assumed to be preserved from the previous stream,
/// the reconnecting client must provide the server with all resource names
/// it is interested in", and may send `initial_resource_versions`.
#[test]
fn delta_reconnect_resubscribes_everything_with_initial_resource_versions() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.subscribe(key(CDS, "b"));
    s.subscribe_wildcard(LDS);
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "7", Some(cluster("a")))], &[]),
    );
    s.handle_delta_response(
        now,
        dresp(LDS, "n2", vec![dres("x", "3", Some(listener("x")))], &[]),
    );
    let _ = drain(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let again = connect_delta(&mut s, now);
    assert_eq!(again.len(), 2);
    let cds = again
        .iter()
        .find(|r| r.type_url == CDS)
        .expect("CDS resubscribed");
    assert_eq!(cds.resource_names_subscribe, strs(&["a", "b"]));
    assert_eq!(cds.initial_resource_versions.len(), 1);
    assert_eq!(
        cds.initial_resource_versions.get("a").map(String::as_str),
        Some("7")
    );
    assert_eq!(cds.response_nonce, "");
    let lds = again
        .iter()
        .find(|r| r.type_url == LDS)
        .expect("LDS resubscribed");
    assert_eq!(lds.resource_names_subscribe, strs(&["*"]));
    assert_eq!(
        lds.initial_resource_versions.get("x").map(String::as_str),
        Some("3")
    );
}

/// "the client's initial request on the new stream should indicate the
/// most recent version seen by the client on the previous stream".
#[test]
fn sotw_reconnect_resends_last_acked_version_and_full_name_list() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let _ = drain(&mut s, now);
    s.handle_sotw_response(now, sresp(CDS, "v2", "n2", vec![bad_cluster("a")]));
    let _ = drain(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let again = connect_sotw(&mut s, now);
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].version_info, "v1",
        "the last ACKed, not the NACKed"
    );
    assert_eq!(again[0].resource_names, strs(&["a", "b"]));
    assert!(again[0].node.is_some());
    assert!(again[0].error_detail.is_none());
}

/// Subscription changes made while down are sent by the next stream.
#[test]
fn subscriptions_changed_while_disconnected_are_sent_on_reconnect() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    s.subscribe(key(CDS, "b"));
    s.unsubscribe(&key(CDS, "a"));
    assert!(
        drain(&mut s, now).is_empty(),
        "nothing is written while down"
    );
    let again = connect_delta(&mut s, now);
    assert_eq!(again[0].resource_names_subscribe, strs(&["b"]));
    assert!(again[0].resource_names_unsubscribe.is_empty());
}

/// An ACK owed on a dead stream is not written on the next one.
#[test]
fn pending_acks_do_not_survive_the_stream() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let again = connect_delta(&mut s, now);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].response_nonce, "");
}

/// A57: a stream that ends before any response is a server failure.
#[test]
fn stream_failure_before_any_response_reports_stream_failed() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    assert_eq!(s.phase(), Phase::AwaitingFirstResponse);
    s.handle_stream_end(now, StreamEnd::new(14, "connection refused"));
    assert_eq!(events(&mut s), ["failed"]);
    assert_eq!(s.stats().server_failure, 1);
    assert_eq!(s.phase(), Phase::Idle);
}

/// A failure is a typed end, and its kind of source names it: "a REST-JSON
/// poll fails as REST-JSON polling, not as an ADS stream" (docs/rules.md).
#[test]
fn stream_failure_is_named_by_its_source_kind() {
    let now = t0();
    let cfg = config(ApiVariant::Sotw).with_source(SourceKind::RestJson);
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "a"));
    let end = StreamEnd::new(14, "rest.example: connection refused");
    s.handle_stream_end(now, end.clone());
    let Some(CoreEvent::StreamFailed { failure }) = s.poll_event() else {
        panic!("no failure");
    };
    assert_eq!(failure.source, SourceKind::RestJson);
    assert_eq!(failure.end, end);
    assert_eq!(failure.end.code, GrpcCode::Unavailable);
    assert_eq!(
        failure.to_string(),
        "REST-JSON polling failed before any answer: code 14: rest.example: connection refused"
    );
    let ads = StreamFailure::before_answer(SourceKind::Ads, end);
    assert_eq!(
        ads.to_string(),
        "ADS stream failed before any response: code 14: rest.example: connection refused"
    );
}

/// A connection that never opened is a failure too.
#[test]
fn connection_failure_without_a_stream_reports_stream_failed() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.handle_stream_end(now, StreamEnd::new(14, "connection refused"));
    assert_eq!(events(&mut s), ["failed"]);
}

/// A57: after a response, the end of a stream is not a failure.
#[test]
fn stream_end_after_a_response_is_not_a_failure() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &[]));
    s.handle_stream_end(now, StreamEnd::new(0, ""));
    assert_eq!(events(&mut s), ["healthy"]);
    assert_eq!(s.stats().server_failure, 0);
}

#[test]
fn first_response_on_each_stream_reports_stream_healthy() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &[]));
    s.handle_delta_response(now, dresp(CDS, "n2", vec![], &[]));
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let _ = connect_delta(&mut s, now);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &[]));
    assert_eq!(events(&mut s), ["healthy", "healthy"]);
    assert_eq!(s.phase(), Phase::Streaming);
}

/// The transport's delta→SotW fallback: the next stream speaks SotW and
/// keeps what was received.
#[test]
fn set_variant_applies_to_the_next_stream_and_keeps_received_resources() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    open(&mut s, now);
    let _ = drain(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(12, "unimplemented"));
    s.set_variant(ApiVariant::Sotw);
    let first = connect_sotw(&mut s, now);
    assert_eq!(first[0].resource_names, strs(&["a"]));
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    assert_eq!(events(&mut s), ["failed", "healthy", "upsert a v1"]);
}

/// A server that accepts a new stream but has nothing new to send (every
/// version matches) is reachable again: the session says so once, before any
/// response, without claiming the stream healthy (gRFC A57 waits for a
/// response).
#[test]
fn accepted_stream_is_reported_before_any_response_and_only_once() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    let _ = events(&mut s);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let _ = events(&mut s);
    s.handle_connected(now);
    let _ = drain(&mut s, now);
    s.handle_stream_accepted(now);
    assert_eq!(events(&mut s), ["accepted"]);
    assert_eq!(s.phase(), Phase::AwaitingFirstResponse);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    s.handle_stream_accepted(now);
    assert!(!events(&mut s).contains(&"accepted".to_string()));
}
