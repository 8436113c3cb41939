//! One resource the graph reaches, and the state it is in.
//!
//! ```text
//!            Changed                      Changed
//!   Cold ──────────────► Present ◄──────────────────┐
//!    │                    │  ▲ AmbientError: keeps  │
//!    │ DoesNotExist,      │  └ the value, records   │
//!    │ Error, timeout     │ DoesNotExist, Error     │
//!    ▼                    ▼                         │
//!  Absent ◄───────────────┘                         │
//!    └──────────────────────────────────────────────┘
//! ```
//! `Cold` is the only state that holds a snapshot back. `Absent` is definite:
//! the resource is known to be missing, unusable, or late past the warming
//! timeout, and the snapshot reports it where A74 says.

use std::sync::Arc;
use std::time::Instant;
use xdsfed_core::hash::SmallSet;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use xdsfed_core::error::XdsError;
use xdsfed_core::types::ClusterView;
use xdsfed_core::types::RouteConfigView;
use xdsfed_core::types::{LedsMembers, LoadAssignment};

use crate::edges::{ClusterShape, Edge, Key, ListenerShape};
use crate::error::GraphError;
use crate::resource::Provenance;

/// A resource value together with what the graph read out of it.
#[derive(Debug, Clone)]
pub(super) enum Value {
    Listener {
        res: Arc<Listener>,
        shape: Arc<ListenerShape>,
    },
    Route {
        res: Arc<RouteConfigView>,
        clusters: Arc<[Arc<str>]>,
        headers: Arc<[Arc<str>]>,
    },
    Cluster {
        res: Arc<ClusterView>,
        shape: ClusterShape,
    },
    Endpoints {
        res: Arc<LoadAssignment>,
    },
    /// An LEDS glob collection: its members now, by name, shared with the
    /// snapshots' assignments that show them.
    Leds {
        members: LedsMembers,
    },
}

#[derive(Debug, Clone)]
pub(super) enum State {
    /// Watched, nothing definite yet. Holds snapshots back until `deadline`.
    Cold {
        deadline: Instant,
        /// An ambient error seen while waiting, quoted if the wait times out.
        last_error: Option<Arc<XdsError>>,
    },
    Present {
        value: Value,
        provenance: Provenance,
        ambient: Option<Arc<XdsError>>,
        /// The node's outgoing edges, read from `value`.
        edges: Arc<[Edge]>,
    },
    Absent(GraphError),
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) state: State,
    /// The nodes with an edge to this one. Only live nodes appear here.
    pub(super) parents: SmallSet<Key>,
    /// Named in the [`Roots`](crate::Roots).
    pub(super) named_root: bool,
    /// Delivered by a wildcard subscription and not since deleted.
    pub(super) wildcard_member: bool,
    /// How many collection roots hold it.
    pub(super) collections: u32,
    /// A [`WatchChange::Watch`](crate::WatchChange::Watch) was emitted for
    /// it, so retiring it must emit an `Unwatch`.
    pub(super) watched: bool,
}

impl Node {
    pub(super) fn new(state: State) -> Self {
        Self {
            state,
            parents: SmallSet::Empty,
            named_root: false,
            wildcard_member: false,
            collections: 0,
            watched: false,
        }
    }

    pub(super) fn is_root(&self) -> bool {
        self.named_root || self.wildcard_member || self.collections > 0
    }

    pub(super) fn edges(&self) -> Arc<[Edge]> {
        match &self.state {
            State::Present { edges, .. } => Arc::clone(edges),
            State::Cold { .. } | State::Absent(_) => Arc::new([]),
        }
    }

    /// The children if this is a usable aggregate cluster; aggregate
    /// ancestors must be rebuilt exactly when this changes.
    pub(super) fn aggregate_children(&self) -> Option<&Arc<[Arc<str>]>> {
        match &self.state {
            State::Present {
                value: Value::Cluster { shape, .. },
                ..
            } => shape.aggregate_children(),
            _ => None,
        }
    }
}
