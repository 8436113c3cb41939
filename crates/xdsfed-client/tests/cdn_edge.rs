//! The HTTP CDN source at the edge, over loopback: what it asks of a file
//! host (conditional requests by `Last-Modified`, a bounded number of
//! connections) and what the testbed's host tells shared caches (`Vary`).

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/static_origin.rs"]
mod static_origin;

use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::{Message as _, Name as _};
use xdsfed_client::client::XdsClient;
use xdsfed_client::watch::WatchEvent;
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::types::ClusterType;
use xdsfed_testbed::resources::cluster;
use xdsfed_testbed::{Protocol, ServerSpec, Testbed};

use static_origin::{Response, StaticOrigin, raw_get};

/// Bounds how long an event takes to come; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(10);

const CDN: &str = "cdn.example";
const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn cluster_name(id: &str) -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.Cluster/{id}")
}

fn cluster_path(id: &str) -> String {
    format!("/{CDN}/envoy.config.cluster.v3.Cluster/{id}")
}

/// The file of the cluster `id`: a `DiscoveryResponse` holding it.
fn cluster_file(id: &str, version: &str) -> Vec<u8> {
    let name = cluster_name(id);
    let any = envoy_types::pb::google::protobuf::Any {
        type_url: envoy_types::pb::envoy::config::cluster::v3::Cluster::type_url(),
        value: cluster(&name, "svc").encode_to_vec(),
    };
    DiscoveryResponse {
        version_info: version.into(),
        type_url: CLUSTER_TYPE.into(),
        resources: vec![any],
        ..Default::default()
    }
    .encode_to_vec()
}

/// A client whose only server is the HTTP CDN at `uri`, polling every
/// `refresh`.
fn cdn_client(uri: &str, refresh: &str) -> XdsClient {
    let server = format!(
        r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}],
             "api_type": "HTTP_CDN", "refresh_delay": "{refresh}", "request_timeout": "2s"}}"#
    );
    let bootstrap = format!(
        r#"{{"node": {{"id": "cdn-edge"}}, "xds_servers": [{server}],
             "authorities": {{"{CDN}": {{"xds_servers": [{server}]}}}}}}"#
    );
    XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
        .build()
        .unwrap()
}

/// Waits until `origin` has seen `n` requests.
async fn until_requests(origin: &StaticOrigin, n: usize) {
    tokio::time::timeout(PATIENCE, async {
        while origin.requests().len() < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("fewer than {n} requests: {:?}", origin.requests()));
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Rule: the testbed's host answers JSON or protobuf by `Accept`, so it
/// sends `Vary: Accept`, and each representation has its own `ETag`
/// (RFC 9111 §4.1: a shared cache keys on the headers `Vary` names).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn testbed_cdn_answer_varies_by_accept_with_an_etag_per_representation() {
    let testbed = Testbed::start([ServerSpec::new("cdn", [CDN]).with_protocol(Protocol::HttpCdn)])
        .await
        .unwrap();
    let host = &testbed.servers()[0];
    host.set_message(&cluster_name("c"), &cluster(&cluster_name("c"), "svc"))
        .unwrap();
    let uri = host.uri();
    let (status, binary) = raw_get(&uri, &cluster_path("c"), &[]).await;
    assert_eq!(status, 200);
    let (status, json) = raw_get(&uri, &cluster_path("c"), &[("accept", "application/json")]).await;
    assert_eq!(status, 200);
    for headers in [&binary, &json] {
        assert_eq!(header(headers, "vary"), Some("Accept"), "{headers:?}");
    }
    let (binary_etag, json_etag) = (header(&binary, "etag"), header(&json, "etag"));
    assert!(binary_etag.is_some(), "{binary:?}");
    assert_ne!(binary_etag, json_etag);
    // Each representation revalidates with its own validator.
    let (status, not_modified) = raw_get(
        &uri,
        &cluster_path("c"),
        &[
            ("accept", "application/json"),
            ("if-none-match", json_etag.unwrap()),
        ],
    )
    .await;
    assert_eq!(status, 304);
    assert_eq!(header(&not_modified, "vary"), Some("Accept"));
}

/// Rule: a file host that validates by `Last-Modified` only (no `ETag`,
/// as Python's `http.server`) is asked `If-Modified-Since` with the date
/// it sent; its `304` keeps the copy (RFC 9110 §13.1.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_fetch_is_conditional_on_last_modified_without_an_etag() {
    const MODIFIED: &str = "Wed, 21 Oct 2026 07:28:00 GMT";
    let origin = StaticOrigin::start(|request| {
        if request.header("if-modified-since") == Some(MODIFIED) {
            Response::status(304)
        } else {
            Response::ok(cluster_file("c", "1")).with("last-modified", MODIFIED)
        }
    })
    .await;
    let client = cdn_client(origin.uri(), "0.05s");
    let mut watch = client.watch::<ClusterType>(&cluster_name("c")).unwrap();
    let first = tokio::time::timeout(PATIENCE, watch.next()).await.unwrap();
    assert!(matches!(first, Some(WatchEvent::Changed(_))), "{first:?}");
    until_requests(&origin, 4).await;
    let requests = origin.requests();
    assert_eq!(requests[0].header("if-modified-since"), None);
    for later in &requests[1..] {
        assert_eq!(
            later.header("if-modified-since"),
            Some(MODIFIED),
            "{later:?}"
        );
        assert_eq!(later.header("if-none-match"), None, "{later:?}");
    }
    // 304s are no news, and no error: the copy keeps serving.
    let next = tokio::time::timeout(Duration::from_millis(200), watch.next()).await;
    assert!(next.is_err(), "{next:?}");
    assert!(watch.current().is_some());
}

