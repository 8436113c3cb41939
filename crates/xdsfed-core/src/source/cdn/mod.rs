//! HTTP CDN delivery (xDS TP1, "Use cases": "HTTP CDN delivery of
//! configuration (list collections with references)"): an authority served
//! by a static file host.
//!
//! A bootstrap server entry with `"api_type": "HTTP_CDN"` gets a
//! `CdnConnection` (in xdsfed-client) instead of an ADS stream. Each subscribed resource is
//! one file, fetched with a plain `GET` at the URL its name maps to
//! (`url.rs`; typically a list collection such as
//! `{base}/cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all`),
//! revalidated with its `ETag` every `refresh_delay`. A list collection's
//! locator entries are resources of their own: the federation core
//! follows them to their own authorities' sources, ADS or CDN.
//!
//! ```text
//!  CdnConnection (handle) ──commands──► driver task ──GET──► CDN
//!                                         │ owns a CdnSession (sans-IO: what to fetch when,
//!                                         │   what each answer means)
//!                                         └─► EventSink::deliver(CoreEvents)
//! ```
//!
//! The session's module doc lists the rules; `docs/rules.md` ("HTTP CDN
//! delivery") maps each to its test, and `docs/federation.md` tells an
//! operator how to publish files.

pub mod reply;
mod session;
mod url;

pub use session::{CdnConfig, CdnSession, CdnStats, Fetch, Fetched, HttpReply};
