//! The xdsfed runtime: everything one federated xDS client needs.
//!
//! ```text
//! bootstrap ─► authority registry ─► ServerKey ─► one ADS stream per server
//! watch(type, name) ─► name ─► authority ─► servers ─► subscribe on that stream
//! response ─► protocol (sans-IO) ─► decode + validate ─► cache ─► watchers
//!                                └─► ACK / NACK back on the stream
//! ```
//!
//! # Start here
//!
//! The types an embedder uses are re-exported here, at the crate root:
//! [`XdsClient`] (built from a [`Bootstrap`]) hands out [`Watch`],
//! [`WildcardWatch`] and [`CollectionWatch`] handles, each a
//! [`futures::Stream`] of [`WatchEvent`]s or [`CollectionEvent`]s. The
//! root re-exports are the stable surface; the modules below hold the rest
//! (docs/client.md, "What is public and stable"). The [`watch`] module
//! shows the handles with `futures::StreamExt`.
//!
//! ```no_run
//! use xdsfed_core::{Bootstrap, ClusterType, WatchEvent, XdsClient};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = XdsClient::builder(Bootstrap::from_file("bootstrap.yaml")?).build()?;
//! let mut payments = client
//!     .watch::<ClusterType>("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments")?;
//! while let Some(event) = payments.next().await {
//!     if let WatchEvent::Changed(cluster) = event {
//!         println!("{} updated", cluster.name);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Modules
//!
//! - [`name`]: `xdstp://` names, canonical cache keys, directives.
//! - [`bootstrap`]: gRPC A47 JSON, YAML and Envoy-style bootstraps.
//! - [`authority`]: which servers serve which authority; stream sharing.
//! - [`types`]: resource types, decoding and validation.
//! - [`protocol`]: the sans-IO ADS state machine (delta and SotW).
//! - [`policy_stream`]: the policy-distribution stream, a second kind of
//!   source beside ADS.
//! - [`transport`]: the tonic driver of the protocol core.
//! - [`cache`], [`watch`], [`client`]: the latest-value cache, the watch
//!   handles and the client that connects them to the transport.
//! - [`state_dir`]: the last-known-good copies on disk (opt in).
//! - [`publish`]: resources as the files of a directory a static host
//!   serves to HTTP CDN sources (`xdsfed publish`).
//! - [`status`], [`error`]: the CSDS-style dump, and errors as watchers see
//!   them.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod authority;
pub mod bootstrap;
pub mod cache;
pub mod client;
pub mod error;
mod federation;
mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod json;
pub mod name;
pub mod policy_stream;
pub mod protocol;
pub mod publish;
pub mod source;
pub mod state_dir;
pub mod status;
pub mod text_limits;
pub mod transport;
pub mod types;
pub mod watch;

pub use bootstrap::Bootstrap;
pub use cache::{ResourceState, ResourceStatus};
pub use client::{BuildError, WatchError, XdsClient, XdsClientBuilder};
pub use error::{ErrorKind, XdsError};
pub use protocol::ResourceKey;
pub use state_dir::StateDirStatus;
pub use status::ClientStatus;
pub use transport::TransportOptions;
pub use types::{
    ClusterType, EndpointType, LbEndpointType, ListenerType, ResourceType, RouteConfigurationType,
};
pub use watch::{
    CollectionEvent, CollectionWatch, SetEvent, Watch, WatchEvent, WatchSet, WildcardWatch,
};
