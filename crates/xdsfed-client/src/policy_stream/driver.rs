//! The driver task: IO and time for one [`PolicySession`].
//!
//! ```text
//!   WaitingForInterest ──subscribe──► Streaming ──idle_grace, nothing watched──┐
//!          ▲                           │ stream ends                            │
//!          │                           ▼                                        │
//!          └────────────────────── BackingOff (the ADS transport's backoff) ◄──┘
//! ```
//!
//! Thin, like the ADS driver: it never looks at a version or a nonce. Each
//! attempt opens a fresh channel; a health check runs beside the stream as
//! a unary call (one at a time, bounded by its interval).

use crate::random::random_u64;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use envoy_types::pb::google::protobuf::Timestamp;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::Endpoint;
use tonic::{Code, Status, Streaming};
use tracing::Instrument as _;

use super::stub::validating_policy_service_client::ValidatingPolicyServiceClient;
use crate::source::driving::{IdleTimer, now, sleep_until};
use crate::source::handle::{Command, Commands, StatsCell};
use crate::transport::{EventSink, TransportError, TransportOptions};
use xdsfed_core::backoff::ReconnectPolicy;
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::policy_stream::PolicySessionConfig;
use xdsfed_core::policy_stream::wire::{
    HealthCheckRequest, PolicyDiscoveryRequest, PolicyDiscoveryResponse,
};
use xdsfed_core::policy_stream::{PolicySession, PolicyTransmit, PolicyWarning};
use xdsfed_core::protocol::StreamEnd;
use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

type Call =
    Pin<Box<dyn Future<Output = Result<Streaming<PolicyDiscoveryResponse>, Status>> + Send>>;
