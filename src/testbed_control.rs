//! The gRPC control API of a testbed, `xdsfed.testbed.v1.TestbedControl`.
//!
//! A thin adapter over the [`xdsfed_testbed`] Rust API, so that a harness in
//! any language can drive a running `xdsfed testbed`: list the servers, set and
//! delete resources, switch faults, restart servers, wait for ACKs and look at
//! clients and streams.
//!
//! ```no_run
//! # async fn demo(testbed: std::sync::Arc<xdsfed::testbed::Testbed>) {
//! use xdsfed::testbed_control::ControlService;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! tonic::transport::Server::builder()
//!     .add_service(ControlService::new(testbed).into_server())
//!     .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
//!     .await
//!     .unwrap();
//! # }
//! ```
//!
//! Unknown servers answer `NOT_FOUND`; resources the server refuses and
//! malformed requests answer `INVALID_ARGUMENT` with the field at fault.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, UNIX_EPOCH},
};

use tonic::{Request, Response, Status};
use xdsfed_core::name::XdstpName;
use xdsfed_testbed::{
    AckReport, Faults, Injected, Protocol, Server, ServerError, Testbed, Variant,
};

use crate::proto::testbed::v1::{
    self as pb,
    testbed_control_server::{TestbedControl, TestbedControlServer},
};

/// How long `WaitAcked` waits when the request sets no timeout.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The longest `WaitAcked` or `RestartServer.down_for` accepted.
pub const MAX_WAIT: Duration = Duration::from_secs(600);

/// The control service over one testbed.
#[derive(Debug, Clone)]
pub struct ControlService {
    testbed: Arc<Testbed>,
}

impl ControlService {
    /// Controls `testbed`.
    pub fn new(testbed: Arc<Testbed>) -> Self {
        Self { testbed }
    }

