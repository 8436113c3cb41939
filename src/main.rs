//! The `xdsfed` command.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// A runtime for federated xDS clients: several control planes, one
/// consistent view.
///
/// Start with `xdsfed demo`. Exit codes: 0 success, 1 a failed run (a
/// server that never answered, a rejected resource), 2 bad input (flags, a
/// bootstrap or scenario file; the message names the field).
#[derive(Debug, Parser)]
#[command(name = "xdsfed", version, about, long_about)]
struct Cli {
    /// More logs on stderr: -v info, -vv debug, -vvv trace (RUST_LOG, when
    /// set, takes precedence).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: cli::Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap prints usage errors (exit code 2) and --help/--version (exit code 0).
        Err(e) => e.exit(),
    };
    cli::init_logging(cli.verbose, cli.command.default_log_level());
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xdsfed: {e}");
            e.exit_code()
        }
    }
}
