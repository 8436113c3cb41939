//! Which management server a `ConfigSource` names (xDS TP1).
//!
//! When a `ConfigSource` beside a name lists the name's authority, the
//! resource is fetched through that source. A source that names its own
//! server becomes a [`ServerConfig`] and the watch goes there
//! ([`XdsClient::watch_on_server`]), if the trust rule allows it
//! (`super::trust`):
//!
//! - an `api_config_source` whose first gRPC service is a `google_grpc`
//!   target: ADS (delta or SotW, from `api_type`), or REST-JSON polling for
//!   `api_type: REST` (with its `refresh_delay` and `request_timeout`);
//! - a `path_config_source`: a filesystem source (its `watched_directory`
//!   too).
//!
//! For a source from a server without `trusted_xds_server` whose target the
//! bootstrap lists in `allowed_grpc_services` (gRFC A102), the source's
//! credentials are ignored ([`server_without_credentials`]) and the listed
//! ones used instead.
//!
//! Every other source (`ads`, `self`, an `envoy_grpc` cluster, which is a
//! name in a data plane's own configuration that a client cannot dial,
//! credentials the client cannot express) falls back to the bootstrap: the
//! name is watched by its authority, and an authority the bootstrap does not
//! know is an error on that resource.
//!
//! [`XdsClient::watch_on_server`]: xdsfed_client::client::XdsClient::watch_on_server

use std::path::PathBuf;

use envoy_types::pb::envoy::config::core::v3::api_config_source::ApiType;
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::config::core::v3::grpc_service::google_grpc::channel_credentials::CredentialSpecifier;
use envoy_types::pb::envoy::config::core::v3::grpc_service::{GoogleGrpc, TargetSpecifier};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ConfigSource, DataSource, PathConfigSource,
};
use xdsfed_core::bootstrap::{
    ApiVariant, ChannelCreds, FileSource, RestTiming, ServerConfig, ServerProtocol,
};

/// The server `source` names, when it names one the client can dial, with
/// the credentials the source gives it.
pub(crate) fn server_of(source: &ConfigSource) -> Option<ServerConfig> {
    let mut server = server_without_credentials(source)?;
    if let Some(google) = api_of(source).and_then(google_of) {
        server.channel_creds = channel_creds_of(google)?;
    }
    Some(server)
}

/// The server `source` names, its channel credentials left insecure and
/// never read: for a target whose credentials the bootstrap gives (gRFC
/// A102 `allowed_grpc_services`), the source's own are ignored, usable or
/// not.
pub(crate) fn server_without_credentials(source: &ConfigSource) -> Option<ServerConfig> {
    let api = match &source.config_source_specifier {
        Some(ConfigSourceSpecifier::ApiConfigSource(api)) => api,
        Some(ConfigSourceSpecifier::PathConfigSource(path)) => return file_server(path),
        _ => return None,
    };
    // A per-type gRPC service is asked over ADS on the same target, which
    // control planes serving both accept.
    let (api_variant, protocol) = match ApiType::try_from(api.api_type) {
        Ok(ApiType::AggregatedDeltaGrpc | ApiType::DeltaGrpc) => {
            (ApiVariant::Delta, ServerProtocol::Ads)
        }
        Ok(ApiType::AggregatedGrpc | ApiType::Grpc) => (ApiVariant::Sotw, ServerProtocol::Ads),
        Ok(ApiType::Rest) => (ApiVariant::Sotw, ServerProtocol::Rest(rest_timing(api))),
        _ => return None,
    };
    let google = google_of(api)?;
    let mut server = ServerConfig::insecure(google.target_uri.clone());
    server.api = api_variant;
    // The source chose the variant; do not second-guess it.
    server.api_pinned = true;
    server.protocol = protocol;
    Some(server)
}

fn api_of(source: &ConfigSource) -> Option<&ApiConfigSource> {
    match &source.config_source_specifier {
        Some(ConfigSourceSpecifier::ApiConfigSource(api)) => Some(api),
        _ => None,
    }
}

/// The first gRPC service of `api`, when it is a `google_grpc` target.
fn google_of(api: &ApiConfigSource) -> Option<&GoogleGrpc> {
    match api
        .grpc_services
        .first()
        .and_then(|s| s.target_specifier.as_ref())
    {
        Some(TargetSpecifier::GoogleGrpc(google)) if !google.target_uri.is_empty() => Some(google),
        _ => None,
    }
}

