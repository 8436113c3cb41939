//! The sessions of the sources beside ADS: what a REST-JSON poller, an
//! HTTP CDN follower and a filesystem source decide, without their IO.
//!
//! Each turns what its transport read (an HTTP reply, a file's bytes) into
//! [`CoreEvent`](crate::protocol::CoreEvent)s, the same events an ADS
//! session produces, so that server fallback, `#alt`, status and metrics
//! work the same for every kind. The client crate's drivers do the
//! fetching, reading and waiting.

pub mod cdn;
pub mod file;
pub mod rest;
