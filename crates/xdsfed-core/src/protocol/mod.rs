//! The sans-IO xDS protocol core: one [`Session`] per ADS stream to one
//! management server, for both incremental (delta) and state-of-the-world
//! ADS.
//!
//! The core does no IO and reads no clock: the driver (see
//! [`crate::transport`]) writes what it returns and feeds it what arrives,
//! with the current time.
//!
//! ```text
//!  subscribe / unsubscribe ──►┐             ┌─► poll_transmit ─► (Delta)DiscoveryRequest
//!  handle_connected         ──►│             │     (ACK / NACK / subscription changes)
//!  handle_*_response        ──►│   Session   ├─► poll_event    ─► CoreEvent ─► cache
//!  handle_stream_end        ──►│             │
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
//! let Some(Request::Delta(first)) = session.poll_transmit(now) else { unreachable!() };
//! assert!(first.node.is_some()); // the first request of a stream carries the node
//! assert_eq!(first.resource_names_subscribe.len(), 1);
//! // the does-not-exist timer started when the request left (gRFC A57)
//! assert!(session.poll_timeout().is_some());
//! ```
//!
//! # Where each rule lives
//!
//! - [`session`]: phases, the four method families, stream up/down;
//! - `type_state`: what survives a reconnect (`Durable`) and what does not
//!   (`PerStream`), subscription bookkeeping, wildcard;
//! - `ingest`: per-resource rules shared by both variants (names,
//!   authorities, duplicates, validation, TTL, heartbeats, deletions);
//! - `delta`, `sotw`: building requests and reading responses per variant;
//! - [`ack`]: NACK details;
//! - `timers`: the one timer table.
//!
//! `docs/rules.md` maps every rule of the spec to the test that checks it.

pub mod ack;
mod config;
mod delta;
pub mod event;
mod ingest;
pub mod session;
mod sotw;
mod timers;
mod type_state;

#[cfg(test)]
mod tests;

pub use ack::Rejected;
pub use config::{
    AuthorityFilter, DEFAULT_DOES_NOT_EXIST_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT,
    FEATURE_RESOURCE_IN_SOTW, FEATURE_RESOURCE_TTL, SessionConfig, with_client_features,
};
pub use event::{CoreEvent, RemovedReason, ResourceKey};
pub use ingest::RESOURCE_LOCATOR_TYPE_URL;
pub(crate) use ingest::locator_key;
pub use session::{Initiator, Phase, Request, Session, SessionStats, StreamEnd};
pub use sotw::RESOURCE_WRAPPER_TYPE_URL;
pub use type_state::{glob_of, is_glob};
