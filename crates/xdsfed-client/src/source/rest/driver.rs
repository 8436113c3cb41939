//! The REST-JSON kind of source for the one reconnecting loop
//! ([`reconnect`](crate::source::reconnect), which waits for interest,
//! stops idle polling and backs off between attempts): IO for one SotW
//! [`Session`] and its [`PollSchedule`].
//!
//! An attempt is what a stream is to ADS: it starts with
//! `handle_connected` (every type written afresh) and ends with the first
//! failed poll. The driver never reads a version or a nonce; it moves
//! requests from the session to the schedule, due polls to the HTTP
//! client, and answers back to the session.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

use super::http::{Answer, Failure, HttpClient};
use crate::source::driving::{now, publish_session_stats};
use crate::source::handle::{Command, StatsCell};
use crate::source::reconnect::{AttemptEnd, SourceDriver};
use crate::transport::{EventSink, TransportError, TransportOptions};
use xdsfed_core::bootstrap::{RestTiming, ServerConfig};
use xdsfed_core::protocol::{
    AuthorityFilter, CoreEvent, Request, ResourceKey, Session, SessionConfig, SourceKind,
    StreamEnd, is_glob,
};
use xdsfed_core::source::rest::{Cause, PollSchedule, Read, type_path};
use xdsfed_core::types::TypeRegistry;

/// One poll on the wire: its type URL and what came back.
type InFlight = Pin<Box<dyn Future<Output = (String, Result<Answer, Failure>)> + Send>>;

/// What one attempt holds: the client, the polls on the wire, and
/// whether any of them was answered.
pub(super) struct Io {
    client: HttpClient,
    inflight: FuturesUnordered<InFlight>,
    answered: bool,
}

/// Everything the driver is built from.
pub(super) struct Parts {
    pub(super) server: ServerConfig,
    pub(super) timing: RestTiming,
    pub(super) authorities: AuthorityFilter,
    pub(super) types: Arc<TypeRegistry>,
    pub(super) sink: Arc<dyn EventSink>,
    pub(super) opts: TransportOptions,
    pub(super) client: Result<HttpClient, TransportError>,
    pub(super) stats: Arc<StatsCell>,
}

pub(super) struct Driver {
    server: ServerConfig,
    session: Session,
    schedule: PollSchedule,
    sink: Arc<dyn EventSink>,
    opts: TransportOptions,
    client: Result<HttpClient, TransportError>,
    stats: Arc<StatsCell>,
    /// Events the driver itself produces (what REST cannot ask for),
    /// delivered with the session's.
    own_events: Vec<CoreEvent>,
    /// The types of the responses handled since the last flush, until
    /// their events are delivered and the types are counted as answered.
    answered: Vec<String>,
}

impl Driver {
    pub(super) fn new(parts: Parts) -> Self {
        let Parts {
            server,
            timing,
            authorities,
            types,
            sink,
            opts,
            client,
            stats,
        } = parts;
        let mut cfg = SessionConfig::new(opts.node.clone())
            .with_variant(server.api)
            .with_does_not_exist_timeout(opts.does_not_exist_timeout)
            .with_handshake_timeout(opts.connect_timeout)
            .with_first_response_timeout(opts.first_response_timeout)
            .with_authorities(authorities)
            .with_source(SourceKind::RestJson);
        cfg.ignore_resource_deletion = server.has_feature("ignore_resource_deletion");
        let session = Session::new(cfg, types);
        // The node as the session sends it: with the client features.
        let schedule = PollSchedule::new(timing.refresh_delay, session.config().node.clone());
        Driver {
            server,
            session,
            schedule,
            sink,
            opts,
            client,
            stats,
            own_events: Vec::new(),
            answered: Vec::new(),
        }
    }

    /// Starts every poll that is due.
    fn start_due(&mut self, client: &HttpClient, inflight: &mut FuturesUnordered<InFlight>) {
        while let Some(request) = self.schedule.poll_request(now()) {
            // Types without a path never reach the session (see `apply_one`).
            let Some(path) = type_path(&request.type_url) else {
                continue;
            };
            let client = client.clone();
            tracing::debug!(
                server = %self.server.server_uri,
                type_url = %request.type_url,
                version = %request.version_info,
                nack = request.error_detail.is_some(),
                "polling"
            );
            inflight.push(Box::pin(async move {
                let result = client.post(path, &request).await;
                (request.type_url, result)
            }));
        }
    }

