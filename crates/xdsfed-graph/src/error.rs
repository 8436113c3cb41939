//! Why a part of the graph cannot be used.
//!
//! Errors are data in a snapshot, not failures of the engine: each one sits
//! where gRPC's A74 puts it. Listener and route configuration problems make
//! the listener unusable and are reported by [`Snapshot::errors`]; cluster and
//! endpoint problems stay on their [`ClusterSnapshot`] and leave every other
//! cluster serving.
//!
//! An error that came from the xDS client (a rejected resource, a server
//! error, a lost server quoted by a warming timeout) keeps the client's typed
//! [`XdsError`]; [`GraphError::source_error`] hands it to a data plane that
//! acts on its kind or cause.
//!
//! [`Snapshot::errors`]: crate::Snapshot::errors
//! [`ClusterSnapshot`]: crate::ClusterSnapshot

use std::sync::Arc;
use std::time::Duration;

use xdsfed_core::error::XdsError;

use crate::resource::ResourceKind;

/// A problem with one resource or one edge of the graph. Every variant names
/// the resource it is about.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The server said the resource does not exist.
    #[error("{kind} {name:?} does not exist")]
    DoesNotExist {
        /// The resource's type.
        kind: ResourceKind,
        /// The resource's name.
        name: Arc<str>,
    },
    /// The client reported the resource unusable (for instance, every version
    /// it received was rejected) and no earlier copy exists.
    // Not `#[source]`: the message already quotes the client's error, and a
    // reporter walking the chain would print it twice.
    #[error("{kind} {name:?}: {error}")]
    Resource {
        /// The resource's type.
        kind: ResourceKind,
        /// The resource's name.
        name: Arc<str>,
        /// The client's error, as it reported it. Shared: every snapshot
        /// that shows the error holds the same one.
        error: Arc<XdsError>,
    },
    /// The resource did not arrive within the warming timeout.
    #[error("{kind} {name:?} did not arrive within {after:?}{}", last_error_suffix(.last_error))]
    WarmingTimeout {
        /// The resource's type.
        kind: ResourceKind,
        /// The resource's name.
        name: Arc<str>,
        /// The configured warming timeout.
        after: Duration,
        /// The last ambient error the client reported while it waited.
        last_error: Option<Arc<XdsError>>,
    },
    /// A name found in a resource is not a valid resource name.
    #[error("{kind} name {name:?} is invalid: {why}")]
    InvalidName {
        /// The type the name refers to.
        kind: ResourceKind,
        /// The name as written.
        name: Arc<str>,
        /// What is wrong with it.
        why: Arc<str>,
    },
    /// An `xdstp://` name whose authority neither the bootstrap nor the
    /// `ConfigSource` beside the name lists (xDS TP1).
    #[error(
        "{kind} {name:?}: authority {authority:?} is in neither the bootstrap nor the ConfigSource of {referrer:?}"
    )]
    UnknownAuthority {
        /// The type the name refers to.
        kind: ResourceKind,
        /// The name.
        name: Arc<str>,
        /// Its authority.
        authority: Arc<str>,
        /// The resource whose edge carries the name.
        referrer: Arc<str>,
    },
    /// A `ConfigSource` beside the name names a server the name may not be
    /// sent to (the trust rule of [`ConfigSourceTrust`](crate::ConfigSourceTrust)).
    #[error("{kind} {name:?}: the ConfigSource of {referrer:?} is refused: {why}")]
    ConfigSourceRefused {
        /// The type the name refers to.
        kind: ResourceKind,
        /// The name.
        name: Arc<str>,
        /// The resource whose edge carries the name and the source.
        referrer: Arc<str>,
        /// Why.
        why: Arc<str>,
    },
    /// The listener has no HttpConnectionManager, in `api_listener` or in a
    /// filter chain.
    #[error("listener {listener:?} has no HttpConnectionManager")]
    NoHttpConnectionManager {
        /// The listener.
        listener: Arc<str>,
    },
    /// An HttpConnectionManager could not be decoded from its `Any`.
    #[error("listener {listener:?}: cannot decode HttpConnectionManager: {reason}")]
    BadHttpConnectionManager {
        /// The listener.
        listener: Arc<str>,
        /// The decoder's message.
        reason: Arc<str>,
    },
    /// The HttpConnectionManager has neither `rds` nor `route_config`.
    #[error("listener {listener:?}: HttpConnectionManager names no route configuration")]
    NoRouteSpecifier {
        /// The listener.
        listener: Arc<str>,
    },
    /// The HttpConnectionManager uses `scoped_routes`, which the graph does
    /// not follow.
    #[error("listener {listener:?}: scoped_routes is not supported")]
    ScopedRoutesUnsupported {
        /// The listener.
        listener: Arc<str>,
    },
    /// An EDS cluster with an `xdstp://` name must set
    /// `eds_cluster_config.service_name` (gRFC A47). Clusters are validated
    /// before the graph reads them, and such a cluster is NACKed, so the
    /// graph no longer reports this.
    #[error(
        "cluster {cluster:?}: an xdstp:// EDS cluster must set eds_cluster_config.service_name"
    )]
    XdstpEdsWithoutServiceName {
        /// The cluster.
        cluster: Arc<str>,
    },
    /// The aggregate cluster's `ClusterConfig` could not be decoded. Such a
    /// cluster is NACKed before the graph reads it, so the graph no longer
    /// reports this.
    #[error("cluster {cluster:?}: cannot decode aggregate ClusterConfig: {reason}")]
    BadAggregateConfig {
        /// The cluster.
        cluster: Arc<str>,
        /// The decoder's message.
        reason: Arc<str>,
    },
    /// A leaf cluster's `load_assignment` could not be held. Assignments
    /// are held at ingest, where one that cannot be is NACKed, and a LEDS
    /// locality's members are shared into its assignment rather than
    /// copied, so the graph no longer reports this.
    #[error("cluster {cluster:?}: cannot hold its load_assignment: {reason}")]
    BadLoadAssignment {
        /// The cluster.
        cluster: Arc<str>,
        /// Why.
        reason: Arc<str>,
    },
    /// Following the aggregate cluster's children leads back to a cluster on
    /// the current path.
    #[error("aggregate cluster {cluster:?}: its children loop back to {through:?}")]
    AggregateCycle {
        /// The aggregate cluster whose tree holds the cycle.
        cluster: Arc<str>,
        /// The cluster reached twice on one path.
        through: Arc<str>,
    },
    /// The aggregate cluster's tree is deeper than the configured maximum.
    #[error("aggregate cluster {cluster:?}: tree is deeper than {max_depth} levels")]
    AggregateTooDeep {
        /// The aggregate cluster.
        cluster: Arc<str>,
        /// The configured maximum depth.
        max_depth: usize,
    },
    /// The aggregate cluster's tree has no leaf cluster at all.
    #[error("aggregate cluster {cluster:?} has no leaf cluster")]
    AggregateEmpty {
        /// The aggregate cluster.
        cluster: Arc<str>,
    },
}

