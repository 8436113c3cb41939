//! The tonic driver of the protocol core: one channel and one ADS stream
//! per management server, reconnects, the delta→SotW fallback, TLS.
//!
//! ```text
//!  AdsConnection (handle, Clone) ──commands──► driver task (one per server)
//!                                               │  owns a protocol::Session
//!                                               │  writes poll_transmit() to the stream
//!                                               │  feeds responses / stream ends / timeouts
//!                                               └─► EventSink::deliver(events)  (never blocks)
//! ```
//!
//! The driver is thin: it never looks at a nonce or a version; the
//! [`Session`](xdsfed_core::protocol::Session) decides what to send. What it owns
//! is IO and time:
//!
//! - the stream opens on the first subscription and closes `idle_grace`
//!   after the last one goes (the task stays, and reopens on the next);
//! - delta ADS by default; a server that answers `UNIMPLEMENTED` to
//!   `DeltaAggregatedResources` is spoken to in SotW from then on (logged
//!   once), unless the bootstrap pinned the variant;
//! - each connection attempt is a fresh channel, and has `connect_timeout`
//!   (20 s, gRPC's minimum connect timeout) to be established: TCP connect,
//!   TLS and HTTP/2 handshakes, up to the server answering on the
//!   connection (a readiness probe, `POST /grpc.health.v1.Health/Check`,
//!   whose answer's status does not matter), accepting the stream or
//!   answering it. A server that accepts TCP and never speaks fails the
//!   attempt as UNAVAILABLE: a server failure (gRFC A57) and a reason to
//!   fall back (gRFC A71). The session decides; the driver closes;
//! - the stream's messages are framed here (modules `frames` and `call`), not by
//!   tonic's `Streaming`, whose receive buffer grows to the largest
//!   response and is kept for the stream's life; each response is read
//!   into a buffer of its own length and freed once decoded. tonic still
//!   owns the connection;
//! - every stream end waits a jittered exponential backoff (1 s, ×1.6,
//!   ±20 %, 120 s cap) counted from the start of the attempt; a response
//!   resets it, so a stream that had one reconnects after at most the
//!   initial delay, and never more often than once per delay.

pub(crate) mod call;
pub(crate) mod channel;
mod driver;
mod frames;
mod presized;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;

pub use channel::{TransportError, endpoint};
pub use xdsfed_core::backoff::BackoffConfig;

use crate::source::SourceHandle;
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig};
use xdsfed_core::protocol::{
    AuthorityFilter, CoreEvent, DEFAULT_DOES_NOT_EXIST_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT,
    TypeUpdates,
};
use xdsfed_core::types::TypeRegistry;

/// Where a connection's events go. Called by the driver task after each
/// input; it must not block (hand the events on, e.g. to latest-value
/// channels), or the stream stalls.
pub(crate) trait EventSink: Send + Sync + 'static {
    /// Events from the stream to `server`, in order.
    fn deliver(&self, server: &ServerConfig, events: Vec<CoreEvent>);
}

pub use xdsfed_core::protocol::{DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_MAX_TEXT_MESSAGE_SIZE};

/// How connections behave. The defaults are gRPC's.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// The node sent on each stream's first request (client features are
    /// added by the protocol core).
    pub node: Node,
    /// See [`SessionConfig::does_not_exist_timeout`](xdsfed_core::protocol::SessionConfig).
    pub does_not_exist_timeout: Duration,
    /// How long a stream with no subscriptions stays open (default 30 s).
    pub idle_grace: Duration,
    /// Reconnect backoff.
    pub backoff: BackoffConfig,
    /// HTTP/2 keepalive ping interval (none by default).
    pub keepalive_interval: Option<Duration>,
    /// How long to wait for a keepalive ping's answer.
    pub keepalive_timeout: Option<Duration>,
    /// The largest message encoded or decoded (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`], 256 MiB; docs/client.md says why). A
    /// response over it ends the stream; the error names its size and this
    /// limit.
    pub max_message_size: usize,
    /// The largest JSON or YAML message read, when lower than
    /// `max_message_size` (default [`DEFAULT_MAX_TEXT_MESSAGE_SIZE`],
    /// 32 MiB): a REST-JSON response, an HTTP CDN file served as JSON, a
    /// `.json` or `.yaml` file of a filesystem source. Over it the body is
    /// refused as too large, as over `max_message_size`.
    pub max_text_message_size: usize,
    /// The handshake deadline: how long a connection attempt may take
    /// until the server shows it speaks HTTP/2 (default 20 s, gRPC's
    /// minimum connect timeout). It covers the TCP connect, the TLS and
    /// HTTP/2 handshakes, up to the first answer from the server: to the
    /// readiness probe sent on the new connection, or on the stream itself
    /// (tonic does not report the server's HTTP/2 SETTINGS on their own).
    /// Past it the attempt is a connection failure (gRFC A57
    /// `server_failure`, gRFC A71 fallback), retried with backoff on a new
    /// connection.
    pub connect_timeout: Duration,
    /// How long an established stream (the handshake deadline met) may go
    /// without a response before it counts as a server failure (ended
    /// `DEADLINE_EXCEEDED`). `None`, the default, waits for ever, as gRPC
    /// and Envoy do: a server has nothing to send for names that do not
    /// exist, which the does-not-exist timer answers.
    pub first_response_timeout: Option<Duration>,
}

