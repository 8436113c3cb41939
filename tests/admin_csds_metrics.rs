//! The admin endpoint as gRPC tooling reads it, over loopback: CSDS answers
//! carry every resource as received (gRFC A40) with the target as
//! `client_scope` and a NACK's `UpdateFailureState`, and `/metrics` has
//! exactly gRFC A78's XdsClient metrics in the OpenTelemetry Prometheus
//! exporter's form.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use common::resources::{
    CDS, EDS, LDS, RDS, api_listener, cluster, endpoints, invalid_cluster, route_config,
};
use common::{PATIENCE, bootstrap_json, changed, client};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_client::ClientStatusDiscoveryServiceClient;
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ClientStatusRequest};
use prost::Message;
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::Watch;
use xdsfed::core::types::{ClusterType, EndpointType, ListenerType, RouteConfigurationType};
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const TARGET: &str = "xds:///svc";
const LISTENER: &str = "svc";
const ROUTES: &str = "svc-routes";

fn cloud(kind: &str, id: &str) -> String {
    format!("xdstp://{CLOUD}/{kind}/{id}")
}

/// What the testbed serves and the client watches: a listener, its routes,
/// a cluster and its endpoints, and a second cluster whose second version
/// is invalid (NACKed while its first copy keeps serving).
struct Setup {
    testbed: Testbed,
    client: XdsClient,
    payments: String,
    bad: String,
    cla: String,
    bad_good_version: String,
    bad_rejected_version: String,
    /// Held: the subscriptions last as long as their watches.
    _watches: Watches,
}

struct Watches {
    _listener: Watch<ListenerType>,
    _routes: Watch<RouteConfigurationType>,
    _clusters: [Watch<ClusterType>; 2],
    _endpoints: Watch<EndpointType>,
}

async fn setup() -> Setup {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    let payments = cloud("envoy.config.cluster.v3.Cluster", "payments");
    let bad = cloud("envoy.config.cluster.v3.Cluster", "bad");
    let cla = cloud("envoy.config.endpoint.v3.ClusterLoadAssignment", "payments");
    server
        .set_message(LISTENER, &api_listener(LISTENER, ROUTES))
        .unwrap();
    server
        .set_message(ROUTES, &route_config(ROUTES, &[("/", &payments)]))
        .unwrap();
    server
        .set_message(&payments, &cluster(&payments, &cla))
        .unwrap();
    server
        .set_message(&cla, &endpoints(&cla, &[("127.0.0.1", 8080)]))
        .unwrap();
    let bad_good_version = server
        .set_message(&bad, &cluster(&bad, &cla))
        .unwrap()
        .version
        .clone();

    let uri = server.uri();
    let client = client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut listener = client.watch::<ListenerType>(LISTENER).unwrap();
    let mut routes = client.watch::<RouteConfigurationType>(ROUTES).unwrap();
    let mut clusters = client.watch::<ClusterType>(&payments).unwrap();
    let mut cla_watch = client.watch::<EndpointType>(&cla).unwrap();
    let mut bad_watch = client.watch::<ClusterType>(&bad).unwrap();
    changed(&mut listener).await;
    changed(&mut routes).await;
    changed(&mut clusters).await;
    changed(&mut cla_watch).await;
    changed(&mut bad_watch).await;

    let bad_rejected_version = server
        .set_message(&bad, &invalid_cluster(&bad))
        .unwrap()
        .version
        .clone();
    let report = server.wait_acked(CDS, &bad, None, PATIENCE).await.unwrap();
    assert_eq!(report.nacked_by.len(), 1, "the client NACKs: {report:?}");
    Setup {
        _watches: Watches {
            _listener: listener,
            _routes: routes,
            _clusters: [clusters, bad_watch],
            _endpoints: cla_watch,
        },
        testbed,
        client,
        payments,
        bad,
        cla,
        bad_good_version,
        bad_rejected_version,
    }
}

