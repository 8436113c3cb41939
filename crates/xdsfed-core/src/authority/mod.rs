//! The authority registry: which servers serve which names.
//!
//! ```text
//! ResourceName ──► Partition ──► ordered [ServerConfig] ──► ServerKey ──► one channel + one ADS stream
//!   xdstp://cloud.example/…  → Authority("cloud.example") → authorities["cloud.example"].xds_servers
//!                                                           (or the top-level list when it has none)
//!   xdstp://unknown/…        → error: "authority unknown not present in bootstrap"
//!   listener-a (old-style)   → OldStyle                   → top-level xds_servers
//! ```
//!
//! An authority that is not in the bootstrap is an error for that watch,
//! never a quiet fallback to some other server: the bootstrap is the list
//! of servers the operator trusts with each authority, and sending a name to
//! another server would leak the client's credentials and identity to it
//! (gRFC A47 §Rationale).
//!
//! # Stream sharing
//!
//! A [`ServerKey`] is what makes two bootstrap entries "the same server":
//! target URI, channel credentials, the server features that change
//! behaviour, and the transport variant. Authorities whose servers have
//! equal keys share one channel and one ADS stream. The registry interns
//! each distinct key once as a [`ServerId`], a small copyable index that
//! the federation core and the client pass around instead of the key, with
//! the server's name and URI as shared strings. It remembers which
//! [`Partition`]s each server serves, so the transport can refuse a name
//! of another authority arriving on that stream
//! ([`AuthorityRegistry::may_deliver`]).
//!
//! ```
//! use xdsfed_core::authority::{AuthorityRegistry, Partition};
//! use xdsfed_core::bootstrap::Bootstrap;
//! use xdsfed_core::name::ResourceName;
//!
//! let bootstrap = Bootstrap::from_yaml_str(r#"
//! xds_servers: [{ server_uri: "127.0.0.1:18000", channel_creds: [{ type: insecure }] }]
//! authorities:
//!   cloud.example:
//!     xds_servers: [{ server_uri: "127.0.0.1:18001", channel_creds: [{ type: insecure }] }]
//! "#)?;
//! let registry = AuthorityRegistry::new(&bootstrap);
//! let name = ResourceName::parse_user_supplied(
//!     "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments",
//! )?;
//! let servers = registry.resolve(&name)?;
//! assert_eq!(servers[0].server_uri, "127.0.0.1:18001");
//! let cloud = registry.resolve_ids(&name)?[0];
//! assert_eq!(&**registry.name(cloud), "127.0.0.1:18001 (insecure)");
//! assert_eq!(&**registry.uri(cloud), "127.0.0.1:18001");
//! assert!(registry.serves(cloud, &Partition::Authority("cloud.example".into())));
//! assert!(!registry.serves(cloud, &Partition::OldStyle));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod interned;
mod target;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use crate::bootstrap::{
    AllowedGrpcService, ApiVariant, Bootstrap, CallCreds, ChannelCreds, ServerConfig,
    ServerProtocol,
};
use crate::name::{NameError, ResourceName, authority_of};
use interned::Interned;
pub use interned::ServerId;

/// Why a name or target could not be mapped to servers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorityError {
    /// An `xdstp:` name whose authority the bootstrap does not configure.
    #[error("authority {authority:?} not present in bootstrap (resource {name})")]
    UnknownAuthority {
        /// The authority.
        authority: String,
        /// The name that carried it.
        name: String,
    },
    /// No server is configured for the name: an old-style name, and the
    /// bootstrap has no top-level servers (an Envoy-style bootstrap without
    /// `default_config_source`).
    #[error(
        "no server configured for {name:?}: the bootstrap has no top-level servers (xds_servers or default_config_source)"
    )]
    NoServers {
        /// The name.
        name: String,
    },
    /// A data-plane target that is not a usable `xds:` URI.
    #[error("invalid target {target:?}: {problem}")]
    InvalidTarget {
        /// The target.
        target: String,
        /// What is wrong.
        problem: String,
    },
    /// An `xds://authority/…` target whose authority the bootstrap does not
    /// configure (gRFC A47: "handle as invalid target URI").
    #[error("target {target:?}: authority {authority:?} not present in bootstrap")]
    UnknownTargetAuthority {
        /// The target.
        target: String,
        /// The authority.
        authority: String,
    },
    /// The template expanded to a name that does not parse.
    #[error("target {target:?} expands to an invalid resource name: {source}")]
    InvalidName {
        /// The target.
        target: String,
        /// Why the name is invalid.
        source: NameError,
    },
    /// Every one of the `u32::MAX` server ids is taken.
    #[error("cannot add server {server}: the client knows too many servers already")]
    TooManyServers {
        /// The server that found no id.
        server: String,
    },
}