impl TransportOptions {
    /// The bound on a JSON or YAML message: the lower of
    /// `max_text_message_size` and `max_message_size`.
    pub fn text_message_limit(&self) -> usize {
        self.max_text_message_size.min(self.max_message_size)
    }
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            node: Node::default(),
            does_not_exist_timeout: DEFAULT_DOES_NOT_EXIST_TIMEOUT,
            idle_grace: Duration::from_secs(30),
            backoff: BackoffConfig::default(),
            keepalive_interval: None,
            keepalive_timeout: None,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_text_message_size: DEFAULT_MAX_TEXT_MESSAGE_SIZE,
            connect_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            first_response_timeout: None,
        }
    }
}

/// A connection's counters, named after gRFC A78.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Whether a stream is up and has received a response (`connected`).
    pub connected: bool,
    /// Streams that failed before any response (`server_failure`).
    pub server_failure: u64,
    /// Valid resources received (`resource_updates_valid`).
    pub resource_updates_valid: u64,
    /// Rejected resources received (`resource_updates_invalid`).
    pub resource_updates_invalid: u64,
    /// Both counters per type URL (A78's `grpc.xds.resource_type` label).
    pub updates_by_type: BTreeMap<String, TypeUpdates>,
    /// Names of authorities this server may not deliver, ignored.
    pub foreign_names_ignored: u64,
    /// Streams opened so far.
    pub streams_opened: u64,
    /// The variant spoken (SotW after a fallback).
    pub variant: ApiVariant,
    /// Type URLs the server has answered at least once, recorded only after
    /// that response's events reached the cache: a wildcard subscription
    /// whose type is here has had its answer, even an empty one.
    pub answered_types: BTreeSet<String>,
}

/// Marks a [`SourceHandle`] as an ADS connection's.
#[derive(Debug)]
pub(crate) enum AdsKind {}

/// A handle on the ADS connection to one server. Cloning is cheap; the
/// driver task ends when every handle is dropped or on
/// [`shutdown`](SourceHandle::shutdown).
pub(crate) type AdsConnection = SourceHandle<AdsKind>;

impl SourceHandle<AdsKind> {
    /// Spawns the driver task for `server` on the current tokio runtime
    /// (panics outside one, like `tokio::spawn`). Nothing connects until the
    /// first subscription. A server whose channel cannot be set up (bad
    /// target, unreadable TLS files) reports the error as
    /// [`CoreEvent::StreamFailed`] on every attempt.
    pub(crate) fn spawn(
        server: ServerConfig,
        authorities: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let endpoint = endpoint(&server, &opts);
        Self::start(server, authorities, types, sink, opts, endpoint)
    }

    fn start(
        server: ServerConfig,
        authorities: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
        endpoint: Result<tonic::transport::Endpoint, TransportError>,
    ) -> Self {
        let (handle, commands, stats) = Self::new(server.api);
        let backoff = opts.backoff;
        let driver = driver::Driver::new(driver::Parts {
            server,
            authorities,
            types,
            sink,
            opts,
            endpoint,
            stats,
        });
        tokio::spawn(crate::source::reconnect::run(driver, commands, backoff));
        handle
    }
}
