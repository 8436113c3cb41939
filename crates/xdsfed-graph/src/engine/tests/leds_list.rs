//! LEDS through a list collection (gRFC A95): a locality's endpoints are
//! the inline entries of an `LbEndpointCollection`.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::{Locality, SelfConfigSource};
use envoy_types::pb::envoy::config::endpoint::v3::locality_lb_endpoints::LbConfig;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LedsClusterLocalityConfig, LocalityLbEndpoints,
};
use xdsfed_core::types::LedsEndpoint;

use super::*;
use crate::CollectionUpdate;

const LIST: &str = "xdstp://a.example/envoy.config.endpoint.v3.LbEndpointCollection/c1";

fn entry(id: &str) -> Arc<str> {
    Arc::from(format!("{LIST}#entry={id}"))
}

/// An assignment with an inline locality of one endpoint and a locality
/// taking its endpoints from the list collection [`LIST`], through `self`.
fn list_cla(name: &str) -> ClusterLoadAssignment {
    let mut cla = cla(name, 1);
    cla.endpoints.push(LocalityLbEndpoints {
        locality: Some(Locality {
            region: "leds".into(),
            ..Default::default()
        }),
        lb_config: Some(LbConfig::LedsClusterLocalityConfig(
            LedsClusterLocalityConfig {
                leds_config: Some(ConfigSource {
                    config_source_specifier: Some(ConfigSourceSpecifier::Self_(
                        SelfConfigSource::default(),
                    )),
                    ..Default::default()
                }),
                leds_collection_name: LIST.into(),
            },
        )),
        ..Default::default()
    });
    cla
}

fn list_graph() -> Harness {
    let mut h = Harness::new(Roots::new().cluster("c1"));
    h.cluster(eds_cluster("c1", None), "1");
    h.endpoints(list_cla("c1"), "1");
    h
}

fn feed(h: &mut Harness, update: CollectionUpdate<LedsEndpoint>) {
    h.engine.on_leds(h.now, LIST, update);
}

fn listed(ids: &[&str]) -> CollectionUpdate<LedsEndpoint> {
    CollectionUpdate::Listed(ids.iter().map(|id| entry(id)).collect())
}

fn changed(id: &str, weight: u32) -> CollectionUpdate<LedsEndpoint> {
    let held = LedsEndpoint::new(&endpoint("10.1.1.1", weight)).expect("a valid endpoint");
    let p = Harness::provenance(LIST, "1");
    CollectionUpdate::Member(entry(id), Update::Changed(Arc::new(held), p))
}

/// The weights of the list-LEDS locality (the second) of cluster `c1`.
fn list_weights(s: &Snapshot) -> Vec<u32> {
    super::leds::leds_weights(s)
}

/// gRFC A95: a locality's `leds_collection_name` "must not end with `/*`"
/// for a list collection: such a name is followed as a LEDS collection,
/// and its listed inline entries are the locality's endpoints.
#[test]
fn list_leds_collection_is_watched_and_its_listed_entries_are_the_endpoints() {
    let mut h = list_graph();
    let log = h.watch_changes();
    assert!(log.watched.contains(&key(ResourceKind::LbEndpoint, LIST)));
    assert!(h.snapshot().is_none(), "cold collection must hold back");
    feed(&mut h, listed(&["e1", "e2"]));
    feed(&mut h, changed("e1", 3));
    feed(&mut h, changed("e2", 4));
    let s = h.ready();
    assert_eq!(list_weights(&s), vec![3, 4]);
    assert!(s.cluster("c1").unwrap().is_ok());
}

/// A listed entry that changes changes the locality's endpoint.
#[test]
fn list_leds_entry_change_reaches_the_snapshot() {
    let mut h = list_graph();
    feed(&mut h, listed(&["e1", "e2"]));
    feed(&mut h, changed("e1", 3));
    feed(&mut h, changed("e2", 4));
    let _ = h.ready();
    feed(&mut h, changed("e2", 9));
    assert_eq!(list_weights(&h.ready()), vec![3, 9]);
}

/// TP1 list collections: "exactly these are its members now": an entry no
/// longer listed leaves the locality, even before any removal of it.
#[test]
fn list_leds_entry_no_longer_listed_leaves_the_locality() {
    let mut h = list_graph();
    feed(&mut h, listed(&["e1", "e2"]));
    feed(&mut h, changed("e1", 3));
    feed(&mut h, changed("e2", 4));
    let _ = h.ready();
    feed(&mut h, listed(&["e1"]));
    assert_eq!(list_weights(&h.ready()), vec![3]);
    // The same list again changes nothing.
    feed(&mut h, listed(&["e1"]));
    assert!(h.snapshot().is_none());
}

/// gRFC A95: "If the `entries` field is empty, then the locality will be
/// considered unreachable": it has no endpoints, and the collection no
/// longer holds the snapshot back.
#[test]
fn empty_list_leds_collection_leaves_the_locality_without_endpoints() {
    let mut h = list_graph();
    feed(&mut h, listed(&[]));
    assert_eq!(list_weights(&h.ready()), Vec::<u32>::new());
    feed(&mut h, listed(&["e1"]));
    feed(&mut h, changed("e1", 3));
    assert_eq!(list_weights(&h.ready()), vec![3]);
    feed(&mut h, CollectionUpdate::Empty);
    assert_eq!(list_weights(&h.ready()), Vec::<u32>::new());
}
