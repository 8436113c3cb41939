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
/// files, offering `alpn` (most preferred first): core's one builder,
/// checking the server by its hostname.
#[cfg(feature = "http-client")]
pub(crate) fn client_config(
    uri: &str,
    files: TlsFiles,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, TransportError> {
    use xdsfed_core::tls::{ClientPem, ServerCheck};
    let pem = ClientPem {
        ca: &files.ca,
        identity: files
            .identity
            .as_ref()
            .map(|(chain, key)| (chain.as_slice(), key.as_slice())),
    };
    xdsfed_core::tls::client_config(pem, ServerCheck::Hostname, alpn).map_err(|e| {
        TransportError::Tls {
            uri: uri.to_owned(),
            why: e.to_string(),
        }
    })
}
