//! xds-protocol-v3 "Knowing When a Requested Resource Does Not Exist" and
//! gRFC A57: the does-not-exist timer.

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{DEFAULT_DOES_NOT_EXIST_TIMEOUT, Session, StreamEnd};

#[test]
fn does_not_exist_timeout_defaults_to_fifteen_seconds() {
    assert_eq!(DEFAULT_DOES_NOT_EXIST_TIMEOUT, secs(15));
    assert_eq!(config(ApiVariant::Delta).does_not_exist_timeout, secs(15));
}

/// "clients are expected to use a timeout (recommended duration is 15
/// seconds) after sending a request for a new resource, after which they
/// will consider the requested resource to not exist".
#[test]
fn does_not_exist_fires_after_the_timeout_from_sending() {
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let now = t0();
        let mut s = session(variant);
        s.subscribe(key(CDS, "a"));
        open(&mut s, now);
        let sent_at = now + secs(2);
        let _ = drain(&mut s, sent_at);
        assert_eq!(s.poll_timeout(), Some(sent_at + secs(15)), "{variant:?}");
        s.handle_timeout(sent_at + secs(14));
        assert!(events(&mut s).is_empty(), "{variant:?}");
        s.handle_timeout(sent_at + secs(15));
        assert_eq!(events(&mut s), ["dne a"], "{variant:?}");
        assert_eq!(s.poll_timeout(), None);
    }
}

#[test]
fn does_not_exist_timeout_is_configurable() {
    let now = t0();
    let cfg = config(ApiVariant::Delta).with_does_not_exist_timeout(secs(3));
    let mut s = Session::new(cfg, registry());
    s.subscribe(key(CDS, "a"));
    let _ = connect_delta(&mut s, now);
    assert_eq!(s.poll_timeout(), Some(now + secs(3)));
}

/// A57: the timer starts only once the request is written on an
/// established stream.
#[test]
fn does_not_exist_timer_is_not_armed_before_the_request_is_written() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    assert_eq!(s.poll_transmit(now), None, "no stream, nothing to write");
    assert_eq!(s.poll_timeout(), None);
    open(&mut s, now);
    assert_eq!(s.poll_timeout(), None, "established, not yet written");
    let _ = drain(&mut s, now);
    assert_eq!(s.poll_timeout(), Some(now + secs(15)));
}

/// gRFC A57 (issue 19): the timer starts once the request is on an
/// *established* stream: the server accepted it (its response headers
/// arrived) or answered it. A request written to a server that never
/// speaks (a tarpit) arms nothing; acceptance arms what was written, from
/// then on.
#[test]
fn does_not_exist_timer_waits_for_the_stream_to_be_established() {
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let now = t0();
        let mut s = session(variant);
        s.subscribe(key(CDS, "a"));
        s.handle_connected(now);
        assert_eq!(drain(&mut s, now).len(), 1, "{variant:?}");
        s.handle_timeout(now + secs(15));
        assert!(
            events(&mut s).is_empty(),
            "{variant:?}: not before the server speaks"
        );
        let accepted = now + secs(16);
        s.handle_stream_accepted(accepted);
        assert_eq!(events(&mut s), ["accepted"], "{variant:?}");
        s.handle_timeout(accepted + secs(14));
        assert!(events(&mut s).is_empty(), "{variant:?}");
        s.handle_timeout(accepted + secs(15));
        assert_eq!(events(&mut s), ["dne a"], "{variant:?}");
    }
}

/// Never for a resource already received (cached).
#[test]
fn does_not_exist_timer_is_not_armed_for_cached_resource() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    assert_eq!(s.poll_timeout(), None, "received: the timer stops");
    let _ = drain(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let _ = connect_delta(&mut s, now);
    assert_eq!(
        s.poll_timeout(),
        None,
        "the new stream does not time out what is cached"
    );
}

/// A57: cancelled when the stream fails…
#[test]
fn does_not_exist_timer_is_cancelled_on_stream_failure() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_stream_end(now + secs(5), StreamEnd::new(14, "gone"));
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(now + secs(60));
    assert_eq!(events(&mut s), ["failed"]);
}

/// …and re-armed, in full, when the next stream writes the subscription.
#[test]
fn does_not_exist_timer_is_rearmed_on_the_next_stream() {
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let now = t0();
        let mut s = session(variant);
        s.subscribe(key(CDS, "a"));
        open(&mut s, now);
        let _ = drain(&mut s, now);
        s.handle_stream_end(now + secs(10), StreamEnd::new(14, "gone"));
        let later = now + secs(30);
        open(&mut s, later);
        let _ = drain(&mut s, later);
        assert_eq!(s.poll_timeout(), Some(later + secs(15)), "{variant:?}");
    }
}

/// A resource the timer declared absent is not timed out again by the next
/// stream; it can still arrive at any time.
#[test]
fn does_not_exist_is_reported_once_and_the_resource_may_still_arrive() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_timeout(now + secs(15));
    s.handle_stream_end(now + secs(16), StreamEnd::new(14, "gone"));
    let _ = connect_delta(&mut s, now + secs(17));
    assert_eq!(s.poll_timeout(), None);
    s.handle_delta_response(
        now + secs(18),
        dresp(CDS, "n1", vec![dres("a", "1", Some(cluster("a")))], &[]),
    );
    assert_eq!(events(&mut s), ["dne a", "failed", "healthy", "upsert a 1"]);
}

