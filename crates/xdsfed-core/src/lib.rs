//! The sans-IO heart of xdsfed: everything a federated xDS client decides,
//! and nothing it waits for.
//!
//! ```text
//! bootstrap ─► authority registry ─► ServerKey ─► ServerId ─► one session per server
//! watch(type, name) ─► name ─► authority ─► servers ─► subscribe in that session
//! response ─► protocol session ─► decode + validate ─► federation ─► entry states
//!                              └─► ACK / NACK to send
//! ```
//!
//! This crate opens no socket, spawns no task, sleeps never, reads no clock
//! and draws no random number of its own: every session takes `now` and
//! its random seed from its caller, returns what to send and when to be
//! woken, and is tested in virtual time. The runtime that drives these
//! sessions over tonic, hyper and the filesystem, with a cache and watch
//! handles, is the `xdsfed-client` crate. The one kind of IO done here is
//! reading the local files a bootstrap names (the bootstrap itself,
//! certificates), synchronously, when a bootstrap is loaded.
//!
//! # Modules
//!
//! - [`name`]: `xdstp://` names, canonical cache keys, directives.
//! - [`bootstrap`]: gRPC A47 JSON, YAML and Envoy-style bootstraps.
//! - [`authority`]: which servers serve which authority; stream sharing.
//! - [`types`]: resource types, decoding and validation.
//! - [`protocol`]: the ADS session (delta and SotW).
//! - [`federation`]: fallback (A71), `#alt`, redirects and list collections
//!   across servers, and the entry states they produce.
//! - [`entry`]: what watchers see of a resource and its gRFC A88
//!   transitions.
//! - [`source`]: the sessions of the sources beside ADS (REST-JSON, HTTP
//!   CDN, files); [`policy_stream`]: the policy-distribution stream's.
//! - [`backoff`]: reconnect backoff and jitter, from an injected seed.
//! - [`state_dir`]: the state directory's record format and write plan.
//! - [`publish`]: where a resource's file lives in a directory a static
//!   host serves to HTTP CDN sources, and what it holds (`xdsfed publish`).
//! - [`status`], [`error`]: the CSDS-style dump, and errors as watchers see
//!   them.
//! - [`json`], [`text_limits`]: the protobuf JSON mapping, and the bounds on
//!   text bodies.
//! - [`jwt_token`]: the token of gRFC A97's JWT token file call
//!   credential: what a file must hold, and when it is read again.
//! - [`hash`], [`queue`]: maps keyed by server-chosen names, small sets, and
//!   output queues that give back the room a burst took.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod authority;
pub mod backoff;
pub mod bootstrap;
pub mod deadlines;
pub mod entry;
pub mod error;
pub mod federation;
pub mod file;
pub mod hash;
pub mod json;
pub mod jwt_token;
pub mod name;
pub mod policy_stream;
pub mod protocol;
pub mod publish;
pub mod queue;
pub mod source;
pub mod state_dir;
pub mod status;
pub mod text_limits;
pub mod tls;
pub mod types;
pub mod version;

pub use bootstrap::Bootstrap;
pub use entry::{ResourceState, ResourceStatus};
pub use error::{ErrorKind, XdsError};
pub use protocol::ResourceKey;
pub use state_dir::StateDirStatus;
pub use status::ClientStatus;
pub use types::{
    ClusterType, EndpointType, LbEndpointType, ListenerType, ResourceType, RouteConfigurationType,
};
pub use version::Version;
