//! How the client maps authorities onto servers and streams, against the
//! testbed over loopback gRPC.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;

use common::resources::{CDS, cluster, endpoints, pack};
use common::{PATIENCE, bootstrap_json, changed, client, client_with, describe, eventually, next};
use xdsfed::client::client::{WatchError, XdsClient};
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::{ApiVariant, Bootstrap};
use xdsfed::core::types::{ClusterType, EndpointType};
use xdsfed::testbed::{Injected, ServerSpec, Testbed};

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn eds_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

#[tokio::test]
async fn delta_removal_of_an_unknown_name_means_does_not_exist_at_once() {
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let uri = testbed.servers()[0].uri();
    // The does-not-exist timer is long here: only the server's removal can answer in time.
    let bootstrap = Bootstrap::from_json_str(&bootstrap_json(
        &uri,
        &[("cloud.example", &[uri.as_str()])],
        "",
    ))
    .unwrap();
    let mut options = common::fast_transport();
    options.does_not_exist_timeout = std::time::Duration::from_secs(60);
    let client = XdsClient::builder(bootstrap)
        .transport_options(options)
        .build()
        .unwrap();
    let mut watch = client
        .watch::<EndpointType>(&eds_name("cloud.example", "ghost"))
        .unwrap();
    let event = next(&mut watch).await;
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
}

