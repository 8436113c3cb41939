//! Shared pieces of the end-to-end tests: a testbed, a client bootstrapped
//! against it, and builders of valid Envoy resources.

#![allow(dead_code)]

pub mod credentials;
pub mod resources;

use std::time::Duration;

use std::sync::Arc;
use xdsfed::client::client::XdsClient;
use xdsfed::client::transport::{BackoffConfig, TransportOptions};
use xdsfed::client::watch::{Watch, WatchEvent};
use xdsfed::core::bootstrap::{ApiVariant, Bootstrap};
use xdsfed::core::types::ResourceType;
use xdsfed::graph::{ConfigGraph, Snapshot};

/// Long enough for loopback on a loaded 2-core CI machine; tests never
/// assert on timings, they only bound how long a failure takes to show.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Transport options with timers short enough for tests.
pub fn fast_transport() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        does_not_exist_timeout: Duration::from_millis(500),
        idle_grace: Duration::from_millis(200),
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            ..defaults.backoff
        },
        ..defaults
    }
}

/// A JSON bootstrap: `servers` is the top-level list, `authorities` maps an
/// authority to its server URI list.
pub fn bootstrap_json(
    default_server: &str,
    authorities: &[(&str, &[&str])],
    extra_server_json: &str,
) -> String {
    let server = |uri: &str| {
        format!(
            r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]{extra_server_json}}}"#
        )
    };
    let authorities: Vec<String> = authorities
        .iter()
        .map(|(name, uris)| {
            let servers: Vec<String> = uris.iter().map(|u| server(u)).collect();
            format!(r#""{name}": {{"xds_servers": [{}]}}"#, servers.join(","))
        })
        .collect();
    format!(
        r#"{{"xds_servers": [{}], "node": {{"id": "e2e-node", "cluster": "e2e"}}, "authorities": {{{}}}}}"#,
        server(default_server),
        authorities.join(",")
    )
}

/// A client for a JSON bootstrap as written (delta ADS, not pinned), with
/// fast timers.
pub fn client(bootstrap: &str) -> XdsClient {
    let bootstrap = Bootstrap::from_json_str(bootstrap).expect("test bootstrap is valid");
    XdsClient::builder(bootstrap)
        .transport_options(fast_transport())
        .build()
        .expect("inside a tokio runtime")
}

/// A testbed of one server, `cloud`, serving `cloud.example`, and a client
/// (delta ADS, fast timers) whose bootstrap maps that authority to it.
pub async fn one_server() -> (xdsfed::testbed::Testbed, XdsClient) {
    let spec = xdsfed::testbed::ServerSpec::new("cloud", ["cloud.example"]);
    let testbed = xdsfed::testbed::Testbed::start([spec])
        .await
        .expect("the testbed starts");
    let uri = testbed.servers()[0].uri();
    let client = client(&bootstrap_json(
        &uri,
        &[("cloud.example", &[uri.as_str()])],
        "",
    ));
    (testbed, client)
}

/// A client for a JSON bootstrap whose every server is pinned to `variant`.
pub fn client_with(bootstrap: &str, variant: ApiVariant) -> XdsClient {
    let mut bootstrap = Bootstrap::from_json_str(bootstrap).expect("test bootstrap is valid");
    let servers = bootstrap.xds_servers.iter_mut().chain(
        bootstrap
            .authorities
            .values_mut()
            .flat_map(|a| a.xds_servers.iter_mut()),
    );
    for server in servers {
        server.api = variant;
        server.api_pinned = true;
    }
    XdsClient::builder(bootstrap)
        .transport_options(fast_transport())
        .build()
        .expect("inside a tokio runtime")
}

/// The next event, or a panic naming what was awaited.
pub async fn next<T: ResourceType>(watch: &mut Watch<T>) -> WatchEvent<T::Resource> {
    match tokio::time::timeout(PATIENCE, watch.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("watch of {} ended", watch.key()),
        Err(_) => panic!("no event for {} within {PATIENCE:?}", watch.key()),
    }
}

/// The next `Changed` resource, skipping nothing else: any other event fails.
pub async fn changed<T: ResourceType>(watch: &mut Watch<T>) -> std::sync::Arc<T::Resource> {
    match next(watch).await {
        WatchEvent::Changed(r) => r,
        other => panic!(
            "expected a change of {}, got {}",
            watch.key(),
            describe(&other)
        ),
    }
}

pub fn describe<T>(event: &WatchEvent<T>) -> String {
    match event {
        WatchEvent::Changed(_) => "Changed".into(),
        WatchEvent::DoesNotExist => "DoesNotExist".into(),
        WatchEvent::Error(e) => format!("Error({e})"),
        WatchEvent::AmbientError(e) => format!("AmbientError({e})"),
    }
}

