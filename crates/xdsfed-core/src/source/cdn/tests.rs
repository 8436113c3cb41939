//! The rules of [`CdnSession`](super::CdnSession), one test each (the
//! numbers are the module doc's), in virtual time: no IO, no clock.

use std::collections::BTreeSet;
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
    // Exact times, unless a test asks for the spread.
    cfg.poll_jitter = 0.0;
    CdnSession::new(cfg, Arc::new(TypeRegistry::with_builtin()))
}

/// A session with the default poll spread and backoff jitter, drawing
/// from `seed`.
fn jittered_session(seed: u64) -> CdnSession {
    let mut cfg = CdnConfig::new("http://cdn.test/base");
    cfg.timing = CdnTiming {
        refresh_delay: REFRESH,
        request_timeout: Duration::from_secs(1),
    };
    cfg.seed = seed;
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
    let mut reply = HttpReply::new(status, body);
    reply.etag = etag.map(Arc::from);
    reply.content_type = Some("application/octet-stream".into());
    Fetched::Reply(reply)
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
            CoreEvent::ResourceError { .. } => "file error",
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
    let mut json_reply = HttpReply::new(200, Bytes::from(json));
    json_reply.etag = Some(Arc::from("\"tag\""));
    json_reply.content_type = Some("Application/JSON; charset=utf-8".into());
    let json_reply = Fetched::Reply(json_reply);
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

/// Rule 7: no answer, or a `5xx`, is `StreamFailed` once per outage (and
/// once more per resource first failing in it), naming the server, not a
/// file; an answer reports `StreamHealthy`.
#[test]
fn failures_report_once_per_outage_and_an_answer_ends_it() {
    let mut s = session();
    let t0 = Instant::now();
    let (a, b) = (key("a"), key("b"));
    s.subscribe(a.clone());
    s.subscribe(b.clone());
    let fa = s.poll_fetch(t0).unwrap();
    let fb = s.poll_fetch(t0).unwrap();
    s.handle_fetched(fa.id, &a, Fetched::Failed(Arc::from("refused")), t0);
    let got = events(&mut s);
    let Some(CoreEvent::StreamFailed { failure }) = got.first() else {
        panic!("{got:?}");
    };
    let error = failure.to_string();
    assert!(
        error.contains("refused") && error.contains("http://cdn.test/base"),
        "{error}"
    );
    assert!(!error.contains("/cdn.example/"), "names a file: {error}");
    // Another resource failing in the same outage gets its own report; a
    // 503 is the server's failure too, named by the server.
    s.handle_fetched(fb.id, &b, reply(503, None, Bytes::new()), t0);
    let got = events(&mut s);
    let Some(CoreEvent::StreamFailed { failure }) = got.first() else {
        panic!("{got:?}");
    };
    let error = failure.to_string();
    assert!(
        error.contains("http://cdn.test/base answered HTTP status 503"),
        "{error}"
    );
    let t1 = s.poll_timeout().unwrap();
    let f = s.poll_fetch(t1).unwrap();
    s.handle_fetched(f.id, &f.key, Fetched::Failed(Arc::from("refused")), t1);
    assert!(
        events(&mut s).is_empty(),
        "one report per resource per outage"
    );
    assert_eq!(s.stats().failed, 3);
    assert!(!s.is_healthy());
    let t2 = s.poll_timeout().unwrap();
    let f = s.poll_fetch(t2).unwrap();
    s.handle_fetched(
        f.id,
        &f.key,
        ok(None, &response("1", vec![collection(&["m"])])),
        t2,
    );
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
    assert!(s.is_healthy());
}

/// Rule 7: an answer that is no use for one file (here `403`) is that
/// file's error alone, naming its URL, reported once; no other resource
/// hears of it, and the file's next usable answer (a `304`) reports its
/// copy again.
#[test]
fn unusable_answer_is_the_error_of_its_file_alone_until_it_is_answered() {
    let mut s = session();
    let t0 = Instant::now();
    let (a, b) = (key("a"), key("b"));
    let fa = first_answer(
        &mut s,
        &a,
        t0,
        ok(Some("ea"), &response("1", vec![collection(&["m"])])),
    );
    assert_eq!(fa.key, a);
    let fb = first_answer(
        &mut s,
        &b,
        t0,
        ok(Some("eb"), &response("1", vec![collection(&["n"])])),
    );
    assert_eq!(fb.key, b);
    events(&mut s);
    let got = round(&mut s, &a, || reply(403, None, Bytes::new()));
    assert_eq!(kinds(&got), ["file error"], "{got:?}");
    let CoreEvent::ResourceError { key, code, message } = &got[0] else {
        unreachable!()
    };
    assert_eq!((key, *code), (&a, GrpcCode::Unavailable));
    assert!(
        message.ends_with("ClusterCollection/a: HTTP status 403"),
        "{message}"
    );
    // Failing again is not news.
    assert!(round(&mut s, &a, || reply(403, None, Bytes::new())).is_empty());
    // The next usable answer, a 304, reports the held copy again.
    let got = round(&mut s, &a, || reply(304, None, Bytes::new()));
    assert_eq!(kinds(&got), ["upsert"], "{got:?}");
    assert_eq!(members_of(&got[0]), [member("m")]);
    // Once: the 304 after it is no event again.
    assert!(round(&mut s, &a, || reply(304, None, Bytes::new())).is_empty());
}

/// Fetches whatever is due, from the next timeout on, until `key` has
/// been fetched; `key` gets `answer`, everything else a `304`. The events
/// that came of it.
fn round(s: &mut CdnSession, key: &ResourceKey, answer: fn() -> Fetched) -> Vec<CoreEvent> {
    loop {
        let now = s.poll_timeout().unwrap();
        let mut fetched_key = false;
        while let Some(f) = s.poll_fetch(now) {
            let reply_for = if f.key == *key {
                fetched_key = true;
                answer()
            } else {
                reply(304, None, Bytes::new())
            };
            s.handle_fetched(f.id, &f.key, reply_for, now);
        }
        if fetched_key {
            return events(s);
        }
    }
}

/// Rule 7: after a failure the whole server backs off, from no less than
/// `refresh_delay`, growing; no resource of it is fetched meanwhile, and
/// failures of fetches already in flight join the backoff without growing
/// it. An answer ends it: polls go back to `refresh_delay`.
#[test]
fn server_backs_off_as_a_whole_from_the_refresh_delay() {
    let mut s = session();
    let t0 = Instant::now();
    let (a, b, c) = (key("a"), key("b"), key("c"));
    for k in [&a, &b] {
        s.subscribe(k.clone());
    }
    let fa = s.poll_fetch(t0).unwrap();
    let fb = s.poll_fetch(t0).unwrap();
    s.handle_fetched(fa.id, &a, reply(502, None, Bytes::new()), t0);
    // The first retry is no sooner than a poll would be.
    assert_eq!(s.poll_timeout(), Some(t0 + REFRESH));
    // While the server backs off, nothing of it is fetched: not the other
    // resource, not a new subscription.
    s.subscribe(c.clone());
    assert_eq!(s.poll_fetch(t0 + REFRESH / 2), None);
    s.handle_fetched(fb.id, &b, reply(504, None, Bytes::new()), t0 + REFRESH / 2);
    assert_eq!(s.poll_timeout(), Some(t0 + REFRESH), "joined, not grown");
    // Then everything due is fetched; failing again doubles the delay.
    let t1 = t0 + REFRESH;
    let again: Vec<Fetch> = std::iter::from_fn(|| s.poll_fetch(t1)).collect();
    assert_eq!(again.len(), 3);
    for f in &again {
        s.handle_fetched(f.id, &f.key, Fetched::Failed(Arc::from("refused")), t1);
    }
    assert_eq!(s.poll_timeout(), Some(t1 + REFRESH * 2));
    let t2 = t1 + REFRESH * 2;
    let f = s.poll_fetch(t2).unwrap();
    s.handle_fetched(f.id, &f.key, reply(404, None, Bytes::new()), t2);
    // Answered: the others go at once, and the answered one a poll later.
    let rest: Vec<Fetch> = std::iter::from_fn(|| s.poll_fetch(t2)).collect();
    assert_eq!(rest.len(), 2);
    assert!(
        s.due
            .iter()
            .any(|(at, k)| *k == f.key && *at == t2 + REFRESH)
    );
}

/// Rule 7: `Retry-After` on a `503` or `429` lengthens the server's
/// backoff (never shortens it below `refresh_delay`).
#[test]
fn retry_after_lengthens_the_server_backoff() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("a");
    let mut busy = HttpReply::new(429, Bytes::new());
    busy.retry_after = Some(REFRESH * 6);
    first_answer(&mut s, &k, t0, Fetched::Reply(busy));
    assert_eq!(s.poll_timeout(), Some(t0 + REFRESH * 6));
    assert_eq!(s.poll_fetch(t0 + REFRESH * 5), None);
    let t1 = t0 + REFRESH * 6;
    let f = s.poll_fetch(t1).unwrap();
    let mut soon = HttpReply::new(503, Bytes::new());
    soon.retry_after = Some(Duration::from_secs(1));
    s.handle_fetched(f.id, &k, Fetched::Reply(soon), t1);
    assert_eq!(s.poll_timeout(), Some(t1 + REFRESH * 2));
}

