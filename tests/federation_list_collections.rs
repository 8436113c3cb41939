//! List collections (xDS TP1 §List collections), against the testbed over
//! loopback gRPC: locator entries fetched on their own authorities, inline
//! entries used as they are and addressable with `#entry=`, redirects of the
//! collection followed, and the collection's context parameters.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use xdsfed::core::types::ClusterView;

use common::resources::{cluster, cluster_collection, inline, locator};
use common::{PATIENCE, bootstrap_json, changed_until, client, describe, next};
use xdsfed::client::watch::{CollectionEvent, CollectionWatch, WatchEvent};
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const ONPREM: &str = "onprem.example";

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn collection_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.ClusterCollection/{id}")
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// Where [`until`] keeps the latest `Listed` member list (space-separated).
const LISTED: &str = "#listed";

/// Collects events, latest per member ("" for `Empty`), until `done`.
async fn until(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut HashMap<String, String>,
    what: &str,
    done: impl Fn(&HashMap<String, String>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(seen) {
        let event = match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("collection watch ended waiting for {what}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}: {seen:?}"),
        };
        let (name, text) = match event {
            CollectionEvent::Upsert { name, resource } => (
                name.to_string(),
                format!("upsert {}", service_of(&resource)),
            ),
            CollectionEvent::Removed { name } => (name.to_string(), "removed".to_owned()),
            CollectionEvent::Empty => (String::new(), "empty".to_owned()),
            CollectionEvent::Error { name, error } => (name.to_string(), format!("error {error}")),
            CollectionEvent::Listed { members } => (LISTED.to_owned(), members.join(" ")),
        };
        seen.insert(name, text);
    }
}

fn is(seen: &HashMap<String, String>, name: &str, text: &str) -> bool {
    seen.get(name).is_some_and(|t| t == text)
}

/// TP1: locator entries are resources of their own, fetched on their own
/// authority (here one on cloud, one on onprem); a locator that leaves the
/// collection is reported removed.
#[tokio::test]
async fn list_collection_locators_are_fetched_on_their_own_authorities() {
    let testbed = Testbed::start([
        ServerSpec::new("cloud", [CLOUD]),
        ServerSpec::new("onprem", [ONPREM]),
    ])
    .await
    .unwrap();
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (c, o) = (cloud.uri(), onprem.uri());
    let (bar, baz) = (cluster_name(CLOUD, "bar"), cluster_name(ONPREM, "baz"));
    let foo = collection_name(CLOUD, "foo");
    cloud.set_message(&bar, &cluster(&bar, "cloud")).unwrap();
    onprem.set_message(&baz, &cluster(&baz, "onprem")).unwrap();
    cloud
        .set_resource(&foo, cluster_collection(vec![locator(&bar), locator(&baz)]))
        .unwrap();
    let client = client(&bootstrap_json(
        &c,
        &[(CLOUD, &[c.as_str()]), (ONPREM, &[o.as_str()])],
        "",
    ));
    let mut watch = client.watch_list_collection::<ClusterType>(&foo).unwrap();
    let mut seen = HashMap::new();

    let both = format!("{bar} {baz}");
    until(&mut watch, &mut seen, "both members", |s| {
        is(s, &bar, "upsert cloud") && is(s, &baz, "upsert onprem") && is(s, LISTED, &both)
    })
    .await;
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.name == baz).unwrap();
    assert_eq!(entry.authority.as_deref(), Some(ONPREM));

    // A member changes on its own server.
    onprem
        .set_message(&baz, &cluster(&baz, "onprem-v2"))
        .unwrap();
    until(&mut watch, &mut seen, "the member's update", |s| {
        is(s, &baz, "upsert onprem-v2")
    })
    .await;

    // The collection drops it.
    cloud
        .set_resource(&foo, cluster_collection(vec![locator(&bar)]))
        .unwrap();
    until(&mut watch, &mut seen, "the removal", |s| {
        is(s, &baz, "removed") && is(s, LISTED, &bar)
    })
    .await;
}

