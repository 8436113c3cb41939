//! Listener → RouteConfiguration → Cluster edges.

use super::*;
use crate::{ClusterEndpoints, RouteBinding};

/// An RDS name in the HttpConnectionManager is watched; the route's clusters
/// and their endpoints follow.
#[test]
fn rds_route_config_is_watched_and_its_clusters_followed() {
    let mut h = Harness::new(Roots::new().listener("l"));
    assert_eq!(
        h.watch_changes().watched,
        [key(ResourceKind::Listener, "l")]
    );

    h.listener(listener_rds("l", "r"), "1");
    assert_eq!(
        h.watch_changes().watched,
        [key(ResourceKind::RouteConfiguration, "r")]
    );
    h.route(route_config("r", &["a", "b"]), "1");
    let mut watched = h.watch_changes().watched;
    watched.sort();
    assert_eq!(
        watched,
        [
            key(ResourceKind::Cluster, "a"),
            key(ResourceKind::Cluster, "b")
        ]
    );
    h.cluster(eds_cluster("a", None), "1");
    h.cluster(eds_cluster("b", Some("b-endpoints")), "1");
    let mut watched = h.watch_changes().watched;
    watched.sort();
    assert_eq!(
        watched,
        [
            key(ResourceKind::ClusterLoadAssignment, "a"),
            key(ResourceKind::ClusterLoadAssignment, "b-endpoints"),
        ]
    );
    h.endpoints(cla("a", 1), "1");
    assert!(h.snapshot().is_none(), "b's endpoints are still cold");
    h.endpoints(cla("b-endpoints", 3), "1");

    let s = h.ready();
    assert!(s.is_ok());
    let l = s.listener("l").expect("root listener");
    assert!(matches!(&l.routes[..], [RouteBinding::Rds(r)] if &**r == "r"));
    let rc = s.route_config("r").expect("rds route config");
    assert_eq!(&rc.clusters[..], [Arc::from("a"), Arc::from("b")]);
    assert_eq!(rc.virtual_host_count(), 1);
    let ClusterEndpoints::Eds {
        service_name,
        assignment: Some(assignment),
    } = &s.cluster("b").expect("b").endpoints
    else {
        panic!("b should have EDS endpoints");
    };
    assert_eq!(&**service_name, "b-endpoints");
    assert_eq!(assignment.value.endpoint_count(), 3);
}

/// An inline `route_config` needs no RDS watch; its clusters are edges of
/// the listener itself.
#[test]
fn inline_route_config_clusters_are_followed_without_rds() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_inline("l", route_config("inline", &["a"])), "1");
    let log = h.watch_changes();
    assert_eq!(
        log.watched,
        [
            key(ResourceKind::Listener, "l"),
            key(ResourceKind::Cluster, "a")
        ]
    );
    h.cluster(static_cluster("a"), "1");

    let s = h.ready();
    let l = s.listener("l").expect("root listener");
    let [RouteBinding::Inline(rc)] = &l.routes[..] else {
        panic!("expected one inline route configuration");
    };
    assert_eq!(&*rc.name, "inline");
    assert_eq!(&rc.clusters[..], [Arc::from("a")]);
    assert_eq!(s.route_configs().count(), 0);
    assert!(matches!(
        s.cluster("a").map(|c| &c.endpoints),
        Some(ClusterEndpoints::Inline(Some(_)))
    ));
}

/// Every cluster of `weighted_clusters` is an edge; a cluster used by
/// several routes is watched once.
#[test]
fn weighted_clusters_are_each_followed_once() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    let routes = vec![
        weighted_route(&["a", "b", "c"]),
        weighted_route(&["c", "a"]),
    ];
    h.route(route_config_with("r", routes), "1");
    let clusters: Vec<_> = h
        .watch_changes()
        .watched
        .into_iter()
        .filter(|(k, _)| *k == ResourceKind::Cluster)
        .map(|(_, n)| n)
        .collect();
    let mut sorted = clusters.clone();
    sorted.sort();
    assert_eq!(sorted, ["a", "b", "c"]);
    for c in ["a", "b", "c"] {
        h.cluster(static_cluster(c), "1");
    }
    let s = h.ready();
    let rc = s.route_config("r").expect("r");
    assert_eq!(
        &rc.clusters[..],
        [Arc::from("a"), Arc::from("b"), Arc::from("c")]
    );
    assert_eq!(s.cluster_count(), 3);
}

/// `cluster_header` chooses a cluster per request: recorded as dynamic,
/// nothing is watched for it.
#[test]
fn cluster_header_is_recorded_as_dynamic_and_not_followed() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config_with("r", vec![header_route("x-cluster")]), "1");
    let log = h.watch_changes();
    assert!(log.watched.iter().all(|(k, _)| *k != ResourceKind::Cluster));

    let s = h.ready();
    let rc = s.route_config("r").expect("r");
    assert_eq!(&rc.dynamic_cluster_headers[..], [Arc::from("x-cluster")]);
    assert!(rc.clusters.is_empty());
}

/// A listener without an HttpConnectionManager cannot route: an error on the
/// listener, and therefore on the snapshot.
#[test]
fn listener_without_http_connection_manager_is_a_snapshot_error() {
    let mut h = Harness::new(Roots::new().listener("l"));
    let bare = Listener {
        name: "l".into(),
        ..Default::default()
    };
    h.listener(bare, "1");
    let s = h.ready();
    assert_eq!(
        s.errors().cloned().collect::<Vec<_>>(),
        [crate::GraphError::NoHttpConnectionManager {
            listener: Arc::from("l")
        }]
    );
}
