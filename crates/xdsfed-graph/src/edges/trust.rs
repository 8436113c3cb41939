//! Whether a `ConfigSource` beside a name may send the name to the server it
//! names (xDS TP1 "Transport network addressing").
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
//! 4. A source naming a server for an authority the bootstrap does not map
//!    is honoured only inside a resource from a trusted server
//!    (`trusted_xds_server`): adding a server means dialling an address, or
//!    reading a local file, that a server chose.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::ConfigSource;

use super::Via;
use super::named_server::server_of;
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
    let server = server_of(source)?;
    let refused = |why: String| GraphError::ConfigSourceRefused {
        kind: named.kind,
        name: Arc::clone(named.name),
        referrer: Arc::clone(named.referrer),
        why: Arc::from(why),
    };
    if let Some(mapped) = trust.mapped.get(named.authority) {
        if mapped
            .iter()
            .any(|uri| plaintext_target(uri) == plaintext_target(&server.server_uri))
        {
            return Some(Ok(Via::Bootstrap));
        }
        let servers: Vec<&str> = mapped.iter().map(String::as_str).collect();
        return Some(Err(refused(format!(
            "it names server {:?} for authority {:?}, which the bootstrap maps to {servers:?}",
            server.server_uri, named.authority
        ))));
    }
    if trust.trusted_servers.contains(named.referrer_server) {
        return Some(Ok(Via::ConfigSource(Arc::new(source.clone()))));
    }
    Some(Err(refused(format!(
        "it names server {:?} for authority {:?}, which the bootstrap does not map, and it came from \
         {:?}, a server without trusted_xds_server",
        server.server_uri, named.authority, named.referrer_server
    ))))
}

/// `host:port` and `http://host:port` dial the same plaintext server.
fn plaintext_target(uri: &str) -> &str {
    uri.strip_prefix("http://").unwrap_or(uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::api_config_source::ApiType;
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::{GoogleGrpc, TargetSpecifier};
    use envoy_types::pb::envoy::config::core::v3::{
        AggregatedConfigSource, ApiConfigSource, GrpcService,
    };
    use envoy_types::pb::xds::core::v3::Authority;

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
}
