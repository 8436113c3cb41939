//! xdsfed: a runtime for federated xDS clients.
//!
//! Proxies, data-plane agents and federation testbeds often take their
//! configuration from several xDS control planes at once. xdsfed resolves every
//! `xdstp://authority/type/id` name to the servers of its authority, carries all
//! authorities that share a server on one incremental ADS stream, follows the
//! Listener → RouteConfiguration → Cluster → ClusterLoadAssignment graph across
//! authorities and publishes complete, consistent snapshots.
//!
//! This crate is the facade: it re-exports the runtime ([`core`]) and the
//! resource graph ([`graph`]), and holds the project's own protobuf APIs
//! ([`proto`]).
//!
//! # Features
//!
//! | feature | default | adds |
//! | --- | --- | --- |
//! | `cli` | yes | the `xdsfed` binary; turns on `admin` and `testbed` |
//! | `admin` | through `cli` | `admin`: CSDS and Prometheus `/metrics` for a running client |
//! | `testbed` | through `cli` | `testbed` (re-exported `xdsfed-testbed`) and `testbed_control`, its gRPC control service |
//!
//! A service that embeds the client depends on this crate with
//! `default-features = false` (adding `admin` if it serves CSDS), or on
//! `xdsfed-core` and `xdsfed-graph` directly; neither compiles the command
//! line's dependencies.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

#[cfg(feature = "admin")]
pub mod admin;
pub mod policy;
pub mod proto;
#[cfg(feature = "cli")]
#[doc(hidden)]
#[path = "cli/terminal/mod.rs"]
pub mod terminal;
#[cfg(feature = "testbed")]
pub mod testbed_control;

pub use xdsfed_client as client;
pub use xdsfed_core as core;
pub use xdsfed_graph as graph;
#[cfg(feature = "testbed")]
pub use xdsfed_testbed as testbed;

/// The Rust examples of the guides in `docs/`, compiled (and, unless marked
/// `no_run`, run) as doc tests, so that no guide shows code that does not
/// build.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../docs/client.md")]
    struct Client;
    #[doc = include_str!("../docs/federation.md")]
    struct Federation;
    #[doc = include_str!("../docs/graph.md")]
    struct Graph;
    #[doc = include_str!("../docs/testbed.md")]
    struct Testbed;
}
