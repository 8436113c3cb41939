//! Readiness (A74), make before break, the warming timeout, ambient errors,
//! wildcard roots.

use super::*;
use crate::{ClusterEndpoints, GraphError};

/// A74: no snapshot while any reachable resource is cold.
#[test]
fn snapshot_waits_until_every_reachable_resource_is_warm() {
    let mut h = Harness::new(Roots::new().listener("l"));
    assert!(h.snapshot().is_none());
    h.listener(listener_rds("l", "r"), "1");
    assert!(h.snapshot().is_none());
    h.route(route_config("r", &["a"]), "1");
    assert!(h.snapshot().is_none());
    h.cluster(eds_cluster("a", None), "1");
    assert!(h.snapshot().is_none());
    h.endpoints(cla("a", 1), "1");
    assert_eq!(h.ready().generation(), 1);
    assert!(h.snapshot().is_none(), "nothing changed since");
}

/// An update that repoints a route to a new cluster does not replace the
/// published snapshot until that cluster is warm.
#[test]
fn make_before_break_keeps_the_old_snapshot_while_the_new_cluster_warms() {
    let mut h = warm_graph(&["old"]);
    let first = h.ready();

    h.route(route_config("r", &["new"]), "2");
    h.cluster(eds_cluster("new", None), "1");
    assert!(h.snapshot().is_none(), "new's endpoints are cold");
    assert_eq!(h.engine.current().map(|s| s.generation()), Some(1));
    assert!(
        first.cluster("old").is_some(),
        "the old snapshot still serves"
    );
    assert!(
        h.watch_changes().unwatched.is_empty(),
        "old stays watched while the snapshot using it serves"
    );

    h.endpoints(cla("new", 1), "1");
    let second = h.ready();
    assert!(second.cluster("new").is_some_and(|c| c.is_ok()));
    assert!(second.cluster("old").is_none());
    let mut unwatched = h.watch_changes().unwatched;
    unwatched.sort();
    assert_eq!(unwatched, sorted_unwatch(&["old"]));
}

fn sorted_unwatch(names: &[&str]) -> Vec<(ResourceKind, String)> {
    let mut v: Vec<_> = names
        .iter()
        .flat_map(|n| {
            [
                key(ResourceKind::Cluster, n),
                key(ResourceKind::ClusterLoadAssignment, n),
            ]
        })
        .collect();
    v.sort();
    v
}

/// A resource still cold at the warming timeout is marked failed, and the
/// snapshot goes out with it failed (on its cluster only).
#[test]
fn warming_timeout_publishes_with_the_cold_cluster_failed() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["warm", "cold"]), "1");
    h.cluster(static_cluster("warm"), "1");
    assert_eq!(h.engine.poll_timeout(), Some(h.now + TIMEOUT));

    h.advance(TIMEOUT - Duration::from_millis(1));
    assert!(h.snapshot().is_none(), "not yet");
    h.advance(Duration::from_millis(1));
    let s = h.ready();
    assert!(s.is_ok(), "a cluster timing out is not a snapshot error");
    assert!(s.cluster("warm").is_some_and(|c| c.is_ok()));
    assert!(matches!(
        s.cluster("cold").and_then(|c| c.error.clone()),
        Some(GraphError::WarmingTimeout {
            kind: ResourceKind::Cluster,
            ..
        })
    ));
    assert_eq!(h.engine.poll_timeout(), None);

    // Arriving late still counts: the next snapshot has it.
    h.cluster(static_cluster("cold"), "1");
    assert!(h.ready().cluster("cold").is_some_and(|c| c.is_ok()));
}

/// The timeout is per resource, counted from when the graph first reached it.
#[test]
fn warming_timeout_counts_from_when_the_resource_was_reached() {
    let mut h = warm_graph(&["a"]);
    h.ready();
    h.advance(Duration::from_secs(100));
    h.route(route_config("r", &["a", "late"]), "2");
    assert_eq!(h.engine.poll_timeout(), Some(h.now + TIMEOUT));
}

