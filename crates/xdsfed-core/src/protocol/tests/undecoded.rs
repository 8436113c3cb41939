//! Responses a transport could not decode in full (REST-JSON): a resource
//! that did not map is rejected alone; a response that could not be read
//! is NACKed whole. Envoy's REST subscription: `UpdateRejected`, not a
//! connection failure.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::ack::INVALID_ARGUMENT;
use crate::protocol::{Phase, UndecodedResource};
use crate::types::ValidationError;

fn undecoded(index: usize, name: Option<&str>, why: &str) -> UndecodedResource {
    UndecodedResource {
        index,
        name: name.map(str::to_owned),
        error: ValidationError(why.to_owned()),
    }
}

/// The decoded resources apply; an undecoded one is rejected under its
/// name (the last good copy keeps serving) or by its position in the
/// response, and the NACK names both.
#[test]
fn undecoded_resources_are_rejected_alone_by_name_or_position() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    s.handle_sotw_response(
        now,
        sresp(CDS, "v1", "n1", vec![cluster("a"), cluster("b")]),
    );
    let _ = drain_sotw(&mut s, now);
    let _ = events(&mut s);
    // Positions: 0 bad `b`, 1 `a`, 2 nameless.
    let bad = vec![
        undecoded(0, Some("b"), "connect_timeout: no duration"),
        undecoded(2, None, "unknown type"),
    ];
    let response = sresp(CDS, "v2", "n2", vec![cluster_with("a", "2")]);
    s.handle_sotw_response_with_undecoded(now, response, bad);
    assert_eq!(events(&mut s), ["upsert a v2", "invalid b"]);
    let nack = drain_sotw(&mut s, now);
    assert_eq!(
        (&*nack[0].version_info, &*nack[0].response_nonce),
        ("v1", "n2")
    );
    let detail = nack[0].error_detail.as_ref().unwrap();
    assert_eq!(detail.code, INVALID_ARGUMENT);
    assert!(
        detail.message.contains("b: connect_timeout: no duration")
            && detail.message.contains("resource #2: unknown type"),
        "{}",
        detail.message
    );
    assert_eq!(
        s.held_version(&key(CDS, "b")).map(String::from).as_deref(),
        Some("v1")
    );
}

/// A resource that did decode keeps its position among undecoded ones: one
/// rejected without a name is reported at its place in the response.
#[test]
fn decoded_resources_keep_their_positions_between_undecoded_ones() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a"]);
    // A listener in a cluster response cannot say its name.
    let response = sresp(CDS, "v1", "n1", vec![cluster("a"), listener("l")]);
    s.handle_sotw_response_with_undecoded(now, response, vec![undecoded(1, None, "bad")]);
    let nack = drain_sotw(&mut s, now);
    let message = &nack[0].error_detail.as_ref().unwrap().message;
    assert!(
        message.contains("resource #1: bad") && message.contains("resource #2: "),
        "{message}"
    );
}

/// A response rejected whole: NACKed with the last accepted version, its
/// nonce and why; every wanted name hears of it; the stream is healthy.
#[test]
fn a_response_rejected_whole_is_nacked_and_reported_to_every_name() {
    let now = t0();
    let mut s = sotw_subscribed(now, CDS, &["a", "b"]);
    s.handle_sotw_response(now, sresp(CDS, "v1", "n1", vec![cluster("a")]));
    let _ = drain_sotw(&mut s, now);
    let _ = events(&mut s);
    let why = ValidationError("the body is not a DiscoveryResponse".into());
    s.handle_sotw_rejected(now, CDS, "n2".into(), "v2", why);
    assert_eq!(events(&mut s), ["invalid a", "invalid b"]);
    let nack = drain_sotw(&mut s, now);
    assert_eq!(
        (&*nack[0].version_info, &*nack[0].response_nonce),
        ("v1", "n2")
    );
    let detail = nack[0].error_detail.as_ref().unwrap();
    assert_eq!(detail.code, INVALID_ARGUMENT);
    assert!(
        detail.message.contains("not a DiscoveryResponse"),
        "{}",
        detail.message
    );
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("v1")
    );
    assert_eq!(s.phase(), Phase::Streaming);
    assert_eq!(s.stats().server_failure, 0);
}

/// The first answer of a stream rejected whole still proves the server
/// up: no server failure when the stream later ends.
#[test]
fn a_first_answer_rejected_whole_is_no_server_failure() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe(key(CDS, "a"));
    let _ = connect_sotw(&mut s, now);
    s.handle_sotw_rejected(now, CDS, String::new(), "", ValidationError("x".into()));
    assert_eq!(events(&mut s), ["healthy", "invalid a"]);
    s.handle_stream_end(now, crate::protocol::StreamEnd::new(14, "gone"));
    assert_eq!(s.stats().server_failure, 0);
}
