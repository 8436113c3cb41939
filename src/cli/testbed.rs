//! `xdsfed testbed --config FILE`: run a scenario's management servers,
//! backends and schedule, and serve the control API, until Ctrl-C.
//!
//! It prints one line per server, backend and the control API, then `ready`:
//!
//! ```text
//! server cloud 127.0.0.1:41001 authorities=cloud.example
//! server onprem 127.0.0.1:41002 authorities=onprem.example
//! backend greeter 127.0.0.1:41003
//! control 127.0.0.1:41004
//! ready
//! ```
//!
//! With `--bootstrap-out FILE` it first writes a client bootstrap (gRFC A47
//! JSON) for those servers, so no one has to copy ports into a file; gRPC's
//! xDS clients read it as it is (see [`client_bootstrap`]).

use std::{
    io::Write,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use xdsfed::{
    testbed::{Protocol, Server, Testbed, scenario::Scenario},
    testbed_control::ControlService,
};

use super::text::shown;
use super::{CliError, runtime};

const SCENARIO_HINT: &str =
    "docs/testbed.md describes scenario files; bootstrap-examples/testbed-federated.yaml is one";

/// Flags of `xdsfed testbed`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The scenario file (YAML): servers, authorities, resources, backends, schedule.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Where the gRPC control API (xdsfed.testbed.v1.TestbedControl) listens.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    control: SocketAddr,
    /// Once the servers listen, write a client bootstrap (gRFC A47 JSON) for
    /// them to FILE, one gRPC clients read as it is: each authority's servers
    /// in scenario order (the first is the primary, the next its fallbacks),
    /// the first server as default, listener templates for xds:///NAME and
    /// xds://AUTHORITY/NAME.
    #[arg(long, value_name = "FILE")]
    bootstrap_out: Option<PathBuf>,
}

/// The node id of the bootstrap `--bootstrap-out` writes.
const BOOTSTRAP_NODE_ID: &str = "xdsfed-testbed-client";
/// The node cluster of the bootstrap `--bootstrap-out` writes.
const BOOTSTRAP_NODE_CLUSTER: &str = "xdsfed-testbed";

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let scenario = Scenario::from_file(&args.config).map_err(|e| {
        let message = format!("{}: {e}", args.config.display());
        if e.is_bad_input() {
            CliError::bad_input(message).hint(SCENARIO_HINT)
        } else {
            CliError::runtime(message)
        }
    })?;
    runtime()?.block_on(serve(scenario, args.control, args.bootstrap_out))
}

async fn serve(
    scenario: Scenario,
    control: SocketAddr,
    bootstrap_out: Option<PathBuf>,
) -> Result<(), CliError> {
    let running = scenario.start().await.map_err(|e| {
        if e.is_bad_input() {
            CliError::bad_input(e.to_string()).hint(SCENARIO_HINT)
        } else {
            CliError::runtime(e.to_string())
        }
    })?;
    let testbed: Arc<Testbed> = running.testbed().clone();
    let listener = TcpListener::bind(control).await.map_err(|e| {
        CliError::runtime(format!("cannot listen on {control} for the control API"))
            .caused_by(&e)
            .hint("pick another --control address, or 127.0.0.1:0 for a free port")
    })?;
    let control_addr = listener
        .local_addr()
        .map_err(|e| CliError::runtime("control API address").caused_by(&e))?;
    if let Some(file) = &bootstrap_out {
        write_bootstrap(file, testbed.servers())?;
    }
    // Listening before `ready` is printed: a harness may send Ctrl-C as
    // soon as it reads it.
    let interrupted = super::ctrl_c();
    print_addresses(&testbed, control_addr)?;

    let service = ControlService::new(testbed.clone()).into_server();
    let (stop_control, control_stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            let _ = control_stopped.await;
        });
    tokio::pin!(serving, interrupted);
    let result = tokio::select! {
        result = &mut serving => result,
        () = &mut interrupted => {
            // The servers stop first: that also ends a restart's down
            // period, and with it a RestartServer call in flight.
            drop(running);
            testbed.shutdown().await;
            let _ = stop_control.send(());
            // Calls such as WaitAcked may wait for minutes; they get a
            // moment to answer, then the control API goes regardless.
            tokio::time::timeout(CONTROL_DRAIN, &mut serving)
                .await
                .unwrap_or(Ok(()))
        }
    };
    testbed.shutdown().await;
    result.map_err(|e| CliError::runtime("control API failed").caused_by(&e))
}

/// How long the control API may finish its calls after Ctrl-C.
const CONTROL_DRAIN: Duration = Duration::from_secs(1);

