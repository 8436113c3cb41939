//! The files of the `file_watcher` certificate provider instances a
//! cluster's TLS context names, and rustls' client configuration made
//! from them: read at each connection attempt through the shared bounded
//! reader, checked as PEM, every error naming the instance or the file.

use std::path::{Path, PathBuf};

use xdsfed_core::bootstrap::{CertificateProvider, FileWatcherConfig};
use xdsfed_core::file::{PEM_LIMIT, PemKind, check_pem, read_bounded};
use xdsfed_core::tls::{ClientPem, ServerCheck, TlsBuildError, client_config};
use xdsfed_core::types::{SanMatcher, UpstreamTls};

use super::Providers;

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

    /// Reads the files now and builds the client configuration with
    /// core's one builder: these roots only, no hostname check, `matchers`
    /// on the server's leaf, the identity for mTLS, ALPN `h2`.
    pub(super) fn client_config(
        &self,
        matchers: Vec<SanMatcher>,
    ) -> Result<rustls::ClientConfig, String> {
        let ca = pem("CA certificate", &self.ca, PemKind::Certificates)?;
        let identity = match &self.identity {
            None => None,
            Some((cert, key)) => Some((
                pem("certificate", cert, PemKind::Certificates)?,
                pem("private key", key, PemKind::PrivateKey)?,
            )),
        };
        let files = ClientPem {
            ca: &ca,
            identity: identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        };
        client_config(files, ServerCheck::SubjectAltNames(matchers), &[b"h2"]).map_err(|e| {
            // Name the file the builder could not use.
            let file = match &e {
                TlsBuildError::CaCertificate(_) | TlsBuildError::Protocol(_) => &self.ca,
                TlsBuildError::Certificate(_) | TlsBuildError::CertificateAndKey(_) => {
                    self.identity.as_ref().map_or(&self.ca, |(cert, _)| cert)
                }
                TlsBuildError::PrivateKey(_) => {
                    self.identity.as_ref().map_or(&self.ca, |(_, key)| key)
                }
            };
            format!("{e} (file {})", file.display())
        })
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

/// A PEM file of `kind`, read through the shared bounded reader (a
/// regular file of at most [`PEM_LIMIT`] bytes) and checked.
fn pem(role: &str, path: &Path, kind: PemKind) -> Result<Vec<u8>, String> {
    let text = read_bounded(path, PEM_LIMIT)
        .map_err(|e| format!("{role} file {}: {e}", path.display()))?;
    check_pem(&text, kind).map_err(|why| format!("{role} file {}: {why}", path.display()))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use xdsfed_core::types::ProviderRef;

    use super::*;

    fn provider(name: &str) -> ProviderRef {
        ProviderRef {
            instance_name: name.into(),
            certificate_name: String::new(),
        }
    }

    fn watcher(ca: Option<&str>, identity: Option<(&str, &str)>) -> CertificateProvider {
        CertificateProvider::FileWatcher(FileWatcherConfig {
            certificate_file: identity.map(|(c, _)| c.into()),
            private_key_file: identity.map(|(_, k)| k.into()),
            ca_certificate_file: ca.map(PathBuf::from),
            spiffe_trust_bundle_map_file: None,
            refresh_interval: Duration::from_secs(600),
        })
    }

    fn tls(root: &str, identity: Option<&str>) -> UpstreamTls {
        UpstreamTls {
            root: provider(root),
            identity: identity.map(provider),
            san_matchers: Vec::new(),
        }
    }

    /// gRFC A29: instance names are looked up in the bootstrap; one that is
    /// missing, of another plugin, or without the files its role needs is
    /// an error naming it.
    #[test]
    fn provider_instances_that_cannot_serve_their_role_are_named() {
        let providers: Providers = Arc::new(BTreeMap::from([
            ("roots".to_owned(), watcher(Some("/ca.pem"), None)),
            (
                "no-ca".to_owned(),
                watcher(None, Some(("/c.pem", "/k.pem"))),
            ),
            (
                "vault".to_owned(),
                CertificateProvider::Unsupported {
                    plugin_name: "vault".into(),
                },
            ),
        ]));
        let error = |t: UpstreamTls| ProviderFiles::resolve(&t, &providers).unwrap_err();
        assert!(
            error(tls("missing", None)).contains("instance \"missing\" is not in the bootstrap")
        );
        assert!(error(tls("vault", None)).contains("plugin \"vault\""));
        assert!(
            error(tls("no-ca", None)).contains("instance \"no-ca\" has no ca_certificate_file")
        );
        assert!(
            error(tls("roots", Some("roots"))).contains("no certificate_file and private_key_file")
        );
        assert!(ProviderFiles::resolve(&tls("roots", Some("no-ca")), &providers).is_ok());
    }

    /// A file that is missing or not PEM fails the attempt naming the file.
    #[test]
    fn unreadable_certificate_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let files = ProviderFiles {
            ca: missing.clone(),
            identity: None,
        };
        let error = files.client_config(Vec::new()).unwrap_err();
        assert!(error.contains(&missing.display().to_string()), "{error}");
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "not a certificate").unwrap();
        let files = ProviderFiles {
            ca: not_pem.clone(),
            identity: None,
        };
        let error = files.client_config(Vec::new()).unwrap_err();
        assert!(
            error.starts_with(&format!("CA certificate file {}", not_pem.display())),
            "{error}"
        );
    }
}
