//! A cluster's `transport_socket` as gRFC A29 reads it: an
//! `UpstreamTlsContext` naming bootstrap certificate provider instances
//! for the roots (required) and the client's identity (for mTLS), and the
//! SAN matchers that replace hostname checks.
//!
//! NACKed, naming the field: a transport socket that is not TLS, or whose
//! `typed_config` is not an `UpstreamTlsContext`; `transport_socket_matches`;
//! a missing `common_tls_context`; `tls_params` and `custom_handshaker`;
//! `tls_certificates` or `tls_certificate_sds_secret_configs` without a
//! provider instance; a validation context from SDS or a provider plugin
//! config; no root provider instance; a validation context with
//! `verify_certificate_spki`, `verify_certificate_hash`,
//! `require_signed_certificate_timestamp`, `crl`, `custom_validator_config`,
//! `system_root_certs` or `match_typed_subject_alt_names` (ignoring them
//! would accept servers the control plane meant to refuse); a SAN matcher
//! that is empty, custom or a regex that does not compile. Ignored, as A29
//! says: `sni`, `allow_renegotiation`, `max_session_keys`, `alpn_protocols`
//! and the other fields. Whether the instance names exist in the bootstrap
//! is checked where the bootstrap is known (the connection, not here).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
    UpstreamTlsContext,
};

use super::san::SanMatcher;
use crate::types::{ValidationError, unpack_any};

/// The name of the TLS transport socket.
pub const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";

/// A bootstrap `certificate_providers` instance a cluster refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRef {
    /// The key in the bootstrap's `certificate_providers`.
    pub instance_name: String,
    /// Opaque to the `file_watcher` plugin, which has one certificate.
    pub certificate_name: String,
}

/// The TLS a cluster's endpoints are reached with (gRFC A29).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamTls {
    /// Where the CA certificates that validate servers come from.
    pub root: ProviderRef,
    /// Where the client's certificate and key come from (mTLS), if any.
    pub identity: Option<ProviderRef>,
    /// `match_subject_alt_names`: none accepts any server whose chain is
    /// valid.
    pub san_matchers: Vec<SanMatcher>,
}

const CONTEXT: &str = "transport_socket.typed_config.common_tls_context";

/// The cluster's TLS configuration: `None` for plaintext (no
/// `transport_socket`), an error naming the field for one gRPC rejects.
pub fn upstream_tls(cluster: &Cluster) -> Result<Option<UpstreamTls>, ValidationError> {
    if !cluster.transport_socket_matches.is_empty() {
        return Err(ValidationError::field(
            "transport_socket_matches",
            "not supported",
        ));
    }
    let Some(socket) = cluster.transport_socket.as_ref() else {
        return Ok(None);
    };
    let Some(ConfigType::TypedConfig(any)) = socket.config_type.as_ref() else {
        return Err(ValidationError::field(
            "transport_socket.typed_config",
            "missing",
        ));
    };
    if socket.name != TLS_TRANSPORT_SOCKET
        && any.type_url != <UpstreamTlsContext as prost::Name>::type_url()
    {
        return Err(ValidationError::field(
            "transport_socket.name",
            format_args!("unsupported transport socket {:?}", socket.name),
        ));
    }
    let context: UpstreamTlsContext = unpack_any(any, "transport_socket.typed_config")?;
    let Some(common) = context.common_tls_context.as_ref() else {
        return Err(ValidationError::field(CONTEXT, "missing"));
    };
    common_tls_context(common).map(Some)
}

