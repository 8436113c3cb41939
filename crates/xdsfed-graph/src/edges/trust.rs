//! Whether a `ConfigSource` beside a name may send the name to the server it
//! names (xDS TP1 "Transport network addressing"; gRFC A81 and A102 for
//! which servers are trusted to name one).
//!
//! Rules, each with its test below:
//!
//! 1. A source that names no server the client can use (`ads`, `self`, an
//!    `envoy_grpc` cluster) leaves the name to the bootstrap.
//! 2. A source naming a server for an authority the bootstrap maps to that
//!    same server is redundant: the bootstrap's ordered servers are used,
//!    with their fallback.
//! 3. A source naming another server for an authority the bootstrap maps is
//!    refused: no server may take over the names of an authority the
//!    operator mapped elsewhere.
//! 4. A source naming a server for an authority the bootstrap does not map:
//!    adding a server means dialling an address, or reading a local file,
//!    that a server chose (gRFC A102 "Security Considerations").
//!    - Its gRPC target must be one the client can dial, whoever sent it
//!      (A102: "checked against the resolver registry"); otherwise refused,
//!      naming the target.
//!    - Inside a resource from a trusted server (`trusted_xds_server`), the
//!      source is used as given, target and credentials (its credentials
//!      unusable: rule 1).
//!    - From any other server, only a gRPC target listed in the bootstrap's
//!      `allowed_grpc_services` is honoured, dialled with the listed channel
//!      and call credentials, the source's own ignored; any other target
//!      (or a file) is refused, naming it.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::ConfigSource;
use xdsfed_core::bootstrap::{ServerConfig, ServerProtocol, check_server_uri};

use super::Via;
use super::named_server::{server_of, server_without_credentials};
use crate::error::GraphError;
use crate::options::ConfigSourceTrust;
use crate::resource::ResourceKind;

/// The edge's target and where it was found.
pub(crate) struct Named<'a> {
    pub(crate) kind: ResourceKind,
    pub(crate) name: &'a Arc<str>,
    pub(crate) authority: &'a str,
    pub(crate) referrer: &'a Arc<str>,
    /// The server the referring resource came from.
    pub(crate) referrer_server: &'a str,
}

/// What `source`, which lists the name's authority, decides for the edge;
/// `None` when the bootstrap decides (rule 1).
pub(crate) fn via_source(
    source: &ConfigSource,
    named: &Named<'_>,
    trust: &ConfigSourceTrust,
) -> Option<Result<Via, GraphError>> {
    let target = server_without_credentials(source)?;
    let refused = |why: String| GraphError::ConfigSourceRefused {
        kind: named.kind,
        name: Arc::clone(named.name),
        referrer: Arc::clone(named.referrer),
        why: Arc::from(why),
    };
    let uri = &target.server_uri;
    if let Some(mapped) = trust.mapped.get(named.authority) {
        if mapped
            .iter()
            .any(|mapped| plaintext_target(mapped) == plaintext_target(uri))
        {
            return Some(Ok(Via::Bootstrap));
        }
        let servers: Vec<&str> = mapped.iter().map(String::as_str).collect();
        return Some(Err(refused(format!(
            "it names server {uri:?} for authority {:?}, which the bootstrap maps to {servers:?}",
            named.authority
        ))));
    }
    let grpc = !matches!(target.protocol, ServerProtocol::File(_));
    if grpc && let Err(problem) = check_server_uri(uri) {
        return Some(Err(refused(format!(
            "its gRPC target {uri:?} cannot be dialled: {problem}"
        ))));
    }
    if trust.trusted_servers.contains(named.referrer_server) {
        // Credentials the client cannot express leave the name to the
        // bootstrap, as a source naming no server does.
        server_of(source)?;
        return Some(Ok(Via::ConfigSource(Arc::new(source.clone()))));
    }
    if grpc && let Some(listed) = trust.allowed_grpc_services.get(uri) {
        let server = ServerConfig {
            channel_creds: listed.channel_creds.clone(),
            call_creds: listed.call_creds.clone(),
            ..target
        };
        return Some(Ok(Via::AllowedGrpcService(Arc::new(server))));
    }
    let not_listed = if grpc {
        format!("and the bootstrap's allowed_grpc_services does not list {uri:?}")
    } else {
        "and only a trusted server may name a file".to_owned()
    };
    Some(Err(refused(format!(
        "it names server {uri:?} for authority {:?}, which the bootstrap does not map, and it came \
         from {:?}, a server without trusted_xds_server, {not_listed}",
        named.authority, named.referrer_server
    ))))
}

