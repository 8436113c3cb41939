//! The client against the testbed over loopback gRPC, for delta and SotW ADS.
//!
//! Each scenario is written once and run for both variants.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::resources::{CDS, EDS, cluster, endpoints, invalid_cluster};
use common::{PATIENCE, bootstrap_json, changed, client_with, describe, eventually, next};
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::ApiVariant;
use xdsfed::core::types::{ClusterType, EndpointType};
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";

fn cloud_cluster(id: &str) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/{id}")
}

fn cloud_endpoints(id: &str) -> String {
    format!("xdstp://{CLOUD}/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

async fn one_server() -> Testbed {
    Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .expect("testbed starts")
}

fn cloud_client(testbed: &Testbed, variant: ApiVariant) -> xdsfed::client::client::XdsClient {
    client_of(&testbed.servers()[0].uri(), variant)
}

/// A client whose one server, for every authority, is `uri`.
fn client_of(uri: &str, variant: ApiVariant) -> xdsfed::client::client::XdsClient {
    client_with(&bootstrap_json(uri, &[(CLOUD, &[uri])], ""), variant)
}

/// One server holding the cluster `payments`, and that cluster's name.
async fn payments_on_one_server() -> (Testbed, String) {
    let testbed = one_server().await;
    let name = cloud_cluster("payments");
    testbed.servers()[0]
        .set_message(&name, &cluster(&name, &cloud_endpoints("payments")))
        .unwrap();
    (testbed, name)
}

macro_rules! both_variants {
    ($($name:ident),* $(,)?) => {
        mod delta {
            $(#[tokio::test] async fn $name() { super::$name(xdsfed::core::bootstrap::ApiVariant::Delta).await })*
        }
        mod sotw {
            $(#[tokio::test] async fn $name() { super::$name(xdsfed::core::bootstrap::ApiVariant::Sotw).await })*
        }
    };
}

both_variants!(
    subscribe_update_and_delete_reach_the_watcher,
    invalid_update_is_nacked_while_the_good_copy_serves,
    duplicate_names_in_a_response_are_nacked,
    missing_resource_does_not_exist_after_the_timer,
    restart_resumes_without_losing_the_cached_copy,
    transient_error_clears_when_the_server_is_back_with_nothing_new,
);

async fn subscribe_update_and_delete_reach_the_watcher(variant: ApiVariant) {
    let (testbed, name) = payments_on_one_server().await;
    let server = &testbed.servers()[0];

    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    assert_eq!(changed(&mut watch).await.name(), name);

    let mut updated = cluster(&name, &cloud_endpoints("payments"));
    updated.alt_stat_name = "v2".into();
    server.set_message(&name, &updated).unwrap();
    assert_eq!(
        changed(&mut watch).await.decode().unwrap().alt_stat_name,
        "v2"
    );

    server.delete_resource(CDS, &name).unwrap();
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    assert!(watch.current().is_none());
}

async fn invalid_update_is_nacked_while_the_good_copy_serves(variant: ApiVariant) {
    let testbed = one_server().await;
    let server = &testbed.servers()[0];
    let name = cloud_cluster("payments");
    let good = cluster(&name, &cloud_endpoints("payments"));
    server.set_message(&name, &good).unwrap();

    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    changed(&mut watch).await;

    server.set_message(&name, &invalid_cluster(&name)).unwrap();
    let report = server.wait_acked(CDS, &name, None, PATIENCE).await.unwrap();
    assert_eq!(report.nacked_by.len(), 1, "the client NACKs: {report:?}");
    assert!(
        report.nacked_by[0]
            .error
            .contains("eds_cluster_config.eds_config"),
        "the NACK names the bad field: {report:?}"
    );

    match next(&mut watch).await {
        WatchEvent::AmbientError(e) => assert!(e.message().contains(&name), "{e}"),
        other => panic!("expected an ambient error, got {}", describe(&other)),
    }
    assert_eq!(
        watch.current().map(|c| c.decode().unwrap()),
        Some(good.clone()),
        "the good copy keeps serving"
    );
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.name == name).unwrap();
    assert_eq!(entry.status, ResourceStatus::Nacked);
    assert!(entry.cached);
}

async fn duplicate_names_in_a_response_are_nacked(variant: ApiVariant) {
    let testbed = one_server().await;
    let server = &testbed.servers()[0];
    let name = cloud_cluster("payments");
    server
        .set_message(&name, &cluster(&name, &cloud_endpoints("payments")))
        .unwrap();
    server.update_faults(|f| {
        f.duplicate_names.insert(name.clone());
    });

    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    match next(&mut watch).await {
        WatchEvent::Error(e) => assert!(e.message().contains(&name), "{e}"),
        other => panic!("expected an error, got {}", describe(&other)),
    }
    let report = server.wait_acked(CDS, &name, None, PATIENCE).await.unwrap();
    assert_eq!(report.nacked_by.len(), 1, "{report:?}");
}

async fn missing_resource_does_not_exist_after_the_timer(variant: ApiVariant) {
    let testbed = one_server().await;
    // Silence keeps the server from telling the client the name is unknown,
    // so only the does-not-exist timer can decide.
    let name = cloud_endpoints("ghost");
    testbed.servers()[0].update_faults(|f| {
        f.silent_names.insert(name.clone());
    });
    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<EndpointType>(&name).unwrap();
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    let status = client.status();
    assert_eq!(status.resources[0].status, ResourceStatus::DoesNotExist);
}

async fn restart_resumes_without_losing_the_cached_copy(variant: ApiVariant) {
    let testbed = one_server().await;
    let server = &testbed.servers()[0];
    let name = cloud_endpoints("payments");
    let cla = endpoints(&name, &[("10.0.0.1", 8080)]);
    server.set_message(&name, &cla).unwrap();
    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<EndpointType>(&name).unwrap();
    changed(&mut watch).await;

    server
        .restart(true, Duration::from_millis(100))
        .await
        .unwrap();
    eventually("the client reconnects", || {
        server.recording().stream_count() >= 2
    })
    .await;
    // The cached copy survived, whatever the watcher was told in between.
    let held = watch
        .current()
        .map(|a| a.decode().expect("held bytes decode"));
    assert_eq!(held.as_ref(), Some(&cla));
    eventually("the second stream resubscribes", || {
        server
            .recording()
            .streams()
            .get(1)
            .is_some_and(|s| s.events.iter().any(|e| e.message.is_request()))
    })
    .await;
    let second = &server.recording().streams()[1];
    match variant {
        ApiVariant::Delta => {
            let first = second.delta_requests().next().expect("a request");
            assert_eq!(
                first.initial_resource_versions.keys().collect::<Vec<_>>(),
                [&name],
                "delta resumes with the versions it holds"
            );
        }
        ApiVariant::Sotw => {
            let first = second.sotw_requests().next().expect("a request");
            assert!(first.resource_names.contains(&name));
            assert!(
                !first.version_info.is_empty(),
                "SotW resends the last ACKed version"
            );
        }
    }
    let _ = EDS;
}

async fn transient_error_clears_when_the_server_is_back_with_nothing_new(variant: ApiVariant) {
    let testbed = one_server().await;
    let server = &testbed.servers()[0];
    let name = cloud_endpoints("payments");
    server
        .set_message(&name, &endpoints(&name, &[("10.0.0.1", 8080)]))
        .unwrap();
    let client = cloud_client(&testbed, variant);
    let mut watch = client.watch::<EndpointType>(&name).unwrap();
    changed(&mut watch).await;

    server.stop().await;
    match next(&mut watch).await {
        WatchEvent::AmbientError(e) => assert!(e.message().contains("127.0.0.1"), "{e}"),
        other => panic!("expected an ambient error, got {}", describe(&other)),
    }
    // Same resources, same versions: the server has nothing new to send.
    server.restart(true, Duration::ZERO).await.unwrap();
    eventually("the outage's error is gone from the status", || {
        client.status().resources.iter().all(|r| r.error.is_none())
    })
    .await;
    assert!(watch.current().is_some());
}

/// gRPC's spelling of a target, `dns:///host:port` (what bootstraps written
/// for gRPC carry), is dialled as `host:port`.
#[tokio::test]
async fn a_server_uri_in_grpcs_dns_form_is_dialled() {
    let (testbed, name) = payments_on_one_server().await;
    let uri = format!("dns:///{}", testbed.servers()[0].uri());
    let client = client_of(&uri, ApiVariant::Delta);
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    assert_eq!(changed(&mut watch).await.name(), name);
}
