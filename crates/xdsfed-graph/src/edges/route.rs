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

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::{
    ClusterSpecifier, RequestMirrorPolicy,
};

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
struct Collector {
    scan: RouteScan,
    // Dedup is by the name as written: routes usually repeat names verbatim,
    // and this avoids canonicalising the same string again.
    seen_raw: HashSet<String>,
    seen_key: HashSet<Arc<str>>,
    seen_header: HashSet<String>,
}

impl Collector {
    fn cluster(&mut self, cx: ParseCx<'_>, raw: &str, referrer: &Arc<str>) {
        if raw.is_empty() || self.seen_raw.contains(raw) {
            return;
        }
        self.seen_raw.insert(raw.to_owned());
        let edge = cluster_edge(cx, raw, referrer);
        if self.seen_key.insert(Arc::clone(&edge.target.name)) {
            self.scan.clusters.push(Arc::clone(&edge.target.name));
            self.scan.edges.push(edge);
        }
    }

    fn header(&mut self, header: &str) {
        if !header.is_empty() && self.seen_header.insert(header.to_owned()) {
            self.scan.dynamic_cluster_headers.push(Arc::from(header));
        }
    }

    fn mirrors(&mut self, cx: ParseCx<'_>, mirrors: &[RequestMirrorPolicy], referrer: &Arc<str>) {
        for mirror in mirrors {
            self.cluster(cx, &mirror.cluster, referrer);
            self.header(&mirror.cluster_header);
        }
    }
}

/// Reads the cluster edges of `rc`. `referrer` names the resource holding it
/// (the route configuration, or the listener for an inline one) in errors.
pub(crate) fn scan_route_config(
    cx: ParseCx<'_>,
    rc: &RouteConfiguration,
    referrer: &Arc<str>,
) -> RouteScan {
    let mut c = Collector::default();
    c.mirrors(cx, &rc.request_mirror_policies, referrer);
    for vhost in &rc.virtual_hosts {
        c.mirrors(cx, &vhost.request_mirror_policies, referrer);
        for route in &vhost.routes {
            let Some(Action::Route(action)) = &route.action else {
                continue;
            };
            match &action.cluster_specifier {
                Some(ClusterSpecifier::Cluster(name)) => c.cluster(cx, name, referrer),
                Some(ClusterSpecifier::WeightedClusters(weighted)) => {
                    for wc in &weighted.clusters {
                        c.cluster(cx, &wc.name, referrer);
                        c.header(&wc.cluster_header);
                    }
                }
                Some(ClusterSpecifier::ClusterHeader(header)) => c.header(header),
                Some(ClusterSpecifier::ClusterSpecifierPlugin(_))
                | Some(ClusterSpecifier::InlineClusterSpecifierPlugin(_))
                | None => {}
            }
            c.mirrors(cx, &action.request_mirror_policies, referrer);
        }
    }
    c.scan
}