/// `host:port` and `http://host:port` dial the same plaintext server.
fn plaintext_target(uri: &str) -> &str {
    uri.strip_prefix("http://").unwrap_or(uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::DataSource;
    use envoy_types::pb::envoy::config::core::v3::api_config_source::ApiType;
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::google_grpc::ChannelCredentials;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::google_grpc::SslCredentials;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::google_grpc::channel_credentials::CredentialSpecifier;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::{GoogleGrpc, TargetSpecifier};
    use envoy_types::pb::envoy::config::core::v3::{
        AggregatedConfigSource, ApiConfigSource, GrpcService,
    };
    use envoy_types::pb::xds::core::v3::Authority;
    use xdsfed_core::bootstrap::{AllowedGrpcService, ApiVariant, CallCreds, ChannelCreds};

    const AUTHORITY: &str = "b.test";

    fn naming(target: &str) -> ConfigSource {
        ConfigSource {
            authorities: vec![Authority {
                name: AUTHORITY.into(),
            }],
            config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(
                ApiConfigSource {
                    api_type: ApiType::AggregatedDeltaGrpc as i32,
                    grpc_services: vec![GrpcService {
                        target_specifier: Some(TargetSpecifier::GoogleGrpc(GoogleGrpc {
                            target_uri: target.into(),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )),
            ..Default::default()
        }
    }

    fn decide(
        source: &ConfigSource,
        trust: &ConfigSourceTrust,
        from: &str,
    ) -> Option<Result<Via, GraphError>> {
        let name: Arc<str> =
            Arc::from("xdstp://b.test/envoy.config.endpoint.v3.ClusterLoadAssignment/e");
        let referrer: Arc<str> = Arc::from("xdstp://a.test/envoy.config.cluster.v3.Cluster/c");
        let named = Named {
            kind: ResourceKind::ClusterLoadAssignment,
            name: &name,
            authority: AUTHORITY,
            referrer: &referrer,
            referrer_server: from,
        };
        via_source(source, &named, trust)
    }

    fn mapped_to(server: &str) -> ConfigSourceTrust {
        let mut trust = ConfigSourceTrust::default();
        trust
            .mapped
            .entry(AUTHORITY.into())
            .or_default()
            .insert(server.into());
        trust
    }

    #[test]
    fn a_source_naming_no_server_leaves_the_name_to_the_bootstrap() {
        let ads = ConfigSource {
            config_source_specifier: Some(ConfigSourceSpecifier::Ads(
                AggregatedConfigSource::default(),
            )),
            ..naming("unused")
        };
        assert!(decide(&ads, &ConfigSourceTrust::default(), "s1").is_none());
    }

    #[test]
    fn a_source_naming_the_bootstraps_own_server_uses_the_bootstrap() {
        let decision = decide(&naming("10.0.0.2:80"), &mapped_to("10.0.0.2:80"), "s1");
        assert_eq!(decision, Some(Ok(Via::Bootstrap)));
    }

    #[test]
    fn a_bare_target_and_its_http_uri_are_the_same_server() {
        let decision = decide(
            &naming("10.0.0.2:80"),
            &mapped_to("http://10.0.0.2:80"),
            "s1",
        );
        assert_eq!(decision, Some(Ok(Via::Bootstrap)));
    }

    #[test]
    fn a_source_claiming_an_authority_the_bootstrap_maps_elsewhere_is_refused() {
        let mut trust = mapped_to("10.0.0.2:80");
        // Even a trusted server may not take over a mapped authority.
        trust.trusted_servers.insert("s1".into());
        let Some(Err(error)) = decide(&naming("10.6.6.6:80"), &trust, "s1") else {
            panic!("not refused");
        };
        let text = error.to_string();
        assert!(
            text.contains("10.6.6.6:80") && text.contains("10.0.0.2:80"),
            "{text}"
        );
        assert!(text.contains("b.test"), "{text}");
    }

    #[test]
    fn a_trusted_server_may_add_a_server_for_an_unmapped_authority() {
        let mut trust = ConfigSourceTrust::default();
        trust.trusted_servers.insert("s1".into());
        let source = naming("10.0.0.9:80");
        assert_eq!(
            decide(&source, &trust, "s1"),
            Some(Ok(Via::ConfigSource(Arc::new(source))))
        );
    }

    #[test]
    fn an_untrusted_server_may_not_add_a_server() {
        let mut trust = ConfigSourceTrust::default();
        trust.trusted_servers.insert("s1".into());
        let Some(Err(error)) = decide(&naming("10.0.0.9:80"), &trust, "s2") else {
            panic!("not refused");
        };
        assert!(error.to_string().contains("trusted_xds_server"), "{error}");
    }

    fn listed(target: &str) -> ConfigSourceTrust {
        let mut trust = ConfigSourceTrust::default();
        trust.allowed_grpc_services.insert(
            target.into(),
            AllowedGrpcService {
                channel_creds: ChannelCreds::Tls {
                    ca_certificate_file: Some("/etc/listed-ca.pem".into()),
                    certificate_file: None,
                    private_key_file: None,
                },
                call_creds: vec![CallCreds::JwtTokenFile {
                    path: "/run/listed-token".into(),
                }],
            },
        );
        trust
    }

    /// `naming(target)` whose GrpcService carries credentials of its own:
    /// a CA given inline, which the client could not use.
    fn naming_with_own_credentials(target: &str) -> ConfigSource {
        let mut source = naming(target);
        if let Some(ConfigSourceSpecifier::ApiConfigSource(api)) =
            &mut source.config_source_specifier
            && let Some(TargetSpecifier::GoogleGrpc(google)) =
                &mut api.grpc_services[0].target_specifier
        {
            google.channel_credentials = Some(ChannelCredentials {
                credential_specifier: Some(CredentialSpecifier::SslCredentials(SslCredentials {
                    root_certs: Some(DataSource {
                        specifier: Some(Specifier::InlineString("-----BEGIN".into())),
                        ..Default::default()
                    }),
                    ..Default::default()
                })),
            });
        }
        source
    }

    /// gRFC A102: "If the specified target URI *is* present in the map,
    /// then the `GrpcService` proto will be considered valid, but gRPC will
    /// ignore the credential information from the `GrpcService` proto;
    /// instead, it will use the channel credentials and call credentials
    /// specified in the map."
    #[test]
    fn an_untrusted_server_may_name_a_target_listed_in_allowed_grpc_services_with_the_listed_credentials()
     {
        let trust = listed("10.0.0.9:80");
        let Some(Ok(Via::AllowedGrpcService(server))) =
            decide(&naming_with_own_credentials("10.0.0.9:80"), &trust, "s2")
        else {
            panic!("not allowed");
        };
        let allowed = &trust.allowed_grpc_services["10.0.0.9:80"];
        assert_eq!(server.server_uri, "10.0.0.9:80");
        assert_eq!(server.channel_creds, allowed.channel_creds);
        assert_eq!(server.call_creds, allowed.call_creds);
        assert_eq!((server.api, server.api_pinned), (ApiVariant::Delta, true));
    }

    /// gRFC A102: "If so [`trusted_xds_server`], then it will trust the
    /// target name and credentials specified in the `GrpcService` proto",
    /// listed or not; and rules 2 and 3 come first: a listed target does
    /// not take over an authority the bootstrap maps.
    #[test]
    fn a_trusted_server_names_a_listed_target_with_its_own_credentials_and_mapped_authorities_stay_mapped()
     {
        let mut trust = listed("10.0.0.9:80");
        trust.trusted_servers.insert("s1".into());
        let source = naming("10.0.0.9:80");
        assert_eq!(
            decide(&source, &trust, "s1"),
            Some(Ok(Via::ConfigSource(Arc::new(source.clone()))))
        );
        trust
            .mapped
            .entry(AUTHORITY.into())
            .or_default()
            .insert("10.0.0.2:80".into());
        let Some(Err(error)) = decide(&source, &trust, "s2") else {
            panic!("not refused");
        };
        assert!(error.to_string().contains("maps to"), "{error}");
    }

    /// gRFC A102: "If the specified target URI is not present in the map,
    /// then the `GrpcService` proto will be considered invalid"; the error
    /// names the target.
    #[test]
    fn an_untrusted_server_naming_a_target_not_in_allowed_grpc_services_is_refused_naming_it() {
        let Some(Err(error)) = decide(&naming("10.0.0.7:80"), &listed("10.0.0.9:80"), "s2") else {
            panic!("not refused");
        };
        let text = error.to_string();
        assert!(text.contains("\"10.0.0.7:80\""), "{text}");
        assert!(text.contains("allowed_grpc_services"), "{text}");
    }

    /// gRFC A102: `target_uri` "Must be set to a valid gRPC target URI. The
    /// target URI must be checked against the resolver registry during xDS
    /// resource validation": a target this client cannot dial is refused,
    /// naming its scheme, from a trusted server too.
    #[test]
    fn a_target_the_client_cannot_dial_is_refused_naming_its_scheme() {
        let mut trust = listed("unix:/run/xds.sock");
        trust.trusted_servers.insert("s1".into());
        for (target, says) in [("unix:/run/xds.sock", "Unix"), ("ftp://cp:21", "\"ftp\"")] {
            for from in ["s1", "s2"] {
                let Some(Err(error)) = decide(&naming(target), &trust, from) else {
                    panic!("{target} from {from}: not refused");
                };
                let text = error.to_string();
                assert!(text.contains(target) && text.contains(says), "{text}");
            }
        }
    }
}
