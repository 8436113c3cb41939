#![allow(deprecated)]

use super::*;
use crate::types::ClusterType;
use crate::types::ResourceType;
use crate::types::tests_support::{eds_cluster, pack};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::CombinedCertificateValidationContext;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    SdsSecretConfig, TlsCertificate, TlsParameters,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use prost::Message;

fn instance(name: &str) -> Option<CertificateProviderPluginInstance> {
    Some(CertificateProviderPluginInstance {
        instance_name: name.into(),
        certificate_name: String::new(),
    })
}

/// A cluster whose `transport_socket` carries `common`.
fn cluster_with(common: CommonTlsContext) -> Cluster {
    let mut c = eds_cluster("c1", "");
    c.transport_socket = Some(TransportSocket {
        name: TLS_TRANSPORT_SOCKET.into(),
        config_type: Some(ConfigType::TypedConfig(pack(&UpstreamTlsContext {
            common_tls_context: Some(common),
            sni: "ignored.example".into(),
            ..Default::default()
        }))),
    });
    c
}

fn valid_context() -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_provider_instance: instance("identity"),
        validation_context_type: Some(ValidationContextType::ValidationContext(
            CertificateValidationContext {
                ca_certificate_provider_instance: instance("roots"),
                match_subject_alt_names: vec![StringMatcher {
                    match_pattern: Some(MatchPattern::Exact("backend.example".into())),
                    ignore_case: false,
                }],
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

fn nack(cluster: &Cluster) -> String {
    ClusterType::decode(&cluster.encode_to_vec()).unwrap_err().0
}

/// gRFC A29: the root and identity provider instances and the SAN
/// matchers are read from the `UpstreamTlsContext`; `sni` is ignored.
#[test]
fn upstream_tls_context_names_root_identity_and_san_matchers() {
    let cluster = cluster_with(valid_context());
    assert!(ClusterType::decode(&cluster.encode_to_vec()).is_ok());
    let tls = upstream_tls(&cluster).unwrap().unwrap();
    assert_eq!(tls.root.instance_name, "roots");
    assert_eq!(
        tls.identity.map(|p| p.instance_name).as_deref(),
        Some("identity")
    );
    assert_eq!(tls.san_matchers.len(), 1);
    assert_eq!(upstream_tls(&eds_cluster("plain", "")).unwrap(), None);
}

/// gRFC A29: the root may come from `combined_validation_context`.
#[test]
fn combined_validation_context_supplies_the_root() {
    let common = CommonTlsContext {
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    ca_certificate_provider_instance: instance("roots"),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let tls = upstream_tls(&cluster_with(common)).unwrap().unwrap();
    assert_eq!(tls.root.instance_name, "roots");
    assert_eq!(tls.identity, None);
}

/// gRFC A29: a transport socket whose typed_config is not an
/// UpstreamTlsContext, or that is not TLS, is NACKed.
#[test]
fn transport_socket_that_is_not_upstream_tls_is_rejected() {
    let mut c = eds_cluster("c1", "");
    c.transport_socket = Some(TransportSocket {
        name: TLS_TRANSPORT_SOCKET.into(),
        config_type: Some(ConfigType::TypedConfig(pack(&TlsParameters::default()))),
    });
    assert!(nack(&c).starts_with("transport_socket.typed_config: expected type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"), "{}", nack(&c));
    c.transport_socket = Some(TransportSocket {
        name: "envoy.transport_sockets.alts".into(),
        config_type: Some(ConfigType::TypedConfig(pack(&TlsParameters::default()))),
    });
    assert!(
        nack(&c).starts_with("transport_socket.name:"),
        "{}",
        nack(&c)
    );
}

/// gRFC A29: a client needs a root certificate provider instance.
#[test]
fn upstream_tls_without_root_provider_is_rejected() {
    let mut common = valid_context();
    common.validation_context_type = None;
    assert_eq!(
        nack(&cluster_with(common)),
        "transport_socket.typed_config.common_tls_context.validation_context.ca_certificate_provider_instance: a client needs a root certificate provider instance"
    );
    let mut common = valid_context();
    if let Some(ValidationContextType::ValidationContext(vc)) = &mut common.validation_context_type
    {
        vc.ca_certificate_provider_instance = None;
    }
    assert!(nack(&cluster_with(common)).contains("ca_certificate_provider_instance"));
}

/// gRFC A29 (gRPC supports only provider instances): certificates inline
/// or from SDS, TLS parameters and custom handshakers are NACKed.
#[test]
fn certificates_from_anything_but_a_provider_instance_are_rejected() {
    let mut common = valid_context();
    common.tls_certificate_provider_instance = None;
    common.tls_certificates = vec![TlsCertificate::default()];
    assert!(
        nack(&cluster_with(common))
            .starts_with("transport_socket.typed_config.common_tls_context.tls_certificates:")
    );
    let mut common = valid_context();
    common.tls_certificate_provider_instance = None;
    common.tls_certificate_sds_secret_configs = vec![SdsSecretConfig::default()];
    assert!(nack(&cluster_with(common)).contains(".tls_certificate_sds_secret_configs:"));
    let mut common = valid_context();
    common.validation_context_type = Some(ValidationContextType::ValidationContextSdsSecretConfig(
        SdsSecretConfig::default(),
    ));
    assert!(
        nack(&cluster_with(common))
            .contains(".validation_context_sds_secret_config: not supported")
    );
    let mut common = valid_context();
    common.tls_params = Some(TlsParameters::default());
    assert!(nack(&cluster_with(common)).ends_with(".tls_params: not supported"));
}

/// gRFC A29 (as gRPC applies it): a validation context asking for checks
/// gRPC does not make is NACKed, naming the field.
#[test]
fn validation_context_with_unsupported_checks_is_rejected() {
    type Set = fn(&mut CertificateValidationContext);
    let cases: [(&str, Set); 4] = [
        ("verify_certificate_spki", |vc| {
            vc.verify_certificate_spki = vec!["x".into()]
        }),
        ("verify_certificate_hash", |vc| {
            vc.verify_certificate_hash = vec!["x".into()]
        }),
        ("require_signed_certificate_timestamp", |vc| {
            vc.require_signed_certificate_timestamp =
                Some(envoy_types::pb::google::protobuf::BoolValue { value: true })
        }),
        ("match_typed_subject_alt_names", |vc| {
            vc.match_typed_subject_alt_names = vec![Default::default()]
        }),
    ];
    for (field, set) in cases {
        let mut common = valid_context();
        if let Some(ValidationContextType::ValidationContext(vc)) =
            &mut common.validation_context_type
        {
            set(vc);
        }
        assert_eq!(
            nack(&cluster_with(common)),
            format!(
                "transport_socket.typed_config.common_tls_context.validation_context.{field}: not supported"
            )
        );
    }
}

/// A SAN matcher that cannot be applied is NACKed, naming its index.
#[test]
fn san_matcher_with_bad_regex_is_rejected() {
    let mut common = valid_context();
    if let Some(ValidationContextType::ValidationContext(vc)) = &mut common.validation_context_type
    {
        vc.match_subject_alt_names.push(StringMatcher {
            match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                regex: "(".into(),
                ..Default::default()
            })),
            ignore_case: false,
        });
    }
    assert!(nack(&cluster_with(common)).starts_with(
        "transport_socket.typed_config.common_tls_context.validation_context.match_subject_alt_names[1]: bad regex"
    ));
}
