//! Which endpoints a cluster sends to, at one snapshot.
//!
//! ```text
//! cluster ──► EDS / inline ClusterLoadAssignment ──► priorities 0, 1, …
//! aggregate ──► leaves in order (gRFC A37) ──► leaf 1's priorities, then leaf 2's, …
//!                                              │
//!          the first priority with an endpoint HEALTHY or UNKNOWN
//!                                              ▼
//!          endpoints, each with locality share × endpoint share
//! ```
//!
//! As gRPC does (gRFC A27, A37):
//! - only endpoints whose health status is HEALTHY or UNKNOWN are used;
//! - a locality without `load_balancing_weight`, or with weight 0, is
//!   ignored;
//! - the lowest priority that has any usable endpoint takes all traffic;
//! - an aggregate cluster's leaves are flattened in order, each leaf's
//!   priorities after the previous leaf's, and a missing or failed leaf
//!   contributes nothing.
//!
//! Each endpoint's weight is its share of the chosen priority: its
//! locality's weight over the sum of the weights of the localities that
//! have usable endpoints, times its own `load_balancing_weight` (default 1)
//! over the sum in its locality. An address listed twice gets both shares.

use std::collections::BTreeMap;

use xdsfed_core::types::{EndpointView, LoadAssignment, LocalityView};
use xdsfed_graph::{ClusterEndpoints, ClusterSnapshot, Snapshot};

use crate::endpoint::EndpointAddress;
use crate::error::{cleaned, shown};

/// The endpoints of one cluster at one snapshot, ordered by address, each
/// with its share of the traffic (the shares add up to 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointSet {
    endpoints: BTreeMap<EndpointAddress, f64>,
}

impl EndpointSet {
    /// The endpoints and their weights, ordered by address.
    pub fn iter(&self) -> impl Iterator<Item = (&EndpointAddress, f64)> {
        self.endpoints.iter().map(|(a, w)| (a, *w))
    }

    /// How many endpoints there are.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The weight of `address`, if it is in the set.
    pub fn weight(&self, address: &EndpointAddress) -> Option<f64> {
        self.endpoints.get(address).copied()
    }

    /// Whether `address` is in the set.
    pub fn contains(&self, address: &EndpointAddress) -> bool {
        self.endpoints.contains_key(address)
    }

    #[cfg(test)]
    pub(crate) fn from_map(endpoints: BTreeMap<EndpointAddress, f64>) -> Self {
        Self { endpoints }
    }

    /// The endpoints of `cluster` in `snapshot`, or why the cluster cannot
    /// take traffic (it is missing or failed, or every leaf of an aggregate
    /// cluster is). A usable cluster with no healthy endpoint gives an
    /// empty set.
    pub fn of(snapshot: &Snapshot, cluster: &str) -> Result<Self, String> {
        let entry = usable(snapshot, cluster)?;
        let priorities = match &entry.endpoints {
            ClusterEndpoints::Aggregate { leaves } => {
                let mut all = Vec::new();
                let mut last_error = None;
                for leaf in leaves.iter() {
                    match usable(snapshot, leaf).and_then(leaf_assignment) {
                        Ok(cla) => all.extend(priorities(cla)),
                        Err(error) => last_error = Some(error),
                    }
                }
                match (all.is_empty(), last_error) {
                    (true, Some(error)) => {
                        return Err(format!(
                            "aggregate cluster {}: no leaf cluster can be used ({error})",
                            shown(cluster)
                        ));
                    }
                    _ => all,
                }
            }
            _ => priorities(leaf_assignment(entry)?),
        };
        Ok(priorities
            .into_iter()
            .map(|localities| Self::of_priority(&localities))
            .find(|set| !set.is_empty())
            .unwrap_or_default())
    }

    /// The usable endpoints of one priority and their shares.
    fn of_priority(localities: &[LocalityView<'_>]) -> Self {
        let usable: Vec<(u32, Vec<(EndpointAddress, u32)>)> = localities
            .iter()
            .filter_map(|l| {
                let weight = l.weight();
                let endpoints: Vec<_> = l.endpoints().filter_map(usable_endpoint).collect();
                (weight > 0 && !endpoints.is_empty()).then_some((weight, endpoints))
            })
            .collect();
        let locality_total: f64 = usable.iter().map(|(w, _)| f64::from(*w)).sum();
        let mut endpoints = BTreeMap::new();
        for (locality_weight, members) in usable {
            let member_total: f64 = members.iter().map(|(_, w)| f64::from(*w)).sum();
            for (address, weight) in members {
                let share =
                    f64::from(locality_weight) / locality_total * f64::from(weight) / member_total;
                *endpoints.entry(address).or_insert(0.0) += share;
            }
        }
        Self { endpoints }
    }
}

/// The cluster's snapshot entry, if it can take traffic.
fn usable<'s>(snapshot: &'s Snapshot, cluster: &str) -> Result<&'s ClusterSnapshot, String> {
    let entry = snapshot
        .cluster(cluster)
        .ok_or_else(|| format!("cluster {} is not in the snapshot", shown(cluster)))?;
    match &entry.error {
        Some(error) => Err(format!(
            "cluster {} cannot be used: {}",
            shown(cluster),
            cleaned(&error.to_string())
        )),
        None => Ok(entry),
    }
}

/// A non-aggregate cluster's load assignment.
fn leaf_assignment(entry: &ClusterSnapshot) -> Result<&LoadAssignment, String> {
    match &entry.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => Ok(&a.value),
        ClusterEndpoints::Inline(Some(cla)) => Ok(cla),
        ClusterEndpoints::Aggregate { .. } => Err(format!(
            "cluster {} is an aggregate inside an aggregate's leaves",
            shown(&entry.name)
        )),
        ClusterEndpoints::Eds {
            assignment: None, ..
        }
        | ClusterEndpoints::Inline(None)
        | ClusterEndpoints::Unavailable => Err(format!(
            "cluster {} has no load assignment",
            shown(&entry.name)
        )),
    }
}

/// The localities of each priority, priority 0 first (the client has
/// checked that priorities have no holes).
fn priorities(cla: &LoadAssignment) -> Vec<Vec<LocalityView<'_>>> {
    let mut by_priority: BTreeMap<u32, Vec<LocalityView<'_>>> = BTreeMap::new();
    for locality in cla.localities() {
        by_priority
            .entry(locality.priority())
            .or_default()
            .push(locality);
    }
    by_priority.into_values().collect()
}

/// An endpoint's address and weight, if its health lets it take traffic.
fn usable_endpoint(endpoint: EndpointView<'_>) -> Option<(EndpointAddress, u32)> {
    endpoint.is_usable().then(|| {
        (
            EndpointAddress::new(endpoint.address, endpoint.port),
            endpoint.weight.max(1),
        )
    })
}

#[cfg(test)]
mod tests;