/// An invalid resource exists: its timer stops too.
#[test]
fn does_not_exist_timer_stops_when_an_invalid_copy_arrives() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(
        now,
        dresp(CDS, "n1", vec![dres("a", "1", Some(bad_cluster("a")))], &[]),
    );
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn does_not_exist_timer_is_cancelled_by_unsubscribe() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.unsubscribe(&key(CDS, "a"));
    assert_eq!(s.poll_timeout(), None);
}

/// A name written before the stream was established and unsubscribed
/// since arms nothing when the stream is; the names still wanted do.
#[test]
fn a_name_unsubscribed_before_establishment_arms_nothing() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, "a"));
    s.subscribe(key(CDS, "b"));
    s.handle_connected(now);
    assert_eq!(drain(&mut s, now).len(), 1);
    s.unsubscribe(&key(CDS, "a"));
    let accepted = now + secs(1);
    s.handle_stream_accepted(accepted);
    assert_eq!(events(&mut s), ["accepted"]);
    assert_eq!(s.armed_timers(), 1, "b's timer, none for a");
    s.handle_timeout(accepted + secs(15));
    assert_eq!(events(&mut s), ["dne b"]);
}

/// Only the newly written name gets a timer, not those already pending.
#[test]
fn does_not_exist_timer_starts_per_name_when_that_name_is_written() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.subscribe(key(CDS, "b"));
    let _ = drain(&mut s, now + secs(5));
    s.handle_timeout(now + secs(15));
    assert_eq!(events(&mut s), ["dne a"]);
    s.handle_timeout(now + secs(20));
    assert_eq!(events(&mut s), ["dne b"]);
}

#[test]
fn handle_timeout_without_a_due_timer_is_a_no_op() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_timeout(now);
    s.handle_timeout(now + secs(1));
    assert!(events(&mut s).is_empty());
    assert_eq!(s.poll_timeout(), Some(now + secs(15)));
}

/// Unsubscribing cancels the timer; subscribing again before anything was
/// written must not leave the name without one.
#[test]
fn does_not_exist_timer_is_rearmed_by_a_quick_resubscribe() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.unsubscribe(&key(CDS, "a"));
    s.subscribe(key(CDS, "a"));
    let later = now + secs(1);
    let reqs = drain_delta(&mut s, later);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].resource_names_subscribe, strs(&["a"]));
    assert_eq!(s.poll_timeout(), Some(later + secs(15)));
}

/// A deletion after the does-not-exist timer is the server's own answer,
/// not a repeat of the timer's guess: it is reported (an `#alt` stand-in
/// chosen on the timer then gives way to it).
#[test]
fn a_deletion_after_the_timer_fired_is_reported() {
    let answers = |s: &mut Session| -> Vec<String> {
        events(s).into_iter().filter(|e| e != "healthy").collect()
    };
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_timeout(now + secs(15));
    assert_eq!(events(&mut s), ["dne a"]);
    s.handle_delta_response(now + secs(16), dresp(CDS, "n1", vec![], &["a"]));
    assert_eq!(answers(&mut s), ["removed a"]);
    s.handle_delta_response(now + secs(17), dresp(CDS, "n2", vec![], &["a"]));
    assert!(
        answers(&mut s).is_empty(),
        "the same deletion again is no news"
    );
}

/// A rejected copy proves the resource exists: a deletion after it is news.
#[test]
fn a_deletion_after_a_nack_is_reported() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &["a"]));
    assert_eq!(events(&mut s), ["healthy", "removed a"]);
    let bad = dres("a", "2", Some(bad_cluster("a")));
    s.handle_delta_response(now, dresp(CDS, "n2", vec![bad], &[]));
    assert_eq!(events(&mut s), ["invalid a"]);
    s.handle_delta_response(now, dresp(CDS, "n3", vec![], &["a"]));
    assert_eq!(events(&mut s), ["removed a"]);
}

/// gRFC A71: a copy the client took from a fallback server replaces what
/// this server sent, so its next stream names no version for it (and the
/// server sends it again); the resource still counts as held, so no
/// does-not-exist timer starts for it.
#[test]
fn a_forgotten_version_is_not_claimed_on_the_next_stream() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a", "b"]);
    let resources = vec![
        dres("a", "1", Some(cluster("a"))),
        dres("b", "1", Some(cluster("b"))),
    ];
    s.handle_delta_response(now, dresp(CDS, "n1", resources, &[]));
    let _ = events(&mut s);
    s.forget_version(&key(CDS, "a"));
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    let first = connect_delta(&mut s, now + secs(1));
    let initial = &first[0].initial_resource_versions;
    assert_eq!(initial.get("b").map(String::as_str), Some("1"));
    assert!(!initial.contains_key("a"), "{initial:?}");
    s.handle_timeout(now + secs(60));
    assert!(
        events(&mut s).is_empty(),
        "no does-not-exist for a held resource"
    );
}
