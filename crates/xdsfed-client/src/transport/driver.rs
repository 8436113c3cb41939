//! The ADS kind of source for the one reconnecting loop
//! ([`reconnect`](crate::source::reconnect), which waits for interest,
//! closes idle streams and backs off between them): IO for one
//! [`Session`] over a tonic bidi stream.
//!
//! Each attempt opens a fresh channel, so that a connection to a server
//! that never answered is dropped, not reused. When the session asks for
//! the stream to be closed ([`Session::poll_close`]: the handshake or
//! first-response deadline passed), the stream ends as the session says:
//! the connection's failure or the server's. A connection that never
//! opened (refused, a failed TLS handshake) ends as the transport's, a
//! status the server sent as the server's. A delta refusal switches the session to SotW, and the next
//! stream opens at once ([`AttemptEnd::Switched`]).
//!
//! Events go to the sink, which must not block.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse,
};
use futures::FutureExt as _;
use tokio::sync::mpsc;
use tonic::codegen::http::HeaderValue;
use tonic::codegen::{Service as _, http};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::call::{Messages, open};
use super::{TransportError, TransportOptions};
use crate::source::call_creds::{CallCredentials, authorization_headers, grpc_headers};
use crate::source::driving::{initiator_of, now, publish_session_stats};
use crate::source::handle::{Command, StatsCell};
use crate::source::reconnect::{AttemptEnd, SourceDriver};
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig};
use xdsfed_core::protocol::{
    AuthorityFilter, Initiator, Request, Session, SessionConfig, StreamEnd, WireDeltaResponse,
};
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
pub(super) enum Inbound {
    Delta(Messages<WireDeltaResponse>),
    Sotw(Messages<DiscoveryResponse>),
}