async fn serve(client: &XdsClient) -> SocketAddr {
    let addr = "127.0.0.1:0".parse().unwrap();
    let (bound, _task) = xdsfed::admin::serve(client.clone(), addr, TARGET.into())
        .await
        .unwrap();
    bound
}

async fn fetch(admin: SocketAddr) -> ClientConfig {
    let mut csds = ClientStatusDiscoveryServiceClient::connect(format!("http://{admin}"))
        .await
        .unwrap();
    let answer = tokio::time::timeout(
        PATIENCE,
        csds.fetch_client_status(ClientStatusRequest::default()),
    )
    .await
    .expect("CSDS answers")
    .unwrap()
    .into_inner();
    assert_eq!(answer.config.len(), 1, "one client, one config");
    answer.config.into_iter().next().unwrap()
}

/// The resource an entry's `xds_config` carries, decoded by its type, as
/// its own name and its re-encoding (to compare with what was served).
fn decode(entry: &GenericXdsConfig) -> (String, Vec<u8>) {
    let any = entry
        .xds_config
        .as_ref()
        .unwrap_or_else(|| panic!("{} carries its resource", entry.name));
    assert_eq!(any.type_url, entry.type_url, "the Any names the type");
    let bytes = any.value.as_slice();
    match any.type_url.as_str() {
        LDS => {
            let r = Listener::decode(bytes).unwrap();
            (r.name.clone(), r.encode_to_vec())
        }
        RDS => {
            let r = RouteConfiguration::decode(bytes).unwrap();
            (r.name.clone(), r.encode_to_vec())
        }
        CDS => {
            let r = Cluster::decode(bytes).unwrap();
            (r.name.clone(), r.encode_to_vec())
        }
        EDS => {
            let r = ClusterLoadAssignment::decode(bytes).unwrap();
            (r.cluster_name.clone(), r.encode_to_vec())
        }
        other => panic!("unexpected type {other}"),
    }
}

/// Issue 18, part 5 (gRFC A40): every entry carries its resource as the
/// server sent it, `client_scope` is the target, and the NACKed cluster
/// keeps its good copy and says what was rejected, when and why.
#[tokio::test]
async fn csds_carries_each_resource_the_target_and_the_nack() {
    let s = setup().await;
    let admin = serve(&s.client).await;
    let config = fetch(admin).await;

    assert_eq!(config.client_scope, TARGET);
    assert_eq!(config.node.as_ref().unwrap().id, "e2e-node");
    let server = &s.testbed.servers()[0];
    let names: BTreeSet<&str> = config
        .generic_xds_configs
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    for entry in &config.generic_xds_configs {
        let (inner_name, encoded) = decode(entry);
        assert_eq!(inner_name, entry.name, "decodes to the resource it names");
        assert_eq!(entry.config_status, 0, "left to management servers");
        let stored = server.store().get(&entry.type_url, &entry.name).unwrap();
        if entry.name == s.bad {
            assert_eq!(entry.client_status, 4, "NACKED");
            assert_eq!(
                entry.version_info, s.bad_good_version,
                "the serving copy's version"
            );
            assert_eq!(
                encoded,
                cluster(&s.bad, &s.cla).encode_to_vec(),
                "the good copy"
            );
            let failure = entry
                .error_state
                .as_ref()
                .expect("a NACK has an error state");
            assert_eq!(failure.version_info, s.bad_rejected_version);
            assert!(
                failure.details.contains("eds_cluster_config.eds_config"),
                "{failure:?}"
            );
            assert!(failure.last_update_attempt.is_some(), "{failure:?}");
        } else {
            assert_eq!(entry.client_status, 3, "ACKED: {entry:?}");
            assert_eq!(entry.version_info, stored.version);
            assert_eq!(
                entry.xds_config.as_ref().unwrap().value,
                stored.resource.value,
                "the bytes as served"
            );
            assert!(entry.error_state.is_none(), "{entry:?}");
            assert!(entry.last_updated.is_some());
        }
    }
    assert!(names.contains(s.payments.as_str()));

    // The streaming method answers each request with the same dump.
    let mut csds = ClientStatusDiscoveryServiceClient::connect(format!("http://{admin}"))
        .await
        .unwrap();
    let requests = tokio_stream::iter([ClientStatusRequest::default()]);
    let mut answers = csds
        .stream_client_status(requests)
        .await
        .unwrap()
        .into_inner();
    let answer = tokio::time::timeout(PATIENCE, answers.message())
        .await
        .expect("CSDS streams an answer")
        .unwrap()
        .unwrap();
    assert_eq!(answer.config[0].client_scope, TARGET);
    assert_eq!(answer.config[0].generic_xds_configs.len(), 5);
}

