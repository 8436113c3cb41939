//! The subcommands of `xdsfed`.
//!
//! Each subcommand lives in its own module with a clap `Args` struct and a
//! `run(args) -> Result<(), CliError>` function; adding one means adding a
//! module, a variant to [`Command`] and an arm to [`Command::run`]. Errors say
//! whether the input was at fault ([`CliError::BadInput`], exit code 2) or the
//! run failed ([`CliError::Runtime`], exit code 1); `main` prints them as one
//! line, never as a Debug dump.

pub(crate) mod testbed;

use std::process::ExitCode;

use clap::Subcommand;

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run federated xDS management servers from a scenario file, with the
    /// gRPC control API, until Ctrl-C.
    Testbed(testbed::Args),
}

impl Command {
    /// Runs the subcommand to completion.
    pub(crate) fn run(self) -> Result<(), CliError> {
        match self {
            Self::Testbed(args) => testbed::run(args),
        }
    }
}

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The flags or an input file are wrong; the message names the field.
    #[error("{0}")]
    BadInput(String),
    /// The run failed (a port in use, a runtime error).
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    /// 2 for bad input, 1 for a failed run.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadInput(_) => ExitCode::from(2),
            Self::Runtime(_) => ExitCode::from(1),
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second initialisation (impossible from main) would only be ignored.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// A multi-threaded tokio runtime for a subcommand.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))
}