    /// The tonic service to add to a server.
    pub fn into_server(self) -> TestbedControlServer<Self> {
        TestbedControlServer::new(self)
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, Status> {
        self.testbed.server(name).ok_or_else(|| {
            let known: Vec<&str> = self.testbed.servers().iter().map(|s| s.name()).collect();
            Status::not_found(format!("no server is named {name:?} (servers: {known:?})"))
        })
    }
}

fn to_status(error: ServerError) -> Status {
    match error {
        ServerError::Bind { .. } | ServerError::Stopped { .. } => {
            Status::unavailable(error.to_string())
        }
        _ => Status::invalid_argument(error.to_string()),
    }
}

/// The control API's `Any` (prost-types) as the `Any` of the xDS types.
fn to_envoy_any(any: prost_types::Any) -> envoy_types::pb::google::protobuf::Any {
    envoy_types::pb::google::protobuf::Any {
        type_url: any.type_url,
        value: any.value,
    }
}

/// `report` of the wait for `version`, as the control API answers it.
fn wait_acked_response(report: AckReport, version: String) -> pb::WaitAckedResponse {
    pb::WaitAckedResponse {
        acked_by: report.acked_by,
        nacked_by: report
            .nacked_by
            .into_iter()
            .map(|n| pb::ClientNack {
                node_id: n.node_id,
                error: n.error,
                peer: n.peer.map(|p| p.to_string()).unwrap_or_default(),
            })
            .collect(),
        timed_out: report.timed_out,
        pending: report.pending,
        version,
    }
}

fn duration(field: &str, value: Option<prost_types::Duration>) -> Result<Option<Duration>, Status> {
    let Some(value) = value else {
        return Ok(None);
    };
    // Checked by hand: prost's own conversion negates `seconds`, which
    // overflows for the most negative value.
    let (Ok(seconds), Ok(nanos)) = (u64::try_from(value.seconds), u32::try_from(value.nanos))
    else {
        return Err(Status::invalid_argument(format!(
            "{field}: a duration must not be negative"
        )));
    };
    if nanos >= 1_000_000_000 {
        return Err(Status::invalid_argument(format!(
            "{field}: nanos must be below 1,000,000,000"
        )));
    }
    let d = Duration::new(seconds, nanos);
    if d > MAX_WAIT {
        return Err(Status::invalid_argument(format!(
            "{field}: {d:?} is longer than the maximum of {MAX_WAIT:?}"
        )));
    }
    Ok(Some(d))
}

fn faults_from_pb(faults: pb::Faults) -> Result<Faults, Status> {
    let response_delay =
        duration("faults.response_delay", faults.response_delay)?.filter(|d| !d.is_zero());
    let inject = faults
        .inject
        .into_iter()
        .enumerate()
        .map(|(i, injected)| {
            let resource = injected.resource.ok_or_else(|| {
                Status::invalid_argument(format!("faults.inject[{i}].resource is unset"))
            })?;
            Ok(Injected {
                name: injected.name,
                resource: to_envoy_any(resource),
            })
        })
        .collect::<Result<_, Status>>()?;
    for (name, target) in &faults.redirects {
        XdstpName::parse(target).map_err(|e| {
            Status::invalid_argument(format!(
                "faults.redirects[{name:?}]: the target {target:?} is not an xdstp name: {e}"
            ))
        })?;
    }
    Ok(Faults {
        refuse_connections: faults.refuse_connections,
        close_immediately: faults.close_immediately,
        close_after_responses: (faults.close_after_responses > 0)
            .then_some(faults.close_after_responses),
        // The control API has no field for it: UNAVAILABLE.
        close_code: None,
        response_delay,
        silent_names: faults.silent_names.into_iter().collect::<BTreeSet<_>>(),
        silent_types: faults.silent_types.into_iter().collect(),
        malformed_names: faults.malformed_names.into_iter().collect(),
        duplicate_names: faults.duplicate_names.into_iter().collect(),
        inject,
        redirects: faults.redirects.into_iter().collect::<BTreeMap<_, _>>(),
        delta_unimplemented: faults.delta_unimplemented,
        // REST-only faults; the control API has no fields for them.
        http_status: None,
        malformed_body: false,
        // HTTP CDN faults; the control API has no fields for them.
        cdn_status: None,
        cdn_malformed_body: false,
    })
}

fn faults_to_pb(faults: Faults) -> pb::Faults {
    pb::Faults {
        refuse_connections: faults.refuse_connections,
        close_after_responses: faults.close_after_responses.unwrap_or(0),
        close_immediately: faults.close_immediately,
        response_delay: faults
            .response_delay
            .and_then(|d| prost_types::Duration::try_from(d).ok()),
        silent_names: faults.silent_names.into_iter().collect(),
        silent_types: faults.silent_types.into_iter().collect(),
        malformed_names: faults.malformed_names.into_iter().collect(),
        duplicate_names: faults.duplicate_names.into_iter().collect(),
        inject: faults
            .inject
            .into_iter()
            .map(|i| pb::InjectedResource {
                name: i.name,
                resource: Some(prost_types::Any {
                    type_url: i.resource.type_url,
                    value: i.resource.value,
                }),
            })
            .collect(),
        redirects: faults.redirects.into_iter().collect(),
        delta_unimplemented: faults.delta_unimplemented,
    }
}

#[tonic::async_trait]
impl TestbedControl for ControlService {
    async fn list_servers(
        &self,
        _request: Request<pb::ListServersRequest>,
    ) -> Result<Response<pb::ListServersResponse>, Status> {
        let servers = self
            .testbed
            .servers()
            .iter()
            .enumerate()
            .map(|(id, s)| pb::Server {
                id: u32::try_from(id).unwrap_or(u32::MAX),
                name: s.name().to_owned(),
                address: s.addr().to_string(),
                authorities: s.authorities().to_vec(),
            })
            .collect();
        let backends = self
            .testbed
            .backends()
            .iter()
            .map(|b| pb::Backend {
                name: b.name().to_owned(),
                address: b.addr().to_string(),
            })
            .collect();
        Ok(Response::new(pb::ListServersResponse { servers, backends }))
    }

    async fn set_resource(
        &self,
        request: Request<pb::SetResourceRequest>,
    ) -> Result<Response<pb::SetResourceResponse>, Status> {
        let request = request.into_inner();
        let server = self.server(&request.server)?;
        let resource = request
            .resource
            .ok_or_else(|| Status::invalid_argument("resource is unset"))?;
        let stored = server
            .set_resource(&request.name, to_envoy_any(resource))
            .map_err(to_status)?;
        Ok(Response::new(pb::SetResourceResponse {
            version: stored.version.clone(),
        }))
    }

