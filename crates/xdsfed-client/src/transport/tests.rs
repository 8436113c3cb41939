//! Transport tests that need no real xDS server: a refused connection, TLS
//! configuration errors, and a stub ADS server on 127.0.0.1 for the
//! delta→SotW fallback and the idle close.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use futures::Stream;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{TcpListenerStream, UnboundedReceiverStream};
use tonic::{Request, Response, Status, Streaming};

use super::*;
use xdsfed_core::bootstrap::ChannelCreds;
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::{ResourceType, ValidationError};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Long enough for a loaded machine, short enough to fail fast.
const WAIT: Duration = Duration::from_secs(10);

struct TestCluster;
impl ResourceType for TestCluster {
    const TYPE_URL: &'static str = CDS;
    const SOTW_FULL_STATE: bool = true;
    type Resource = Cluster;
    fn decode(bytes: &[u8]) -> Result<Cluster, ValidationError> {
        Cluster::decode(bytes).map_err(|e| ValidationError(e.to_string()))
    }
    fn name(c: &Cluster) -> Option<&str> {
        Some(&c.name)
    }
}

fn types() -> Arc<TypeRegistry> {
    let mut r = TypeRegistry::new();
    r.register::<TestCluster>();
    Arc::new(r)
}

/// Forwards every event to the test.
struct Recorder(mpsc::UnboundedSender<CoreEvent>);
impl EventSink for Recorder {
    fn deliver(&self, _server: &ServerConfig, events: Vec<CoreEvent>) {
        for e in events {
            let _ = self.0.send(e);
        }
    }
}

fn fast_options() -> TransportOptions {
    TransportOptions {
        idle_grace: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(2),
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            multiplier: 1.6,
            jitter: 0.2,
            max: Duration::from_millis(200),
        },
        ..TransportOptions::default()
    }
}

/// Waits for the first event matching `pred`, returning it.
async fn wait_for(
    rx: &mut mpsc::UnboundedReceiver<CoreEvent>,
    pred: impl Fn(&CoreEvent) -> bool,
) -> CoreEvent {
    tokio::time::timeout(WAIT, async {
        loop {
            match rx.recv().await {
                Some(e) if pred(&e) => return e,
                Some(_) => {}
                None => panic!("the sink went away"),
            }
        }
    })
    .await
    .expect("event within the wait")
}

/// A57: a connection that cannot be made is a stream failure, reported
/// with the server's name.
#[tokio::test]
async fn connection_refused_reports_stream_failed_naming_the_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr.to_string()),
        AuthorityFilter::any(),
        types(),
        Arc::new(Recorder(tx)),
        fast_options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let e = wait_for(&mut rx, |e| matches!(e, CoreEvent::StreamFailed { .. })).await;
    let CoreEvent::StreamFailed { failure } = e else {
        unreachable!()
    };
    let error = failure.to_string();
    assert!(error.contains(&addr.to_string()), "{error}");
    assert!(conn.stats().server_failure >= 1);
    assert!(!conn.stats().connected);
    conn.shutdown();
}

