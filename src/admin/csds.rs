//! CSDS (`envoy.service.status.v3.ClientStatusDiscoveryService`) for one
//! client, filled as gRPC fills it (gRFC A40): every answer is one
//! `ClientConfig` whose `client_scope` is the target and whose
//! `generic_xds_configs` hold one entry per resource:
//!
//! | field | value |
//! | --- | --- |
//! | `type_url`, `name` | the resource's type URL and cache key |
//! | `version_info`, `last_updated` | version and arrival time of the cached copy |
//! | `xds_config` | the cached copy as received: an `Any` of the type URL and the resource's own bytes (A40 "Expose xDS Config As Is") |
//! | `client_status` | `ClientResourceStatus` (A40 "Config Status in gRPC") |
//! | `config_status` | unset (`UNKNOWN`): csds.proto reserves it for management servers, and gRPC clients leave it |
//! | `error_state` | on NACKed and errored entries: `details`, the rejected `version_info` and `last_update_attempt` (A40 "xDS Config Error State") |
//!
//! The resource bytes are the cache's, not re-encoded: what a tool decodes is
//! what the server sent. A response carries at most [`XDS_CONFIG_BUDGET`]
//! bytes of them; past that budget entries keep their status but leave
//! `xds_config` out, and a unary answer says how many in the
//! [`OMITTED_HEADER`] header (gRPC has no bound; see docs/cli.md).

use std::pin::Pin;

