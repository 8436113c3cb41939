//! Redirects (xDS TP1 "Server redirects") of glob collection members,
//! against the testbed over loopback gRPC: followed across authorities and
//! delivered under the member's name; loops, chains longer than the hop
//! limit and targets outside the bootstrap are errors naming the chain.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use xdsfed::core::types::ClusterView;

use common::resources::cluster;
use common::{PATIENCE, bootstrap_json, client, fast_transport};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{CollectionEvent, CollectionWatch};
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const ONPREM: &str = "onprem.example";

fn name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// cloud (authority CLOUD) and onprem (authority ONPREM), both known to the
/// bootstrap; `GLOB` is watched on cloud.
async fn testbed() -> (Testbed, String) {
    let testbed = Testbed::start([
        ServerSpec::new("cloud", [CLOUD]),
        ServerSpec::new("onprem", [ONPREM]),
    ])
    .await
    .unwrap();
    let (c, o) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
    let bootstrap = bootstrap_json(&c, &[(CLOUD, &[c.as_str()]), (ONPREM, &[o.as_str()])], "");
    (testbed, bootstrap)
}

fn glob() -> String {
    name(CLOUD, "pool/*")
}

/// Answers `from` with a redirect to `to`, on `server`.
fn redirect(server: &Server, from: &str, to: &str) {
    server.update_faults(|f| {
        f.redirects.insert(from.to_owned(), to.to_owned());
    });
}

/// The latest event per member, once every one of `members` has had one
/// (events of other members are kept, so their order does not matter).
async fn latest(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut HashMap<String, CollectionEvent<ClusterView>>,
    members: &[&str],
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !members.iter().all(|m| seen.contains_key(*m)) {
        let event = match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(event)) => event,
            Ok(None) => panic!("collection watch ended waiting for {members:?}"),
            Err(_) => panic!("no event for all of {members:?} within {PATIENCE:?}: {seen:?}"),
        };
        let about = match &event {
            CollectionEvent::Upsert { name, .. }
            | CollectionEvent::Removed { name }
            | CollectionEvent::Error { name, .. } => name.to_string(),
            CollectionEvent::Empty | CollectionEvent::Listed { .. } => String::new(),
        };
        seen.insert(about, event);
    }
}

async fn event_of(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut HashMap<String, CollectionEvent<ClusterView>>,
    member: &str,
) -> CollectionEvent<ClusterView> {
    latest(watch, seen, &[member]).await;
    seen.remove(member).expect("waited for it")
}

async fn upsert_of(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut HashMap<String, CollectionEvent<ClusterView>>,
    member: &str,
) -> String {
    match event_of(watch, seen, member).await {
        CollectionEvent::Upsert { resource, .. } => service_of(&resource).to_owned(),
        other => panic!("expected {member} to be delivered, got {other:?}"),
    }
}

async fn error_of(
    watch: &mut CollectionWatch<ClusterType>,
    seen: &mut HashMap<String, CollectionEvent<ClusterView>>,
    member: &str,
) -> String {
    match event_of(watch, seen, member).await {
        CollectionEvent::Error { error, .. } => error.to_string(),
        other => panic!("expected an error for {member}, got {other:?}"),
    }
}

/// TP1: "Glob collections may have individual resources redirected". The
/// target, on another authority of the bootstrap, is fetched from that
/// authority's server and delivered under the member's name; the status
/// dump says the copy was redirected and what it was fetched as.
#[tokio::test]
async fn redirected_glob_member_is_followed_across_authorities() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (member, plain) = (name(CLOUD, "pool/one"), name(CLOUD, "pool/two"));
    let target = name(ONPREM, "one-onprem");
    cloud
        .set_message(&plain, &cluster(&plain, "plain"))
        .unwrap();
    onprem
        .set_message(&target, &cluster(&target, "onprem"))
        .unwrap();
    redirect(cloud, &member, &target);
    let client = client(&bootstrap);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    assert_eq!(upsert_of(&mut watch, &mut seen, &member).await, "onprem");
    let status = client.status();
    let entry = status
        .resources
        .iter()
        .find(|r| r.name == member)
        .expect("the member is in the status dump");
    let source = entry.source.as_ref().expect("a source");
    assert!(source.redirected, "{source:?}");
    assert_eq!(source.fetched_as.as_deref(), Some(target.as_str()));
    assert_eq!(source.authority.as_deref(), Some(ONPREM));
    assert!(source.server.starts_with(&onprem.uri()), "{source:?}");

    // The target changes: the member follows.
    onprem
        .set_message(&target, &cluster(&target, "onprem-v2"))
        .unwrap();
    assert_eq!(upsert_of(&mut watch, &mut seen, &member).await, "onprem-v2");

    // The member stops redirecting: its own copy replaces the target's.
    cloud.update_faults(|f| {
        f.redirects.clear();
    });
    cloud
        .set_message(&member, &cluster(&member, "own"))
        .unwrap();
    assert_eq!(upsert_of(&mut watch, &mut seen, &member).await, "own");
}