/// The size bound (docs/cli.md): past 2 MiB of resource bytes in one
/// response, entries keep their status but leave `xds_config` out, and the
/// unary answer counts them in a header.
#[tokio::test]
async fn csds_leaves_out_resources_past_the_byte_budget_and_counts_them() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    let cla = cloud("envoy.config.endpoint.v3.ClusterLoadAssignment", "payments");
    let names = ["big-a", "big-b"].map(|id| cloud("envoy.config.cluster.v3.Cluster", id));
    // Each a little over half the budget: the first fits, the second not.
    let padding = "x".repeat(xdsfed::admin::csds::XDS_CONFIG_BUDGET / 2 + 1024);
    for name in &names {
        let mut big = cluster(name, &cla);
        big.alt_stat_name.clone_from(&padding);
        server.set_message(name, &big).unwrap();
    }
    let uri = server.uri();
    let client = client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut watches = names
        .each_ref()
        .map(|n| client.watch::<ClusterType>(n).unwrap());
    for watch in &mut watches {
        changed(watch).await;
    }
    let admin = serve(&client).await;

    let mut csds = ClientStatusDiscoveryServiceClient::connect(format!("http://{admin}"))
        .await
        .unwrap();
    let answer = csds
        .fetch_client_status(ClientStatusRequest::default())
        .await
        .unwrap();
    let omitted = answer
        .metadata()
        .get(xdsfed::admin::csds::OMITTED_HEADER)
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(omitted.as_deref(), Some("1"));
    let config = &answer.get_ref().config[0];
    let carried: Vec<(&str, bool, i32)> = config
        .generic_xds_configs
        .iter()
        .map(|g| (g.name.as_str(), g.xds_config.is_some(), g.client_status))
        .collect();
    assert_eq!(
        carried,
        [(names[0].as_str(), true, 3), (names[1].as_str(), false, 3)],
        "the second keeps its status (ACKED) without its bytes"
    );
}

/// `GET /metrics` from the admin endpoint.
async fn metrics_of(admin: SocketAddr) -> String {
    common::http_get(admin, "/metrics").await
}

/// One sample line of the text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `name{a="x",b="y"} value` (values hold no escaped quotes here).
fn parse_sample(line: &str) -> Sample {
    let (name, rest) = line
        .split_once('{')
        .unwrap_or_else(|| panic!("labels in {line}"));
    let (labels, value) = rest
        .rsplit_once("} ")
        .unwrap_or_else(|| panic!("a value in {line}"));
    let labels = labels
        .split("\",")
        .map(|pair| {
            let (k, v) = pair
                .split_once("=\"")
                .unwrap_or_else(|| panic!("{pair} in {line}"));
            (k.to_owned(), v.trim_end_matches('"').to_owned())
        })
        .collect();
    Sample {
        name: name.to_owned(),
        labels,
        value: value
            .parse()
            .unwrap_or_else(|_| panic!("a number in {line}")),
    }
}

/// gRFC A78 "XdsClient": each metric's Prometheus name (dots as
/// underscores, `_total` on counters), type and label names.
const A78: [(&str, &str, &[&str]); 5] = [
    (
        "grpc_xds_client_connected",
        "gauge",
        &["grpc_target", "grpc_xds_server"],
    ),
    (
        "grpc_xds_client_server_failure_total",
        "counter",
        &["grpc_target", "grpc_xds_server"],
    ),
    (
        "grpc_xds_client_resource_updates_valid_total",
        "counter",
        &["grpc_target", "grpc_xds_resource_type", "grpc_xds_server"],
    ),
    (
        "grpc_xds_client_resource_updates_invalid_total",
        "counter",
        &["grpc_target", "grpc_xds_resource_type", "grpc_xds_server"],
    ),
    (
        "grpc_xds_client_resources",
        "gauge",
        &[
            "grpc_target",
            "grpc_xds_authority",
            "grpc_xds_cache_state",
            "grpc_xds_resource_type",
        ],
    ),
];

