//! The filesystem kind of source for the one reconnecting loop
//! ([`reconnect`](crate::source::reconnect)): IO and time for one
//! [`FileSession`].
//!
//! ```text
//!   waiting for a subscription ──► watching the directory ──change──► settle (debounce) ──► read
//!                                    │ the watcher cannot be set up         ▲
//!                                    └──► polling the file's metadata ──────┘ (changed)
//! ```
//!
//! Its attempt is the whole watch: a file has no connection to lose (a
//! read that fails is reported by the session and retried on the next
//! change), so its attempts never fail and the loop never backs off; it
//! uses the loop for waiting for interest and for commands. Nothing closes
//! when the last subscription goes, as before the loop was shared.
//!
//! Thin: reading is bounded (`max_message_size`, a regular file only) and
//! runs on a blocking thread; everything the bytes mean is the session's.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use notify::Watcher as _;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::source::handle::{Command, StatsCell};
use crate::source::reconnect::{AttemptEnd, SourceDriver};
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

/// What one read of the file gave.
type Read = Result<Vec<u8>, String>;

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

/// The watch: how changes are learnt, and the read they lead to. Whatever
/// is under way lives here, so that [`SourceDriver::next`] is cancel-safe.
pub(super) struct Io {
    changes: Changes,
    wake: Arc<Notify>,
    /// When the changes seen settle and the file is read.
    settle: Option<Instant>,
    /// When the metadata is looked at next (polling only).
    poll: Option<Instant>,
    reading: Option<JoinHandle<Read>>,
    path: PathBuf,
    limit: u64,
    debounce: Duration,
}

impl Io {
    /// Reads the file on a blocking thread (one read at a time).
    fn start_read(&mut self) {
        let path = self.path.clone();
        let limit = self.limit;
        self.reading = Some(tokio::task::spawn_blocking(move || {
            read_bounded(&path, limit).map_err(|e| e.to_string())
        }));
    }

    /// Whether the file's size or modification time changed since the last
    /// poll (a file that cannot be looked at counts as changed: the read
    /// reports why).
    fn metadata_changed(&mut self) -> bool {
        let Changes::Polled { last, .. } = &mut self.changes else {
            return false;
        };
        let now = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        let changed = now.is_none() || now != *last;
        *last = now;
        changed
    }

    /// The interval of metadata polls, if the directory is not watched.
    fn every(&self) -> Option<Duration> {
        match &self.changes {
            Changes::Polled { every, .. } => Some(*every),
            Changes::Watched(_) => None,
        }
    }

    /// The read under way, once it finishes; never without one.
    async fn read_done(reading: &mut Option<JoinHandle<Read>>) -> Read {
        match reading {
            Some(handle) => match handle.await {
                Ok(read) => read,
                Err(e) => Err(format!("the read did not finish: {e}")),
            },
            None => std::future::pending().await,
        }
    }

    /// Waits for changes and reads the file once they settle.
    async fn next_read(&mut self) -> Read {
        loop {
            let idle = self.reading.is_none();
            tokio::select! {
                read = Self::read_done(&mut self.reading) => {
                    self.reading = None;
                    return read;
                }
                () = self.wake.notified(), if self.settle.is_none() => {
                    self.settle = Some(Instant::now() + self.debounce);
                }
                () = sleep_until(self.settle), if idle => {
                    self.settle = None;
                    self.start_read();
                }
                () = sleep_until(self.poll), if idle => {
                    self.poll = self.every().map(|every| Instant::now() + every);
                    if self.metadata_changed() {
                        self.start_read();
                    }
                }
            }
        }
    }
}

pub(super) struct Driver {
    pub(super) session: FileSession,
    pub(super) server: ServerConfig,
    pub(super) source: FileSource,
    pub(super) limit: u64,
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) stats: Arc<StatsCell>,
}

impl Driver {
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
}

impl SourceDriver for Driver {
    type Io = Io;
    type Wake = Read;

    fn has_subscriptions(&self) -> bool {
        self.session.has_subscriptions()
    }

    fn apply(&mut self, command: Command) {
        let session = &mut self.session;
        match command {
            Command::Subscribe(key) => session.subscribe(key),
            Command::Unsubscribe(key) => session.unsubscribe(&key),
            // A file has no versions: what it holds is read afresh.
            Command::ForgetVersion(_) => {}
            // Nor a server to claim a persisted version from.
            Command::Resume(..) => {}
            Command::SubscribeWildcard(t) => session.subscribe_wildcard(&t),
            Command::UnsubscribeWildcard(t) => session.unsubscribe_wildcard(&t),
        }
    }

    /// Hands the session's events to the sink and publishes the counters.
    fn flush(&mut self, _io: Option<&mut Io>) {
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

    /// The session has no timers: the watch's are in its IO.
    fn poll_timeout(&self) -> Option<std::time::Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: std::time::Instant) {}

    fn idle_grace(&self) -> Option<Duration> {
        None
    }

    fn span(&self, attempt: u64) -> tracing::Span {
        tracing::info_span!("file_watch", server = %self.server.server_uri, attempt)
    }

    /// Watches the directory and reads the file a first time.
    fn open(&mut self) -> Result<Io, AttemptEnd> {
        self.stats.lock().streams_opened += 1;
        let wake = Arc::new(Notify::new());
        let changes = self.watch(&wake);
        let mut io = Io {
            changes,
            wake,
            settle: None,
            poll: None,
            reading: None,
            path: self.source.path.clone(),
            limit: self.limit,
            debounce: self.source.debounce,
        };
        io.poll = io.every().map(|every| Instant::now() + every);
        io.start_read();
        Ok(io)
    }

    fn next(io: &mut Io) -> impl Future<Output = Read> + Send + '_ {
        io.next_read()
    }

    fn handle(&mut self, _io: &mut Io, read: Read) -> Option<AttemptEnd> {
        self.session
            .handle_contents(read.as_deref().map_err(Clone::clone));
        None
    }

    fn poll_close(&mut self, _io: &mut Io) -> Option<AttemptEnd> {
        None
    }

    fn end_locally(&mut self, _io: Io, _why: &str) {}

    fn backing_off(&self, _delay: Duration, _attempt: u64, _had_response: bool) {}
}
