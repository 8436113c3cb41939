//! RouteConfiguration → clusters.
//!
//! Every cluster a request could be sent to is an edge: a route's `cluster`,
//! each of its `weighted_clusters`, and the clusters of request mirror
//! policies at the route, virtual host and route configuration levels (Envoy
//! warms those too). `cluster_header` picks a cluster per request from a
//! header, so it cannot be followed ahead of time: it is recorded as dynamic.
//! Cluster specifier plugins choose clusters by their own rules and are
//! likewise not followed.

use std::sync::Arc;
use xdsfed_core::hash::HashSet;
use xdsfed_core::types::{RouteConfigView, RouteTarget};

use super::{Edge, ParseCx, cluster_edge};

/// The clusters a route configuration can send to.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouteScan {
    /// Each cluster once, in the order first seen, by canonical name.
    pub(crate) clusters: Vec<Arc<str>>,
    /// The header names of `cluster_header` routes, each once.
    pub(crate) dynamic_cluster_headers: Vec<Arc<str>>,
    /// One edge per entry of `clusters`.
    pub(crate) edges: Vec<Edge>,
}

#[derive(Default)]
struct Collector<'v> {
    scan: RouteScan,
    // Dedup is by the name as written: routes usually repeat names verbatim,
    // and this avoids canonicalising the same string again.
    seen_raw: HashSet<&'v str>,
    seen_key: HashSet<Arc<str>>,
    seen_header: HashSet<&'v str>,
}

impl<'v> Collector<'v> {
    fn cluster(&mut self, cx: ParseCx<'_>, raw: &'v str, referrer: &Arc<str>) {
        if raw.is_empty() || !self.seen_raw.insert(raw) {
            return;
        }
        let edge = cluster_edge(cx, raw, referrer);
        if self.seen_key.insert(Arc::clone(&edge.target.name)) {
            self.scan.clusters.push(Arc::clone(&edge.target.name));
            self.scan.edges.push(edge);
        }
    }

    fn header(&mut self, header: &'v str) {
        if !header.is_empty() && self.seen_header.insert(header) {
            self.scan.dynamic_cluster_headers.push(Arc::from(header));
        }
    }
}

/// Reads the cluster edges of `rc`. `referrer` names the resource holding it
/// (the route configuration, or the listener for an inline one) in errors.
pub(crate) fn scan_route_config(
    cx: ParseCx<'_>,
    rc: &RouteConfigView,
    referrer: &Arc<str>,
) -> RouteScan {
    let mut c = Collector::default();
    for target in rc.targets() {
        match target {
            RouteTarget::Cluster(name)
            | RouteTarget::Weighted(name, _)
            | RouteTarget::Mirror(name) => c.cluster(cx, name, referrer),
            RouteTarget::Header(header) => c.header(header),
        }
    }
    c.scan
}
