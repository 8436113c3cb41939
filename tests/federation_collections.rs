//! Glob collections (xDS TP1 §Glob) and redirect refusal, against the
//! testbed over loopback gRPC.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::resources::{CDS, cluster};
use common::{PATIENCE, bootstrap_json, client, client_with, next};
use tokio_stream::{Stream, StreamExt};
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::client::WatchError;
use xdsfed::client::watch::{
    CollectionEvent, CollectionSet, CollectionSetEvent, CollectionWatch, WatchEvent,
};
use xdsfed::core::bootstrap::ApiVariant;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";

fn name(id: &str) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/{id}")
}

fn short<T>(event: &CollectionEvent<T>) -> String {
    match event {
        CollectionEvent::Upsert { name, .. } => format!("upsert {name}"),
        CollectionEvent::Removed { name } => format!("removed {name}"),
        CollectionEvent::Empty => "empty".into(),
        CollectionEvent::Error { name, error } => format!("error {name}: {error}"),
        CollectionEvent::Listed { members } => format!("listed {}", members.join(" ")),
    }
}

/// Collects a stream's events, each shown as text, until `done` says the
/// ones seen so far suffice.
async fn collect_until<S: Stream + Unpin>(
    stream: &mut S,
    show: impl Fn(S::Item) -> String,
    what: &str,
    mut done: impl FnMut(&[String]) -> bool,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    while !done(&seen) {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(event)) => seen.push(show(event)),
            Ok(None) => panic!("the watch ended waiting for {what}: {seen:?}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}: {seen:?}"),
        }
    }
    seen
}

/// A collection watch's events until `done`.
async fn until(
    watch: &mut CollectionWatch<ClusterType>,
    what: &str,
    done: impl FnMut(&[String]) -> bool,
) -> Vec<String> {
    collect_until(watch, |event| short(&event), what, done).await
}

/// TP1 §Glob: members are the resources directly under the glob's path with
/// the same context parameters; additions and removals reach the watcher,
/// and the glob named in `removed_resources` means the collection is empty.
#[tokio::test]
async fn glob_collection_tracks_additions_removals_and_the_empty_glob() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let uri = server.uri();
    let (one, two, four) = (
        name("pool/one?zone=a"),
        name("pool/two?zone=a"),
        name("pool/four?zone=a"),
    );
    let outsiders = [
        name("pool/three?zone=b"),
        name("pool/deep/x?zone=a"),
        name("other/y?zone=a"),
    ];
    for n in [&one, &two].into_iter().chain(outsiders.iter()) {
        server.set_message(n, &cluster(n, "pool")).unwrap();
    }
    let client = client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut watch = client
        .watch_collection::<ClusterType>(&name("pool/*?zone=a"))
        .unwrap();

    let seen = until(&mut watch, "both members", |seen| {
        seen.contains(&format!("upsert {one}")) && seen.contains(&format!("upsert {two}"))
    })
    .await;
    assert!(
        seen.iter()
            .all(|e| outsiders.iter().all(|o| !e.contains(o.as_str()))),
        "only members: {seen:?}"
    );

    server.delete_resource(CDS, &one).unwrap();
    until(&mut watch, "the removal", |seen| {
        seen.contains(&format!("removed {one}"))
    })
    .await;
    server.set_message(&four, &cluster(&four, "pool")).unwrap();
    until(&mut watch, "the addition", |seen| {
        seen.contains(&format!("upsert {four}"))
    })
    .await;

    server.delete_resource(CDS, &two).unwrap();
    server.delete_resource(CDS, &four).unwrap();
    until(&mut watch, "the empty glob", |seen| {
        seen.contains(&"empty".to_owned())
    })
    .await;
    // The collection's own state, read through the cache (the watch keeps
    // no channel of its own for it).
    assert_eq!(watch.state().status, ResourceStatus::DoesNotExist);
    assert!(watch.provenance().server.starts_with(uri.as_str()));
}

/// A collection set's events, as `collection: event`, until `done`.
async fn until_set(
    set: &mut CollectionSet<ClusterType>,
    what: &str,
    done: impl FnMut(&[String]) -> bool,
) -> Vec<String> {
    let show =
        |change: CollectionSetEvent<_>| format!("{}: {}", change.collection, short(&change.event));
    collect_until(set, show, what, done).await
}