/// Rule 1: each poll is spread around `refresh_delay`, so resources (and
/// clients) answered at the same moment poll at different ones.
#[test]
fn polls_answered_together_are_spread_apart() {
    let mut s = jittered_session(7);
    let t0 = Instant::now();
    for i in 0..20 {
        let k = key(&format!("r{i}"));
        s.subscribe(k.clone());
        let f = s.poll_fetch(t0).unwrap();
        s.handle_fetched(f.id, &k, reply(404, None, Bytes::new()), t0);
    }
    let due: BTreeSet<Instant> = s.due.iter().map(|(at, _)| *at).collect();
    assert!(due.len() > 10, "{} distinct poll times of 20", due.len());
    for at in &due {
        let after = *at - t0;
        assert!(after >= REFRESH.mul_f64(0.8) && after <= REFRESH.mul_f64(1.2));
    }
}

/// The order and times of the fetches a session makes over `rounds`
/// answers of 5 resources, the third of every round failing.
fn fetch_schedule(seed: u64, rounds: usize) -> Vec<(Duration, String)> {
    let mut s = jittered_session(seed);
    let t0 = Instant::now();
    for i in 0..5 {
        s.subscribe(key(&format!("r{i}")));
    }
    let mut now = t0;
    let mut schedule = Vec::new();
    for round in 0..rounds {
        while let Some(f) = s.poll_fetch(now) {
            schedule.push((now - t0, f.key.name.to_string()));
            let answer = if round % 3 == 2 {
                reply(503, None, Bytes::new())
            } else {
                reply(404, None, Bytes::new())
            };
            s.handle_fetched(f.id, &f.key, answer, now);
        }
        now = s.poll_timeout().unwrap();
    }
    schedule
}

