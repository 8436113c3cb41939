//! A minimal raw ADS client for driving the testbed over loopback, in both
//! variants, and builders for the resources the tests serve.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::Cluster, core::v3::Node, endpoint::v3::ClusterLoadAssignment,
            listener::v3::Listener,
        },
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::rpc::Status as RpcStatus,
};
use prost::{Message, Name};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use xdsfed_testbed::Server;

/// How long a test waits for any one message before failing.
pub const WAIT: Duration = Duration::from_secs(5);

pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// A type nobody serves: requests for it make a fence.
pub const FENCE: &str = "type.googleapis.com/xdsfed.test.Fence";

pub fn cluster(name: &str, connect_timeout_secs: i64) -> Any {
    let cluster = Cluster {
        name: name.into(),
        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
            seconds: connect_timeout_secs,
            nanos: 0,
        }),
        ..Default::default()
    };
    Any {
        type_url: Cluster::type_url(),
        value: cluster.encode_to_vec(),
    }
}

pub fn listener(name: &str) -> Any {
    Any {
        type_url: Listener::type_url(),
        value: Listener {
            name: name.into(),
            ..Default::default()
        }
        .encode_to_vec(),
    }
}

pub fn endpoints(name: &str) -> Any {
    Any {
        type_url: ClusterLoadAssignment::type_url(),
        value: ClusterLoadAssignment {
            cluster_name: name.into(),
            ..Default::default()
        }
        .encode_to_vec(),
    }
}

pub fn node(id: &str) -> Option<Node> {
    Some(Node {
        id: id.into(),
        ..Default::default()
    })
}

pub fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn client(server: &Server) -> AggregatedDiscoveryServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(server.uri())
        .expect("a loopback URI is valid")
        .connect_timeout(WAIT)
        .connect()
        .await
        .expect("the testbed server accepts connections");
    AggregatedDiscoveryServiceClient::new(channel)
}

/// One delta ADS stream.
pub struct Delta {
    pub node_id: String,
    tx: mpsc::Sender<DeltaDiscoveryRequest>,
    rx: Streaming<DeltaDiscoveryResponse>,
    first: bool,
}

impl Delta {
    pub async fn open(server: &Server, node_id: &str) -> Self {
        Self::try_open(server, node_id)
            .await
            .expect("the delta stream opens")
    }

    pub async fn try_open(server: &Server, node_id: &str) -> Result<Self, Status> {
        let mut client = client(server).await;
        let (tx, rx) = mpsc::channel(16);
        let response = client
            .delta_aggregated_resources(ReceiverStream::new(rx))
            .await?;
        Ok(Self {
            node_id: node_id.into(),
            tx,
            rx: response.into_inner(),
            first: true,
        })
    }

    /// Sends a request; the first one carries the node.
    pub async fn send(&mut self, mut request: DeltaDiscoveryRequest) {
        if self.first {
            request.node = node(&self.node_id);
            self.first = false;
        }
        self.tx.send(request).await.expect("the stream is open");
    }

    pub async fn subscribe(&mut self, type_url: &str, names: &[&str]) {
        self.send(DeltaDiscoveryRequest {
            type_url: type_url.into(),
            resource_names_subscribe: strings(names),
            ..Default::default()
        })
        .await;
    }

    pub async fn unsubscribe(&mut self, type_url: &str, names: &[&str]) {
        self.send(DeltaDiscoveryRequest {
            type_url: type_url.into(),
            resource_names_unsubscribe: strings(names),
            ..Default::default()
        })
        .await;
    }

