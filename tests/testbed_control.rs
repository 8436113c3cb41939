//! The gRPC control API (`xdsfed.testbed.v1.TestbedControl`) over a running
//! testbed, driven by the generated tonic client.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::cluster::v3::Cluster,
    service::discovery::v3::{
        DeltaDiscoveryRequest,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    },
};
use prost::{Message, Name};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Code, transport::Channel};
use xdsfed::{
    proto::testbed::v1::{self as pb, testbed_control_client::TestbedControlClient},
    testbed::{ServerSpec, Testbed},
    testbed_control::ControlService,
};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const C1: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c1";
const WAIT: Duration = Duration::from_secs(5);

async fn start() -> (Arc<Testbed>, TestbedControlClient<Channel>) {
    let testbed = Arc::new(
        Testbed::start([
            ServerSpec::new("cloud", ["cloud.example"]),
            ServerSpec::new("onprem", ["onprem.example"]),
        ])
        .await
        .unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = ControlService::new(testbed.clone()).into_server();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (testbed, TestbedControlClient::new(channel))
}

fn cluster_any(name: &str) -> prost_types::Any {
    prost_types::Any {
        type_url: Cluster::type_url(),
        value: Cluster {
            name: name.into(),
            ..Default::default()
        }
        .encode_to_vec(),
    }
}

#[tokio::test]
async fn list_servers_reports_addresses_and_authorities() {
    let (testbed, mut control) = start().await;
    let servers = control
        .list_servers(pb::ListServersRequest {})
        .await
        .unwrap()
        .into_inner()
        .servers;
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[1].name, "onprem");
    assert_eq!(servers[1].authorities, ["onprem.example"]);
    assert_eq!(servers[1].address, testbed.servers()[1].addr().to_string());
}

