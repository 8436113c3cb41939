//! What watchers see of a resource: its state, status and source, the
//! server features that change how events become states, and the gRFC A88
//! transitions between states (in `a88`, re-exported here).
//!
//! A leaf below both the federation core, which decides which answer an
//! entry gets, and the client's cache, which holds the entries and wakes
//! their watchers: neither calls the other to change a state.

use std::sync::Arc;
use std::time::SystemTime;

use crate::error::XdsError;
use crate::protocol::ResourceKey;
use crate::types::Decoded;
use crate::version::Version;

mod a88;

pub use a88::{
    Context, ReportedNack, apply, data_error, healthy_again, is_answered, named_server, short_type,
    transient,
};

/// A resource's status, as CSDS (`envoy.admin.v3.ClientResourceStatus`) names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResourceStatus {
    /// Subscribed, nothing received yet.
    Requested,
    /// The server says it does not exist, or the does-not-exist timer fired.
    DoesNotExist,
    /// Received and accepted.
    Acked,
    /// The last update was rejected; a previous good copy may still serve.
    Nacked,
    /// The server reported an error for it (TP3).
    ReceivedError,
    /// The does-not-exist timer fired while the server was known to be slow
    /// (`resource_timer_indicates_transient_failure`).
    Timeout,
    /// Loaded from the state directory at start; no server has confirmed
    /// it yet. The copy serves, with an ambient error saying so, until a
    /// server's answer replaces it. CSDS has no such status: it is shown
    /// there as `REQUESTED` (asked for, not yet answered), with the copy.
    FromDisk,
}

impl ResourceStatus {
    /// The CSDS enum value (`envoy.admin.v3.ClientResourceStatus`).
    pub fn to_csds(self) -> i32 {
        match self {
            ResourceStatus::Requested => 1,
            ResourceStatus::DoesNotExist => 2,
            ResourceStatus::Acked => 3,
            ResourceStatus::Nacked => 4,
            ResourceStatus::ReceivedError => 5,
            ResourceStatus::Timeout => 6,
            ResourceStatus::FromDisk => 1,
        }
    }

    /// All statuses, in CSDS order, then [`ResourceStatus::FromDisk`].
    pub const ALL: [ResourceStatus; 7] = [
        ResourceStatus::Requested,
        ResourceStatus::DoesNotExist,
        ResourceStatus::Acked,
        ResourceStatus::Nacked,
        ResourceStatus::ReceivedError,
        ResourceStatus::Timeout,
        ResourceStatus::FromDisk,
    ];

    /// The CSDS name, e.g. `ACKED` (`FROM_DISK` for the status CSDS does
    /// not have).
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceStatus::Requested => "REQUESTED",
            ResourceStatus::DoesNotExist => "DOES_NOT_EXIST",
            ResourceStatus::Acked => "ACKED",
            ResourceStatus::Nacked => "NACKED",
            ResourceStatus::ReceivedError => "RECEIVED_ERROR",
            ResourceStatus::Timeout => "TIMEOUT",
            ResourceStatus::FromDisk => "FROM_DISK",
        }
    }
}

/// The latest state of one resource, as watchers and the status dump see it.
#[derive(Debug, Clone)]
pub struct ResourceState {
    /// The last good copy, if any.
    pub resource: Option<Decoded>,
    /// The version of the last good copy.
    pub version: Option<Version>,
    /// The CSDS status.
    pub status: ResourceStatus,
    /// The last error, cleared by the next good update.
    pub error: Option<XdsError>,
    /// When the last good copy arrived.
    pub last_updated: Option<SystemTime>,
    /// The last rejected update, for CSDS (`UpdateFailureState`); cleared
    /// by the next good update. Boxed: most resources have none.
    pub failed_update: Option<Box<FailedUpdate>>,
    /// Where the last good copy came from: which server, under which name,
    /// and whether a fallback server, an `#alt` or a redirect served it.
    /// `None` until a copy arrives. A copy applied without routing (through
    /// the client cache's `Cache::apply`: a wildcard subscription's, say) came directly from
    /// the server it was applied for.
    pub source: Option<Source>,
}

/// A rejected update (see [`ResourceState::failed_update`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedUpdate {
    /// Its version.
    pub version: Version,
    /// When it arrived (`UpdateFailureState.last_update_attempt`).
    pub at: SystemTime,
}

/// Where a cached copy came from (see [`ResourceState::source`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The server that sent it.
    pub server: Arc<str>,
    /// The authority of the name it was fetched as (`None` for old-style).
    pub authority: Option<Arc<str>>,
    /// The name it was fetched as: the watched name itself, or the `#alt`
    /// or redirect target that stood in for it.
    pub fetched_as: Arc<str>,
    /// Served by a fallback server of its authority (gRFC A71), not the first.
    pub fallback: bool,
    /// Served by the watched name's `#alt` alternative (xDS TP1).
    pub alt: bool,
    /// Reached through one or more `ResourceLocator` redirects (xDS TP1).
    pub redirected: bool,
}

impl Source {
    /// A copy `server` sent under `key`'s own name, with no fallback, `#alt`
    /// or redirect known to have been in between.
    pub fn direct(server: &Arc<str>, key: &ResourceKey) -> Self {
        let authority = crate::name::authority_of(&key.name).map(Arc::from);
        Self::direct_under(server, authority)
    }

    /// [`Source::direct`] with the name's `authority` already at hand (a
    /// cache entry holds it), so that recording where a copy came from
    /// allocates nothing.
    pub fn direct_under(server: &Arc<str>, authority: Option<Arc<str>>) -> Self {
        Source {
            server: Arc::clone(server),
            authority,
            fetched_as: own_name(),
            fallback: false,
            alt: false,
            redirected: false,
        }
    }
}

/// The empty `fetched_as` of a copy fetched under its own name: one shared
/// allocation for the process, not one per copy.
pub(crate) fn own_name() -> Arc<str> {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    Arc::clone(EMPTY.get_or_init(|| Arc::from("")))
}

impl ResourceState {
    /// Subscribed, nothing received yet.
    pub const fn requested() -> Self {
        ResourceState {
            resource: None,
            version: None,
            status: ResourceStatus::Requested,
            error: None,
            last_updated: None,
            failed_update: None,
            source: None,
        }
    }
}

/// Where a resource comes from, for the status dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The resource's authority (`None` for old-style names).
    pub authority: Option<Arc<str>>,
    /// The server the subscription is on.
    pub server: Arc<str>,
}

/// Server behaviour that changes how events become states (server features).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DataErrorPolicy {
    /// `ignore_resource_deletion` (gRFC A53): keep a deleted resource.
    pub ignore_resource_deletion: bool,
    /// `fail_on_data_errors` (gRFC A88): drop the cached copy on a NACK.
    pub fail_on_data_errors: bool,
    /// `resource_timer_indicates_transient_failure` (gRFC A88).
    pub timer_is_transient: bool,
}

impl DataErrorPolicy {
    /// The policy that a server's features ask for.
    pub fn from_features(features: &[String]) -> Self {
        let has = |f: &str| features.iter().any(|x| x == f);
        DataErrorPolicy {
            ignore_resource_deletion: has("ignore_resource_deletion"),
            fail_on_data_errors: has("fail_on_data_errors"),
            timer_is_transient: has("resource_timer_indicates_transient_failure"),
        }
    }
}