impl GraphError {
    /// The xDS client's error behind this one, when the client reported it:
    /// the error of [`Resource`](GraphError::Resource), or the last ambient
    /// error a [`WarmingTimeout`](GraphError::WarmingTimeout) quotes. A data
    /// plane reads its [`kind`](XdsError::kind) (gRFC A88: transient or about
    /// the data), [`cause`](XdsError::cause) and [`server`](XdsError::server)
    /// instead of parsing the message. `None` for the graph's own findings (a
    /// missing resource, an invalid name, an aggregate cycle).
    ///
    /// ```
    /// use xdsfed_core::error::{ErrorKind, XdsError};
    /// use xdsfed_graph::{GraphError, ResourceKind};
    ///
    /// let rejected = XdsError::new(ErrorKind::Nacked, "every version of c was rejected");
    /// let error = GraphError::Resource {
    ///     kind: ResourceKind::Cluster,
    ///     name: "c".into(),
    ///     error: rejected.into(),
    /// };
    /// assert_eq!(error.to_string(), "Cluster \"c\": every version of c was rejected");
    /// assert_eq!(error.source_error().map(XdsError::kind), Some(ErrorKind::Nacked));
    /// ```
    pub fn source_error(&self) -> Option<&XdsError> {
        match self {
            GraphError::Resource { error, .. } => Some(error),
            GraphError::WarmingTimeout { last_error, .. } => last_error.as_deref(),
            _ => None,
        }
    }
}

fn last_error_suffix(last: &Option<Arc<XdsError>>) -> String {
    match last {
        Some(e) => format!(" (last error: {e})"),
        None => String::new(),
    }
}
