//! The server certificate check of gRFC A29: the chain must lead to one of
//! the cluster's roots (webpki, with the usual validity and key usage
//! rules), the hostname is not checked, and the leaf's subject
//! alternative names must satisfy the cluster's `match_subject_alt_names`.

use std::sync::Arc;

use crate::types::{SanMatcher, leaf_subject_alt_names, san_matches};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How many of a certificate's names an error lists.
const SANS_SHOWN: usize = 8;

/// Chain against the roots, then SAN matchers instead of the hostname.
#[derive(Debug)]
pub(crate) struct SanVerifier {
    roots: Arc<RootCertStore>,
    matchers: Vec<SanMatcher>,
    provider: Arc<CryptoProvider>,
}

impl SanVerifier {
    pub(crate) fn new(
        roots: Arc<RootCertStore>,
        matchers: Vec<SanMatcher>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        Self {
            roots,
            matchers,
            provider,
        }
    }

    /// The SAN check, after the chain was validated.
    fn check_sans(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if self.matchers.is_empty() {
            return Ok(());
        }
        let sans = leaf_subject_alt_names(end_entity.as_ref())
            .map_err(|why| rustls::Error::General(format!("server certificate: {why}")))?;
        if san_matches(&self.matchers, &sans) {
            return Ok(());
        }
        // A server's names are outside input on their way to a terminal:
        // escaped, and only the first few, after the reason.
        let mut listed: Vec<String> = sans
            .iter()
            .take(SANS_SHOWN)
            .map(|san| san.to_string().escape_debug().to_string())
            .collect();
        if sans.len() > SANS_SHOWN {
            listed.push("…".to_owned());
        }
        Err(rustls::Error::General(format!(
            "no SAN of the server certificate matches match_subject_alt_names: [{}]",
            listed.join(", ")
        )))
    }
}

impl ServerCertVerifier for SanVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        self.check_sans(end_entity)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
