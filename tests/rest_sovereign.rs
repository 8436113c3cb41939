//! The REST-JSON source against a real third-party control plane:
//! sovereign 0.32.12 (Atlassian's, from PyPI), rendering Listener →
//! RouteConfiguration → Cluster → ClusterLoadAssignment from Jinja
//! templates and a file of instances, polled by the real client through
//! the resource graph.
//!
//! ```text
//!  instances.yaml ─► sovereign (gunicorn, 1 worker, 127.0.0.1:PORT)
//!                      POST /v3/discovery:{listeners,routes,clusters,endpoints}
//!                        ▲ 200 / 304                 access log (JSON lines) ─► log-N.txt
//!                        │
//!  XdsClient (REST, refresh_delay 0.2 s) ─► ConfigGraph: front ─► front-routes ─► web ─► endpoints
//! ```
//!
//! sovereign is found through `XDSFED_SOVEREIGN` (the executable that
//! `tests/peers/install_sovereign.sh` prints) or `PATH`; without it the test
//! says it is skipped and passes, unless `XDSFED_REQUIRE_PEERS=1` (CI).

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{eventually, fast_transport, peer_executable, snapshot_where};
use xdsfed::client::client::XdsClient;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, GraphOptions, Snapshot};

/// How long sovereign (a Python server) may take to start listening.
const STARTUP: Duration = Duration::from_secs(30);
/// How long it may take to stop once told to.
const SHUTDOWN: Duration = Duration::from_secs(10);
/// The four types the graph polls, as sovereign's paths name them.
const TYPES: [&str; 4] = ["listeners", "routes", "clusters", "endpoints"];

/// The sovereign executable, or `None` when the test is to be skipped.
fn sovereign_executable() -> Option<PathBuf> {
    peer_executable(
        "XDSFED_SOVEREIGN",
        "sovereign",
        "tests/peers/install_sovereign.sh",
    )
}

/// sovereign's configuration and source data in a directory of the test.
struct Plane {
    dir: PathBuf,
}

impl Plane {
    /// Writes the configuration, the four templates and `instances`.
    fn write(dir: &Path, instances: &[(&str, u32)]) -> Self {
        let plane = Plane {
            dir: dir.to_owned(),
        };
        for (name, text) in TEMPLATES {
            std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
        }
        let spec = |path: &str, serialization: &str| {
            format!(
                "{{protocol: file, serialization: {serialization}, path: {}}}",
                dir.join(path).display()
            )
        };
        let templates: Vec<String> = TYPES
            .iter()
            .map(|t| {
                format!(
                    "    - type: {t}\n      spec: {}",
                    spec(&format!("{t}.yaml"), "jinja2")
                )
            })
            .collect();
        let config = format!(
            "sources:\n  - type: file\n    config:\n      spec: {}\nmatching:\n  enabled: false\ntemplates:\n  default:\n{}\n",
            spec("instances.yaml", "yaml"),
            templates.join("\n")
        );
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        plane.set_instances(instances);
        plane
    }

    /// Replaces the instances (name and endpoint port) sovereign renders.
    /// Written whole and renamed into place: sovereign's source poller stops
    /// for good on a file it cannot parse.
    fn set_instances(&self, instances: &[(&str, u32)]) {
        let text: String = instances
            .iter()
            .map(|(name, port)| format!("- name: {name}\n  port: {port}\n"))
            .collect();
        let partial = self.dir.join("instances.yaml.partial");
        std::fs::write(&partial, text).unwrap();
        std::fs::rename(partial, self.dir.join("instances.yaml")).unwrap();
    }
}

/// The templates: an API listener whose routes (RDS) send `/{name}` to an
/// EDS cluster `{name}` per instance, its endpoint at `127.0.0.1:{port}`.
const TEMPLATES: [(&str, &str); 4] = [
    (
        "listeners",
        r#"resources:
  - name: front
    api_listener:
      api_listener:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: front
        rds:
          route_config_name: front-routes
          config_source: {ads: {}, resource_api_version: V3}
"#,
    ),
    (
        "routes",
        r#"resources:
  - name: front-routes
    virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
{% for i in instances %}
          - match: {prefix: "/{{ i.name }}"}
            route: {cluster: "{{ i.name }}"}
{% endfor %}
"#,
    ),
    (
        "clusters",
        r#"resources:
{% for i in instances %}
  - name: "{{ i.name }}"
    type: EDS
    connect_timeout: 1s
    eds_cluster_config:
      service_name: "{{ i.name }}"
      eds_config: {ads: {}, resource_api_version: V3}
{% endfor %}
"#,
    ),
    (
        "endpoints",
        r#"resources:
{% for i in instances %}
  - cluster_name: "{{ i.name }}"
    endpoints:
      - lb_endpoints:
          - endpoint:
              address:
                socket_address: {address: 127.0.0.1, port_value: {{ i.port }}}
{% endfor %}
"#,
    ),
];

/// One line of sovereign's access log.
#[derive(Debug)]
struct Access {
    path: String,
    status: String,
}

/// A running sovereign; its whole process group (gunicorn's master and
/// worker) is killed on drop.
struct Sovereign {
    child: Child,
    log: PathBuf,
}