    async fn delete_resource(
        &self,
        request: Request<pb::DeleteResourceRequest>,
    ) -> Result<Response<pb::DeleteResourceResponse>, Status> {
        let request = request.into_inner();
        let existed = self
            .server(&request.server)?
            .delete_resource(&request.type_url, &request.name)
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteResourceResponse { existed }))
    }

    async fn set_faults(
        &self,
        request: Request<pb::SetFaultsRequest>,
    ) -> Result<Response<pb::SetFaultsResponse>, Status> {
        let request = request.into_inner();
        let server = self.server(&request.server)?;
        let faults = faults_from_pb(request.faults.unwrap_or_default())?;
        server.set_faults(faults);
        Ok(Response::new(pb::SetFaultsResponse {}))
    }

    async fn get_faults(
        &self,
        request: Request<pb::GetFaultsRequest>,
    ) -> Result<Response<pb::GetFaultsResponse>, Status> {
        let server = self.server(&request.get_ref().server)?;
        Ok(Response::new(pb::GetFaultsResponse {
            faults: Some(faults_to_pb(server.faults())),
        }))
    }

    async fn restart_server(
        &self,
        request: Request<pb::RestartServerRequest>,
    ) -> Result<Response<pb::RestartServerResponse>, Status> {
        let request = request.into_inner();
        let server = self.server(&request.server)?;
        let down_for = duration("down_for", request.down_for)?.unwrap_or_default();
        server
            .restart(request.keep_state, down_for)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::RestartServerResponse {}))
    }

    async fn wait_acked(
        &self,
        request: Request<pb::WaitAckedRequest>,
    ) -> Result<Response<pb::WaitAckedResponse>, Status> {
        let request = request.into_inner();
        let server = self.server(&request.server)?;
        let timeout = duration("timeout", request.timeout)?.unwrap_or(DEFAULT_WAIT);
        if let Protocol::PolicyStream { .. } = server.protocol() {
            // Answers are per snapshot there: the version clients ACK is the
            // snapshot's, not the content hash of the policy named.
            let (version, report) = server.policies().wait_acked(timeout).await;
            return Ok(Response::new(wait_acked_response(report, version)));
        }
        let version = if request.version.is_empty() {
            server
                .store()
                .get(&request.type_url, &request.name)
                .map(|s| s.version.clone())
                .ok_or_else(|| {
                    Status::not_found(format!(
                        "server {:?} holds no {} named {:?}; give `version` to wait for one that is gone",
                        request.server, request.type_url, request.name
                    ))
                })?
        } else {
            request.version
        };
        let report = server
            .wait_acked(&request.type_url, &request.name, Some(&version), timeout)
            .await
            .map_err(to_status)?;
        Ok(Response::new(wait_acked_response(report, version)))
    }

    async fn list_clients(
        &self,
        request: Request<pb::ListClientsRequest>,
    ) -> Result<Response<pb::ListClientsResponse>, Status> {
        let server = self.server(&request.get_ref().server)?;
        let clients = server
            .clients()
            .into_iter()
            .map(|c| pb::Client {
                node_id: c.node_id,
                last_request_unix_ms: c
                    .last_request
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
                streams: u32::try_from(c.streams).unwrap_or(u32::MAX),
                peer: c.peer.map(|p| p.to_string()).unwrap_or_default(),
            })
            .collect();
        Ok(Response::new(pb::ListClientsResponse { clients }))
    }

    async fn list_streams(
        &self,
        request: Request<pb::ListStreamsRequest>,
    ) -> Result<Response<pb::ListStreamsResponse>, Status> {
        let server = self.server(&request.get_ref().server)?;
        let recording = server.recording();
        let streams = recording
            .streams()
            .into_iter()
            .map(|s| {
                let requests = s.events.iter().filter(|e| e.message.is_request()).count();
                pb::StreamSummary {
                    id: s.id,
                    variant: match s.variant {
                        Variant::Delta => "delta",
                        Variant::Sotw => "sotw",
                    }
                    .to_owned(),
                    node_id: s.node_id.clone().unwrap_or_default(),
                    requests: u32::try_from(requests).unwrap_or(u32::MAX),
                    responses: u32::try_from(s.response_count()).unwrap_or(u32::MAX),
                    closed: s.closed.map(|(_, why)| why).unwrap_or_default(),
                    dropped_events: s.dropped_events,
                }
            })
            .collect();
        Ok(Response::new(pb::ListStreamsResponse {
            streams,
            dropped_streams: recording.dropped_streams(),
        }))
    }
}