/// How many requests `origin` has seen for `path`.
fn requests_for(origin: &StaticOrigin, path: &str) -> usize {
    origin.requests().iter().filter(|r| r.path == path).count()
}

/// Rule: an answer a shared cache keeps fresh (`Cache-Control: max-age`)
/// for longer than `refresh_delay` is not polled again before that runs
/// out: asking sooner would only buy `304`s from the cache. A file
/// without it is polled every `refresh_delay` all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_file_fresh_in_the_cache_is_not_polled_before_its_max_age() {
    let origin = StaticOrigin::start(|request| {
        let id = request
            .path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let file = Response::ok(cluster_file(&id, "1"));
        if id == "cached" {
            file.with("cache-control", "public, max-age=3600")
                .with("age", "10")
        } else {
            file.with("cache-control", "no-cache, max-age=3600")
        }
    })
    .await;
    let client = cdn_client(origin.uri(), "0.05s");
    let _cached = client
        .watch::<ClusterType>(&cluster_name("cached"))
        .unwrap();
    let _plain = client.watch::<ClusterType>(&cluster_name("plain")).unwrap();
    tokio::time::timeout(PATIENCE, async {
        while requests_for(&origin, &cluster_path("plain")) < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(requests_for(&origin, &cluster_path("cached")), 1);
}

/// Rule: a client holds a small fixed number of connections to a file
/// host, whatever the number of files: requests in flight are bounded
/// (`MAX_IN_FLIGHT`) and connections kept alive and reused. hyper's pool
/// takes a finished request's connection back a moment after its body is
/// read, so a request sent in that moment dials one more: on a loaded
/// machine the count passes `MAX_IN_FLIGHT` by one or two (5 seen), never
/// approaching one per file (16) or per request (48).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_files_share_a_bounded_number_of_connections() {
    const FILES: usize = 16;
    let origin = StaticOrigin::start(|request| {
        let id = request
            .path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        Response::ok(cluster_file(&id, "1")).with("etag", "\"1\"")
    })
    .await;
    let client = cdn_client(origin.uri(), "0.05s");
    let _watches: Vec<_> = (0..FILES)
        .map(|i| {
            client
                .watch::<ClusterType>(&cluster_name(&format!("c{i}")))
                .unwrap()
        })
        .collect();
    // Every file fetched three times: first fetches and revalidations.
    until_requests(&origin, FILES * 3).await;
    let connections = origin.connections();
    assert!(
        connections <= 2 * xdsfed_core::source::cdn::MAX_IN_FLIGHT,
        "{connections} connections for {FILES} files"
    );
}

/// Whether the file host of [`one_file_failing`] answers `403` for the
/// file `bad`.
static BAD_FILE_FAILS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A file host whose files validate by ETag, and whose file `bad` answers
/// `403` while [`BAD_FILE_FAILS`] is set.
fn one_file_failing(request: &static_origin::Request) -> Response {
    let id = request.path.rsplit('/').next().unwrap_or_default();
    if id == "bad" && BAD_FILE_FAILS.load(std::sync::atomic::Ordering::SeqCst) {
        return Response::status(403);
    }
    if request.header("if-none-match") == Some("\"1\"") {
        return Response::status(304).with("etag", "\"1\"");
    }
    Response::ok(cluster_file(id, "1")).with("etag", "\"1\"")
}

/// The status row of the resource named `name`.
fn status_of(client: &XdsClient, name: &str) -> xdsfed_core::status::ResourceStatusEntry {
    let status = client.status();
    let row = status.resources.into_iter().find(|r| r.name == name);
    row.unwrap()
}

/// Rule: an answer that is no use for one file (here `403`) is that
/// file's error alone: its watchers hear of it, naming its URL and type,
/// and the other files' watchers hear nothing; its next answer, a `304`,
/// ends the error while the copy keeps serving (rule 7 of the session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_file_error_names_its_own_file_and_reaches_only_its_watchers() {
    let origin = StaticOrigin::start(one_file_failing).await;
    let client = cdn_client(origin.uri(), "0.05s");
    let mut good = client.watch::<ClusterType>(&cluster_name("good")).unwrap();
    let mut bad = client.watch::<ClusterType>(&cluster_name("bad")).unwrap();
    for watch in [&mut good, &mut bad] {
        let first = tokio::time::timeout(PATIENCE, watch.next()).await.unwrap();
        assert!(matches!(first, Some(WatchEvent::Changed(_))), "{first:?}");
    }
    BAD_FILE_FAILS.store(true, std::sync::atomic::Ordering::SeqCst);
    let event = tokio::time::timeout(PATIENCE, bad.next()).await.unwrap();
    let Some(WatchEvent::AmbientError(error)) = event else {
        panic!("{event:?}");
    };
    let text = error.to_string();
    assert!(
        text.contains(&format!(
            "{}{}: HTTP status 403",
            origin.uri(),
            cluster_path("bad")
        )) && text.contains("envoy.config.cluster.v3.Cluster xdstp://cdn.example/"),
        "{text}"
    );
    // The other file's watcher hears nothing, over many polls.
    until_requests(&origin, origin.requests().len() + 10).await;
    let quiet = tokio::time::timeout(Duration::from_millis(100), good.next()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    assert_eq!(status_of(&client, &cluster_name("good")).error, None);
    BAD_FILE_FAILS.store(false, std::sync::atomic::Ordering::SeqCst);
    tokio::time::timeout(PATIENCE, async {
        while status_of(&client, &cluster_name("bad")).error.is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert!(bad.current().is_some());
}
