//! The one loop's backoff, per source kind, on a paused clock: a real
//! loopback server ends every attempt, and the attempts it sees come no
//! sooner than the backoff allows.
//!
//! Virtual time only runs ahead of the network (a paused clock jumps to the
//! next timer while a socket waits), never behind it, so "the k-th attempt
//! came at least (k − 1) shortest delays after the test began" holds
//! however the machine schedules, and fails at once for a loop that
//! reconnects without waiting.

use std::net::SocketAddr;
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
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status, Streaming};

use crate::transport::{AdsConnection, EventSink, TransportOptions};
use xdsfed_core::backoff::BackoffConfig;
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig, ServerProtocol};
use xdsfed_core::protocol::{AuthorityFilter, CoreEvent, ResourceKey};
use xdsfed_core::types::{ResourceType, TypeRegistry, ValidationError};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// Attempts watched per test.
const ATTEMPTS: u32 = 6;
/// The backoff's every delay: 1 s ± 20 %, not growing, so that a reset
/// after a response changes nothing and every gap has the same floor.
const BACKOFF: BackoffConfig = BackoffConfig {
    initial: Duration::from_secs(1),
    multiplier: 1.0,
    jitter: 0.2,
    max: Duration::from_secs(1),
};

/// The shortest delay the backoff can draw: initial × (1 − jitter).
fn shortest_delay() -> Duration {
    BACKOFF.initial.mul_f64(1.0 - f64::from(BACKOFF.jitter))
}

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

/// Drops every event: the attempts are what is counted.
struct Discard;
impl EventSink for Discard {
    fn deliver(&self, _server: &ServerConfig, _events: Vec<CoreEvent>) {}
}

fn options() -> TransportOptions {
    TransportOptions {
        backoff: BACKOFF,
        connect_timeout: Duration::from_secs(5),
        idle_grace: Duration::from_secs(60),
        ..TransportOptions::default()
    }
}

/// When the server saw each attempt begin (virtual time).
type Starts = mpsc::UnboundedReceiver<Instant>;

/// A listener that accepts every connection and closes it at once.
async fn closing_server() -> (SocketAddr, Starts) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let _ = tx.send(Instant::now());
            drop(socket);
        }
    });
    (addr, rx)
}