/// TP1: inline entries are used as they are; a named one is addressable as
/// `…Collection/foo#entry=name`, an anonymous one is used but only reported
/// to the collection's watchers.
#[tokio::test]
async fn list_collection_inline_entries_are_used_and_named_ones_addressable() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let cloud = &testbed.servers()[0];
    let c = cloud.uri();
    let foo = collection_name(CLOUD, "foo");
    cloud
        .set_resource(
            &foo,
            cluster_collection(vec![inline("bar", "v1"), inline("", "anon")]),
        )
        .unwrap();
    let client = client(&bootstrap_json(&c, &[(CLOUD, &[c.as_str()])], ""));
    let mut watch = client.watch_list_collection::<ClusterType>(&foo).unwrap();
    let mut entry = client
        .watch::<ClusterType>(&format!("{foo}#entry=bar"))
        .unwrap();
    let mut seen = HashMap::new();
    let (bar, anonymous) = (format!("{foo}#entry=bar"), format!("{foo}#anonymous=1"));

    until(&mut watch, &mut seen, "both inline entries", |s| {
        is(s, &bar, "upsert v1") && is(s, &anonymous, "upsert anon")
    })
    .await;
    let first = changed_until(&mut entry, "the inline entry", |c| service_of(c) == "v1").await;
    assert_eq!(first.name(), "bar");

    cloud
        .set_resource(&foo, cluster_collection(vec![inline("bar", "v2")]))
        .unwrap();
    changed_until(&mut entry, "the entry's update", |c| service_of(c) == "v2").await;
    until(
        &mut watch,
        &mut seen,
        "the anonymous entry's removal",
        |s| is(s, &anonymous, "removed") && is(s, &bar, "upsert v2"),
    )
    .await;

    cloud
        .set_resource(&foo, cluster_collection(vec![inline("other", "v3")]))
        .unwrap();
    loop {
        match next(&mut entry).await {
            WatchEvent::DoesNotExist => break,
            WatchEvent::Changed(_) => {}
            other => panic!("expected the entry to be gone, got {}", describe(&other)),
        }
    }
}

/// TP1: "Redirects are only supported for list collections": the collection
/// answered with a locator is fetched from the target's authority and its
/// entries delivered under the watched collection.
#[tokio::test]
async fn redirected_list_collection_is_followed_across_authorities() {
    let testbed = Testbed::start([
        ServerSpec::new("cloud", [CLOUD]),
        ServerSpec::new("onprem", [ONPREM]),
    ])
    .await
    .unwrap();
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (c, o) = (cloud.uri(), onprem.uri());
    let (foo, moved) = (
        collection_name(CLOUD, "foo"),
        collection_name(ONPREM, "moved"),
    );
    onprem
        .set_resource(&moved, cluster_collection(vec![inline("bar", "onprem")]))
        .unwrap();
    cloud.update_faults(|f| {
        f.redirects.insert(foo.clone(), moved.clone());
    });
    let client = client(&bootstrap_json(
        &c,
        &[(CLOUD, &[c.as_str()]), (ONPREM, &[o.as_str()])],
        "",
    ));
    let mut watch = client.watch_list_collection::<ClusterType>(&foo).unwrap();
    let mut seen = HashMap::new();
    let bar = format!("{foo}#entry=bar");
    until(
        &mut watch,
        &mut seen,
        "the redirected collection's entry",
        |s| is(s, &bar, "upsert onprem"),
    )
    .await;
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.name == foo).unwrap();
    let source = entry.source.as_ref().expect("a source");
    assert!(source.redirected, "{source:?}");
    assert_eq!(source.fetched_as.as_deref(), Some(moved.as_str()));
}

/// TP1: "the context parameters presented in the original request must be
/// present in the response": a collection stored without them does not
/// answer a watch of the name with them.
#[tokio::test]
async fn list_collection_context_parameters_must_be_in_the_response_name() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let cloud = &testbed.servers()[0];
    let c = cloud.uri();
    let plain = collection_name(CLOUD, "foo");
    let with_params = format!("{plain}?env=prod");
    cloud
        .set_resource(&plain, cluster_collection(vec![inline("bar", "plain")]))
        .unwrap();
    let client = client(&bootstrap_json(&c, &[(CLOUD, &[c.as_str()])], ""));
    let mut watch = client
        .watch_list_collection::<ClusterType>(&with_params)
        .unwrap();
    let mut seen = HashMap::new();
    until(&mut watch, &mut seen, "the collection's absence", |s| {
        is(s, "", "empty")
    })
    .await;
    assert_eq!(seen.len(), 1, "nothing of the other collection: {seen:?}");

    cloud
        .set_resource(
            &with_params,
            cluster_collection(vec![inline("bar", "prod")]),
        )
        .unwrap();
    until(
        &mut watch,
        &mut seen,
        "the collection with its parameters",
        |s| is(s, &format!("{with_params}#entry=bar"), "upsert prod"),
    )
    .await;
}
