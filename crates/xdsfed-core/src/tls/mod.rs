//! The one builder of rustls client configurations, for every TLS
//! connection the project makes: to control planes (ADS, REST-JSON, CDN,
//! the policy stream; the server is checked by its hostname, as usual)
//! and to a cluster's endpoints (gRFC A29: the chain is checked against
//! the cluster's roots and the leaf's subject alternative names against
//! its `match_subject_alt_names`, never the hostname). Callers read and
//! check the PEM files and name them in errors; this builds from their
//! bytes. rustls with ring, safe default protocol versions.

mod verifier;

use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::types::SanMatcher;

/// The PEM text a client configuration is built from.
#[derive(Debug, Clone, Copy)]
pub struct ClientPem<'a> {
    /// The CA certificates the server's chain must lead to.
    pub ca: &'a [u8],
    /// The client's certificate chain and private key, for mutual TLS.
    pub identity: Option<(&'a [u8], &'a [u8])>,
}

/// How the server's certificate is checked beyond its chain.
#[derive(Debug, Clone)]
pub enum ServerCheck {
    /// It must name the host dialled (control planes).
    Hostname,
    /// Its subject alternative names must satisfy these matchers, and the
    /// hostname is not checked (gRFC A29); no matchers accept any name.
    SubjectAltNames(Vec<SanMatcher>),
}

/// Which part of the PEM text a configuration could not be built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsBuildError {
    /// A CA certificate did not parse or is not a usable root.
    #[error("CA certificate: {0}")]
    CaCertificate(String),
    /// The client's certificate chain did not parse.
    #[error("certificate: {0}")]
    Certificate(String),
    /// The client's private key did not parse.
    #[error("private key: {0}")]
    PrivateKey(String),
    /// The certificate and key do not go together.
    #[error("certificate and key: {0}")]
    CertificateAndKey(String),
    /// rustls refused the protocol versions.
    #[error("{0}")]
    Protocol(String),
}

/// rustls' client configuration from `pem`, checking servers by `check`,
/// offering `alpn` (most preferred first).
///
/// ```
/// use xdsfed_core::tls::{ClientPem, ServerCheck, TlsBuildError, client_config};
///
/// let pem = ClientPem { ca: b"not a certificate", identity: None };
/// let error = client_config(pem, ServerCheck::Hostname, &[b"h2"]).unwrap_err();
/// assert!(matches!(error, TlsBuildError::CaCertificate(_)), "{error}");
/// ```
pub fn client_config(
    pem: ClientPem<'_>,
    check: ServerCheck,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, TlsBuildError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.ca) {
        let cert = cert.map_err(|e| TlsBuildError::CaCertificate(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsBuildError::CaCertificate(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsBuildError::CaCertificate(
            "no certificate in the PEM text".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsBuildError::Protocol(e.to_string()))?;
    let builder = match check {
        ServerCheck::Hostname => versions.with_root_certificates(roots),
        ServerCheck::SubjectAltNames(matchers) => {
            let verifier = verifier::SanVerifier::new(Arc::new(roots), matchers, provider);
            versions
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
        }
    };
    let mut config = match pem.identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let chain = CertificateDer::pem_slice_iter(chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsBuildError::Certificate(e.to_string()))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| TlsBuildError::PrivateKey(e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsBuildError::CertificateAndKey(e.to_string()))?
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
