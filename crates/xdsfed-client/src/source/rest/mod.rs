//! The REST-JSON source's IO: a driver task that polls on its
//! [`PollSchedule`](xdsfed_core::source::rest::PollSchedule) over a bounded
//! HTTP/1.1 client, and reads each body with
//! [`read`](xdsfed_core::source::rest::read).

mod driver;
mod http;

use std::sync::Arc;

use xdsfed_core::bootstrap::{ApiVariant, RestTiming, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::AuthorityFilter;
use xdsfed_core::types::TypeRegistry;

use super::SourceHandle;
use crate::transport::{EventSink, TransportOptions};

/// Marks a [`SourceHandle`] as a REST-JSON source's.
#[derive(Debug)]
pub(crate) enum RestKind {}

/// A handle on the REST-JSON source of one server; the driver task ends
/// on [`SourceHandle::shutdown`] or when every handle is dropped.
pub(crate) type RestConnection = SourceHandle<RestKind>;

impl SourceHandle<RestKind> {
    /// Spawns the driver of `server` on the current tokio runtime. Nothing
    /// is polled until the first subscription. A server whose client cannot
    /// be set up (unreadable TLS files) reports the error as a stream
    /// failure on every attempt, as an ADS connection does.
    pub(crate) fn spawn(
        server: ServerConfig,
        authorities: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let timing = match server.protocol {
            ServerProtocol::Rest(timing) => timing,
            _ => RestTiming::default(),
        };
        // Every answer is JSON: the text bound applies.
        let client =
            http::HttpClient::new(&server, timing.request_timeout, opts.text_message_limit());
        let (handle, commands, stats) = Self::new(ApiVariant::Sotw);
        let backoff = opts.backoff;
        let driver = driver::Driver::new(driver::Parts {
            server,
            timing,
            authorities,
            types,
            sink,
            opts,
            client,
            stats,
        });
        tokio::spawn(crate::source::reconnect::run(driver, commands, backoff));
        handle
    }
}
