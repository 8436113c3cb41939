use envoy_types::pb::envoy::config::cluster::v3::cluster::LeastRequestLbConfig;
use envoy_types::pb::envoy::config::cluster::v3::{CircuitBreakers, circuit_breakers::Thresholds};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use super::*;
use crate::types::tests_support::{aggregate_cluster, eds_cluster, load_assignment};
use crate::types::{ClusterType, ResourceType};

fn thresholds(priority: RoutingPriority, max: u32) -> Thresholds {
    Thresholds {
        priority: priority as i32,
        max_requests: Some(UInt32Value { value: max }),
        ..Default::default()
    }
}

/// Rule: the view shows what the message says, of what it covers.
#[test]
fn view_shows_an_eds_cluster_as_the_message_says() {
    let mut cluster = eds_cluster("c1", "c1-eds");
    cluster.lb_policy = 1; // LEAST_REQUEST
    cluster.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
        choice_count: Some(UInt32Value { value: 3 }),
        ..Default::default()
    }));
    cluster.connect_timeout = Some(PbDuration {
        seconds: 2,
        nanos: 500_000_000,
    });
    cluster.outlier_detection = Some(OutlierDetection::default());
    cluster.circuit_breakers = Some(CircuitBreakers {
        thresholds: vec![
            thresholds(RoutingPriority::High, 7),
            thresholds(RoutingPriority::Default, 9),
        ],
        ..Default::default()
    });
    let held = ClusterView::new(&cluster).expect("valid");
    assert_eq!(held.name(), "c1");
    let ClusterDiscovery::Eds { service_name } = held.discovery() else {
        panic!("not EDS: {held:?}");
    };
    assert_eq!(service_name, "c1-eds");
    let sent = cluster
        .eds_cluster_config
        .as_ref()
        .and_then(|c| c.eds_config.as_ref());
    assert_eq!(held.eds_config().as_deref(), sent);
    assert_eq!(held.lb_policy(), 1);
    assert_eq!(held.lb_config(), cluster.lb_config.as_ref());
    assert_eq!(held.connect_timeout(), Some(Duration::from_millis(2500)));
    assert_eq!(held.outlier_detection(), cluster.outlier_detection.as_ref());
    assert_eq!(held.max_requests(), Some(9));
    assert!(held.text.is_empty(), "the names are read where they lie");
    assert!(matches!(
        &held.kind,
        Kind::Eds {
            config: EdsConfig::InRaw(_),
            ..
        }
    ));
    assert!(held.upstream_tls().is_none());
    assert!(held.load_balancing_policy().is_none());
}

/// What a cluster leaves unset is absent from the view, not defaulted.
#[test]
fn view_of_a_bare_eds_cluster_holds_no_options() {
    let held = ClusterView::new(&eds_cluster("c1", "")).expect("valid");
    assert!(matches!(
        held.discovery(),
        ClusterDiscovery::Eds { service_name: "" }
    ));
    assert!(held.eds_config().is_some());
    assert_eq!(held.lb_policy(), 0);
    assert!(held.lb_config().is_none());
    assert!(held.connect_timeout().is_none());
    assert!(held.outlier_detection().is_none());
    assert!(held.max_requests().is_none());
}

#[test]
fn view_lists_an_aggregate_clusters_children_in_order() {
    let held = ClusterView::new(&aggregate_cluster("agg", &["b", "a", "b"])).expect("valid");
    let ClusterDiscovery::Aggregate { children } = held.discovery() else {
        panic!("not aggregate: {held:?}");
    };
    let children: Vec<&str> = children.iter().map(|c| &**c).collect();
    assert_eq!(children, ["b", "a", "b"]);
}

/// A STATIC cluster's endpoints are held as an EDS assignment is.
#[test]
fn view_holds_a_static_clusters_endpoints_as_an_assignment() {
    let cla = load_assignment("s", &[("10.0.0.1", 80), ("10.0.0.2", 81)]);
    let cluster = Cluster {
        name: "s".into(),
        load_assignment: Some(cla.clone()),
        ..Default::default()
    };
    let held = ClusterView::new(&cluster).expect("valid");
    let ClusterDiscovery::Static {
        load_assignment: Some(assignment),
    } = held.discovery()
    else {
        panic!("not static with endpoints: {held:?}");
    };
    assert_eq!(**assignment, LoadAssignment::new(&cla).expect("valid"));
}

/// Rule: a message sent in pieces (here a repeated `eds_cluster_config`,
/// which decoding merges) is read where its strings last lie, as decoding
/// reads them; what the bytes do not hold as decoded (the merged
/// `eds_config`) is copied, and the view still says what the message says.
#[test]
fn view_copies_what_it_cannot_find_in_the_bytes() {
    let cluster = eds_cluster("c1", "c1-eds");
    let mut bytes = cluster.encode_to_vec();
    let mut again = eds_cluster("c1", "");
    again.name.clear();
    again.cluster_discovery_type = None;
    if let Some(eds) = again.eds_cluster_config.as_mut() {
        eds.eds_config = Some(ConfigSource {
            resource_api_version: 2,
            ..Default::default()
        });
    }
    bytes.extend(again.encode_to_vec());
    let merged = Cluster::decode(bytes.as_slice()).expect("decodes");
    let held = ClusterType::decode_shared(&Bytes::from(bytes)).expect("valid");
    assert!(held.text.is_empty(), "the names are where they lie");
    assert_eq!(held.name(), "c1");
    assert_eq!(held.eds_service_name(), Some("c1-eds"));
    let Kind::Eds { config, .. } = &held.kind else {
        panic!("not EDS: {held:?}");
    };
    assert!(matches!(config, EdsConfig::Copied(_)), "{config:?}");
    let expected = merged.eds_cluster_config.and_then(|e| e.eds_config);
    assert_eq!(held.eds_config().map(|c| c.into_owned()), expected);
}

/// A string sent twice is read where its last copy lies, as decoding
/// keeps the last.
#[test]
fn a_name_sent_twice_is_read_where_its_last_copy_lies() {
    let mut bytes = eds_cluster("first", "s").encode_to_vec();
    let again = Cluster {
        name: "second".into(),
        ..Default::default()
    };
    bytes.extend(again.encode_to_vec());
    let held = ClusterType::decode_shared(&Bytes::from(bytes)).expect("valid");
    assert!(held.text.is_empty());
    assert_eq!(held.name(), "second");
}

/// The bytes are the server's, shared, and decode back to the message.
#[test]
fn view_shares_the_bytes_and_decodes_back_to_the_message() {
    let cluster = eds_cluster("c1", "c1-eds");
    let bytes = Bytes::from(cluster.encode_to_vec());
    let held = ClusterType::decode_shared(&bytes).expect("valid");
    assert_eq!(held.raw().as_ptr(), bytes.as_ptr());
    assert_eq!(held.decode().expect("decodes"), cluster);
}

/// The view is what stays of a cluster: its fixed part is a tenth of the
/// decoded message's.
#[test]
fn view_is_a_fraction_of_the_decoded_message() {
    let view = std::mem::size_of::<ClusterView>();
    let message = std::mem::size_of::<Cluster>();
    assert!(view * 10 <= message, "{view} B against {message} B");
}
