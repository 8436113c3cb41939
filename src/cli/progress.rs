//! The progress line shown on a terminal while a command waits for
//! resources: how many are requested, received and warm.
//!
//! It is drawn on stderr, and only when stderr is a terminal, so pipes and
//! log files never see control characters; stdout is never touched.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::client::XdsClient;
use xdsfed::core::status::ClientStatus;

/// How often the counts are refreshed.
const REFRESH: Duration = Duration::from_millis(100);

/// The counts the progress line shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Resources subscribed to.
    pub(crate) requested: usize,
    /// Resources with a copy received and accepted.
    pub(crate) received: usize,
    /// Resources whose state is settled: received, or known not to exist,
    /// or failed.
    pub(crate) warm: usize,
}

impl Counts {
    /// The counts of a status dump.
    pub(crate) fn of(status: &ClientStatus) -> Self {
        let mut counts = Counts::default();
        for r in &status.resources {
            counts.requested += 1;
            if r.cached {
                counts.received += 1;
            }
            if r.status != ResourceStatus::Requested {
                counts.warm += 1;
            }
        }
        counts
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "requested {} · received {} · warm {}",
            self.requested, self.received, self.warm
        )
    }
}

/// A spinner with live counts; nothing at all when stderr is not a
/// terminal. Cleared when dropped.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    task: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `what` and the client's counts. Must be called inside
    /// the tokio runtime.
    pub(crate) fn start(client: &XdsClient, what: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self {
                bar: None,
                task: None,
            };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        // The template is a constant; should it ever be refused, the default
        // spinner style is just as good.
        if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_prefix(what.to_owned());
        bar.enable_steady_tick(REFRESH);
        let shown = bar.clone();
        let client = client.clone();
        let task = tokio::spawn(async move {
            loop {
                shown.set_message(Counts::of(&client.status()).to_string());
                tokio::time::sleep(REFRESH).await;
            }
        });
        Self {
            bar: Some(bar),
            task: Some(task),
        }
    }

    /// Stops and clears the line.
    pub(crate) fn finish(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