    /// Feeds one answer of `type_url` to the schedule and the session. A
    /// body that does not read as a response of the type is rejected
    /// (NACKed), as a resource that does not decode is: the server
    /// answered, so the attempt goes on.
    fn answer(&mut self, type_url: &str, answer: Answer) {
        let now = now();
        if !self.schedule.handle_answer(now, type_url) {
            return; // the type is no longer polled
        }
        match answer {
            Answer::NotModified => self.session.handle_stream_accepted(now),
            Answer::Response(Read::Response {
                response,
                undecoded,
            }) => {
                self.note_answering();
                self.answered.push(response.type_url.clone());
                self.session
                    .handle_sotw_response_with_undecoded(now, response, undecoded);
            }
            Answer::Response(Read::Rejected(body)) => {
                self.note_answering();
                tracing::warn!(
                    server = %self.server.server_uri,
                    type_url,
                    error = %body.error,
                    "rejected a REST-JSON answer"
                );
                self.session.handle_sotw_rejected(
                    now,
                    type_url,
                    body.nonce,
                    &body.version,
                    body.error,
                );
            }
        }
        self.flush(Cause::Answer);
    }

    /// The server answers with a body: it is connected.
    fn note_answering(&mut self) {
        let first = !self.stats.lock().connected;
        self.stats.lock().connected = true;
        if first {
            tracing::info!(server = %self.server.server_uri, "REST-JSON source answering");
        }
    }

    /// A poll failed: the attempt ends as a stream the server (or the
    /// connection to it) ended.
    fn fail(&mut self, failure: Failure, answered: bool) -> AttemptEnd {
        tracing::warn!(server = %self.server.server_uri, code = failure.code, message = %failure.message, "REST-JSON poll failed");
        self.stats.lock().connected = false;
        self.schedule.clear();
        let end = StreamEnd {
            initiator: failure.initiator,
            code: failure.code.into(),
            message: format!("{}: {}", self.server.server_uri, failure.message),
        };
        self.session.handle_stream_end(now(), end);
        self.flush(Cause::Interest);
        AttemptEnd::Ended {
            had_response: answered,
        }
    }

    /// Moves what the session wrote to the schedule (as `cause`), hands
    /// the events to the sink and publishes the counters.
    fn flush(&mut self, cause: Cause) {
        let now = now();
        while let Some(request) = self.session.poll_transmit(now) {
            if let Request::Sotw(request) = request {
                self.schedule.handle_request(now, request, cause);
            }
        }
        let mut events = std::mem::take(&mut self.own_events);
        events.extend(std::iter::from_fn(|| self.session.poll_event()));
        if !events.is_empty() {
            self.sink.deliver(&self.server, events);
        }
        publish_session_stats(
            &mut self.stats.lock(),
            self.session.stats(),
            self.answered.drain(..),
        );
    }
}

/// Applies one command to `session`; what REST cannot ask for is
/// answered in `own_events` instead.
fn apply_one(session: &mut Session, own_events: &mut Vec<CoreEvent>, command: Command) {
    match command {
        Command::Subscribe(key) => {
            if let Some(reason) = not_requestable(&key.type_url, &key.name) {
                own_events.push(CoreEvent::NotRequested {
                    key,
                    reason: Arc::from(reason),
                });
            } else {
                session.subscribe(key);
            }
        }
        Command::Unsubscribe(key) => session.unsubscribe(&key),
        Command::ForgetVersion(key) => session.forget_version(&key),
        // REST-JSON polls whole snapshots: no per-resource versions to claim.
        Command::Resume(..) => {}
        Command::SubscribeWildcard(t) => {
            if let Some(reason) = not_requestable(&t, "*") {
                own_events.push(CoreEvent::NotRequested {
                    key: ResourceKey::new(t, "*"),
                    reason: Arc::from(reason),
                });
            } else {
                session.subscribe_wildcard(&t);
            }
        }
        Command::UnsubscribeWildcard(t) => session.unsubscribe_wildcard(&t),
    }
}