    pub async fn ack(&mut self, response: &DeltaDiscoveryResponse) {
        self.send(DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        })
        .await;
    }

    pub async fn nack(&mut self, response: &DeltaDiscoveryResponse, message: &str) {
        self.send(DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: message.into(),
                details: vec![],
            }),
            ..Default::default()
        })
        .await;
    }

    /// The next response; fails the test after [`WAIT`].
    pub async fn recv(&mut self) -> DeltaDiscoveryResponse {
        match tokio::time::timeout(WAIT, self.rx.message()).await {
            Ok(Ok(Some(response))) => response,
            Ok(Ok(None)) => panic!("the stream ended without a status"),
            Ok(Err(status)) => panic!("the stream failed: {status:?}"),
            Err(_) => panic!("no response within {WAIT:?}"),
        }
    }

    /// The status that ends the stream; fails the test if a response comes first.
    pub async fn recv_end(&mut self) -> Option<Status> {
        match tokio::time::timeout(WAIT, self.rx.message()).await {
            Ok(Ok(Some(response))) => panic!("expected the stream to end, got {response:?}"),
            Ok(Ok(None)) => None,
            Ok(Err(status)) => Some(status),
            Err(_) => panic!("the stream did not end within {WAIT:?}"),
        }
    }

    /// Proves that nothing else was sent: subscribes to a name of a type
    /// nobody serves and expects its removal as the very next response.
    pub async fn fence(&mut self, tag: &str) {
        let name = format!("fence-{tag}");
        self.subscribe(FENCE, &[&name]).await;
        let response = self.recv().await;
        assert_eq!(
            (
                response.type_url.as_str(),
                response.removed_resources.clone()
            ),
            (FENCE, vec![name]),
            "something was sent before the fence: {response:?}"
        );
    }
}

/// One SotW ADS stream.
pub struct Sotw {
    pub node_id: String,
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
    first: bool,
    fences: u32,
}

impl Sotw {
    pub async fn open(server: &Server, node_id: &str) -> Self {
        let mut client = client(server).await;
        let (tx, rx) = mpsc::channel(16);
        let response = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .expect("the SotW stream opens");
        Self {
            node_id: node_id.into(),
            tx,
            rx: response.into_inner(),
            first: true,
            fences: 0,
        }
    }

    pub async fn send(&mut self, mut request: DiscoveryRequest) {
        if self.first {
            request.node = node(&self.node_id);
            self.first = false;
        }
        self.tx.send(request).await.expect("the stream is open");
    }

    /// Requests `names` of `type_url`, acknowledging `last` if given.
    pub async fn request(
        &mut self,
        type_url: &str,
        names: &[&str],
        last: Option<&DiscoveryResponse>,
    ) {
        self.send(DiscoveryRequest {
            type_url: type_url.into(),
            resource_names: strings(names),
            version_info: last.map(|r| r.version_info.clone()).unwrap_or_default(),
            response_nonce: last.map(|r| r.nonce.clone()).unwrap_or_default(),
            ..Default::default()
        })
        .await;
    }

    pub async fn nack(&mut self, response: &DiscoveryResponse, names: &[&str], message: &str) {
        self.send(DiscoveryRequest {
            type_url: response.type_url.clone(),
            resource_names: strings(names),
            response_nonce: response.nonce.clone(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: message.into(),
                details: vec![],
            }),
            ..Default::default()
        })
        .await;
    }

    pub async fn recv(&mut self) -> DiscoveryResponse {
        match tokio::time::timeout(WAIT, self.rx.message()).await {
            Ok(Ok(Some(response))) => response,
            Ok(Ok(None)) => panic!("the stream ended without a status"),
            Ok(Err(status)) => panic!("the stream failed: {status:?}"),
            Err(_) => panic!("no response within {WAIT:?}"),
        }
    }

    /// Proves that nothing else was sent: the first request of a fresh type
    /// is always answered, so its answer must be the very next response.
    pub async fn fence(&mut self) {
        self.fences += 1;
        let type_url = format!("{FENCE}{}", self.fences);
        self.request(&type_url, &[], None).await;
        let response = self.recv().await;
        assert_eq!(
            response.type_url, type_url,
            "something was sent before the fence: {response:?}"
        );
    }
}

/// The names a SotW response carries (decoded from the `name` field, which is
/// field 1 in every Envoy resource the tests use).
pub fn sotw_names(response: &DiscoveryResponse) -> Vec<String> {
    let mut names: Vec<String> = response
        .resources
        .iter()
        .map(|any| match any.type_url.as_str() {
            EDS => ClusterLoadAssignment::decode(any.value.as_slice())
                .map(|c| c.cluster_name)
                .unwrap_or_default(),
            _ => Cluster::decode(any.value.as_slice())
                .map(|c| c.name)
                .unwrap_or_default(),
        })
        .collect();
    names.sort();
    names
}

/// The names of a delta response's resources, sorted.
pub fn delta_names(response: &DeltaDiscoveryResponse) -> Vec<String> {
    let mut names: Vec<String> = response.resources.iter().map(|r| r.name.clone()).collect();
    names.sort();
    names
}
