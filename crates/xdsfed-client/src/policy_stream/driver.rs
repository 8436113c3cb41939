//! The policy-stream kind of source for the one reconnecting loop
//! ([`reconnect`](crate::source::reconnect), which waits for interest,
//! closes idle streams and backs off between them, as for ADS): IO for one
//! [`PolicySession`].
//!
//! Thin, like the ADS kind: it never looks at a version or a nonce. Each
//! attempt opens a fresh channel; a health check runs beside the stream as
//! a unary call (one at a time, bounded by its interval).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use envoy_types::pb::google::protobuf::Timestamp;
use tokio::sync::mpsc;
use tonic::codegen::http::HeaderValue;
use tonic::transport::Endpoint;
use tonic::{Code, Status};

use super::stub::validating_policy_service_client::ValidatingPolicyServiceClient;
use crate::source::call_creds::{
    CallCredentials, authorization_headers, grpc_headers, with_authorization,
};
use crate::source::driving::{initiator_of, now};
use crate::source::handle::{Command, StatsCell};
use crate::source::reconnect::{AttemptEnd, SourceDriver};
use crate::transport::call::{Messages, open};
use crate::transport::{EventSink, TransportError, TransportOptions};
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::policy_stream::PolicySessionConfig;
use xdsfed_core::policy_stream::wire::{
    HealthCheckRequest, PolicyDiscoveryRequest, PolicyDiscoveryResponse,
};
use xdsfed_core::policy_stream::{PolicySession, PolicyTransmit, PolicyWarning};
use xdsfed_core::protocol::{Initiator, StreamEnd};
use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

type Call = Pin<Box<dyn Future<Output = Result<Messages<PolicyDiscoveryResponse>, Status>> + Send>>;
/// The policy stream's method.
const STREAM_PATH: &str = "/kyverno.http.v1alpha1.ValidatingPolicyService/PolicyDiscoveryStream";
type Check = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The next message of `inbound`, or never while there is no stream yet.
async fn recv(
    inbound: &mut Option<Messages<PolicyDiscoveryResponse>>,
) -> Result<Option<PolicyDiscoveryResponse>, Status> {
    match inbound {
        Some(s) => s.message().await,
        None => std::future::pending().await,
    }
}

/// The health check in flight, or never.
async fn checked(check: &mut Option<Check>) -> Result<(), String> {
    match check {
        Some(c) => c.await,
        None => std::future::pending().await,
    }
}

/// What an open stream woke the driver with.
pub(super) enum Wake {
    Accepted(Result<Messages<PolicyDiscoveryResponse>, Status>),
    Message(Result<Option<PolicyDiscoveryResponse>, Status>),
    Checked(Result<(), String>),
}

/// One open stream: the call that opens it, its halves, the health check
/// beside it.
pub(super) struct Io {
    client: ValidatingPolicyServiceClient<tonic::transport::Channel>,
    call: Call,
    out: mpsc::UnboundedSender<PolicyDiscoveryRequest>,
    inbound: Option<Messages<PolicyDiscoveryResponse>>,
    check: Option<Check>,
    after_response: bool,
    /// The call credentials' headers, read when the stream opened, for
    /// the health checks beside it too.
    authorization: Vec<HeaderValue>,
}

/// The policy-stream kind of source for the one reconnecting loop.
pub(super) struct Driver {
    session: PolicySession,
    server: ServerConfig,
    sink: Arc<dyn EventSink>,
    opts: TransportOptions,
    endpoint: Result<Endpoint, TransportError>,
    stats: Arc<StatsCell>,
    /// The server's call credentials (gRFC A97), added to each call.
    call_creds: Option<Arc<CallCredentials>>,
}

impl Driver {
    pub(super) fn new(
        server: ServerConfig,
        cfg: PolicySessionConfig,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
        endpoint: Result<Endpoint, TransportError>,
        stats: Arc<StatsCell>,
    ) -> Self {
        Driver {
            session: PolicySession::new(cfg),
            call_creds: CallCredentials::of(&server),
            server,
            sink,
            opts,
            endpoint,
            stats,
        }
    }

    /// The stream ended with `code`, by `initiator`'s doing: tell the
    /// session.
    fn end(
        &mut self,
        initiator: Initiator,
        code: Code,
        message: String,
        after_response: bool,
    ) -> AttemptEnd {
        self.stats.lock().connected = false;
        if code == Code::Ok {
            tracing::debug!(server = %self.server.server_uri, "policy stream ended");
        } else {
            tracing::warn!(server = %self.server.server_uri, ?code, %message, "policy stream failed");
        }
        let end = StreamEnd {
            initiator,
            code: (code as i32).into(),
            message: format!("{}: {message}", self.server.server_uri),
        };
        self.session.handle_stream_end(now(), end);
        self.flush(None);
        AttemptEnd::Ended {
            had_response: after_response,
        }
    }