fn print_addresses(testbed: &Testbed, control: SocketAddr) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let write = |out: &mut std::io::StdoutLock<'_>, line: String| {
        writeln!(out, "{line}")
            .map_err(|e| CliError::runtime("cannot write to stdout").caused_by(&e))
    };
    for server in testbed.servers() {
        write(
            &mut out,
            format!(
                "server {} {} authorities={}",
                shown(server.name()),
                server.addr(),
                server
                    .authorities()
                    .iter()
                    .map(|a| shown(a))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )?;
    }
    for backend in testbed.backends() {
        write(
            &mut out,
            format!("backend {} {}", shown(backend.name()), backend.addr()),
        )?;
    }
    write(&mut out, format!("control {control}"))?;
    write(&mut out, "ready".to_owned())?;
    out.flush()
        .map_err(|e| CliError::runtime("cannot write to stdout").caused_by(&e))
}

/// Writes [`client_bootstrap`] for `servers` and the listeners they hold
/// now to `file` (a listener a schedule step adds later does not change the
/// default template).
fn write_bootstrap(file: &Path, servers: &[Arc<Server>]) -> Result<(), CliError> {
    let servers: Vec<BootstrapServer> = servers
        .iter()
        .map(|s| BootstrapServer {
            address: s.addr().to_string(),
            authorities: s.authorities().to_vec(),
            listeners: s
                .store()
                .table(LISTENER_TYPE_URL)
                .1
                .values()
                .map(|r| r.name.clone())
                .collect(),
            policy_stream: matches!(s.protocol(), Protocol::PolicyStream { .. }),
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&client_bootstrap(&servers))
        .map_err(|e| CliError::runtime("cannot encode the bootstrap").caused_by(&e))?;
    text.push('\n');
    std::fs::write(file, text).map_err(|e| {
        CliError::bad_input(format!(
            "cannot write the bootstrap to {} (--bootstrap-out)",
            file.display()
        ))
        .caused_by(&e)
        .hint("give a path in a directory that exists and is writable")
    })
}

const LISTENER_TYPE_URL: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

/// One server as the written bootstrap sees it.
#[derive(Debug)]
struct BootstrapServer {
    /// `host:port`.
    address: String,
    /// The authorities it serves, in scenario order.
    authorities: Vec<String>,
    /// The names of the Listeners it holds, sorted.
    listeners: Vec<String>,
    /// Whether it speaks the policy-distribution stream instead of ADS.
    policy_stream: bool,
}

/// The per-authority listener template: gRFC A47's default, written out so
/// that every client reads the same one.
fn authority_listener_template(authority: &str) -> String {
    format!("xdstp://{authority}/envoy.config.listener.v3.Listener/%s")
}

/// The authority of an `xdstp:` Listener name, if it is one.
fn listener_authority(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("xdstp://")?;
    let (authority, path) = rest.split_once('/')?;
    path.starts_with("envoy.config.listener.v3.Listener/")
        .then_some(authority)
}

/// `client_default_listener_resource_name_template`, chosen so that
/// `xds:///NAME` reaches a scenario listener: `%s` when the default server
/// (the first) holds an old-style listener, else the per-authority template
/// of the first `xdstp:` listener's authority (servers in scenario order,
/// listeners sorted), else `%s`.
fn default_listener_template(servers: &[BootstrapServer]) -> String {
    let old_style_on_default = servers
        .first()
        .is_some_and(|s| s.listeners.iter().any(|l| listener_authority(l).is_none()));
    if old_style_on_default {
        return "%s".to_owned();
    }
    servers
        .iter()
        .flat_map(|s| &s.listeners)
        .find_map(|l| listener_authority(l))
        .map_or_else(|| "%s".to_owned(), authority_listener_template)
}

/// A bootstrap that gRPC's xDS clients (grpc-go, C-core, Java, grpc-js) and
/// xdsfed read unchanged, for servers in scenario order:
/// - `node` has `id`, `cluster` and an empty `locality` (grpc-js refuses a
///   node without one). Every client of the file sends the same node id; the
///   testbed tells them apart by their connection (docs/testbed.md).
/// - each server has `server_uri`, insecure `channel_creds` (gRFC A27: a
///   client uses the first type it supports) and `server_features:
///   ["xds_v3"]`, which older gRPC releases need to speak xDS v3 (gRFC A27
///   "server_features") and newer ones ignore.
/// - the first server is the default for old-style names, and each
///   authority lists the servers that serve it in scenario order, so two
///   servers of one authority are its primary and its fallback (gRFC A71).
/// - gRFC A47 listener templates: each authority's
///   `client_listener_resource_name_template` makes `xds://AUTHORITY/ID`
///   reach `xdstp://AUTHORITY/envoy.config.listener.v3.Listener/ID`, and
///   [`default_listener_template`] makes `xds:///ID` reach one authority's
///   listeners (or old-style names on the default server).
///
/// No `api_type`: the client speaks delta ADS and may fall back to SotW.
/// A policy-stream server has `"protocol": "policy_stream"` (an xdsfed
/// extension other clients ignore, as they cannot speak it).
fn client_bootstrap(servers: &[BootstrapServer]) -> Value {
    let server = |entry: &BootstrapServer| {
        let mut server = json!({
            "server_uri": entry.address,
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        });
        if entry.policy_stream {
            server["protocol"] = json!("policy_stream");
        }
        server
    };
    let mut authorities = serde_json::Map::new();
    for entry in servers {
        for authority in &entry.authorities {
            let item = authorities.entry(authority.clone()).or_insert_with(|| {
                json!({
                    "client_listener_resource_name_template":
                        authority_listener_template(authority),
                    "xds_servers": [],
                })
            });
            if let Some(list) = item["xds_servers"].as_array_mut() {
                list.push(server(entry));
            }
        }
    }
    let default: Vec<Value> = servers.first().map(server).into_iter().collect();
    json!({
        "xds_servers": default,
        "node": {
            "id": BOOTSTRAP_NODE_ID,
            "cluster": BOOTSTRAP_NODE_CLUSTER,
            "locality": {},
        },
        "client_default_listener_resource_name_template": default_listener_template(servers),
        "authorities": authorities,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(list: &[(&str, &[&str])]) -> Vec<BootstrapServer> {
        list.iter()
            .map(|(address, authorities)| BootstrapServer {
                address: (*address).to_owned(),
                authorities: authorities.iter().map(|a| (*a).to_owned()).collect(),
                listeners: Vec::new(),
                policy_stream: false,
            })
            .collect()
    }

    #[test]
    fn bootstrap_lists_each_authoritys_servers_in_scenario_order() {
        let bootstrap = client_bootstrap(&servers(&[
            ("127.0.0.1:1001", &["cloud.example", "other.example"]),
            ("127.0.0.1:1002", &["cloud.example"]),
            ("127.0.0.1:1003", &["onprem.example"]),
        ]));
        let uris = |authority: &str| -> Vec<&str> {
            bootstrap["authorities"][authority]["xds_servers"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(|s| s["server_uri"].as_str())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(uris("cloud.example"), ["127.0.0.1:1001", "127.0.0.1:1002"]);
        assert_eq!(uris("other.example"), ["127.0.0.1:1001"]);
        assert_eq!(uris("onprem.example"), ["127.0.0.1:1003"]);
        assert_eq!(
            bootstrap["xds_servers"][0]["server_uri"], "127.0.0.1:1001",
            "the first server is the default"
        );
        assert_eq!(bootstrap["node"]["id"], BOOTSTRAP_NODE_ID);
    }

    #[test]
    fn bootstrap_loads_as_a_client_bootstrap() {
        let bootstrap = client_bootstrap(&servers(&[
            ("127.0.0.1:1001", &["cloud.example"]),
            ("127.0.0.1:1002", &["cloud.example"]),
        ]));
        let loaded = xdsfed::core::bootstrap::Bootstrap::from_json_str(&bootstrap.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(loaded.authorities["cloud.example"].xds_servers.len(), 2);
        assert_eq!(loaded.node.id, BOOTSTRAP_NODE_ID);
    }

    fn with_listeners(address: &str, authority: &str, listeners: &[&str]) -> BootstrapServer {
        BootstrapServer {
            address: address.to_owned(),
            authorities: vec![authority.to_owned()],
            listeners: listeners.iter().map(|l| (*l).to_owned()).collect(),
            policy_stream: false,
        }
    }

    /// `xds:///NAME` goes where a listener is: old-style names on the
    /// default server win, else the first `xdstp:` listener's authority.
    #[test]
    fn default_template_follows_the_scenario_listeners() {
        let xdstp = "xdstp://onprem.example/envoy.config.listener.v3.Listener/svc";
        let cases: [(Vec<BootstrapServer>, &str); 4] = [
            (vec![with_listeners("a:1", "cloud.example", &[])], "%s"),
            (
                vec![
                    with_listeners("a:1", "cloud.example", &["svc"]),
                    with_listeners("a:2", "onprem.example", &[xdstp]),
                ],
                "%s",
            ),
            (
                vec![
                    with_listeners("a:1", "cloud.example", &[]),
                    with_listeners("a:2", "onprem.example", &[xdstp]),
                ],
                "xdstp://onprem.example/envoy.config.listener.v3.Listener/%s",
            ),
            (
                vec![
                    with_listeners("a:1", "cloud.example", &[]),
                    with_listeners("a:2", "onprem.example", &["old", xdstp]),
                ],
                "xdstp://onprem.example/envoy.config.listener.v3.Listener/%s",
            ),
        ];
        for (servers, expected) in cases {
            let bootstrap = client_bootstrap(&servers);
            assert_eq!(
                bootstrap["client_default_listener_resource_name_template"], expected,
                "{servers:?}"
            );
        }
    }
}
