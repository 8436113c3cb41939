//! The driver task: IO and time for one [`Session`].
//!
//! ```text
//!          ┌──────────── no subscriptions ◄──────────────┐
//!          ▼                                              │ idle_grace
//!   WaitingForInterest ──subscribe──► Streaming ──────────┘
//!          ▲                           │ stream ends
//!          │                           ▼
//!          └──────────────────── BackingOff (after every end; the delay
//!                                 counts from the attempt's start, and a
//!                                 response resets it)
//! ```
//!
//! Each attempt opens a fresh channel, so that a connection to a server
//! that never answered is dropped, not reused. When the session asks for
//! the stream to be closed ([`Session::poll_close`]: the handshake or
//! first-response deadline passed), the driver ends it as the server's
//! failure.
//!
//! In every state the driver keeps applying commands and firing the
//! session's timers (TTLs run while disconnected). It never awaits anything
//! but its own IO, commands and timers: events go to the sink, which must
//! not block.

use crate::random::random_u64;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::FutureExt as _;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codegen::{Service as _, http};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use tracing::Instrument as _;

use super::{TransportError, TransportOptions};
use crate::source::driving::{
    BetweenAttempts, IdleTimer, now, publish_session_stats, sleep_until, wait_between,
};
use crate::source::handle::{Command, Commands, StatsCell};
use xdsfed_core::backoff::ReconnectPolicy;
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig};
use xdsfed_core::protocol::{AuthorityFilter, Request, Session, SessionConfig, StreamEnd};
use xdsfed_core::types::TypeRegistry;

/// The sending half of an open stream.
enum Outbound {
    Delta(mpsc::UnboundedSender<DeltaDiscoveryRequest>),
    Sotw(mpsc::UnboundedSender<DiscoveryRequest>),
}

impl Outbound {
    fn send(&self, request: Request) {
        // A closed receiver means the stream is ending; its end arrives on
        // the receiving half.
        let _ = match (self, request) {
            (Outbound::Delta(tx), Request::Delta(r)) => tx.send(r).map_err(drop),
            (Outbound::Sotw(tx), Request::Sotw(r)) => tx.send(r).map_err(drop),
            (_, r) => {
                tracing::error!(
                    type_url = r.type_url(),
                    "request of the other ADS variant dropped"
                );
                Ok(())
            }
        };
    }
}

/// The receiving half of an open stream.
enum Inbound {
    Delta(Streaming<DeltaDiscoveryResponse>),
    Sotw(Streaming<DiscoveryResponse>),
}

/// One response from either variant.
enum Response {
    Delta(DeltaDiscoveryResponse),
    Sotw(DiscoveryResponse),
}

/// The next message of `inbound`, or forever while there is none.
async fn recv(inbound: &mut Option<Inbound>) -> Result<Option<Response>, Status> {
    match inbound {
        Some(Inbound::Delta(s)) => s.message().await.map(|m| m.map(Response::Delta)),
        Some(Inbound::Sotw(s)) => s.message().await.map(|m| m.map(Response::Sotw)),
        None => std::future::pending().await,
    }
}

type Call = Pin<Box<dyn Future<Output = Result<Inbound, Status>> + Send>>;

type Probe = futures::future::Fuse<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// The path of the readiness probe: the standard health check, which any
/// gRPC server answers at once (with its status, or UNIMPLEMENTED).
const PROBE_PATH: &str = "/grpc.health.v1.Health/Check";

/// Resolves once the server answers an HTTP/2 request on `channel`'s
/// connection, and never if it does not (a local error included; the stream
/// reports those). The answer shows the connection ready (gRPC's READY: the
/// server speaks HTTP/2) even when the ADS stream's headers wait for its
/// first response, which tonic alone would not tell apart from a server
/// that never speaks. What the answer says does not matter.
fn probe(mut channel: Channel) -> Probe {
    let answered = async move {
        let request = http::Request::builder()
            .method(http::Method::POST)
            .uri(PROBE_PATH)
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .body(tonic::body::Body::empty());
        let Ok(request) = request else {
            return std::future::pending().await;
        };
        let ready = std::future::poll_fn(|cx| channel.poll_ready(cx)).await;
        if ready.is_err() || channel.call(request).await.is_err() {
            std::future::pending().await
        }
    };
    let answered: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(answered);
    answered.fuse()
}

