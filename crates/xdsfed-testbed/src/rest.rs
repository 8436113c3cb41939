//! The REST-JSON service of a server started with [`crate::Protocol::Rest`]:
//! `POST /v3/discovery:{type}` with a `DiscoveryRequest` as JSON, answered
//! with the state of the world of that type as a `DiscoveryResponse` in
//! JSON (xds-protocol-v3, "REST-JSON polling subscriptions").
//!
//! ```text
//!  POST /v3/discovery:clusters ─► faults (refuse, http_status, silent type, delay)
//!                              ─► the client's entry (by node id): Subscription per type,
//!                                 Recorder and AckTracker as for one SotW stream
//!                              ─► select + wire faults (same code as SotW ADS)
//!                              ─► 200 DiscoveryResponse | 304 Not Modified
//! ```
//!
//! With a [`crate::ServerTls`] the service is served over TLS (HTTPS),
//! as the client's REST-JSON source speaks it with `tls` credentials. The
//! `Authorization` values of each client's latest request are recorded
//! ([`crate::StreamRecord::authorization`]).
//!
//! There is no stream, so a client is its node id: its first request opens
//! a SotW entry in the recorder and the tracker, which its later requests
//! share, and which closes when the server stops. A request that echoes the
//! nonce of the client's last response of the type ACKs or NACKs it, as on
//! a stream.
//!
//! A request answered before, whose names have not changed and whose
//! version is the one the server would send again, gets `304 Not
//! Modified` and no body: "avoid sending a DiscoveryResponse unless a
//! change to the underlying resources has occurred". A NACK names the
//! previous version, so it is answered in full again.
//!
//! REST-only faults: [`Faults::http_status`](crate::Faults::http_status)
//! answers every request with that status, and
//! [`Faults::malformed_body`](crate::Faults::malformed_body) with a body
//! that is not a `DiscoveryResponse`. `refuse_connections` closes new
//! connections at once and answers `503` on open ones; a type in
//! `silent_types` is never answered (the request is held until the server
//! stops, or [`SILENT_HOLD`] passes and it gets `304`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use xdsfed_core::json::{discovery_request_from_json, discovery_response_to_json};
use xdsfed_core::protocol::DEFAULT_MAX_MESSAGE_SIZE;
use xdsfed_core::source::rest::type_url_of_path;

use crate::ads::{select, stopped};
use crate::recording::{Message, Variant};
use crate::server::Shared;
use crate::subscription::Subscription;
use crate::version;

/// How long a request for a silenced type is held before `304`.
pub const SILENT_HOLD: Duration = Duration::from_secs(30);

/// The body the `malformed_body` fault sends.
pub const MALFORMED_BODY: &[u8] = b"{\"version_info\": \"1\", \"resources\": [";

/// What one type remembers for one client.
#[derive(Debug, Default)]
struct TypeState {
    sub: Subscription,
    last_nonce: Option<String>,
}

/// One client (node id): its recorder/tracker entry and its types.
#[derive(Debug)]
struct Client {
    id: u64,
    next_nonce: u64,
    types: HashMap<String, TypeState>,
}

/// The state of one server run's REST service.
#[derive(Debug)]
struct Service {
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    clients: Mutex<HashMap<String, Client>>,
}

impl Service {
    fn clients(&self) -> MutexGuard<'_, HashMap<String, Client>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes every client's entry (the run is over).
    fn close_all(&self) {
        for (_, client) in self.clients().drain() {
            self.shared
                .recorder
                .close(client.id, "server stopped".to_owned());
            self.shared.tracker.close(client.id);
        }
    }
}

/// What the locked part of a request decided.
enum Decision {
    NotModified,
    Respond(DiscoveryResponse, u64),
}

/// Serves REST on `listener` until `stop` turns true.
pub(crate) fn spawn(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let service = Arc::new(Service {
        shared: Arc::clone(&shared),
        shutdown: stop.clone(),
        clients: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/v3/{call}", post(discovery))
        .layer(DefaultBodyLimit::max(DEFAULT_MAX_MESSAGE_SIZE))
        .with_state(Arc::clone(&service));
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                () = stopped(&mut stop) => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "REST server: accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            // Refusing a connection means closing it right after accept.
            if shared.faults().refuse_connections {
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let hyper_service = TowerToHyperService::new(app.clone());
            let tls = tls.clone();
            connections.spawn(async move {
                let http1 = hyper::server::conn::http1::Builder::new();
                let served = match tls {
                    None => {
                        http1
                            .serve_connection(TokioIo::new(stream), hyper_service)
                            .await
                    }
                    // A failed handshake is the client's to report.
                    Some(tls) => match tls.accept(stream).await {
                        Ok(stream) => {
                            http1
                                .serve_connection(TokioIo::new(stream), hyper_service)
                                .await
                        }
                        Err(_) => return,
                    },
                };
                if let Err(e) = served {
                    tracing::debug!(error = %e, "REST connection ended");
                }
            });
            // Reap finished connections so the set stays as small as the
            // open ones.
            while connections.try_join_next().is_some() {}
        }
        connections.abort_all();
        service.close_all();
    })
}

