//! The incremental variant (`DeltaAggregatedResources`), server side, driven
//! by a raw tonic client. Section names refer to `xds-protocol-v3.txt` and TP1.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{CDS, Delta, LDS, cluster, delta_names, listener};
use xdsfed_testbed::{ServerSpec, Testbed, version};

const C1: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";

async fn testbed() -> Testbed {
    Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .expect("the testbed starts")
}

/// §Versions: the version is the SHA-256 of the resource's encoding.
#[tokio::test]
async fn delta_sends_subscribed_resource_with_content_hash_version() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let resource = cluster(C1, 1);
    server.set_resource(C1, resource.clone()).unwrap();

    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    let response = client.recv().await;
    assert_eq!(response.type_url, CDS);
    assert_eq!(delta_names(&response), [C1]);
    assert_eq!(
        response.resources[0].version,
        version::of_bytes(&resource.value)
    );
    assert_eq!(response.resources[0].resource.as_ref(), Some(&resource));
    assert!(!response.nonce.is_empty());
}

/// §Knowing When a Requested Resource Does Not Exist (incremental).
#[tokio::test]
async fn delta_removes_unknown_subscribed_name_then_sends_it_when_created() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    let absent = client.recv().await;
    assert_eq!(absent.removed_resources, [C1]);
    assert!(absent.resources.is_empty());
    client.ack(&absent).await;

    server.set_resource(C1, cluster(C1, 1)).unwrap();
    let created = client.recv().await;
    assert_eq!(delta_names(&created), [C1]);
}

/// §Deleting Resources: deletion reaches the client in `removed_resources`.
#[tokio::test]
async fn delta_removes_deleted_resource_and_pushes_updates() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    let first = client.recv().await;
    client.ack(&first).await;

    server.set_resource(C1, cluster(C1, 2)).unwrap();
    let updated = client.recv().await;
    assert_eq!(delta_names(&updated), [C1]);
    assert_ne!(updated.resources[0].version, first.resources[0].version);
    assert_ne!(
        updated.nonce, first.nonce,
        "every response has its own nonce"
    );
    client.ack(&updated).await;

    server.delete_resource(CDS, C1).unwrap();
    let removed = client.recv().await;
    assert_eq!(removed.removed_resources, [C1]);
}

/// §Grouping Resources into Responses: only what changed is sent.
#[tokio::test]
async fn delta_sends_only_changed_resource() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let c2 = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c2";
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    server.set_resource(c2, cluster(c2, 1)).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1, c2]).await;
    let first = client.recv().await;
    assert_eq!(delta_names(&first), [C1, c2]);
    client.ack(&first).await;
    server.set_resource(c2, cluster(c2, 7)).unwrap();
    assert_eq!(delta_names(&client.recv().await), [c2]);
    // Setting identical bytes again is no change at all.
    server.set_resource(c2, cluster(c2, 7)).unwrap();
    client.fence("after-identical").await;
}

/// TP1 §Context parameters: URNs match modulo parameter order.
#[tokio::test]
async fn delta_matches_xdstp_names_canonically() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let stored = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1?a=1&b=2";
    let asked = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1?b=2&a=1";
    server.set_resource(stored, cluster(stored, 1)).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[asked]).await;
    let response = client.recv().await;
    assert_eq!(response.resources.len(), 1);
    assert!(response.removed_resources.is_empty());
}

/// Old-style names are opaque and served as they are.
#[tokio::test]
async fn delta_serves_old_style_names() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server
        .set_resource("legacy-cluster", cluster("legacy-cluster", 1))
        .unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &["legacy-cluster"]).await;
    assert_eq!(delta_names(&client.recv().await), ["legacy-cluster"]);
}

/// §How the client specifies what resources to return, the incremental
/// example: legacy wildcard, then A, then unsubscribe `*`, then unsubscribe A.
#[tokio::test]
async fn delta_wildcard_transitions_follow_spec_example() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let (a, b) = ("listener-a", "listener-b");
    server.set_resource(a, listener(a)).unwrap();
    server.set_resource(b, listener(b)).unwrap();
    let mut client = Delta::open(server, "n1").await;

    // Subscribe unset: a subscription to `*`.
    client.subscribe(LDS, &[]).await;
    let all = client.recv().await;
    assert_eq!(delta_names(&all), [a, b]);
    client.ack(&all).await;

    // Subscribe A: `*` continues, A added (and resent: newly named).
    client.subscribe(LDS, &[a]).await;
    let named = client.recv().await;
    assert_eq!(delta_names(&named), [a]);
    client.ack(&named).await;
    server.set_resource(b, Listener2::with(b)).unwrap();
    assert_eq!(
        delta_names(&client.recv().await),
        [b],
        "B still comes through `*`"
    );

    // Unsubscribe `*`: only A remains, so B's changes no longer come.
    client.unsubscribe(LDS, &["*"]).await;
    client.fence("after-unsubscribe-star").await;
    server
        .set_resource(b, listener("listener-b-changed-again"))
        .unwrap();
    server.set_resource(a, Listener2::with(a)).unwrap();
    assert_eq!(delta_names(&client.recv().await), [a]);

    // Unsubscribe A: nothing remains, and an empty request is not a wildcard.
    client.unsubscribe(LDS, &[a]).await;
    client.subscribe(LDS, &[]).await;
    client.fence("after-empty").await;
    server
        .set_resource(a, listener("listener-a-changed-again"))
        .unwrap();
    client.fence("after-change").await;
}

