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
//! JSON) for those servers, so no one has to copy ports into a file.

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
    testbed::{Server, Testbed, scenario::Scenario},
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
    /// them to FILE: each authority's servers in scenario order (the first
    /// is the primary, the next its fallbacks), the first server as default.
    #[arg(long, value_name = "FILE")]
    bootstrap_out: Option<PathBuf>,
}

/// The node id of the bootstrap `--bootstrap-out` writes.
const BOOTSTRAP_NODE_ID: &str = "xdsfed-testbed-client";

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

/// Writes [`client_bootstrap`] for `servers` to `file`.
fn write_bootstrap(file: &Path, servers: &[Arc<Server>]) -> Result<(), CliError> {
    let servers: Vec<(String, Vec<String>)> = servers
        .iter()
        .map(|s| (s.addr().to_string(), s.authorities().to_vec()))
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

/// A gRFC A47 bootstrap for servers given as `(address, authorities)` in
/// scenario order: the first server is the default for old-style names, and
/// each authority lists the servers that serve it in that order, so two
/// servers of one authority are its primary and its fallback (gRFC A71).
/// No `api_type`: the client speaks delta ADS and may fall back to SotW.
fn client_bootstrap(servers: &[(String, Vec<String>)]) -> Value {
    let server = |address: &str| {
        json!({
            "server_uri": address,
            "channel_creds": [{"type": "insecure"}],
        })
    };
    let mut authorities = serde_json::Map::new();
    for (address, served) in servers {
        for authority in served {
            let entry = authorities
                .entry(authority.clone())
                .or_insert_with(|| json!({"xds_servers": []}));
            if let Some(list) = entry["xds_servers"].as_array_mut() {
                list.push(server(address));
            }
        }
    }
    let default: Vec<Value> = servers
        .first()
        .map(|(address, _)| server(address))
        .into_iter()
        .collect();
    json!({
        "xds_servers": default,
        "node": {"id": BOOTSTRAP_NODE_ID},
        "authorities": authorities,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(address, authorities)| {
                (
                    (*address).to_owned(),
                    authorities.iter().map(|a| (*a).to_owned()).collect(),
                )
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
}
