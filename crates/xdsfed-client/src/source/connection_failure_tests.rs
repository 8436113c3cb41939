//! Who ended a stream that never answered, per kind of stream source: a
//! connection that never opened (refused here) is the transport's end
//! ([`Initiator::Transport`]); a status the server sent is the server's
//! ([`Initiator::Server`]). Real sockets on 127.0.0.1, every deadline far
//! beyond the wait, so that only the refusal or the status can end the
//! stream.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status, Streaming};

use crate::policy_stream::PolicyConnection;
use crate::source::rest::RestConnection;
use crate::transport::{AdsConnection, EventSink, TransportOptions};
use xdsfed_core::bootstrap::{ApiVariant, RestTiming, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::{AuthorityFilter, CoreEvent, Initiator, ResourceKey, StreamFailure};
use xdsfed_core::types::{TypeRegistry, VALIDATING_POLICY_TYPE_URL};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Long enough for a loaded machine, short enough to fail fast.
const WAIT: Duration = Duration::from_secs(10);
/// Every deadline of the sources: far beyond [`WAIT`], so none can end a
/// stream the test watches.
const NEVER: Duration = Duration::from_secs(600);

/// The built-in types: no resource ever arrives in these tests.
fn types() -> Arc<TypeRegistry> {
    Arc::new(TypeRegistry::with_builtin())
}

fn options() -> TransportOptions {
    TransportOptions {
        connect_timeout: NEVER,
        first_response_timeout: Some(NEVER),
        idle_grace: NEVER,
        ..TransportOptions::default()
    }
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

fn recorder() -> (Arc<dyn EventSink>, mpsc::UnboundedReceiver<CoreEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Recorder(tx)), rx)
}

/// An address nothing listens on: bound, noted, closed.
async fn refused_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr
}

/// The first stream failure the source reports.
async fn first_failure(rx: &mut mpsc::UnboundedReceiver<CoreEvent>) -> StreamFailure {
    tokio::time::timeout(WAIT, async {
        loop {
            match rx.recv().await {
                Some(CoreEvent::StreamFailed { failure }) => return failure,
                Some(_) => {}
                None => panic!("the sink went away"),
            }
        }
    })
    .await
    .expect("a stream failure within the wait")
}

fn rest_server(addr: SocketAddr) -> ServerConfig {
    ServerConfig {
        api: ApiVariant::Sotw,
        protocol: ServerProtocol::Rest(RestTiming {
            refresh_delay: NEVER,
            request_timeout: NEVER,
        }),
        ..ServerConfig::insecure(format!("http://{addr}"))
    }
}

/// "The connection failed or never answered (refused, reset, a handshake
/// deadline): the server never had its say" — an ADS stream to a port
/// nothing listens on.
#[tokio::test]
async fn refused_ads_connection_ends_as_a_transport_failure() {
    let addr = refused_addr().await;
    let (sink, mut events) = recorder();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr.to_string()),
        AuthorityFilter::any(),
        types(),
        sink,
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let failure = first_failure(&mut events).await;
    conn.shutdown();
    assert_eq!(failure.end.initiator, Initiator::Transport, "{failure}");
    assert!(failure.to_string().contains(&addr.to_string()), "{failure}");
}

/// As for ADS: REST-JSON polls to a port nothing listens on end as the
/// transport's failure.
#[tokio::test]
async fn refused_rest_connection_ends_as_a_transport_failure() {
    let addr = refused_addr().await;
    let (sink, mut events) = recorder();
    let conn = RestConnection::spawn(
        rest_server(addr),
        AuthorityFilter::any(),
        types(),
        sink,
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let failure = first_failure(&mut events).await;
    conn.shutdown();
    assert_eq!(failure.end.initiator, Initiator::Transport, "{failure}");
    assert!(failure.to_string().contains(&addr.to_string()), "{failure}");
}

/// As for ADS: a policy stream to a port nothing listens on ends as the
/// transport's failure.
#[tokio::test]
async fn refused_policy_stream_connection_ends_as_a_transport_failure() {
    let addr = refused_addr().await;
    let (sink, mut events) = recorder();
    let server = ServerConfig {
        protocol: ServerProtocol::PolicyStream(Default::default()),
        ..ServerConfig::insecure(addr.to_string())
    };
    let conn = PolicyConnection::spawn(server, AuthorityFilter::any(), Vec::new(), sink, options());
    conn.subscribe(ResourceKey::new(VALIDATING_POLICY_TYPE_URL, "p1"));
    let failure = first_failure(&mut events).await;
    conn.shutdown();
    assert_eq!(failure.end.initiator, Initiator::Transport, "{failure}");
    assert!(failure.to_string().contains(&addr.to_string()), "{failure}");
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// An ADS server that refuses every stream with `PERMISSION_DENIED`.
struct Refuses;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Refuses {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        _request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        Err(Status::permission_denied("not for this node"))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::permission_denied("not for this node"))
    }
}

/// A status the server sent stays the server's end, its code and message
/// as sent.
#[tokio::test]
async fn ads_status_from_the_server_ends_as_the_servers_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(Refuses))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let (sink, mut events) = recorder();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr.to_string()),
        AuthorityFilter::any(),
        types(),
        sink,
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let failure = first_failure(&mut events).await;
    conn.shutdown();
    server.abort();
    assert_eq!(failure.end.initiator, Initiator::Server, "{failure}");
    assert_eq!(failure.end.code.name(), "PERMISSION_DENIED", "{failure}");
    assert!(
        failure.to_string().contains("not for this node"),
        "{failure}"
    );
}

/// A REST-JSON server that answers every poll `503 Service Unavailable`.
async fn unavailable_rest_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answer = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            let _ = socket.write_all(answer).await;
        }
    });
    (addr, task)
}

/// An HTTP status the REST-JSON server sent stays the server's end.
#[tokio::test]
async fn rest_status_from_the_server_ends_as_the_servers_failure() {
    let (addr, server) = unavailable_rest_server().await;
    let (sink, mut events) = recorder();
    let conn = RestConnection::spawn(
        rest_server(addr),
        AuthorityFilter::any(),
        types(),
        sink,
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    let failure = first_failure(&mut events).await;
    conn.shutdown();
    server.abort();
    assert_eq!(failure.end.initiator, Initiator::Server, "{failure}");
    assert!(failure.to_string().contains("503"), "{failure}");
}
