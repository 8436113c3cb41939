//! The tonic channel to one management server: target, keepalive, timeouts
//! and TLS (gRFC A65 `tls` credentials with rustls).
//!
//! Credentials are read once, when the connection is set up, by the one
//! reader every source kind uses (`crate::tls`), and every error names the
//! file and what is wrong with it.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use super::TransportOptions;
use xdsfed_core::bootstrap::{ChannelCreds, ServerConfig};

/// Why the channel to a server cannot be set up.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The server URI is not a valid gRPC target.
    #[error("server {uri:?}: invalid target: {why}")]
    BadTarget {
        /// The `server_uri`.
        uri: String,
        /// Why.
        why: String,
    },
    /// A credentials file cannot be read.
    #[error("server {uri:?}: cannot read the {role} file {}: {why}", path.display())]
    ReadFile {
        /// The `server_uri`.
        uri: String,
        /// Which file: "CA certificate", "certificate", "private key".
        role: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        why: String,
    },
    /// A credentials file does not hold what it should.
    #[error("server {uri:?}: the {role} file {} {why}", path.display())]
    BadPem {
        /// The `server_uri`.
        uri: String,
        /// Which file.
        role: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. "holds no PEM certificate".
        why: String,
    },
    /// The TLS credentials are incomplete or rejected by tonic.
    #[error("server {uri:?}: TLS credentials: {why}")]
    Tls {
        /// The `server_uri`.
        uri: String,
        /// What is wrong and what to do.
        why: String,
    },
}

/// The endpoint for `server`, with the options applied. Reads and checks
/// the TLS files.
pub fn endpoint(
    server: &ServerConfig,
    opts: &TransportOptions,
) -> Result<Endpoint, TransportError> {
    let uri = &server.server_uri;
    let tls = match &server.channel_creds {
        ChannelCreds::Insecure => None,
        ChannelCreds::Tls {
            ca_certificate_file,
            certificate_file,
            private_key_file,
        } => Some(tls_config(
            uri,
            ca_certificate_file.as_deref(),
            certificate_file.as_deref(),
            private_key_file.as_deref(),
        )?),
    };
    let dialled = xdsfed_core::bootstrap::dial_target(uri);
    let target = if dialled.contains("://") {
        dialled.to_owned()
    } else if tls.is_some() {
        format!("https://{dialled}")
    } else {
        format!("http://{dialled}")
    };
    let mut ep = Endpoint::from_shared(target).map_err(|e| TransportError::BadTarget {
        uri: uri.clone(),
        why: e.to_string(),
    })?;
    ep = ep.connect_timeout(opts.connect_timeout).tcp_nodelay(true);
    if let Some(interval) = opts.keepalive_interval {
        ep = ep
            .http2_keep_alive_interval(interval)
            .keep_alive_while_idle(true);
    }
    if let Some(timeout) = opts.keepalive_timeout {
        ep = ep.keep_alive_timeout(timeout);
    }
    if let Some(tls) = tls {
        ep = ep.tls_config(tls).map_err(|e| TransportError::Tls {
            uri: uri.clone(),
            why: e.to_string(),
        })?;
    }
    Ok(ep)
}

fn tls_config(
    uri: &str,
    ca: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<ClientTlsConfig, TransportError> {
    let pem = crate::tls::read_tls_files(uri, ca, cert, key)?;
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem.ca));
    if let Some((cert_pem, key_pem)) = pem.identity {
        config = config.identity(Identity::from_pem(cert_pem, key_pem));
    }
    Ok(config)
}