/// TP1 "Aliasing": a server may answer a singleton with a
/// `ResourceLocator`, delegating it to another authority. The cluster is
/// followed there and delivered under its own name, marked `redirected`,
/// and its own copy replaces the target's once the redirect stops.
#[tokio::test]
async fn redirect_of_a_singleton_cluster_is_followed_to_another_authority() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (alias, target) = (name(CLOUD, "payments"), name(ONPREM, "payments"));
    onprem
        .set_message(&target, &cluster(&target, "onprem"))
        .unwrap();
    redirect(cloud, &alias, &target);
    let client = client(&bootstrap);
    let mut watch = client.watch::<ClusterType>(&alias).unwrap();
    assert_eq!(service_of(changed(&mut watch).await.as_ref()), "onprem");
    let state = watch.state();
    let source = state.source.as_ref().expect("a source");
    assert!(source.redirected, "{source:?}");
    assert_eq!(&*source.fetched_as, target.as_str());
    assert_eq!(source.authority.as_deref(), Some(ONPREM));
    assert!(source.server.starts_with(&onprem.uri()), "{source:?}");

    onprem
        .set_message(&target, &cluster(&target, "onprem-v2"))
        .unwrap();
    assert_eq!(service_of(changed(&mut watch).await.as_ref()), "onprem-v2");

    cloud.update_faults(|f| {
        f.redirects.clear();
    });
    cloud.set_message(&alias, &cluster(&alias, "own")).unwrap();
    assert_eq!(service_of(changed(&mut watch).await.as_ref()), "own");
    assert!(!watch.state().source.expect("a source").redirected);
}

/// The next new copy `watch` delivers.
async fn changed(
    watch: &mut xdsfed::client::watch::Watch<ClusterType>,
) -> std::sync::Arc<ClusterView> {
    loop {
        let event = tokio::time::timeout(PATIENCE, watch.next())
            .await
            .expect("an event in time")
            .expect("the watch is open");
        match event {
            xdsfed::client::watch::WatchEvent::Changed(c) => return c,
            xdsfed::client::watch::WatchEvent::Error(e) => panic!("unexpected error: {e}"),
            _ => {}
        }
    }
}

/// A redirect chain that comes back to a name already on it is an error
/// naming the whole chain.
#[tokio::test]
async fn redirect_loop_is_an_error_naming_the_chain() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let member = name(CLOUD, "pool/one");
    let (a, b) = (name(ONPREM, "a"), name(ONPREM, "b"));
    redirect(cloud, &member, &a);
    redirect(onprem, &a, &b);
    redirect(onprem, &b, &a);
    let client = client(&bootstrap);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    let error = error_of(&mut watch, &mut seen, &member).await;
    assert!(error.contains("loop"), "{error}");
    assert!(
        error.contains(&format!("{member} -> {a} -> {b} -> {a}")),
        "{error}"
    );
    assert!(error.contains(&onprem.uri()), "{error}");
}

/// A glob member redirected to a glob collection, its own glob above all,
/// names no resource: an error for that member, naming the target.
#[tokio::test]
async fn glob_member_redirected_to_a_glob_is_an_error() {
    let (testbed, bootstrap) = testbed().await;
    let cloud = &testbed.servers()[0];
    let member = name(CLOUD, "pool/one");
    redirect(cloud, &member, &glob());
    let client = client(&bootstrap);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    let error = error_of(&mut watch, &mut seen, &member).await;
    assert!(error.contains("glob collection"), "{error}");
    assert!(error.contains(&glob()), "{error}");
}

