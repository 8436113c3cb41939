//! The xdsfed runtime: [`XdsClient`], its cache and watch handles, and the
//! IO of every source kind, driving the sans-IO sessions of
//! [`xdsfed_core`].
//!
//! ```text
//! bootstrap ─► authority registry ─► ServerKey ─► ServerId ─► one source per server
//! watch(type, name) ─► name ─► authority ─► servers ─► subscribe on that source
//! response ─► session (xdsfed-core) ─► decode + validate ─► cache ─► watchers
//!                                   └─► ACK / NACK back on the stream
//! ```
//!
//! # Start here
//!
//! [`XdsClient`] (built from a [`Bootstrap`]) hands out [`Watch`],
//! [`WildcardWatch`] and [`CollectionWatch`] handles, each a
//! [`futures::Stream`] of [`WatchEvent`]s or [`CollectionEvent`]s. The
//! root re-exports are the stable surface (docs/client.md, "What is public
//! and stable").
//!
//! ```no_run
//! use futures::StreamExt;
//! use xdsfed_client::{Bootstrap, ClusterType, WatchEvent, XdsClient};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = XdsClient::builder(Bootstrap::from_file("bootstrap.yaml")?).build()?;
//! let mut payments = client
//!     .watch::<ClusterType>("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments")?;
//! while let Some(event) = payments.next().await {
//!     if let WatchEvent::Changed(cluster) = event {
//!         println!("{} updated", cluster.name());
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Source kinds are features
//!
//! ADS over gRPC is always built. Every other kind is opt in:
//!
//! | feature | source | brings in |
//! | --- | --- | --- |
//! | `rest` | REST-JSON polling | hyper's HTTP/1.1 client |
//! | `cdn` | HTTP CDN (xDS TP1 list collections over GETs) | hyper's HTTP/1.1 client |
//! | `file` | files, reloaded on change | notify |
//! | `policy-stream` | the policy-distribution stream | nothing more (tonic, as ADS) |
//! | `all-sources` | all of the above | |
//!
//! A bootstrap that names a server of a kind this build left out fails
//! [`XdsClientBuilder::build`] with [`BuildError::SourceKindNotBuilt`],
//! naming the server and the feature.
//!
//! # Modules
//!
//! - [`client`]: the client and its builder; [`watch`]: the handles.
//! - [`cache`]: the latest value of every watched resource.
//! - [`transport`]: the options every source takes, and ADS over tonic.
//! - `source` (private): the seam every source kind plugs into, the one
//!   reconnecting driver, and the IO of the kinds beside ADS;
//!   `policy_stream` (feature `policy-stream`): the policy stream's stub,
//!   public for tests that talk to a policy server directly.
//! - [`state_dir`]: the last-known-good copies on disk (opt in).
//! - [`publish`]: resources written as the files of a directory a static
//!   host serves to HTTP CDN sources (`xdsfed publish`).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod cache;
pub mod client;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "policy-stream")]
pub mod policy_stream;
pub mod publish;
mod random;
pub(crate) mod source;
pub mod state_dir;
mod status;
mod tls;
pub mod transport;
pub mod watch;

pub use cache::Cache;
pub use client::{BuildError, WatchError, WeakXdsClient, XdsClient, XdsClientBuilder};
pub use transport::TransportOptions;
pub use watch::{
    CollectionEvent, CollectionSet, CollectionSetEvent, CollectionWatch, SetEvent, Watch,
    WatchEvent, WatchSet, WildcardWatch,
};
pub use xdsfed_core::{
    Bootstrap, ClientStatus, ClusterType, EndpointType, ErrorKind, LbEndpointType, ListenerType,
    ResourceKey, ResourceState, ResourceStatus, ResourceType, RouteConfigurationType,
    StateDirStatus, XdsError,
};