/// §Unsubscribing from Resources: under a wildcard, unsubscribing a name the
/// wildcard includes is answered with the resource itself.
#[tokio::test]
async fn delta_unsubscribe_under_wildcard_resends_included_resource() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource("l1", listener("l1")).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(LDS, &["*", "l1", "ghost"]).await;
    let first = client.recv().await;
    assert_eq!(delta_names(&first), ["l1"]);
    assert_eq!(first.removed_resources, ["ghost"]);
    client.ack(&first).await;

    client.unsubscribe(LDS, &["l1"]).await;
    let answer = client.recv().await;
    assert_eq!(delta_names(&answer), ["l1"], "l1 is in the wildcard");
    client.ack(&answer).await;

    client.unsubscribe(LDS, &["ghost"]).await;
    let answer = client.recv().await;
    assert_eq!(
        answer.removed_resources,
        ["ghost"],
        "ghost is not in the wildcard"
    );
}

/// TP1 §Glob: a glob matches resources directly under its path with the
/// same context parameters.
#[tokio::test]
async fn delta_glob_matches_direct_children_with_same_params() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let base = "xdstp://cloud.example/envoy.config.listener.v3.Listener";
    let foo = format!("{base}/my-listeners/foo?node_type=ingress");
    let bar = format!("{base}/my-listeners/bar?node_type=ingress");
    let other_params = format!("{base}/my-listeners/baz");
    let nested = format!("{base}/my-listeners/deep/qux?node_type=ingress");
    for name in [&foo, &bar, &other_params, &nested] {
        server.set_resource(name, listener(name)).unwrap();
    }
    let mut client = Delta::open(server, "n1").await;
    let glob = format!("{base}/my-listeners/*?node_type=ingress");
    client.subscribe(LDS, &[&glob]).await;
    let response = client.recv().await;
    assert_eq!(delta_names(&response), [bar.clone(), foo.clone()]);
    client.ack(&response).await;

    // A resource joining the collection later is sent on its own.
    let late = format!("{base}/my-listeners/late?node_type=ingress");
    server.set_resource(&late, listener(&late)).unwrap();
    assert_eq!(delta_names(&client.recv().await), [late]);
}

/// TP1 §Glob: an empty glob collection is reported in `removed_resources`.
#[tokio::test]
async fn delta_empty_glob_is_removed_by_its_own_name() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let glob = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/empty/*";
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[glob]).await;
    let response = client.recv().await;
    assert_eq!(response.removed_resources, [glob]);

    // When its last member goes, the collection is empty again.
    let member = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/empty/one";
    server.set_resource(member, cluster(member, 1)).unwrap();
    assert_eq!(delta_names(&client.recv().await), [member]);
    server.delete_resource(CDS, member).unwrap();
    let mut removed = client.recv().await.removed_resources;
    removed.sort();
    assert_eq!(removed, [glob, member]);
}

/// §Incremental reconnect: `initial_resource_versions` spare the client what
/// it has; the recording shows the second stream's first request carried them.
#[tokio::test]
async fn delta_reconnect_with_initial_versions_skips_unchanged_resources() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let c2 = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c2";
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    server.set_resource(c2, cluster(c2, 1)).unwrap();
    let mut first = Delta::open(server, "n1").await;
    first.subscribe(CDS, &[C1, c2]).await;
    let response = first.recv().await;
    first.ack(&response).await;
    drop(first);

    server.set_resource(c2, cluster(c2, 2)).unwrap();
    let mut second = Delta::open(server, "n1").await;
    let held = response
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    second
        .send(
            envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
                type_url: CDS.into(),
                resource_names_subscribe: common::strings(&[C1, c2]),
                initial_resource_versions: held,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        delta_names(&second.recv().await),
        [c2],
        "only the changed one"
    );

    let streams = server.recording().streams();
    assert_eq!(streams.len(), 2);
    let carried = &streams[1]
        .delta_requests()
        .next()
        .expect("the second stream has a request")
        .initial_resource_versions;
    assert!(carried.contains_key(C1) && carried.contains_key(c2));
}

/// A request without a type URL is refused with the field named.
#[tokio::test]
async fn delta_request_without_type_url_ends_stream_invalid_argument() {
    let tb = testbed().await;
    let mut client = Delta::open(&tb.servers()[0], "n1").await;
    client.subscribe("", &["x"]).await;
    let status = client.recv_end().await.expect("a status");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("type_url"), "{status:?}");
}

/// Listener builders with distinguishable content.
struct Listener2;

impl Listener2 {
    fn with(name: &str) -> envoy_types::pb::google::protobuf::Any {
        use envoy_types::pb::envoy::config::listener::v3::Listener;
        use prost::{Message, Name};
        envoy_types::pb::google::protobuf::Any {
            type_url: Listener::type_url(),
            value: Listener {
                name: name.into(),
                stat_prefix: "changed".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        }
    }
}

/// §Subscribing to Resources: a name subscribed again is resent even though
/// the client seems to have it.
#[tokio::test]
async fn delta_resubscribed_name_is_resent_unchanged() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    let first = client.recv().await;
    client.ack(&first).await;
    client.subscribe(CDS, &[C1]).await;
    let again = client.recv().await;
    assert_eq!(again.resources, first.resources);
}

/// The store holds `Any`s, so any resource type is served, e.g. the
/// project's own policy type, by its type URL.
#[tokio::test]
async fn delta_serves_any_resource_type_by_type_url() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let policy_type = "type.googleapis.com/xdsfed.policy.v1.Policy";
    let name = "xdstp://cloud.example/xdsfed.policy.v1.Policy/rate-limits";
    // Field 1 (name) = "rate-limits", as the policy message encodes it.
    let mut value = vec![0x0a, 11];
    value.extend_from_slice(b"rate-limits");
    let policy = envoy_types::pb::google::protobuf::Any {
        type_url: policy_type.into(),
        value,
    };
    server.set_resource(name, policy.clone()).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(policy_type, &[name]).await;
    let response = client.recv().await;
    assert_eq!(response.resources[0].resource.as_ref(), Some(&policy));
}
