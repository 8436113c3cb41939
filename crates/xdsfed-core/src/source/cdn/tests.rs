//! The rules of [`CdnSession`](super::CdnSession), one test each (the
//! numbers are the module doc's), in virtual time: no IO, no clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::ListenerCollection;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::collection_entry::ResourceSpecifier;
use envoy_types::pb::xds::core::v3::{CollectionEntry, ResourceLocator, resource_locator};
use prost::{Message as _, Name as _};

use super::*;
use crate::protocol::{RESOURCE_LOCATOR_TYPE_URL, RESOURCE_WRAPPER_TYPE_URL};
use crate::types::{CLUSTER_COLLECTION_TYPE_URL, ListCollection, ListEntry};

const REFRESH: Duration = Duration::from_secs(10);
const BACKOFF: Duration = Duration::from_secs(1);

fn session() -> CdnSession {
    let mut cfg = CdnConfig::new("http://cdn.test/base");
    cfg.timing = CdnTiming {
        refresh_delay: REFRESH,
        request_timeout: Duration::from_secs(1),
    };
    cfg.backoff = BackoffConfig {
        initial: BACKOFF,
        multiplier: 2.0,
        jitter: 0.0,
        max: Duration::from_secs(60),
    };
    CdnSession::new(cfg, Arc::new(TypeRegistry::with_builtin()))
}

fn key(id: &str) -> ResourceKey {
    ResourceKey::new(
        CLUSTER_COLLECTION_TYPE_URL,
        format!("xdstp://cdn.example/envoy.config.cluster.v3.ClusterCollection/{id}"),
    )
}

fn member(name: &str) -> String {
    format!("xdstp://mesh.example/envoy.config.cluster.v3.Cluster/{name}")
}

fn locator(name: &str) -> ResourceLocator {
    ResourceLocator {
        scheme: resource_locator::Scheme::Xdstp as i32,
        authority: "mesh.example".into(),
        resource_type: "envoy.config.cluster.v3.Cluster".into(),
        id: name.into(),
        ..Default::default()
    }
}

/// A collection of locators to `members` as an `Any`.
fn collection(members: &[&str]) -> Any {
    let entries = members
        .iter()
        .map(|m| CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::Locator(locator(m))),
        })
        .collect();
    Any {
        type_url: CLUSTER_COLLECTION_TYPE_URL.into(),
        // Every `<T>Collection` has this wire shape (TP1).
        value: ListenerCollection { entries }.encode_to_vec(),
    }
}

fn response(version: &str, resources: Vec<Any>) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version.into(),
        type_url: CLUSTER_COLLECTION_TYPE_URL.into(),
        resources,
        ..Default::default()
    }
}

fn reply(status: u16, etag: Option<&str>, body: Bytes) -> Fetched {
    Fetched::Reply(HttpReply {
        status,
        etag: etag.map(Arc::from),
        content_type: Some("application/octet-stream".into()),
        body,
    })
}

/// `200` with `response` in protobuf and `etag`.
fn ok(etag: Option<&str>, response: &DiscoveryResponse) -> Fetched {
    reply(200, etag, Bytes::from(response.encode_to_vec()))
}

fn events(s: &mut CdnSession) -> Vec<CoreEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// Short names of events, for comparisons.
fn kinds(events: &[CoreEvent]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            CoreEvent::Upsert { .. } => "upsert",
            CoreEvent::Invalid { .. } => "invalid",
            CoreEvent::Removed { .. } => "removed",
            CoreEvent::Redirect { .. } => "redirect",
            CoreEvent::NotRequested { .. } => "not requested",
            CoreEvent::StreamFailed { .. } => "failed",
            CoreEvent::StreamHealthy => "healthy",
            _ => "other",
        })
        .collect()
}

