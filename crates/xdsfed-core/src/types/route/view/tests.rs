use envoy_types::pb::envoy::config::route::v3::route_action::RequestMirrorPolicy;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{RouteAction, WeightedCluster};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::*;
use crate::types::tests_support::{route_action_mut, route_config};
use crate::types::{ResourceType, RouteConfigurationType};

fn mirror(cluster: &str) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster: cluster.into(),
        ..Default::default()
    }
}

/// Rule: the view lists every cluster a request could be sent to, in the
/// message's order: mirrors of the configuration, then of each virtual
/// host, then each route's cluster or weighted clusters and its mirrors.
#[test]
fn view_lists_every_cluster_a_request_could_reach_in_order() {
    let mut rc = route_config("front", &["a"]);
    rc.request_mirror_policies.push(mirror("shadow"));
    rc.virtual_hosts[0]
        .request_mirror_policies
        .push(mirror("vhost-shadow"));
    let mut split = rc.virtual_hosts[0].routes[0].clone();
    if let Some(Action::Route(action)) = split.action.as_mut() {
        action.cluster_specifier = Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: vec![
                ClusterWeight {
                    name: "b".into(),
                    weight: Some(UInt32Value { value: 30 }),
                    ..Default::default()
                },
                ClusterWeight {
                    name: "a".into(),
                    weight: Some(UInt32Value { value: 70 }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }));
        action.request_mirror_policies.push(mirror("route-shadow"));
    }
    rc.virtual_hosts[0].routes.push(split);
    let held = RouteConfigView::new(&rc).expect("valid");
    assert_eq!(held.name(), "front");
    assert_eq!(held.virtual_host_count(), 1);
    let targets: Vec<_> = held.targets().collect();
    assert_eq!(
        targets,
        [
            RouteTarget::Mirror("shadow"),
            RouteTarget::Mirror("vhost-shadow"),
            RouteTarget::Cluster("a"),
            RouteTarget::Weighted("b", 30),
            RouteTarget::Weighted("a", 70),
            RouteTarget::Mirror("route-shadow"),
        ]
    );
}

/// A cluster chosen per request by a header is listed as that header.
#[test]
fn view_lists_a_cluster_header_as_a_header() {
    let mut rc = route_config("front", &["a"]);
    *route_action_mut(&mut rc) = RouteAction {
        cluster_specifier: Some(ClusterSpecifier::ClusterHeader("x-cluster".into())),
        ..Default::default()
    };
    let held = RouteConfigView::new(&rc).expect("valid");
    assert_eq!(
        held.targets().collect::<Vec<_>>(),
        [RouteTarget::Header("x-cluster")]
    );
}

/// A name used by many routes is kept once.
#[test]
fn view_keeps_a_repeated_name_once() {
    let rc = route_config("front", &["same", "same", "same"]);
    let held = RouteConfigView::new(&rc).expect("valid");
    assert_eq!(held.targets().len(), 3);
    assert_eq!(held.text.len(), "front".len() + "same".len());
}

/// The bytes are the server's, shared, and decode back to the message.
#[test]
fn view_shares_the_bytes_and_decodes_back_to_the_message() {
    let rc = route_config("front", &["a", "b"]);
    let bytes = Bytes::from(rc.encode_to_vec());
    let held = RouteConfigurationType::decode_shared(&bytes).expect("valid");
    assert_eq!(held.raw().as_ptr(), bytes.as_ptr());
    assert_eq!(held.decode().expect("decodes"), rc);
}

/// Names found again by their hash are still told apart by their text.
#[test]
fn view_keeps_distinct_names_apart() {
    let rc = route_config("a", &["ab", "a", "b", "ab"]);
    let held = RouteConfigView::new(&rc).expect("valid");
    let names: Vec<_> = held
        .targets()
        .map(|t| match t {
            RouteTarget::Cluster(name) => name,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names, ["ab", "a", "b", "ab"]);
    assert_eq!(held.name(), "a");
    assert_eq!(&*held.text, "aabb");
}
