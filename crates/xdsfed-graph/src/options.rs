//! What the graph starts from ([`Roots`]) and how it behaves ([`GraphOptions`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use xdsfed_core::bootstrap::AllowedGrpcService;

/// The resources the graph starts from. Everything else is reached by
/// following edges, and is watched only while some path from a root
/// reaches it.
///
/// ```
/// use xdsfed_graph::Roots;
/// let roots = Roots::new()
///     .listener("xdstp://edge.example/envoy.config.listener.v3.Listener/frontend")
///     .cluster("legacy-backend");
/// assert!(!roots.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots {
    pub(crate) listeners: BTreeSet<String>,
    pub(crate) clusters: BTreeSet<String>,
    pub(crate) all_listeners: bool,
    pub(crate) all_clusters: bool,
    pub(crate) listener_collections: BTreeSet<String>,
    pub(crate) cluster_collections: BTreeSet<String>,
}

impl Roots {
    /// No roots yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a listener by name (`xdstp://` or old-style).
    pub fn listener(mut self, name: impl Into<String>) -> Self {
        self.listeners.insert(name.into());
        self
    }

    /// Adds a cluster by name, for data planes that are handed cluster names
    /// directly rather than through routes.
    pub fn cluster(mut self, name: impl Into<String>) -> Self {
        self.clusters.insert(name.into());
        self
    }

    /// Every listener the servers offer (wildcard LDS, as Envoy subscribes).
    pub fn all_listeners(mut self) -> Self {
        self.all_listeners = true;
        self
    }

    /// Every cluster the servers offer (wildcard CDS, as Envoy subscribes).
    pub fn all_clusters(mut self) -> Self {
        self.all_clusters = true;
        self
    }

    /// Every listener in a collection (xDS TP1, Envoy's
    /// `lds_resources_locator`): a glob collection
    /// (`xdstp://a/envoy.config.listener.v3.Listener/edge/*`) or a list
    /// collection (`xdstp://a/envoy.config.listener.v3.ListenerCollection/edge`).
    /// Listeners join and leave the graph as they join and leave the
    /// collection.
    ///
    /// ```
    /// use xdsfed_graph::Roots;
    /// let roots = Roots::new()
    ///     .listener_collection("xdstp://edge.example/envoy.config.listener.v3.Listener/ingress/*");
    /// assert!(!roots.is_empty());
    /// ```
    pub fn listener_collection(mut self, name: impl Into<String>) -> Self {
        self.listener_collections.insert(name.into());
        self
    }

    /// Every cluster in a collection (xDS TP1, Envoy's
    /// `cds_resources_locator`): a glob collection
    /// (`xdstp://a/envoy.config.cluster.v3.Cluster/pool/*`) or a list
    /// collection (`xdstp://a/envoy.config.cluster.v3.ClusterCollection/pool`).
    pub fn cluster_collection(mut self, name: impl Into<String>) -> Self {
        self.cluster_collections.insert(name.into());
        self
    }

    /// Whether no root was given (such a graph is ready at once and empty).
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
            && self.clusters.is_empty()
            && !self.all_listeners
            && !self.all_clusters
            && self.listener_collections.is_empty()
            && self.cluster_collections.is_empty()
    }
}

/// Which `xdstp://` authorities the bootstrap defines.
///
/// The engine needs this to tell, per edge, whether a name can be fetched
/// at all (xDS TP1: a `ConfigSource` beside the name may list the authority;
/// otherwise the bootstrap must).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KnownAuthorities {
    /// Do not check: the driver resolves every authority itself and reports
    /// an unknown one back as an [`Update::Error`](crate::Update::Error).
    #[default]
    Any,
    /// Exactly these authorities are in the bootstrap.
    Only(BTreeSet<String>),
}

impl KnownAuthorities {
    /// The bootstrap lists exactly these authorities.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Only(names.into_iter().map(Into::into).collect())
    }

    pub(crate) fn contains(&self, authority: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(set) => set.contains(authority),
        }
    }
}

