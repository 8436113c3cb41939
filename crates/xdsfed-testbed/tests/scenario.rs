//! Scenario files: parsing with field paths, starting, generators, schedule,
//! and the example files shipped in `bootstrap-examples/testbed-*.yaml` and
//! `bootstrap-examples/federation/`.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::{CDS, Delta, EDS, LDS, WAIT, delta_names};
use envoy_types::pb::envoy::config::{
    core::v3::{address::Address, socket_address::PortSpecifier},
    endpoint::v3::{ClusterLoadAssignment, lb_endpoint::HostIdentifier},
};
use prost::Message;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use xdsfed_testbed::scenario::{Scenario, ScenarioError};

/// `bootstrap-examples/testbed-*.yaml` and every scenario of
/// `bootstrap-examples/federation/`.
fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bootstrap-examples");
    let yaml_files = |dir: PathBuf| {
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect::<Vec<PathBuf>>()
    };
    let mut files: Vec<PathBuf> = yaml_files(dir.clone())
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("testbed-"))
        })
        .chain(yaml_files(dir.join("federation")))
        .collect();
    files.sort();
    files
}

fn federated() -> Scenario {
    let file = examples()
        .into_iter()
        .find(|p| p.ends_with("testbed-federated.yaml"))
        .expect("the federated example exists");
    Scenario::from_file(&file).expect("the federated example is valid")
}

#[test]
fn every_testbed_example_file_is_a_valid_scenario() {
    let files = examples();
    assert!(files.len() >= 8, "{files:?}");
    for file in files {
        if let Err(e) = Scenario::from_file(&file) {
            panic!("{}: {e}", file.display());
        }
    }
}

#[test]
fn unknown_field_is_reported_with_its_path() {
    let err = Scenario::from_yaml("servers:\n  - name: a\n    authorities: [a]\n    prot: 1\n")
        .unwrap_err();
    assert!(err.is_bad_input());
    let text = err.to_string();
    assert!(
        text.contains("servers[0]") && text.contains("prot"),
        "{text}"
    );
}

#[test]
fn resource_json_mapping_error_names_resource_path_and_field() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
resources:
  - name: xdstp://a.example/envoy.config.cluster.v3.Cluster/c
    resource:
      "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
      conect_timeout: 1s
"#;
    let text = Scenario::from_yaml(yaml).unwrap_err().to_string();
    assert!(
        text.contains("resources[0].resource") && text.contains("conect_timeout"),
        "{text}"
    );
}

#[test]
fn resource_of_unserved_authority_is_rejected() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
resources:
  - name: xdstp://b.example/envoy.config.cluster.v3.Cluster/c
    encoded: {type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster, hex: ""}
"#;
    let err = Scenario::from_yaml(yaml).unwrap_err();
    assert!(
        matches!(err, ScenarioError::Invalid { ref path, .. } if path == "resources[0].name"),
        "{err}"
    );
}

#[test]
fn step_with_two_actions_is_rejected() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
schedule:
  - at: 1s
    faults: {server: a}
    restart: {server: a}
"#;
    let err = Scenario::from_yaml(yaml).unwrap_err();
    assert!(err.to_string().starts_with("schedule[0]"), "{err}");
}

#[test]
fn reference_to_unknown_backend_is_rejected() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
resources:
  - name: xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/e
    resource:
      "@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
      cluster_name: "${backend.nope.port}"
"#;
    let text = Scenario::from_yaml(yaml).unwrap_err().to_string();
    assert!(
        text.contains("resources[0].resource") && text.contains("nope"),
        "{text}"
    );
}

/// The federated example: two authorities on two servers, each serving its
/// part of listener → route → cluster → endpoints, with endpoints pointing at
/// the health backends the scenario started.
#[tokio::test]
async fn federated_example_serves_each_authority_from_its_server() {
    let running = federated().start().await.expect("the scenario starts");
    let tb = running.testbed();
    assert_eq!(tb.servers().len(), 2);
    let cloud = tb.server_for_authority("cloud.example").unwrap();
    let onprem = tb.server_for_authority("onprem.example").unwrap();
    assert_ne!(cloud.addr(), onprem.addr());

    let mut client = Delta::open(cloud, "grpc-client").await;
    let listener = "xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter";
    client.subscribe(LDS, &[listener]).await;
    assert_eq!(delta_names(&client.recv().await), [listener]);

    let cla =
        "xdstp://onprem.example/envoy.config.endpoint.v3.ClusterLoadAssignment/greeter-onprem";
    let mut client = Delta::open(onprem, "grpc-client").await;
    client.subscribe(EDS, &[cla]).await;
    let response = client.recv().await;
    let any = response.resources[0].resource.as_ref().unwrap();
    let decoded = ClusterLoadAssignment::decode(any.value.as_slice()).unwrap();
    let Some(HostIdentifier::Endpoint(endpoint)) =
        &decoded.endpoints[0].lb_endpoints[0].host_identifier
    else {
        panic!("no endpoint in {decoded:?}");
    };
    let Some(Address::SocketAddress(socket)) =
        endpoint.address.as_ref().and_then(|a| a.address.as_ref())
    else {
        panic!("no socket address in {endpoint:?}");
    };
    let backend = tb.backend("greeter-onprem").unwrap();
    assert_eq!(socket.address, "127.0.0.1");
    assert_eq!(
        socket.port_specifier,
        Some(PortSpecifier::PortValue(u32::from(backend.addr().port())))
    );

    // The endpoint is a real gRPC server.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", backend.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let status = tokio::time::timeout(
        WAIT,
        health.check(HealthCheckRequest {
            service: String::new(),
        }),
    )
    .await
    .unwrap()
    .unwrap()
    .into_inner()
    .status;
    assert_eq!(status, ServingStatus::Serving as i32);
}

