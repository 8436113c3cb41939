//! LEDS: localities whose endpoints are the members of an `LbEndpoint`
//! glob collection (xDS TP1, delta) or of an `LbEndpointCollection` list
//! collection (gRFC A95).
//!
//! ```text
//! Cluster ─► ClusterLoadAssignment ─┬─ locality 0: lb_endpoints inline
//!                                   └─ locality 1: leds_collection_name ─► glob or list ─► members
//! ```
//!
//! A collection is one node of kind [`ResourceKind::LbEndpoint`], keyed by
//! its name: watched once however many localities name it, cold until the
//! collection's first answer of any kind (a member, a removal, a member
//! list, `Empty`), then present with its members ([`LedsMembers`]). A
//! list collection names its members ([`CollectionUpdate::Listed`]):
//! exactly those stay, the others leave; their values follow as members'
//! changes, in the same batch for inline entries, which arrive with the
//! collection. A member that joins,
//! changes or leaves costs one update of the members, and dirties only the
//! clusters whose assignment names the collection; their entries are cut
//! again with the members shared as that locality's endpoints (no member
//! is copied, whatever the collection's size), so the snapshot reads as it
//! does for endpoints inline in the assignment.
//!
//! Errors: the collection itself failing before its first answer makes the
//! node absent, and the cluster shows that error as it would a missing
//! assignment; after it, the error is ambient and the members keep
//! serving. A member that cannot be used (rejected, with no earlier copy)
//! is left out; a member's ambient error is recorded on the collection.

use std::sync::Arc;
use std::time::Instant;

use xdsfed_core::error::XdsError;
use xdsfed_core::hash::HashSet;
use xdsfed_core::types::{LedsEndpoint, LedsLocality, LedsMembers, LoadAssignment};

type Members = LedsMembers;

use super::GraphEngine;
use super::node::{State, Value};
use crate::edges::{Edge, Key, leds_key};
use crate::error::GraphError;
use crate::resource::{CollectionUpdate, Provenance, ResourceKind, Update};

impl GraphEngine {
    /// Applies `update` to LEDS collection `collection`, live or retired
    /// (a retired one is still watched until the next publication).
    pub(super) fn on_leds_update(
        &mut self,
        _now: Instant,
        collection: Arc<str>,
        update: CollectionUpdate<LedsEndpoint>,
    ) {
        let key = Key::new(ResourceKind::LbEndpoint, collection);
        let update = match self.patch_member(&key, update) {
            Ok(()) => return self.mark_changed(&key, false),
            Err(update) => update,
        };
        let Some(node) = self.nodes.get(&key).or_else(|| self.retired.get(&key)) else {
            let collection = &key.name;
            tracing::debug!(%collection, "update for a LEDS collection the graph does not reach");
            return;
        };
        let Some(state) = next_state(&key, &node.state, update) else {
            return;
        };
        if let Some(node) = self.retired.get_mut(&key) {
            node.state = state;
            return;
        }
        self.set_state(&key, state);
        self.mark_changed(&key, false);
    }

    /// A member's new copy, put in place in a live collection that is
    /// already present: the common case under churn. The snapshots share
    /// the collection's members, so the change copies a small collection's
    /// array of pointers or a large one's path, never the members. Any
    /// other update is handed back.
    fn patch_member(
        &mut self,
        key: &Key,
        update: CollectionUpdate<LedsEndpoint>,
    ) -> Result<(), CollectionUpdate<LedsEndpoint>> {
        let Some(State::Present {
            value: Value::Leds { members },
            provenance,
            ambient,
            ..
        }) = self.nodes.get_mut(key).map(|n| &mut n.state)
        else {
            return Err(update);
        };
        match update {
            CollectionUpdate::Member(name, Update::Changed(endpoint, from)) => {
                members.insert(name, endpoint);
                *provenance = from;
                *ambient = None;
                Ok(())
            }
            other => Err(other),
        }
    }