#[tokio::test]
async fn set_resource_returns_content_hash_and_wait_acked_sees_the_ack() {
    let (testbed, mut control) = start().await;
    let version = control
        .set_resource(pb::SetResourceRequest {
            server: "cloud".into(),
            name: C1.into(),
            resource: Some(cluster_any(C1)),
        })
        .await
        .unwrap()
        .into_inner()
        .version;
    assert_eq!(
        version,
        xdsfed::testbed::version::of_bytes(&cluster_any(C1).value)
    );

    // A raw delta client subscribes and ACKs.
    let channel = tonic::transport::Endpoint::from_shared(testbed.servers()[0].uri())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(4);
    let mut ads = AggregatedDiscoveryServiceClient::new(channel);
    tx.send(DeltaDiscoveryRequest {
        node: Some(envoy_types::pb::envoy::config::core::v3::Node {
            id: "harness-client".into(),
            ..Default::default()
        }),
        type_url: CDS.into(),
        resource_names_subscribe: vec![C1.into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = ads
        .delta_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let response = tokio::time::timeout(WAIT, responses.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tx.send(DeltaDiscoveryRequest {
        type_url: CDS.into(),
        response_nonce: response.nonce,
        ..Default::default()
    })
    .await
    .unwrap();

    let report = control
        .wait_acked(pb::WaitAckedRequest {
            server: "cloud".into(),
            type_url: CDS.into(),
            name: C1.into(),
            version: String::new(),
            timeout: Some(prost_types::Duration {
                seconds: 5,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!report.timed_out, "{report:?}");
    assert_eq!(report.acked_by, ["harness-client"]);
    assert_eq!(report.version, version);

    let clients = control
        .list_clients(pb::ListClientsRequest {
            server: "cloud".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .clients;
    assert_eq!(clients.len(), 1);
    assert_eq!(clients[0].node_id, "harness-client");
    assert!(clients[0].last_request_unix_ms > 0);

    let streams = control
        .list_streams(pb::ListStreamsRequest {
            server: "cloud".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .streams;
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].variant, "delta");
    assert_eq!(streams[0].responses, 1);
}

#[tokio::test]
async fn set_and_get_faults_round_trip() {
    let (testbed, mut control) = start().await;
    let faults = pb::Faults {
        close_after_responses: 3,
        response_delay: Some(prost_types::Duration {
            seconds: 0,
            nanos: 250_000_000,
        }),
        silent_names: vec![C1.into()],
        redirects: [(
            C1.to_string(),
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/c2".to_string(),
        )]
        .into(),
        inject: vec![pb::InjectedResource {
            name: "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/x".into(),
            resource: Some(cluster_any("x")),
        }],
        ..Default::default()
    };
    control
        .set_faults(pb::SetFaultsRequest {
            server: "cloud".into(),
            faults: Some(faults.clone()),
        })
        .await
        .unwrap();
    let applied = testbed.servers()[0].faults();
    assert_eq!(applied.close_after_responses, Some(3));
    assert_eq!(applied.response_delay, Some(Duration::from_millis(250)));
    assert_eq!(applied.inject.len(), 1);
    let back = control
        .get_faults(pb::GetFaultsRequest {
            server: "cloud".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .faults
        .unwrap();
    assert_eq!(back, faults);
}

#[tokio::test]
async fn delete_and_restart_act_on_the_named_server() {
    let (testbed, mut control) = start().await;
    testbed.servers()[0]
        .set_resource(
            C1,
            envoy_types::pb::google::protobuf::Any {
                type_url: CDS.into(),
                value: vec![],
            },
        )
        .unwrap();
    control
        .restart_server(pb::RestartServerRequest {
            server: "cloud".into(),
            keep_state: true,
            down_for: None,
        })
        .await
        .unwrap();
    assert!(
        testbed.servers()[0].store().get(CDS, C1).is_some(),
        "state kept"
    );
    let existed = control
        .delete_resource(pb::DeleteResourceRequest {
            server: "cloud".into(),
            type_url: CDS.into(),
            name: C1.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .existed;
    assert!(existed);
    assert!(testbed.servers()[0].store().get(CDS, C1).is_none());
}

#[tokio::test]
async fn unknown_server_is_not_found_and_foreign_authority_invalid() {
    let (_testbed, mut control) = start().await;
    let status = control
        .list_clients(pb::ListClientsRequest {
            server: "nowhere".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("nowhere"));

    let status = control
        .set_resource(pb::SetResourceRequest {
            server: "cloud".into(),
            name: "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/c".into(),
            resource: Some(cluster_any("c")),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("onprem.example"), "{status:?}");
}

/// Opens a delta stream to `server` that subscribes to `name` of `CDS` and
/// returns once the first response arrived; the stream stays open while the
/// returned sender lives.
async fn delta_stream(
    server: &xdsfed::testbed::Server,
    node: &str,
    name: &str,
) -> mpsc::Sender<DeltaDiscoveryRequest> {
    let mut ads = AggregatedDiscoveryServiceClient::connect(server.uri())
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(DeltaDiscoveryRequest {
        node: Some(envoy_types::pb::envoy::config::core::v3::Node {
            id: node.into(),
            ..Default::default()
        }),
        type_url: CDS.into(),
        resource_names_subscribe: vec![name.into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = ads
        .delta_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(WAIT, responses.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = responses.message().await {} });
    tx
}

/// The recording is bounded; ListStreams says how much it dropped.
#[tokio::test]
async fn list_streams_counts_what_the_bounded_recording_dropped() {
    let (testbed, mut control) = start().await;
    let cloud = &testbed.servers()[0];
    cloud
        .recording()
        .set_limits(xdsfed::testbed::RecordingLimits {
            events_per_stream: 1,
            streams: 1,
            ..Default::default()
        });
    let _first = delta_stream(cloud, "first", C1).await;
    let _second = delta_stream(cloud, "second", C1).await;
    cloud
        .recording()
        .wait_until(WAIT, |s| {
            s.first()
                .is_some_and(|s| s.node_id.as_deref() == Some("second") && s.dropped_events == 1)
        })
        .await
        .unwrap();

    let listed = control
        .list_streams(pb::ListStreamsRequest {
            server: "cloud".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.dropped_streams, 1, "{listed:?}");
    assert_eq!(listed.streams.len(), 1, "{listed:?}");
    let kept = &listed.streams[0];
    assert_eq!((kept.id, kept.node_id.as_str()), (1, "second"));
    assert_eq!(
        (kept.requests, kept.responses, kept.dropped_events),
        (0, 1, 1),
        "the request was dropped, the newer response kept"
    );
}

#[tokio::test]
async fn set_faults_refuses_a_redirect_target_that_is_not_an_xdstp_name() {
    let (testbed, mut control) = start().await;
    let status = control
        .set_faults(pb::SetFaultsRequest {
            server: "cloud".into(),
            faults: Some(pb::Faults {
                redirects: [(C1.to_owned(), "not an xdstp name".to_owned())].into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("faults.redirects") && status.message().contains(C1),
        "{status:?}"
    );
    assert!(testbed.servers()[0].faults().redirects.is_empty());
}

/// Durations at the edges of what protobuf can carry are refused, naming
/// the field, never a panic.
#[tokio::test]
async fn extreme_durations_are_invalid_arguments_naming_the_field() {
    let (_testbed, mut control) = start().await;
    for (seconds, nanos) in [
        (i64::MAX, i32::MAX),
        (i64::MIN, i32::MIN),
        (-1, 0),
        (601, 0),
    ] {
        let duration = Some(prost_types::Duration { seconds, nanos });
        let status = control
            .restart_server(pb::RestartServerRequest {
                server: "cloud".into(),
                keep_state: true,
                down_for: duration,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("down_for"), "{status:?}");
        let status = control
            .wait_acked(pb::WaitAckedRequest {
                server: "cloud".into(),
                type_url: CDS.into(),
                name: C1.into(),
                version: "v".into(),
                timeout: duration,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("timeout"), "{status:?}");
        let status = control
            .set_faults(pb::SetFaultsRequest {
                server: "cloud".into(),
                faults: Some(pb::Faults {
                    response_delay: duration,
                    ..Default::default()
                }),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("response_delay"), "{status:?}");
    }
}

/// Two clients that read one bootstrap send the same node id; the testbed
/// tells them apart by their connections: `ListClients` lists each with its
/// own `peer` and one stream, and `WaitAcked` counts each one's ACK.
#[tokio::test]
async fn clients_sharing_one_bootstrap_are_listed_apart() {
    use xdsfed::client::XdsClient;
    use xdsfed::core::{bootstrap::Bootstrap, types::ClusterType};
    let (testbed, mut control) = start().await;
    let cloud = &testbed.servers()[0];
    let eds = "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/c1";
    cloud
        .set_message(C1, &xdsfed::testbed::resources::cluster(C1, eds))
        .unwrap();
    let uri = cloud.uri();
    let bootstrap = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "shared-node", "locality": {{}}}},
            "authorities": {{"cloud.example": {{}}}}}}"#
    );
    let mut clients = Vec::new();
    for _ in 0..2 {
        let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
            .build()
            .unwrap();
        let mut watch = client.watch::<ClusterType>(C1).unwrap();
        tokio::time::timeout(WAIT, watch.next())
            .await
            .unwrap()
            .unwrap();
        clients.push((client, watch));
    }

    let report = control
        .wait_acked(pb::WaitAckedRequest {
            server: "cloud".into(),
            type_url: CDS.into(),
            name: C1.into(),
            timeout: Some(prost_types::Duration {
                seconds: 5,
                nanos: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        report.acked_by,
        ["shared-node", "shared-node"],
        "{report:?}"
    );

    let listed = control
        .list_clients(pb::ListClientsRequest {
            server: "cloud".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .clients;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|c| c.node_id == "shared-node" && c.streams == 1)
    );
    assert_ne!(listed[0].peer, listed[1].peer, "{listed:?}");
    for client in &listed {
        let peer: std::net::SocketAddr = client.peer.parse().unwrap();
        assert!(peer.ip().is_loopback(), "{peer}");
    }
}
