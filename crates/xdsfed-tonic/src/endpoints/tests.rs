use envoy_types::pb::envoy::config::core::v3::HealthStatus::{
    Degraded, Draining, Healthy, Timeout, Unhealthy, Unknown,
};
use xdsfed_graph::Roots;

use super::*;
use crate::test_support::{Resources, aggregate_cluster, assignment, eds_cluster, locality};

fn addr(port: u16) -> EndpointAddress {
    EndpointAddress::new("10.0.0.1", port)
}

fn ports(set: &EndpointSet) -> Vec<u16> {
    set.iter().map(|(a, _)| a.port()).collect()
}

/// gRFC A27: only HEALTHY and UNKNOWN endpoints take traffic.
#[test]
fn only_healthy_and_unknown_endpoints_are_used() {
    let res = Resources::default()
        .cluster(eds_cluster("c"))
        .assignment(assignment(
            "c",
            vec![locality(
                0,
                1,
                &[
                    ("10.0.0.1", 1, Healthy, 0),
                    ("10.0.0.1", 2, Unknown, 0),
                    ("10.0.0.1", 3, Unhealthy, 0),
                    ("10.0.0.1", 4, Draining, 0),
                    ("10.0.0.1", 5, Timeout, 0),
                    ("10.0.0.1", 6, Degraded, 0),
                ],
            )],
        ));
    let snapshot = res.snapshot(Roots::new().cluster("c"));
    let set = EndpointSet::of(&snapshot, "c").unwrap();
    assert_eq!(ports(&set), [1, 2]);
    assert_eq!(set.weight(&addr(1)), Some(0.5));
}

/// gRFC A27: the lowest priority with a usable endpoint takes all traffic.
#[test]
fn the_lowest_priority_with_a_usable_endpoint_wins() {
    let res = Resources::default()
        .cluster(eds_cluster("c"))
        .assignment(assignment(
            "c",
            vec![
                locality(0, 1, &[("10.0.0.1", 1, Unhealthy, 0)]),
                locality(1, 1, &[("10.0.0.1", 2, Healthy, 0)]),
                locality(2, 1, &[("10.0.0.1", 3, Healthy, 0)]),
            ],
        ));
    let set = EndpointSet::of(&res.snapshot(Roots::new().cluster("c")), "c").unwrap();
    assert_eq!(ports(&set), [2]);
}

/// gRFC A27: a locality without weight is ignored.
#[test]
fn localities_without_weight_are_ignored_and_weights_multiply() {
    let res = Resources::default()
        .cluster(eds_cluster("c"))
        .assignment(assignment(
            "c",
            vec![
                locality(0, 0, &[("10.0.0.1", 9, Healthy, 0)]),
                locality(
                    0,
                    3,
                    &[("10.0.0.1", 1, Healthy, 1), ("10.0.0.1", 2, Healthy, 3)],
                ),
                locality(0, 1, &[("10.0.0.1", 3, Healthy, 0)]),
            ],
        ));
    let set = EndpointSet::of(&res.snapshot(Roots::new().cluster("c")), "c").unwrap();
    assert_eq!(ports(&set), [1, 2, 3]);
    assert_eq!(set.weight(&addr(1)), Some(0.75 * 0.25));
    assert_eq!(set.weight(&addr(2)), Some(0.75 * 0.75));
    assert_eq!(set.weight(&addr(3)), Some(0.25));
}

/// gRFC A37: an aggregate cluster's leaves are flattened in priority order;
/// a failed leaf contributes nothing.
#[test]
fn aggregate_clusters_fall_through_their_leaves_in_order() {
    let res = Resources::default()
        .cluster(aggregate_cluster(
            "agg",
            &["missing", "primary", "secondary"],
        ))
        .cluster(eds_cluster("primary"))
        .cluster(eds_cluster("secondary"))
        .assignment(assignment(
            "primary",
            vec![locality(0, 1, &[("10.0.0.1", 1, Unhealthy, 0)])],
        ))
        .assignment(assignment(
            "secondary",
            vec![locality(0, 1, &[("10.0.0.1", 2, Healthy, 0)])],
        ));
    let snapshot = res.snapshot(Roots::new().cluster("agg"));
    assert_eq!(ports(&EndpointSet::of(&snapshot, "agg").unwrap()), [2]);
}

#[test]
fn an_aggregate_cluster_whose_leaves_all_fail_names_itself() {
    let res = Resources::default().cluster(aggregate_cluster("agg", &["gone"]));
    let snapshot = res.snapshot(Roots::new().cluster("agg"));
    let error = EndpointSet::of(&snapshot, "agg").unwrap_err();
    assert!(error.contains(r#"aggregate cluster "agg""#), "{error}");
    assert!(error.contains("gone"), "{error}");
}

#[test]
fn a_missing_cluster_is_an_error_naming_it() {
    let snapshot = Resources::default().snapshot(Roots::new().cluster("nope"));
    let error = EndpointSet::of(&snapshot, "nope").unwrap_err();
    assert!(
        error.starts_with(r#"cluster "nope" cannot be used"#),
        "{error}"
    );
    let error = EndpointSet::of(&snapshot, "elsewhere").unwrap_err();
    assert_eq!(error, r#"cluster "elsewhere" is not in the snapshot"#);
}

#[test]
fn a_cluster_with_no_healthy_endpoint_gives_an_empty_set() {
    let res = Resources::default()
        .cluster(eds_cluster("c"))
        .assignment(assignment(
            "c",
            vec![locality(0, 1, &[("10.0.0.1", 1, Unhealthy, 0)])],
        ));
    let set = EndpointSet::of(&res.snapshot(Roots::new().cluster("c")), "c").unwrap();
    assert!(set.is_empty());
}
