//! A server started with [`crate::Protocol::HttpCdn`] is a static file
//! host: it answers HTTP/1.1 `GET`s of the resources in its store at the
//! URLs an xdsfed HTTP CDN source fetches (docs/federation.md, "HTTP CDN
//! delivery"), each file a `DiscoveryResponse` holding that one resource.
//!
//! ```text
//! GET /AUTH/TYPE/ID…?params   ─► the store's xdstp://AUTH/TYPE/ID…?params of type.googleapis.com/TYPE
//! GET /TYPE/NAME              ─► the store's old-style NAME (one percent-encoded segment)
//!   200  body: DiscoveryResponse (protobuf; JSON when the request accepts application/json)
//!        ETag: "<the stored version>" ("<version>+json" for JSON)
//!        Vary: Accept
//!   304  If-None-Match names the current ETag of the representation asked for
//!   404  nothing stored under that name
//! ```
//!
//! Faults that apply: `refuse_connections` (new connections closed at
//! once, requests on open ones dropped with their connection, unanswered),
//! `response_delay` (every answer held back), `malformed_names` (the
//! resource's bytes do not decode), `redirects` (the file holds a
//! `ResourceLocator`), and two of the CDN's own: `cdn_status` (every `GET`
//! answered with that status, empty) and `cdn_malformed_body` (a `200`
//! whose body is not a `DiscoveryResponse`). Every request is logged:
//! [`crate::Server::cdn_requests`]. With [`crate::ServerTls`] it serves
//! HTTPS, HTTP/2 to a client that offers `h2` by ALPN and HTTP/1.1 to
//! others (and with a client CA, requires client certificates).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use xdsfed_core::name::resource_of_url_path;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::faults::{MALFORMED_BYTES, redirect_any};
use crate::server::{ServerTls, Shared};

/// The most requests the log keeps; older ones are dropped.
const LOG_LIMIT: usize = 10_000;

/// One `GET` a CDN server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdnRequest {
    /// The path and query, as requested.
    pub path: String,
    /// The `If-None-Match` header, if any.
    pub if_none_match: Option<String>,
    /// The status answered.
    pub status: u16,
    /// The HTTP version it came over: HTTP/2 when a TLS client chose `h2`.
    pub version: http::Version,
    /// The `Authorization` header, if any: what a client's call
    /// credentials sent (gRFC A97).
    pub authorization: Option<String>,
}

/// The requests a CDN server answered, oldest first.
#[derive(Debug, Default)]
pub(crate) struct CdnLog(Mutex<Vec<CdnRequest>>);

impl CdnLog {
    fn push(&self, request: CdnRequest) {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() >= LOG_LIMIT {
            log.remove(0);
        }
        log.push(request);
    }

    pub(crate) fn all(&self) -> Vec<CdnRequest> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// TLS for a CDN server from its PEM credentials (HTTP/2 or HTTP/1.1, as
/// the client chooses by ALPN, as CDNs offer both); with
/// a client CA, clients must present a certificate it signed.
pub(crate) fn tls_acceptor(tls: &ServerTls) -> Result<TlsAcceptor, String> {
    let certs = CertificateDer::pem_slice_iter(tls.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(tls.key_pem.as_bytes())
        .map_err(|e| format!("private key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &tls.client_ca_pem {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots
                    .add(cert.map_err(|e| format!("client CA: {e}"))?)
                    .map_err(|e| format!("client CA: {e}"))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| format!("client CA: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Why a request on an open connection got no answer.
#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refusing connections")
    }
}

impl std::error::Error for Refused {}

/// Serves `listener` until `stop` turns true; connections still open
/// then are dropped.
pub(crate) fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stop.wait_for(|s| *s) => return,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            if shared.faults().refuse_connections {
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let shared = Arc::clone(&shared);
            let tls = tls.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let shared = Arc::clone(&shared);
                    async move {
                        // An error closes the connection without an answer:
                        // on an open connection, the nearest to a refusal.
                        if shared.faults().refuse_connections {
                            return Err(Refused);
                        }
                        Ok(answer(&shared, request).await)
                    }
                });
                match tls {
                    None => serve_http1(stream, service).await,
                    // A failed handshake is the client's to report.
                    Some(tls) => {
                        if let Ok(stream) = tls.accept(stream).await {
                            if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                                let http = hyper::server::conn::http2::Builder::new(
                                    hyper_util::rt::TokioExecutor::new(),
                                );
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            } else {
                                serve_http1(stream, service).await;
                            }
                        }
                    }
                }
            });
        }
    })
}

/// Serves one HTTP/1.1 connection until it closes.
async fn serve_http1<S, F>(stream: S, service: F)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    F: hyper::service::Service<Request<Incoming>, Response = Response<Full<Bytes>>> + Send,
    F::Future: Send + 'static,
    F::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let http = hyper::server::conn::http1::Builder::new();
    let _ = http.serve_connection(TokioIo::new(stream), service).await;
}

