//! The HTTP side of a REST-JSON source: one POST of a `DiscoveryRequest`
//! as JSON, its answer read back within the deadline and the size bound.
//!
//! What the body says is `response`'s to read; a failure here is the
//! server's or the network's: no answer in time, a status other than 200
//! and 304, a body over the bound.
//!
//! HTTP/1.1 over TCP, or over TLS (rustls, the same `tls` credentials as
//! the gRPC transport), with connections kept for the next poll. Every
//! request, the connection it may need included, is bounded by
//! `request_timeout`; a body over `max_message_size` is refused without
//! being read further.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;

use crate::source::call_creds::CallCredentials;
use crate::source::http::{Stream, error_chain};
use crate::tls::{client_config, read_tls_files};
use crate::transport::TransportError;
use xdsfed_core::bootstrap::{ChannelCreds, ServerConfig};
use xdsfed_core::json::discovery_request_to_json;
use xdsfed_core::protocol::Initiator;
use xdsfed_core::source::rest::{Read, read};

/// gRPC's `DEADLINE_EXCEEDED`.
const DEADLINE_EXCEEDED: i32 = 4;
/// gRPC's `UNAVAILABLE`.
const UNAVAILABLE: i32 = 14;
/// gRPC's `INTERNAL`.
const INTERNAL: i32 = 13;

/// What a poll brought back.
#[derive(Debug)]
pub(crate) enum Answer {
    /// `200 OK` with a body, as far as it reads as a `DiscoveryResponse`
    /// of the polled type (a body that does not is the server's news, to
    /// NACK, not a failed poll).
    Response(Read),
    /// `304 Not Modified`: nothing changed since the request's version.
    NotModified,
}

/// Why a poll failed, as a gRPC status code and who caused it (for the
/// session's stream end) and a sentence naming the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) initiator: Initiator,
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl Failure {
    /// A failure the server answered with (an HTTP status, a body over the
    /// bound), or one of the request itself.
    fn new(code: i32, message: impl Into<String>) -> Self {
        Failure {
            initiator: Initiator::Server,
            code,
            message: message.into(),
        }
    }

    /// A connection that failed or never answered in time: refused, a
    /// failed TLS handshake, a reset, the request deadline.
    pub(crate) fn transport(code: i32, message: impl Into<String>) -> Self {
        Failure {
            initiator: Initiator::Transport,
            code,
            message: message.into(),
        }
    }
}

/// The client of one REST-JSON server. Cloning shares its connections.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    /// `http://host:port` or `https://host:port`.
    base: String,
    request_timeout: Duration,
    max_body: usize,
    /// The server's call credentials (gRFC A97), added to each request.
    call_creds: Option<Arc<CallCredentials>>,
}

impl HttpClient {
    /// The client of `server`; reads its TLS files.
    pub(crate) fn new(
        server: &ServerConfig,
        request_timeout: Duration,
        max_body: usize,
    ) -> Result<Self, TransportError> {
        let uri = &server.server_uri;
        let tls = match &server.channel_creds {
            ChannelCreds::Insecure => None,
            ChannelCreds::Tls {
                ca_certificate_file,
                certificate_file,
                private_key_file,
            } => {
                let files = read_tls_files(
                    uri,
                    ca_certificate_file.as_deref(),
                    certificate_file.as_deref(),
                    private_key_file.as_deref(),
                )?;
                Some(TlsConnector::from(Arc::new(client_config(
                    uri,
                    files,
                    &[b"http/1.1"],
                )?)))
            }
        };
        let base = base_uri(uri, tls.is_some());
        // Checked now, so that every poll's URI is known to parse.
        base.parse::<Uri>().map_err(|e| TransportError::BadTarget {
            uri: uri.clone(),
            why: e.to_string(),
        })?;
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(Connector { tls });
        Ok(HttpClient {
            client,
            base,
            request_timeout,
            max_body,
            call_creds: CallCredentials::of(server),
        })
    }