/// A collection set reports what a watch of each of its globs would, under
/// the name each glob was inserted with (not canonical here: its context
/// parameters are out of order); a glob removed from the set reports
/// nothing more, while the others go on.
#[tokio::test]
async fn a_set_reports_members_under_their_collection() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    let uri = server.uri();
    let (a1, a2, b1) = (
        name("a/one?zone=z"),
        name("a/two?zone=z"),
        name("b/one?az=1&zone=z"),
    );
    let outsider = name("c/one?zone=z");
    for n in [&a1, &a2, &b1, &outsider] {
        server.set_message(n, &cluster(n, "pool")).unwrap();
    }
    let client = client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut set = client.collection_set::<ClusterType>();
    let glob_a: Arc<str> = name("a/*?zone=z").into();
    let glob_b: Arc<str> = name("b/*?zone=z&az=1").into();
    set.insert_shared(&glob_a).unwrap();
    set.insert_shared(&glob_b).unwrap();
    // Again: still one subscription, still reported.
    set.insert_shared(&glob_a).unwrap();
    assert_eq!(set.len(), 2);
    assert!(set.contains(&glob_b) && set.contains(&name("b/*?az=1&zone=z")));
    let not_a_glob: Arc<str> = name("a/one").into();
    assert!(set.insert_shared(&not_a_glob).is_err());

    let seen = until_set(&mut set, "the three members", |seen| seen.len() >= 3).await;
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            format!("{glob_a}: upsert {a1}"),
            format!("{glob_a}: upsert {a2}"),
            format!("{glob_b}: upsert {b1}"),
        ],
        "each member once, under its collection, and no outsider"
    );
    assert!(
        set.provenance(&glob_b)
            .is_some_and(|p| p.server.starts_with(uri.as_str()))
    );

    // Out of the set: its members' changes are not reported; the other's are.
    assert!(set.remove(&glob_b));
    assert!(!set.remove(&glob_b));
    server.set_message(&b1, &cluster(&b1, "moved")).unwrap();
    server.delete_resource(CDS, &a1).unwrap();
    server.delete_resource(CDS, &a2).unwrap();
    let seen = until_set(&mut set, "the empty glob", |seen| {
        seen.contains(&format!("{glob_a}: empty"))
    })
    .await;
    assert!(
        seen.iter().all(|e| e.starts_with(&*glob_a)),
        "nothing of the removed glob: {seen:?}"
    );
    assert!(
        seen.contains(&format!("{glob_a}: removed {a1}")),
        "{seen:?}"
    );
    // A removed glob is unsubscribed on the wire; the others go with the set.
    let canonical_b = name("b/*?az=1&zone=z");
    let subscribed = |glob: &str| {
        let mut on = false;
        for r in server
            .recording()
            .streams()
            .iter()
            .flat_map(|s| s.delta_requests().cloned().collect::<Vec<_>>())
        {
            on = (on || r.resource_names_subscribe.iter().any(|n| n == glob))
                && !r.resource_names_unsubscribe.iter().any(|n| n == glob);
        }
        on
    };
    eventually("b unsubscribed", || !subscribed(&canonical_b)).await;
    assert!(subscribed(&glob_a), "a is still subscribed");
    drop(set);
    eventually("a unsubscribed with the set", || !subscribed(&glob_a)).await;
}

/// Polls `done` until it holds, failing after [`PATIENCE`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(tokio::time::Instant::now() < give_up, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// TP1 §Glob needs delta xDS: a server pinned to state-of-the-world is
/// refused at watch time, naming the server.
#[tokio::test]
async fn glob_collection_over_sotw_is_refused() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let uri = testbed.servers()[0].uri();
    let client = client_with(
        &bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""),
        ApiVariant::Sotw,
    );
    let err = client
        .watch_collection::<ClusterType>(&name("pool/*"))
        .unwrap_err();
    assert!(matches!(err, WatchError::Unsupported(_)), "{err:?}");
    assert!(
        err.to_string().contains("delta") && err.to_string().contains(&uri),
        "{err}"
    );
    let err = client
        .watch_collection::<ClusterType>(&name("pool/x"))
        .unwrap_err();
    assert!(err.to_string().contains("not a glob"), "{err}");
}

/// A server that answers UNIMPLEMENTED for delta ADS is spoken to over
/// SotW (the transport's fallback); a glob then cannot be asked for, and
/// its watcher is told why, naming the server. Plain names keep working on
/// the same stream.
#[tokio::test]
async fn glob_collection_on_a_server_that_falls_back_to_sotw_reports_why() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .unwrap();
    let server = &testbed.servers()[0];
    server.update_faults(|f| f.delta_unimplemented = true);
    let plain = name("plain");
    server
        .set_message(&plain, &cluster(&plain, "sotw"))
        .unwrap();
    let uri = server.uri();
    let client = client(&bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], ""));
    let mut watch = client
        .watch_collection::<ClusterType>(&name("pool/*"))
        .unwrap();
    let mut single = client.watch::<ClusterType>(&plain).unwrap();

    let seen = until(&mut watch, "the glob's error", |seen| {
        seen.iter().any(|e| e.starts_with("error "))
    })
    .await;
    let error = seen
        .iter()
        .find(|e| e.starts_with("error "))
        .cloned()
        .unwrap_or_default();
    assert!(
        error.contains("glob collections need delta") && error.contains(&uri),
        "{error}"
    );
    assert!(matches!(next(&mut single).await, WatchEvent::Changed(_)));
}
