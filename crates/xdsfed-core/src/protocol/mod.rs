//! The sans-IO xDS protocol core: one [`Session`] per ADS stream to one
//! management server, for both incremental (delta) and state-of-the-world
//! ADS.
//!
//! The core does no IO and reads no clock: the driver (see
//! `xdsfed-client`'s transport) writes what it returns and feeds it what arrives,
//! with the current time.
//!
//! ```text
//!  subscribe / unsubscribe ──►┐             ┌─► poll_transmit ─► (Delta)DiscoveryRequest
//!  handle_connected         ──►│             │     (ACK / NACK / subscription changes)
//!  handle_connection_ready  ──►│             │
//!  handle_stream_accepted   ──►│   Session   ├─► poll_event    ─► CoreEvent ─► cache
//!  handle_*_response        ──►│             │
//!  handle_stream_end        ──►│             ├─► poll_close    ─► the driver ends the stream
//!  handle_timeout           ──►┘             └─► poll_timeout  ─► the driver's sleep
//! ```
//!
//! # A session's life
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use envoy_types::pb::envoy::config::core::v3::Node;
//! use xdsfed_core::protocol::{Request, ResourceKey, Session, SessionConfig};
//! use xdsfed_core::types::TypeRegistry;
//!
//! let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
//! let mut session = Session::new(SessionConfig::new(Node::default()), Arc::new(TypeRegistry::new()));
//! session.subscribe(ResourceKey::new(cds, "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1"));
//!
//! let now = Instant::now();
//! assert!(session.poll_transmit(now).is_none()); // no stream yet
//! session.handle_connected(now);
//! // the handshake deadline runs until the server speaks
//! assert_eq!(session.poll_timeout(), Some(now + session.config().handshake_timeout));
//! let Some(Request::Delta(first)) = session.poll_transmit(now) else { unreachable!() };
//! assert!(first.node.is_some()); // the first request of a stream carries the node
//! assert_eq!(first.resource_names_subscribe.len(), 1);
//! // the server accepts the stream: the does-not-exist timer of what was
//! // sent starts now (gRFC A57: sent on an established stream)
//! session.handle_stream_accepted(now);
//! assert_eq!(session.poll_timeout(), Some(now + session.config().does_not_exist_timeout));
//! ```
//!
//! # The stream's deadlines
//!
//! A new stream has `handshake_timeout` (20 s, gRPC's minimum connect
//! timeout) to be established: its connection proved ready
//! (`handle_connection_ready`), the server accepted it
//! (`handle_stream_accepted`) or answered it. Past that,
//! [`Session::poll_close`] asks the driver to end it as UNAVAILABLE, a
//! server failure. An established stream may also have a
//! `first_response_timeout` (off by default). Tests:
//! `tests/deadlines.rs`.
//!
//! # Where each rule lives
//!
//! - `session`: [`Session`], its phases, the four method families, stream
//!   up/down;
//! - `event`: [`CoreEvent`], what the core tells the cache;
//! - `type_state`: what survives a reconnect (`Durable`) and what does not
//!   (`PerStream`), subscription bookkeeping, wildcard;
//! - `ingest`: per-resource rules shared by both variants (names,
//!   authorities, duplicates, validation, TTL, heartbeats, deletions);
//! - `delta`, `sotw`: building requests and reading responses per variant;
//! - `ack`: ACK and NACK, and why a resource is [`Rejected`];
//! - `wire`: [`WireDeltaResponse`], a delta response read in place, as the
//!   client's transport reads them;
//! - `undecoded`: what a transport could not decode of a SotW response
//!   (REST-JSON): [`UndecodedResource`]s, and responses rejected whole;
//! - `timers`: the one timer table (does-not-exist, TTL, the stream's
//!   deadlines).
//!
//! `docs/rules.md` maps every rule of the spec to the test that checks it.

// Every public item of these modules is re-exported below: `protocol::X`
// is its one path.
mod absences;
mod ack;
mod config;
mod delta;
mod event;
mod glob;
mod ingest;
mod resume;
mod session;
mod sotw;
mod stream_end;
mod timers;
mod type_state;
mod undecoded;
mod wire;

#[cfg(test)]
mod tests;

pub use ack::Rejected;
pub use config::{
    AuthorityFilter, DEFAULT_DOES_NOT_EXIST_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT,
    FEATURE_LB_ENDPOINT_COLLECTION, FEATURE_RESOURCE_IN_SOTW, FEATURE_RESOURCE_TTL, SessionConfig,
    with_client_features,
};
pub use event::{CoreEvent, INTERNED_TYPE_URLS, RemovedReason, ResourceKey, TypeUrl};
pub use glob::{GlobKey, glob_of, is_glob, with_glob_of};
pub use ingest::RESOURCE_LOCATOR_TYPE_URL;
pub(crate) use ingest::{decode_registered, locator_key, locator_target, same_name};
pub use session::{Phase, Request, Session, SessionStats, TypeUpdates};
pub use sotw::RESOURCE_WRAPPER_TYPE_URL;
pub use stream_end::{Initiator, SourceKind, StreamEnd, StreamFailure};
pub use undecoded::UndecodedResource;
pub use wire::{
    NotText, WireAny, WireDeltaResponse, WireResource, WireResourceError, WireResourceName,
    WireStatus,
};

/// The default `max_message_size` of the client's transport options: 256 MiB. xDS TP1's
/// design load puts 100 000 clusters (about 24 MB) or a million endpoints
/// in one delta response; this is ten times the first, and still a bound,
/// so a broken server cannot make the client buffer gigabytes for one
/// message.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// The default `max_text_message_size` of the client's transport options: 32 MiB. The
/// protobuf JSON mapping takes several times a text's size to decode
/// (about 2.5 times for realistic clusters, up to about 25 times for
/// resources that are nothing but their type; docs/performance.md), so text
/// gets a bound of its own, an eighth of the binary one. 32 MiB of JSON
/// is some 75 000 clusters.
pub const DEFAULT_MAX_TEXT_MESSAGE_SIZE: usize = 32 * 1024 * 1024;
