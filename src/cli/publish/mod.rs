//! `xdsfed publish`: a client of one or more xDS servers that writes what
//! it receives as a directory a static file host serves to HTTP CDN
//! sources (docs/federation.md, "Publishing a CDN directory").
//!
//! ```text
//! XdsClient ─► follow (one task per name, collection or listener graph)
//!                │ Change::{Put, Gone, Problem}
//!                ▼
//!              writer ─► xdsfed_core::publish (layout sans-IO, files by
//!                        the state directory's helpers) ─► {dir}/AUTH/TYPE/ID…
//! ```
//!
//! - `plan`: what each argument follows, what a graph needs (sans-IO).
//! - `follow`: the watches, as tasks sending changes.
//! - `writer`: the files, and one line per file written or removed.

mod follow;
mod plan;
mod writer;

use std::path::{Path, PathBuf};

use tokio::sync::mpsc;
use xdsfed::client::publish::PublishDir;
use xdsfed::client::state_dir::StateDirError;

use super::target::{BootstrapArg, build_client};
use super::text::shown;
use super::{CliError, emit, runtime};
use follow::Followers;
use plan::Followed;

/// How many changes wait for the writer before followers wait for it.
const CHANGES_QUEUE: usize = 1024;

/// Flags of `xdsfed publish`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    bootstrap: BootstrapArg,
    /// The directory to publish into: created 0755 if missing; it must be
    /// yours and writable by nobody else. Its files are meant to be served
    /// to anyone (0644).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// One resource of TYPE (listener, route, cluster, endpoint, policy or
    /// a type URL) by its full NAME, old-style names included; a listener
    /// given this way is published without its graph. Repeatable.
    #[arg(long, num_args = 2, value_names = ["TYPE", "NAME"], action = clap::ArgAction::Append)]
    resource: Vec<String>,
    /// What to follow: xdstp:// names (a listener with every route,
    /// cluster and endpoint assignment its graph needs; a list collection,
    /// …Collection, with its file and its members'; a glob collection,
    /// ending in /*, with its members'; any other resource alone), or an
    /// xds: target (a listener, resolved through the bootstrap).
    #[arg(value_name = "NAME")]
    names: Vec<String>,
}

/// What the arguments follow, checked before anything starts.
fn followed_of(args: &Args) -> Result<Vec<Followed>, CliError> {
    let mut followed = args
        .names
        .iter()
        .map(|name| Followed::of_name(name))
        .collect::<Result<Vec<_>, _>>()?;
    for pair in args.resource.chunks(2) {
        followed.push(Followed::of_resource_flag(pair)?);
    }
    if followed.is_empty() {
        return Err(CliError::bad_input("nothing to publish: give a NAME or --resource TYPE NAME")
            .hint("e.g. xdsfed publish --bootstrap b.yaml --dir www xdstp://cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all"));
    }
    Ok(followed)
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let followed = followed_of(&args)?;
    let bootstrap = args.bootstrap.load()?;
    let dir = PublishDir::open(&args.dir).map_err(|e| dir_error(&args.dir, &e))?;
    let cleaned = dir.clean_temporaries().map_err(|e| {
        CliError::runtime(format!(
            "--dir {}: cannot clean its temporary files",
            shown(&args.dir.display().to_string())
        ))
        .caused_by(&e)
    })?;
    runtime()?.block_on(async move {
        // Before the first line is printed, so a Ctrl-C after it is heard.
        let interrupted = super::ctrl_c();
        let client = build_client(bootstrap, None, None)?;
        let (changes, received) = mpsc::channel(CHANGES_QUEUE);
        let mut followers = Followers::new();
        for one in &followed {
            follow::start(&client, one, &changes, &mut followers)?;
        }
        drop(changes);
        let mut first = format!("publishing into {}", shown(&dir.root().display().to_string()));
        if !cleaned.is_empty() {
            first.push_str(&format!(
                " (removed {} temporary files of an interrupted run)",
                cleaned.len()
            ));
        }
        emit(&first)?;
        tokio::select! {
            written = writer::run(dir, received) => written.and(Err(CliError::runtime("the xDS client stopped"))),
            _ = followers.join_next() => Err(CliError::runtime("the xDS client stopped")),
            () = interrupted => Ok(()),
        }
    })
}

/// An output directory that cannot be used: bad input naming `--dir`.
fn dir_error(dir: &Path, e: &StateDirError) -> CliError {
    let why = match e {
        StateDirError::WritableByOthers { mode, .. } => {
            format!("writable by its group or others (mode {mode:04o})")
        }
        StateDirError::ForeignOwner { owner, user, .. } => {
            format!("owned by uid {owner}, not by this process's user (uid {user})")
        }
        StateDirError::NotADirectory { kind, .. } => format!("not a directory ({kind})"),
        StateDirError::Create { why, .. } => format!("cannot create it: {why}"),
        StateDirError::Unusable { why, .. } => why.clone(),
        other => other.to_string(),
    };
    CliError::bad_input(format!("--dir {}: {why}", shown(&dir.display().to_string())))
        .hint("give a directory of your own that only you may write (created 0755 if missing): a web server serves its files to anyone")
}
