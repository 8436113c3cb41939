//! The driver task: IO and time for one [`FileSession`].
//!
//! ```text
//!   waiting for a subscription ──► watching the directory ──change──► settle (debounce) ──► read
//!                                    │ the watcher cannot be set up         ▲
//!                                    └──► polling the file's metadata ──────┘ (changed)
//! ```
//!
//! Thin: reading is bounded (`max_message_size`, a regular file only) and
//! runs on a blocking thread; everything the bytes mean is the session's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use notify::Watcher as _;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::source::handle::{Command, Commands, StatsCell};
use crate::transport::EventSink;
use xdsfed_core::bootstrap::{FileSource, ServerConfig};
use xdsfed_core::file::read_bounded;
use xdsfed_core::source::file::FileSession;

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// How the driver learns of changes.
enum Changes {
    /// The directory's watcher wakes it; held only to keep it alive (it
    /// stops watching when dropped).
    Watched(#[allow(dead_code)] notify::RecommendedWatcher),
    /// It looks at the file's metadata every interval.
    Polled {
        every: Duration,
        last: Option<(u64, Option<SystemTime>)>,
    },
}

pub(super) struct Driver {
    pub(super) session: FileSession,
    pub(super) server: ServerConfig,
    pub(super) source: FileSource,
    pub(super) limit: u64,
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) commands: Commands,
    pub(super) stats: Arc<StatsCell>,
}

impl Driver {
    pub(super) async fn run(mut self) {
        while !self.session.has_subscriptions() {
            let cmd = self.commands.recv().await;
            if !self.apply(cmd) {
                return;
            }
        }
        self.stats.lock().streams_opened += 1;
        let wake = Arc::new(Notify::new());
        let mut changes = self.watch(&wake);
        self.reload().await;
        let mut settle: Option<Instant> = None;
        let every = match &changes {
            Changes::Polled { every, .. } => Some(*every),
            Changes::Watched(_) => None,
        };
        let mut poll = every.map(|every| Instant::now() + every);
        loop {
            self.flush();
            tokio::select! {
                cmd = self.commands.recv() => {
                    if !self.apply(cmd) {
                        return;
                    }
                }
                () = wake.notified(), if settle.is_none() => {
                    settle = Some(Instant::now() + self.source.debounce);
                }
                () = sleep_until(settle) => {
                    settle = None;
                    self.reload().await;
                }
                () = sleep_until(poll) => {
                    poll = every.map(|every| Instant::now() + every);
                    if self.metadata_changed(&mut changes) {
                        self.reload().await;
                    }
                }
            }
        }
    }

    /// Watches the directory; on failure, says why and polls instead.
    fn watch(&self, wake: &Arc<Notify>) -> Changes {
        let dir = self.source.directory();
        let waker = Arc::clone(wake);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            match event {
                // Any change in the directory reloads the file: an atomic
                // rename or a symlink swap names other entries than the file.
                Ok(_) => waker.notify_one(),
                Err(e) => tracing::debug!(error = %e, "file watcher error"),
            }
        })
        .and_then(|mut w| {
            w.watch(&dir, notify::RecursiveMode::NonRecursive)?;
            Ok(w)
        });
        match watcher {
            Ok(w) => Changes::Watched(w),
            Err(e) => {
                let every = self.source.poll_interval;
                tracing::warn!(
                    directory = %dir.display(),
                    error = %e,
                    ?every,
                    "cannot watch the directory of a filesystem source; polling the file instead"
                );
                Changes::Polled { every, last: None }
            }
        }
    }

    /// Whether the file's size or modification time changed since the last
    /// poll (a file that cannot be looked at counts as changed: the read
    /// reports why).
    fn metadata_changed(&self, changes: &mut Changes) -> bool {
        let Changes::Polled { last, .. } = changes else {
            return false;
        };
        let now = std::fs::metadata(&self.source.path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        let changed = now.is_none() || now != *last;
        *last = now;
        changed
    }

    /// Reads the file on a blocking thread and hands the outcome to the
    /// session.
    async fn reload(&mut self) {
        let path: PathBuf = self.source.path.clone();
        let limit = self.limit;
        let read = tokio::task::spawn_blocking(move || read_bounded(&path, limit)).await;
        let read = match read {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the read did not finish: {e}")),
        };
        self.session
            .handle_contents(read.as_deref().map_err(Clone::clone));
    }

    /// Applies `command` and every command queued behind it; `false` on
    /// shutdown.
    fn apply(&mut self, command: Option<Command>) -> bool {
        let session = &mut self.session;
        self.commands
            .apply_queued(command, |command| match command {
                Command::Subscribe(key) => session.subscribe(key),
                Command::Unsubscribe(key) => session.unsubscribe(&key),
                // A file has no versions: what it holds is read afresh.
                Command::ForgetVersion(_) => {}
                Command::SubscribeWildcard(t) => session.subscribe_wildcard(&t),
                Command::UnsubscribeWildcard(t) => session.unsubscribe_wildcard(&t),
            })
    }

    /// Hands the session's events to the sink and publishes the counters.
    fn flush(&mut self) {
        let events: Vec<_> = std::iter::from_fn(|| self.session.poll_event()).collect();
        if !events.is_empty() {
            self.sink.deliver(&self.server, events);
        }
        let s = self.session.stats();
        let mut stats = self.stats.lock();
        stats.connected = self.session.is_healthy();
        stats.server_failure = s.failures;
        stats.resource_updates_valid = s.resource_updates_valid;
        stats.resource_updates_invalid = s.resource_updates_invalid;
        stats.foreign_names_ignored = s.foreign_names_ignored;
        stats.updates_by_type = s.by_type.clone();
        // Recorded after the events reached the cache: a wildcard watch
        // that sees its type answered has had the answer.
        stats.answered_types = self.session.answered_types();
    }
}