/// Why `name` of `type_url` cannot be asked for over REST, if it cannot.
fn not_requestable(type_url: &str, name: &str) -> Option<String> {
    if type_path(type_url).is_none() {
        return Some(format!(
            "{type_url} has no REST-JSON path (/v3/discovery:...); this server is polled over REST, \
             which serves listeners, routes, clusters, endpoints, secrets, runtime, scoped-routes, \
             virtual_hosts and extension_configs"
        ));
    }
    is_glob(name).then(|| {
        "glob collections need delta xDS (xDS TP1), and REST-JSON polling is state of the world only"
            .to_owned()
    })
}

impl SourceDriver for Driver {
    type Io = Io;
    type Wake = (String, Result<Answer, Failure>);

    fn has_subscriptions(&self) -> bool {
        self.session.has_subscriptions()
    }

    fn apply(&mut self, command: Command) {
        apply_one(&mut self.session, &mut self.own_events, command);
    }

    /// A burst of commands is applied before this runs, so that it leaves
    /// in one poll per type.
    fn flush(&mut self, io: Option<&mut Io>) {
        Driver::flush(self, Cause::Interest);
        if let Some(io) = io {
            self.start_due(&io.client, &mut io.inflight);
        }
    }

    /// The session's timers and the schedule's next poll.
    fn poll_timeout(&self) -> Option<Instant> {
        let session = self.session.poll_timeout();
        let poll = self.schedule.poll_timeout();
        session.into_iter().chain(poll).min()
    }

    /// Due polls start on the next flush.
    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        Driver::flush(self, Cause::Interest);
    }

    fn idle_grace(&self) -> Option<Duration> {
        Some(self.opts.idle_grace)
    }

    fn span(&self, attempt: u64) -> tracing::Span {
        tracing::info_span!("rest_polls", server = %self.server.server_uri, attempt)
    }

    /// Every type is written afresh, as on a new ADS stream.
    fn open(&mut self) -> Result<Io, AttemptEnd> {
        let client = match &self.client {
            Ok(client) => client.clone(),
            // No client can be made (a TLS file, the target): the
            // connection never opened.
            Err(e) => return Err(self.fail(Failure::transport(14, e.to_string()), false)),
        };
        self.stats.lock().streams_opened += 1;
        self.schedule.clear();
        self.session.handle_connected(now());
        Driver::flush(self, Cause::Interest);
        Ok(Io {
            client,
            inflight: FuturesUnordered::new(),
            answered: false,
        })
    }

    async fn next(io: &mut Io) -> Self::Wake {
        match io.inflight.next().await {
            Some(answered) => answered,
            // Nothing on the wire: the schedule's timer wakes the loop.
            None => std::future::pending().await,
        }
    }

    fn handle(&mut self, io: &mut Io, wake: Self::Wake) -> Option<AttemptEnd> {
        match wake {
            (type_url, Ok(answer)) => {
                io.answered = true;
                self.answer(&type_url, answer);
                None
            }
            (_, Err(failure)) => Some(self.fail(failure, io.answered)),
        }
    }

    fn poll_close(&mut self, io: &mut Io) -> Option<AttemptEnd> {
        let end = self.session.poll_close()?;
        let failure = Failure {
            initiator: end.initiator,
            code: end.code.as_i32(),
            message: end.message,
        };
        Some(self.fail(failure, io.answered))
    }

    fn end_locally(&mut self, _io: Io, why: &str) {
        if why == "idle" {
            tracing::debug!(server = %self.server.server_uri, "nothing left to poll");
        }
        self.schedule.clear();
        self.session.handle_stream_end(now(), StreamEnd::local(why));
        Driver::flush(self, Cause::Interest);
    }

    fn backing_off(&self, delay: Duration, _attempt: u64, _had_response: bool) {
        tracing::info!(
            server = %self.server.server_uri,
            ?delay,
            "retrying the REST-JSON polls"
        );
    }
}
