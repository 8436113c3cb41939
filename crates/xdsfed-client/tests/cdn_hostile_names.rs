//! Names that would make a file host serve a file outside the CDN's base
//! path, end to end over loopback: the testbed's static host logs every
//! request, and the client must send none for such a name, giving its
//! watchers an error that names the resource instead.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;
use xdsfed_core::types::ClusterView;

use xdsfed_client::client::XdsClient;
use xdsfed_client::watch::WatchEvent;
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::name::canonical_key;
use xdsfed_core::types::ClusterType;
use xdsfed_testbed::{Protocol, ServerSpec, Testbed};

/// Bounds how long an event takes to come; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(10);

const CDN: &str = "cdn.example";
const BASE: &str = "/xds";

fn cluster(id: &str) -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.Cluster/{id}")
}

/// The path a host that percent-decodes, takes `\` for `/` and resolves
/// dot segments (as nginx and Python's `http.server` do) would serve.
fn as_a_host_resolves(path: &str) -> Vec<String> {
    let path = path.split('?').next().unwrap_or_default();
    let decoded = percent_decode(path).replace('\\', "/");
    let mut resolved: Vec<String> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                resolved.pop();
            }
            other => resolved.push(other.to_owned()),
        }
    }
    resolved
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = s
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first event of a watch on `name`.
async fn first_event(client: &XdsClient, name: &str) -> WatchEvent<ClusterView> {
    let mut watch = client.watch::<ClusterType>(name).unwrap();
    tokio::time::timeout(PATIENCE, watch.next())
        .await
        .unwrap_or_else(|_| panic!("{name}: no event within {PATIENCE:?}"))
        .unwrap()
}

/// Rule (docs/federation.md, "Where each file lives"): a name whose
/// segment decodes to `.`, `..`, a `/` or `\`, or a control character has
/// no file; it is never fetched, and its watchers get an error naming the
/// resource. The host sees no path outside the base.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_names_that_would_leave_the_base_are_refused_and_never_fetched() {
    let testbed = Testbed::start([ServerSpec::new("cdn", [CDN]).with_protocol(Protocol::HttpCdn)])
        .await
        .unwrap();
    let cdn = testbed.servers()[0].uri();
    let server = format!(
        r#"{{"server_uri": "{cdn}{BASE}", "channel_creds": [{{"type": "insecure"}}],
             "api_type": "HTTP_CDN", "refresh_delay": "60s", "request_timeout": "1s"}}"#
    );
    let bootstrap = format!(
        r#"{{"node": {{"id": "cdn-hostile"}}, "xds_servers": [{server}],
             "authorities": {{"{CDN}": {{"xds_servers": [{server}]}}}}}}"#
    );
    let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
        .build()
        .unwrap();

    let hostile = [
        cluster("%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd"),
        cluster("%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd"),
        cluster("..%2F..%2F..%2F..%2Fetc%2Fpasswd"),
        cluster("..%5C..%5C..%5C..%5Csecret"),
        cluster("../../../../secret"),
        cluster("secret%00.txt"),
        "../../../../etc/passwd".to_owned(),
        "..".to_owned(),
    ];
    for name in &hostile {
        let key = canonical_key(name).unwrap();
        match first_event(&client, name).await {
            WatchEvent::Error(error) => {
                let message = error.message();
                assert!(message.contains(&key), "{name}: {message}");
                assert!(
                    message.contains("has no file on an HTTP CDN"),
                    "{name}: {message}"
                );
            }
            other => panic!("{name}: expected an error, got {other:?}"),
        }
    }

    // A plain name is fetched (the host has no such file): requests flow.
    let fine = cluster("fine");
    assert!(matches!(
        first_event(&client, &fine).await,
        WatchEvent::DoesNotExist
    ));

    let log = testbed.servers()[0].cdn_requests();
    for request in &log {
        let resolved = as_a_host_resolves(&request.path);
        assert_eq!(
            resolved.first().map(String::as_str),
            Some(BASE.trim_start_matches('/')),
            "{} resolves outside {BASE}",
            request.path
        );
    }
    let paths: Vec<&str> = log.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [format!("{BASE}/{CDN}/envoy.config.cluster.v3.Cluster/fine")],
        "only the plain name is fetched"
    );
}
