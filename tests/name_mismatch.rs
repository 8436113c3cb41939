//! A resource that names itself differently from the name it is sent under,
//! end to end over loopback gRPC (delta ADS): the client NACKs it naming
//! both names, and the watcher keeps its last good copy (docs/rules.md,
//! "Which name wins when a resource names itself differently").

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::{CDS, cluster};
use common::{PATIENCE, bootstrap_json, changed, client_with, describe, next};
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::ApiVariant;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";

fn cloud_cluster(id: &str) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/{id}")
}

#[tokio::test]
async fn delta_resource_named_differently_inside_is_nacked_and_the_good_copy_serves() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    let name = cloud_cluster("payments");
    let other = cloud_cluster("other");
    let good = cluster(&name, "payments");
    server.set_message(&name, &good).unwrap();

    let uri = server.uri();
    let client = client_with(
        &bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""),
        ApiVariant::Delta,
    );
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    assert_eq!(changed(&mut watch).await.decode().unwrap(), good);

    // Stored under `name`, but the Cluster inside says `other`.
    server
        .set_message(&name, &cluster(&other, "payments"))
        .unwrap();
    let report = server.wait_acked(CDS, &name, None, PATIENCE).await.unwrap();
    assert_eq!(report.nacked_by.len(), 1, "the client NACKs: {report:?}");
    let error = &report.nacked_by[0].error;
    assert!(
        error.contains(&format!(
            "resource name mismatch: sent as {name:?}, but the resource names itself {other:?}"
        )),
        "the NACK names both names: {error}"
    );

    match next(&mut watch).await {
        WatchEvent::AmbientError(e) => assert!(e.message().contains(&other), "{e}"),
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
    assert!(
        status.resources.iter().all(|r| r.name != other),
        "the name inside is not a resource of its own"
    );
}
