//! The source seam: what the client drives for each server of the
//! bootstrap, whatever protocol the server speaks.
//!
//! The federation core decides what to ask of which server; the client's
//! executor hands each decision to that server's [`SourceConnection`], and
//! each connection reports back through an [`EventSink`] as
//! [`CoreEvent`](crate::protocol::CoreEvent)s: validated copies, NACKs,
//! deletions, stream failures and recoveries. An ADS stream is one kind of
//! source; any other (a file, a REST endpoint, another push protocol) plugs
//! in here by producing the same events, so that server fallback, `#alt`,
//! status and metrics work the same for every kind.

pub mod cdn;
pub(crate) mod driving;
pub mod file;
pub(crate) mod handle;
pub(crate) mod http;
pub mod rest;

pub use handle::SourceHandle;

use std::sync::Arc;

use crate::bootstrap::{ServerConfig, ServerProtocol};
use crate::policy_stream::PolicyConnection;
use crate::protocol::{AuthorityFilter, ResourceKey};
use crate::transport::{AdsConnection, ConnectionStats, EventSink, TransportOptions};
use crate::types::TypeRegistry;

/// A connection to one server, driven by the client's executor.
pub trait SourceConnection: Send + Sync + std::fmt::Debug {
    /// Asks for `key`.
    fn subscribe(&self, key: ResourceKey);
    /// Stops asking for `key`.
    fn unsubscribe(&self, key: ResourceKey);
    /// The copy the client serves of `key` came from another server (gRFC
    /// A71 fallback): the next stream asks for it afresh rather than naming
    /// the version this server sent last. A source without versions has
    /// nothing to forget.
    fn forget_version(&self, key: ResourceKey) {
        let _ = key;
    }
    /// Asks for every resource of `type_url`.
    fn subscribe_wildcard(&self, type_url: &str);
    /// Stops asking for every resource of `type_url`.
    fn unsubscribe_wildcard(&self, type_url: &str);
    /// The connection's counters (gRFC A78).
    fn stats(&self) -> ConnectionStats;
    /// Closes the connection now.
    fn shutdown(&self);
}

/// Everything a connection is opened with.
pub(crate) struct Opening {
    pub(crate) server: ServerConfig,
    pub(crate) authorities: AuthorityFilter,
    /// The authorities the server serves, by name (for sources that key
    /// what they receive under each, as the policy stream does).
    pub(crate) authority_names: Vec<String>,
    pub(crate) types: Arc<TypeRegistry>,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) options: TransportOptions,
}

/// Opens the connection `opening.server` asks for, on the current tokio
/// runtime: ADS, the policy stream, REST-JSON polling, a file or an HTTP
/// CDN, as the bootstrap names it.
pub(crate) fn open(opening: Opening) -> Arc<dyn SourceConnection> {
    if let ServerProtocol::HttpCdn(_) = opening.server.protocol {
        return Arc::new(cdn::CdnConnection::spawn(
            opening.server,
            opening.types,
            opening.sink,
            opening.options,
        ));
    }
    if let ServerProtocol::File(source) = &opening.server.protocol {
        let source = source.clone();
        return Arc::new(file::FileConnection::spawn(
            opening.server,
            source,
            opening.authorities,
            opening.types,
            opening.sink,
            &opening.options,
        ));
    }
    if let ServerProtocol::Rest(_) = opening.server.protocol {
        return Arc::new(rest::RestConnection::spawn(
            opening.server,
            opening.authorities,
            opening.types,
            opening.sink,
            opening.options,
        ));
    }
    if let ServerProtocol::PolicyStream(_) = opening.server.protocol {
        return Arc::new(PolicyConnection::spawn(
            opening.server,
            opening.authorities,
            opening.authority_names,
            opening.sink,
            opening.options,
        ));
    }
    Arc::new(AdsConnection::spawn(
        opening.server,
        opening.authorities,
        opening.types,
        opening.sink,
        opening.options,
    ))
}