/// Issue 18, part 6: every gRFC A78 XdsClient metric with A78's names,
/// types, labels and label values, the update counters by resource type.
#[tokio::test]
async fn metrics_are_a78_names_labels_and_values() {
    let s = setup().await;
    let admin = serve(&s.client).await;
    let text = metrics_of(admin).await;
    let uri = s.testbed.servers()[0].uri();

    let types: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let samples: Vec<Sample> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(parse_sample)
        .collect();
    for (name, kind, labels) in A78 {
        assert_eq!(types.get(name), Some(&kind), "# TYPE of {name} in\n{text}");
        let of_name: Vec<&Sample> = samples.iter().filter(|x| x.name == name).collect();
        assert!(!of_name.is_empty(), "{name} in\n{text}");
        for sample in of_name {
            let keys: Vec<&str> = sample.labels.keys().map(String::as_str).collect();
            assert_eq!(keys, labels, "labels of {sample:?}");
        }
    }
    let a78: BTreeSet<&str> = A78.iter().map(|(n, ..)| *n).collect();
    for sample in &samples {
        if sample.name.starts_with("grpc_") {
            assert!(a78.contains(sample.name.as_str()), "not in A78: {sample:?}");
        }
        for (label, value) in &sample.labels {
            match label.as_str() {
                "grpc_target" => assert_eq!(value, TARGET),
                "grpc_xds_server" => assert_eq!(value, &uri),
                "grpc_xds_authority" => assert!(value == "#old" || value == CLOUD, "{sample:?}"),
                "grpc_xds_resource_type" => assert!(
                    value.starts_with("envoy.config.") && !value.contains('/'),
                    "the type's name, not its URL: {sample:?}"
                ),
                "grpc_xds_cache_state" => assert!(
                    [
                        "requested",
                        "does_not_exist",
                        "acked",
                        "nacked",
                        "nacked_but_cached"
                    ]
                    .contains(&value.as_str()),
                    "only A78's cache states: {sample:?}"
                ),
                _ => {}
            }
        }
    }

    let value = |name: &str, with: &[(&str, &str)]| -> Option<f64> {
        samples
            .iter()
            .find(|x| {
                x.name == name
                    && with
                        .iter()
                        .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|x| x.value)
    };
    let cluster_type = [("grpc_xds_resource_type", "envoy.config.cluster.v3.Cluster")];
    assert_eq!(value("grpc_xds_client_connected", &[]), Some(1.0));
    assert!(
        value(
            "grpc_xds_client_resource_updates_valid_total",
            &cluster_type
        )
        .is_some_and(|n| n >= 2.0),
        "{text}"
    );
    assert!(
        value(
            "grpc_xds_client_resource_updates_invalid_total",
            &cluster_type
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert!(
        value(
            "grpc_xds_client_resource_updates_valid_total",
            &[(
                "grpc_xds_resource_type",
                "envoy.config.listener.v3.Listener"
            )]
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        value(
            "grpc_xds_client_resources",
            &[
                ("grpc_xds_authority", CLOUD),
                ("grpc_xds_resource_type", "envoy.config.cluster.v3.Cluster"),
                ("grpc_xds_cache_state", "nacked_but_cached")
            ]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            "grpc_xds_client_resources",
            &[
                ("grpc_xds_authority", "#old"),
                (
                    "grpc_xds_resource_type",
                    "envoy.config.listener.v3.Listener"
                ),
                ("grpc_xds_cache_state", "acked")
            ]
        ),
        Some(1.0),
        "{text}"
    );
}
