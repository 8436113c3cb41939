//! The files of the `file_watcher` certificate provider instances a
//! cluster's TLS context names, and rustls' client configuration made
//! from them: read at each connection attempt through the shared bounded
//! reader, checked as PEM, every error naming the instance or the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use xdsfed_core::bootstrap::{CertificateProvider, FileWatcherConfig};
use xdsfed_core::file::{PEM_LIMIT, PemKind, check_pem, read_bounded};
use xdsfed_core::types::{SanMatcher, UpstreamTls};

use super::Providers;
use super::verifier::SanVerifier;

/// The files one cluster's TLS uses.
#[derive(Debug, Clone)]
pub(super) struct ProviderFiles {
    ca: PathBuf,
    identity: Option<(PathBuf, PathBuf)>,
}

impl ProviderFiles {
    /// The files of the instances `tls` names, or why they cannot be used.
    pub(super) fn resolve(tls: &UpstreamTls, providers: &Providers) -> Result<Self, String> {
        let root = file_watcher(&tls.root.instance_name, providers)?;
        let ca = root.ca_certificate_file.clone().ok_or_else(|| {
            format!(
                "certificate provider instance {:?} has no ca_certificate_file for the root certificates",
                tls.root.instance_name
            )
        })?;
        let identity = match &tls.identity {
            None => None,
            Some(provider) => {
                let config = file_watcher(&provider.instance_name, providers)?;
                match (&config.certificate_file, &config.private_key_file) {
                    (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
                    _ => {
                        return Err(format!(
                            "certificate provider instance {:?} has no certificate_file and private_key_file for the identity",
                            provider.instance_name
                        ));
                    }
                }
            }
        };
        Ok(Self { ca, identity })
    }

    /// Reads the files now and builds the client configuration: these
    /// roots only, no hostname check, `matchers` on the server's leaf,
    /// the identity for mTLS, ALPN `h2`.
    pub(super) fn client_config(
        &self,
        matchers: Vec<SanMatcher>,
    ) -> Result<rustls::ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates("CA certificate", &self.ca)? {
            roots
                .add(cert)
                .map_err(|e| format!("CA certificate file {}: {e}", self.ca.display()))?;
        }
        let verifier = SanVerifier::new(Arc::new(roots), matchers, Arc::clone(&provider));
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates("certificate", cert)?;
                let key_pem = read("private key", key)?;
                check_pem(&key_pem, PemKind::PrivateKey)
                    .map_err(|why| format!("private key file {}: {why}", key.display()))?;
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                    .map_err(|e| format!("private key file {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("certificate file {} and its key: {e}", cert.display()))?
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// The `file_watcher` configuration of instance `name`.
fn file_watcher<'p>(name: &str, providers: &'p Providers) -> Result<&'p FileWatcherConfig, String> {
    match providers.get(name) {
        Some(CertificateProvider::FileWatcher(config)) => Ok(config),
        Some(CertificateProvider::Unsupported { plugin_name }) => Err(format!(
            "certificate provider instance {name:?} uses plugin {plugin_name:?}, which this client does not implement"
        )),
        Some(_) => Err(format!(
            "certificate provider instance {name:?} uses a plugin this client does not implement"
        )),
        None => Err(format!(
            "certificate provider instance {name:?} is not in the bootstrap's certificate_providers"
        )),
    }
}

/// Reads a PEM file through the shared bounded reader (a regular file of
/// at most [`PEM_LIMIT`] bytes).
fn read(role: &str, path: &Path) -> Result<Vec<u8>, String> {
    read_bounded(path, PEM_LIMIT).map_err(|e| format!("{role} file {}: {e}", path.display()))
}

fn certificates(role: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(role, path)?;
    check_pem(&pem, PemKind::Certificates)
        .map_err(|why| format!("{role} file {}: {why}", path.display()))?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{role} file {}: {e}", path.display()))
}
