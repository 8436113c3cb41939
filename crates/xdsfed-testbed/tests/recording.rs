//! The recording: every request and response per stream, with timestamps.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{CDS, Delta, Sotw, WAIT, cluster};
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;
use prost::Message as _;
use xdsfed_testbed::{Message, RecordingLimits, ServerSpec, Testbed, Variant};

/// One server holding `c1`, and a delta client (`node-a`) that subscribed
/// to it and received its first response.
async fn subscribed_client() -> (Testbed, Delta, DeltaDiscoveryResponse) {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    let mut client = Delta::open(server, "node-a").await;
    client.subscribe(CDS, &["c1"]).await;
    let response = client.recv().await;
    (tb, client, response)
}

/// Changes `c1` `times` times, receiving each response; the last one.
async fn update_c1(
    server: &xdsfed_testbed::Server,
    client: &mut Delta,
    times: usize,
) -> Option<DeltaDiscoveryResponse> {
    let mut last = None;
    for i in 0..times {
        server
            .set_resource("c1", cluster("c1", 2 + i as i64))
            .unwrap();
        last = Some(client.recv().await);
    }
    last
}

#[tokio::test]
async fn recording_shows_exactly_one_stream_with_messages_in_order() {
    let (tb, mut client, response) = subscribed_client().await;
    let server = &tb.servers()[0];
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
    assert!(
        stream
            .events
            .iter()
            .zip(stream.events.iter().skip(1))
            .all(|(a, b)| a.at <= b.at)
    );
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

/// Steady updates on one stream keep at most `events_per_stream` events:
/// the oldest go, and the stream counts how many went.
#[tokio::test]
async fn recording_keeps_the_newest_events_per_stream_and_counts_the_dropped() {
    const CAP: usize = 5;
    const UPDATES: usize = 20;
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    server.recording().set_limits(RecordingLimits {
        events_per_stream: CAP,
        ..RecordingLimits::default()
    });
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    let mut client = Delta::open(server, "node-a").await;
    client.subscribe(CDS, &["c1"]).await;
    client.recv().await;
    let last = update_c1(server, &mut client, UPDATES).await;
    // One request, the first response and one response per update.
    let total = 2 + UPDATES;
    server
        .recording()
        .wait_until(WAIT, |s| {
            s.first()
                .is_some_and(|s| s.events.len() as u64 + s.dropped_events == total as u64)
        })
        .await
        .unwrap();
    let stream = &server.recording().streams()[0];
    assert_eq!(stream.events.len(), CAP, "the recording stays at the cap");
    assert_eq!(stream.dropped_events, (total - CAP) as u64);
    assert_eq!(
        stream.delta_responses().last(),
        last.as_ref(),
        "the newest events are the ones kept"
    );
}

/// Steady updates keep at most `bytes_per_stream` bytes of messages: the
/// newest that fit. A message larger than the limit on its own is dropped
/// at once; every drop is counted.
#[tokio::test]
async fn recording_keeps_the_newest_bytes_per_stream_and_counts_the_dropped() {
    const UPDATES: usize = 12;
    let (tb, mut client, first) = subscribed_client().await;
    let server = &tb.servers()[0];
    // Room for about three responses like the first.
    let limit = first.encoded_len() * 3 + first.encoded_len() / 2;
    server.recording().set_limits(RecordingLimits {
        bytes_per_stream: limit,
        ..RecordingLimits::default()
    });
    let last = update_c1(server, &mut client, UPDATES).await;
    let total = 2 + UPDATES as u64;
    let recording = server.recording();
    recording
        .wait_until(WAIT, |s| {
            s.first()
                .is_some_and(|s| s.events.len() as u64 + s.dropped_events == total)
        })
        .await
        .unwrap();
    let stream = &recording.streams()[0];
    assert!(stream.bytes <= limit, "{} > {limit}", stream.bytes);
    assert_eq!(
        stream.bytes,
        stream.events.iter().map(|e| e.size).sum::<usize>()
    );
    assert!(
        (3..=4).contains(&stream.events.len()),
        "{}",
        stream.events.len()
    );
    assert_eq!(stream.delta_responses().last(), last.as_ref());

    // A lower limit drops what no longer fits at once; one message above
    // the limit is not kept, and is counted.
    let (kept, before) = (stream.events.len() as u64, stream.dropped_events);
    recording.set_limits(RecordingLimits {
        bytes_per_stream: 1,
        ..RecordingLimits::default()
    });
    server.set_resource("c1", cluster("c1", 100)).unwrap();
    client.recv().await;
    recording
        .wait_until(WAIT, |s| {
            s.first()
                .is_some_and(|s| s.dropped_events == before + kept + 1)
        })
        .await
        .unwrap();
    let stream = &recording.streams()[0];
    assert!(stream.events.is_empty());
    assert_eq!(stream.bytes, 0);
}

/// `RecordingLimits::streams_only()`: streams are listed, their messages
/// are counted as dropped and never copied, and the server serves as ever.
#[tokio::test]
async fn streams_only_recording_lists_streams_without_their_messages() {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    server
        .recording()
        .set_limits(RecordingLimits::streams_only());
    server.set_resource("c1", cluster("c1", 1)).unwrap();
    let mut client = Delta::open(server, "node-a").await;
    client.subscribe(CDS, &["c1"]).await;
    let response = client.recv().await;
    client.ack(&response).await;
    server
        .recording()
        .wait_until(WAIT, |s| s.first().is_some_and(|s| s.dropped_events == 3))
        .await
        .unwrap();
    let stream = &server.recording().streams()[0];
    assert_eq!(stream.node_id.as_deref(), Some("node-a"));
    assert!(stream.events.is_empty());
    assert_eq!(response.resources.len(), 1);
}

/// Reconnects keep at most `streams` streams: closed ones go first, and the
/// recorder counts them.
#[tokio::test]
async fn recording_keeps_the_newest_streams_and_counts_the_dropped() {
    const CAP: usize = 3;
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = &tb.servers()[0];
    server.recording().set_limits(RecordingLimits {
        streams: CAP,
        ..RecordingLimits::default()
    });
    let mut kept_open = Sotw::open(server, "long-lived").await;
    kept_open.request(CDS, &[], None).await;
    kept_open.recv().await;
    for i in 0..5 {
        let mut sotw = Sotw::open(server, &format!("n{i}")).await;
        sotw.request(CDS, &[], None).await;
        sotw.recv().await;
        drop(sotw);
        server
            .recording()
            .wait_until(WAIT, |s| {
                s.last()
                    .is_some_and(|s| s.closed.is_some() && s.id == i + 1)
            })
            .await
            .unwrap();
    }
    let recording = server.recording();
    let streams = recording.streams();
    assert_eq!(streams.len(), CAP);
    assert_eq!(recording.dropped_streams(), 6 - CAP as u64);
    assert_eq!(recording.stream_count(), 6, "every stream that opened");
    assert_eq!(
        streams[0].node_id.as_deref(),
        Some("long-lived"),
        "the open stream outlives closed ones"
    );
    assert_eq!(streams.iter().map(|s| s.id).collect::<Vec<_>>(), [0, 4, 5]);
    assert!(recording.stream(1).is_none());
    assert_eq!(recording.stream(5).map(|s| s.id), Some(5));
}

/// A scenario's `recording` sets the limits of every server it starts.
#[tokio::test]
async fn scenario_sets_the_recording_limits_of_every_server() {
    let scenario = xdsfed_testbed::scenario::Scenario::from_yaml(
        "servers: [{name: a, authorities: [a.example]}, {name: b, authorities: [b.example]}]\n\
         recording: {events_per_stream: 7}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let running = scenario.start().await.unwrap();
    for server in running.testbed().servers() {
        assert_eq!(
            server.recording().limits(),
            RecordingLimits {
                events_per_stream: 7,
                ..RecordingLimits::default()
            }
        );
    }
}

/// A client that goes away on its own (an `XdsClient` dropped after it got
/// its resource) ends its stream normally: the recording says so and does
/// not call it a failure, for delta and SotW alike.
#[tokio::test]
async fn dropped_client_is_recorded_as_a_normal_end() {
    use xdsfed_client::XdsClient;
    use xdsfed_core::{bootstrap::ApiVariant, types::ClusterType};
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
            .await
            .unwrap();
        let server = &tb.servers()[0];
        let name = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";
        server.set_resource(name, cluster(name, 1)).unwrap();
        let uri = server.uri();
        let mut bootstrap = xdsfed_core::bootstrap::Bootstrap::from_json_str(&format!(
            r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
                "node": {{"id": "leaving"}},
                "authorities": {{"cloud.example": {{}}}}}}"#
        ))
        .unwrap();
        for s in &mut bootstrap.xds_servers {
            s.api = variant;
            s.api_pinned = true;
        }
        let client = XdsClient::builder(bootstrap).build().unwrap();
        let mut watch = client.watch::<ClusterType>(name).unwrap();
        tokio::time::timeout(WAIT, watch.next())
            .await
            .unwrap()
            .unwrap();
        drop(watch);
        drop(client);
        server
            .recording()
            .wait_until(WAIT, |s| s.first().is_some_and(|s| s.closed.is_some()))
            .await
            .unwrap();
        let (_, why) = server.recording().streams()[0].closed.clone().unwrap();
        assert!(
            ["client closed", "client cancelled", "client disconnected"].contains(&why.as_str()),
            "{variant:?}: a client leaving is a normal end, not {why:?}"
        );
    }
}

