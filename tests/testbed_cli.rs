//! `xdsfed testbed --config FILE`: addresses on stdout, the bootstrap of
//! `--bootstrap-out`, exit codes, Ctrl-C.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use assert_cmd::cargo::CommandCargoExt;
use cli_fixture::{PATIENCE, refused};

const WAIT: Duration = Duration::from_secs(20);

fn example(name: &str) -> String {
    format!("{}/bootstrap-examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Kills the child if the test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn testbed_prints_servers_backends_and_control_then_stops_on_ctrl_c() {
    let child = Command::cargo_bin("xdsfed")
        .unwrap()
        .args(["testbed", "--config", &example("testbed-federated.yaml")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        let line = rx.recv_timeout(WAIT).expect("the testbed prints `ready`");
        if line == "ready" {
            break;
        }
        lines.push(line);
    }
    let servers: Vec<&String> = lines.iter().filter(|l| l.starts_with("server ")).collect();
    assert_eq!(servers.len(), 2, "{lines:?}");
    assert!(
        servers[0].starts_with("server cloud 127.0.0.1:")
            && servers[0].ends_with("authorities=cloud.example")
    );
    assert!(
        servers[1].starts_with("server onprem 127.0.0.1:")
            && servers[1].ends_with("authorities=onprem.example")
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("backend ")).count(),
        2
    );
    let control = lines
        .iter()
        .find_map(|l| l.strip_prefix("control "))
        .expect("the control address is printed");
    let addr: std::net::SocketAddr = control.parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    // The printed server address accepts connections.
    let server_addr = servers[0].split(' ').nth(2).unwrap();
    std::net::TcpStream::connect(server_addr).expect("the cloud server listens");

    let status = Command::new("kill")
        .args(["-INT", &running.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = running.0.wait().unwrap();
    assert_eq!(exit.code(), Some(0), "Ctrl-C is a clean stop");
}

/// `--bootstrap-out` writes, before `ready`, a bootstrap whose authorities
/// list the servers that serve them in scenario order (primary, then
/// fallback), with the first server as the default.
#[test]
fn testbed_writes_a_bootstrap_for_its_servers_before_ready() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        "servers:\n  \
         - {name: primary, authorities: [cloud.example, other.example]}\n  \
         - {name: secondary, authorities: [cloud.example]}\n",
    )
    .unwrap();
    let bootstrap = dir.path().join("bootstrap.json");
    let child = Command::cargo_bin("xdsfed")
        .unwrap()
        .arg("testbed")
        .arg("--config")
        .arg(&scenario)
        .arg("--bootstrap-out")
        .arg(&bootstrap)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let mut addresses = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        if let Some(server) = line.strip_prefix("server ") {
            addresses.push(server.split(' ').nth(1).unwrap().to_owned());
        }
    }
    assert_eq!(addresses.len(), 2, "{addresses:?}");

    let loaded = xdsfed::core::bootstrap::Bootstrap::from_file(&bootstrap).unwrap();
    let uris = |authority: &str| -> Vec<String> {
        loaded.authorities[authority]
            .xds_servers
            .iter()
            .map(|s| s.server_uri.clone())
            .collect()
    };
    assert_eq!(
        uris("cloud.example"),
        addresses,
        "primary first, then the fallback"
    );
    assert_eq!(uris("other.example"), addresses[..1]);
    assert_eq!(loaded.xds_servers[0].server_uri, addresses[0]);
    assert_eq!(loaded.authorities.len(), 2);
}

