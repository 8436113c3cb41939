//! The source seam: what the client drives for each server of the
//! bootstrap, whatever protocol the server speaks.
//!
//! The federation core decides what to ask of which server; the client's
//! executor hands each decision to that server's [`SourceConnection`], and
//! each connection reports back through an [`EventSink`] as
//! [`CoreEvent`](xdsfed_core::protocol::CoreEvent)s: validated copies, NACKs,
//! deletions, stream failures and recoveries. An ADS stream is one kind of
//! source; any other (a file, a REST endpoint, another push protocol) plugs
//! in here by producing the same events, so that server fallback, `#alt`,
//! status and metrics work the same for every kind.

pub(crate) mod call_creds;
#[cfg(feature = "cdn")]
pub(crate) mod cdn;
pub(crate) mod driving;
#[cfg(feature = "file")]
pub(crate) mod file;
pub(crate) mod handle;
#[cfg(feature = "http-client")]
pub(crate) mod http;
pub(crate) mod reconnect;
#[cfg(feature = "rest")]
pub(crate) mod rest;

// The tests run with every source kind (the crate's dev-dependency on
// itself turns them on).
#[cfg(test)]
#[cfg(all(feature = "rest", feature = "policy-stream"))]
mod connection_failure_tests;

pub(crate) use handle::SourceHandle;

use std::sync::Arc;
use xdsfed_core::version::Version;

use crate::client::BuildError;
#[cfg(feature = "policy-stream")]
use crate::policy_stream::PolicyConnection;
use crate::transport::{AdsConnection, ConnectionStats, EventSink, TransportOptions};
use xdsfed_core::bootstrap::{Bootstrap, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::{AuthorityFilter, ResourceKey};
use xdsfed_core::types::{Decoded, TypeRegistry};

/// A connection to one server, driven by the client's executor.
pub(crate) trait SourceConnection: Send + Sync + std::fmt::Debug {
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
    /// A copy of `key` from the state directory, which this server sent
    /// at `version` to a previous run of the client: a delta ADS stream
    /// claims it in its first request and confirms it once the server
    /// accepts the stream. A source without versions ignores it.
    fn resume(&self, key: ResourceKey, version: Version, resource: Decoded) {
        let _ = (key, version, resource);
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
    #[cfg_attr(not(feature = "policy-stream"), allow(dead_code))]
    pub(crate) authority_names: Vec<String>,
    pub(crate) types: Arc<TypeRegistry>,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) options: TransportOptions,
}

/// Opens the connection `opening.server` asks for, on the current tokio
/// runtime: ADS, the policy stream, REST-JSON polling, a file or an HTTP
/// CDN, as the bootstrap names it. A kind this build left out was refused
/// when the client was built ([`check_built`]).
pub(crate) fn open(opening: Opening) -> Arc<dyn SourceConnection> {
    match &opening.server.protocol {
        #[cfg(feature = "cdn")]
        ServerProtocol::HttpCdn(_) => Arc::new(cdn::CdnConnection::spawn(
            opening.server,
            opening.types,
            opening.sink,
            opening.options,
        )),
        #[cfg(feature = "file")]
        ServerProtocol::File(source) => {
            let source = source.clone();
            Arc::new(file::FileConnection::spawn(
                opening.server,
                source,
                opening.authorities,
                opening.types,
                opening.sink,
                &opening.options,
            ))
        }
        #[cfg(feature = "rest")]
        ServerProtocol::Rest(_) => Arc::new(rest::RestConnection::spawn(
            opening.server,
            opening.authorities,
            opening.types,
            opening.sink,
            opening.options,
        )),
        #[cfg(feature = "policy-stream")]
        ServerProtocol::PolicyStream(_) => Arc::new(PolicyConnection::spawn(
            opening.server,
            opening.authorities,
            opening.authority_names,
            opening.sink,
            opening.options,
        )),
        _ => Arc::new(AdsConnection::spawn(
            opening.server,
            opening.authorities,
            opening.types,
            opening.sink,
            opening.options,
        )),
    }
}

/// The cargo feature a server's source kind needs, if this build left it
/// out.
fn missing_feature(protocol: &ServerProtocol) -> Option<&'static str> {
    match protocol {
        ServerProtocol::Ads => None,
        ServerProtocol::HttpCdn(_) => (!cfg!(feature = "cdn")).then_some("cdn"),
        ServerProtocol::File(_) => (!cfg!(feature = "file")).then_some("file"),
        ServerProtocol::Rest(_) => (!cfg!(feature = "rest")).then_some("rest"),
        ServerProtocol::PolicyStream(_) => {
            (!cfg!(feature = "policy-stream")).then_some("policy-stream")
        }
        // Kinds are added to both crates together; until then, ADS.
        _ => None,
    }
}

/// Refuses a bootstrap naming a server whose source kind this build left
/// out: the error names the server and the feature that builds it.
pub(crate) fn check_built(bootstrap: &Bootstrap) -> Result<(), BuildError> {
    let servers = bootstrap.xds_servers.iter().chain(
        bootstrap
            .authorities
            .values()
            .flat_map(|authority| authority.xds_servers.iter()),
    );
    for server in servers {
        if let Some(feature) = missing_feature(&server.protocol) {
            return Err(BuildError::SourceKindNotBuilt {
                server: server.server_uri.clone(),
                feature,
            });
        }
    }
    Ok(())
}