#[allow(deprecated)] // A29 still reads the older provider-instance fields, as grpc-go does.
fn common_tls_context(common: &CommonTlsContext) -> Result<UpstreamTls, ValidationError> {
    let unsupported =
        |field: &str| ValidationError::field(format_args!("{CONTEXT}.{field}"), "not supported");
    if common.tls_params.is_some() {
        return Err(unsupported("tls_params"));
    }
    if common.custom_handshaker.is_some() {
        return Err(unsupported("custom_handshaker"));
    }
    let identity = identity_provider(common)?;
    let (root, context, at) = match &common.validation_context_type {
        Some(ValidationContextType::ValidationContext(vc)) => (
            vc.ca_certificate_provider_instance.as_ref().map(plugin_ref),
            Some(vc),
            "validation_context",
        ),
        Some(ValidationContextType::CombinedValidationContext(combined)) => {
            let vc = combined.default_validation_context.as_ref();
            let root = vc
                .and_then(|vc| vc.ca_certificate_provider_instance.as_ref())
                .map(plugin_ref)
                .or_else(|| {
                    combined
                        .validation_context_certificate_provider_instance
                        .as_ref()
                        .map(|p| ProviderRef {
                            instance_name: p.instance_name.clone(),
                            certificate_name: p.certificate_name.clone(),
                        })
                });
            (
                root,
                vc,
                "combined_validation_context.default_validation_context",
            )
        }
        Some(ValidationContextType::ValidationContextCertificateProviderInstance(p)) => (
            Some(ProviderRef {
                instance_name: p.instance_name.clone(),
                certificate_name: p.certificate_name.clone(),
            }),
            None,
            "validation_context_certificate_provider_instance",
        ),
        Some(ValidationContextType::ValidationContextSdsSecretConfig(_)) => {
            return Err(unsupported("validation_context_sds_secret_config"));
        }
        Some(ValidationContextType::ValidationContextCertificateProvider(_)) => {
            return Err(unsupported("validation_context_certificate_provider"));
        }
        None => (None, None, "validation_context"),
    };
    let Some(root) = root.filter(|r| !r.instance_name.is_empty()) else {
        return Err(ValidationError::field(
            format_args!("{CONTEXT}.{at}.ca_certificate_provider_instance"),
            "a client needs a root certificate provider instance",
        ));
    };
    let san_matchers = match context {
        Some(vc) => validation_context(vc, at)?,
        None => Vec::new(),
    };
    Ok(UpstreamTls {
        root,
        identity,
        san_matchers,
    })
}

/// The identity provider: `tls_certificate_provider_instance`, else the
/// deprecated `tls_certificate_certificate_provider_instance`.
#[allow(deprecated)] // `tls_certificate_certificate_provider_instance`, as above.
fn identity_provider(common: &CommonTlsContext) -> Result<Option<ProviderRef>, ValidationError> {
    let identity = common
        .tls_certificate_provider_instance
        .as_ref()
        .map(plugin_ref)
        .or_else(|| {
            common
                .tls_certificate_certificate_provider_instance
                .as_ref()
                .map(|p| ProviderRef {
                    instance_name: p.instance_name.clone(),
                    certificate_name: p.certificate_name.clone(),
                })
        });
    if identity.is_none() {
        let field = if !common.tls_certificates.is_empty() {
            Some("tls_certificates")
        } else if !common.tls_certificate_sds_secret_configs.is_empty() {
            Some("tls_certificate_sds_secret_configs")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(ValidationError::field(
                format_args!("{CONTEXT}.{field}"),
                "not supported: use tls_certificate_provider_instance",
            ));
        }
    }
    match identity {
        Some(p) if p.instance_name.is_empty() => Err(ValidationError::field(
            format_args!("{CONTEXT}.tls_certificate_provider_instance.instance_name"),
            "empty",
        )),
        other => Ok(other),
    }
}

fn plugin_ref(p: &CertificateProviderPluginInstance) -> ProviderRef {
    ProviderRef {
        instance_name: p.instance_name.clone(),
        certificate_name: p.certificate_name.clone(),
    }
}

/// The SAN matchers of a validation context that asks for nothing gRPC
/// cannot do.
#[allow(deprecated)] // `match_subject_alt_names` is the field A29 names.
fn validation_context(
    vc: &CertificateValidationContext,
    at: &str,
) -> Result<Vec<SanMatcher>, ValidationError> {
    let rejected = [
        (
            "verify_certificate_spki",
            !vc.verify_certificate_spki.is_empty(),
        ),
        (
            "verify_certificate_hash",
            !vc.verify_certificate_hash.is_empty(),
        ),
        (
            "require_signed_certificate_timestamp",
            vc.require_signed_certificate_timestamp
                .as_ref()
                .is_some_and(|b| b.value),
        ),
        ("crl", vc.crl.is_some()),
        (
            "custom_validator_config",
            vc.custom_validator_config.is_some(),
        ),
        ("system_root_certs", vc.system_root_certs.is_some()),
        (
            "match_typed_subject_alt_names",
            !vc.match_typed_subject_alt_names.is_empty(),
        ),
    ];
    if let Some((field, _)) = rejected.iter().find(|(_, set)| *set) {
        return Err(ValidationError::field(
            format_args!("{CONTEXT}.{at}.{field}"),
            "not supported",
        ));
    }
    vc.match_subject_alt_names
        .iter()
        .enumerate()
        .map(|(i, m)| {
            SanMatcher::compile(m).map_err(|why| {
                ValidationError::field(
                    format_args!("{CONTEXT}.{at}.match_subject_alt_names[{i}]"),
                    why,
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