    /// POSTs `request` to `/v3/discovery:{path}` and reads the answer, all
    /// within `request_timeout`.
    pub(crate) async fn post(
        &self,
        path: &str,
        request: &DiscoveryRequest,
    ) -> Result<Answer, Failure> {
        let url = format!("{}/v3/discovery:{path}", self.base);
        let body = discovery_request_to_json(request)
            .map_err(|e| Failure::new(INTERNAL, format!("cannot encode the request: {e}")))?;
        let mut http_request = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Failure::new(INTERNAL, format!("{url}: {e}")))?;
        if let Some(creds) = &self.call_creds {
            // Read for each request, so that a rotated token is used by the
            // next poll; a token that cannot be sent fails the poll as the
            // connection would.
            let values = creds
                .headers()
                .map_err(|e| Failure::transport(e.code() as i32, e.message))?;
            for value in values {
                http_request
                    .headers_mut()
                    .append(header::AUTHORIZATION, value);
            }
        }
        let exchange = self.exchange(&request.type_url, http_request);
        match tokio::time::timeout(self.request_timeout, exchange).await {
            Ok(result) => result.map_err(|f| Failure {
                message: format!("POST {url}: {}", f.message),
                ..f
            }),
            Err(_) => Err(Failure::transport(
                DEADLINE_EXCEEDED,
                format!(
                    "POST {url}: no answer within {:?} (request_timeout)",
                    self.request_timeout
                ),
            )),
        }
    }

    async fn exchange(
        &self,
        type_url: &str,
        request: Request<Full<Bytes>>,
    ) -> Result<Answer, Failure> {
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Failure::transport(UNAVAILABLE, error_chain(&e)))?;
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Answer::NotModified);
        }
        if status != StatusCode::OK {
            return Err(Failure::new(
                code_of_status(status),
                format!("HTTP status {status}"),
            ));
        }
        let too_large = || {
            Failure::new(
                INTERNAL,
                format!(
                    "a response of more than {} bytes is over the message size limit \
                     (TransportOptions::max_text_message_size for JSON)",
                    self.max_body
                ),
            )
        };
        let declared = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_large());
        }
        let body = Limited::new(response.into_body(), self.max_body)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    too_large()
                } else {
                    Failure::transport(UNAVAILABLE, format!("reading the body: {e}"))
                }
            })?
            .to_bytes();
        Ok(Answer::Response(read(type_url, &body)))
    }
}

/// The gRPC code for an HTTP status, after gRPC's HTTP-to-gRPC mapping:
/// a server or gateway failing is UNAVAILABLE, a path the server does not
/// serve UNIMPLEMENTED.
fn code_of_status(status: StatusCode) -> i32 {
    match status.as_u16() {
        400 => INTERNAL,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => UNAVAILABLE,
        _ => 2,
    }
}

/// `server_uri` with its scheme: as given, or `https://` with TLS
/// credentials and `http://` without; no trailing `/`.
fn base_uri(uri: &str, tls: bool) -> String {
    let uri = uri.strip_suffix('/').unwrap_or(uri);
    if uri.contains("://") {
        uri.to_owned()
    } else if tls {
        format!("https://{uri}")
    } else {
        format!("http://{uri}")
    }
}

/// Connects to a REST server: TCP, then TLS when configured.
#[derive(Clone)]
struct Connector {
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<TokioIo<Stream>, std::io::Error>> + Send>>;

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = std::io::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = self.tls.clone();
        Box::pin(async move {
            let invalid =
                |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_owned());
            let host = uri.host().ok_or_else(|| invalid("the URI has no host"))?;
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri
                .port_u16()
                .unwrap_or(if tls.is_some() { 443 } else { 80 });
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            // Small requests must not wait for Nagle's algorithm.
            tcp.set_nodelay(true)?;
            let Some(tls) = tls else {
                return Ok(TokioIo::new(Stream::Plain(tcp)));
            };
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|e| invalid(&format!("server name: {e}")))?;
            let stream = tls.connect(name, tcp).await?;
            Ok(TokioIo::new(Stream::Tls(Box::new(stream))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_uri_takes_its_scheme_from_the_uri_or_the_credentials() {
        assert_eq!(base_uri("http://h:1/", false), "http://h:1");
        assert_eq!(base_uri("h:1", true), "https://h:1");
        assert_eq!(base_uri("h:1", false), "http://h:1");
    }

    #[test]
    fn server_errors_are_unavailable_and_a_missing_path_unimplemented() {
        assert_eq!(code_of_status(StatusCode::SERVICE_UNAVAILABLE), UNAVAILABLE);
        assert_eq!(code_of_status(StatusCode::NOT_FOUND), 12);
        assert_eq!(code_of_status(StatusCode::INTERNAL_SERVER_ERROR), 2);
    }
}