#[test]
fn testbed_with_unwritable_bootstrap_out_exits_2_naming_the_file() {
    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .args([
            "testbed",
            "--config",
            &example("testbed-federated.yaml"),
            "--bootstrap-out",
            "/nonexistent/dir/bootstrap.json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/nonexistent/dir/bootstrap.json"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("ready"));
}

#[test]
fn testbed_with_bad_scenario_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "servers:\n  - name: a\n    authorities: []\n").unwrap();
    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .args(["testbed", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("servers[0].authorities"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn testbed_with_missing_file_or_bad_flag_exits_2() {
    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .args(["testbed", "--config", "/nonexistent/testbed.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/testbed.yaml"));

    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .args([
            "testbed",
            "--config",
            "x.yaml",
            "--control",
            "not-an-address",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn testbed_exits_1_when_control_port_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .args([
            "testbed",
            "--config",
            &example("testbed-federated.yaml"),
            "--control",
            &addr,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&addr), "{stderr}");
}

/// Writes `yaml` as `name` in `dir`.
fn scenario_file(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, yaml).unwrap();
    file
}

/// Scenarios that used to panic a worker, abort on allocation or parse for
/// seconds are refused before anything starts: exit 2, the field named.
#[test]
fn testbed_refuses_hostile_scenarios_with_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = "servers: [{name: a, authorities: [a.example]}]\n";
    let cases = [
        (
            format!(
                "{server}schedule:\n  - at: 10000000000000000000s\n    faults: {{server: a}}\n"
            ),
            "schedule[0].at",
        ),
        (
            format!("{server}generators:\n  - server: a\n    clusters: {{count: 4294967295}}\n"),
            "generators[0].clusters.count",
        ),
        (
            format!(
                "{server}generators:\n  - server: a\n    clusters: {{count: 1, endpoints_per_cluster: 4294967295}}\n"
            ),
            "generators[0].clusters.endpoints_per_cluster",
        ),
        (
            format!("servers: {}", "[".repeat(100_000)),
            "nested deeper than",
        ),
        (
            "servers: [{name: a, authorities: [\"a b/c\"]}]\n".to_owned(),
            "servers[0].authorities[0]",
        ),
        (
            format!(
                "{server}schedule:\n  - at: 1s\n    faults: {{server: a, redirects: {{x: not-xdstp}}}}\n"
            ),
            "schedule[0].faults.redirects",
        ),
    ];
    for (i, (yaml, field)) in cases.iter().enumerate() {
        let file = scenario_file(dir.path(), &format!("case{i}.yaml"), yaml);
        let stderr = refused(&["testbed", "--config", &file.display().to_string()]);
        assert!(stderr.contains(field), "case {i}: {stderr}");
        assert!(!stderr.contains("panicked"), "case {i}: {stderr}");
    }
}

/// A resource whose own name differs from its scenario name: exit 2,
/// naming the field and both names.
#[test]
fn testbed_refuses_a_resource_named_differently_inside() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        dir.path(),
        "mismatch.yaml",
        "servers: [{name: a, authorities: [a.example]}]\n\
         resources:\n  - name: svc\n    server: a\n    resource:\n      \
         \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n      name: other\n",
    );
    let stderr = refused(&["testbed", "--config", &file.display().to_string()]);
    assert!(
        stderr.contains(
            "resources[0].name: \"svc\" is not the name inside the resource: resource.name is \"other\""
        ),
        "{stderr}"
    );
}

/// A FIFO would block the read forever: it is refused, naming the file.
#[test]
fn testbed_refuses_a_fifo_as_scenario_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("scenario.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.display().to_string();
    let stderr = refused(&["testbed", "--config", &fifo]);
    assert!(
        stderr.contains(&fifo) && stderr.contains("regular file"),
        "{stderr}"
    );
}

/// Ctrl-C while a restarted server is down stops the testbed at once,
/// not when the down period ends.
#[test]
fn testbed_stops_on_ctrl_c_while_a_restarted_server_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        dir.path(),
        "restart.yaml",
        "servers: [{name: a, authorities: [a.example]}]\n\
         schedule:\n  - at: 1ms\n    restart: {server: a, down_for: 10m}\n",
    );
    let child = Command::cargo_bin("xdsfed")
        .unwrap()
        .arg("testbed")
        .arg("--config")
        .arg(&file)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let mut addr = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        if let Some(server) = line.strip_prefix("server a ") {
            addr = server.split(' ').next().map(str::to_owned);
        }
    }
    let addr = addr.expect("the server's address is printed before `ready`");
    // The restart step closes the port for the down period.
    wait_until_down(&addr);

    interrupt_during_the_down_period(&mut running);
}