/// A warming timer belongs to the wait it was armed for (the heap of
/// `engine/warming.rs` is never searched, so ended waits leave their
/// timers behind): a resource that arrived, left and was reached again
/// later is timed from then, not by its first timer.
#[test]
fn a_timer_left_from_an_earlier_wait_fires_nothing() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["a", "b"]), "1");
    h.cluster(static_cluster("a"), "1");
    h.cluster(static_cluster("b"), "1");
    h.ready();
    h.advance(TIMEOUT / 2);
    h.route(route_config("r", &["b"]), "2");
    assert!(h.ready().cluster("a").is_none());
    h.route(route_config("r", &["a", "b"]), "3");
    let second_wait_ends = h.now + TIMEOUT;
    h.advance(TIMEOUT / 2);
    assert!(
        h.snapshot().is_none(),
        "a is cold in its second wait: the first one's timer fires nothing"
    );
    assert_eq!(h.engine.poll_timeout(), Some(second_wait_ends));
    h.advance(second_wait_ends - h.now);
    assert!(matches!(
        h.ready().cluster("a").and_then(|c| c.error.clone()),
        Some(GraphError::WarmingTimeout { .. })
    ));
    assert_eq!(h.engine.poll_timeout(), None, "no timer is left armed");
}

/// An ambient error keeps the last good resource serving and records the
/// error next to it.
#[test]
fn ambient_error_keeps_the_last_good_endpoints_and_records_the_error() {
    let mut h = warm_graph(&["a"]);
    h.ready();
    h.engine.on_endpoints(
        h.now,
        "a",
        Update::AmbientError(transient("server b.test unreachable")),
    );
    let s = h.ready();
    let c = s.cluster("a").expect("a");
    assert!(c.is_ok());
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &c.endpoints
    else {
        panic!("endpoints dropped on an ambient error");
    };
    assert_eq!(
        assignment.ambient_error.as_deref().map(XdsError::message),
        Some("server b.test unreachable")
    );

    h.endpoints(cla("a", 5), "2");
    let s = h.ready();
    let Some(ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    }) = s.cluster("a").map(|c| &c.endpoints)
    else {
        panic!("endpoints missing");
    };
    assert_eq!(assignment.ambient_error, None, "a good version clears it");
}

/// An ambient error while cold is not definite: the resource stays cold, and
/// the timeout error quotes it.
#[test]
fn ambient_error_on_a_cold_resource_does_not_end_warming() {
    let mut h = Harness::new(Roots::new().cluster("c"));
    h.engine.on_cluster(
        h.now,
        "c",
        Update::AmbientError(transient("connection refused")),
    );
    assert!(h.snapshot().is_none());
    h.advance(TIMEOUT);
    let s = h.ready();
    assert!(matches!(
        s.cluster("c").and_then(|c| c.error.clone()),
        Some(GraphError::WarmingTimeout { last_error: Some(e), .. }) if e.message() == "connection refused"
    ));
}

/// Wildcard CDS: every delivered cluster is a root; the graph is ready after
/// the first delivery, or after the timeout for a silent server.
#[test]
fn wildcard_clusters_are_roots_and_deletion_removes_them() {
    let mut h = Harness::new(Roots::new().all_clusters());
    assert_eq!(h.watch_changes().wildcard, [ResourceKind::Cluster]);
    assert!(h.snapshot().is_none());
    h.cluster(static_cluster("x"), "1");
    h.cluster(static_cluster("y"), "1");
    assert_eq!(h.ready().cluster_count(), 2);

    h.engine.on_cluster(h.now, "x", Update::DoesNotExist);
    let s = h.ready();
    assert!(s.cluster("x").is_none());
    assert!(
        h.watch_changes().unwatched.is_empty(),
        "wildcard members have no watch of their own"
    );
}

/// A wildcard subscription the server never answers is published empty at
/// the timeout rather than never.
#[test]
fn silent_wildcard_is_published_empty_at_the_timeout() {
    let mut h = Harness::new(Roots::new().all_listeners());
    assert_eq!(h.engine.poll_timeout(), Some(h.now + TIMEOUT));
    h.advance(TIMEOUT);
    assert_eq!(h.ready().listeners().count(), 0);
}

/// A wildcard member deleted and re-added before the next publication is a
/// root again, with its new edges.
#[test]
fn wildcard_member_readded_before_publication_is_a_root_again() {
    let mut h = Harness::new(Roots::new().all_clusters());
    h.cluster(eds_cluster("x", None), "1");
    h.endpoints(cla("x", 1), "1");
    h.ready();
    h.engine.on_cluster(h.now, "x", Update::DoesNotExist);
    h.cluster(eds_cluster("x", Some("x-v2")), "2");
    h.endpoints(cla("x-v2", 2), "1");
    let s = h.ready();
    assert!(matches!(
        s.cluster("x").map(|c| &c.endpoints),
        Some(ClusterEndpoints::Eds { service_name, assignment: Some(_) }) if &**service_name == "x-v2"
    ));
}
