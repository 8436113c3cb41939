//! Building ahead: while the graph is not ready, a cluster whose inputs are
//! all present is built when marked, and the snapshots are the ones
//! building everything at publication would give.

use super::*;
use crate::ClusterEndpoints;
use crate::edges::Key;

/// `name`'s endpoint count and assignment version in `s`.
fn endpoints_of(s: &Snapshot, name: &str) -> (usize, String) {
    let c = s.cluster(name).expect("the cluster is in the snapshot");
    let ClusterEndpoints::Eds {
        assignment: Some(a),
        ..
    } = &c.endpoints
    else {
        panic!("no assignment: {c:?}");
    };
    (a.value.endpoint_count(), a.provenance.version.to_string())
}

fn is_dirty(h: &Harness, name: &str) -> bool {
    h.engine
        .dirty
        .contains(&Key::new(ResourceKind::Cluster, Arc::from(name)))
}

/// A listener `l` → RDS `r` → EDS clusters `a` and `b`, both delivered,
/// `a`'s endpoints too: `b`'s are cold.
fn a_warm_b_cold() -> Harness {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["a", "b"]), "1");
    h.cluster(eds_cluster("a", None), "1");
    h.cluster(eds_cluster("b", None), "1");
    h.endpoints(cla("a", 1), "1");
    assert!(h.snapshot().is_none(), "b's endpoints are cold");
    h
}

#[test]
fn a_cluster_warm_before_the_graph_is_built_then_and_not_at_publication() {
    let mut h = a_warm_b_cold();
    assert!(!is_dirty(&h, "a"), "a was built ahead");
    assert!(is_dirty(&h, "b"), "b's endpoints are still cold");
    assert!(h.engine.out.clusters.contains_key("a"));

    h.endpoints(cla("b", 3), "1");
    let s = h.ready();
    assert_eq!(endpoints_of(&s, "a"), (1, "1".into()));
    assert_eq!(endpoints_of(&s, "b"), (3, "1".into()));
}

#[test]
fn a_cluster_built_ahead_that_changes_again_is_rebuilt() {
    let mut h = a_warm_b_cold();
    h.endpoints(cla("a", 2), "2");
    assert!(h.snapshot().is_none());
    h.cluster(eds_cluster("a", Some("a-v2")), "2");
    assert!(h.snapshot().is_none(), "a's new service is cold");
    assert!(is_dirty(&h, "a"), "a reads a cold assignment now");
    h.endpoints(cla("a-v2", 4), "3");
    assert!(h.snapshot().is_none(), "b's endpoints are still cold");
    assert!(!is_dirty(&h, "a"), "a was built ahead again");
    let now = h.now;
    h.engine
        .on_endpoints(now, "a-v2", Update::AmbientError(transient("server gone")));
    h.endpoints(cla("b", 1), "1");
    let s = h.ready();
    assert_eq!(endpoints_of(&s, "a"), (4, "3".into()));
    let ambient = s.cluster("a").and_then(|c| match &c.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => a.ambient_error.clone(),
        _ => None,
    });
    assert!(ambient.is_some(), "the error after the build ahead shows");
}

#[test]
fn a_cluster_built_ahead_then_unreachable_is_not_published() {
    let mut h = a_warm_b_cold();
    h.route(route_config("r", &["b"]), "2");
    h.endpoints(cla("b", 1), "1");
    let s = h.ready();
    assert!(
        s.cluster("a").is_none(),
        "a left the graph before the snapshot"
    );
    assert!(s.cluster("b").is_some());
}

#[test]
fn marks_kept_for_building_ahead_never_outnumber_the_dirty_entries() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["a", "b"]), "1");
    h.cluster(eds_cluster("a", None), "1");
    h.cluster(eds_cluster("b", None), "1");
    // Fed without polling, as a careless caller might: `a` changes again
    // and again while `b` stays cold.
    for version in 0..1000 {
        h.endpoints(cla("a", 1 + version % 3), &version.to_string());
    }
    assert!(h.engine.marked_cold.len() <= h.engine.dirty.len());
    assert!(h.snapshot().is_none());
    assert!(!is_dirty(&h, "a"), "a is still built ahead");
    h.endpoints(cla("b", 1), "1");
    let s = h.ready();
    assert_eq!(
        endpoints_of(&s, "a"),
        (1, "999".into()),
        "the last copy fed"
    );
}