/// Waits until nothing listens on `addr` any more: a restart's down period.
fn wait_until_down(addr: &str) {
    let deadline = Instant::now() + PATIENCE;
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "the server never went down");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends Ctrl-C (SIGINT) to the testbed during a long down period and
/// requires a clean stop well before the period would end.
fn interrupt_during_the_down_period(running: &mut Running) {
    let status = Command::new("kill")
        .args(["-INT", &running.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + PATIENCE;
    let exit = loop {
        if let Some(exit) = running.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the testbed still runs {PATIENCE:?} after Ctrl-C; down_for is 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0), "Ctrl-C is a clean stop");
}

/// The same for a restart asked through the control API: the call in
/// flight ends, and so does the testbed.
#[test]
fn testbed_stops_on_ctrl_c_during_a_control_api_restart() {
    use xdsfed::proto::testbed::v1::{self as pb, testbed_control_client::TestbedControlClient};

    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(
        dir.path(),
        "plain.yaml",
        "servers: [{name: a, authorities: [a.example]}]\n",
    );
    let child = Command::cargo_bin("xdsfed")
        .unwrap()
        .arg("testbed")
        .arg("--config")
        .arg(&file)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    let (mut server, mut control) = (None, None);
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line == "ready" {
            break;
        }
        if let Some(rest) = line.strip_prefix("server a ") {
            server = rest.split(' ').next().map(str::to_owned);
        }
        if let Some(rest) = line.strip_prefix("control ") {
            control = Some(rest.to_owned());
        }
    }
    let (server, control) = (server.unwrap(), control.unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let restart = runtime.spawn(async move {
        let mut client = TestbedControlClient::connect(format!("http://{control}"))
            .await
            .unwrap();
        client
            .restart_server(pb::RestartServerRequest {
                server: "a".into(),
                keep_state: true,
                down_for: Some(prost_types::Duration {
                    seconds: 600,
                    nanos: 0,
                }),
            })
            .await
    });
    wait_until_down(&server);

    interrupt_during_the_down_period(&mut running);
    let answer = runtime
        .block_on(async { tokio::time::timeout(PATIENCE, restart).await })
        .expect("the restart call ends with the testbed")
        .unwrap();
    assert!(answer.is_err(), "the restart did not complete: {answer:?}");
}

/// Runs `xdsfed testbed --bootstrap-out` on `scenario` until `ready` and
/// returns the written bootstrap as JSON.
fn written_bootstrap(scenario: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bootstrap.json");
    let _running = testbed_writing_bootstrap(scenario, &file);
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
}

/// `xdsfed testbed` serving `scenario`, once ready, having written its
/// client bootstrap to `file`.
fn testbed_writing_bootstrap(scenario: &str, file: &Path) -> Running {
    let child = Command::cargo_bin("xdsfed")
        .unwrap()
        .args(["testbed", "--config", scenario, "--bootstrap-out"])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let stdout = running.0.stdout.take().unwrap();
    for line in BufReader::new(stdout).lines() {
        if line.unwrap() == "ready" {
            break;
        }
    }
    running
}

/// The names of every Listener `scenario` serves, on any server.
fn scenario_listeners(scenario: &str) -> Vec<String> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let scenario = xdsfed::testbed::scenario::Scenario::from_file(Path::new(scenario)).unwrap();
        let running = scenario.start().await.unwrap();
        let mut names = Vec::new();
        for server in running.testbed().servers() {
            let (_, table) = server
                .store()
                .table("type.googleapis.com/envoy.config.listener.v3.Listener");
            names.extend(table.values().map(|r| r.name.clone()));
        }
        names
    })
}