/// How a stream ended.
enum Outcome {
    /// The stream ended or failed.
    Ended { code: Code, after_response: bool },
    /// Closed after `idle_grace` with nothing subscribed.
    Idle,
    /// The connection is shut down.
    Shutdown,
}

/// What woke the driver.
enum Wake {
    Command(Option<Command>),
    Connected(Result<Inbound, Status>),
    Ready,
    Message(Result<Option<Response>, Status>),
    Timer,
    Idle,
}

pub(super) struct Driver {
    server: ServerConfig,
    session: Session,
    sink: Arc<dyn super::EventSink>,
    opts: TransportOptions,
    endpoint: Result<Endpoint, TransportError>,
    commands: Commands,
    stats: Arc<StatsCell>,
    fallback_logged: bool,
    /// The type of the response handled last, until its events are
    /// delivered and the type is counted as answered.
    answered: Option<String>,
}

impl Driver {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        server: ServerConfig,
        authorities: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn super::EventSink>,
        opts: TransportOptions,
        endpoint: Result<Endpoint, TransportError>,
        commands: Commands,
        stats: Arc<StatsCell>,
    ) -> Self {
        let mut cfg = SessionConfig::new(opts.node.clone())
            .with_variant(server.api)
            .with_does_not_exist_timeout(opts.does_not_exist_timeout)
            .with_handshake_timeout(opts.connect_timeout)
            .with_first_response_timeout(opts.first_response_timeout)
            .with_authorities(authorities);
        cfg.ignore_resource_deletion = server.has_feature("ignore_resource_deletion");
        Driver {
            session: Session::new(cfg, types),
            server,
            sink,
            opts,
            endpoint,
            commands,
            stats,
            fallback_logged: false,
            answered: None,
        }
    }

    pub(super) async fn run(mut self) {
        let mut policy = ReconnectPolicy::new(self.opts.backoff, random_u64());
        let mut attempt: u64 = 0;
        loop {
            if !self.session.has_subscriptions() && !wait_between(&mut self, None).await {
                return;
            }
            attempt += 1;
            let span = tracing::info_span!(
                "ads_stream",
                server = %self.server.server_uri,
                variant = ?self.session.variant(),
                attempt,
            );
            policy.started(now());
            let outcome = self.run_stream().instrument(span).await;
            let (code, after_response) = match outcome {
                Outcome::Shutdown => return,
                Outcome::Idle => {
                    policy.closed_locally();
                    continue;
                }
                Outcome::Ended {
                    code,
                    after_response,
                } => (code, after_response),
            };
            if self.falls_back(code, after_response) {
                continue;
            }
            let at = policy.ended(now(), after_response);
            let delay = at.saturating_duration_since(now());
            if after_response {
                tracing::debug!(server = %self.server.server_uri, ?delay, "reopening the ADS stream");
            } else {
                tracing::info!(server = %self.server.server_uri, ?delay, attempt, "retrying the ADS stream");
            }
            if !wait_between(&mut self, Some(at)).await {
                return;
            }
        }
    }

    /// Whether the stream's end means "this server does not speak delta":
    /// switch to SotW (logged once) unless the bootstrap pinned the variant.
    fn falls_back(&mut self, code: Code, after_response: bool) -> bool {
        let fall_back = self.is_fallback(code, after_response);
        if fall_back {
            if !self.fallback_logged {
                self.fallback_logged = true;
                tracing::warn!(
                    server = %self.server.server_uri,
                    "server does not implement DeltaAggregatedResources; using state-of-the-world ADS"
                );
            }
            self.session.set_variant(ApiVariant::Sotw);
            self.stats.lock().variant = ApiVariant::Sotw;
        }
        fall_back
    }

    /// Whether an end with `code` is a delta refusal to fall back from.
    fn is_fallback(&self, code: Code, after_response: bool) -> bool {
        code == Code::Unimplemented
            && !after_response
            && self.session.variant() == ApiVariant::Delta
            && !self.server.api_pinned
    }

    /// Opens a stream and drives it until it ends.
    async fn run_stream(&mut self) -> Outcome {
        let channel = match &self.endpoint {
            Ok(endpoint) => endpoint.connect_lazy(),
            Err(e) => {
                let message = e.to_string();
                return self.end(Code::Unavailable, message, false);
            }
        };
        self.stats.lock().streams_opened += 1;
        self.session.handle_connected(now());
        let mut ready = probe(channel.clone());
        let (out, mut call) = self.open(channel);
        let mut inbound: Option<Inbound> = None;
        let mut after_response = false;
        let mut idle = IdleTimer::default();
        loop {
            if let Some(end) = self.session.poll_close() {
                // The session's deadline: the server's failure, not ours.
                return self.end(
                    Code::from_i32(end.code.as_i32()),
                    end.message,
                    after_response,
                );
            }
            self.flush(Some(&out));
            let idle_at = idle.deadline(self.session.has_subscriptions(), self.opts.idle_grace);
            let timer = self.session.poll_timeout();
            let wake = tokio::select! {
                cmd = self.commands.recv() => Wake::Command(cmd),
                r = &mut call, if inbound.is_none() => Wake::Connected(r),
                () = &mut ready => Wake::Ready,
                m = recv(&mut inbound) => Wake::Message(m),
                () = sleep_until(timer) => Wake::Timer,
                () = sleep_until(idle_at) => Wake::Idle,
            };
            match wake {
                Wake::Command(cmd) => {
                    if !self.apply(cmd) {
                        self.session
                            .handle_stream_end(now(), StreamEnd::local("shut down"));
                        self.flush(None);
                        return Outcome::Shutdown;
                    }
                }
                Wake::Ready => self.session.handle_connection_ready(now()),
                Wake::Connected(Ok(stream)) => {
                    inbound = Some(stream);
                    self.session.handle_stream_accepted(now());
                }
                Wake::Connected(Err(status)) | Wake::Message(Err(status)) => {
                    return self.end(status.code(), status.message().to_owned(), after_response);
                }
                Wake::Message(Ok(None)) => {
                    return self.end(
                        Code::Ok,
                        "stream closed by the server".into(),
                        after_response,
                    );
                }
                Wake::Message(Ok(Some(response))) => {
                    after_response = true;
                    self.handle(response);
                }
                Wake::Timer => self.session.handle_timeout(now()),
                Wake::Idle => {
                    tracing::debug!(server = %self.server.server_uri, "closing the idle ADS stream");
                    self.session
                        .handle_stream_end(now(), StreamEnd::local("idle"));
                    self.flush(None);
                    return Outcome::Idle;
                }
            }
        }
    }

    /// Starts the RPC of the session's variant. The call resolves when the
    /// server's headers arrive, which some servers send only with their
    /// first response, so requests are written meanwhile.
    fn open(&self, channel: Channel) -> (Outbound, Call) {
        let mut client = AggregatedDiscoveryServiceClient::new(channel)
            .max_decoding_message_size(self.opts.max_message_size)
            .max_encoding_message_size(self.opts.max_message_size);
        match self.session.variant() {
            ApiVariant::Delta => {
                let (tx, rx) = mpsc::unbounded_channel();
                let call = async move {
                    let response = client
                        .delta_aggregated_resources(UnboundedReceiverStream::new(rx))
                        .await?;
                    Ok(Inbound::Delta(response.into_inner()))
                };
                (Outbound::Delta(tx), Box::pin(call))
            }
            ApiVariant::Sotw => {
                let (tx, rx) = mpsc::unbounded_channel();
                let call = async move {
                    let response = client
                        .stream_aggregated_resources(UnboundedReceiverStream::new(rx))
                        .await?;
                    Ok(Inbound::Sotw(response.into_inner()))
                };
                (Outbound::Sotw(tx), Box::pin(call))
            }
        }
    }

    /// Feeds one response to the session.
    fn handle(&mut self, response: Response) {
        let now = now();
        let first = !self.stats.lock().connected;
        if first {
            self.stats.lock().connected = true;
        }
        match response {
            Response::Delta(r) => {
                let _span = tracing::debug_span!(
                    "ads_response",
                    type_url = %r.type_url,
                    resources = r.resources.len(),
                    removed = r.removed_resources.len(),
                )
                .entered();
                self.answered = Some(r.type_url.clone());
                self.session.handle_delta_response(now, r);
            }
            Response::Sotw(r) => {
                let _span = tracing::debug_span!(
                    "ads_response",
                    type_url = %r.type_url,
                    resources = r.resources.len(),
                )
                .entered();
                self.answered = Some(r.type_url.clone());
                self.session.handle_sotw_response(now, r);
            }
        }
    }

    /// The stream ended with `code`: tell the session (unless it is the
    /// delta→SotW fallback, which is not the server failing).
    fn end(&mut self, code: Code, message: String, after_response: bool) -> Outcome {
        self.stats.lock().connected = false;
        let message = explain_too_large(code, &message).unwrap_or(message);
        let end = if self.is_fallback(code, after_response) {
            StreamEnd::local(format!("delta ADS unimplemented: {message}"))
        } else {
            StreamEnd::new(
                code as i32,
                format!("{}: {message}", self.server.server_uri),
            )
        };
        if code == Code::Ok {
            tracing::debug!(server = %self.server.server_uri, "ADS stream ended");
        } else {
            tracing::warn!(server = %self.server.server_uri, ?code, %message, "ADS stream failed");
        }
        self.session.handle_stream_end(now(), end);
        self.flush(None);
        Outcome::Ended {
            code,
            after_response,
        }
    }

    /// Applies `command` and every command queued behind it; `false` on
    /// shutdown.
    fn apply(&mut self, command: Option<Command>) -> bool {
        let session = &mut self.session;
        self.commands
            .apply_queued(command, |command| match command {
                Command::Subscribe(key) => session.subscribe(key),
                Command::Unsubscribe(key) => session.unsubscribe(&key),
                Command::ForgetVersion(key) => session.forget_version(&key),
                Command::SubscribeWildcard(t) => session.subscribe_wildcard(&t),
                Command::UnsubscribeWildcard(t) => session.unsubscribe_wildcard(&t),
            })
    }

    /// Writes what the session wants written, hands its events to the sink
    /// and publishes the counters.
    fn flush(&mut self, out: Option<&Outbound>) {
        if let Some(out) = out {
            let now = now();
            while let Some(request) = self.session.poll_transmit(now) {
                out.send(request);
            }
        }
        let events: Vec<_> = std::iter::from_fn(|| self.session.poll_event()).collect();
        if !events.is_empty() {
            self.sink.deliver(&self.server, events);
        }
        publish_session_stats(
            &mut self.stats.lock(),
            self.session.stats(),
            self.answered.take(),
        );
    }
}

