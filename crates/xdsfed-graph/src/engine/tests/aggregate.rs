//! Aggregate clusters (gRFC A37): leaves, cycles, depth.

use super::*;
use crate::{ClusterEndpoints, GraphError};

fn cluster_roots(root: &str) -> Harness {
    Harness::new(Roots::new().cluster(root))
}

fn leaves(s: &Snapshot, name: &str) -> Vec<String> {
    match s.cluster(name).map(|c| &c.endpoints) {
        Some(ClusterEndpoints::Aggregate { leaves }) => {
            leaves.iter().map(|l| l.to_string()).collect()
        }
        other => panic!("{name} is not an aggregate cluster: {other:?}"),
    }
}

/// Leaves come depth first in priority order; a cluster reached on two paths
/// is listed once, at its first place.
#[test]
fn aggregate_leaves_are_in_priority_order_with_duplicates_merged() {
    let mut h = cluster_roots("agg");
    h.cluster(aggregate_cluster("agg", &["x", "inner", "y", "x"]), "1");
    h.cluster(aggregate_cluster("inner", &["y", "z"]), "1");
    for leaf in ["x", "y", "z"] {
        h.cluster(static_cluster(leaf), "1");
    }
    let s = h.ready();
    assert_eq!(leaves(&s, "agg"), ["x", "y", "z"]);
    assert_eq!(leaves(&s, "inner"), ["y", "z"]);
    assert!(s.cluster("agg").is_some_and(|c| c.is_ok()));
    // Every reachable cluster has its own entry.
    assert_eq!(s.cluster_count(), 5);
}

/// A cycle is refused on the aggregate clusters whose trees contain it; the
/// snapshot still goes out (the error is data on those clusters).
#[test]
fn aggregate_cycle_is_refused_on_the_aggregate_cluster() {
    let mut h = cluster_roots("a");
    h.cluster(aggregate_cluster("a", &["b"]), "1");
    h.cluster(aggregate_cluster("b", &["a", "leaf"]), "1");
    h.cluster(static_cluster("leaf"), "1");
    let s = h.ready();
    assert_eq!(
        s.cluster("a").and_then(|c| c.error.clone()),
        Some(GraphError::AggregateCycle {
            cluster: Arc::from("a"),
            through: Arc::from("a"),
        })
    );
    assert!(matches!(
        s.cluster("b").and_then(|c| c.error.clone()),
        Some(GraphError::AggregateCycle { .. })
    ));
    assert!(s.cluster("leaf").is_some_and(|c| c.is_ok()));
    assert!(s.is_ok(), "cluster errors are not snapshot errors");
}

fn chain(levels: usize) -> Harness {
    // c1 → c2 → … → c{levels}, the last one a leaf.
    let mut h = cluster_roots("c1");
    for i in 1..levels {
        let child = format!("c{}", i + 1);
        h.cluster(aggregate_cluster(&format!("c{i}"), &[&child]), "1");
    }
    h.cluster(static_cluster(&format!("c{levels}")), "1");
    h
}

/// The tree may be 16 levels deep (the aggregate cluster is level 1), not 17.
#[test]
fn aggregate_tree_of_depth_17_is_refused_and_16_accepted() {
    let s = chain(16).ready();
    assert_eq!(leaves(&s, "c1"), ["c16"]);

    let s = chain(17).ready();
    assert_eq!(
        s.cluster("c1").and_then(|c| c.error.clone()),
        Some(GraphError::AggregateTooDeep {
            cluster: Arc::from("c1"),
            max_depth: 16,
        })
    );
    // c2 sees only 16 levels below itself.
    assert!(s.cluster("c2").is_some_and(|c| c.is_ok()));
}

/// When a child turns from a leaf into an aggregate, the parent's leaf list
/// is rebuilt.
#[test]
fn aggregate_leaves_follow_a_child_that_becomes_aggregate() {
    let mut h = cluster_roots("agg");
    h.cluster(aggregate_cluster("agg", &["child"]), "1");
    h.cluster(static_cluster("child"), "1");
    assert_eq!(leaves(&h.ready(), "agg"), ["child"]);

    h.cluster(aggregate_cluster("child", &["grandchild"]), "2");
    assert!(h.snapshot().is_none(), "grandchild is cold");
    h.cluster(static_cluster("grandchild"), "1");
    assert_eq!(leaves(&h.ready(), "agg"), ["grandchild"]);
}
