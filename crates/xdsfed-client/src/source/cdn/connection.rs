//! [`CdnConnection`]: the handle on one CDN source's driver task, as the
//! client's executor sees it (a [`SourceConnection`](crate::source::SourceConnection)), and the driver: it
//! issues the session's fetches, feeds their answers back, and sleeps
//! until the next is due. It never looks at a status code or an ETag.

use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinSet;

use super::http::{BodyLimits, HttpClient};
use crate::source::SourceHandle;
use crate::source::driving::sleep_until;
use crate::source::handle::{Command, Commands, StatsCell};
use crate::transport::{EventSink, TransportOptions};
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::CoreEvent;
use xdsfed_core::source::cdn::{CdnConfig, CdnSession, Fetch, Fetched};
use xdsfed_core::types::TypeRegistry;

/// Marks a [`SourceHandle`] as an HTTP CDN source's.
#[derive(Debug)]
pub enum CdnKind {}

/// A handle on an HTTP CDN source. Nothing is fetched until the first
/// subscription; the driver task ends on [`SourceHandle::shutdown`] or
/// when every handle is dropped, and its fetches in flight with it. A
/// file host cannot list what it holds: wildcard subscriptions are
/// ignored (logged).
pub type CdnConnection = SourceHandle<CdnKind>;

impl SourceHandle<CdnKind> {
    /// Spawns the driver for `server` on the current tokio runtime (panics
    /// outside one, like `tokio::spawn`). TLS credentials that cannot be
    /// read fail every fetch, each failure naming the file.
    pub fn spawn(
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
            commands,
            fetches: JoinSet::new(),
            stats,
        };
        tokio::spawn(driver.run());
        handle
    }
}

/// The driver task of one CDN source.
struct Driver {
    session: CdnSession,
    /// The client, or why it could not be set up.
    client: Result<HttpClient, Arc<str>>,
    server: ServerConfig,
    sink: Arc<dyn EventSink>,
    commands: Commands,
    /// The fetches in flight; dropped (aborted) with the driver.
    fetches: JoinSet<(Fetch, Fetched)>,
    stats: Arc<StatsCell>,
}

impl Driver {
    async fn run(mut self) {
        loop {
            self.issue(Instant::now());
            self.deliver();
            let sleep = sleep_until(self.session.poll_timeout());
            tokio::select! {
                command = self.commands.recv() => match command {
                    None => return,
                    Some(command) => self.apply(command),
                },
                Some(done) = self.fetches.join_next(), if !self.fetches.is_empty() => {
                    match done {
                        Ok((fetch, fetched)) => {
                            self.session.handle_fetched(fetch.id, &fetch.key, fetched, Instant::now());
                        }
                        // Fetch tasks do not panic; a cancelled one is
                        // the runtime shutting down.
                        Err(e) => tracing::warn!(error = %e, "CDN fetch task ended abnormally"),
                    }
                }
                () = sleep => {}
            }
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Subscribe(key) => self.session.subscribe(key),
            Command::Unsubscribe(key) => self.session.unsubscribe(&key),
            Command::ForgetVersion(key) => self.session.forget_version(&key),
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

    /// Starts every fetch the session asks for.
    fn issue(&mut self, now: Instant) {
        while let Some(fetch) = self.session.poll_fetch(now) {
            let client = self.client.clone();
            self.fetches.spawn(async move {
                let fetched = match client {
                    Ok(client) => client.get(&fetch.url, fetch.etag.as_deref()).await,
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
