//! The vocabulary shared by the engine's inputs and its snapshots: the four
//! resource kinds, where a resource came from, and what the client reported.

use std::fmt;
use std::sync::Arc;
use xdsfed_core::version::Version;

use xdsfed_core::error::XdsError;

/// The xDS resource types the graph follows.
///
/// The order is the order of the graph's edges: a listener points at route
/// configurations, a route configuration at clusters, a cluster at its
/// endpoints (or, when aggregate, at other clusters), and a locality of
/// endpoints at an LEDS collection of single endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// `envoy.config.listener.v3.Listener` (LDS).
    Listener,
    /// `envoy.config.route.v3.RouteConfiguration` (RDS).
    RouteConfiguration,
    /// `envoy.config.cluster.v3.Cluster` (CDS).
    Cluster,
    /// `envoy.config.endpoint.v3.ClusterLoadAssignment` (EDS).
    ClusterLoadAssignment,
    /// `envoy.config.endpoint.v3.LbEndpoint` (LEDS, xDS TP1). In the graph
    /// a node of this kind is a whole glob collection of endpoints, named
    /// by its glob (`xdstp://…/envoy.config.endpoint.v3.LbEndpoint/…/*`).
    LbEndpoint,
}

impl ResourceKind {
    /// The protobuf message name, as it appears in type URLs.
    pub fn message_name(self) -> &'static str {
        match self {
            Self::Listener => "envoy.config.listener.v3.Listener",
            Self::RouteConfiguration => "envoy.config.route.v3.RouteConfiguration",
            Self::Cluster => "envoy.config.cluster.v3.Cluster",
            Self::ClusterLoadAssignment => "envoy.config.endpoint.v3.ClusterLoadAssignment",
            Self::LbEndpoint => "envoy.config.endpoint.v3.LbEndpoint",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Listener => "Listener",
            Self::RouteConfiguration => "RouteConfiguration",
            Self::Cluster => "Cluster",
            Self::ClusterLoadAssignment => "ClusterLoadAssignment",
            Self::LbEndpoint => "LbEndpoint",
        })
    }
}

/// Where a resource version came from: the authority its name belongs to,
/// the management server that delivered it and the version it carried.
///
/// The fields are `Arc<str>` because the same provenance is copied into every
/// snapshot that includes the resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Provenance {
    /// The `xdstp://` authority of the name; `None` for an old-style name.
    pub authority: Option<Arc<str>>,
    /// The management server (its target URI) that delivered the resource.
    pub server: Arc<str>,
    /// The version the server gave the resource (or its response).
    pub version: Version,
}

impl Provenance {
    /// A provenance from its three parts.
    pub fn new(
        authority: Option<&str>,
        server: impl Into<Arc<str>>,
        version: impl Into<Version>,
    ) -> Self {
        Self {
            authority: authority.map(Arc::from),
            server: server.into(),
            version: version.into(),
        }
    }
}

/// What the xDS client reported about one watched resource.
///
/// This mirrors the client's watch events (gRFC A88's split): `Error` means
/// the resource cannot be used and no earlier copy is kept; `AmbientError`
/// means a problem occurred but the last good copy keeps serving. Both carry
/// the client's typed [`XdsError`] as it was reported.
#[derive(Debug, Clone, PartialEq)]
pub enum Update<T> {
    /// A new validated version of the resource.
    Changed(Arc<T>, Provenance),
    /// The server says the resource does not exist (or it was deleted).
    DoesNotExist,
    /// The resource is unusable and there is no cached copy.
    Error(XdsError),
    /// A problem that does not invalidate the cached copy (a NACKed update,
    /// a lost connection); the last good version keeps serving.
    AmbientError(XdsError),
}

/// A resource as it appears in a snapshot: the value, where it came from,
/// and the ambient error recorded against it, if any.
#[derive(Debug)]
pub struct Versioned<T> {
    /// The resource as the client delivered it.
    pub value: Arc<T>,
    /// Its authority, server and version.
    pub provenance: Provenance,
    /// The latest ambient error (a rejected update, a lost server) while this
    /// version kept serving; cleared by the next good version. The client's
    /// error as it reported it (its kind, cause, server and message), shared
    /// by every snapshot that shows it.
    pub ambient_error: Option<Arc<XdsError>>,
}

// A derive would demand `T: Clone`; only the `Arc` is cloned.
impl<T> Clone for Versioned<T> {
    fn clone(&self) -> Self {
        Self {
            value: Arc::clone(&self.value),
            provenance: self.provenance.clone(),
            ambient_error: self.ambient_error.clone(),
        }
    }
}

/// What the client reported about a collection root (xDS TP1): a glob
/// collection (`xdstp://a/<type>/pool/*`) or a list collection
/// (`xdstp://a/<type>Collection/pool`). Its members are roots of the graph.
#[derive(Debug, Clone, PartialEq)]
pub enum CollectionUpdate<T> {
    /// A list collection arrived or changed: exactly these are its members
    /// now. Members without a value yet are waited for, as any resource
    /// the graph reaches; members no longer listed leave. Glob collections
    /// have no member list and never report this.
    Listed(Arc<[Arc<str>]>),
    /// What happened to one member, as for a single resource. A member
    /// that changes or fails joins the collection. `DoesNotExist` takes a
    /// glob member out; a listed member that does not exist stays listed,
    /// marked absent.
    Member(Arc<str>, Update<T>),
    /// The member left the collection.
    Removed(Arc<str>),
    /// The collection is empty (or, for a list collection, does not exist).
    Empty,
    /// The collection itself could not be fetched or was rejected. Its
    /// members so far keep serving; the error is shown on the collection
    /// until its next good update.
    Error(XdsError),
}