impl AuthorityError {
    /// [`AuthorityError::NoServers`] for `name`.
    pub fn no_servers(name: &ResourceName) -> Self {
        AuthorityError::NoServers {
            name: name.to_string(),
        }
    }
}

/// Which part of the name space a name belongs to: one authority, or the
/// distinguished partition of old-style names (never equal to any
/// authority, not even the empty one of `xdstp:///…`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Partition {
    /// Names that do not start with `xdstp:`.
    OldStyle,
    /// `xdstp:` names with this (normalised) authority.
    Authority(String),
}

impl Partition {
    /// The partition of a parsed name.
    pub fn of(name: &ResourceName) -> Partition {
        match name.authority() {
            Some(a) => Partition::Authority(a.to_owned()),
            None => Partition::OldStyle,
        }
    }

    /// The partition of a canonical key (see [`crate::name::canonical_key`]).
    pub fn of_key(key: &str) -> Partition {
        match authority_of(key) {
            Some(a) => Partition::Authority(a.to_owned()),
            None => Partition::OldStyle,
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Partition::OldStyle => f.write_str("old-style names"),
            Partition::Authority(a) => write!(f, "authority {a:?}"),
        }
    }
}

/// The identity of a management server connection: bootstrap entries with
/// equal keys share one channel and one ADS stream.
///
/// gRFC A47 keys servers by "target URI, channel creds, and all known server
/// features"; unknown features are dropped, so that a feature this client
/// ignores cannot split a stream. The transport variant is part of the key
/// too: a delta and a SotW stream cannot be one stream, nor an ADS stream
/// and a policy stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerKey {
    /// The target URI.
    pub server_uri: String,
    /// The channel credentials.
    pub channel_creds: ChannelCreds,
    /// The call credentials (gRFC A97): a server reached with another
    /// token is another identity, as in grpc-go's server key.
    pub call_creds: Vec<CallCreds>,
    /// The behaviour-changing server features, sorted.
    pub features: Vec<&'static str>,
    /// Delta or SotW.
    pub api: ApiVariant,
    /// Whether the variant is pinned.
    pub api_pinned: bool,
    /// ADS, the policy stream (with its timers) or a file.
    pub protocol: ServerProtocol,
}

impl ServerKey {
    /// The key of `server`.
    pub fn new(server: &ServerConfig) -> Self {
        ServerKey {
            server_uri: server.server_uri.clone(),
            channel_creds: server.channel_creds.clone(),
            call_creds: server.call_creds.clone(),
            features: server.behaviour_features(),
            api: server.api,
            api_pinned: server.api_pinned,
            protocol: server.protocol.clone(),
        }
    }
}

impl From<&ServerConfig> for ServerKey {
    fn from(server: &ServerConfig) -> Self {
        ServerKey::new(server)
    }
}

/// `127.0.0.1:18000 (tls, ignore_resource_deletion, sotw pinned)`; call
/// credentials follow the channel's: `(tls+jwt_token_file)`.
impl fmt::Display for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.server_uri, self.channel_creds.type_name())?;
        for creds in &self.call_creds {
            write!(f, "+{}", creds.type_name())?;
        }
        for feature in &self.features {
            write!(f, ", {feature}")?;
        }
        match self.protocol {
            ServerProtocol::PolicyStream(_) => return f.write_str(", policy stream)"),
            ServerProtocol::File(_) => return f.write_str(", file)"),
            ServerProtocol::Rest(_) => return f.write_str(", rest)"),
            ServerProtocol::HttpCdn(_) => return f.write_str(", http cdn)"),
            _ => {}
        }
        match (self.api, self.api_pinned) {
            (ApiVariant::Delta, false) => {}
            (ApiVariant::Delta, true) => f.write_str(", delta pinned")?,
            (ApiVariant::Sotw, pinned) => {
                f.write_str(if pinned { ", sotw pinned" } else { ", sotw" })?;
            }
        }
        f.write_str(")")
    }
}

/// An authority's resolved configuration.
#[derive(Debug, Clone)]
struct AuthorityEntry {
    listener_template: String,
    /// Its own servers, or the top-level list when it has none.
    servers: Vec<ServerConfig>,
    /// Their ids, in the same order.
    ids: Vec<ServerId>,
    /// gRFC A95: fall back on reachability alone.
    fallback_on_reachability_only: bool,
}