type Check = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The next message of `inbound`, or never while there is no stream yet.
async fn recv(
    inbound: &mut Option<Streaming<PolicyDiscoveryResponse>>,
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

enum Outcome {
    Ended { after_response: bool },
    Idle,
    Shutdown,
}

enum Wake {
    Command(Option<Command>),
    Accepted(Result<Streaming<PolicyDiscoveryResponse>, Status>),
    Message(Result<Option<PolicyDiscoveryResponse>, Status>),
    Checked(Result<(), String>),
    Timer,
    Idle,
}

/// The IO half of an open stream.
struct Io {
    client: ValidatingPolicyServiceClient<tonic::transport::Channel>,
    out: mpsc::UnboundedSender<PolicyDiscoveryRequest>,
    check: Option<Check>,
}

pub(super) struct Driver {
    session: PolicySession,
    server: ServerConfig,
    sink: Arc<dyn EventSink>,
    opts: TransportOptions,
    endpoint: Result<Endpoint, TransportError>,
    commands: Commands,
    stats: Arc<StatsCell>,
}

impl Driver {
    pub(super) fn new(
        server: ServerConfig,
        cfg: PolicySessionConfig,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
        endpoint: Result<Endpoint, TransportError>,
        commands: Commands,
        stats: Arc<StatsCell>,
    ) -> Self {
        Driver {
            session: PolicySession::new(cfg),
            server,
            sink,
            opts,
            endpoint,
            commands,
            stats,
        }
    }

    pub(super) async fn run(mut self) {
        let mut policy = ReconnectPolicy::new(self.opts.backoff, random_u64());
        let mut attempt: u64 = 0;
        loop {
            if !self.session.has_subscriptions() && !self.wait(None).await {
                return;
            }
            attempt += 1;
            let span =
                tracing::info_span!("policy_stream", server = %self.server.server_uri, attempt);
            policy.started(now());
            let after_response = match self.run_stream().instrument(span).await {
                Outcome::Shutdown => return,
                Outcome::Idle => {
                    policy.closed_locally();
                    continue;
                }
                Outcome::Ended { after_response } => after_response,
            };
            let at = policy.ended(now(), after_response);
            tracing::info!(
                server = %self.server.server_uri,
                delay = ?at.saturating_duration_since(now()),
                "reconnecting the policy stream"
            );
            if !self.wait(Some(at)).await {
                return;
            }
        }
    }

    /// Without a stream: applies commands until `deadline` (or, without
    /// one, until something is subscribed). `false` on shutdown.
    async fn wait(&mut self, deadline: Option<Instant>) -> bool {
        loop {
            self.flush(None);
            if deadline.is_none() && self.session.has_subscriptions() {
                return true;
            }
            tokio::select! {
                cmd = self.commands.recv() => {
                    if !self.apply(cmd) {
                        return false;
                    }
                }
                () = sleep_until(deadline) => return true,
            }
        }
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
        let client = ValidatingPolicyServiceClient::new(channel)
            .max_decoding_message_size(self.opts.max_message_size)
            .max_encoding_message_size(self.opts.max_message_size);
        let (out, rx) = mpsc::unbounded_channel();
        let mut opener = client.clone();
        let mut call: Call = Box::pin(async move {
            let response = opener
                .policy_discovery_stream(UnboundedReceiverStream::new(rx))
                .await?;
            Ok(response.into_inner())
        });
        let mut io = Io {
            client,
            out,
            check: None,
        };
        let mut inbound = None;
        let mut after_response = false;
        let mut idle = IdleTimer::default();
        loop {
            if let Some(end) = self.session.poll_close() {
                return self.end(
                    Code::from_i32(end.code.as_i32()),
                    end.message,
                    after_response,
                );
            }
            self.flush(Some(&mut io));
            let idle_at = idle.deadline(self.session.has_subscriptions(), self.opts.idle_grace);
            let wake = tokio::select! {
                cmd = self.commands.recv() => Wake::Command(cmd),
                r = &mut call, if inbound.is_none() => Wake::Accepted(r),
                m = recv(&mut inbound) => Wake::Message(m),
                r = checked(&mut io.check) => Wake::Checked(r),
                () = sleep_until(self.session.poll_timeout()) => Wake::Timer,
                () = sleep_until(idle_at) => Wake::Idle,
            };
            if let Some(outcome) = self.on_wake(wake, &mut io, &mut inbound, &mut after_response) {
                return outcome;
            }
        }
    }

    /// Feeds what woke the driver to the session; `Some` when the stream
    /// is over.
    fn on_wake(
        &mut self,
        wake: Wake,
        io: &mut Io,
        inbound: &mut Option<Streaming<PolicyDiscoveryResponse>>,
        after_response: &mut bool,
    ) -> Option<Outcome> {
        match wake {
            Wake::Command(cmd) => {
                if !self.apply(cmd) {
                    self.session
                        .handle_stream_end(now(), StreamEnd::local("shut down"));
                    self.flush(None);
                    return Some(Outcome::Shutdown);
                }
            }
            Wake::Accepted(Ok(stream)) => {
                *inbound = Some(stream);
                self.session.handle_stream_accepted(now());
            }
            Wake::Accepted(Err(status)) | Wake::Message(Err(status)) => {
                let message = status.message().to_owned();
                return Some(self.end(status.code(), message, *after_response));
            }
            Wake::Message(Ok(None)) => {
                let message = "stream closed by the server".to_owned();
                return Some(self.end(Code::Ok, message, *after_response));
            }
            Wake::Message(Ok(Some(response))) => {
                *after_response = true;
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
            Wake::Timer => self.session.handle_timeout(now()),
            Wake::Idle => {
                self.session
                    .handle_stream_end(now(), StreamEnd::local("idle"));
                self.flush(None);
                return Some(Outcome::Idle);
            }
        }
        None
    }

    fn end(&mut self, code: Code, message: String, after_response: bool) -> Outcome {
        self.stats.lock().connected = false;
        if code == Code::Ok {
            tracing::debug!(server = %self.server.server_uri, "policy stream ended");
        } else {
            tracing::warn!(server = %self.server.server_uri, ?code, %message, "policy stream failed");
        }
        let end = StreamEnd::new(
            code as i32,
            format!("{}: {message}", self.server.server_uri),
        );
        self.session.handle_stream_end(now(), end);
        self.flush(None);
        Outcome::Ended { after_response }
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
        io.check = Some(Box::pin(async move {
            match tokio::time::timeout(limit, client.health_check(request)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
                Err(_) => Err(format!("no answer within {limit:?}")),
            }
        }));
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
