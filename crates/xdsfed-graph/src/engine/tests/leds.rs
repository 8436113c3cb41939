//! LEDS: a locality's endpoints from an `LbEndpoint` glob collection.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::locality_lb_endpoints::LbConfig;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LedsClusterLocalityConfig, LocalityLbEndpoints,
};
use xdsfed_core::types::LedsEndpoint;

use super::*;
use crate::{ClusterEndpoints, CollectionUpdate, GraphError};

const GLOB: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpoint/c1/*";

fn member(id: &str) -> String {
    GLOB.replace('*', id)
}

/// An assignment with an inline locality of one endpoint and a LEDS
/// locality naming `collection`.
fn leds_cla(name: &str, collection: &str) -> ClusterLoadAssignment {
    let mut cla = cla(name, 1);
    cla.endpoints.push(LocalityLbEndpoints {
        priority: 0,
        locality: Some(Locality {
            region: "leds".into(),
            ..Default::default()
        }),
        lb_config: Some(LbConfig::LedsClusterLocalityConfig(
            LedsClusterLocalityConfig {
                leds_config: None,
                leds_collection_name: collection.into(),
            },
        )),
        ..Default::default()
    });
    cla
}

fn weighted(weight: u32) -> Arc<LedsEndpoint> {
    let held = LedsEndpoint::new(&endpoint("10.1.1.1", weight)).expect("a valid endpoint");
    Arc::new(held)
}

fn leds(h: &mut Harness, update: CollectionUpdate<LedsEndpoint>) {
    h.engine.on_leds(h.now, GLOB, update);
}

fn changed(id: &str, weight: u32) -> CollectionUpdate<LedsEndpoint> {
    let p = Harness::provenance(GLOB, "1");
    CollectionUpdate::Member(Arc::from(member(id)), Update::Changed(weighted(weight), p))
}

/// The weights of the LEDS locality (the second) of cluster `c1`.
pub(super) fn leds_weights(s: &Snapshot) -> Vec<u32> {
    locality_weights(s).into_iter().nth(1).unwrap_or_default()
}

/// Cluster `c1`'s assignment in `s`, filled in from LEDS.
fn c1_assignment(s: &Snapshot) -> &LoadAssignment {
    let c = s.cluster("c1").expect("c1 in the snapshot");
    let ClusterEndpoints::Eds {
        assignment: Some(a),
        ..
    } = &c.endpoints
    else {
        panic!("no assignment: {c:?}");
    };
    &a.value
}

/// The weights of each locality of cluster `c1`.
fn locality_weights(s: &Snapshot) -> Vec<Vec<u32>> {
    c1_assignment(s)
        .localities()
        .map(|l| l.endpoints().map(|e| e.weight).collect())
        .collect()
}

fn leds_graph() -> Harness {
    let mut h = Harness::new(Roots::new().cluster("c1"));
    h.cluster(eds_cluster("c1", None), "1");
    h.endpoints(leds_cla("c1", GLOB), "1");
    h
}

#[test]
fn leds_collection_is_watched_and_holds_the_snapshot_until_its_first_answer() {
    let mut h = leds_graph();
    let log = h.watch_changes();
    assert!(log.watched.contains(&key(ResourceKind::LbEndpoint, GLOB)));
    assert!(
        h.snapshot().is_none(),
        "cold LEDS collection must hold back"
    );
    leds(&mut h, changed("e1", 3));
    leds(&mut h, changed("e2", 4));
    let s = h.ready();
    assert_eq!(leds_weights(&s), vec![3, 4]);
    // The inline locality is untouched.
    let c = s.cluster("c1").unwrap();
    assert!(c.is_ok());
}

#[test]
fn leds_member_join_change_and_leave_reach_the_snapshot() {
    let mut h = leds_graph();
    leds(&mut h, changed("e1", 3));
    let first = h.ready();
    leds(&mut h, changed("e2", 5));
    let joined = h.ready();
    assert_eq!(leds_weights(&joined), vec![3, 5]);
    leds(&mut h, changed("e1", 7));
    let changed_one = h.ready();
    assert_eq!(leds_weights(&changed_one), vec![7, 5]);
    leds(
        &mut h,
        CollectionUpdate::Member(Arc::from(member("e2")), Update::DoesNotExist),
    );
    let left = h.ready();
    assert_eq!(leds_weights(&left), vec![7]);
    assert!(!Arc::ptr_eq(
        first.cluster("c1").unwrap(),
        left.cluster("c1").unwrap()
    ));
    // Removing what is not there changes nothing.
    leds(
        &mut h,
        CollectionUpdate::Member(Arc::from(member("zz")), Update::DoesNotExist),
    );
    assert!(h.snapshot().is_none());
}

#[test]
fn members_changing_between_publications_all_reach_the_next_one() {
    let mut h = leds_graph();
    leds(&mut h, changed("e1", 1));
    leds(&mut h, changed("e2", 2));
    let before = h.ready();
    // Each change after the first finds the cluster marked already, and
    // patches the members in place: the snapshot already cut keeps its own.
    for (id, weight) in [("e1", 10), ("e2", 20), ("e3", 30), ("e1", 11)] {
        leds(&mut h, changed(id, weight));
    }
    let after = h.ready();
    assert_eq!(leds_weights(&after), vec![11, 20, 30]);
    assert_eq!(leds_weights(&before), vec![1, 2]);
    leds(&mut h, changed("e2", 21));
    assert_eq!(leds_weights(&h.ready()), vec![11, 21, 30]);
}

#[test]
fn empty_leds_collection_is_warm_with_no_endpoints() {
    let mut h = leds_graph();
    leds(&mut h, CollectionUpdate::Empty);
    assert_eq!(leds_weights(&h.ready()), Vec::<u32>::new());
}

#[test]
fn leds_collection_failing_before_any_answer_is_the_cluster_error() {
    let mut h = leds_graph();
    leds(&mut h, CollectionUpdate::Error(rejected("refused")));
    let s = h.ready();
    let c = s.cluster("c1").unwrap();
    assert!(
        matches!(
            &c.error,
            Some(GraphError::Resource {
                kind: ResourceKind::LbEndpoint,
                ..
            })
        ),
        "{:?}",
        c.error
    );
}

#[test]
fn leds_error_after_an_answer_is_ambient_and_members_keep_serving() {
    let mut h = leds_graph();
    leds(&mut h, changed("e1", 3));
    let _ = h.ready();
    leds(&mut h, CollectionUpdate::Error(transient("server gone")));
    let s = h.ready();
    assert_eq!(leds_weights(&s), vec![3]);
    assert!(s.cluster("c1").unwrap().is_ok());
}

#[test]
fn leds_glob_of_another_type_is_an_error_on_the_cluster_and_not_watched() {
    let mut h = Harness::new(Roots::new().cluster("c1"));
    h.cluster(eds_cluster("c1", None), "1");
    // Neither an LbEndpoint glob nor an LbEndpointCollection (a non-glob
    // name of another type is NACKed before it reaches the graph).
    let list = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1/*";
    h.endpoints(leds_cla("c1", list), "1");
    let log = h.watch_changes();
    assert!(
        !log.watched
            .iter()
            .any(|(k, _)| *k == ResourceKind::LbEndpoint)
    );
    let s = h.ready();
    let c = s.cluster("c1").unwrap();
    assert!(
        matches!(
            &c.error,
            Some(GraphError::InvalidName {
                kind: ResourceKind::LbEndpoint,
                ..
            })
        ),
        "{:?}",
        c.error
    );
}

#[test]
fn assignment_dropping_its_leds_locality_unwatches_the_collection() {
    let mut h = leds_graph();
    leds(&mut h, changed("e1", 3));
    let _ = h.ready();
    let _ = h.watch_changes();
    h.endpoints(cla("c1", 2), "2");
    let _ = h.ready();
    let log = h.watch_changes();
    assert_eq!(log.unwatched, vec![key(ResourceKind::LbEndpoint, GLOB)]);
}

/// An assignment whose localities each take their endpoints from one of
/// `collections`, in order.
fn leds_localities(name: &str, collections: &[&str]) -> ClusterLoadAssignment {
    let mut cla = cla(name, 0);
    cla.endpoints = collections
        .iter()
        .enumerate()
        .map(|(i, collection)| LocalityLbEndpoints {
            priority: 0,
            locality: Some(Locality {
                region: format!("r{i}"),
                ..Default::default()
            }),
            lb_config: Some(LbConfig::LedsClusterLocalityConfig(
                LedsClusterLocalityConfig {
                    leds_config: None,
                    leds_collection_name: (*collection).into(),
                },
            )),
            ..Default::default()
        })
        .collect();
    cla
}

/// Each LEDS locality gets the members of the collection it names, however
/// the localities share collections: one for all, one each, or some
/// twice (the keys then come from reading the names again).
#[test]
fn each_leds_locality_gets_the_members_of_the_collection_it_names() {
    const OTHER: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpoint/c2/*";
    for (collections, expected) in [
        (vec![GLOB, GLOB], vec![vec![3], vec![3]]),
        (vec![GLOB, OTHER], vec![vec![3], vec![7]]),
        (vec![OTHER, GLOB], vec![vec![7], vec![3]]),
        (vec![GLOB, OTHER, GLOB], vec![vec![3], vec![7], vec![3]]),
        (vec![OTHER, GLOB, GLOB], vec![vec![7], vec![3], vec![3]]),
        (vec![GLOB, GLOB, OTHER], vec![vec![3], vec![3], vec![7]]),
    ] {
        let mut h = Harness::new(Roots::new().cluster("c1"));
        h.cluster(eds_cluster("c1", None), "1");
        h.endpoints(leds_localities("c1", &collections), "1");
        leds(&mut h, changed("e1", 3));
        let p = Harness::provenance(OTHER, "1");
        let other = OTHER.replace('*', "e1");
        h.engine.on_leds(
            h.now,
            OTHER,
            CollectionUpdate::Member(Arc::from(other), Update::Changed(weighted(7), p)),
        );
        let s = h.ready();
        assert_eq!(locality_weights(&s), expected, "{collections:?}");
    }
}

/// The collection's node is keyed by the name the assignment holds, shared,
/// not by a copy of it: a graph follows a collection per cluster.
#[test]
fn a_collection_is_keyed_by_the_name_its_assignment_holds() {
    let mut h = leds_graph();
    leds(&mut h, changed("e1", 3));
    let s = h.ready();
    let (_, locality) = c1_assignment(&s)
        .leds_localities()
        .next()
        .expect("a LEDS locality");
    let view: &dyn crate::edges::KeyView = &(ResourceKind::LbEndpoint, GLOB);
    let (key, _) = h
        .engine
        .nodes
        .get_key_value(view)
        .expect("the collection's node");
    assert!(Arc::ptr_eq(&key.name, &locality.collection_name));
}
