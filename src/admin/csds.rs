//! CSDS (`envoy.service.status.v3.ClientStatusDiscoveryService`) for one
//! client: every answer is the client's current status dump as one
//! `ClientConfig` with a `GenericXdsConfig` per resource.
//!
//! The resource contents (`xds_config`) are left out: the status dump holds
//! versions, states and errors, not the resources' bytes.

use std::pin::Pin;

use crate::core::client::XdsClient;
use crate::core::status::ClientStatus;
use envoy_types::pb::envoy::admin::v3::UpdateFailureState;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_server::{
    ClientStatusDiscoveryService, ClientStatusDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::status::v3::{
    ClientConfig, ClientStatusRequest, ClientStatusResponse,
};
use envoy_types::pb::google::protobuf::Timestamp;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// The CSDS service of one client.
#[derive(Debug, Clone)]
pub(crate) struct CsdsService {
    client: XdsClient,
}

impl CsdsService {
    /// Serves `client`'s status.
    pub(crate) fn new(client: XdsClient) -> Self {
        Self { client }
    }

    /// The tonic service.
    pub(crate) fn into_server(self) -> ClientStatusDiscoveryServiceServer<Self> {
        ClientStatusDiscoveryServiceServer::new(self)
    }

    fn response(&self) -> ClientStatusResponse {
        ClientStatusResponse {
            config: vec![client_config(&self.client, &self.client.status())],
        }
    }
}

/// The dump as CSDS's `ClientConfig`.
pub(crate) fn client_config(client: &XdsClient, status: &ClientStatus) -> ClientConfig {
    let generic_xds_configs = status
        .resources
        .iter()
        .map(|r| GenericXdsConfig {
            type_url: r.type_url.clone(),
            name: r.name.clone(),
            version_info: r.version.clone().unwrap_or_default(),
            last_updated: r.last_updated_unix_ms.map(timestamp),
            client_status: r.status.to_csds(),
            error_state: r.error.as_ref().map(|e| UpdateFailureState {
                details: e.clone(),
                version_info: r.failed_version.clone().unwrap_or_default(),
                ..UpdateFailureState::default()
            }),
            ..GenericXdsConfig::default()
        })
        .collect();
    ClientConfig {
        node: Some(client.node().clone()),
        generic_xds_configs,
        ..ClientConfig::default()
    }
}

fn timestamp(unix_ms: u64) -> Timestamp {
    Timestamp {
        seconds: i64::try_from(unix_ms / 1000).unwrap_or(i64::MAX),
        // Below 1000 ms × 10⁶, so it fits.
        nanos: i32::try_from((unix_ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<ClientStatusResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ClientStatusDiscoveryService for CsdsService {
    type StreamClientStatusStream = ResponseStream;

    /// One response per request, each the status at that moment.
    async fn stream_client_status(
        &self,
        request: Request<Streaming<ClientStatusRequest>>,
    ) -> Result<Response<Self::StreamClientStatusStream>, Status> {
        let service = self.clone();
        let responses = request
            .into_inner()
            .map(move |request| request.map(|_| service.response()));
        Ok(Response::new(Box::pin(responses)))
    }

    async fn fetch_client_status(
        &self,
        _request: Request<ClientStatusRequest>,
    ) -> Result<Response<ClientStatusResponse>, Status> {
        Ok(Response::new(self.response()))
    }
}