/// tonic refuses a message over the limit with `OUT_OF_RANGE` and a
/// sentence of its own ("decoded message length too large: found N bytes,
/// the limit is: M bytes"); this says the same in the client's words and
/// names the option that raises the limit.
fn explain_too_large(code: Code, message: &str) -> Option<String> {
    if code != Code::OutOfRange || !message.contains("message length too large") {
        return None;
    }
    let number_after = |label: &str| -> Option<u64> {
        let rest = &message[message.find(label)? + label.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let found = number_after("found")?;
    let limit = number_after("the limit is:")?;
    let direction = if message.contains("encoded") {
        "a request"
    } else {
        "a response"
    };
    Some(format!(
        "{direction} of {found} bytes is over the message size limit of {limit} bytes \
         (TransportOptions::max_message_size); the stream was ended"
    ))
}

impl BetweenAttempts for Driver {
    fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    fn commands(&mut self) -> &mut Commands {
        &mut self.commands
    }

    fn apply(&mut self, command: Option<Command>) -> bool {
        Driver::apply(self, command)
    }

    fn flush_between(&mut self) {
        self.flush(None);
    }
}

#[cfg(test)]
mod too_large_tests {
    use super::*;

    #[test]
    fn tonic_size_refusal_is_explained_with_both_numbers() {
        let tonic = "Error, decoded message length too large: found 25165900 bytes, the limit is: 16777216 bytes";
        assert_eq!(
            explain_too_large(Code::OutOfRange, tonic).as_deref(),
            Some(
                "a response of 25165900 bytes is over the message size limit of 16777216 bytes \
                 (TransportOptions::max_message_size); the stream was ended"
            )
        );
        assert_eq!(explain_too_large(Code::Unavailable, tonic), None);
        assert_eq!(
            explain_too_large(Code::OutOfRange, "index out of range"),
            None
        );
    }
}
