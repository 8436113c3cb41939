//! The testbed's policy server as a peer of independent clients: its
//! all-ACKed barrier against a client that goes silent, and what
//! `WaitAcked` reports over the control API (docs/rules.md, "The policy
//! stream against independent peers").

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::Streaming;
use tonic::transport::Channel;
use xdsfed::client::policy_stream::stub::validating_policy_service_client::ValidatingPolicyServiceClient;
use xdsfed::core::policy_stream::wire::{
    PolicyDiscoveryRequest, PolicyDiscoveryResponse, ValidatingPolicy, ValidatingPolicySpec,
    Validation,
};
use xdsfed::core::types::VALIDATING_POLICY_TYPE_URL;
use xdsfed::proto::testbed::v1::{self as pb, testbed_control_client::TestbedControlClient};
use xdsfed::testbed::{Protocol, ServerSpec, Testbed};
use xdsfed::testbed_control::ControlService;

const ONPREM: &str = "policies.onprem";
const PATIENCE: Duration = Duration::from_secs(10);

fn policy(name: &str) -> ValidatingPolicy {
    ValidatingPolicy {
        name: name.into(),
        delete: false,
        spec: Some(ValidatingPolicySpec {
            validations: vec![Validation {
                expression: "true".into(),
                ..Default::default()
            }],
            evaluation_mode: "Envoy".into(),
            ..Default::default()
        }),
    }
}

/// A testbed of one policy server that flushes clients silent for
/// `max_client_inactive`, holding the policy `require-auth`.
async fn policy_testbed(max_client_inactive: Duration) -> Arc<Testbed> {
    let spec = ServerSpec::new("onprem", [ONPREM]).with_protocol(Protocol::PolicyStream {
        max_client_inactive,
    });
    let testbed = Arc::new(Testbed::start([spec]).await.unwrap());
    testbed.servers()[0]
        .set_message("require-auth", &policy("require-auth"))
        .unwrap();
    testbed
}

/// A hand-written client: one stream, requests sent as the test says.
struct RawClient {
    requests: mpsc::Sender<PolicyDiscoveryRequest>,
    responses: Streaming<PolicyDiscoveryResponse>,
}

impl RawClient {
    /// Opens a stream as `client_address` and sends the initial request
    /// (empty version and nonce); nothing else, and no health check.
    async fn connect(uri: String, client_address: &str) -> RawClient {
        let channel = Channel::from_shared(uri).unwrap().connect().await.unwrap();
        let (requests, rx) = mpsc::channel(4);
        requests
            .send(PolicyDiscoveryRequest {
                client_address: client_address.into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let responses = ValidatingPolicyServiceClient::new(channel)
            .policy_discovery_stream(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        RawClient {
            requests,
            responses,
        }
    }

    async fn snapshot(&mut self) -> PolicyDiscoveryResponse {
        tokio::time::timeout(PATIENCE, self.responses.message())
            .await
            .expect("a snapshot in time")
            .unwrap()
            .expect("the stream is open")
    }
}

/// §Health Checks: the control plane flushes inactive clients so that one
/// gone quiet stops holding the all-ACKed barrier; a client that never
/// called `HealthCheck` at all is as silent as one that stopped.
#[tokio::test]
async fn silent_client_without_health_checks_is_flushed_from_the_barrier() {
    let testbed = policy_testbed(Duration::from_millis(300)).await;
    let server = &testbed.servers()[0];
    // It takes the snapshot and then says nothing: no ACK, no health check,
    // its stream left open.
    let mut silent = RawClient::connect(server.uri(), "silent-sidecar").await;
    silent.snapshot().await;
    let (_, report) = server.policies().wait_acked(PATIENCE).await;
    assert!(!report.timed_out, "{report:?}");
    assert!(report.pending.is_empty(), "{report:?}");
    assert!(
        server.policies().clients().is_empty(),
        "{:?}",
        server.policies().clients()
    );
    drop(silent);
}

/// `WaitAcked` over the control API reports the version clients ACK: the
/// snapshot's (§Versioning Model: a SHA-256 of every policy), not the
/// content hash of the one policy named in the request.
#[tokio::test]
async fn wait_acked_reports_the_snapshot_version_clients_ack() {
    let testbed = policy_testbed(Duration::from_secs(60)).await;
    let server = &testbed.servers()[0];
    let mut client = RawClient::connect(server.uri(), "acking-sidecar").await;
    let snapshot = client.snapshot().await;
    client
        .requests
        .send(PolicyDiscoveryRequest {
            client_address: "acking-sidecar".into(),
            version_info: snapshot.version_info.clone(),
            response_nonce: snapshot.nonce.clone(),
            error_detail: None,
        })
        .await
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ControlService::new(Arc::clone(&testbed)).into_server())
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let report = TestbedControlClient::new(channel)
        .wait_acked(pb::WaitAckedRequest {
            server: "onprem".into(),
            type_url: VALIDATING_POLICY_TYPE_URL.into(),
            name: "require-auth".into(),
            version: String::new(),
            timeout: Some(prost_types::Duration {
                seconds: 10,
                nanos: 0,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!report.timed_out, "{report:?}");
    assert_eq!(report.acked_by, ["acking-sidecar"]);
    assert_eq!(report.version, snapshot.version_info);
    assert_eq!(report.version, server.policies().current().0);
}