/// Maps names to ordered server lists, and servers to the partitions they
/// serve. Built once from a [`Bootstrap`]; afterwards only servers a
/// ConfigSource names are added ([`AuthorityRegistry::intern`]).
#[derive(Debug, Clone)]
pub struct AuthorityRegistry {
    top_level: Vec<ServerConfig>,
    top_level_ids: Vec<ServerId>,
    authorities: BTreeMap<String, AuthorityEntry>,
    default_listener_template: String,
    /// Every distinct server, by id.
    servers: Vec<Interned>,
    ids: BTreeMap<ServerKey, ServerId>,
    /// How many of `servers` are the bootstrap's.
    bootstrap_servers: usize,
    /// gRFC A102: the targets untrusted servers may name, with their
    /// credentials.
    allowed_grpc_services: BTreeMap<String, AllowedGrpcService>,
}

impl AuthorityRegistry {
    /// Builds the registry of `bootstrap`.
    pub fn new(bootstrap: &Bootstrap) -> Self {
        let mut registry = AuthorityRegistry {
            top_level: bootstrap.xds_servers.clone(),
            top_level_ids: Vec::new(),
            authorities: BTreeMap::new(),
            default_listener_template: bootstrap
                .client_default_listener_resource_name_template
                .clone(),
            servers: Vec::new(),
            ids: BTreeMap::new(),
            bootstrap_servers: 0,
            allowed_grpc_services: bootstrap.allowed_grpc_services.clone(),
        };
        registry.top_level_ids =
            registry.intern_serving(&bootstrap.xds_servers, &Partition::OldStyle);
        for (name, config) in &bootstrap.authorities {
            let servers = if config.xds_servers.is_empty() {
                bootstrap.xds_servers.clone()
            } else {
                config.xds_servers.clone()
            };
            let ids = registry.intern_serving(&servers, &Partition::Authority(name.clone()));
            registry.authorities.insert(
                name.clone(),
                AuthorityEntry {
                    listener_template: config.client_listener_resource_name_template.clone(),
                    servers,
                    ids,
                    fallback_on_reachability_only: config.fallback_on_reachability_only,
                },
            );
        }
        registry.bootstrap_servers = registry.servers.len();
        registry
    }

    /// The ordered servers for `name`: an `xdstp:` name's authority's
    /// servers (the top-level list when it has none of its own), or the
    /// top-level servers for an old-style name. An authority the bootstrap
    /// does not configure is an error, never a fallback.
    pub fn resolve(&self, name: &ResourceName) -> Result<&[ServerConfig], AuthorityError> {
        self.lists_for(name).map(|(servers, _)| servers)
    }

    /// [`AuthorityRegistry::resolve`] as server ids, in the same order.
    /// Computed once per partition: resolving allocates nothing.
    pub fn resolve_ids(&self, name: &ResourceName) -> Result<&[ServerId], AuthorityError> {
        self.lists_for(name).map(|(_, ids)| ids)
    }

    fn lists_for(
        &self,
        name: &ResourceName,
    ) -> Result<(&[ServerConfig], &[ServerId]), AuthorityError> {
        match name {
            ResourceName::Xdstp(n) => self
                .authorities
                .get(n.authority())
                .map(|a| (a.servers.as_slice(), a.ids.as_slice()))
                .ok_or_else(|| AuthorityError::UnknownAuthority {
                    authority: n.authority().to_owned(),
                    name: n.to_string(),
                }),
            ResourceName::OldStyle(_) => {
                if self.top_level.is_empty() {
                    Err(AuthorityError::no_servers(name))
                } else {
                    Ok((&self.top_level, &self.top_level_ids))
                }
            }
        }
    }

    /// Every distinct server of the bootstrap, once per stream, sorted by
    /// key.
    pub fn server_keys(&self) -> impl Iterator<Item = &ServerKey> {
        self.ids
            .iter()
            .filter(|(_, id)| self.in_bootstrap(**id))
            .map(|(key, _)| key)
    }

    /// Whether `partition` falls back whenever its active server is
    /// unreachable, cached resources or not (gRFC A95's
    /// `fallback_on_reachability_only`). Old-style names have no authority
    /// entry to set it in: never.
    pub fn falls_back_on_reachability_only(&self, partition: &Partition) -> bool {
        match partition {
            Partition::Authority(name) => self
                .authorities
                .get(name.as_str())
                .is_some_and(|a| a.fallback_on_reachability_only),
            Partition::OldStyle => false,
        }
    }

    /// Whether the bootstrap configures `authority` (normalised).
    pub fn has_authority(&self, authority: &str) -> bool {
        self.authorities.contains_key(authority)
    }

    /// The bootstrap's `allowed_grpc_services` (gRFC A102): target URI →
    /// the credentials it is dialled with when a server without
    /// `trusted_xds_server` names it.
    pub fn allowed_grpc_services(&self) -> &BTreeMap<String, AllowedGrpcService> {
        &self.allowed_grpc_services
    }
}
