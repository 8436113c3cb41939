//! `allowed_grpc_services` (gRFC A102, "Security Considerations"): the gRPC
//! targets a server without `trusted_xds_server` may name, each with the
//! credentials the client dials it with.
//!
//! ```json5
//! "allowed_grpc_services": {
//!   "eds.example.org:443": {
//!     "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "/etc/ca.pem"}}],
//!     "call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/run/token"}}]
//!   }
//! }
//! ```
//!
//! The rules, from the gRFC:
//! - "The key is fully-qualified target URI";
//! - `channel_creds`: "This field is required and must contain at least one
//!   channel creds type that the client supports"; the first supported wins;
//! - `call_creds`: "Optional. Client will apply all call creds types that it
//!   supports but will ignore any types that it does not support";
//! - both "follow the same format as the top-level `xds_servers` field", so
//!   they are read by the same parsers as a server's (A27, A97), with the
//!   same rule that a bearer token never goes over an insecure channel.
//!
//! And one the gRFC leaves to the client: a key must be a target this
//! client's transport can dial (see [`super::target`]), or a server naming
//! it could never be reached; such a key is an error naming it.
//!
//! The field is the same top-level key in gRPC's schema and in Envoy-style
//! bootstraps, where it is an xdsfed extension beside `config_sources`.

use std::collections::BTreeMap;

use super::call_creds::{CallCreds, parse_call_creds};
use super::server::{ChannelCreds, parse_channel_creds};
use super::target::check_server_uri;
use super::walk::{At, Result};

/// The top-level key.
pub(crate) const ALLOWED_GRPC_SERVICES: &str = "allowed_grpc_services";

/// One entry of `allowed_grpc_services`: how the client dials the target
/// when an untrusted server names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllowedGrpcService {
    /// The first supported entry of `channel_creds`.
    pub channel_creds: ChannelCreds,
    /// Every supported entry of `call_creds` (gRFC A97), in order.
    pub call_creds: Vec<CallCreds>,
}

/// Reads `allowed_grpc_services` of the document `root`: target URI → its
/// credentials; absent means none is allowed.
pub(crate) fn parse_allowed_grpc_services(
    root: &At<'_>,
) -> Result<BTreeMap<String, AllowedGrpcService>> {
    let mut out = BTreeMap::new();
    let Some(map) = root.get(ALLOWED_GRPC_SERVICES)? else {
        return Ok(out);
    };
    for (target, entry) in map.entries()? {
        entry.object()?;
        check_server_uri(target)
            .map_err(|problem| entry.error(format!("cannot be dialled: {problem}")))?;
        let creds = entry.require("channel_creds", "an array of {\"type\": ...} objects")?;
        let channel_creds = parse_channel_creds(&creds)?;
        let call_creds = parse_call_creds(&entry, &channel_creds)?;
        out.insert(
            target.to_owned(),
            AllowedGrpcService {
                channel_creds,
                call_creds,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::{Bootstrap, BootstrapError};
    use super::*;

    const SERVERS: &str =
        r#""xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}]"#;

    fn with(allowed: &str) -> std::result::Result<Bootstrap, BootstrapError> {
        Bootstrap::from_json_str(&format!(
            r#"{{{SERVERS}, "allowed_grpc_services": {allowed}}}"#
        ))
    }

    fn refused(allowed: &str) -> (String, String) {
        match with(allowed) {
            Ok(b) => panic!("accepted: {:?}", b.allowed_grpc_services),
            Err(e) => (e.field_path().unwrap_or_default().to_owned(), e.to_string()),
        }
    }

    /// "Client will stop at the first type it supports" and "will apply
    /// all call creds types that it supports but will ignore any types that
    /// it does not support" (gRFC A102).
    #[test]
    fn allowed_service_takes_the_first_supported_channel_creds_and_every_supported_call_creds() {
        let bootstrap = with(
            r#"{"eds.example:443": {
                "channel_creds": [{"type": "google_default"},
                                  {"type": "tls", "config": {"ca_certificate_file": "/ca.pem"}},
                                  {"type": "insecure"}],
                "call_creds": [{"type": "access_token"},
                               {"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}]}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let listed = &bootstrap.allowed_grpc_services["eds.example:443"];
        assert_eq!(
            listed.channel_creds,
            ChannelCreds::Tls {
                ca_certificate_file: Some(PathBuf::from("/ca.pem")),
                certificate_file: None,
                private_key_file: None,
            }
        );
        assert_eq!(
            listed.call_creds,
            [CallCreds::JwtTokenFile {
                path: PathBuf::from("/t")
            }]
        );
    }

    /// "This field is required and must contain at least one channel creds
    /// type that the client supports" (gRFC A102).
    #[test]
    fn allowed_service_without_supported_channel_creds_is_refused_naming_the_field() {
        let (path, _) = refused(r#"{"eds.example:443": {}}"#);
        assert_eq!(
            path,
            r#"allowed_grpc_services."eds.example:443".channel_creds"#
        );
        let (path, text) =
            refused(r#"{"eds.example:443": {"channel_creds": [{"type": "google_default"}]}}"#);
        assert_eq!(
            path,
            r#"allowed_grpc_services."eds.example:443".channel_creds"#
        );
        assert!(text.contains("google_default"), "{text}");
    }

    /// A bearer token is never sent over an insecure channel, as for a
    /// server's `call_creds` (gRFC A97).
    #[test]
    fn allowed_service_with_a_token_over_insecure_creds_is_refused() {
        let (path, text) = refused(
            r#"{"eds.example:443": {"channel_creds": [{"type": "insecure"}],
                "call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/t"}}]}}"#,
        );
        assert_eq!(
            path,
            r#"allowed_grpc_services."eds.example:443".call_creds[0]"#
        );
        assert!(text.contains("insecure"), "{text}");
    }

    /// The key "is fully-qualified target URI" (gRFC A102), and the target
    /// must be one this client's transport can dial.
    #[test]
    fn allowed_service_whose_target_cannot_be_dialled_is_refused_naming_the_scheme() {
        let (path, text) = refused(
            r#"{"dns://8.8.8.8/eds.example:443": {"channel_creds": [{"type": "insecure"}]}}"#,
        );
        assert_eq!(
            path,
            r#"allowed_grpc_services."dns://8.8.8.8/eds.example:443""#
        );
        assert!(text.contains("\"dns\""), "{text}");
        let (_, text) = refused(r#"["eds.example:443"]"#);
        assert!(text.contains("expected an object"), "{text}");
    }

    /// The same field in YAML and beside Envoy-style `config_sources`.
    #[test]
    fn allowed_services_are_read_in_yaml_and_envoy_style_bootstraps() {
        let yaml = Bootstrap::from_yaml_str(
            "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\n\
             allowed_grpc_services:\n  'eds.example:443': {channel_creds: [{type: insecure}]}\n",
        );
        let envoy = Bootstrap::from_yaml_str(
            "config_sources:\n\
             - authorities: [{name: a.example}]\n  \
               api_config_source:\n    \
                 api_type: AGGREGATED_DELTA_GRPC\n    \
                 grpc_services: [{google_grpc: {target_uri: 's:1'}}]\n\
             allowed_grpc_services:\n  'eds.example:443': {channel_creds: [{type: insecure}]}\n",
        );
        for bootstrap in [yaml, envoy] {
            let bootstrap = bootstrap.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                bootstrap.allowed_grpc_services["eds.example:443"].channel_creds,
                ChannelCreds::Insecure
            );
        }
    }
}