/// Waits for [`ATTEMPTS`] attempts and checks the k-th came no sooner
/// than k − 1 shortest delays after `t0`.
async fn assert_no_sooner_than_the_backoff(starts: &mut Starts, t0: Instant) {
    for k in 0..ATTEMPTS {
        let at = starts.recv().await.expect("the server is up");
        let floor = shortest_delay() * k;
        assert!(
            at - t0 >= floor,
            "attempt {} came {:?} after the start, sooner than {floor:?}",
            k + 1,
            at - t0
        );
    }
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// An ADS server that answers each SotW stream with one cluster and ends
/// it OK.
struct AnswerThenEnd {
    starts: mpsc::UnboundedSender<Instant>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for AnswerThenEnd {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        _request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let _ = self.starts.send(Instant::now());
        let cluster = Cluster {
            name: "c1".into(),
            ..Cluster::default()
        };
        let response = DiscoveryResponse {
            version_info: "1".into(),
            nonce: "n1".into(),
            type_url: CDS.into(),
            resources: vec![Any {
                type_url: CDS.into(),
                value: cluster.encode_to_vec(),
            }],
            ..DiscoveryResponse::default()
        };
        Ok(Response::new(Box::pin(futures::stream::iter([Ok(
            response,
        )]))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("SotW only"))
    }
}

/// gRFC A57: a failed ADS stream is retried no sooner than the backoff
/// allows.
#[tokio::test(start_paused = true)]
async fn ads_reconnects_no_sooner_than_the_backoff_when_every_connection_closes() {
    let (addr, mut starts) = closing_server().await;
    let t0 = Instant::now();
    let conn = AdsConnection::spawn(
        ServerConfig::insecure(addr.to_string()),
        AuthorityFilter::any(),
        types(),
        Arc::new(Discard),
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    assert_no_sooner_than_the_backoff(&mut starts, t0).await;
    conn.shutdown();
}

/// gRFC A57: "no reconnect more than once per backoff interval, after
/// every stream end (OK or not; a response resets the backoff)": a stream
/// that had a response and ended OK waits too.
#[tokio::test(start_paused = true)]
async fn ads_reopens_no_sooner_than_the_backoff_after_a_stream_that_answered_and_ended_ok() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, mut starts) = mpsc::unbounded_channel();
    let service = AggregatedDiscoveryServiceServer::new(AnswerThenEnd { starts: tx });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let server = ServerConfig {
        api: ApiVariant::Sotw,
        api_pinned: true,
        ..ServerConfig::insecure(addr.to_string())
    };
    let t0 = Instant::now();
    let conn = AdsConnection::spawn(
        server,
        AuthorityFilter::any(),
        types(),
        Arc::new(Discard),
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    assert_no_sooner_than_the_backoff(&mut starts, t0).await;
    assert!(
        conn.stats().resource_updates_valid >= 1,
        "the streams answered"
    );
    conn.shutdown();
}

/// gRFC A57, as REST-JSON applies it: a failed poll ends the attempt, and
/// the next polls wait out the backoff.
#[cfg(feature = "rest")]
#[tokio::test(start_paused = true)]
async fn rest_polls_again_no_sooner_than_the_backoff_when_every_poll_fails() {
    let (addr, mut starts) = closing_server().await;
    let server = ServerConfig {
        api: ApiVariant::Sotw,
        protocol: ServerProtocol::Rest(xdsfed_core::bootstrap::RestTiming::default()),
        ..ServerConfig::insecure(format!("http://{addr}"))
    };
    let t0 = Instant::now();
    let conn = crate::source::rest::RestConnection::spawn(
        server,
        AuthorityFilter::any(),
        types(),
        Arc::new(Discard),
        options(),
    );
    conn.subscribe(ResourceKey::new(CDS, "c1"));
    assert_no_sooner_than_the_backoff(&mut starts, t0).await;
    conn.shutdown();
}

/// gRFC A57, as the policy stream applies it (A88 for its ends).
#[cfg(feature = "policy-stream")]
#[tokio::test(start_paused = true)]
async fn policy_stream_reconnects_no_sooner_than_the_backoff_when_every_connection_closes() {
    let (addr, mut starts) = closing_server().await;
    let server = ServerConfig {
        protocol: ServerProtocol::PolicyStream(Default::default()),
        ..ServerConfig::insecure(addr.to_string())
    };
    let t0 = Instant::now();
    let conn = crate::policy_stream::PolicyConnection::spawn(
        server,
        AuthorityFilter::any(),
        Vec::new(),
        Arc::new(Discard),
        options(),
    );
    conn.subscribe(ResourceKey::new(
        xdsfed_core::types::VALIDATING_POLICY_TYPE_URL,
        "p1",
    ));
    assert_no_sooner_than_the_backoff(&mut starts, t0).await;
    conn.shutdown();
}

/// The CDN's fetches back off per resource, from the same settings: a
/// fetch that fails is retried no sooner than the backoff allows.
#[cfg(feature = "cdn")]
#[tokio::test(start_paused = true)]
async fn cdn_fetches_again_no_sooner_than_the_backoff_when_every_fetch_fails() {
    let (addr, mut starts) = closing_server().await;
    let server = ServerConfig {
        api: ApiVariant::Sotw,
        protocol: ServerProtocol::HttpCdn(Default::default()),
        ..ServerConfig::insecure(format!("http://{addr}/"))
    };
    let t0 = Instant::now();
    let conn =
        crate::source::cdn::CdnConnection::spawn(server, types(), Arc::new(Discard), options());
    conn.subscribe(ResourceKey::new(
        CDS,
        "xdstp://cdn.example/envoy.config.cluster.v3.Cluster/c1",
    ));
    assert_no_sooner_than_the_backoff(&mut starts, t0).await;
    conn.shutdown();
}