/// One response from either variant.
pub(super) enum Response {
    Delta(WireDeltaResponse),
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

/// The two ADS methods.
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

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

/// What an open stream woke the driver with.
pub(super) enum Wake {
    Connected(Result<Inbound, Status>),
    Ready,
    Message(Result<Option<Response>, Status>),
}

/// One open stream: its halves, the call that opens it, the readiness
/// probe beside it.
pub(super) struct Io {
    out: Outbound,
    call: Call,
    ready: Probe,
    inbound: Option<Inbound>,
    after_response: bool,
}

/// Everything the driver is built from.
pub(super) struct Parts {
    pub(super) server: ServerConfig,
    pub(super) authorities: AuthorityFilter,
    pub(super) types: Arc<TypeRegistry>,
    pub(super) sink: Arc<dyn super::EventSink>,
    pub(super) opts: TransportOptions,
    pub(super) endpoint: Result<Endpoint, TransportError>,
    pub(super) stats: Arc<StatsCell>,
}

/// The ADS kind of source for the one reconnecting loop.
pub(super) struct Driver {
    server: ServerConfig,
    session: Session,
    sink: Arc<dyn super::EventSink>,
    opts: TransportOptions,
    endpoint: Result<Endpoint, TransportError>,
    stats: Arc<StatsCell>,
    /// The server's call credentials (gRFC A97), added to each stream.
    call_creds: Option<Arc<CallCredentials>>,
    fallback_logged: bool,
    /// The types of the responses handled since the last flush, until
    /// their events are delivered and the types are counted as answered (a
    /// delta response's own bytes: no copy per response).
    answered: Vec<Bytes>,
    /// Resources (and removals) the responses handled since the last flush
    /// carried.
    unflushed: usize,
}

/// Resources handled since the last flush from which a flush is due: a
/// response's fixed cost (its ACK's write, the sink's batch, the wake-ups)
/// is some 70 µs of CPU and a resource's about 2, so from here on the fixed
/// part is under a third of the work and gathering more saves little.
const FLUSH_AFTER_RESOURCES: usize = 64;

impl Driver {
    pub(super) fn new(parts: Parts) -> Self {
        let Parts {
            server,
            authorities,
            types,
            sink,
            opts,
            endpoint,
            stats,
        } = parts;
        let mut cfg = SessionConfig::new(opts.node.clone())
            .with_variant(server.api)
            .with_does_not_exist_timeout(opts.does_not_exist_timeout)
            .with_handshake_timeout(opts.connect_timeout)
            .with_first_response_timeout(opts.first_response_timeout)
            .with_authorities(authorities);
        cfg.ignore_resource_deletion = server.has_feature("ignore_resource_deletion");
        Driver {
            session: Session::new(cfg, types),
            call_creds: CallCredentials::of(&server),
            server,
            sink,
            opts,
            endpoint,
            stats,
            fallback_logged: false,
            answered: Vec::new(),
            unflushed: 0,
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

    /// Starts the RPC of the session's variant. The call resolves when the
    /// server's headers arrive, which some servers send only with their
    /// first response, so requests are written meanwhile.
    fn start_rpc(&self, channel: Channel, authorization: Vec<HeaderValue>) -> (Outbound, Call) {
        let headers = authorization_headers(authorization);
        let max = self.opts.max_message_size;
        let (out, call): (Outbound, Call) = match self.session.variant() {
            ApiVariant::Delta => {
                let (tx, rx) = mpsc::unbounded_channel();
                let call =
                    open(channel, DELTA_PATH, headers, rx, max).map(|r| r.map(Inbound::Delta));
                (Outbound::Delta(tx), Box::pin(call))
            }
            ApiVariant::Sotw => {
                let (tx, rx) = mpsc::unbounded_channel();
                let call = open(channel, SOTW_PATH, headers, rx, max).map(|r| r.map(Inbound::Sotw));
                (Outbound::Sotw(tx), Box::pin(call))
            }
        };
        (out, call)
    }

    /// Feeds one response to the session.
    fn handle_response(&mut self, response: Response) {
        let now = now();
        let first = !self.stats.lock().connected;
        if first {
            self.stats.lock().connected = true;
        }
        match response {
            Response::Delta(r) => {
                self.unflushed +=
                    r.resources.len() + r.removed_resources.len() + r.removed_resource_names.len();
                let _span = tracing::debug_span!(
                    "ads_response",
                    type_url = %String::from_utf8_lossy(&r.type_url),
                    resources = r.resources.len(),
                    removed = r.removed_resources.len(),
                )
                .entered();
                self.answered.push(r.type_url.clone());
                self.session.handle_delta_wire(now, r);
            }
            Response::Sotw(r) => {
                self.unflushed += r.resources.len();
                let _span = tracing::debug_span!(
                    "ads_response",
                    type_url = %r.type_url,
                    resources = r.resources.len(),
                )
                .entered();
                self.answered
                    .push(Bytes::copy_from_slice(r.type_url.as_bytes()));
                self.session.handle_sotw_response(now, r);
            }
        }
    }

    /// The stream ended with `code`, by `initiator`'s doing: tell the
    /// session (unless it is the delta→SotW fallback, which is not the
    /// server failing).
    fn end(
        &mut self,
        initiator: Initiator,
        code: Code,
        message: String,
        after_response: bool,
    ) -> AttemptEnd {
        self.stats.lock().connected = false;
        let end = if self.is_fallback(code, after_response) {
            StreamEnd::local(format!("delta ADS unimplemented: {message}"))
        } else {
            StreamEnd {
                initiator,
                code: (code as i32).into(),
                message: format!("{}: {message}", self.server.server_uri),
            }
        };
        if code == Code::Ok {
            tracing::debug!(server = %self.server.server_uri, "ADS stream ended");
        } else {
            tracing::warn!(server = %self.server.server_uri, ?code, %message, "ADS stream failed");
        }
        self.session.handle_stream_end(now(), end);
        self.flush(None);
        if self.falls_back(code, after_response) {
            AttemptEnd::Switched
        } else {
            AttemptEnd::Ended {
                had_response: after_response,
            }
        }
    }

    /// Writes what the session wants written, hands its events to the sink
    /// and publishes the counters.
    fn flush(&mut self, out: Option<&Outbound>) {
        self.unflushed = 0;
        if let Some(out) = out {
            let now = now();
            while let Some(request) = self.session.poll_transmit(now) {
                out.send(request);
            }
        }
        let events = self.session.poll_events();
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

impl SourceDriver for Driver {
    type Io = Io;
    type Wake = Wake;

    fn has_subscriptions(&self) -> bool {
        self.session.has_subscriptions()
    }

    fn apply(&mut self, command: Command) {
        command.apply_to(&mut self.session);
    }

    fn flush(&mut self, io: Option<&mut Io>) {
        Driver::flush(self, io.map(|io| &io.out));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    fn flush_due(&self) -> bool {
        self.unflushed >= FLUSH_AFTER_RESOURCES
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
    }

    fn idle_grace(&self) -> Option<Duration> {
        Some(self.opts.idle_grace)
    }

    fn span(&self, attempt: u64) -> tracing::Span {
        tracing::info_span!(
            "ads_stream",
            server = %self.server.server_uri,
            variant = ?self.session.variant(),
            attempt,
        )
    }

    /// Opens a fresh channel (a connection to a server that never answered
    /// is dropped, not reused) and starts the stream's RPC on it.
    fn open(&mut self) -> Result<Io, AttemptEnd> {
        let channel = match &self.endpoint {
            Ok(endpoint) => endpoint.connect_lazy(),
            // No channel can be made (a TLS file, the target): the
            // connection never opened.
            Err(e) => {
                let message = e.to_string();
                return Err(self.end(Initiator::Transport, Code::Unavailable, message, false));
            }
        };
        // Read when each stream opens, so that a rotated token is used by
        // the next stream; a token that cannot be sent is the connection's
        // failure.
        let authorization = match grpc_headers(self.call_creds.as_deref()) {
            Ok(headers) => headers,
            Err((code, message)) => {
                return Err(self.end(Initiator::Transport, code, message, false));
            }
        };
        self.stats.lock().streams_opened += 1;
        self.session.handle_connected(now());
        let ready = probe(channel.clone());
        let (out, call) = self.start_rpc(channel, authorization);
        Ok(Io {
            out,
            call,
            ready,
            inbound: None,
            after_response: false,
        })
    }

    async fn next(io: &mut Io) -> Wake {
        tokio::select! {
            r = &mut io.call, if io.inbound.is_none() => Wake::Connected(r),
            () = &mut io.ready => Wake::Ready,
            m = recv(&mut io.inbound) => Wake::Message(m),
        }
    }

    fn handle(&mut self, io: &mut Io, wake: Wake) -> Option<AttemptEnd> {
        match wake {
            Wake::Ready => self.session.handle_connection_ready(now()),
            Wake::Connected(Ok(stream)) => {
                io.inbound = Some(stream);
                self.session.handle_stream_accepted(now());
            }
            Wake::Connected(Err(status)) | Wake::Message(Err(status)) => {
                let message = status.message().to_owned();
                let initiator = initiator_of(&status);
                return Some(self.end(initiator, status.code(), message, io.after_response));
            }
            Wake::Message(Ok(None)) => {
                let message = "stream closed by the server".to_owned();
                return Some(self.end(Initiator::Server, Code::Ok, message, io.after_response));
            }
            Wake::Message(Ok(Some(response))) => {
                io.after_response = true;
                self.handle_response(response);
            }
        }
        None
    }

    fn poll_close(&mut self, io: &mut Io) -> Option<AttemptEnd> {
        // The session's deadline: the server's failure or the
        // connection's (as the session says), not ours.
        let end = self.session.poll_close()?;
        Some(self.end(
            end.initiator,
            Code::from_i32(end.code.as_i32()),
            end.message,
            io.after_response,
        ))
    }

    fn end_locally(&mut self, _io: Io, why: &str) {
        if why == "idle" {
            tracing::debug!(server = %self.server.server_uri, "closing the idle ADS stream");
        }
        self.session.handle_stream_end(now(), StreamEnd::local(why));
        self.flush(None);
    }

    fn backing_off(&self, delay: Duration, attempt: u64, had_response: bool) {
        if had_response {
            tracing::debug!(server = %self.server.server_uri, ?delay, "reopening the ADS stream");
        } else {
            tracing::info!(server = %self.server.server_uri, ?delay, attempt, "retrying the ADS stream");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::{Driver, FLUSH_AFTER_RESOURCES, Parts, Response};
    use crate::source::handle::StatsCell;
    use crate::source::reconnect::SourceDriver as _;
    use crate::transport::{EventSink, TransportError, TransportOptions};
    use xdsfed_core::bootstrap::{ApiVariant, ServerConfig};
    use xdsfed_core::protocol::{AuthorityFilter, CoreEvent, WireDeltaResponse, WireResource};
    use xdsfed_core::types::TypeRegistry;

    struct Discard;
    impl EventSink for Discard {
        fn deliver(&self, _server: &ServerConfig, _events: Vec<CoreEvent>) {}
    }

    fn driver() -> Driver {
        let server = ServerConfig::insecure("127.0.0.1:1");
        Driver::new(Parts {
            endpoint: Err(TransportError::BadTarget {
                uri: server.server_uri.clone(),
                why: "not dialled in this test".into(),
            }),
            server,
            authorities: AuthorityFilter::any(),
            types: Arc::new(TypeRegistry::new()),
            sink: Arc::new(Discard),
            opts: TransportOptions::default(),
            stats: Arc::new(StatsCell::new(ApiVariant::Delta)),
        })
    }

    fn response(type_url: &'static str, resources: usize) -> Response {
        Response::Delta(WireDeltaResponse {
            type_url: Bytes::from_static(type_url.as_bytes()),
            resources: vec![WireResource::default(); resources],
            ..WireDeltaResponse::default()
        })
    }

    #[test]
    fn every_type_answered_in_one_flush_is_counted() {
        let mut d = driver();
        d.handle_response(response("type.test/A", 1));
        d.handle_response(response("type.test/B", 1));
        d.flush(None);
        let answered = d.stats.lock().answered_types.clone();
        assert_eq!(
            answered.into_iter().collect::<Vec<_>>(),
            ["type.test/A", "type.test/B"]
        );
    }

    #[test]
    fn a_flush_is_due_once_the_responses_since_the_last_carried_enough_resources() {
        let mut d = driver();
        d.handle_response(response("type.test/A", FLUSH_AFTER_RESOURCES - 1));
        assert!(!d.flush_due());
        d.handle_response(response("type.test/A", 1));
        assert!(d.flush_due());
        d.flush(None);
        assert!(!d.flush_due(), "a flush starts the count over");
    }
}