/// Waits until `f` holds, polling; panics with `what` after [`PATIENCE`].
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !f() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for a `Changed` resource that satisfies `want`, skipping other
/// changes and errors (a failing server reports errors before a fallback or
/// an alternative answers); panics after [`PATIENCE`].
pub async fn changed_until<T: ResourceType>(
    watch: &mut Watch<T>,
    what: &str,
    mut want: impl FnMut(&T::Resource) -> bool,
) -> std::sync::Arc<T::Resource> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let event = match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("watch of {} ended waiting for {what}", watch.key()),
            Err(_) => panic!(
                "{} did not reach {what} within {PATIENCE:?}; last state {:?}",
                watch.key(),
                watch.state()
            ),
        };
        if let WatchEvent::Changed(r) = event
            && want(&r)
        {
            return r;
        }
    }
}

/// The first snapshot (current or next) that satisfies `f`.
pub async fn snapshot_where(
    graph: &mut ConfigGraph,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let wait = async {
        if let Some(s) = graph.load().filter(|s| f(s)) {
            return s;
        }
        loop {
            let s = graph.changed().await.expect("the graph's task runs");
            if f(&s) {
                return s;
            }
        }
    };
    match tokio::time::timeout(PATIENCE, wait).await {
        Ok(s) => s,
        Err(_) => panic!(
            "no snapshot where {what} within {PATIENCE:?}; last: {}",
            graph.load().map(|s| summary(&s)).unwrap_or_default()
        ),
    }
}

/// Names and errors only: a whole snapshot is too long to read in a panic.
pub fn summary(s: &Snapshot) -> String {
    let listeners: Vec<String> = s
        .listeners()
        .map(|l| format!("{} {:?}", l.name, l.error))
        .collect();
    let routes: Vec<&str> = s.route_configs().map(|r| &*r.name).collect();
    let clusters: Vec<String> = s
        .clusters()
        .map(|c| format!("{} {:?}", c.name, c.error))
        .collect();
    let collections: Vec<String> = s
        .collections()
        .map(|c| {
            format!(
                "{} {:?} {:?}",
                c.name,
                c.members().collect::<Vec<_>>(),
                c.error
            )
        })
        .collect();
    format!(
        "generation {}\nlisteners {listeners:#?}\nroutes {routes:#?}\nclusters {clusters:#?}\ncollections {collections:#?}",
        s.generation()
    )
}

/// `GET path` over HTTP/1.1 from `addr` (the admin endpoint's `/metrics`):
/// the body, or the whole answer when it has no body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut http = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    http.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    tokio::time::timeout(PATIENCE, http.read_to_string(&mut text))
        .await
        .expect("the endpoint answers")
        .unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or(text)
}

/// The executable of a peer implementation a test runs against: `env` (the
/// path its install script prints) or `name` on `PATH`. `None` when the
/// test is to be skipped, after saying why; with `XDSFED_REQUIRE_PEERS=1`
/// (CI) a missing peer fails the test instead.
pub fn peer_executable(env: &str, name: &str, install: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os(env)
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        });
    if found.is_none() {
        assert_ne!(
            std::env::var("XDSFED_REQUIRE_PEERS").as_deref(),
            Ok("1"),
            "{name} is not installed and XDSFED_REQUIRE_PEERS=1 (see {install})"
        );
        eprintln!("skipped: {name} not installed (set {env}, see {install})");
    }
    found
}

/// Takes `server` down: its open streams end and new connections are
/// refused until [`bring_up`].
pub async fn take_down(server: &xdsfed::testbed::Server) {
    server.update_faults(|f| f.refuse_connections = true);
    server
        .restart(true, Duration::from_millis(1))
        .await
        .expect("the server restarts");
}

/// Lets `server` accept connections again after [`take_down`].
pub fn bring_up(server: &xdsfed::testbed::Server) {
    server.update_faults(|f| f.refuse_connections = false);
}

/// Whether the client subscribes `name` on an open delta stream to
/// `server`, by the server's recording.
pub fn subscribes_on(server: &xdsfed::testbed::Server, name: &str) -> bool {
    let streams = server.recording().streams();
    let mut subscribed = false;
    for stream in streams.iter().filter(|s| s.closed.is_none()) {
        for r in stream.delta_requests() {
            if r.resource_names_subscribe.iter().any(|n| n == name) {
                subscribed = true;
            }
            if r.resource_names_unsubscribe.iter().any(|n| n == name) {
                subscribed = false;
            }
        }
    }
    subscribed
}
