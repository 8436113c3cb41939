//! The CSDS-style status dump of a client: every resource, where it came
//! from, its version, status and last error.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Serialize;

use crate::entry::{Provenance, ResourceState, ResourceStatus};
use crate::protocol::ResourceKey;
use crate::protocol::TypeUpdates;

/// One resource in the dump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceStatusEntry {
    /// The type URL.
    pub type_url: String,
    /// The cache key (canonical name).
    pub name: String,
    /// The authority (`null` for old-style names).
    pub authority: Option<String>,
    /// The server the subscription is on, as messages name it: its URI,
    /// channel credentials and features, `127.0.0.1:18000 (insecure)`.
    pub server: String,
    /// That server's URI alone, `127.0.0.1:18000`.
    pub server_uri: String,
    /// The version of the cached copy.
    pub version: Option<String>,
    /// The CSDS status.
    pub status: ResourceStatus,
    /// When the cached copy arrived, in milliseconds since the Unix epoch.
    pub last_updated_unix_ms: Option<u64>,
    /// The last error, if any.
    pub error: Option<String>,
    /// The version of the last rejected update, if any.
    pub failed_version: Option<String>,
    /// When the last rejected update arrived, in milliseconds since the
    /// Unix epoch.
    pub failed_at_unix_ms: Option<u64>,
    /// The bytes of the cached copy as received (the `value` of its `Any`),
    /// shared with the cache, not copied. Not in the JSON form.
    #[serde(skip)]
    pub raw: Option<Bytes>,
    /// Whether a cached copy is serving.
    pub cached: bool,
    /// Where the cached copy came from, when it did not come straight from
    /// the subscription's first server: see [`SourceStatus`].
    pub source: Option<SourceStatus>,
}

/// Where a resource's cached copy came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceStatus {
    /// The server that sent it, as messages name it.
    pub server: String,
    /// That server's URI alone.
    pub server_uri: String,
    /// The authority of the name it was fetched as (`null` for old-style).
    pub authority: Option<String>,
    /// The name it was fetched as, when another than the resource's own
    /// (an `#alt` alternative or a redirect target).
    pub fetched_as: Option<String>,
    /// Sent by a fallback server of its authority (gRFC A71).
    pub fallback: bool,
    /// Served by the name's `#alt` alternative (xDS TP1).
    pub alt: bool,
    /// Reached through a `ResourceLocator` redirect (xDS TP1).
    pub redirected: bool,
}

/// One authority's servers and which one it uses (gRFC A71).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthorityStatus {
    /// The authority (`null` for old-style names).
    pub authority: Option<String>,
    /// Its servers, in priority order.
    pub servers: Vec<String>,
    /// The server answers are taken from.
    pub active: String,
    /// That server's URI alone.
    pub active_uri: String,
    /// Whether that is a fallback server (not the first).
    pub on_fallback: bool,
}

/// Counters of one server's connection, named after gRFC A78's metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// The server, as messages name it: URI, channel credentials and
    /// features.
    pub server: String,
    /// Its URI alone.
    pub server_uri: String,
    /// `grpc.xds_client.connected`: whether the stream is up and has had a response.
    pub connected: bool,
    /// `grpc.xds_client.server_failure`.
    pub server_failure: u64,
    /// `grpc.xds_client.resource_updates_valid`.
    pub resource_updates_valid: u64,
    /// `grpc.xds_client.resource_updates_invalid`.
    pub resource_updates_invalid: u64,
    /// Both update counters per type URL (A78's `grpc.xds.resource_type`).
    pub resource_updates_by_type: BTreeMap<String, TypeUpdates>,
    /// Resources of authorities this server does not serve, ignored.
    pub foreign_resources_ignored: u64,
    /// `delta` or `sotw`.
    pub variant: String,
    /// Type URLs the server has answered at least once (an empty answer
    /// counts), once that answer reached the cache. Not in the JSON form,
    /// which follows the metrics.
    #[serde(skip)]
    pub answered_types: Vec<String>,
}

/// The whole dump. `serde_json::to_string_pretty(&status)` gives the JSON form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientStatus {
    /// The node id the client presents.
    pub node_id: String,
    /// Every cached or requested resource, sorted by type and name.
    pub resources: Vec<ResourceStatusEntry>,
    /// Every server connection.
    pub servers: Vec<ServerStatus>,
    /// Every authority in use, with its active server.
    pub authorities: Vec<AuthorityStatus>,
    /// The state directory's counters and the files it ignored, when the
    /// client has one (`XdsClientBuilder::state_dir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<crate::state_dir::StateDirStatus>,
}

impl ClientStatus {
    /// The dump as pretty JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain strings, numbers and enums cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// `grpc.xds_client.resources`: the number of resources per authority,
    /// type and cache state.
    pub fn resource_counts(&self) -> Vec<((String, String, ResourceStatus), u64)> {
        let mut counts = std::collections::BTreeMap::new();
        for r in &self.resources {
            let authority = r.authority.clone().unwrap_or_else(|| "#old".into());
            *counts
                .entry((authority, r.type_url.clone(), r.status))
                .or_insert(0) += 1;
        }
        counts.into_iter().collect()
    }
}

impl ResourceStatusEntry {
    /// The entry of the resource `key`, subscribed as `provenance` says,
    /// in `state`. `uri_of` gives the URI of a server from the name
    /// messages give it (the federation core's
    /// [`server_uris`](crate::federation::Federation::server_uris)).
    pub fn of(
        key: &ResourceKey,
        provenance: &Provenance,
        state: &ResourceState,
        uri_of: &dyn Fn(&str) -> String,
    ) -> Self {
        ResourceStatusEntry {
            type_url: key.type_url.to_string(),
            name: key.name.to_string(),
            authority: provenance.authority.as_deref().map(str::to_owned),
            server: provenance.server.to_string(),
            server_uri: uri_of(&provenance.server),
            version: state.version.as_ref().map(String::from),
            status: state.status,
            last_updated_unix_ms: state.last_updated.and_then(unix_ms),
            error: state.error.as_ref().map(ToString::to_string),
            failed_version: state.failed_update.as_ref().map(|f| f.version.to_string()),
            failed_at_unix_ms: state.failed_update.as_ref().and_then(|f| unix_ms(f.at)),
            raw: state.resource.as_ref().map(|r| r.raw().clone()),
            cached: state.resource.is_some(),
            source: state.source.as_ref().map(|s| SourceStatus {
                server: s.server.to_string(),
                server_uri: uri_of(&s.server),
                authority: s.authority.as_deref().map(str::to_owned),
                fetched_as: (!s.fetched_as.is_empty()).then(|| s.fetched_as.to_string()),
                fallback: s.fallback,
                alt: s.alt,
                redirected: s.redirected,
            }),
        }
    }
}

fn unix_ms(t: SystemTime) -> Option<u64> {
    t.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}