/// How the engine warms and bounds the graph.
///
/// ```
/// use std::time::Duration;
/// use xdsfed_graph::GraphOptions;
/// let opts = GraphOptions::default().with_warming_timeout(Duration::from_secs(5));
/// assert_eq!(opts.max_aggregate_depth, 16);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphOptions {
    /// How long a newly reached resource may stay cold before the snapshot
    /// is published with it marked failed. Default 15 s, Envoy's default
    /// `initial_fetch_timeout` and gRPC's does-not-exist timer.
    pub warming_timeout: Duration,
    /// The deepest aggregate cluster tree accepted, counting the aggregate
    /// cluster itself as level 1. Default 16, as in gRPC (A37/A75).
    pub max_aggregate_depth: usize,
    /// The authorities the bootstrap defines.
    pub known_authorities: KnownAuthorities,
    /// Which `ConfigSource`s beside names may add servers (xDS TP1); see
    /// [`ConfigSourceTrust`]. `None` (the default): the driver takes it from
    /// the client's bootstrap.
    pub config_source_trust: Option<ConfigSourceTrust>,
}

/// What the graph needs to decide whether a `ConfigSource` found beside a
/// name may send that name to the server it names (xDS TP1 "Transport
/// network addressing"; the rule is in docs/federation.md):
///
/// - an authority the bootstrap maps keeps the bootstrap's servers: a source
///   naming one of them is redundant and the bootstrap's ordered list
///   (with its fallback) is used; a source naming another server is refused,
///   so that no server can take over another authority's names;
/// - an authority the bootstrap does not map may be given a server by a
///   source inside a resource that came from a trusted server
///   (`trusted_xds_server`, gRFC A81/A102), with the source's target and
///   credentials: adding a server means dialling an address or reading a
///   local file that a server chose;
/// - from any other server, only a gRPC target the bootstrap lists in
///   `allowed_grpc_services` (gRFC A102), dialled with the listed
///   credentials, never the source's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSourceTrust {
    /// Each authority of the bootstrap and the `server_uri`s it maps to.
    pub mapped: BTreeMap<String, BTreeSet<String>>,
    /// The servers (as provenances name them) whose resources may add
    /// servers for authorities the bootstrap does not map.
    pub trusted_servers: BTreeSet<String>,
    /// gRFC A102's `allowed_grpc_services`: the targets any server may
    /// name, by target URI, with the credentials they are dialled with.
    pub allowed_grpc_services: BTreeMap<String, AllowedGrpcService>,
}

impl Default for GraphOptions {
    fn default() -> Self {
        Self {
            warming_timeout: Duration::from_secs(15),
            max_aggregate_depth: 16,
            known_authorities: KnownAuthorities::Any,
            config_source_trust: None,
        }
    }
}

impl GraphOptions {
    /// Sets [`warming_timeout`](Self::warming_timeout).
    pub fn with_warming_timeout(mut self, timeout: Duration) -> Self {
        self.warming_timeout = timeout;
        self
    }

    /// Sets [`max_aggregate_depth`](Self::max_aggregate_depth).
    pub fn with_max_aggregate_depth(mut self, depth: usize) -> Self {
        self.max_aggregate_depth = depth;
        self
    }

    /// Sets [`config_source_trust`](Self::config_source_trust).
    pub fn with_config_source_trust(mut self, trust: ConfigSourceTrust) -> Self {
        self.config_source_trust = Some(trust);
        self
    }

    /// Sets [`known_authorities`](Self::known_authorities).
    pub fn with_known_authorities(mut self, known: KnownAuthorities) -> Self {
        self.known_authorities = known;
        self
    }
}

/// No authority mapped, no server trusted: every source naming a server is
/// refused.
static NO_TRUST: ConfigSourceTrust = ConfigSourceTrust {
    mapped: BTreeMap::new(),
    trusted_servers: BTreeSet::new(),
    allowed_grpc_services: BTreeMap::new(),
};

impl GraphOptions {
    /// The trust in force: [`config_source_trust`](Self::config_source_trust),
    /// or none at all.
    pub(crate) fn trust(&self) -> &ConfigSourceTrust {
        self.config_source_trust.as_ref().unwrap_or(&NO_TRUST)
    }
}