/// gRFC A47 "Bootstrap Changes" and A27 "Bootstrap File", read the way
/// gRPC's clients read them: `xds_servers` entries with a string
/// `server_uri`, a `channel_creds` list of objects with a string `type`, and
/// string `server_features`; `node` with string `id` and `cluster` and an
/// object `locality` (grpc-js refuses a node without one); string listener
/// templates, each authority's starting with `xdstp://AUTHORITY/`.
fn assert_grpc_shape(bootstrap: &serde_json::Value) {
    let servers = |list: &serde_json::Value| {
        let list = list.as_array().expect("xds_servers is a list");
        assert!(!list.is_empty());
        for server in list {
            assert!(server["server_uri"].is_string(), "{server}");
            let creds = server["channel_creds"].as_array().expect("channel_creds");
            assert!(creds.iter().all(|c| c["type"].is_string()), "{server}");
            let features = server["server_features"].as_array().expect("features");
            assert!(
                features.iter().all(serde_json::Value::is_string),
                "{server}"
            );
        }
    };
    servers(&bootstrap["xds_servers"]);
    let node = &bootstrap["node"];
    assert!(
        node["id"].is_string() && node["cluster"].is_string(),
        "{node}"
    );
    assert!(node["locality"].is_object(), "node.locality: {node}");
    assert!(bootstrap["client_default_listener_resource_name_template"].is_string());
    let authorities = bootstrap["authorities"].as_object().expect("authorities");
    for (name, authority) in authorities {
        let template = authority["client_listener_resource_name_template"]
            .as_str()
            .expect("a per-authority template");
        assert!(
            template.starts_with(&format!("xdstp://{name}/")),
            "gRFC A47: {template}"
        );
        servers(&authority["xds_servers"]);
    }
}

/// The bootstrap `--bootstrap-out` writes for the federated example is one
/// gRPC's clients accept (see [`assert_grpc_shape`]), and its gRFC A47
/// templates turn `xds://AUTHORITY/ID` into every scenario listener
/// `xdstp://AUTHORITY/envoy.config.listener.v3.Listener/ID`, and
/// `xds:///greeter` into the example's listener, as gRPC's resolver does.
#[test]
fn written_bootstrap_is_one_grpc_reads_and_resolves_every_listener() {
    let scenario = example("testbed-federated.yaml");
    let bootstrap = written_bootstrap(&scenario);
    assert_grpc_shape(&bootstrap);

    let loaded = xdsfed::core::bootstrap::Bootstrap::from_json_str(&bootstrap.to_string()).unwrap();
    let registry = xdsfed::core::authority::AuthorityRegistry::new(&loaded);
    let resolve = |target: &str| {
        registry
            .listener_resource_name(target)
            .unwrap_or_else(|e| panic!("{target}: {e}"))
            .to_string()
    };
    let listeners = scenario_listeners(&scenario);
    assert!(!listeners.is_empty());
    for listener in &listeners {
        let (authority, id) = listener
            .strip_prefix("xdstp://")
            .and_then(|rest| rest.split_once("/envoy.config.listener.v3.Listener/"))
            .expect("the example's listeners are xdstp names");
        assert_eq!(&resolve(&format!("xds://{authority}/{id}")), listener);
    }
    assert_eq!(
        resolve("xds:///greeter"),
        "xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter"
    );
}

/// `--listener` takes the gRPC channel target as well as the full name
/// (gRFC A47): `xds:///greeter` against the bootstrap the testbed writes
/// follows the example's whole graph; a target whose authority the
/// bootstrap does not define is bad input (exit 2) naming the flag.
#[test]
fn dump_and_graph_follow_an_xds_target_through_the_written_bootstrap() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bootstrap.json");
    let _running = testbed_writing_bootstrap(&example("testbed-federated.yaml"), &file);
    let bootstrap = file.to_str().unwrap();
    let run = |command: &str, target: &str| {
        cli_fixture::xdsfed(&[
            command,
            "--bootstrap",
            bootstrap,
            "--listener",
            target,
            "--timeout",
            "10s",
        ])
        .output()
        .unwrap()
    };

    let dump = run("dump", "xds:///greeter");
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(
        dump.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    for (kind, name) in [
        (
            "Listener",
            "xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter",
        ),
        (
            "Cluster",
            "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/greeter-onprem",
        ),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ACKED") && l.contains(kind) && l.contains(name)),
            "{kind} {name}:\n{text}"
        );
    }

    let graph = run("graph", "xds://onprem.example/nothing");
    let graph = run_graph_check(graph);
    assert!(graph.contains("nothing"), "{graph}");

    let unknown = run("dump", "xds://nowhere.example/greeter");
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("--listener xds://nowhere.example/greeter"),
        "{stderr}"
    );
}

/// A graph of a target the server does not have exits 1 and says the
/// listener is not found on the server (never "deleted": it never had it).
fn run_graph_check(output: std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(!text.contains("deleted"), "{text}");
    assert!(text.contains("not found on server"), "{text}");
    text
}
