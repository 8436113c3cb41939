//! The `xdsfed` command.

use clap::Parser;

/// A runtime for federated xDS clients: several control planes, one consistent view.
#[derive(Debug, Parser)]
#[command(name = "xdsfed", version, about, long_about = None)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
