//! The one TLS client setup of every source. A server's `tls` channel
//! credentials are read and checked once, the same way for every kind
//! ([`read_tls_files`]: the CA is required, a certificate needs its key,
//! every file is read bounded and checked as PEM, every error names the
//! file), and rustls' client configuration is built from them in one
//! place ([`client_config`]): the given CAs only (the platform's roots are
//! not read), the client certificate for mTLS, ALPN as the caller asks.
//! ADS hands the same checked files to tonic, whose channel builds its
//! rustls configuration by the same rule.

use std::path::Path;

use xdsfed_core::file::{PEM_LIMIT, PemKind, check_pem, read_bounded};

use crate::transport::TransportError;

/// The PEM files of a server's `tls` credentials, read and checked.
#[derive(Debug)]
pub(crate) struct TlsFiles {
    /// The CAs that sign the server's certificate.
    pub(crate) ca: Vec<u8>,
    /// The client's certificate chain and private key, for mTLS.
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Reads and checks the files of `tls` credentials for the server `uri`
/// (the CA is required, a certificate needs its key); every error names
/// the file. Shared by every source kind.
pub(crate) fn read_tls_files(
    uri: &str,
    ca: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<TlsFiles, TransportError> {
    let Some(ca) = ca else {
        return Err(TransportError::Tls {
            uri: uri.to_owned(),
            why: "no ca_certificate_file: the platform's roots are not used, give the CA that signs the server".into(),
        });
    };
    if cert.is_some() != key.is_some() {
        return Err(TransportError::Tls {
            uri: uri.to_owned(),
            why: "mTLS needs both certificate_file and private_key_file".into(),
        });
    }
    let ca_pem = read(uri, "CA certificate", ca)?;
    check_certs(uri, "CA certificate", ca, &ca_pem)?;
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => {
            let cert_pem = read(uri, "certificate", cert)?;
            check_certs(uri, "certificate", cert, &cert_pem)?;
            let key_pem = read(uri, "private key", key)?;
            check_key(uri, key, &key_pem)?;
            Some((cert_pem, key_pem))
        }
        _ => None,
    };
    Ok(TlsFiles {
        ca: ca_pem,
        identity,
    })
}

/// Reads a credentials file through the bounded reader: a regular file of
/// at most [`PEM_LIMIT`] bytes; a FIFO or a device is refused, not read.
fn read(uri: &str, role: &'static str, path: &Path) -> Result<Vec<u8>, TransportError> {
    read_bounded(path, PEM_LIMIT).map_err(|e| TransportError::ReadFile {
        uri: uri.to_owned(),
        role,
        path: path.to_owned(),
        why: e.to_string(),
    })
}

fn bad_pem(uri: &str, role: &'static str, path: &Path, why: impl Into<String>) -> TransportError {
    TransportError::BadPem {
        uri: uri.to_owned(),
        role,
        path: path.to_owned(),
        why: why.into(),
    }
}

fn check_certs(
    uri: &str,
    role: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<(), TransportError> {
    check_pem(pem, PemKind::Certificates).map_err(|why| bad_pem(uri, role, path, why))
}

fn check_key(uri: &str, path: &Path, pem: &[u8]) -> Result<(), TransportError> {
    check_pem(pem, PemKind::PrivateKey).map_err(|why| bad_pem(uri, "private key", path, why))
}

/// rustls' client configuration for the server `uri` from its checked
/// files, offering `alpn` (most preferred first).
#[cfg(feature = "http-client")]
pub(crate) fn client_config(
    uri: &str,
    files: TlsFiles,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, TransportError> {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let tls_error = |why: String| TransportError::Tls {
        uri: uri.to_owned(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&files.ca) {
        let cert = cert.map_err(|e| tls_error(format!("CA certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| tls_error(format!("CA certificate: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match files.identity {
        Some((chain, key)) => {
            let chain = CertificateDer::pem_slice_iter(&chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| tls_error(format!("certificate: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| tls_error(format!("private key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(format!("certificate and key: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