#[tokio::test]
async fn clusters_generator_loads_count_clusters_and_assignments() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
generators:
  - server: a
    clusters: {count: 1000, endpoints_per_cluster: 10}
"#;
    let running = Scenario::from_yaml(yaml).unwrap().start().await.unwrap();
    let server = &running.testbed().servers()[0];
    assert_eq!(server.store().table(CDS).1.len(), 1000);
    let (_, assignments) = server.store().table(EDS);
    assert_eq!(assignments.len(), 1000);
    let any = &assignments.values().next().unwrap().resource;
    let cla = ClusterLoadAssignment::decode(any.value.as_slice()).unwrap();
    assert_eq!(cla.endpoints[0].lb_endpoints.len(), 10);
}

#[tokio::test]
async fn schedule_applies_set_delete_and_faults_in_order() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
resources:
  - name: old
    server: a
    resource: {"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: old}
schedule:
  - at: 20ms
    delete: {server: a, type_url: type.googleapis.com/envoy.config.cluster.v3.Cluster, name: old}
  - at: 0ms
    set:
      server: a
      name: new
      resource: {"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: new}
  - at: 10ms
    faults: {server: a, response_delay: 5ms, silent_names: [ghost]}
"#;
    let mut running = Scenario::from_yaml(yaml).unwrap().start().await.unwrap();
    let failed = running.schedule_finished().await;
    assert!(failed.is_empty(), "{failed:?}");
    let server = &running.testbed().servers()[0];
    assert!(server.store().get(CDS, "old").is_none());
    assert!(server.store().get(CDS, "new").is_some());
    let faults = server.faults();
    assert_eq!(
        faults.response_delay,
        Some(std::time::Duration::from_millis(5))
    );
    assert!(faults.silent_names.contains("ghost"));
}

/// A client started once `start` returns must never see the state before the
/// `0s` steps: they are applied before it returns, not in the background.
#[tokio::test]
async fn steps_at_zero_are_applied_before_start_returns() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}]
schedule:
  - at: 0s
    faults: {server: a, refuse_connections: true}
  - at: 1m
    faults: {server: a}
"#;
    let running = Scenario::from_yaml(yaml).unwrap().start().await.unwrap();
    assert!(running.testbed().servers()[0].faults().refuse_connections);
}

/// `schedule_clock: first_request` holds the schedule until a client asks
/// for something, so a scenario started by hand waits for its watcher.
#[tokio::test]
async fn first_request_clock_starts_the_schedule_at_the_first_request() {
    let yaml = r#"
servers: [{name: a, authorities: [a.example]}, {name: b, authorities: [b.example]}]
schedule_clock: first_request
schedule:
  - at: 1ms
    set:
      server: a
      name: later
      resource: {"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: later}
"#;
    let mut running = Scenario::from_yaml(yaml).unwrap().start().await.unwrap();
    // Without a request the schedule never runs, so this wait always ends
    // by the timeout; a schedule that ran anyway would finish within it.
    let early = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        running.schedule_finished(),
    )
    .await;
    assert!(early.is_err(), "the schedule ran before any request");
    assert!(
        running.testbed().servers()[0]
            .store()
            .get(CDS, "later")
            .is_none()
    );

    // A request to the second server starts it.
    let mut client = Delta::open(&running.testbed().servers()[1], "clock").await;
    client.subscribe(CDS, &["anything"]).await;
    let failed = tokio::time::timeout(WAIT, running.schedule_finished())
        .await
        .expect("the schedule runs once a request arrives");
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        running.testbed().servers()[0]
            .store()
            .get(CDS, "later")
            .is_some()
    );
}

#[test]
fn unknown_schedule_clock_is_reported_with_its_path() {
    let err = Scenario::from_yaml(
        "servers: [{name: a, authorities: [a.example]}]\nschedule_clock: noon\n",
    )
    .unwrap_err();
    assert!(err.is_bad_input());
    let text = err.to_string();
    assert!(
        text.contains("schedule_clock") && text.contains("first_request"),
        "{text}"
    );
}
