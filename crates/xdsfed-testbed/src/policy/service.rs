//! `ValidatingPolicyService` over the [`PolicyPlane`], with the server's
//! faults.
//!
//! | fault | effect on a policy stream |
//! | --- | --- |
//! | `refuse_connections`, `close_immediately` | the stream ends with `UNAVAILABLE` before any response |
//! | `close_after_responses: K` (`close_code`) | the stream ends right after its K-th response |
//! | `response_delay` | every response leaves that much later |
//! | `silent_types` holding the policy type URL | the server goes silent: requests are processed (ACKs count) but nothing is sent |
//!
//! A restart ([`crate::Server::restart`]) ends every stream and renews the
//! nonce.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::stub::validating_policy_service_server::ValidatingPolicyService;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};
use xdsfed_core::policy_stream::wire::{
    HealthCheckRequest, HealthCheckResponse, PolicyDiscoveryRequest, PolicyDiscoveryResponse,
};
use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

use super::plane::{Call, CallKind, PolicyPlane};
use crate::faults::Faults;
use crate::server::Shared;

type Outbound = mpsc::Sender<Result<PolicyDiscoveryResponse, Status>>;

/// The service of one server run.
#[derive(Debug)]
pub(crate) struct PolicyService {
    pub(crate) shared: Arc<Shared>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) streams: AtomicU64,
}

impl PolicyService {
    fn plane(&self) -> &PolicyPlane {
        &self.shared.policies
    }
}

/// A call of `kind` with the `authorization` values of `metadata`.
fn call(kind: CallKind, metadata: &tonic::metadata::MetadataMap) -> Call {
    Call {
        kind,
        authorization: metadata
            .get_all("authorization")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect(),
    }
}

#[tonic::async_trait]
impl ValidatingPolicyService for PolicyService {
    type PolicyDiscoveryStreamStream = ReceiverStream<Result<PolicyDiscoveryResponse, Status>>;

    async fn policy_discovery_stream(
        &self,
        request: Request<Streaming<PolicyDiscoveryRequest>>,
    ) -> Result<Response<Self::PolicyDiscoveryStreamStream>, Status> {
        self.plane()
            .note_call(call(CallKind::Stream, request.metadata()));
        let faults = self.shared.faults();
        if faults.refuse_connections || faults.close_immediately {
            return Err(Status::unavailable("fault: the stream is refused"));
        }
        let (tx, rx) = mpsc::channel(16);
        let stream = Stream {
            shared: Arc::clone(&self.shared),
            id: self.streams.fetch_add(1, Ordering::Relaxed),
            shutdown: self.shutdown.clone(),
            out: tx,
            responses: 0,
        };
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn health_check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.plane()
            .note_call(call(CallKind::HealthCheck, request.metadata()));
        let request = request.into_inner();
        if request.client_address.is_empty() {
            return Err(Status::invalid_argument("client address required"));
        }
        self.plane()
            .health_check(&request.client_address, SystemTime::now());
        Ok(Response::new(HealthCheckResponse {}))
    }
}

/// One client's stream.
struct Stream {
    shared: Arc<Shared>,
    id: u64,
    shutdown: watch::Receiver<bool>,
    out: Outbound,
    responses: u32,
}

impl Stream {
    async fn run(mut self, mut inbound: Streaming<PolicyDiscoveryRequest>) {
        let first = match self.next(&mut inbound).await {
            Some(first) => first,
            None => return,
        };
        let client = first.client_address;
        if client.is_empty() {
            let _ = self
                .out
                .send(Err(Status::invalid_argument("client address required")))
                .await;
            return;
        }
        let plane = &self.shared.policies;
        plane.register(&client, self.id, SystemTime::now());
        tracing::debug!(%client, stream = self.id, "policy client connected");
        let snapshot = self.shared.policies.snapshot();
        if self.send(snapshot).await {
            while let Some(request) = self.next(&mut inbound).await {
                let plane = &self.shared.policies;
                plane.heard_from(&client, self.id, SystemTime::now());
                let processed = plane.process(&client, &request);
                if let super::Processed::Nack(error) = &processed {
                    tracing::info!(%client, %error, "policy snapshot NACKed");
                }
                if let Some(response) = processed.response()
                    && !self.send(response).await
                {
                    break;
                }
            }
        }
        self.shared.policies.unregister(&client, self.id);
        tracing::debug!(%client, stream = self.id, "policy client gone");
    }

    /// The next request, or `None` when the stream or the server ends.
    async fn next(
        &mut self,
        inbound: &mut Streaming<PolicyDiscoveryRequest>,
    ) -> Option<PolicyDiscoveryRequest> {
        tokio::select! {
            message = inbound.message() => return message.ok().flatten(),
            () = stopped(&mut self.shutdown) => {}
        }
        let _ = self
            .out
            .send(Err(Status::unavailable("server stopping")))
            .await;
        None
    }

    /// Sends `response` under the faults in force; `false` when the stream
    /// must end.
    async fn send(&mut self, response: PolicyDiscoveryResponse) -> bool {
        let faults: Arc<Faults> = self.shared.faults();
        if faults.silent_types.contains(VALIDATING_POLICY_TYPE_URL) {
            return true;
        }
        if let Some(delay) = faults.response_delay {
            tokio::time::sleep(delay.min(Duration::from_secs(3600))).await;
        }
        if self.out.send(Ok(response)).await.is_err() {
            return false;
        }
        self.responses += 1;
        if faults
            .close_after_responses
            .is_some_and(|k| self.responses >= k)
        {
            let code = faults.close_code.unwrap_or(Code::Unavailable);
            // OK ends the stream as if the server were done with it.
            if code != Code::Ok {
                let _ = self
                    .out
                    .send(Err(Status::new(code, "fault: closing after responses")))
                    .await;
            }
            return false;
        }
        true
    }
}

/// Resolves when the server run stops (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns must not live across an await.
    let _ = shutdown.wait_for(|stop| *stop).await.map(drop);
}
