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

use std::{io::Write, net::SocketAddr, path::PathBuf, sync::Arc};

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use xdsfed::{
    testbed::{Testbed, scenario::Scenario},
    testbed_control::ControlService,
};

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
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let scenario = Scenario::from_file(&args.config).map_err(|e| {
        let message = format!("{}: {e}", args.config.display());
        if e.is_bad_input() {
            CliError::bad_input(message).hint(SCENARIO_HINT)
        } else {
            CliError::runtime(message)
        }
    })?;
    runtime()?.block_on(serve(scenario, args.control))
}

async fn serve(scenario: Scenario, control: SocketAddr) -> Result<(), CliError> {
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
    print_addresses(&testbed, control_addr)?;

    let service = ControlService::new(testbed.clone()).into_server();
    let serving = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
            // If the signal handler cannot be installed, serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        });
    let result = serving
        .await
        .map_err(|e| CliError::runtime("control API failed").caused_by(&e));
    testbed.shutdown().await;
    drop(running);
    result
}

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
                server.name(),
                server.addr(),
                server.authorities().join(",")
            ),
        )?;
    }
    for backend in testbed.backends() {
        write(
            &mut out,
            format!("backend {} {}", backend.name(), backend.addr()),
        )?;
    }
    write(&mut out, format!("control {control}"))?;
    write(&mut out, "ready".to_owned())?;
    out.flush()
        .map_err(|e| CliError::runtime("cannot write to stdout").caused_by(&e))
}
