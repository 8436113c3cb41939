//! The writer of `publish`: each [`Change`] becomes a file written or
//! removed (by `xdsfed_core::publish`, off the async threads) and a line
//! on stdout, names and messages escaped for the terminal.
//!
//! ```text
//! wrote   a.example/envoy.config.cluster.v3.Cluster/pay
//! removed a.example/envoy.config.cluster.v3.Cluster/pay
//! skipped xdstp://a.example/envoy.config.cluster.v3.Cluster/x?k=v: context parameters are …
//! failed  a.example/envoy.config.cluster.v3.Cluster/pay: No space left on device (os error 28)
//! error   xdstp://a.example/envoy.config.cluster.v3.Cluster/pay: …
//! ```
//!
//! A file that already holds the bytes is left alone and prints nothing.
//! A failed write is reported and not retried: the next copy of the
//! resource is written afresh, and its previous file (if any) stays whole.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc;
use xdsfed::client::publish::{PublishDir, Written};
use xdsfed::core::publish::{file_contents, published_path};

use super::super::text::{message, shown};
use super::super::{CliError, emit};
use super::follow::Change;

/// Writes every change `changes` brings into `dir`, until every follower
/// is gone.
pub(super) async fn run(
    dir: PublishDir,
    mut changes: mpsc::Receiver<Change>,
) -> Result<(), CliError> {
    let dir = Arc::new(dir);
    // A name no file can hold is reported once, not at every update.
    let mut skipped: HashSet<Arc<str>> = HashSet::new();
    while let Some(change) = changes.recv().await {
        let line = match change {
            Change::Put {
                type_url,
                name,
                copy,
            } => match published_path(&type_url, &name) {
                Ok(path) => {
                    let bytes = file_contents(&type_url, copy.raw());
                    let shown_path = shown(&path.to_string());
                    let dir = Arc::clone(&dir);
                    match blocking(move || dir.write(&path, &bytes)).await {
                        Ok(Written::Replaced) => Some(format!("wrote   {shown_path}")),
                        Ok(Written::Unchanged) => None,
                        Err(e) => Some(format!("failed  {shown_path}: {}", message(&e))),
                    }
                }
                Err(e) => skipped
                    .insert(name)
                    .then(|| format!("skipped {}", message(&e.to_string()))),
            },
            Change::Gone { type_url, name } => match published_path(&type_url, &name) {
                Ok(path) => {
                    let shown_path = shown(&path.to_string());
                    let dir = Arc::clone(&dir);
                    match blocking(move || dir.remove(&path)).await {
                        Ok(true) => Some(format!("removed {shown_path}")),
                        Ok(false) => None,
                        Err(e) => Some(format!("failed  {shown_path}: {}", message(&e))),
                    }
                }
                Err(_) => None,
            },
            Change::Problem { name, why } => {
                Some(format!("error   {}: {}", shown(&name), message(&why)))
            }
        };
        if let Some(line) = line {
            emit(&line)?;
        }
    }
    Ok(())
}

/// Runs file IO (writes, fsyncs) on tokio's blocking threads; the error
/// says why, as text.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the write did not finish: {e}")),
    }
}
