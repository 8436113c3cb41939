//! The `xdsfed` command.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// A runtime for federated xDS clients: several control planes, one consistent view.
#[derive(Debug, Parser)]
#[command(name = "xdsfed", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: cli::Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap prints usage errors (exit code 2) and --help/--version (exit code 0).
        Err(e) => e.exit(),
    };
    cli::init_logging();
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xdsfed: {e}");
            e.exit_code()
        }
    }
}