/// A `google_grpc` target's channel credentials, when the client can
/// express them.
fn channel_creds_of(google: &GoogleGrpc) -> Option<ChannelCreds> {
    let credentials = google
        .channel_credentials
        .as_ref()
        .and_then(|c| c.credential_specifier.as_ref());
    match credentials {
        // Envoy dials a google_grpc target without credentials in plaintext.
        None | Some(CredentialSpecifier::LocalCredentials(_)) => Some(ChannelCreds::Insecure),
        Some(CredentialSpecifier::SslCredentials(ssl)) => Some(ChannelCreds::Tls {
            // The client does not use the platform's roots: without a CA
            // file there is nothing to verify the server against.
            ca_certificate_file: Some(file_of(ssl.root_certs.as_ref())?),
            certificate_file: optional_file(ssl.cert_chain.as_ref())?,
            private_key_file: optional_file(ssl.private_key.as_ref())?,
        }),
        Some(CredentialSpecifier::GoogleDefault(_)) => None,
    }
}

/// A `path_config_source`: the file (its format from its extension) and
/// the directory watched for it.
fn file_server(path: &PathConfigSource) -> Option<ServerConfig> {
    let mut source = FileSource::new(&path.path).ok()?;
    if let Some(dir) = path
        .watched_directory
        .as_ref()
        .filter(|d| !d.path.is_empty())
    {
        source.watched_directory = Some(PathBuf::from(&dir.path));
    }
    Some(source.server())
}

/// A REST source's timers, Envoy's defaults where unset.
fn rest_timing(api: &ApiConfigSource) -> RestTiming {
    let mut timing = RestTiming::default();
    if let Some(delay) = api
        .refresh_delay
        .as_ref()
        .and_then(xdsfed_core::types::std_duration)
    {
        timing.refresh_delay = delay;
    }
    if let Some(timeout) = api
        .request_timeout
        .as_ref()
        .and_then(xdsfed_core::types::std_duration)
    {
        timing.request_timeout = timeout;
    }
    timing
}

