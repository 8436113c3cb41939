//! The HTTP CDN source's IO: a driver task that performs the fetches its
//! [`CdnSession`](xdsfed_core::source::cdn::CdnSession) asks for, over a
//! bounded HTTP/1.1 client. What the rules are is the session's module doc
//! in xdsfed-core.
//!
//! ```text
//!  CdnConnection (handle) ──commands──► driver task ──GET──► CDN
//!                                         │ owns a CdnSession (sans-IO: what to fetch when,
//!                                         │   what each answer means)
//!                                         └─► EventSink::deliver(CoreEvents)
//! ```

mod connection;
mod http;

pub(crate) use connection::CdnConnection;
