//! The recording: every request and response per stream, with timestamps.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{CDS, Delta, Sotw, WAIT, cluster};
use xdsfed_testbed::{Message, ServerSpec, Testbed, Variant};

#[tokio::test]
async fn recording_shows_exactly_one_stream_with_messages_in_order() {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    let mut client = Delta::open(server, "node-a").await;
    client.subscribe(CDS, &["c1"]).await;
    let response = client.recv().await;
    client.ack(&response).await;
    server
        .recording()
        .wait_until(WAIT, |s| s.first().is_some_and(|s| s.events.len() == 3))
        .await
        .unwrap();

    let streams = server.recording().streams();
    assert_eq!(streams.len(), 1, "the server saw exactly one stream");
    let stream = &streams[0];
    assert_eq!(stream.variant, Variant::Delta);
    assert_eq!(stream.node_id.as_deref(), Some("node-a"));
    assert!(matches!(stream.events[0].message, Message::DeltaRequest(_)));
    assert_eq!(stream.delta_responses().next(), Some(&response));
    let ack = stream
        .delta_requests()
        .nth(1)
        .expect("the ACK was recorded");
    assert_eq!(ack.response_nonce, response.nonce);
    assert!(stream.events.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(stream.closed.is_none());
}

#[tokio::test]
async fn recording_marks_closed_streams_and_counts_each_variant() {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    let mut sotw = Sotw::open(server, "n1").await;
    sotw.request(CDS, &[], None).await;
    sotw.recv().await;
    drop(sotw);
    server
        .recording()
        .wait_until(WAIT, |s| s.first().is_some_and(|s| s.closed.is_some()))
        .await
        .unwrap();
    let streams = server.recording().streams();
    assert_eq!(streams[0].variant, Variant::Sotw);
    assert_eq!(streams[0].sotw_requests().count(), 1);
    assert_eq!(streams[0].sotw_responses().count(), 1);
}
