//! The HTTP client of a CDN source: one hyper pooled client per server,
//! over plain TCP or rustls, one bounded `GET` at a time per call. Idle
//! connections are kept alive and reused, so with the session's bound on
//! fetches in flight a client holds at most that many HTTP/1.1 connections
//! to a server; over TLS it offers HTTP/2 by ALPN, and a server that takes
//! it gets a single connection carrying every fetch.
//!
//! Everything a fetch can go through is bounded: the whole fetch (connect,
//! TLS, headers, body) by `request_timeout`, the body by the client's
//! message size limit, the headers kept (`ETag`, `Content-Type`) by
//! [`HEADER_LIMIT`]. TLS trusts only the CA file of the bootstrap's `tls`
//! credentials (the platform's roots are not read), as the ADS transport
//! does, and presents the client certificate when one is given.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    AGE, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, DATE, ETAG, EXPIRES, HeaderMap,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER, USER_AGENT,
};
use http::{Request, Uri};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::source::call_creds::CallCredentials;
use crate::source::http::{Stream, error_chain};
use crate::tls::{client_config, read_tls_files};
use xdsfed_core::bootstrap::{ChannelCreds, ServerConfig};
use xdsfed_core::source::cdn::headers::{CachingHeaders, freshness, retry_after};
use xdsfed_core::source::cdn::reply::is_json;
use xdsfed_core::source::cdn::{Fetch, Fetched, HttpReply, MAX_IN_FLIGHT};

/// The longest `ETag` or `Content-Type` kept; a longer one is ignored.
pub(crate) const HEADER_LIMIT: usize = 1024;

/// The largest body read: a JSON one (by its `Content-Type`) costs more
/// to decode than binary protobuf, and has a bound of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    /// Binary protobuf (`TransportOptions::max_message_size`).
    pub(crate) binary: usize,
    /// JSON (`TransportOptions::text_message_limit`).
    pub(crate) text: usize,
}

/// A CDN source's HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: Client<Connector, Empty<Bytes>>,
    timeout: Duration,
    limits: BodyLimits,
    /// The server's call credentials (gRFC A97), added to each fetch.
    call_creds: Option<Arc<CallCredentials>>,
}

impl HttpClient {
    /// A client for `server` (TLS from its `tls` credentials); each fetch
    /// has `timeout`, each body at most as many bytes as `limits` allow its
    /// kind. Fails when the credentials cannot be read.
    pub(crate) fn new(
        server: &ServerConfig,
        timeout: Duration,
        limits: BodyLimits,
    ) -> Result<Self, String> {
        let tls = match &server.channel_creds {
            ChannelCreds::Insecure => None,
            ChannelCreds::Tls {
                ca_certificate_file,
                certificate_file,
                private_key_file,
            } => {
                let uri = &server.server_uri;
                let config = read_tls_files(
                    uri,
                    ca_certificate_file.as_deref(),
                    certificate_file.as_deref(),
                    private_key_file.as_deref(),
                )
                .and_then(|files| client_config(uri, files, &[b"h2", b"http/1.1"]))
                .map_err(|e| e.to_string())?;
                Some(TlsConnector::from(Arc::new(config)))
            }
        };
        let connector = Connector { tls, timeout };
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            // Connections beyond the fetches in flight would never be used.
            .pool_max_idle_per_host(MAX_IN_FLIGHT)
            .build(connector);
        Ok(HttpClient {
            client,
            timeout,
            limits,
            call_creds: CallCredentials::of(server),
        })
    }

    /// The `GET` of `fetch`, conditional on its validators.
    pub(crate) async fn get(&self, fetch: &Fetch) -> Fetched {
        match tokio::time::timeout(self.timeout, self.fetch(fetch)).await {
            Ok(Ok(reply)) => Fetched::Reply(reply),
            Ok(Err(why)) => Fetched::Failed(Arc::from(why)),
            Err(_) => Fetched::Failed(Arc::from(format!(
                "no complete answer within the request timeout of {:?}",
                self.timeout
            ))),
        }
    }

    async fn fetch(&self, fetch: &Fetch) -> Result<HttpReply, String> {
        let uri: Uri = fetch.url.parse().map_err(|e| format!("invalid URL: {e}"))?;
        let mut request = Request::get(uri).header(USER_AGENT, "xdsfed");
        if let Some(etag) = &fetch.etag {
            request = request.header(IF_NONE_MATCH, &**etag);
        }
        if let Some(date) = &fetch.last_modified {
            request = request.header(IF_MODIFIED_SINCE, &**date);
        }
        if let Some(creds) = &self.call_creds {
            // Read for each fetch: a rotated token is used by the next one.
            for value in creds.headers().map_err(|e| e.message)? {
                request = request.header(AUTHORIZATION, value);
            }
        }
        let request = request
            .body(Empty::new())
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| error_chain(&e))?;
        let (parts, body) = response.into_parts();
        let content_type = header(&parts.headers, &CONTENT_TYPE).map(str::to_owned);
        let (limit, kind) = if is_json(content_type.as_deref()) {
            (self.limits.text, "JSON ")
        } else {
            (self.limits.binary, "")
        };
        let body = Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| {
                format!(
                    "reading the body ({kind}limit {limit} bytes): {}",
                    error_chain(&*e)
                )
            })?
            .to_bytes();
        let h = &parts.headers;
        // The wall clock only turns HTTP dates into delays.
        let now = std::time::SystemTime::now();
        let caching = CachingHeaders {
            cache_control: header(h, &CACHE_CONTROL),
            age: header(h, &AGE),
            expires: header(h, &EXPIRES),
            date: header(h, &DATE),
        };
        Ok(HttpReply {
            status: parts.status.as_u16(),
            etag: header(h, &ETAG).map(Arc::from),
            last_modified: header(h, &LAST_MODIFIED).map(Arc::from),
            content_type,
            fresh_for: freshness(caching, now),
            retry_after: header(h, &RETRY_AFTER).and_then(|v| retry_after(v, now)),
            body,
        })
    }
}

/// A header's value when it is visible ASCII and short enough.
fn header<'a>(headers: &'a HeaderMap, name: &http::header::HeaderName) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?;
    (value.len() <= HEADER_LIMIT).then_some(value)
}

/// Dials TCP, then TLS for `https` URLs.
#[derive(Clone)]
struct Connector {
    tls: Option<TlsConnector>,
    timeout: Duration,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            tokio::time::timeout(this.timeout, this.dial(uri))
                .await
                .map_err(|_| BoxError::from("connect timed out"))?
                .map(TokioIo::new)
        })
    }
}

impl Connector {
    async fn dial(self, uri: Uri) -> Result<Stream, BoxError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => return Err(format!("unsupported scheme {other:?}").into()),
        };
        let host = uri.host().ok_or("URL without a host")?;
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        // `[::1]` in a URL is `::1` to the resolver and to SNI.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let tcp = TcpStream::connect((host.as_str(), port)).await?;
        // Small requests must not wait for Nagle's algorithm.
        let _ = tcp.set_nodelay(true);
        if !https {
            return Ok(Stream::Plain(tcp));
        }
        let tls = self
            .tls
            .ok_or("an https URL needs tls channel_creds (with ca_certificate_file)")?;
        let name = ServerName::try_from(host)?;
        Ok(Stream::Tls(Box::new(tls.connect(name, tcp).await?)))
    }
}