/// The session's randomness is its seed, polls as well as backoffs: the
/// same seed gives the same schedule of answered and failed fetches (a
/// replayable, deterministic core); another seed another one.
#[test]
fn seeded_session_poll_and_backoff_schedule_is_reproducible() {
    let first = fetch_schedule(42, 40);
    assert_eq!(first, fetch_schedule(42, 40));
    assert_ne!(first, fetch_schedule(43, 40));
}

/// Rule 1: an answer fresh in a shared cache for longer than
/// `refresh_delay` is not polled before that runs out; a shorter
/// freshness does not make polls sooner.
#[test]
fn fresh_answer_is_not_polled_before_its_freshness_runs_out() {
    let mut s = session();
    let t0 = Instant::now();
    let (long, short) = (key("long"), key("short"));
    let mut fresh = HttpReply::new(404, Bytes::new());
    fresh.fresh_for = Some(REFRESH * 3);
    first_answer(&mut s, &long, t0, Fetched::Reply(fresh.clone()));
    fresh.fresh_for = Some(REFRESH / 2);
    first_answer(&mut s, &short, t0, Fetched::Reply(fresh));
    let due: Vec<(Instant, ResourceKey)> = s.due.iter().cloned().collect();
    assert_eq!(due, [(t0 + REFRESH, short), (t0 + REFRESH * 3, long)]);
}

