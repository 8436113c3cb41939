//! Each fault, checked by its effect on the wire.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{CDS, Delta, LDS, Sotw, WAIT, cluster, delta_names, listener};
use envoy_types::pb::{envoy::config::cluster::v3::Cluster, xds::core::v3::ResourceLocator};
use prost::Message;
use tonic::Code;
use xdsfed_testbed::{
    Faults, Injected, ServerSpec, Testbed,
    faults::{MALFORMED_BYTES, RESOURCE_LOCATOR_TYPE_URL},
};

const C1: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";
const C2: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c2";

async fn testbed() -> Testbed {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .expect("the testbed starts");
    let server = &tb.servers()[0];
    server.set_resource(C1, cluster(C1, 1)).unwrap();
    server.set_resource(C2, cluster(C2, 1)).unwrap();
    tb
}

#[tokio::test]
async fn refuse_connections_closes_new_connections() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| f.refuse_connections = true);
    let refused = tonic::transport::Endpoint::from_shared(server.uri())
        .unwrap()
        .connect_timeout(WAIT)
        .connect()
        .await;
    let outcome = match refused {
        Err(e) => Err(e.to_string()),
        Ok(channel) => {
            let mut client = envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient::new(channel);
            client
                .delta_aggregated_resources(tokio_stream::empty())
                .await
                .map(drop)
                .map_err(|s| s.to_string())
        }
    };
    assert!(outcome.is_err(), "a refused connection carries no stream");

    server.update_faults(|f| f.refuse_connections = false);
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    assert_eq!(delta_names(&client.recv().await), [C1], "accepted again");
}

#[tokio::test]
async fn close_immediately_ends_every_new_stream_unavailable() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| f.close_immediately = true);
    let status = Delta::try_open(server, "n1").await.err().expect("refused");
    assert_eq!(status.code(), Code::Unavailable);
    let recorded = server.recording().streams();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].response_count(), 0);
    assert!(recorded[0].closed.is_some());
}

#[tokio::test]
async fn close_after_responses_ends_stream_after_kth_response() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| f.close_after_responses = Some(2));
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    client.recv().await;
    client.subscribe(CDS, &[C2]).await;
    client.recv().await;
    let status = client.recv_end().await.expect("a status");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(server.recording().streams()[0].response_count(), 2);
}

#[tokio::test]
async fn response_delay_holds_responses_back() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let delay = Duration::from_millis(150);
    server.update_faults(|f| f.response_delay = Some(delay));
    let mut client = Delta::open(server, "n1").await;
    let asked = std::time::Instant::now();
    client.subscribe(CDS, &[C1]).await;
    client.recv().await;
    // A lower bound only: the server sleeps the delay before it sends.
    assert!(asked.elapsed() >= delay);
}

#[tokio::test]
async fn silent_name_is_never_sent_and_silent_type_never_answered() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| {
        f.silent_names.insert(C2.into());
        f.silent_types.insert(LDS.into());
    });
    server.set_resource("l1", listener("l1")).unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1, C2]).await;
    let response = client.recv().await;
    assert_eq!(delta_names(&response), [C1]);
    assert!(
        response.removed_resources.is_empty(),
        "silence is not removal"
    );
    client.subscribe(LDS, &["l1"]).await;
    client.fence("silent-type").await;

    // Lifting the silence sends what was held back.
    server.set_faults(Faults::default());
    let mut released = vec![];
    released.extend(delta_names(&client.recv().await));
    released.extend(delta_names(&client.recv().await));
    released.sort();
    assert_eq!(released, ["l1", C2]);
}

#[tokio::test]
async fn malformed_name_is_sent_with_undecodable_bytes() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| {
        f.malformed_names.insert(C1.into());
    });
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    let response = client.recv().await;
    let any = response.resources[0].resource.as_ref().expect("a resource");
    assert_eq!(any.type_url, CDS);
    assert_eq!(any.value, MALFORMED_BYTES);
    assert!(Cluster::decode(any.value.as_slice()).is_err());
}

#[tokio::test]
async fn duplicate_name_appears_twice_in_one_response() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| {
        f.duplicate_names.insert(C1.into());
    });
    let mut client = Sotw::open(server, "n1").await;
    client.request(CDS, &[C1], None).await;
    assert_eq!(common::sotw_names(&client.recv().await), [C1, C1]);
}

#[tokio::test]
async fn injected_foreign_authority_resource_rides_along() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let foreign = "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/stolen";
    assert!(
        server.set_resource(foreign, cluster(foreign, 1)).is_err(),
        "not served here"
    );
    server.update_faults(|f| {
        f.inject.push(Injected {
            name: foreign.into(),
            resource: cluster(foreign, 1),
        })
    });
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    assert_eq!(delta_names(&client.recv().await), [C1, foreign]);
}

#[tokio::test]
async fn redirect_answers_name_with_resource_locator() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let asked = "xdstp://cloud.example/envoy.config.listener.v3.Listener/my-listeners/bar";
    let target = "xdstp://cloud.example/envoy.config.listener.v3.Listener/baz";
    server.update_faults(|f| {
        f.redirects.insert(asked.into(), target.into());
    });
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(LDS, &[asked]).await;
    let response = client.recv().await;
    assert_eq!(delta_names(&response), [asked]);
    let any = response.resources[0].resource.as_ref().expect("a resource");
    assert_eq!(any.type_url, RESOURCE_LOCATOR_TYPE_URL);
    let locator = ResourceLocator::decode(any.value.as_slice()).unwrap();
    assert_eq!(
        (
            locator.authority.as_str(),
            locator.resource_type.as_str(),
            locator.id.as_str()
        ),
        ("cloud.example", "envoy.config.listener.v3.Listener", "baz")
    );
}

#[tokio::test]
async fn delta_unimplemented_refuses_delta_but_serves_sotw() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server.update_faults(|f| f.delta_unimplemented = true);
    let status = Delta::try_open(server, "n1").await.err().expect("refused");
    assert_eq!(status.code(), Code::Unimplemented);
    let mut client = Sotw::open(server, "n1").await;
    client.request(CDS, &[C1], None).await;
    assert_eq!(common::sotw_names(&client.recv().await), [C1]);
}

#[tokio::test]
async fn restart_keeping_state_serves_same_resources_on_same_port() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    let addr = server.addr();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    client.recv().await;

    server.restart(true, Duration::ZERO).await.unwrap();
    let status = client
        .recv_end()
        .await
        .expect("the old stream ends with a status");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(server.addr(), addr);

    let mut again = Delta::open(server, "n1").await;
    again.subscribe(CDS, &[C1]).await;
    assert_eq!(delta_names(&again.recv().await), [C1]);
    assert_eq!(
        server.recording().stream_count(),
        2,
        "the recording survives"
    );
}

#[tokio::test]
async fn restart_dropping_state_forgets_resources() {
    let tb = testbed().await;
    let server = &tb.servers()[0];
    server
        .restart(false, Duration::from_millis(10))
        .await
        .unwrap();
    let mut client = Delta::open(server, "n1").await;
    client.subscribe(CDS, &[C1]).await;
    assert_eq!(client.recv().await.removed_resources, [C1]);
}
