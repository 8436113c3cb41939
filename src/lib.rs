//! xdsfed: a runtime for federated xDS clients.
//!
//! Proxies, data-plane agents and federation testbeds often take their
//! configuration from several xDS control planes at once. xdsfed resolves every
//! `xdstp://authority/type/id` name to the servers of its authority, carries all
//! authorities that share a server on one incremental ADS stream, follows the
//! Listener → RouteConfiguration → Cluster → ClusterLoadAssignment graph across
//! authorities and publishes complete, consistent snapshots.
//!
//! This crate is the facade: it re-exports the runtime ([`core`]), the resource
//! graph ([`graph`]) and the testbed ([`testbed`]), and holds the project's own
//! protobuf APIs ([`proto`]).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod policy;
pub mod proto;
#[doc(hidden)]
#[path = "cli/terminal/mod.rs"]
pub mod terminal;
pub mod testbed_control;

pub use xdsfed_core as core;
pub use xdsfed_graph as graph;
pub use xdsfed_testbed as testbed;
