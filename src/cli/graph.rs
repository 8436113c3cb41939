//! `xdsfed graph`: wait for a listener's first complete snapshot and print
//! its dependency graph as a tree, Graphviz dot or Mermaid, each node with
//! its authority (dot clusters and Mermaid subgraphs group them).

use std::time::Duration;

use super::dump::{subscribe_and_wait, verdict};
use super::progress::Progress;
use super::render::Model;
use super::target::{BootstrapArg, StateDirArg, Target, build_client};
use super::{CliError, emit_with, parse_duration, runtime};

/// Flags of `xdsfed graph`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    bootstrap: BootstrapArg,
    /// The listener whose graph to draw, by its full name or by the gRPC
    /// channel target that reaches it (xds:///greeter, xds://AUTHORITY/greeter).
    #[arg(long, value_name = "NAME|TARGET")]
    listener: String,
    /// tree (for terminals), dot (Graphviz: `| dot -Tsvg`) or mermaid
    /// (Markdown renderers).
    #[arg(long, value_enum, default_value_t = Format::Tree)]
    format: Format,
    /// How long to wait for the graph to be complete.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    #[command(flatten)]
    state_dir: StateDirArg,
}

/// The picture formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// An indented tree.
    Tree,
    /// Graphviz dot, a cluster per authority.
    Dot,
    /// A Mermaid flowchart, a subgraph per authority.
    Mermaid,
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let bootstrap = args.bootstrap.load()?;
    let target = Target::Listener(args.listener.clone());
    runtime()?.block_on(async move {
        let client = build_client(
            bootstrap,
            Some(args.timeout),
            args.state_dir.state_dir.as_deref(),
        )?;
        let mut progress = Progress::start(&client, "following the graph");
        let waited = subscribe_and_wait(&client, &target, args.timeout).await?;
        progress.finish();
        let Some(snapshot) = &waited.snapshot else {
            // Nothing to draw: say why, as dump would.
            verdict(&client.status(), &waited, args.timeout)?;
            return Err(CliError::runtime("no snapshot was published"));
        };
        let model = Model::of(snapshot);
        emit_with(|out| match args.format {
            Format::Tree => model.tree(out),
            Format::Dot => model.dot(out),
            Format::Mermaid => model.mermaid(out),
        })?;
        // A drawn graph with failed parts still exits non-zero, so scripts
        // notice.
        verdict(&client.status(), &waited, args.timeout)
    })
}
