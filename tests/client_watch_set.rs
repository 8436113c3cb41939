//! Watch sets: many resources of one type through one queue, against the
//! testbed over loopback gRPC.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;
use xdsfed::core::version::Version;

use common::resources::endpoints;
use common::{PATIENCE, eventually, next, one_server};
use xdsfed::client::WatchSet;
use xdsfed::client::client::{WatchError, XdsClient};
use xdsfed::client::watch::{SetEvent, WatchEvent};
use xdsfed::core::types::EndpointType;
use xdsfed::testbed::Server;

use xdsfed::core::types::LoadAssignment;

fn eds_name(id: &str) -> String {
    format!("xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

fn serve(server: &Server, id: &str, port: u32) {
    let name = eds_name(id);
    server
        .set_message(&name, &endpoints(&name, &[("10.0.0.1", port)]))
        .unwrap();
}

fn port_of(assignment: &LoadAssignment) -> u32 {
    match assignment.endpoints().next() {
        Some(endpoint) => u32::from(endpoint.port),
        None => panic!("no endpoint in {assignment:?}"),
    }
}

async fn next_of(set: &mut WatchSet<EndpointType>) -> SetEvent<LoadAssignment> {
    match tokio::time::timeout(PATIENCE, set.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the set ended"),
        Err(_) => panic!("no event within {PATIENCE:?}"),
    }
}

/// The port each member was last reported with, after `count` events.
async fn ports(set: &mut WatchSet<EndpointType>, count: usize) -> BTreeMap<String, u32> {
    let mut seen = BTreeMap::new();
    for _ in 0..count {
        let change = next_of(set).await;
        let WatchEvent::Changed(assignment) = &change.event else {
            panic!("{}: not a change", change.name);
        };
        assert_eq!(
            change.state.version.as_ref().map(Version::is_empty),
            Some(false)
        );
        seen.insert(change.name.to_string(), port_of(assignment));
    }
    seen
}

fn cached(client: &XdsClient, name: &str) -> bool {
    client.status().resources.iter().any(|r| r.name == name)
}

/// Members are subscribed as single watches are; each change arrives once,
/// under the name it was inserted with, and a removed member is
/// unsubscribed and reports nothing more.
#[tokio::test]
async fn members_report_their_changes_and_a_removed_one_is_unsubscribed() {
    let (testbed, client) = one_server().await;
    let server = &testbed.servers()[0];
    for (id, port) in [("a", 1), ("b", 2), ("c", 3)] {
        serve(server, id, port);
    }
    let mut set = client.watch_set::<EndpointType>();
    for id in ["a", "b", "c"] {
        set.insert(&eds_name(id)).unwrap();
    }
    assert_eq!(set.len(), 3);
    let first = ports(&mut set, 3).await;
    let want: BTreeMap<String, u32> = [("a", 1), ("b", 2), ("c", 3)]
        .into_iter()
        .map(|(id, p)| (eds_name(id), p))
        .collect();
    assert_eq!(first, want);

    assert!(set.remove(&eds_name("b")));
    assert!(!set.contains(&eds_name("b")));
    eventually("b is unsubscribed", || !cached(&client, &eds_name("b"))).await;
    serve(server, "b", 20);
    serve(server, "c", 30);
    let second = ports(&mut set, 1).await;
    assert_eq!(second, BTreeMap::from([(eds_name("c"), 30)]));
    let quiet = tokio::time::timeout(Duration::from_millis(300), set.next()).await;
    assert!(quiet.is_err(), "a removed member reported a change");
}

/// Latest-value delivery: a member that changed twice before the set was
/// read is reported once, with its newest copy.
#[tokio::test]
async fn a_member_changed_twice_before_it_is_read_is_reported_once() {
    let (testbed, client) = one_server().await;
    let server = &testbed.servers()[0];
    serve(server, "a", 1);
    let mut set = client.watch_set::<EndpointType>();
    set.insert(&eds_name("a")).unwrap();
    assert_eq!(ports(&mut set, 1).await[&eds_name("a")], 1);

    // A plain watch of the same resource tells when both updates landed.
    let mut plain = client.watch::<EndpointType>(&eds_name("a")).unwrap();
    let _ = next(&mut plain).await;
    serve(server, "a", 2);
    serve(server, "a", 3);
    eventually("the plain watch sees the last update", || {
        plain.current().is_some_and(|c| port_of(&c) == 3)
    })
    .await;
    assert_eq!(ports(&mut set, 1).await[&eds_name("a")], 3);
    let quiet = tokio::time::timeout(Duration::from_millis(300), set.next()).await;
    assert!(quiet.is_err(), "a skipped state was reported");
}

/// A resource the client already holds is reported as soon as it joins a
/// set; a name the client cannot watch is refused and leaves the set as it
/// was; re-inserting a member keeps it subscribed throughout.
#[tokio::test]
async fn a_cached_member_reports_at_once_and_a_refused_name_changes_nothing() {
    let (testbed, client) = one_server().await;
    let server = &testbed.servers()[0];
    serve(server, "a", 7);
    let mut plain = client.watch::<EndpointType>(&eds_name("a")).unwrap();
    let _ = next(&mut plain).await;

    let mut set = client.watch_set::<EndpointType>();
    set.insert(&eds_name("a")).unwrap();
    assert_eq!(ports(&mut set, 1).await[&eds_name("a")], 7);

    let unknown =
        "xdstp://nowhere.example/envoy.config.endpoint.v3.ClusterLoadAssignment/x".to_owned();
    assert!(matches!(
        set.insert(&unknown),
        Err(WatchError::Authority(_))
    ));
    assert_eq!(set.len(), 1);

    drop(plain);
    set.insert(&eds_name("a")).unwrap();
    assert!(cached(&client, &eds_name("a")));
    // The re-inserted member reports its state, as a new one would.
    assert_eq!(ports(&mut set, 1).await[&eds_name("a")], 7);
    serve(server, "a", 8);
    assert_eq!(ports(&mut set, 1).await[&eds_name("a")], 8);

    drop(set);
    eventually("a is unsubscribed with the set", || {
        !cached(&client, &eds_name("a"))
    })
    .await;
}