/// Rule 3: a host without ETags is asked `If-Modified-Since` with its
/// `Last-Modified`; its `304` keeps the copy.
#[test]
fn fetch_names_the_last_modified_date_and_not_modified_keeps_the_copy() {
    let mut s = session();
    let t0 = Instant::now();
    let k = key("x");
    let mut dated = HttpReply::new(
        200,
        Bytes::from(response("1", vec![collection(&["a"])]).encode_to_vec()),
    );
    dated.last_modified = Some(Arc::from("Wed, 21 Oct 2026 07:28:00 GMT"));
    first_answer(&mut s, &k, t0, Fetched::Reply(dated));
    assert_eq!(kinds(&events(&mut s)), ["healthy", "upsert"]);
    let f = s.poll_fetch(t0 + REFRESH).unwrap();
    assert_eq!(f.etag, None);
    assert_eq!(
        f.last_modified.as_deref(),
        Some("Wed, 21 Oct 2026 07:28:00 GMT")
    );
    s.handle_fetched(f.id, &k, reply(304, None, Bytes::new()), t0 + REFRESH);
    assert!(events(&mut s).is_empty());
    assert_eq!(s.stats().not_modified, 1);
}

/// Rule 7: a body that is not a `DiscoveryResponse`, a `304` to a fetch
/// without `If-None-Match` and a client error status are the file's
/// errors, not NACKs.
#[test]
fn malformed_body_unconditional_not_modified_and_error_status_are_file_errors() {
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
        assert_eq!(kinds(&events(&mut s)), ["file error"], "{what}");
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

/// The fetch schedule of a session seeded with `seed` whose server fails
/// every fetch: (time since start, resource) of the first fetches, with
/// the backoff's jitter drawn from the seed.
fn failing_schedule(seed: u64) -> Vec<(Duration, String)> {
    let mut cfg = CdnConfig::new("http://cdn.test/base");
    cfg.backoff = BackoffConfig {
        initial: BACKOFF,
        multiplier: 2.0,
        jitter: 0.5,
        max: Duration::from_secs(60),
    };
    cfg.seed = seed;
    let mut s = CdnSession::new(cfg, Arc::new(TypeRegistry::with_builtin()));
    for id in ["a", "b", "c"] {
        s.subscribe(key(id));
    }
    let t0 = Instant::now();
    let mut now = t0;
    let mut fetched = Vec::new();
    while fetched.len() < 30 {
        while let Some(fetch) = s.poll_fetch(now) {
            fetched.push((now - t0, fetch.key.name.to_string()));
            s.handle_fetched(fetch.id, &fetch.key, Fetched::Failed("refused".into()), now);
        }
        now = s.poll_timeout().expect("a retry is due");
    }
    fetched
}

/// The session has no randomness of its own: seeded alike, it fetches
/// the same resources at the same times; seeded otherwise, its backoff
/// jitter differs.
#[test]
fn seeded_session_fetch_schedule_is_reproducible() {
    assert_eq!(failing_schedule(7), failing_schedule(7));
    assert_ne!(failing_schedule(7), failing_schedule(8));
}