    /// `cla` as the snapshot shows it: each LEDS locality's endpoints are
    /// its collection's members, in name order, shared with the
    /// collection's node. Shared, not copied, when no locality uses LEDS.
    /// The error is that of the first collection that cannot be used.
    /// `edges` are the assignment node's, read from `cla`: the collections'
    /// keys, worked out when it arrived.
    pub(super) fn with_leds_endpoints(
        &self,
        cla: &Arc<LoadAssignment>,
        edges: &[Edge],
    ) -> (Arc<LoadAssignment>, Option<GraphError>) {
        if !cla.has_leds_localities() {
            return (Arc::clone(cla), None);
        }
        let localities = cla.leds_localities().count();
        let mut error = None;
        let mut fills = Vec::with_capacity(localities);
        for (nth, (_, leds)) in cla.leds_localities().enumerate() {
            let key = match collection_key(edges, nth, localities, leds) {
                Ok(key) => key,
                Err(e) => {
                    error = error.or(Some(e));
                    fills.push(Members::default());
                    continue;
                }
            };
            match self.nodes.get(&key).map(|n| &n.state) {
                Some(State::Present {
                    value: Value::Leds { members },
                    ..
                }) => fills.push(members.clone()),
                _ => {
                    error = error.or_else(|| self.absence(&key));
                    fills.push(Members::default());
                }
            }
        }
        (Arc::new(cla.with_leds_members(fills)), error)
    }
}

/// The state `update` moves collection `key` to from `state`; `None` when
/// nothing changes.
fn next_state(key: &Key, state: &State, update: CollectionUpdate<LedsEndpoint>) -> Option<State> {
    let (members, provenance, ambient) = match state {
        State::Present {
            value: Value::Leds { members },
            provenance,
            ambient,
            ..
        } => (members.clone(), provenance.clone(), ambient.clone()),
        // First answer (or an answer after a definite failure).
        _ => (Members::default(), first_provenance(&key.name), None),
    };
    let present = |members: Members, provenance: Provenance, ambient: Option<Arc<XdsError>>| {
        Some(State::Present {
            value: Value::Leds { members },
            provenance,
            ambient,
            edges: Arc::new([]),
        })
    };
    let was_present = matches!(state, State::Present { .. });
    match update {
        CollectionUpdate::Member(name, Update::Changed(endpoint, from)) => {
            let mut members = members;
            members.insert(name, endpoint);
            present(members, from, None)
        }
        CollectionUpdate::Member(name, Update::DoesNotExist | Update::Error(_))
        | CollectionUpdate::Removed(name) => {
            let mut members = members;
            let had = members.remove(&name).is_some();
            if had || !was_present {
                present(members, provenance, ambient)
            } else {
                None
            }
        }
        CollectionUpdate::Member(_, Update::AmbientError(error))
        | CollectionUpdate::Error(error)
            if was_present =>
        {
            present(members, provenance, Some(Arc::new(error)))
        }
        CollectionUpdate::Member(_, Update::AmbientError(_)) => None,
        CollectionUpdate::Error(error) => Some(State::Absent(GraphError::Resource {
            kind: ResourceKind::LbEndpoint,
            name: Arc::clone(&key.name),
            error: Arc::new(error),
        })),
        CollectionUpdate::Empty => present(Members::default(), provenance, None),
        // A list collection's members now; glob collections list none.
        CollectionUpdate::Listed(listed) => {
            let listed: HashSet<&Arc<str>> = listed.iter().collect();
            let gone: Vec<Arc<str>> = members
                .names()
                .filter(|name| !listed.contains(name))
                .cloned()
                .collect();
            if was_present && gone.is_empty() {
                return None;
            }
            let mut members = members;
            for name in &gone {
                members.remove(name);
            }
            present(members, provenance, ambient)
        }
    }
}

/// The provenance of a collection that answered without a member: its
/// authority, and no server or version yet.
fn first_provenance(name: &str) -> Provenance {
    Provenance::new(xdsfed_core::name::authority_of(name), "", "")
}

/// The key of the collection the `nth` of an assignment's `localities`
/// LEDS localities (`leds`) names, given the assignment's `edges`: one per
/// distinct collection, in the order the localities first name them, each
/// read with [`leds_key`]. When every edge is followed and there is one
/// for all the localities or one each, the locality's edge is known
/// without reading the name again (a snapshot rebuilds a cluster on each
/// change of a member, and reading a collection name costs five
/// allocations); otherwise the name is read again.
fn collection_key(
    edges: &[Edge],
    nth: usize,
    localities: usize,
    leds: &LedsLocality,
) -> Result<Key, GraphError> {
    let followed = edges.iter().all(|e| e.via.is_ok());
    let edge = match edges {
        [only] if followed => Some(only),
        _ if followed && edges.len() == localities => edges.get(nth),
        _ => None,
    };
    match edge {
        Some(edge) => Ok(edge.target.clone()),
        None => leds_key(leds).map_err(|(_, e)| e),
    }
}
