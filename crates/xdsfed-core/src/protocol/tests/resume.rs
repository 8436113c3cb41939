//! Resuming from the state directory: the first delta request of a type
//! claims the persisted copies this server sent (`initial_resource_versions`,
//! xds-protocol-v3 "Incremental xDS"), and the server's acceptance of the
//! stream confirms them.

use std::time::Instant;

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{Session, StreamEnd};
use crate::types::Decoded;

/// The persisted copy of cluster `name`, validated as the loader does.
fn disk_copy(name: &str) -> Decoded {
    let any = cluster(name);
    registry()
        .get(CDS)
        .expect("CDS is registered")
        .decode(any.value.into())
        .expect("a valid cluster")
}

/// A delta session subscribed to `names` of CDS, not connected.
fn subscribed(names: &[&str]) -> Session {
    let mut s = session(ApiVariant::Delta);
    for n in names {
        s.subscribe(key(CDS, n));
    }
    s
}

fn first_cds(
    s: &mut Session,
    now: Instant,
) -> envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
    s.handle_connected(now);
    let requests = drain_delta(s, now);
    assert_eq!(requests.len(), 1, "one first request: {requests:?}");
    requests.into_iter().next().expect("a request")
}

/// "On reconnect the Incremental xDS client may tell the server of its
/// known resources [...] by sending them in initial_resource_versions": a
/// restarted client's first request carries exactly the persisted versions
/// of the resources it subscribes to on that stream, and nothing else.
#[test]
fn first_delta_request_claims_exactly_the_resumed_versions_of_subscribed_names() {
    let now = t0();
    let mut s = subscribed(&["a", "b"]);
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    // Not subscribed on this stream: not claimed.
    s.resume(key(CDS, "z"), "9".into(), disk_copy("z"));
    let first = first_cds(&mut s, now);
    assert_eq!(first.resource_names_subscribe, strs(&["a", "b"]));
    assert_eq!(first.initial_resource_versions.len(), 1, "{first:?}");
    assert_eq!(
        first.initial_resource_versions.get("a").map(String::as_str),
        Some("7")
    );
}

/// The server's acceptance of the stream that claimed a copy, with nothing
/// re-sent, confirms it: the copy is reported as if the server had sent it
/// again, and no does-not-exist timer runs for it (gRFC A57: it is held).
#[test]
fn resumed_copy_is_confirmed_when_the_server_accepts_the_stream_without_resending() {
    let now = t0();
    let mut s = subscribed(&["a"]);
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    let _ = first_cds(&mut s, now);
    assert!(
        events(&mut s).is_empty(),
        "nothing before the server accepts"
    );
    s.handle_stream_accepted(now);
    assert_eq!(events(&mut s), vec!["accepted", "upsert a 7"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("7")
    );
    let later = now + secs(60);
    s.handle_timeout(later);
    assert!(
        events(&mut s).is_empty(),
        "no does-not-exist for a held copy"
    );
}

/// A server that answers the claiming stream with a new version replaces
/// the copy, which is then not confirmed.
#[test]
fn resumed_copy_replaced_by_the_server_ends_with_the_servers_version() {
    let now = t0();
    let mut s = subscribed(&["a"]);
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    let _ = first_cds(&mut s, now);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![dres("a", "8", Some(cluster_with("a", "new")))],
            &[],
        ),
    );
    assert_eq!(events(&mut s), vec!["healthy", "upsert a 8"]);
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        Some("8")
    );
}

/// A stream that fails before the server accepts it confirms nothing; the
/// next stream claims the copy again and its acceptance confirms it once.
#[test]
fn resumed_copy_is_claimed_again_after_a_failed_stream_and_confirmed_once() {
    let now = t0();
    let mut s = subscribed(&["a"]);
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    let _ = first_cds(&mut s, now);
    s.handle_stream_end(now, StreamEnd::transport(14, "refused"));
    assert_eq!(events(&mut s), vec!["failed"]);
    let again = first_cds(&mut s, now);
    assert_eq!(
        again.initial_resource_versions.get("a").map(String::as_str),
        Some("7")
    );
    s.handle_stream_accepted(now);
    assert_eq!(events(&mut s), vec!["accepted", "upsert a 7"]);
    s.handle_stream_end(now, StreamEnd::new(14, "gone"));
    assert_eq!(events(&mut s), vec!["failed"]);
    let _ = first_cds(&mut s, now);
    s.handle_stream_accepted(now);
    assert_eq!(events(&mut s), vec!["accepted"], "confirmed only once");
}

/// SotW streams are unchanged: a state-of-the-world request has no
/// per-resource versions, so nothing is claimed or confirmed.
#[test]
fn sotw_stream_neither_claims_nor_confirms_resumed_copies() {
    let now = t0();
    let mut s = session(ApiVariant::Sotw);
    s.subscribe(key(CDS, "a"));
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    let first = connect_sotw(&mut s, now);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].version_info, "");
    assert!(events(&mut s).is_empty());
    assert_eq!(
        s.held_version(&key(CDS, "a")).map(String::from).as_deref(),
        None
    );
}

/// A copy the client stopped asking for before the stream opened is not
/// claimed, and a resume after the type's first request left waits for
/// the next stream rather than being claimed late.
#[test]
fn resumed_copy_is_dropped_on_unsubscribe_and_ignored_after_the_first_request() {
    let now = t0();
    let mut s = subscribed(&["a", "b"]);
    s.resume(key(CDS, "a"), "7".into(), disk_copy("a"));
    s.unsubscribe(&key(CDS, "a"));
    let first = first_cds(&mut s, now);
    assert!(first.initial_resource_versions.is_empty(), "{first:?}");
    s.resume(key(CDS, "b"), "3".into(), disk_copy("b"));
    s.handle_stream_accepted(now);
    assert_eq!(events(&mut s), vec!["accepted"]);
    assert_eq!(
        s.held_version(&key(CDS, "b")).map(String::from).as_deref(),
        None
    );
}
