//! The state-of-the-world variant (`StreamAggregatedResources`), server side.
//! Section names refer to `xds-protocol-v3.txt`.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{CDS, EDS, LDS, Sotw, cluster, endpoints, listener, sotw_names};
use xdsfed_testbed::{ServerSpec, Testbed, version};

async fn testbed() -> Testbed {
    Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .expect("the testbed starts")
}

/// §Grouping Resources into Responses: LDS/CDS carry the complete state.
#[tokio::test]
async fn sotw_cds_wildcard_resends_full_state_on_any_change() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    server.set_resource("c2", cluster("c2", 1)).unwrap();
    let mut client = Sotw::open(server, "n1").await;
    client.request(CDS, &[], None).await;
    let first = client.recv().await;
    assert_eq!(sotw_names(&first), ["c1", "c2"]);
    client.request(CDS, &[], Some(&first)).await;

    server.set_resource("c2", cluster("c2", 9)).unwrap();
    let second = client.recv().await;
    assert_eq!(sotw_names(&second), ["c1", "c2"], "unchanged c1 is resent");
    assert_ne!(second.nonce, first.nonce);
    client.request(CDS, &[], Some(&second)).await;

    server.delete_resource(CDS, "c1").unwrap();
    assert_eq!(
        sotw_names(&client.recv().await),
        ["c2"],
        "absence means deletion"
    );
}

/// §Grouping: RDS/EDS responses carry only the requested names.
#[tokio::test]
async fn sotw_eds_sends_only_requested_names() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    for name in ["e1", "e2", "e3"] {
        server.set_resource(name, endpoints(name)).unwrap();
    }
    let mut client = Sotw::open(server, "n1").await;
    client.request(EDS, &["e1", "e3"], None).await;
    assert_eq!(sotw_names(&client.recv().await), ["e1", "e3"]);
}

/// The response version is the hash over the sorted (name, version) pairs.
#[tokio::test]
async fn sotw_version_is_hash_of_name_version_pairs() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let a = server.set_resource("e1", endpoints("e1")).unwrap();
    let b = server.set_resource("e2", endpoints("e2")).unwrap();
    let mut client = Sotw::open(server, "n1").await;
    client.request(EDS, &["e2", "e1"], None).await;
    let response = client.recv().await;
    let expected = version::of_pairs([("e1", a.version.as_str()), ("e2", b.version.as_str())]);
    assert_eq!(response.version_info, expected);
}

/// §ACK: an ACK is not answered; §NACK: the rejected state is not resent.
#[tokio::test]
async fn sotw_ack_and_nack_are_not_answered() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    let mut client = Sotw::open(server, "n1").await;
    client.request(CDS, &[], None).await;
    let first = client.recv().await;
    client.request(CDS, &[], Some(&first)).await;
    client.fence().await;
    server.set_resource("c1", cluster("c1", 2)).unwrap();
    let second = client.recv().await;
    client.nack(&second, &[], "bad cluster").await;
    client.fence().await;
}

/// §How the client specifies what resources to return, the SotW example.
#[tokio::test]
async fn sotw_wildcard_transitions_follow_spec_example() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource("A", listener("A")).unwrap();
    server.set_resource("B", listener("B")).unwrap();
    let mut client = Sotw::open(server, "n1").await;

    client.request(LDS, &[], None).await;
    let r1 = client.recv().await;
    assert_eq!(sotw_names(&r1), ["A", "B"], "unset names: wildcard");

    client.request(LDS, &["*", "A"], Some(&r1)).await;
    let r2 = client.recv().await;
    assert_eq!(
        sotw_names(&r2),
        ["A", "B"],
        "`*` continues, A is newly named and resent"
    );

    client.request(LDS, &["A"], Some(&r2)).await;
    let r3 = client.recv().await;
    assert_eq!(sotw_names(&r3), ["A"], "unsubscribed from `*`");

    client.request(LDS, &[], Some(&r3)).await;
    client.fence().await;
    server.set_resource("A", listener("A-changed")).unwrap();
    server.set_resource("B", listener("B-changed")).unwrap();
    client.fence().await;
}

/// §Knowing When a Requested Resource Does Not Exist: the server remembers
/// the name and sends the resource when it appears.
#[tokio::test]
async fn sotw_sends_requested_resource_when_it_appears() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let mut client = Sotw::open(server, "n1").await;
    client.request(EDS, &["later"], None).await;
    let empty = client.recv().await;
    assert!(empty.resources.is_empty());
    client.request(EDS, &["later"], Some(&empty)).await;
    server.set_resource("later", endpoints("later")).unwrap();
    assert_eq!(sotw_names(&client.recv().await), ["later"]);
}

/// §Resource updates: a request echoing a stale nonce is not answered.
#[tokio::test]
async fn sotw_stale_nonce_request_is_ignored() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource("e1", endpoints("e1")).unwrap();
    server.set_resource("e2", endpoints("e2")).unwrap();
    let mut client = Sotw::open(server, "n1").await;
    client.request(EDS, &["e1"], None).await;
    let first = client.recv().await;
    client.request(EDS, &["e1"], Some(&first)).await;
    server.set_resource("e1", endpoints("e1-v2")).unwrap();
    let second = client.recv().await;
    // A request that still answers `first` is stale: even a new name is not served.
    client.request(EDS, &["e1", "e2"], Some(&first)).await;
    client.fence().await;
    client.request(EDS, &["e1", "e2"], Some(&second)).await;
    assert_eq!(sotw_names(&client.recv().await), ["e1-v2", "e2"]);
}