/// A chain of hops: `from` → `prefix/1` → … → `prefix/hops-1` → `prefix/end`
/// (`hops` redirects), the end a real cluster, all on onprem but the first.
fn chain(cloud: &Server, onprem: &Server, from: &str, prefix: &str, hops: usize) {
    let hop = |i: usize| {
        if i == hops {
            name(ONPREM, &format!("{prefix}/end"))
        } else {
            name(ONPREM, &format!("{prefix}/{i}"))
        }
    };
    redirect(cloud, from, &hop(1));
    for i in 1..hops {
        redirect(onprem, &hop(i), &hop(i + 1));
    }
    let end = hop(hops);
    onprem.set_message(&end, &cluster(&end, prefix)).unwrap();
}

/// The hop limit is 8 by default: a chain of 8 redirects is followed, a
/// chain of 9 is an error naming the limit and the chain.
#[tokio::test]
async fn hop_limit_defaults_to_eight_redirects() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (eight, nine) = (name(CLOUD, "pool/eight"), name(CLOUD, "pool/nine"));
    chain(cloud, onprem, &eight, "eight", 8);
    chain(cloud, onprem, &nine, "nine", 9);
    let client = client(&bootstrap);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    assert_eq!(upsert_of(&mut watch, &mut seen, &eight).await, "eight");
    let error = error_of(&mut watch, &mut seen, &nine).await;
    assert!(error.contains("more than 8 redirects"), "{error}");
    assert!(error.contains(&name(ONPREM, "nine/end")), "{error}");
}

/// `XdsClientBuilder::max_redirects` sets the hop limit.
#[tokio::test]
async fn hop_limit_is_configurable() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let (two, three) = (name(CLOUD, "pool/two"), name(CLOUD, "pool/three"));
    chain(cloud, onprem, &two, "two", 2);
    chain(cloud, onprem, &three, "three", 3);
    let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
        .transport_options(fast_transport())
        .max_redirects(2)
        .build()
        .unwrap();
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    assert_eq!(upsert_of(&mut watch, &mut seen, &two).await, "two");
    let error = error_of(&mut watch, &mut seen, &three).await;
    assert!(error.contains("more than 2 redirects"), "{error}");
}

/// A server cannot send the client to an authority the bootstrap does not
/// know: the redirect is refused, naming the member, the server, the target
/// and its authority.
#[tokio::test]
async fn redirect_to_an_authority_not_in_the_bootstrap_is_refused() {
    let (testbed, bootstrap) = testbed().await;
    let cloud = &testbed.servers()[0];
    let member = name(CLOUD, "pool/one");
    let target = name("elsewhere.example", "one");
    redirect(cloud, &member, &target);
    let client = client(&bootstrap);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();

    let error = error_of(&mut watch, &mut seen, &member).await;
    assert!(error.contains("refused"), "{error}");
    assert!(
        error.contains(&member) && error.contains(&target) && error.contains(&cloud.uri()),
        "{error}"
    );
    assert!(error.contains("elsewhere.example"), "{error}");
}

/// A target the client already fetches (watched for itself) is not sent
/// again by its server: the redirected member starts from the copy held.
#[tokio::test]
async fn redirect_to_a_target_already_fetched_starts_from_its_copy() {
    let (testbed, bootstrap) = testbed().await;
    let (cloud, onprem) = (&testbed.servers()[0], &testbed.servers()[1]);
    let member = name(CLOUD, "pool/one");
    let target = name(ONPREM, "shared");
    onprem
        .set_message(&target, &cluster(&target, "shared"))
        .unwrap();
    let client = client(&bootstrap);
    let mut direct = client.watch::<ClusterType>(&target).unwrap();
    common::changed(&mut direct).await;

    redirect(cloud, &member, &target);
    let mut watch = client.watch_collection::<ClusterType>(&glob()).unwrap();
    let mut seen = HashMap::new();
    assert_eq!(upsert_of(&mut watch, &mut seen, &member).await, "shared");
}
