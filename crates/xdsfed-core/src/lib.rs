//! The xdsfed runtime: everything one federated xDS client needs.
//!
//! ```text
//! bootstrap ─► authority registry ─► ServerKey ─► one ADS stream per server
//! watch(type, name) ─► name ─► authority ─► servers ─► subscribe on that stream
//! response ─► protocol (sans-IO) ─► decode + validate ─► cache ─► watchers
//!                                └─► ACK / NACK back on the stream
//! ```
//!
//! - [`name`]: `xdstp://` names, canonical cache keys, directives.
//! - [`bootstrap`]: gRPC A47 JSON, YAML and Envoy-style bootstraps.
//! - [`authority`]: which servers serve which authority; stream sharing.
//! - [`types`]: resource types, decoding and validation.
//! - [`protocol`]: the sans-IO ADS state machine (delta and SotW).
//! - [`transport`]: the tonic driver of the protocol core.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod authority;
pub mod bootstrap;
pub mod cache;
pub mod client;
pub mod error;
mod federation;
mod file;
pub mod name;
pub mod protocol;
pub mod source;
pub mod status;
pub mod transport;
pub mod types;
pub mod watch;
