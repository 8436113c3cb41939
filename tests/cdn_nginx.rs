//! HTTP CDN delivery behind a real shared cache: a stock nginx (Debian
//! bookworm's 1.22.1, `proxy_cache` with `proxy_cache_revalidate on` and
//! stale serving) between the testbed's CDN server (the origin) and N real
//! clients following a list collection of three clusters (four files).
//! Everything asserted is a count, read from nginx's access log and the
//! origin's request log:
//!
//! - origin requests do not grow with the number of clients (2, then 8);
//! - idle answers at the edge are all `304`;
//! - an update at the origin reaches every client;
//! - an origin outage (every answer `503`) with stale serving costs no
//!   client an error, and client requests to the edge stay within 1.5× of
//!   the idle rate.
//!
//! It prints the measured per-client requests, bytes and connections that
//! docs/performance.md ("Behind an HTTP cache") records. Run:
//!
//! ```text
//! export XDSFED_NGINX="$(tests/peers/install_nginx.sh)"
//! cargo test --test cdn_nginx -- --nocapture
//! ```
//!
//! nginx is found through `XDSFED_NGINX` or `PATH`; without it the test
//! says it is skipped and passes, unless `XDSFED_REQUIRE_PEERS=1` (CI).

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xdsfed::core::types::ClusterView;

use common::resources::{cluster, cluster_collection, locator};
use common::{PATIENCE, peer_executable};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::CollectionEvent;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{Protocol, Server, ServerSpec, Testbed};

const CDN: &str = "cdn.example";
const MEMBERS: [&str; 3] = ["c0", "c1", "c2"];
/// The collection and its members.
const FILES: usize = 4;
/// The clients' `refresh_delay`.
const REFRESH: Duration = Duration::from_secs(1);
/// How long nginx keeps an answer fresh (`proxy_cache_valid`).
const VALIDITY: Duration = Duration::from_secs(1);
/// How long each phase is counted.
const WINDOW: Duration = Duration::from_secs(6);

fn collection_name() -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.ClusterCollection/mesh/all")
}

fn member_name(id: &str) -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.Cluster/{id}")
}

fn service_of(c: &ClusterView) -> String {
    c.eds_service_name().unwrap_or_default().to_owned()
}

/// nginx as a proxy cache in front of `origin`, in a directory of its own,
/// run as the current user; stopped when dropped.
struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Nginx {
    fn start(executable: &Path, origin: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let root = dir.path().display().to_string();
        // A root test process would hand the workers to `nobody`, who
        // cannot write the temporary directory.
        let user = if is_root() { "user root;" } else { "" };
        let config = format!(
            r#"{user}
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format edge '$status $upstream_cache_status $upstream_addr $connection $bytes_sent $request_uri';
    access_log {root}/access.log edge;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    proxy_cache_path {root}/cache levels=1:2 keys_zone=xds:1m max_size=16m inactive=10m use_temp_path=off;
    upstream origin {{
        server {origin} max_fails=0;
        keepalive 4;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 1s;
            proxy_read_timeout 2s;
            proxy_cache xds;
            proxy_cache_valid 200 404 {validity}s;
            proxy_cache_revalidate on;
            proxy_cache_lock on;
            proxy_cache_use_stale error timeout http_500 http_502 http_503 http_504 updating;
        }}
    }}
}}
"#,
            validity = VALIDITY.as_secs(),
        );
        std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
        let child = Command::new(executable)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nginx starts");
        let nginx = Nginx { child, dir, port };
        nginx.until_listening();
        nginx
    }

    fn until_listening(&self) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nginx does not listen within {PATIENCE:?}: {}",
                std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every access log line so far.
    fn log(&self) -> Vec<Access> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(Access::parse)
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// One line of the `edge` log format.
#[derive(Debug, Clone)]
struct Access {
    status: u16,
    cache: String,
    connection: u64,
    bytes: u64,
}

