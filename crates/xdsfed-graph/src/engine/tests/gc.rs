//! Garbage collection: what nothing reaches is unwatched.

use super::*;

fn sorted(mut v: Vec<(ResourceKind, String)>) -> Vec<(ResourceKind, String)> {
    v.sort();
    v
}

/// A cluster the route configuration no longer names is unwatched, with its
/// endpoints, when the snapshot without it is published.
#[test]
fn removed_cluster_and_its_endpoints_are_unwatched_at_publication() {
    let mut h = warm_graph(&["keep", "drop"]);
    h.ready();
    h.watch_changes();

    h.route(route_config("r", &["keep"]), "2");
    assert!(
        h.watch_changes().unwatched.is_empty(),
        "not before the snapshot without it is published"
    );
    let s = h.ready();
    assert!(s.cluster("drop").is_none());
    assert_eq!(
        sorted(h.watch_changes().unwatched),
        [
            key(ResourceKind::Cluster, "drop"),
            key(ResourceKind::ClusterLoadAssignment, "drop"),
        ]
    );
    assert_eq!(
        h.engine.reachable_count(),
        4,
        "l, r, keep and its endpoints"
    );
}

/// A cluster still named by another route stays.
#[test]
fn cluster_still_referenced_elsewhere_is_kept() {
    let mut h = Harness::new(Roots::new().listener("l").cluster("shared"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["shared"]), "1");
    h.cluster(static_cluster("shared"), "1");
    h.ready();
    h.watch_changes();

    h.route(route_config("r", &[]), "2");
    let s = h.ready();
    assert!(s.cluster("shared").is_some(), "still a root");
    assert!(h.watch_changes().unwatched.is_empty());
}

/// A resource dropped and named again before the next publication was never
/// unwatched, so it is neither re-watched nor cold again.
#[test]
fn cluster_dropped_and_restored_before_publication_keeps_its_watch_and_state() {
    let mut h = warm_graph(&["a", "b"]);
    h.ready();
    h.watch_changes();

    h.route(route_config("r", &["a"]), "2");
    h.route(route_config("r", &["a", "b"]), "3");
    let log = h.watch_changes();
    assert!(log.watched.is_empty() && log.unwatched.is_empty());
    assert_eq!(h.engine.cold_count(), 0, "b kept its endpoints");
    let s = h.ready();
    assert!(s.cluster("b").is_some_and(|c| c.is_ok()));
    assert!(h.watch_changes().unwatched.is_empty());
}

/// Switching the listener to another route configuration retires the old one
/// and everything only it reached.
#[test]
fn repointed_listener_retires_the_old_route_configuration_subtree() {
    let mut h = warm_graph(&["a"]);
    h.ready();
    h.watch_changes();

    h.listener(listener_rds("l", "r2"), "2");
    h.route(route_config("r2", &[]), "1");
    h.ready();
    assert_eq!(
        sorted(h.watch_changes().unwatched),
        [
            key(ResourceKind::RouteConfiguration, "r"),
            key(ResourceKind::Cluster, "a"),
            key(ResourceKind::ClusterLoadAssignment, "a"),
        ]
    );
}

/// An aggregate cycle cut off from the roots keeps itself referenced, but is
/// collected all the same.
#[test]
fn unreachable_aggregate_cycle_is_collected() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["a"]), "1");
    h.cluster(aggregate_cluster("a", &["b"]), "1");
    h.cluster(aggregate_cluster("b", &["a"]), "1");
    h.ready();
    h.watch_changes();

    h.route(route_config("r", &[]), "2");
    h.ready();
    assert_eq!(
        sorted(h.watch_changes().unwatched),
        [
            key(ResourceKind::Cluster, "a"),
            key(ResourceKind::Cluster, "b")
        ]
    );
    assert_eq!(h.engine.reachable_count(), 2, "only l and r remain");
}

/// Deleting a cluster (does-not-exist) drops its edge to the endpoints.
#[test]
fn deleted_cluster_releases_its_endpoints_but_stays_as_an_error() {
    let mut h = warm_graph(&["a"]);
    h.ready();
    h.watch_changes();
    h.engine.on_cluster(h.now, "a", Update::DoesNotExist);
    let s = h.ready();
    assert!(s.cluster("a").is_some_and(|c| !c.is_ok()));
    assert_eq!(
        h.watch_changes().unwatched,
        [key(ResourceKind::ClusterLoadAssignment, "a")]
    );
}