/// The answer to one request, logged.
async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let faults = shared.faults();
    if let Some(delay) = faults.response_delay {
        tokio::time::sleep(delay).await;
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or_else(String::new, |p| p.as_str().to_owned());
    let if_none_match = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let version = request.version();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let json = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    let response = if request.method() != Method::GET {
        empty(StatusCode::METHOD_NOT_ALLOWED)
    } else if let Some(status) = faults.cdn_status {
        empty(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
    } else if faults.cdn_malformed_body {
        body(
            StatusCode::OK,
            None,
            false,
            Bytes::from_static(MALFORMED_BYTES),
        )
    } else {
        file(shared, &request, if_none_match.as_deref(), json)
    };
    shared.cdn_log.push(CdnRequest {
        path,
        if_none_match,
        status: response.status().as_u16(),
        version,
        authorization,
    });
    response
}

/// The file at the request's path: `200`, `304` or `404`.
fn file(
    shared: &Shared,
    request: &Request<Incoming>,
    if_none_match: Option<&str>,
    json: bool,
) -> Response<Full<Bytes>> {
    let Some((type_url, key)) = resource_of(request.uri().path(), request.uri().query()) else {
        return empty(StatusCode::NOT_FOUND);
    };
    let Some(stored) = shared.store.get(&type_url, &key) else {
        return empty(StatusCode::NOT_FOUND);
    };
    let etag = etag_of(&stored.version, json);
    if if_none_match == Some(etag.as_str()) {
        let mut response = empty(StatusCode::NOT_MODIFIED);
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&etag) {
            headers.insert(header::ETAG, value);
        }
        headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        return response;
    }
    let faults = shared.faults();
    let mut resource = stored.resource.clone();
    if let Some(target) = faults.redirect_for(&stored.key) {
        resource = redirect_any(target);
    } else if faults.is_malformed(&stored.key) {
        resource.value = MALFORMED_BYTES.to_vec();
    }
    let response = DiscoveryResponse {
        version_info: stored.version.clone(),
        type_url: type_url.clone(),
        resources: vec![resource],
        ..Default::default()
    };
    let bytes = if json {
        match xdsfed_core::json::discovery_response_to_json(&response) {
            Ok(text) => Bytes::from(text),
            Err(_) => return empty(StatusCode::INTERNAL_SERVER_ERROR),
        }
    } else {
        Bytes::from(response.encode_to_vec())
    };
    body(StatusCode::OK, Some(&etag), json, bytes)
}

/// The type URL and name a path names, by the mapping the client fetches
/// by (`xdsfed_core::name::resource_of_url_path`): `/TYPE/NAME` for an
/// old-style name, else `/AUTH/TYPE/ID…` (with the query as context
/// parameters) for an xdstp name. `None` for a path no resource may have:
/// one with a segment that decodes to `.`, `..`, a separator or a control
/// character.
fn resource_of(path: &str, query: Option<&str>) -> Option<(String, String)> {
    resource_of_url_path(path, query).ok()
}

/// The strong `ETag` of one representation of `version`: JSON and
/// protobuf are different bytes, so a shared cache must not take one's
/// validator for the other's (RFC 9110 §8.8.3).
fn etag_of(version: &str, json: bool) -> String {
    if json {
        format!("\"{version}+json\"")
    } else {
        format!("\"{version}\"")
    }
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

fn body(status: StatusCode, etag: Option<&str>, json: bool, bytes: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(bytes));
    *response.status_mut() = status;
    let content_type = if json {
        "application/json"
    } else {
        "application/x-protobuf"
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The body depends on `Accept`: a shared cache keys on it.
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Some(value) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
        headers.insert(header::ETAG, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_xdstp_and_old_style_resources() {
        assert_eq!(
            resource_of(
                "/cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all",
                Some("b=2&a=1")
            ),
            Some((
                "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection".to_owned(),
                "xdstp://cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all?a=1&b=2"
                    .to_owned()
            ))
        );
        assert_eq!(
            resource_of("/envoy.config.cluster.v3.Cluster/pay%20v2", None),
            Some((
                "type.googleapis.com/envoy.config.cluster.v3.Cluster".to_owned(),
                "pay v2".to_owned()
            ))
        );
        assert_eq!(resource_of("/only-one", None), None);
    }

    /// A path whose segment decodes to a step or a separator names nothing.
    #[test]
    fn paths_that_climb_name_no_resource() {
        for path in [
            "/envoy.config.cluster.v3.Cluster/pay%2Fv2",
            "/envoy.config.cluster.v3.Cluster/%2E%2E",
            "/a/envoy.config.cluster.v3.Cluster/..%2F..%2Fsecret",
        ] {
            assert_eq!(resource_of(path, None), None, "{path}");
        }
    }
}