impl Access {
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split(' ');
        let status = fields.next()?.parse().ok()?;
        let cache = fields.next()?.to_owned();
        let _upstream = fields.next()?;
        let connection = fields.next()?.parse().ok()?;
        let bytes = fields.next()?.parse().ok()?;
        Some(Access {
            status,
            cache,
            connection,
            bytes,
        })
    }
}

/// What one client's collection watch has told it.
#[derive(Debug, Default)]
struct Seen {
    services: HashMap<String, String>,
    errors: Vec<String>,
}

/// A real client following the collection through the edge.
struct EdgeClient {
    client: XdsClient,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl EdgeClient {
    fn start(edge: &str) -> Self {
        let server = format!(
            r#"{{"server_uri": "{edge}", "channel_creds": [{{"type": "insecure"}}],
                 "api_type": "HTTP_CDN", "refresh_delay": "{}s", "request_timeout": "3s"}}"#,
            REFRESH.as_secs()
        );
        let bootstrap = format!(
            r#"{{"node": {{"id": "edge"}}, "xds_servers": [{server}],
                 "authorities": {{"{CDN}": {{"xds_servers": [{server}]}}}}}}"#
        );
        let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
            .build()
            .unwrap();
        let mut watch = client
            .watch_list_collection::<ClusterType>(&collection_name())
            .unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let task = tokio::spawn({
            let seen = Arc::clone(&seen);
            async move {
                while let Some(event) = watch.next().await {
                    let mut seen = seen.lock().unwrap();
                    match event {
                        CollectionEvent::Upsert { name, resource } => {
                            seen.services
                                .insert(name.to_string(), service_of(&resource));
                        }
                        CollectionEvent::Error { name, error } => {
                            seen.errors.push(format!("{name}: {error}"));
                        }
                        _ => {}
                    }
                }
            }
        });
        EdgeClient { client, seen, task }
    }

    fn has_all(&self, service: &str) -> bool {
        let seen = self.seen.lock().unwrap();
        MEMBERS.iter().all(|id| {
            seen.services
                .get(&member_name(id))
                .is_some_and(|s| s == service)
        })
    }

    fn errors(&self) -> Vec<String> {
        self.seen.lock().unwrap().errors.clone()
    }

    fn failures(&self) -> u64 {
        self.client
            .status()
            .servers
            .iter()
            .map(|s| s.server_failure)
            .sum()
    }
}