use crate::client::cache::ResourceStatus;
use crate::client::client::XdsClient;
use crate::core::status::{ClientStatus, ResourceStatusEntry};
use envoy_types::pb::envoy::admin::v3::UpdateFailureState;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_server::{
    ClientStatusDiscoveryService, ClientStatusDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::status::v3::{
    ClientConfig, ClientStatusRequest, ClientStatusResponse,
};
use envoy_types::pb::google::protobuf::{Any, Timestamp};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// Resource bytes (`xds_config` values) one response carries at most:
/// half of the 4 MiB that gRPC clients accept by default in one message,
/// leaving the other half for the entries' names, versions and errors.
pub const XDS_CONFIG_BUDGET: usize = 2 * 1024 * 1024;

/// The response header of `FetchClientStatus` that counts the entries whose
/// `xds_config` was left out for the budget (absent when none was).
pub const OMITTED_HEADER: &str = "xdsfed-csds-xds-config-omitted";

/// The CSDS service of one client.
#[derive(Debug, Clone)]
pub(crate) struct CsdsService {
    client: XdsClient,
    target: String,
}

impl CsdsService {
    /// Serves `client`'s status, with `target` as the `client_scope`.
    pub(crate) fn new(client: XdsClient, target: String) -> Self {
        Self { client, target }
    }

    /// The tonic service.
    pub(crate) fn into_server(self) -> ClientStatusDiscoveryServiceServer<Self> {
        ClientStatusDiscoveryServiceServer::new(self)
    }

    /// The response and how many `xds_config`s it left out.
    fn response(&self) -> (ClientStatusResponse, usize) {
        let (config, omitted) = client_config(
            self.client.node(),
            &self.client.status(),
            &self.target,
            XDS_CONFIG_BUDGET,
        );
        (
            ClientStatusResponse {
                config: vec![config],
            },
            omitted,
        )
    }
}

/// The dump as CSDS's `ClientConfig`, with at most `budget` bytes of
/// resources; also returns how many entries' `xds_config` did not fit.
/// Entries are filled in the dump's order (type URL, then name), so which
/// ones fit does not change from one answer to the next.
pub(crate) fn client_config(
    node: &Node,
    status: &ClientStatus,
    target: &str,
    budget: usize,
) -> (ClientConfig, usize) {
    let mut left = budget;
    let mut omitted = 0;
    let generic_xds_configs = status
        .resources
        .iter()
        .map(|r| {
            let mut entry = generic_config(r);
            if let Some(raw) = &r.raw {
                if raw.len() <= left {
                    left -= raw.len();
                    entry.xds_config = Some(Any {
                        type_url: r.type_url.clone(),
                        value: raw.to_vec(),
                    });
                } else {
                    omitted += 1;
                }
            }
            entry
        })
        .collect();
    let config = ClientConfig {
        node: Some(node.clone()),
        generic_xds_configs,
        client_scope: target.to_owned(),
        ..ClientConfig::default()
    };
    (config, omitted)
}

/// One entry without its `xds_config`.
fn generic_config(r: &ResourceStatusEntry) -> GenericXdsConfig {
    // gRPC reports a failed update (a NACK, or an error the server sent for
    // the resource) in `error_state`; other errors (does not exist, timeout)
    // are said by `client_status` alone.
    let failed = matches!(
        r.status,
        ResourceStatus::Nacked | ResourceStatus::ReceivedError
    ) || r.failed_version.is_some();
    GenericXdsConfig {
        type_url: r.type_url.clone(),
        name: r.name.clone(),
        version_info: r.version.clone().unwrap_or_default(),
        last_updated: r.last_updated_unix_ms.map(timestamp),
        client_status: r.status.to_csds(),
        error_state: r
            .error
            .as_ref()
            .filter(|_| failed)
            .map(|e| UpdateFailureState {
                details: e.clone(),
                version_info: r.failed_version.clone().unwrap_or_default(),
                last_update_attempt: r.failed_at_unix_ms.map(timestamp),
                ..UpdateFailureState::default()
            }),
        ..GenericXdsConfig::default()
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
            .map(move |request| request.map(|_| service.response().0));
        Ok(Response::new(Box::pin(responses)))
    }

    async fn fetch_client_status(
        &self,
        _request: Request<ClientStatusRequest>,
    ) -> Result<Response<ClientStatusResponse>, Status> {
        let (answer, omitted) = self.response();
        let mut response = Response::new(answer);
        if omitted > 0 {
            response
                .metadata_mut()
                .insert(OMITTED_HEADER, omitted.into());
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::bytes::Bytes;

    fn entry(name: &str, raw: Option<&'static [u8]>) -> ResourceStatusEntry {
        ResourceStatusEntry {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            name: name.into(),
            authority: None,
            server: "s".into(),
            server_uri: "s".into(),
            version: Some("1".into()),
            status: ResourceStatus::Acked,
            last_updated_unix_ms: Some(1_500),
            error: None,
            failed_version: None,
            failed_at_unix_ms: None,
            raw: raw.map(Bytes::from_static),
            cached: raw.is_some(),
            source: None,
        }
    }

    fn status(resources: Vec<ResourceStatusEntry>) -> ClientStatus {
        ClientStatus {
            state_dir: None,
            node_id: "n".into(),
            resources,
            servers: Vec::new(),
            authorities: Vec::new(),
        }
    }

    /// Past the budget, entries keep their status and lose only
    /// `xds_config`; the count of those left out is returned.
    #[test]
    fn xds_config_stops_at_the_byte_budget() {
        let s = status(vec![
            entry("a", Some(b"0123")),
            entry("b", Some(b"456789")),
            entry("c", Some(b"ab")),
            entry("d", None),
        ]);
        let (config, omitted) = client_config(&Node::default(), &s, "xds:///t", 7);
        let carried: Vec<_> = config
            .generic_xds_configs
            .iter()
            .map(|g| {
                (
                    g.name.as_str(),
                    g.xds_config.as_ref().map(|a| a.value.len()),
                )
            })
            .collect();
        assert_eq!(
            carried,
            [("a", Some(4)), ("b", None), ("c", Some(2)), ("d", None)]
        );
        assert_eq!(omitted, 1);
        assert!(
            config
                .generic_xds_configs
                .iter()
                .all(|g| g.client_status == 3)
        );
        assert_eq!(config.client_scope, "xds:///t");
    }

    /// A NACKed entry carries the rejected version, the details and when.
    #[test]
    fn nacked_entry_has_update_failure_state() {
        let mut e = entry("a", Some(b"x"));
        e.status = ResourceStatus::Nacked;
        e.error = Some("bad".into());
        e.failed_version = Some("2".into());
        e.failed_at_unix_ms = Some(2_250);
        let (config, _) = client_config(&Node::default(), &status(vec![e]), "t", 10);
        let g = &config.generic_xds_configs[0];
        assert_eq!(g.version_info, "1");
        let failure = g.error_state.as_ref().expect("an error state");
        assert_eq!(failure.details, "bad");
        assert_eq!(failure.version_info, "2");
        assert_eq!(
            failure.last_update_attempt,
            Some(Timestamp {
                seconds: 2,
                nanos: 250_000_000
            })
        );
        assert_eq!(g.config_status, 0, "left to management servers");
    }
}