fn members_of(event: &CoreEvent) -> Vec<String> {
    let CoreEvent::Upsert { resource, .. } = event else {
        panic!("not an upsert: {event:?}");
    };
    let list = resource.downcast::<ListCollection>().unwrap();
    list.entries
        .iter()
        .map(|e| match e {
            ListEntry::Locator(k) => k.to_string(),
            ListEntry::Inline { .. } => "inline".into(),
        })
        .collect()
}

/// Subscribes `key` at `t0` and answers its first fetch with `answer`.
fn first_answer(s: &mut CdnSession, k: &ResourceKey, t0: Instant, answer: Fetched) -> Fetch {
    s.subscribe(k.clone());
    let fetch = s.poll_fetch(t0).unwrap();
    s.handle_fetched(fetch.id, k, answer, t0);
    fetch
}

/// Rule 1: a subscription is fetched at once, at its URL, then again
/// `refresh_delay` after the answer; one fetch in flight per resource.
#[test]
fn subscription_is_fetched_at_once_then_every_refresh_delay() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("mesh/all");
    s.subscribe(k.clone());
    s.subscribe(k.clone());
    let fetch = s.poll_fetch(t0).unwrap();
    assert_eq!(
        &*fetch.url,
        "http://cdn.test/base/cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all"
    );
    assert_eq!(fetch.etag, None);
    // In flight: not fetched again, however late it is.
    assert_eq!(s.poll_fetch(t0 + REFRESH * 5), None);
    assert_eq!(s.poll_timeout(), None);
    s.handle_fetched(
        fetch.id,
        &k,
        ok(None, &response("1", vec![collection(&["a"])])),
        t0,
    );
    assert_eq!(s.poll_timeout(), Some(t0 + REFRESH));
    assert_eq!(s.poll_fetch(t0 + REFRESH - Duration::from_millis(1)), None);
    assert!(s.poll_fetch(t0 + REFRESH).is_some());
}

/// Rule 1: the source has at most `max_in_flight` fetches at once.
#[test]
fn fetches_in_flight_are_bounded() {
    let mut s = session();
    s.cfg.max_in_flight = 2;
    let t0 = Instant::now();
    for id in ["a", "b", "c"] {
        s.subscribe(key(id));
    }
    let first = s.poll_fetch(t0).unwrap();
    assert!(s.poll_fetch(t0).is_some());
    assert_eq!(s.poll_fetch(t0), None);
    s.handle_fetched(first.id, &first.key, reply(404, None, Bytes::new()), t0);
    assert_eq!(s.poll_fetch(t0).map(|f| f.key), Some(key("c")));
}

/// Rule 2: a glob collection is reported `NotRequested`, never fetched.
#[test]
fn glob_collection_is_not_requested_and_never_fetched() {
    let mut s = session();
    let glob = ResourceKey::new(
        "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        "xdstp://cdn.example/envoy.config.cluster.v3.Cluster/mesh/*",
    );
    s.subscribe(glob);
    assert_eq!(kinds(&events(&mut s)), ["not requested"]);
    assert_eq!(s.poll_fetch(Instant::now()), None);
}

/// Rule 3: the next fetch names the ETag; `304` is no event.
#[test]
fn fetch_names_the_last_etag_and_not_modified_is_no_event() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    first_answer(
        &mut s,
        &k,
        t0,
        ok(Some("\"e1\""), &response("1", vec![collection(&["a"])])),
    );
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
    let fetch = s.poll_fetch(t0 + REFRESH).unwrap();
    assert_eq!(fetch.etag.as_deref(), Some("\"e1\""));
    s.handle_fetched(fetch.id, &k, reply(304, None, Bytes::new()), t0 + REFRESH);
    assert!(events(&mut s).is_empty());
    assert_eq!(s.stats().not_modified, 1);
    assert_eq!(s.poll_timeout(), Some(t0 + REFRESH * 2));
}