impl Drop for EdgeClient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until every client holds every member at `service`.
async fn until_converged(clients: &[EdgeClient], service: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !clients.iter().all(|c| c.has_all(service)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every client has {service} within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The requests of one counting window.
#[derive(Debug)]
struct Window {
    clients: usize,
    edge: Vec<Access>,
    origin: usize,
}

impl Window {
    /// Counts what the edge and the origin see during [`WINDOW`].
    async fn measure(nginx: &Nginx, origin: &Server, clients: usize) -> Self {
        let (edge_before, origin_before) = (nginx.log().len(), origin.cdn_requests().len());
        tokio::time::sleep(WINDOW).await;
        let edge = nginx.log().split_off(edge_before);
        let origin = origin.cdn_requests().len() - origin_before;
        Window {
            clients,
            edge,
            origin,
        }
    }

    fn per_client_per_second(&self, n: f64) -> f64 {
        n / self.clients as f64 / WINDOW.as_secs_f64()
    }

    fn report(&self, phase: &str) {
        let bytes: u64 = self.edge.iter().map(|a| a.bytes).sum();
        let connections: BTreeSet<u64> = self.edge.iter().map(|a| a.connection).collect();
        let not_modified = self.edge.iter().filter(|a| a.status == 304).count();
        let hits = self.edge.iter().filter(|a| a.cache == "HIT").count();
        println!(
            "{phase}: {} clients, {:.2} s; edge {} requests ({:.2}/client/s, {} 304, {} HIT), \
             {:.0} bytes/client/s, {:.2} connections/client; origin {} requests ({:.2}/s)",
            self.clients,
            WINDOW.as_secs_f64(),
            self.edge.len(),
            self.per_client_per_second(self.edge.len() as f64),
            not_modified,
            hits,
            self.per_client_per_second(bytes as f64),
            connections.len() as f64 / self.clients as f64,
            self.origin,
            self.origin as f64 / WINDOW.as_secs_f64(),
        );
    }
}

/// The most origin requests a cache of validity [`VALIDITY`] lets through
/// in a window, whatever the number of clients: one revalidation per file
/// per validity period, and one more per file for the periods the window
/// cuts.
fn origin_bound() -> usize {
    let periods = (WINDOW.as_secs_f64() / VALIDITY.as_secs_f64()).ceil() as usize;
    FILES * (periods + 1)
}

/// Rules: see the module doc (docs/rules.md, "The CDN source at the edge").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_cache_keeps_origin_load_flat_and_serves_through_an_outage() {
    let Some(executable) = peer_executable("XDSFED_NGINX", "nginx", "tests/peers/install_nginx.sh")
    else {
        return;
    };
    let testbed = Testbed::start([ServerSpec::new("cdn", [CDN]).with_protocol(Protocol::HttpCdn)])
        .await
        .unwrap();
    let origin = &testbed.servers()[0];
    let publish = |service: &str| {
        for id in MEMBERS {
            origin
                .set_message(&member_name(id), &cluster(&member_name(id), service))
                .unwrap();
        }
    };
    publish("v1");
    let entries = MEMBERS.iter().map(|id| locator(&member_name(id))).collect();
    origin
        .set_resource(&collection_name(), cluster_collection(entries))
        .unwrap();
    let nginx = Nginx::start(&executable, &origin.addr().to_string());

    // Two clients, then eight: the origin's load stays within the cache's
    // bound, and about the same.
    let mut clients: Vec<EdgeClient> = (0..2).map(|_| EdgeClient::start(&nginx.uri())).collect();
    until_converged(&clients, "v1").await;
    let two = Window::measure(&nginx, origin, clients.len()).await;
    two.report("idle");
    clients.extend((0..6).map(|_| EdgeClient::start(&nginx.uri())));
    until_converged(&clients, "v1").await;
    let eight = Window::measure(&nginx, origin, clients.len()).await;
    eight.report("idle");
    for window in [&two, &eight] {
        assert!(
            window.origin <= origin_bound(),
            "{} origin requests for {} clients, over the cache's bound {}",
            window.origin,
            window.clients,
            origin_bound()
        );
    }
    assert!(
        eight.edge.len() >= 3 * two.edge.len(),
        "the edge sees every client: {} vs {}",
        eight.edge.len(),
        two.edge.len()
    );
    assert!(
        eight.origin * 2 <= two.origin * 3 + FILES,
        "origin requests grew with clients: {} for 2, {} for 8",
        two.origin,
        eight.origin
    );
    // Idle: every answer at the edge is a revalidation.
    let not_304: Vec<&Access> = eight.edge.iter().filter(|a| a.status != 304).collect();
    assert!(
        not_304.is_empty(),
        "idle answers that are not 304: {not_304:?}"
    );

    // An update at the origin reaches every client.
    publish("v2");
    until_converged(&clients, "v2").await;

    // The origin fails; the cache serves its stale copies.
    let failures_before: Vec<u64> = clients.iter().map(EdgeClient::failures).collect();
    origin.update_faults(|f| f.cdn_status = Some(503));
    let outage = Window::measure(&nginx, origin, clients.len()).await;
    origin.update_faults(|f| f.cdn_status = None);
    outage.report("origin down");
    for (client, before) in clients.iter().zip(failures_before) {
        assert_eq!(client.failures(), before, "a client saw the outage");
        assert!(client.errors().is_empty(), "{:?}", client.errors());
    }
    assert!(
        outage.edge.len() * 2 <= eight.edge.len() * 3,
        "edge requests in the outage {} vs idle {}",
        outage.edge.len(),
        eight.edge.len()
    );
    assert!(
        outage.origin > 0,
        "the origin was asked during the outage (the cache revalidated)"
    );
}
