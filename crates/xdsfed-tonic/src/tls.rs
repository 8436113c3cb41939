//! TLS to endpoints as gRFC A29 says: a cluster whose `transport_socket`
//! is an `UpstreamTlsContext` is reached over TLS with the certificates of
//! the bootstrap's `certificate_providers` instances it names; other
//! clusters in plaintext.
//!
//! ```text
//! ConnectTarget { tls: Some(UpstreamTls) } ─► provider instances (bootstrap) ─► PEM files, read at this attempt
//!     ─► rustls (ring): roots = CA file, client cert = identity files, ALPN h2
//!     ─► TCP + handshake: chain checked against the roots, no hostname check, SAN matchers on the leaf
//!     ─► tonic Channel over that stream
//! ```
//!
//! The `file_watcher` plugin's files are read again at every connection
//! attempt (bounded, checked as PEM), so a rotated certificate is used by
//! the next connection without waiting for `refresh_interval`; an
//! established connection keeps the certificates it was made with. A
//! provider instance that is not in the bootstrap, a plugin other than
//! `file_watcher`, a file that is missing or not PEM, or a failed
//! handshake fails that attempt with an error naming the instance, file or
//! reason (logged with the cluster, and in the `UNAVAILABLE` of calls that
//! fail while every endpoint is failing); the channel retries with its
//! backoff.

mod files;

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tonic::transport::{Endpoint, Uri};
use xdsfed_core::bootstrap::CertificateProvider;

use crate::connector::{ConnectTarget, Connector, PlaintextConnector, channel_service};
use crate::endpoint::EndpointAddress;
use crate::error::{BoxError, shown};
use crate::subchannel::Connecting;

use self::files::ProviderFiles;

/// The bootstrap's certificate provider instances, by name.
pub(crate) type Providers = Arc<BTreeMap<String, CertificateProvider>>;

/// The channel's default connector: TLS for clusters with an
/// `UpstreamTlsContext` (gRFC A29), plaintext for the others.
#[derive(Debug, Clone)]
pub(crate) struct XdsConnector {
    providers: Providers,
}

impl XdsConnector {
    /// A connector whose TLS clusters take their certificates from
    /// `providers`.
    pub(crate) fn new(providers: Providers) -> Self {
        Self { providers }
    }
}

impl Connector for XdsConnector {
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<Connecting, BoxError> {
        let Some(tls) = target.tls else {
            return PlaintextConnector.connect(target);
        };
        // Errors leave the cluster out: the subchannel logs them with it,
        // and a call that fails on them names it.
        let files = match ProviderFiles::resolve(tls, &self.providers) {
            Ok(files) => files,
            // A failed attempt, not a refused endpoint: the endpoint stays
            // in the balancer, failing, so that calls fail at once with
            // this reason, and the attempts go on with backoff.
            Err(why) => {
                let error: BoxError = why.into();
                return Ok(Box::pin(std::future::ready(Err(error))));
            }
        };
        let endpoint = tonic_endpoint(target)?;
        let address = target.address.clone();
        let matchers = tls.san_matchers.clone();
        Ok(Box::pin(async move {
            // Small bounded files, but still blocking reads: off the
            // runtime's workers.
            let config = tokio::task::spawn_blocking(move || files.client_config(matchers))
                .await
                .map_err(|e| format!("reading the certificate files: {e}"))??;
            let stream = handshake(&address, config).await?;
            let mut stream = Some(stream);
            // tonic's channel takes the established stream once; a later
            // reconnection goes through the subchannel, and so through a
            // new attempt with freshly read certificates.
            let channel = endpoint
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let stream = stream.take();
                    async move {
                        stream.ok_or_else(|| {
                            std::io::Error::other("this TLS connection was already used")
                        })
                    }
                }))
                .await?;
            Ok(channel_service(channel))
        }))
    }
}

/// The tonic endpoint of an attempt: the address to reach (the TLS stream
/// is made by [`handshake`]), the channel's authority as `:authority` with
/// the `https` scheme, and the cluster's `connect_timeout`.
fn tonic_endpoint(target: &ConnectTarget<'_>) -> Result<Endpoint, BoxError> {
    let mut endpoint = Endpoint::from_shared(format!("http://{}", target.address))?;
    if let Ok(origin) = format!("https://{}", target.authority).parse::<Uri>() {
        endpoint = endpoint.origin(origin);
    }
    if let Some(timeout) = target.connect_timeout {
        endpoint = endpoint.connect_timeout(timeout);
    }
    Ok(endpoint)
}

type TlsStream = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

/// TCP to `address`, then the TLS handshake with `config`. The name sent
/// as SNI is the endpoint's host (none for an IP address); it is not
/// checked against the certificate, the SAN matchers are (gRFC A29).
async fn handshake(
    address: &EndpointAddress,
    config: rustls::ClientConfig,
) -> Result<TlsStream, String> {
    let tcp = TcpStream::connect((address.host(), address.port()))
        .await
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    // Nagle would hold back small HTTP/2 frames, as tonic's own connector avoids.
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(address.host().to_owned())
        .map_err(|e| format!("endpoint host {}: {e}", shown(address.host())))?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {address} failed: {e}"))?;
    Ok(hyper_util::rt::TokioIo::new(stream))
}