    /// Writes what the session wants written, hands its events to the sink
    /// and publishes the counters.
    fn flush(&mut self, io: Option<&mut Io>) {
        if let Some(io) = io {
            let now = now();
            while let Some(transmit) = self.session.poll_transmit(now) {
                match transmit {
                    // A closed receiver means the stream is ending; its end
                    // arrives on the receiving half.
                    PolicyTransmit::Discovery(request) => drop(io.out.send(request)),
                    PolicyTransmit::HealthCheck(request) => self.start_check(io, request),
                }
            }
        }
        while let Some(warning) = self.session.poll_warning() {
            self.warn(&warning);
        }
        let events: Vec<_> = std::iter::from_fn(|| self.session.poll_event()).collect();
        let delivered = !events.is_empty();
        if delivered {
            self.sink.deliver(&self.server, events);
        }
        let s = self.session.stats().clone();
        let mut stats = self.stats.lock();
        stats.server_failure = s.server_failure;
        stats.resource_updates_valid = s.resource_updates_valid;
        stats.resource_updates_invalid = s.resource_updates_invalid;
        let counts = stats
            .updates_by_type
            .entry(VALIDATING_POLICY_TYPE_URL.to_owned())
            .or_default();
        counts.valid = s.resource_updates_valid;
        counts.invalid = s.resource_updates_invalid;
        // Recorded after the events reached the cache: a wildcard watch
        // that sees the type answered has had the answer.
        if self.session.version().is_some() {
            stats
                .answered_types
                .insert(VALIDATING_POLICY_TYPE_URL.to_owned());
        }
    }

    /// Logs `warning`, naming the server. Server text goes through `Debug`,
    /// which escapes control characters: a server cannot forge log lines.
    fn warn(&self, warning: &PolicyWarning) {
        let server = &self.server.server_uri;
        match warning {
            PolicyWarning::Nacked { version, reason } => tracing::warn!(
                %server,
                version = ?version,
                reason = ?reason,
                "policy snapshot rejected (NACK sent); the last good policies keep serving"
            ),
            PolicyWarning::Skipped {
                version,
                policy,
                evaluation_mode,
            } => tracing::warn!(
                %server,
                version = ?version,
                policy = ?policy,
                evaluation_mode = ?evaluation_mode,
                "policy not considered: its evaluation mode is not Envoy or HTTP"
            ),
        }
    }

    /// Starts a health check unless one is in flight; it may take at most
    /// one interval.
    fn start_check(&self, io: &mut Io, mut request: HealthCheckRequest) {
        if io.check.is_some() {
            return;
        }
        request.time = Some(timestamp(SystemTime::now()));
        let mut client = io.client.clone();
        let limit = self.session.config().timing.health_check_interval;
        let request = with_authorization(request, io.authorization.clone());
        io.check = Some(Box::pin(async move {
            match tokio::time::timeout(limit, client.health_check(request)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
                Err(_) => Err(format!("no answer within {limit:?}")),
            }
        }));
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
        Driver::flush(self, io);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
    }

    fn idle_grace(&self) -> Option<Duration> {
        Some(self.opts.idle_grace)
    }

    fn span(&self, attempt: u64) -> tracing::Span {
        tracing::info_span!("policy_stream", server = %self.server.server_uri, attempt)
    }

    /// Opens a fresh channel and starts the stream's RPC on it.
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
        let authorization = match grpc_headers(self.call_creds.as_deref()) {
            Ok(headers) => headers,
            Err((code, message)) => {
                return Err(self.end(Initiator::Transport, code, message, false));
            }
        };
        self.stats.lock().streams_opened += 1;
        self.session.handle_connected(now());
        let client = ValidatingPolicyServiceClient::new(channel.clone())
            .max_decoding_message_size(self.opts.max_message_size)
            .max_encoding_message_size(self.opts.max_message_size);
        let (out, rx) = mpsc::unbounded_channel();
        let headers = authorization_headers(authorization.clone());
        let max = self.opts.max_message_size;
        let call: Call = Box::pin(open(channel, STREAM_PATH, headers, rx, max));
        Ok(Io {
            client,
            call,
            out,
            inbound: None,
            check: None,
            after_response: false,
            authorization,
        })
    }

    async fn next(io: &mut Io) -> Wake {
        tokio::select! {
            r = &mut io.call, if io.inbound.is_none() => Wake::Accepted(r),
            m = recv(&mut io.inbound) => Wake::Message(m),
            r = checked(&mut io.check) => Wake::Checked(r),
        }
    }

    fn handle(&mut self, io: &mut Io, wake: Wake) -> Option<AttemptEnd> {
        match wake {
            Wake::Accepted(Ok(stream)) => {
                io.inbound = Some(stream);
                self.session.handle_stream_accepted(now());
            }
            Wake::Accepted(Err(status)) | Wake::Message(Err(status)) => {
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
                self.stats.lock().connected = true;
                let _span = tracing::debug_span!(
                    "policy_snapshot",
                    version = %response.version_info,
                    policies = response.policies.len(),
                )
                .entered();
                self.session.handle_response(now(), response);
            }
            Wake::Checked(result) => {
                io.check = None;
                if let Err(e) = &result {
                    tracing::debug!(server = %self.server.server_uri, error = %e, "health check failed");
                }
                self.session.handle_health_check(now(), result);
            }
        }
        None
    }

    fn poll_close(&mut self, io: &mut Io) -> Option<AttemptEnd> {
        let end = self.session.poll_close()?;
        Some(self.end(
            end.initiator,
            Code::from_i32(end.code.as_i32()),
            end.message,
            io.after_response,
        ))
    }

    fn end_locally(&mut self, _io: Io, why: &str) {
        self.session.handle_stream_end(now(), StreamEnd::local(why));
        self.flush(None);
    }

    fn backing_off(&self, delay: Duration, _attempt: u64, _had_response: bool) {
        tracing::info!(
            server = %self.server.server_uri,
            ?delay,
            "reconnecting the policy stream"
        );
    }
}

fn timestamp(at: SystemTime) -> Timestamp {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}
