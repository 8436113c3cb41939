//! Federated xDS management servers on loopback, for tests and for users'
//! federation testbeds.
//!
//! A [`Testbed`] starts several [`Server`]s on `127.0.0.1`, each serving one
//! or more authorities over ADS, both `StreamAggregatedResources` (state of
//! the world) and `DeltaAggregatedResources` (incremental). Each server has
//!
//! - a [`Store`] of resources as `Any`, set and deleted at run time and
//!   pushed at once to every subscribed stream, versioned by content hash;
//! - an ACK tracker ([`Server::wait_acked`], [`Server::clients`]);
//! - [`Faults`] to misbehave on purpose, switchable at run time, and
//!   [`Server::restart`] on the same port;
//! - a [`Recorder`] of every request and response per stream, bounded by
//!   [`RecordingLimits`] and counting what it dropped.
//!
//! A [`Tarpit`] is the server that accepts TCP connections and never
//! speaks, for testing a client's handshake deadline.
//!
//! ```text
//!            ┌──────────── Testbed ─────────────┐
//!  client ──►│ Server "cloud"  (cloud.example)  │◄── set_resource / set_faults / wait_acked
//!  client ──►│ Server "onprem" (onprem.example) │◄── scenario schedule, control API
//!            │ backends (gRPC health servers)   │
//!            └──────────────────────────────────┘
//! ```
//!
//! ```no_run
//! use std::time::Duration;
//! use envoy_types::pb::envoy::config::cluster::v3::Cluster;
//! use xdsfed_testbed::{ServerSpec, Testbed};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])]).await?;
//! let cloud = testbed.server("cloud").expect("started above");
//! let name = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments";
//! cloud.set_message(name, &Cluster { name: name.into(), ..Default::default() })?;
//! // … point a client at cloud.uri() …
//! let report = cloud
//!     .wait_acked("type.googleapis.com/envoy.config.cluster.v3.Cluster", name, None, Duration::from_secs(5))
//!     .await?;
//! assert!(report.nacked_by.is_empty());
//! # Ok(()) }
//! ```
//!
//! Scenario files ([`scenario`]) describe a whole testbed in YAML, with
//! Envoy resources written through the protobuf JSON mapping.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod ack;
mod ads;
pub mod backend;
pub mod cdn;
pub mod faults;
pub mod policy;
pub mod recording;
pub mod resources;
pub mod rest;
pub mod scenario;
mod server;
pub mod store;
pub mod subscription;
mod testbed;
pub mod version;

pub use ack::{AckReport, ClientInfo, Nack, Outcome};
pub use backend::Backend;
pub use faults::{Faults, Injected, Tarpit};
pub use recording::{Message, Recorder, RecordingLimits, StreamRecord, Variant};
pub use server::{Protocol, Server, ServerError, ServerSpec, ServerTls};
pub use store::{Store, StoreError, StoredResource};
pub use testbed::{Testbed, TestbedError};
