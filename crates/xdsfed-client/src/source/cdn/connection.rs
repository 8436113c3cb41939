//! [`CdnConnection`]: the handle on one CDN source's driver task, as the
//! client's executor sees it (a [`SourceConnection`](crate::source::SourceConnection)), and its kind for the
//! one reconnecting loop ([`reconnect`](crate::source::reconnect)): it
//! issues the session's fetches, feeds their answers back, and sleeps
//! until the next is due. It never looks at a status code or an ETag.
//!
//! Its attempt is a period of fetching that never fails: each fetch backs
//! off in the session (per resource, from the same backoff settings), so
//! there is no stream for the loop to back off from, and nothing closes
//! when the last subscription goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinError, JoinSet};

use super::http::{BodyLimits, HttpClient};
use crate::source::SourceHandle;
use crate::source::driving::now;
use crate::source::handle::{Command, StatsCell};
use crate::source::reconnect::{self, AttemptEnd, SourceDriver};
use crate::transport::{EventSink, TransportOptions};
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::CoreEvent;
use xdsfed_core::source::cdn::{CdnConfig, CdnSession, Fetch, Fetched};
use xdsfed_core::types::TypeRegistry;

/// Marks a [`SourceHandle`] as an HTTP CDN source's.
#[derive(Debug)]
pub(crate) enum CdnKind {}

/// A handle on an HTTP CDN source. Nothing is fetched until the first
/// subscription; the driver task ends on [`SourceHandle::shutdown`] or
/// when every handle is dropped, and its fetches in flight with it. A
/// file host cannot list what it holds: wildcard subscriptions are
/// ignored (logged).
pub(crate) type CdnConnection = SourceHandle<CdnKind>;

impl SourceHandle<CdnKind> {
    /// Spawns the driver for `server` on the current tokio runtime (panics
    /// outside one, like `tokio::spawn`). TLS credentials that cannot be
    /// read fail every fetch, each failure naming the file.
    pub(crate) fn spawn(
        server: ServerConfig,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let mut cfg = CdnConfig::new(server.server_uri.clone());
        if let ServerProtocol::HttpCdn(timing) = server.protocol {
            cfg.timing = timing;
        }
        cfg.backoff = opts.backoff;
        cfg.seed = crate::random::random_u64();
        let client = HttpClient::new(
            &server,
            cfg.timing.request_timeout,
            BodyLimits {
                binary: opts.max_message_size,
                text: opts.text_message_limit(),
            },
        );
        // Whole files: the nearest of the two ADS variants.
        let (handle, commands, stats) = Self::new(ApiVariant::Sotw);
        let driver = Driver {
            session: CdnSession::new(cfg, types),
            client: client.map_err(Arc::from),
            server,
            sink,
            stats,
        };
        tokio::spawn(reconnect::run(driver, commands, opts.backoff));
        handle
    }
}

/// The CDN kind of source for the one reconnecting loop.
struct Driver {
    session: CdnSession,
    /// The client, or why it could not be set up.
    client: Result<HttpClient, Arc<str>>,
    server: ServerConfig,
    sink: Arc<dyn EventSink>,
    stats: Arc<StatsCell>,
}

/// The fetches in flight; dropped (aborted) with the attempt.
type Fetches = JoinSet<(Fetch, Fetched)>;

impl SourceDriver for Driver {
    type Io = Fetches;
    type Wake = Result<(Fetch, Fetched), JoinError>;

    fn has_subscriptions(&self) -> bool {
        self.session.has_subscriptions()
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Subscribe(key) => self.session.subscribe(key),
            Command::Unsubscribe(key) => self.session.unsubscribe(&key),
            Command::ForgetVersion(key) => self.session.forget_version(&key),
            // An HTTP fetch has no initial versions to claim.
            Command::Resume(..) => {}
            Command::SubscribeWildcard(type_url) => {
                // A file host cannot list what it holds.
                tracing::warn!(
                    %type_url,
                    "an HTTP CDN source cannot serve a wildcard subscription; ignored"
                );
            }
            Command::UnsubscribeWildcard(_) => {}
        }
    }

    fn flush(&mut self, io: Option<&mut Fetches>) {
        if let Some(fetches) = io {
            self.issue(now(), fetches);
        }
        self.deliver();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Due fetches start on the next flush.
    fn handle_timeout(&mut self, _now: Instant) {}

    fn idle_grace(&self) -> Option<Duration> {
        None
    }

    fn span(&self, attempt: u64) -> tracing::Span {
        tracing::info_span!("cdn_fetching", server = %self.server.server_uri, attempt)
    }

    fn open(&mut self) -> Result<Fetches, AttemptEnd> {
        Ok(JoinSet::new())
    }

    async fn next(fetches: &mut Fetches) -> Self::Wake {
        match fetches.join_next().await {
            Some(done) => done,
            // Nothing in flight: the session's timer wakes the loop.
            None => std::future::pending().await,
        }
    }

    fn handle(&mut self, _fetches: &mut Fetches, done: Self::Wake) -> Option<AttemptEnd> {
        match done {
            Ok((fetch, fetched)) => {
                self.session
                    .handle_fetched(fetch.id, &fetch.key, fetched, now());
            }
            // Fetch tasks do not panic; a cancelled one is the runtime
            // shutting down.
            Err(e) => tracing::warn!(error = %e, "CDN fetch task ended abnormally"),
        }
        None
    }

    fn poll_close(&mut self, _fetches: &mut Fetches) -> Option<AttemptEnd> {
        None
    }

    fn end_locally(&mut self, _fetches: Fetches, _why: &str) {}

    fn backing_off(&self, delay: Duration, _attempt: u64, _had_response: bool) {
        tracing::debug!(server = %self.server.server_uri, ?delay, "CDN fetching paused");
    }
}

impl Driver {
    /// Starts every fetch the session asks for.
    fn issue(&mut self, now: Instant, fetches: &mut Fetches) {
        while let Some(fetch) = self.session.poll_fetch(now) {
            let client = self.client.clone();
            fetches.spawn(async move {
                let fetched = match client {
                    Ok(client) => client.get(&fetch).await,
                    Err(why) => Fetched::Failed(why),
                };
                (fetch, fetched)
            });
        }
    }

    /// Hands the session's events to the sink and refreshes the counters.
    fn deliver(&mut self) {
        let mut events = Vec::new();
        while let Some(event) = self.session.poll_event() {
            events.push(event);
        }
        let answered: Vec<String> = events
            .iter()
            .filter_map(|event| match event {
                CoreEvent::Upsert { key, .. } | CoreEvent::Invalid { key, .. } => {
                    Some(key.type_url.to_string())
                }
                _ => None,
            })
            .collect();
        if !events.is_empty() {
            self.sink.deliver(&self.server, events);
        }
        let s = self.session.stats();
        let mut stats = self.stats.lock();
        stats.connected = self.session.is_healthy();
        stats.server_failure = s.failed;
        stats.resource_updates_valid = s.valid;
        stats.resource_updates_invalid = s.invalid;
        // Recorded once the events reached the cache, as the field says.
        stats.answered_types.extend(answered);
    }
}
