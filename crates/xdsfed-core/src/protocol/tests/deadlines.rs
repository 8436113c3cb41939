//! The stream's own deadlines (issue 19): a server that never answers a new
//! stream is a connection failure once the handshake deadline passes, and,
//! when configured, an established stream with no response fails at the
//! first-response deadline. Both are gRFC A57 server failures.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{DEFAULT_HANDSHAKE_TIMEOUT, Session, StreamEnd};

#[test]
fn handshake_timeout_defaults_to_grpc_minimum_connect_timeout() {
    assert_eq!(DEFAULT_HANDSHAKE_TIMEOUT, secs(20));
    assert_eq!(config(ApiVariant::Delta).handshake_timeout, secs(20));
    assert_eq!(config(ApiVariant::Delta).first_response_timeout, None);
}

/// A server that accepts TCP and never speaks: at the deadline the session
/// asks for the stream to be closed as UNAVAILABLE, and the end counts as a
/// server failure (gRFC A57), reported to the cache.
#[test]
fn unanswered_stream_is_closed_at_the_handshake_deadline_as_a_failure() {
    let now = t0();
    let cfg = config(ApiVariant::Delta).with_handshake_timeout(secs(3));
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "a"));
    s.handle_connected(now);
    assert_eq!(drain(&mut s, now).len(), 1);
    assert_eq!(s.poll_timeout(), Some(now + secs(3)));
    s.handle_timeout(now + secs(2));
    assert_eq!(s.poll_close(), None);
    s.handle_timeout(now + secs(3));
    let end = s.poll_close().expect("the deadline closes the stream");
    assert_eq!(end.code, 14);
    assert!(end.message.contains("did not answer within 3s"), "{end:?}");
    assert_eq!(s.poll_close(), None, "asked once");
    s.handle_stream_end(now + secs(3), end);
    assert_eq!(events(&mut s), ["failed"]);
    assert_eq!(s.stats().server_failure, 1);
    assert_eq!(s.poll_timeout(), None, "no timer outlives the stream");
}

/// The server's response headers, or its first response (servers that send
/// headers with it), stop the handshake deadline.
#[test]
fn acceptance_or_a_response_stops_the_handshake_deadline() {
    let now = t0();
    let mut accepted = session(ApiVariant::Delta);
    accepted.subscribe(key(CDS, "a"));
    accepted.handle_connected(now);
    let _ = drain(&mut accepted, now);
    accepted.handle_stream_accepted(now + secs(1));
    accepted.handle_timeout(now + secs(60));
    assert_eq!(accepted.poll_close(), None);
    assert_eq!(events(&mut accepted), ["accepted", "dne a"]);

    let mut answered = session(ApiVariant::Delta);
    answered.subscribe(key(CDS, "a"));
    answered.handle_connected(now);
    let _ = drain(&mut answered, now);
    answered.handle_delta_response(
        now + secs(1),
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    answered.handle_timeout(now + secs(60));
    assert_eq!(answered.poll_close(), None);
    assert_eq!(events(&mut answered), ["healthy", "upsert a 1"]);
}

/// A ready connection (the server answered a request on it) establishes the
/// stream without an event: a server that sends headers only with its first
/// response and has nothing to send is not taken for one that never speaks,
/// and its names time out as not existing.
#[test]
fn ready_connection_establishes_a_silent_stream() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.handle_connected(now);
    let _ = drain(&mut s, now);
    s.handle_connection_ready(now + secs(1));
    assert!(events(&mut s).is_empty());
    s.handle_timeout(now + secs(60));
    assert_eq!(s.poll_close(), None);
    assert_eq!(events(&mut s), ["dne a"]);
    assert_eq!(s.stats().server_failure, 0);
    // Headers that come later still report the stream accepted (the
    // cache's transient errors end), once.
    s.handle_stream_accepted(now + secs(61));
    s.handle_stream_accepted(now + secs(62));
    assert_eq!(events(&mut s), ["accepted"]);
}

/// A stream that ends before its deadline takes the deadline with it; the
/// next stream has its own.
#[test]
fn each_stream_has_its_own_handshake_deadline() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.handle_connected(now);
    s.handle_stream_end(now + secs(1), StreamEnd::new(14, "refused"));
    assert_eq!(s.poll_timeout(), None);
    let later = now + secs(5);
    s.handle_connected(later);
    assert_eq!(s.poll_timeout(), Some(later + secs(20)));
}

/// When configured, an established stream with no response fails at the
/// first-response deadline, as DEADLINE_EXCEEDED.
#[test]
fn established_stream_without_a_response_fails_at_the_first_response_deadline() {
    let now = t0();
    let cfg = config(ApiVariant::Sotw).with_first_response_timeout(Some(secs(30)));
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "a"));
    s.handle_connected(now);
    let _ = drain(&mut s, now);
    s.handle_stream_accepted(now + secs(1));
    s.handle_timeout(now + secs(30));
    assert_eq!(s.poll_close(), None);
    s.handle_timeout(now + secs(31));
    let end = s.poll_close().expect("the deadline closes the stream");
    assert_eq!(end.code, 4);
    s.handle_stream_end(now + secs(31), end);
    assert_eq!(events(&mut s), ["accepted", "dne a", "failed"]);
    assert_eq!(s.stats().server_failure, 1);
}

/// The first-response deadline runs from whatever established the stream,
/// a ready connection included, and a response stops it.
#[test]
fn first_response_deadline_starts_at_establishment_and_stops_at_a_response() {
    let now = t0();
    let cfg = config(ApiVariant::Delta).with_first_response_timeout(Some(secs(30)));
    let mut ready = Session::new(cfg.clone(), registry());
    ready.subscribe(key(CDS, "a"));
    ready.handle_connected(now);
    let _ = drain(&mut ready, now);
    ready.handle_connection_ready(now + secs(2));
    ready.handle_timeout(now + secs(32));
    assert_eq!(ready.poll_close().map(|e| e.code.as_i32()), Some(4));

    let mut answered = Session::new(cfg, registry());
    answered.subscribe(key(CDS, "a"));
    answered.handle_connected(now);
    let _ = drain(&mut answered, now);
    answered.handle_stream_accepted(now);
    answered.handle_delta_response(
        now + secs(1),
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    answered.handle_timeout(now + secs(120));
    assert_eq!(answered.poll_close(), None);
}