/// A file the client can read; inline data is not something a
/// [`ChannelCreds`] can carry.
fn file_of(source: Option<&DataSource>) -> Option<PathBuf> {
    match source?.specifier.as_ref()? {
        Specifier::Filename(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => None,
    }
}

/// `Some(None)` when absent, `Some(Some(path))` for a file, `None` when
/// present but not a file (the source is then unusable as a whole).
fn optional_file(source: Option<&DataSource>) -> Option<Option<PathBuf>> {
    match source {
        None => Some(None),
        Some(_) => file_of(source).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::google_grpc::{
        ChannelCredentials, GoogleLocalCredentials, SslCredentials,
    };
    use envoy_types::pb::envoy::config::core::v3::grpc_service::{EnvoyGrpc, GoogleGrpc};
    use envoy_types::pb::envoy::config::core::v3::{
        AggregatedConfigSource, ApiConfigSource, GrpcService,
    };

    fn api_source(api_type: ApiType, target: TargetSpecifier) -> ConfigSource {
        ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: api_type as i32,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(target),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            ..Default::default()
        }
    }

    fn google(target_uri: &str, creds: Option<CredentialSpecifier>) -> TargetSpecifier {
        TargetSpecifier::GoogleGrpc(GoogleGrpc {
            target_uri: target_uri.into(),
            channel_credentials: creds.map(|c| ChannelCredentials {
                credential_specifier: Some(c),
            }),
            ..Default::default()
        })
    }

    fn file(path: &str) -> Option<DataSource> {
        Some(DataSource {
            specifier: Some(Specifier::Filename(path.into())),
            ..Default::default()
        })
    }

    #[test]
    fn google_grpc_target_without_credentials_is_a_plaintext_server() {
        let source = api_source(
            ApiType::AggregatedDeltaGrpc,
            google("127.0.0.1:18000", None),
        );
        let server = server_of(&source);
        assert_eq!(
            server
                .as_ref()
                .map(|s| (&*s.server_uri, &s.channel_creds, s.api)),
            Some((
                "127.0.0.1:18000",
                &ChannelCreds::Insecure,
                ApiVariant::Delta
            ))
        );
        assert!(server.is_some_and(|s| s.api_pinned));
    }

    #[test]
    fn local_credentials_are_plaintext_and_sotw_api_type_is_kept() {
        let creds = CredentialSpecifier::LocalCredentials(GoogleLocalCredentials::default());
        let source = api_source(ApiType::AggregatedGrpc, google("cp:443", Some(creds)));
        assert_eq!(
            server_of(&source).map(|s| (s.channel_creds, s.api)),
            Some((ChannelCreds::Insecure, ApiVariant::Sotw))
        );
    }

    #[test]
    fn ssl_credentials_from_files_are_tls() {
        let creds = CredentialSpecifier::SslCredentials(SslCredentials {
            root_certs: file("/etc/ca.pem"),
            cert_chain: file("/etc/cert.pem"),
            private_key: file("/etc/key.pem"),
        });
        let source = api_source(ApiType::AggregatedDeltaGrpc, google("cp:443", Some(creds)));
        assert_eq!(
            server_of(&source).map(|s| s.channel_creds),
            Some(ChannelCreds::Tls {
                ca_certificate_file: Some("/etc/ca.pem".into()),
                certificate_file: Some("/etc/cert.pem".into()),
                private_key_file: Some("/etc/key.pem".into()),
            })
        );
    }

    #[test]
    fn ssl_credentials_without_a_ca_file_fall_back_to_the_bootstrap() {
        let inline = Some(DataSource {
            specifier: Some(Specifier::InlineString("-----BEGIN".into())),
            ..Default::default()
        });
        for root_certs in [None, inline] {
            let creds = CredentialSpecifier::SslCredentials(SslCredentials {
                root_certs,
                ..Default::default()
            });
            let source = api_source(ApiType::AggregatedDeltaGrpc, google("cp:443", Some(creds)));
            assert_eq!(server_of(&source), None);
        }
    }

    #[test]
    fn rest_and_path_sources_name_a_rest_and_a_file_server() {
        let mut rest = api_source(ApiType::Rest, google("http://cp:8080", None));
        if let Some(ConfigSourceSpecifier::ApiConfigSource(api)) = &mut rest.config_source_specifier
        {
            api.refresh_delay = Some(envoy_types::pb::google::protobuf::Duration {
                seconds: 0,
                nanos: 250_000_000,
            });
        }
        let server = server_of(&rest).expect("a REST server");
        assert_eq!(server.server_uri, "http://cp:8080");
        let ServerProtocol::Rest(timing) = server.protocol else {
            panic!("not REST: {:?}", server.protocol);
        };
        assert_eq!(timing.refresh_delay, std::time::Duration::from_millis(250));
        assert_eq!(
            timing.request_timeout,
            RestTiming::default().request_timeout
        );

        let path = ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::PathConfigSource(
                PathConfigSource {
                    path: "/etc/xds/eds.yaml".into(),
                    watched_directory: Some(
                        envoy_types::pb::envoy::config::core::v3::WatchedDirectory {
                            path: "/etc/xds".into(),
                            ..Default::default()
                        },
                    ),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        let server = server_of(&path).expect("a file server");
        assert_eq!(server.server_uri, "file:///etc/xds/eds.yaml");
        let ServerProtocol::File(file) = server.protocol else {
            panic!("not a file: {:?}", server.protocol);
        };
        assert_eq!(file.watched_directory, Some(PathBuf::from("/etc/xds")));
    }

    #[test]
    fn a_path_source_of_an_unknown_format_falls_back_to_the_bootstrap() {
        let path = ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::PathConfigSource(
                PathConfigSource {
                    path: "/etc/xds/eds.txt".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        assert_eq!(server_of(&path), None);
    }

    #[test]
    fn ads_and_envoy_grpc_sources_fall_back_to_the_bootstrap() {
        let ads = ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::Ads(
                AggregatedConfigSource::default(),
            )),
            ..Default::default()
        };
        let envoy_grpc = api_source(
            ApiType::AggregatedDeltaGrpc,
            TargetSpecifier::EnvoyGrpc(EnvoyGrpc {
                cluster_name: "xds_cluster".into(),
                ..Default::default()
            }),
        );
        let empty_target = api_source(ApiType::AggregatedDeltaGrpc, google("", None));
        for source in [ads, envoy_grpc, empty_target, ConfigSource::default()] {
            assert_eq!(server_of(&source), None, "{source:?}");
        }
    }
}