/// Rule 4: the version is `version_info`, or the ETag when that is empty;
/// a JSON body is read as JSON.
#[test]
fn version_is_version_info_or_the_etag_and_json_is_read_by_content_type() {
    let mut s = session();
    let t0 = Instant::now();
    let (a, b) = (key("a"), key("b"));
    first_answer(
        &mut s,
        &a,
        t0,
        ok(Some("\"tag\""), &response("v7", vec![collection(&["m"])])),
    );
    let json =
        crate::json::discovery_response_to_json(&response("", vec![collection(&["m"])])).unwrap();
    let json_reply = Fetched::Reply(HttpReply {
        status: 200,
        etag: Some(Arc::from("\"tag\"")),
        content_type: Some("Application/JSON; charset=utf-8".into()),
        body: Bytes::from(json),
    });
    first_answer(&mut s, &b, t0, json_reply);
    let versions: Vec<(String, String)> = events(&mut s)
        .iter()
        .filter_map(|e| match e {
            CoreEvent::Upsert { key, version, .. } => {
                Some((key.name.to_string(), version.to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        versions,
        [
            (a.name.to_string(), "v7".to_owned()),
            (b.name.to_string(), "\"tag\"".to_owned())
        ]
    );
}

/// Rule 4: a file holds exactly one resource, of the key's type, named
/// for the key when wrapped; anything else is `Invalid`.
#[test]
fn file_must_hold_exactly_the_one_resource_it_is_for() {
    let wrapped = |name: &str| Any {
        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
        value: Resource {
            name: name.into(),
            resource: Some(collection(&["m"])),
            ..Default::default()
        }
        .encode_to_vec(),
    };
    let cluster = Any {
        type_url: Cluster::type_url(),
        value: Cluster::default().encode_to_vec(),
    };
    let k = key("x");
    let cases = [
        (
            "two resources",
            response("1", vec![collection(&["m"]), collection(&["n"])]),
        ),
        ("none", response("1", vec![])),
        ("another type", response("1", vec![cluster])),
        (
            "wrapped under another name",
            response("1", vec![wrapped(&key("y").name)]),
        ),
    ];
    for (what, bad) in cases {
        let mut s = session();
        first_answer(&mut s, &k, Instant::now(), ok(None, &bad));
        assert_eq!(kinds(&events(&mut s)), ["healthy", "invalid"], "{what}");
    }
    let mut s = session();
    first_answer(
        &mut s,
        &k,
        Instant::now(),
        ok(None, &response("1", vec![wrapped(&k.name)])),
    );
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
}

/// Rule 5: an unchanged copy (same version, same bytes) is not reported
/// again; a changed one is.
#[test]
fn identical_copy_is_not_reported_again() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    let v1 = response("1", vec![collection(&["a"])]);
    first_answer(&mut s, &k, t0, ok(None, &v1));
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
    let t1 = t0 + REFRESH;
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(f.id, &k, ok(None, &v1), t1);
    assert!(events(&mut s).is_empty());
    let t2 = t1 + REFRESH;
    let f = s.poll_fetch(t2).unwrap();
    let v2 = response("2", vec![collection(&["a", "b"])]);
    s.handle_fetched(f.id, &k, ok(None, &v2), t2);
    let got = events(&mut s);
    assert_eq!(kinds(&got), ["upsert"]);
    assert_eq!(members_of(&got[0]), [member("a"), member("b")]);
}

/// Rule 5: an invalid resource is `Invalid` (the cache keeps the last good
/// copy: no `Removed`), and the next good one is an `Upsert`.
#[test]
fn invalid_resource_is_reported_without_removing_the_copy() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    first_answer(
        &mut s,
        &k,
        t0,
        ok(None, &response("1", vec![collection(&["a"])])),
    );
    let _ = events(&mut s);
    let broken = Any {
        type_url: CLUSTER_COLLECTION_TYPE_URL.into(),
        value: vec![0xff, 0xff],
    };
    let t1 = t0 + REFRESH;
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(f.id, &k, ok(None, &response("2", vec![broken])), t1);
    assert_eq!(kinds(&events(&mut s)), ["invalid"]);
    assert_eq!(s.stats().invalid, 1);
    let t2 = t1 + REFRESH;
    let f = s.poll_fetch(t2).unwrap();
    s.handle_fetched(
        f.id,
        &k,
        ok(None, &response("1", vec![collection(&["a"])])),
        t2,
    );
    assert_eq!(kinds(&events(&mut s)), ["upsert"]);
}

/// Rule 5: a `ResourceLocator` is a redirect to its target.
#[test]
fn locator_file_is_a_redirect() {
    let mut s = session();
    let k = key("x");
    let mut target = locator("moved");
    target.resource_type = "envoy.config.cluster.v3.ClusterCollection".into();
    let any = Any {
        type_url: RESOURCE_LOCATOR_TYPE_URL.into(),
        value: target.encode_to_vec(),
    };
    first_answer(
        &mut s,
        &k,
        Instant::now(),
        ok(None, &response("1", vec![any.clone()])),
    );
    let got = events(&mut s);
    let Some(CoreEvent::Redirect { target, .. }) = got.get(1) else {
        panic!("{got:?}");
    };
    assert_eq!(
        &**target,
        "xdstp://mesh.example/envoy.config.cluster.v3.ClusterCollection/moved"
    );
    // The same redirect again (a host without ETags) is no news.
    let t1 = Instant::now() + REFRESH;
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(f.id, &k, ok(None, &response("1", vec![any.clone()])), t1);
    assert!(events(&mut s).is_empty());
}

/// Rule 6: `404` for a resource never seen is `Removed` at once; again
/// `404` is no news; a held copy that goes is `Removed` too.
#[test]
fn not_found_is_removed_at_once_and_once() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    first_answer(&mut s, &k, t0, reply(404, None, Bytes::new()));
    assert_eq!(kinds(&events(&mut s)), ["healthy", "removed"]);
    let t1 = t0 + REFRESH;
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(f.id, &k, reply(404, None, Bytes::new()), t1);
    assert!(events(&mut s).is_empty());
    let t2 = t1 + REFRESH;
    let f = s.poll_fetch(t2).unwrap();
    s.handle_fetched(
        f.id,
        &k,
        ok(Some("e"), &response("1", vec![collection(&[])])),
        t2,
    );
    assert_eq!(kinds(&events(&mut s)), ["upsert"]);
    let t3 = t2 + REFRESH;
    let f = s.poll_fetch(t3).unwrap();
    assert_eq!(f.etag.as_deref(), Some("e"));
    s.handle_fetched(f.id, &k, reply(410, None, Bytes::new()), t3);
    assert_eq!(kinds(&events(&mut s)), ["removed"]);
    // Gone: the next fetch is unconditional.
    assert_eq!(s.poll_fetch(t3 + REFRESH).unwrap().etag, None);
}

/// Rule 7: a failure is `StreamFailed` once per outage (and once more per
/// resource first failing in it), retried after the backoff, which grows;
/// an answer reports `StreamHealthy` and goes back to `refresh_delay`.
#[test]
fn failures_report_once_per_outage_and_retry_after_backoff() {
    let mut s = session();
    let t0 = Instant::now();
    let (a, b) = (key("a"), key("b"));
    first_answer(&mut s, &a, t0, reply(503, None, Bytes::new()));
    let got = events(&mut s);
    let Some(CoreEvent::StreamFailed { failure }) = got.first() else {
        panic!("{got:?}");
    };
    let error = failure.to_string();
    assert!(
        error.contains("HTTP status 503") && error.contains("/cdn.example/"),
        "{error}"
    );
    assert_eq!(s.poll_timeout(), Some(t0 + BACKOFF));
    let t1 = t0 + BACKOFF;
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(
        f.id,
        &a,
        Fetched::Failed(Arc::from("connection refused")),
        t1,
    );
    assert!(events(&mut s).is_empty(), "one report per outage");
    assert_eq!(s.poll_timeout(), Some(t1 + BACKOFF * 2));
    // Another resource failing in the same outage gets its own report.
    first_answer(&mut s, &b, t1, Fetched::Failed(Arc::from("timed out")));
    assert_eq!(kinds(&events(&mut s)), ["failed"]);
    assert_eq!(s.stats().failed, 3);
    assert!(!s.is_healthy());
    let t2 = t1 + BACKOFF * 2;
    let f = s.poll_fetch(t2).unwrap();
    assert_eq!(f.key, b);
    let f = s.poll_fetch(t2).unwrap();
    s.handle_fetched(
        f.id,
        &a,
        ok(None, &response("1", vec![collection(&["m"])])),
        t2,
    );
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
    assert!(s.is_healthy());
    // Answered: back to the refresh delay, the backoff reset.
    let t3 = t2 + REFRESH;
    let f = s.poll_fetch(t3).unwrap();
    assert_eq!(f.key, a);
    s.handle_fetched(f.id, &a, reply(500, None, Bytes::new()), t3);
    assert_eq!(kinds(&events(&mut s)), ["failed"]);
    let retry = s.due.iter().find(|(_, k)| *k == a).map(|(at, _)| *at);
    assert_eq!(retry, Some(t3 + BACKOFF));
}

/// Rule 7: a body that is not a `DiscoveryResponse`, and a `304` to a
/// fetch without `If-None-Match`, are failures, not NACKs.
#[test]
fn malformed_body_and_unconditional_not_modified_are_failures() {
    for (what, answer) in [
        (
            "garbage",
            reply(200, None, Bytes::from_static(b"\xff\xff\xff")),
        ),
        ("HTML", {
            let Fetched::Reply(mut r) = reply(200, None, Bytes::from_static(b"<html>")) else {
                unreachable!()
            };
            r.content_type = Some("application/json".into());
            Fetched::Reply(r)
        }),
        ("304 unasked", reply(304, None, Bytes::new())),
        ("403", reply(403, None, Bytes::new())),
    ] {
        let mut s = session();
        first_answer(&mut s, &key("x"), Instant::now(), answer);
        assert_eq!(kinds(&events(&mut s)), ["failed"], "{what}");
    }
}

/// Rule 8: an unsubscribed resource is forgotten, and the answer to its
/// fetch in flight is dropped, even after a resubscription.
#[test]
fn answer_to_a_forgotten_fetch_is_dropped() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    s.subscribe(k.clone());
    let old = s.poll_fetch(t0).unwrap();
    s.unsubscribe(&k);
    s.subscribe(k.clone());
    let new = s.poll_fetch(t0).unwrap();
    assert_ne!(old.id, new.id);
    s.handle_fetched(
        old.id,
        &k,
        ok(None, &response("old", vec![collection(&["a"])])),
        t0,
    );
    assert!(events(&mut s).is_empty());
    s.handle_fetched(
        new.id,
        &k,
        ok(None, &response("new", vec![collection(&["b"])])),
        t0,
    );
    let got = events(&mut s);
    assert_eq!(members_of(&got[1]), [member("b")]);
    s.unsubscribe(&k);
    assert_eq!(s.poll_timeout(), None);
    assert!(!s.has_subscriptions());
}

/// Rule 3 with `forget_version`: the copy came from elsewhere, so the next
/// fetch is unconditional and its answer reported.
#[test]
fn forgotten_version_makes_the_next_fetch_unconditional() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    let v1 = response("1", vec![collection(&["a"])]);
    first_answer(&mut s, &k, t0, ok(Some("e"), &v1));
    let _ = events(&mut s);
    s.forget_version(&k);
    let f = s.poll_fetch(t0 + REFRESH).unwrap();
    assert_eq!(f.etag, None);
    s.handle_fetched(f.id, &k, ok(Some("e"), &v1), t0 + REFRESH);
    assert_eq!(kinds(&events(&mut s)), ["upsert"]);
}
