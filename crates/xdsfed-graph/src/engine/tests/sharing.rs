//! Work in proportion to change: unchanged parts are shared, not rebuilt.

use super::*;

/// An update to one cluster's endpoints rebuilds that cluster's entry only;
/// every other entry is the same allocation as in the previous snapshot.
#[test]
fn one_endpoint_update_leaves_other_entries_pointer_equal() {
    let names: Vec<String> = (0..50).map(|i| format!("c{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut h = warm_graph(&refs);
    let before = h.ready();

    h.endpoints(cla("c7", 9), "2");
    let after = h.ready();
    assert_eq!(after.generation(), before.generation() + 1);
    for name in &refs {
        let (old, new) = (
            before.cluster(name).expect("old entry"),
            after.cluster(name).expect("new entry"),
        );
        assert_eq!(Arc::ptr_eq(old, new), *name != "c7", "cluster {name}");
    }
    assert!(same_entry(before.listener("l"), after.listener("l")));
    assert!(same_entry(
        before.route_config("r"),
        after.route_config("r")
    ));
}

/// A cluster update rebuilds that cluster only, and reuses the endpoints it
/// already had.
#[test]
fn cluster_update_reuses_its_endpoints_and_leaves_siblings_alone() {
    let mut h = warm_graph(&["a", "b"]);
    let before = h.ready();
    h.cluster(eds_cluster("a", None), "2");
    let after = h.ready();
    let (Some(old_a), Some(new_a)) = (before.cluster("a"), after.cluster("a")) else {
        panic!("a missing");
    };
    assert!(!Arc::ptr_eq(old_a, new_a));
    let endpoints = |c: &crate::ClusterSnapshot| match &c.endpoints {
        crate::ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => Arc::clone(&a.value),
        other => panic!("unexpected endpoints {other:?}"),
    };
    assert!(Arc::ptr_eq(&endpoints(old_a), &endpoints(new_a)));
    assert!(matches!(
        (before.cluster("b"), after.cluster("b")),
        (Some(x), Some(y)) if Arc::ptr_eq(x, y)
    ));
}

fn same_entry<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
    matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
}

/// An update of a resource the graph holds keys it by the node's own name,
/// looked up by text: no name is allocated again, and the node, its key and
/// the error a later absence names all share one `Arc`.
#[test]
fn an_update_shares_the_name_its_node_is_keyed_by() {
    let mut h = warm_graph(&["a", "b"]);
    let kind = ResourceKind::ClusterLoadAssignment;
    let held = |h: &Harness| {
        let view: &dyn crate::edges::KeyView = &(kind, "a");
        let (key, _) = h.engine.nodes.get_key_value(view).expect("a's assignment");
        Arc::clone(&key.name)
    };
    let before = held(&h);
    assert_eq!(h.engine.key_of(kind, "a").name.as_ptr(), before.as_ptr());
    h.endpoints(cla("a", 9), "2");
    assert!(Arc::ptr_eq(&held(&h), &before), "the key is the node's own");
    let fresh = h.engine.key_of(kind, "not-held");
    assert_eq!(&*fresh.name, "not-held");
    assert!(!h.engine.nodes.contains_key(&fresh));
}
