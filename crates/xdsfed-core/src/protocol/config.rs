//! How a [`Session`](super::Session) is set up: variant, node, timers, and
//! which authorities' names its server may deliver.

use crate::hash::HashSet;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;

use super::stream_end::SourceKind;
use crate::bootstrap::ApiVariant;
use crate::name::authority_of;

/// Client feature: SotW responses may wrap resources in
/// `envoy.service.discovery.v3.Resource` (needed for SotW TTLs).
pub const FEATURE_RESOURCE_IN_SOTW: &str = "xds.config.resource-in-sotw";
/// Client feature: the client honours `Resource.ttl` and heartbeats.
pub const FEATURE_RESOURCE_TTL: &str = "xds.config.supports-resource-ttl";
/// Client feature: the client follows LEDS through `LbEndpointCollection`
/// list collections (gRFC A95).
pub const FEATURE_LB_ENDPOINT_COLLECTION: &str = "xds.endpoint.supports_lb_endpoint_collection";

/// The does-not-exist timeout the spec recommends: "clients are expected to
/// use a timeout (recommended duration is 15 seconds) after sending a request
/// for a new resource".
pub const DEFAULT_DOES_NOT_EXIST_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a stream may go unanswered before it is a connection failure:
/// gRPC's minimum connect timeout, which covers the TCP connect and the
/// HTTP/2 handshake.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);

/// Which authorities' names a server may deliver on its stream.
///
/// A server must not inject another authority's configuration: a name whose
/// authority is not listed here is ignored (neither applied nor NACKed) and
/// counted in [`SessionStats::foreign_names_ignored`](super::SessionStats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorityFilter {
    authorities: HashSet<String>,
    any_authority: bool,
    old_style: bool,
}

impl AuthorityFilter {
    /// Accepts nothing; add authorities with [`AuthorityFilter::with_authority`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts every name: any authority and old-style names. For a server
    /// trusted with everything (tests, a single-server bootstrap).
    pub fn any() -> Self {
        AuthorityFilter {
            authorities: HashSet::default(),
            any_authority: true,
            old_style: true,
        }
    }

    /// Also accepts `xdstp://{authority}/…` names (`""` is the empty authority
    /// of `xdstp:///…`).
    pub fn with_authority(mut self, authority: impl Into<String>) -> Self {
        self.authorities.insert(authority.into());
        self
    }

    /// Also accepts old-style (non-`xdstp:`) names.
    pub fn with_old_style(mut self, allowed: bool) -> Self {
        self.old_style = allowed;
        self
    }

    /// Whether the canonical key `key` may come from this server.
    pub fn allows(&self, key: &str) -> bool {
        match authority_of(key) {
            None => self.old_style,
            Some(a) => self.any_authority || self.authorities.contains(a),
        }
    }
}

/// The configuration of one ADS session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Delta or SotW; [`Session::set_variant`](super::Session::set_variant)
    /// changes it for the next stream.
    pub variant: ApiVariant,
    /// The node sent on the first request of each stream.
    pub node: Node,
    /// How long a requested resource may stay unanswered before it is
    /// reported as not existing (gRFC A57).
    pub does_not_exist_timeout: Duration,
    /// How long a new stream may wait for the server's first answer (its
    /// response headers or a response) before it is a connection failure
    /// (gRFC A57: a server failure; gRFC A71: a reason to fall back). Set
    /// it to the whole connection attempt: TCP connect, TLS and HTTP/2
    /// handshakes, and the server accepting the stream.
    pub handshake_timeout: Duration,
    /// How long an established stream (see
    /// [`Phase`](super::Phase)) may wait for its first response before it
    /// is a server failure; `None`, the default, waits for ever, as gRPC
    /// and Envoy do: a server has nothing to send for names that do not
    /// exist, which the does-not-exist timer answers.
    pub first_response_timeout: Option<Duration>,
    /// Which names this server may deliver.
    pub authorities: AuthorityFilter,
    /// The server has `ignore_resource_deletion` (gRFC A53): a deletion of
    /// a Listener or Cluster (full-state type) is logged and counted, and the
    /// copy keeps serving.
    pub ignore_resource_deletion: bool,
    /// The kind of source this session speaks for (ADS, or REST-JSON
    /// polling); it names the session's failures.
    pub source: SourceKind,
}

impl SessionConfig {
    /// A configuration for `node` (its `client_features` gain
    /// [`FEATURE_RESOURCE_IN_SOTW`], [`FEATURE_RESOURCE_TTL`] and
    /// [`FEATURE_LB_ENDPOINT_COLLECTION`]), delta,
    /// the default does-not-exist timeout and every authority allowed.
    pub fn new(node: Node) -> Self {
        SessionConfig {
            variant: ApiVariant::Delta,
            node: with_client_features(node),
            does_not_exist_timeout: DEFAULT_DOES_NOT_EXIST_TIMEOUT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            first_response_timeout: None,
            authorities: AuthorityFilter::any(),
            ignore_resource_deletion: false,
            source: SourceKind::Ads,
        }
    }

    /// Sets the kind of source the session speaks for.
    pub fn with_source(mut self, source: SourceKind) -> Self {
        self.source = source;
        self
    }

    /// Sets the variant.
    pub fn with_variant(mut self, variant: ApiVariant) -> Self {
        self.variant = variant;
        self
    }

    /// Sets the does-not-exist timeout.
    pub fn with_does_not_exist_timeout(mut self, timeout: Duration) -> Self {
        self.does_not_exist_timeout = timeout;
        self
    }

    /// Sets the handshake deadline.
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Sets the first-response deadline of accepted streams.
    pub fn with_first_response_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.first_response_timeout = timeout;
        self
    }

    /// Sets the authority filter.
    pub fn with_authorities(mut self, authorities: AuthorityFilter) -> Self {
        self.authorities = authorities;
        self
    }
}

/// `node` with the client features this core implements added (once).
pub fn with_client_features(mut node: Node) -> Node {
    for feature in [
        FEATURE_RESOURCE_IN_SOTW,
        FEATURE_RESOURCE_TTL,
        FEATURE_LB_ENDPOINT_COLLECTION,
    ] {
        if !node.client_features.iter().any(|f| f == feature) {
            node.client_features.push(feature.to_owned());
        }
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_filter_allows_only_listed_authorities_and_old_style_when_asked() {
        let f = AuthorityFilter::new().with_authority("a.example");
        assert!(f.allows("xdstp://a.example/t/x"));
        assert!(!f.allows("xdstp://b.example/t/x"));
        assert!(!f.allows("old-style"));
        assert!(f.clone().with_old_style(true).allows("old-style"));
        assert!(AuthorityFilter::any().allows("xdstp://b.example/t/x"));
        assert!(AuthorityFilter::any().allows("old-style"));
        assert!(!AuthorityFilter::new().allows("xdstp:///t/x"));
        assert!(
            AuthorityFilter::new()
                .with_authority("")
                .allows("xdstp:///t/x")
        );
    }

    /// TTL, SotW TTL and gRFC A95 ("clients that support these resources
    /// will advertise a new client feature called
    /// `xds.endpoint.supports_lb_endpoint_collection`"), each once.
    #[test]
    fn node_gains_client_features_once() {
        let node = with_client_features(with_client_features(Node::default()));
        assert_eq!(
            node.client_features,
            vec![
                FEATURE_RESOURCE_IN_SOTW.to_owned(),
                FEATURE_RESOURCE_TTL.to_owned(),
                "xds.endpoint.supports_lb_endpoint_collection".to_owned(),
            ]
        );
    }
}
