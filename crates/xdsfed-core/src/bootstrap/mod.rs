//! The bootstrap: which servers to talk to, for which authorities, as whom.
//!
//! Placeholder for parsing: the naming issue adds gRPC A47 JSON, YAML and
//! Envoy-style `config_sources`. The data model below is the contract the
//! transport and the authority registry rely on; extend it, keep its names.

use std::path::PathBuf;

/// How the client speaks ADS with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ApiVariant {
    /// `AGGREGATED_DELTA_GRPC`: incremental ADS. The default; the transport
    /// falls back to SotW when the server answers UNIMPLEMENTED, unless pinned.
    #[default]
    Delta,
    /// `AGGREGATED_GRPC`: state-of-the-world ADS.
    Sotw,
}

/// Credentials for the channel to a management server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChannelCreds {
    /// Plaintext HTTP/2.
    Insecure,
    /// TLS with rustls (gRFC A65 `tls` credentials).
    Tls {
        /// PEM file of the CAs that sign the server's certificate; the
        /// platform's roots are not used, so this is required.
        ca_certificate_file: Option<PathBuf>,
        /// PEM certificate chain for mTLS.
        certificate_file: Option<PathBuf>,
        /// PEM private key for mTLS.
        private_key_file: Option<PathBuf>,
    },
}

/// One management server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// The target, e.g. `127.0.0.1:18000`, `http://host:port` or `https://host:port`.
    pub server_uri: String,
    /// The first supported entry of `channel_creds`.
    pub channel_creds: ChannelCreds,
    /// `server_features`, e.g. `ignore_resource_deletion`, `trusted_xds_server`.
    pub server_features: Vec<String>,
    /// Delta or SotW.
    pub api: ApiVariant,
    /// Whether `api` was given explicitly (no automatic fall back to SotW).
    pub api_pinned: bool,
}

impl ServerConfig {
    /// An insecure delta ADS server at `server_uri`, with nothing pinned.
    pub fn insecure(server_uri: impl Into<String>) -> Self {
        ServerConfig {
            server_uri: server_uri.into(),
            channel_creds: ChannelCreds::Insecure,
            server_features: Vec::new(),
            api: ApiVariant::Delta,
            api_pinned: false,
        }
    }

    /// Whether `server_features` holds `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.server_features.iter().any(|f| f == feature)
    }
}
