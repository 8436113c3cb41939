//! The Listener → RouteConfiguration → Cluster → ClusterLoadAssignment graph:
//! follow it across xDS authorities, warm it, publish consistent snapshots.
//!
//! A data plane needs a complete view, not loose resources: the listener, its
//! routes, every cluster those routes can reach and each cluster's endpoints,
//! all from one moment. This crate turns the xDS client's per-resource
//! updates into such views.
//!
//! ```text
//!   xDS client ── Update<T> per watched resource ──► GraphEngine ── Arc<Snapshot> ──► SnapshotCell ──► readers
//!        ▲                                             │
//!        └───────────── Watch / Unwatch ───────────────┘
//! ```
//!
//! [`GraphEngine`] is sans-IO: no clock, no tasks, no channels. A driver
//! feeds it the client's events and the current time, and carries out what it
//! asks for (see the [polling order](engine#polling-order)). [`ConfigGraph`]
//! is that driver over an `XdsClient`: one task, started with
//! `ConfigGraph::builder(client).listener(name).start()` (see [`driver`]). The rules it
//! applies (readiness, make before break, garbage collection, where errors
//! go) are in the [`engine`] module and in `docs/graph.md`.
//!
//! The engine builds on `xdsfed-core` alone; `ConfigGraph` and the
//! `SnapshotCell` its readers wait on are the `driver` feature (on by
//! default), which brings in `xdsfed-client` and tokio.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use envoy_types::pb::envoy::config::cluster::v3::Cluster;
//! use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
//! use xdsfed_core::types::ClusterView;
//! use xdsfed_graph::{GraphEngine, GraphOptions, Provenance, Roots, Update, WatchChange};
//!
//! let now = Instant::now();
//! let mut engine = GraphEngine::new(Roots::new().cluster("static-backend"), GraphOptions::default(), now);
//! assert!(matches!(engine.poll_watch(), Some(WatchChange::Watch { .. })));
//! assert!(engine.poll_snapshot().is_none()); // cold: nothing to publish yet
//!
//! // A cluster without EDS is a leaf: it is warm as soon as it arrives.
//! // The engine takes clusters as the client holds them: validated, as
//! // their bytes and a compact view.
//! let cluster = ClusterView::new(&Cluster {
//!     name: "static-backend".into(),
//!     load_assignment: Some(ClusterLoadAssignment::default()),
//!     ..Default::default()
//! })?;
//! let provenance = Provenance::new(None, "xds.example:443", "v1");
//! engine.on_cluster(now, "static-backend", Update::Changed(Arc::new(cluster), provenance));
//! let snapshot = engine.poll_snapshot().expect("every reachable resource is warm");
//! assert!(snapshot.cluster("static-backend").is_some_and(|c| c.is_ok()));
//! # Ok::<(), xdsfed_core::types::ValidationError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

#[cfg(feature = "driver")]
mod cell;
#[cfg(feature = "driver")]
pub mod driver;
pub mod edges;
pub mod engine;
mod error;
mod options;
mod resource;
mod snapshot;

#[cfg(feature = "driver")]
pub use cell::{PublisherGone, SnapshotCell, SnapshotReader};
#[cfg(feature = "driver")]
pub use driver::{ConfigGraph, ConfigGraphBuilder};
pub use edges::Via;
pub use engine::{GraphEngine, WatchChange};
pub use error::GraphError;
pub use options::{ConfigSourceTrust, GraphOptions, KnownAuthorities, Roots};
pub use resource::{CollectionUpdate, Provenance, ResourceKind, Update, Versioned};
pub use snapshot::{
    ClusterEndpoints, ClusterSnapshot, CollectionSnapshot, ListenerSnapshot, RouteBinding,
    RouteConfigSnapshot, Snapshot,
};
