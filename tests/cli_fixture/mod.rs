//! What the `xdsfed` command tests share: a two-authority testbed started
//! in-process, a bootstrap file pointing at it, and a way to run the binary
//! and read its output line by line while it runs. Test files declare
//! `mod common; mod cli_fixture;`; the resources are `common`'s builders.
//!
//! ```text
//! cloud.example (server cloud):  Listener front ─► RouteConfiguration front ─┬─► Cluster web ─► endpoints web
//! onprem.example (server onprem):                                            └─► Cluster api ─► endpoints api
//! ```

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt;
use tempfile::TempDir;
use xdsfed::testbed::{ServerSpec, Testbed};

use crate::common::resources::{api_listener, cluster, endpoints, route_config};

/// How long a failure may take to show; tests never assert on timings.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub const CLOUD: &str = "cloud.example";
pub const ONPREM: &str = "onprem.example";

pub fn listener_name() -> String {
    format!("xdstp://{CLOUD}/envoy.config.listener.v3.Listener/front")
}

pub fn route_name() -> String {
    format!("xdstp://{CLOUD}/envoy.config.route.v3.RouteConfiguration/front")
}

pub fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

pub fn endpoints_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

/// A testbed serving the graph above, and a bootstrap file for it.
pub struct Fixture {
    /// Serves the testbed while the test thread runs the binary.
    pub runtime: tokio::runtime::Runtime,
    pub testbed: Testbed,
    pub dir: TempDir,
    pub bootstrap: PathBuf,
}

impl Fixture {
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let testbed = runtime
            .block_on(Testbed::start([
                ServerSpec::new("cloud", [CLOUD]),
                ServerSpec::new("onprem", [ONPREM]),
            ]))
            .expect("the testbed starts on 127.0.0.1:0");
        let fixture_dir = tempfile::tempdir().expect("a temporary directory");
        let cloud = testbed.server("cloud").expect("cloud").addr().to_string();
        let onprem = testbed.server("onprem").expect("onprem").addr().to_string();
        let bootstrap = write_bootstrap(
            fixture_dir.path(),
            &cloud,
            &[(CLOUD, &cloud), (ONPREM, &onprem)],
        );
        let fixture = Self {
            runtime,
            testbed,
            dir: fixture_dir,
            bootstrap,
        };
        fixture.set_graph();
        fixture
    }

    fn set_graph(&self) {
        let cloud = self.testbed.server("cloud").expect("cloud");
        let onprem = self.testbed.server("onprem").expect("onprem");
        cloud
            .set_message(
                &listener_name(),
                &api_listener(&listener_name(), &route_name()),
            )
            .expect("listener");
        cloud
            .set_message(
                &route_name(),
                &route_config(
                    &route_name(),
                    &[
                        ("/web", &cluster_name(CLOUD, "web")),
                        ("/api", &cluster_name(ONPREM, "api")),
                    ],
                ),
            )
            .expect("route");
        for (server, authority, id, port) in
            [(cloud, CLOUD, "web", 8080), (onprem, ONPREM, "api", 9090)]
        {
            server
                .set_message(
                    &cluster_name(authority, id),
                    &cluster(&cluster_name(authority, id), &endpoints_name(authority, id)),
                )
                .expect("cluster");
            server
                .set_message(
                    &endpoints_name(authority, id),
                    &endpoints(&endpoints_name(authority, id), &[("127.0.0.1", port)]),
                )
                .expect("endpoints");
        }
    }

    pub fn bootstrap(&self) -> &str {
        self.bootstrap.to_str().expect("a UTF-8 temporary path")
    }

    /// Writes another file next to the bootstrap.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).expect("writing a temporary file");
        path
    }
}

/// A JSON bootstrap: `default` for old-style names, and each authority's server.
pub fn write_bootstrap(dir: &Path, default: &str, authorities: &[(&str, &str)]) -> PathBuf {
    let server = |uri: &str| {
        format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#)
    };
    let authorities: Vec<String> = authorities
        .iter()
        .map(|(name, uri)| format!(r#""{name}": {{"xds_servers": [{}]}}"#, server(uri)))
        .collect();
    let text = format!(
        r#"{{"xds_servers": [{}], "node": {{"id": "cli-test", "cluster": "tests"}}, "authorities": {{{}}}}}"#,
        server(default),
        authorities.join(", ")
    );
    let path = dir.join("bootstrap.json");
    std::fs::write(&path, text).expect("writing the bootstrap");
    path
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// `xdsfed` with `args`, run to completion with a bound on its run time.
/// Runs `xdsfed ARGS`, which must refuse them as bad input (exit 2), and
/// returns what it printed on stderr.
pub fn refused(args: &[&str]) -> String {
    let output = xdsfed(args).output().expect("the xdsfed binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

pub fn xdsfed(args: &[&str]) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("xdsfed").expect("the xdsfed binary");
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("GRPC_XDS_BOOTSTRAP")
        .env_remove("GRPC_XDS_BOOTSTRAP_CONFIG")
        .timeout(PATIENCE);
    cmd
}

/// A running `xdsfed` whose stdout is read line by line; killed when dropped.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Running {
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = Command::cargo_bin("xdsfed")
            .expect("the xdsfed binary")
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("GRPC_XDS_BOOTSTRAP")
            .env_remove("GRPC_XDS_BOOTSTRAP_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("xdsfed starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now on for which `wanted` holds.
    pub fn line_where(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {what} within {PATIENCE:?}; output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