/// A client process that exits closes its connection without ending its
/// streams, and a client that cancels its call resets the stream: both are
/// normal ends, recorded as such rather than as failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exiting_or_cancelling_client_is_recorded_as_a_normal_end() {
    let tb = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = tb.servers()[0].clone();
    server.set_resource("c1", cluster("c1", 1)).unwrap();

    // The process exit: the client's runtime, and with it its connection,
    // goes away while the stream is open.
    let exiting = server.clone();
    // A blocking task: the test's own runtime must keep serving meanwhile.
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let mut client = Delta::open(&exiting, "exiting").await;
            client.subscribe(CDS, &["c1"]).await;
            client.recv().await;
            client
        });
        drop(runtime);
        drop(client);
    })
    .await
    .unwrap();

    // The cancel: the call is dropped while the connection stays.
    let mut cancelling = Delta::open(&server, "cancelling").await;
    cancelling.subscribe(CDS, &["c1"]).await;
    cancelling.recv().await;
    drop(cancelling);

    server
        .recording()
        .wait_until(WAIT, |s| {
            s.len() == 2 && s.iter().all(|s| s.closed.is_some())
        })
        .await
        .unwrap();
    for stream in server.recording().streams() {
        let (_, why) = stream.closed.clone().unwrap();
        assert!(
            ["client closed", "client cancelled", "client disconnected"].contains(&why.as_str()),
            "{:?}: a client leaving is a normal end, not {why:?}",
            stream.node_id
        );
    }
}