#[tokio::test]
async fn two_authorities_on_one_server_share_one_stream() {
    let testbed = Testbed::start([ServerSpec::new("shared", ["a.example", "b.example"])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let uri = server.uri();
    let a = cluster_name("a.example", "one");
    let b = eds_name("b.example", "two");
    server
        .set_message(&a, &cluster(&a, &eds_name("a.example", "one")))
        .unwrap();
    server
        .set_message(&b, &endpoints(&b, &[("10.0.0.2", 80)]))
        .unwrap();

    let client = client(&bootstrap_json(
        &uri,
        &[
            ("a.example", &[uri.as_str()]),
            ("b.example", &[uri.as_str()]),
        ],
        "",
    ));
    let mut wa = client.watch::<ClusterType>(&a).unwrap();
    let mut wb = client.watch::<EndpointType>(&b).unwrap();
    changed(&mut wa).await;
    changed(&mut wb).await;
    assert_eq!(
        server.recording().stream_count(),
        1,
        "one ADS stream carries both authorities"
    );
    assert_eq!(client.status().servers.len(), 1);
}

#[tokio::test]
async fn two_authorities_on_two_servers_use_two_streams() {
    let testbed = Testbed::start([
        ServerSpec::new("cloud", ["cloud.example"]),
        ServerSpec::new("onprem", ["onprem.example"]),
    ])
    .await
    .unwrap();
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let a = cluster_name("cloud.example", "web");
    let b = cluster_name("onprem.example", "db");
    cloud
        .set_message(&a, &cluster(&a, &eds_name("cloud.example", "web")))
        .unwrap();
    onprem
        .set_message(&b, &cluster(&b, &eds_name("onprem.example", "db")))
        .unwrap();

    let (cu, ou) = (cloud.uri(), onprem.uri());
    let client = client(&bootstrap_json(
        &cu,
        &[
            ("cloud.example", &[cu.as_str()]),
            ("onprem.example", &[ou.as_str()]),
        ],
        "",
    ));
    let mut wa = client.watch::<ClusterType>(&a).unwrap();
    let mut wb = client.watch::<ClusterType>(&b).unwrap();
    assert_eq!(changed(&mut wa).await.name(), a);
    assert_eq!(changed(&mut wb).await.name(), b);
    assert_eq!(cloud.recording().stream_count(), 1);
    assert_eq!(onprem.recording().stream_count(), 1);
    let status = client.status();
    let servers: BTreeSet<_> = status.resources.iter().map(|r| r.server.clone()).collect();
    assert_eq!(
        servers.len(),
        2,
        "each resource names its own server: {status:?}"
    );
}

#[tokio::test]
async fn unknown_authority_is_refused_without_touching_any_server() {
    let (testbed, client) = common::one_server().await;
    let err = client
        .watch::<ClusterType>(&cluster_name("elsewhere.example", "x"))
        .unwrap_err();
    assert!(matches!(err, WatchError::Authority(_)), "{err:?}");
    assert!(err.to_string().contains("elsewhere.example"), "{err}");
    assert_eq!(testbed.servers()[0].recording().stream_count(), 0);
}

#[tokio::test]
async fn another_authoritys_resource_is_ignored_and_counted() {
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let ours = cluster_name("cloud.example", "web");
    let foreign = cluster_name("onprem.example", "db");
    server
        .set_message(&ours, &cluster(&ours, &eds_name("cloud.example", "web")))
        .unwrap();
    server.update_faults(|f| {
        f.inject.push(Injected {
            name: foreign.clone(),
            resource: pack(&cluster(&foreign, &eds_name("onprem.example", "db"))),
        });
    });
    let uri = server.uri();
    // onprem.example lives on another server: this one may not speak for it.
    let client = client(&bootstrap_json(
        &uri,
        &[
            ("cloud.example", &[uri.as_str()]),
            ("onprem.example", &["127.0.0.1:1"]),
        ],
        "",
    ));
    let mut watch = client.watch::<ClusterType>(&ours).unwrap();
    changed(&mut watch).await;
    eventually("the foreign resource is counted", || {
        client
            .status()
            .servers
            .iter()
            .any(|s| s.foreign_resources_ignored > 0)
    })
    .await;
    assert!(client.status().resources.iter().all(|r| r.name != foreign));
}

#[tokio::test]
async fn delta_refused_by_the_server_falls_back_to_sotw() {
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server.update_faults(|f| f.delta_unimplemented = true);
    let name = cluster_name("cloud.example", "web");
    server
        .set_message(&name, &cluster(&name, &eds_name("cloud.example", "web")))
        .unwrap();
    let uri = server.uri();
    // Not pinned: the default delta variant may fall back.
    let client = client(&bootstrap_json(
        &uri,
        &[("cloud.example", &[uri.as_str()])],
        "",
    ));
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    assert_eq!(changed(&mut watch).await.name(), name);
    let streams = server.recording().streams();
    assert!(
        streams.iter().any(|s| s.sotw_requests().next().is_some()),
        "a SotW stream was used"
    );
    assert_eq!(client.status().servers[0].variant, "sotw");
}

#[tokio::test]
async fn wildcard_cds_delivers_every_cluster_delta() {
    wildcard_cds_delivers_every_cluster(ApiVariant::Delta).await;
}

#[tokio::test]
async fn wildcard_cds_delivers_every_cluster_sotw() {
    wildcard_cds_delivers_every_cluster(ApiVariant::Sotw).await;
}

async fn wildcard_cds_delivers_every_cluster(variant: ApiVariant) {
    let testbed = Testbed::start([ServerSpec::new("default", Vec::<String>::new())])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    for id in ["a", "b", "c"] {
        server.set_message(id, &cluster(id, "")).unwrap();
    }
    let client = client_with(&bootstrap_json(&server.uri(), &[], ""), variant);
    let mut wildcard = client.watch_wildcard::<ClusterType>().unwrap();
    let mut seen = BTreeSet::new();
    while seen.len() < 3 {
        let (name, event) = tokio::time::timeout(PATIENCE, wildcard.next())
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(event, WatchEvent::Changed(_)),
            "{name}: {}",
            describe(&event)
        );
        seen.insert(name.to_string());
    }
    assert_eq!(
        seen,
        BTreeSet::from(["a".to_string(), "b".into(), "c".into()])
    );

    server.delete_resource(CDS, "b").unwrap();
    let (name, event) = tokio::time::timeout(PATIENCE, wildcard.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&*name, "b");
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
}