impl Sovereign {
    /// Starts `executable` on `127.0.0.1:port` with the configuration in
    /// `dir`, its output in `log`, and waits until it answers its health
    /// check.
    async fn start(executable: &Path, dir: &Path, port: u16, log: &str) -> Self {
        use std::os::unix::process::CommandExt as _;
        let log = dir.join(log);
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(executable)
            .env(
                "SOVEREIGN_CONFIG",
                format!("file://{}", dir.join("config.yaml").display()),
            )
            .env("SOVEREIGN_HOST", "127.0.0.1")
            .env("SOVEREIGN_PORT", port.to_string())
            .env("SOVEREIGN_WORKERS", "1")
            // Source data is read again every second (30 by default).
            .env("SOVEREIGN_SOURCES_REFRESH_RATE", "1")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", executable.display()));
        let mut sovereign = Sovereign { child, log };
        sovereign.wait_ready(port).await;
        sovereign
    }

    async fn wait_ready(&mut self, port: u16) {
        let deadline = tokio::time::Instant::now() + STARTUP;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("sovereign exited ({status}):\n{}", self.output());
            }
            if health_check(port).await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "sovereign did not answer within {STARTUP:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Everything sovereign printed.
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The access log so far (the JSON lines of type `access`).
    fn access_log(&self) -> Vec<Access> {
        self.output()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|entry| entry["type"] == "access")
            .map(|entry| Access {
                path: entry["uri_path"].as_str().unwrap_or_default().to_owned(),
                status: entry["status"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// Signals the whole process group and waits for the master to exit.
    fn signal(&mut self, signal: &str) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args([signal, "--", &group])
            .stderr(Stdio::null())
            .status();
    }

    /// Stops sovereign (gunicorn's quick shutdown), killing what is left
    /// after [`SHUTDOWN`].
    fn stop(mut self) {
        self.signal("-INT");
        let deadline = std::time::Instant::now() + SHUTDOWN;
        while self.child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Drop kills the group, workers included.
    }
}

impl Drop for Sovereign {
    fn drop(&mut self) {
        self.signal("-KILL");
        let _ = self.child.wait();
    }
}

/// Whether sovereign answers `GET /healthcheck` with `OK`.
async fn health_check(port: u16) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let check = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let request = "GET /healthcheck HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer.starts_with("HTTP/1.1 200") && answer.ends_with("OK"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), check).await,
        Ok(Ok(true))
    )
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A client polling sovereign at `port` over REST, every 0.2 s.
fn client(port: u16) -> XdsClient {
    let bootstrap = format!(
        r#"{{"xds_servers": [{{"server_uri": "http://127.0.0.1:{port}",
              "channel_creds": [{{"type": "insecure"}}], "api_type": "REST",
              "refresh_delay": "0.2s", "request_timeout": "5s"}}],
            "node": {{"id": "sovereign-e2e", "cluster": "e2e"}}}}"#
    );
    XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
        .transport_options(fast_transport())
        // Python answers its first requests slowly; no name is missing here.
        .does_not_exist_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The endpoint ports of cluster `name` in `s`.
fn ports(s: &Snapshot, name: &str) -> Vec<u32> {
    let Some(ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    }) = s.cluster(name).map(|c| &c.endpoints)
    else {
        return Vec::new();
    };
    assignment
        .value
        .endpoints()
        .map(|e| u32::from(e.port))
        .collect()
}

/// Waits for a snapshot whose cluster `web` has its endpoint at `port`.
async fn web_at(graph: &mut ConfigGraph, port: u32) {
    snapshot_where(graph, &format!("web's endpoint at port {port}"), |s| {
        ports(s, "web") == [port]
    })
    .await;
}

/// sovereign serves the whole chain over REST-JSON; a change of its source
/// data reaches the client; polls while nothing changes are answered `304
/// Not Modified` (which sovereign only does for a request in proto field
/// names at the version it serves); and after sovereign is stopped and
/// started again on the same port, the client polls it again and takes the
/// next change.
#[tokio::test]
async fn sovereign_serves_the_chain_updates_304s_and_restarts() {
    let Some(executable) = sovereign_executable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::write(dir.path(), &[("web", 8001)]);
    let port = free_port();
    let sovereign = Sovereign::start(&executable, dir.path(), port, "log-1.txt").await;
    let client = client(port);
    let mut graph = ConfigGraph::builder(client.clone())
        .listener("front")
        .options(GraphOptions::default().with_warming_timeout(Duration::from_secs(60)))
        .start();
    web_at(&mut graph, 8001).await;

    plane.set_instances(&[("web", 8002)]);
    web_at(&mut graph, 8002).await;

    eventually("sovereign answers 304 to idle polls of every type", || {
        let log = sovereign.access_log();
        TYPES.iter().all(|t| {
            let path = format!("/v3/discovery:{t}");
            log.iter().any(|a| a.path == path && a.status == "304")
        })
    })
    .await;
    let failures: Vec<Access> = sovereign
        .access_log()
        .into_iter()
        .filter(|a| !matches!(a.status.as_str(), "200" | "304"))
        .collect();
    assert!(failures.is_empty(), "{failures:?}");

    sovereign.stop();
    plane.set_instances(&[("web", 8003)]);
    let _sovereign = Sovereign::start(&executable, dir.path(), port, "log-2.txt").await;
    web_at(&mut graph, 8003).await;
}