/// `POST /v3/discovery:{type}`.
async fn discovery(
    State(service): State<Arc<Service>>,
    Path(call): Path<String>,
    headers: http::HeaderMap,
    body: Bytes,
) -> Response {
    let faults = service.shared.faults();
    if faults.refuse_connections {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "fault: refusing connections",
        );
    }
    if let Some(code) = faults.http_status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return plain(status, "fault: http_status");
    }
    let Some(type_url) = call.strip_prefix("discovery:").and_then(type_url_of_path) else {
        return plain(StatusCode::NOT_FOUND, "no such discovery path");
    };
    let mut request = match discovery_request_from_json(&body) {
        Ok(request) => request,
        Err(e) => {
            return plain(
                StatusCode::BAD_REQUEST,
                &format!("not a DiscoveryRequest: {e}"),
            );
        }
    };
    if request.type_url.is_empty() {
        request.type_url = type_url.to_owned();
    } else if request.type_url != type_url {
        return plain(
            StatusCode::BAD_REQUEST,
            &format!("type_url {:?} does not match the path", request.type_url),
        );
    }
    if faults.silent_types.contains(type_url) {
        let mut shutdown = service.shutdown.clone();
        tokio::select! {
            () = tokio::time::sleep(SILENT_HOLD) => {}
            () = stopped(&mut shutdown) => {}
        }
        return plain(StatusCode::NOT_MODIFIED, "");
    }
    let authorization: Vec<String> = headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let (response, id) = match decide(&service, request, authorization) {
        Decision::NotModified => return plain(StatusCode::NOT_MODIFIED, ""),
        Decision::Respond(response, id) => (response, id),
    };
    if let Some(delay) = faults.response_delay {
        tokio::time::sleep(delay).await;
    }
    service
        .shared
        .recorder
        .record(id, false, &response, Message::Response);
    if faults.malformed_body {
        return json(MALFORMED_BODY.to_vec());
    }
    match discovery_response_to_json(&response) {
        Ok(body) => json(body),
        Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Books the request for its client and decides the answer: what the
/// client's subscription selects now, or "not modified".
fn decide(service: &Service, request: DiscoveryRequest, authorization: Vec<String>) -> Decision {
    let shared = &service.shared;
    let node = request
        .node
        .as_ref()
        .map(|n| n.id.clone())
        .unwrap_or_default();
    let mut clients = service.clients();
    let client = clients.entry(node.clone()).or_insert_with(|| {
        let id = shared.recorder.open(Variant::Sotw);
        shared.tracker.open(id, None);
        Client {
            id,
            next_nonce: 0,
            types: HashMap::new(),
        }
    });
    let id = client.id;
    if !node.is_empty() {
        shared.recorder.set_node(id, &node);
    }
    shared.recorder.set_authorization(id, authorization);
    shared
        .tracker
        .request(id, Some(node.as_str()).filter(|n| !n.is_empty()));
    shared.recorder.record(id, true, &request, Message::Request);
    let type_url = request.type_url.clone();
    let state = client.types.entry(type_url.clone()).or_default();
    let echoes_last = !request.response_nonce.is_empty()
        && state.last_nonce.as_deref() == Some(request.response_nonce.as_str());
    if echoes_last {
        let error = request.error_detail.as_ref().map(|s| s.message.clone());
        shared.tracker.answered(id, &request.response_nonce, error);
    }
    let change = state.sub.apply_sotw(&request.resource_names);
    shared.tracker.subscribed(id, &type_url, &state.sub);
    let faults = shared.faults();
    let (_, table) = shared.store.table(&type_url);
    let selected = select(&faults, &type_url, &state.sub, &table);
    let carried: Vec<_> = selected.wanted.into_values().collect();
    let version_info = version::of_pairs(carried.iter().map(|o| (o.wire.as_str(), o.version())));
    let unchanged = change.subscribed.is_empty() && change.unsubscribed.is_empty();
    if echoes_last
        && unchanged
        && request.error_detail.is_none()
        && request.version_info == version_info
    {
        return Decision::NotModified;
    }
    client.next_nonce += 1;
    let nonce = format!("rest-{id}-{}", client.next_nonce);
    state.last_nonce = Some(nonce.clone());
    shared.tracker.sent(id, &nonce, &type_url, &carried);
    let response = DiscoveryResponse {
        version_info,
        resources: crate::ads::on_the_wire(&faults, &type_url, &carried)
            .into_iter()
            .map(|(_, resource, _)| resource)
            .collect(),
        type_url,
        nonce,
        ..Default::default()
    };
    Decision::Respond(response, id)
}

fn plain(status: StatusCode, text: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        text.to_owned(),
    )
        .into_response()
}

fn json(body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