fn tls_server(ca: Option<PathBuf>, cert: Option<PathBuf>, key: Option<PathBuf>) -> ServerConfig {
    ServerConfig {
        channel_creds: ChannelCreds::Tls {
            ca_certificate_file: ca,
            certificate_file: cert,
            private_key_file: key,
        },
        ..ServerConfig::insecure("127.0.0.1:1")
    }
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("xdsfed-transport-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("write a temp file");
    path
}

#[test]
fn tls_error_names_a_missing_file_and_the_cause() {
    let missing = std::env::temp_dir().join("xdsfed-no-such-ca.pem");
    let err = endpoint(
        &tls_server(Some(missing.clone()), None, None),
        &TransportOptions::default(),
    )
    .expect_err("a missing CA file is an error");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            TransportError::ReadFile {
                role: "CA certificate",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
}

#[test]
fn tls_error_names_a_file_without_a_certificate() {
    let garbage = temp_file("garbage-ca.pem", "not a certificate\n");
    let err = endpoint(
        &tls_server(Some(garbage.clone()), None, None),
        &TransportOptions::default(),
    )
    .expect_err("a CA file without a certificate is an error");
    let msg = err.to_string();
    let _ = std::fs::remove_file(&garbage);
    assert!(msg.contains(&garbage.display().to_string()), "{msg}");
    assert!(msg.contains("holds no PEM certificate"), "{msg}");
}

#[test]
fn tls_without_a_ca_or_with_half_an_identity_is_refused() {
    let err =
        endpoint(&tls_server(None, None, None), &TransportOptions::default()).expect_err("no CA");
    assert!(err.to_string().contains("ca_certificate_file"), "{err}");
    let ca = temp_file("half-ca.pem", "");
    let err = endpoint(
        &tls_server(Some(ca.clone()), Some(ca.clone()), None),
        &TransportOptions::default(),
    )
    .expect_err("half an identity");
    let _ = std::fs::remove_file(&ca);
    assert!(matches!(err, TransportError::Tls { .. }), "{err}");
}

#[test]
fn bad_target_is_refused_naming_it() {
    let server = ServerConfig::insecure("http://bad target");
    let err = endpoint(&server, &TransportOptions::default()).expect_err("a bad target");
    assert!(err.to_string().contains("bad target"), "{err}");
}

/// What the stub saw.
#[derive(Debug, PartialEq)]
enum Seen {
    Delta,
    Sotw(Box<DiscoveryRequest>),
    SotwClosed,
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// An ADS server that refuses delta and answers the first SotW request of
/// each stream with one cluster.
struct Stub {
    seen: mpsc::UnboundedSender<Seen>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Stub {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let mut inbound = request.into_inner();
        let seen = self.seen.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(r)) = inbound.message().await {
                let first = r.response_nonce.is_empty();
                let _ = seen.send(Seen::Sotw(Box::new(r)));
                if first {
                    let cluster = Cluster {
                        name: "c1".into(),
                        ..Cluster::default()
                    };
                    let _ = tx.send(Ok(DiscoveryResponse {
                        version_info: "1".into(),
                        nonce: "n1".into(),
                        type_url: CDS.into(),
                        resources: vec![Any {
                            type_url: CDS.into(),
                            value: cluster.encode_to_vec(),
                        }],
                        ..DiscoveryResponse::default()
                    }));
                }
            }
            let _ = seen.send(Seen::SotwClosed);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let _ = self.seen.send(Seen::Delta);
        Err(Status::unimplemented("no delta here"))
    }
}

async fn start_stub() -> (String, mpsc::UnboundedReceiver<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    let service = AggregatedDiscoveryServiceServer::new(Stub { seen: tx });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (addr.to_string(), rx)
}

async fn next_seen(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("the stub sees something within the wait")
        .expect("the stub is up")
}

/// "when a server answers UNIMPLEMENTED for DeltaAggregatedResources, use
/// SotW with that server"; the refusal is not reported as a failure. Then
/// the idle stream closes after `idle_grace` once nothing is subscribed.
#[tokio::test]
async fn delta_refused_falls_back_to_sotw_and_idle_stream_closes() {
    let (addr, mut seen) = start_stub().await;
    let (tx, mut events) = mpsc::unbounded_channel();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr),
        AuthorityFilter::any(),
        types(),
        Arc::new(Recorder(tx)),
        fast_options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    assert_eq!(next_seen(&mut seen).await, Seen::Delta);
    let Seen::Sotw(first) = next_seen(&mut seen).await else {
        panic!("a SotW request after the refusal");
    };
    assert_eq!(first.resource_names, vec!["c1".to_owned()]);
    assert!(first.node.is_some());
    let upsert = wait_for(&mut events, |e| {
        matches!(e, CoreEvent::Upsert { .. } | CoreEvent::StreamFailed { .. })
    })
    .await;
    assert!(matches!(upsert, CoreEvent::Upsert { .. }), "{upsert:?}");
    let Seen::Sotw(ack) = next_seen(&mut seen).await else {
        panic!("an ACK");
    };
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("1", "n1")
    );
    let stats = conn.stats();
    assert_eq!(stats.variant, ApiVariant::Sotw);
    assert!(stats.connected);
    assert_eq!(stats.server_failure, 0);
    assert_eq!(stats.resource_updates_valid, 1);

    conn.unsubscribe(ResourceKey::new(CDS, "c1"));
    let Seen::Sotw(empty) = next_seen(&mut seen).await else {
        panic!("the unsubscription");
    };
    assert!(empty.resource_names.is_empty());
    assert_eq!(
        next_seen(&mut seen).await,
        Seen::SotwClosed,
        "closed after idle_grace"
    );
    conn.shutdown();
}

/// An explicit `api_type` pins delta: the refusal is a failure, no fallback.
#[tokio::test]
async fn pinned_delta_does_not_fall_back() {
    let (addr, mut seen) = start_stub().await;
    let (tx, mut events) = mpsc::unbounded_channel();
    let server = ServerConfig {
        api_pinned: true,
        ..ServerConfig::insecure(addr)
    };
    let conn = AdsConnection::spawn(
        server,
        AuthorityFilter::any(),
        types(),
        Arc::new(Recorder(tx)),
        fast_options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let _ = wait_for(&mut events, |e| matches!(e, CoreEvent::StreamFailed { .. })).await;
    assert_eq!(next_seen(&mut seen).await, Seen::Delta);
    assert_eq!(conn.stats().variant, ApiVariant::Delta);
    conn.shutdown();
}

/// An ADS server that speaks HTTP/2 but holds every stream's response
/// headers back for ever, as grpc-go and grpc-java servers do until their
/// first response when they have nothing to send.
struct Silent;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Silent {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        _request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        std::future::pending().await
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        std::future::pending().await
    }
}

/// Issue 19: a server that speaks HTTP/2 but never sends the stream's
/// headers (it has nothing to send) is not a server that never answers:
/// its connection answers the readiness probe, so the handshake deadline
/// stops and the name is reported as not existing, without a failure.
#[tokio::test]
async fn silent_http2_server_is_ready_and_its_names_do_not_exist() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(Silent))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let (tx, mut events) = mpsc::unbounded_channel();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr.to_string()),
        AuthorityFilter::any(),
        types(),
        Arc::new(Recorder(tx)),
        TransportOptions {
            connect_timeout: Duration::from_millis(300),
            does_not_exist_timeout: Duration::from_millis(600),
            ..fast_options()
        },
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let e = wait_for(&mut events, |e| {
        matches!(
            e,
            CoreEvent::DoesNotExist { .. } | CoreEvent::StreamFailed { .. }
        )
    })
    .await;
    assert!(matches!(e, CoreEvent::DoesNotExist { .. }), "{e:?}");
    assert_eq!(conn.stats().server_failure, 0);
    conn.shutdown();
}
