//! The bootstrap: which servers to talk to, for which authorities, as whom.
//!
//! One model, three ways to write it:
//!
//! ```text
//! gRPC bootstrap JSON (gRFC A27/A47) ─┐
//! the same schema in YAML ────────────┼─► generic document ─► validation ─► Bootstrap
//! Envoy-style config_sources (YAML) ──┘   (exact field paths)
//! ```
//!
//! ```
//! use xdsfed_core::bootstrap::{ApiVariant, Bootstrap};
//!
//! let bootstrap = Bootstrap::from_yaml_str(r#"
//! node: { id: client-1 }
//! xds_servers:
//!   - server_uri: 127.0.0.1:18000
//!     channel_creds: [{ type: insecure }]
//! authorities:
//!   cloud.example:
//!     xds_servers:
//!       - server_uri: 127.0.0.1:18001
//!         channel_creds: [{ type: insecure }]
//! "#)?;
//! let cloud = &bootstrap.authorities["cloud.example"];
//! assert_eq!(cloud.xds_servers[0].server_uri, "127.0.0.1:18001");
//! assert_eq!(
//!     cloud.client_listener_resource_name_template,
//!     "xdstp://cloud.example/envoy.config.listener.v3.Listener/%s"
//! );
//! assert_eq!(bootstrap.xds_servers[0].api, ApiVariant::Delta);
//! # Ok::<(), xdsfed_core::bootstrap::BootstrapError>(())
//! ```
//!
//! Validation is strict about what it understands and lenient about what
//! it does not: a wrong type, a missing required field or an inconsistent
//! value is an error naming the field's path (`xds_servers[0].channel_creds`,
//! `authorities."cloud.example".client_listener_resource_name_template`);
//! an unknown field is ignored, as gRPC does, so that one file can serve
//! clients of different versions. `docs/bootstrap.md` documents every field.

mod allowed;
mod call_creds;
mod certs;
mod document;
mod envoy;
mod error;
mod files;
mod grpc;
mod node;
mod server;
mod target;
mod walk;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use allowed::AllowedGrpcService;
pub use call_creds::{CallCreds, JWT_TOKEN_FILE};
pub use certs::{CertificateProvider, DEFAULT_REFRESH_INTERVAL, FileWatcherConfig};
pub use error::{BootstrapError, BootstrapErrorKind, Format, Origin};
pub use node::{Locality, Node, USER_AGENT_NAME};
pub use server::{
    ApiVariant, CdnTiming, ChannelCreds, FILE_SCHEME, FileFormat, FileSource, PolicyStreamTiming,
    RestTiming, ServerConfig, ServerProtocol, features,
};
pub use target::{check_server_uri, dial_target};

use crate::file::{BOOTSTRAP_LIMIT, read_bounded};
use walk::At;

/// The environment variable holding a bootstrap file's path.
pub const ENV_BOOTSTRAP_FILE: &str = "GRPC_XDS_BOOTSTRAP";
/// The environment variable holding a bootstrap's JSON contents.
pub const ENV_BOOTSTRAP_CONFIG: &str = "GRPC_XDS_BOOTSTRAP_CONFIG";

/// gRFC A47's default for `client_default_listener_resource_name_template`.
pub const DEFAULT_LISTENER_TEMPLATE: &str = "%s";

/// One entry of `authorities`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityConfig {
    /// The template for `xds://<authority>/<service>` targets; defaults to
    /// `xdstp://<authority>/envoy.config.listener.v3.Listener/%s`.
    pub client_listener_resource_name_template: String,
    /// The authority's servers in order of preference; empty means the
    /// top-level [`Bootstrap::xds_servers`].
    pub xds_servers: Vec<ServerConfig>,
    /// gRFC A95's `fallback_on_reachability_only`: fall back to the next
    /// server whenever the active one is unreachable, even with every
    /// watched resource cached (gRFC A71 alone falls back only for a
    /// resource not cached yet). Defaults to `false`.
    pub fallback_on_reachability_only: bool,
}

/// A validated bootstrap.
#[derive(Debug, Clone, PartialEq)]
pub struct Bootstrap {
    /// Who this client is.
    pub node: Node,
    /// The top-level servers, in order of preference: for old-style names,
    /// and for authorities without servers of their own. Never empty in a
    /// gRPC-schema bootstrap; empty in an Envoy-style one without
    /// `default_config_source`.
    pub xds_servers: Vec<ServerConfig>,
    /// Authority name (percent-encoding normalised) → its configuration.
    pub authorities: BTreeMap<String, AuthorityConfig>,
    /// The template for `xds:///<service>` targets; defaults to `%s`.
    pub client_default_listener_resource_name_template: String,
    /// gRFC A36's template for xDS-enabled servers, if given.
    pub server_listener_resource_name_template: Option<String>,
    /// Certificate provider instances by name.
    pub certificate_providers: BTreeMap<String, CertificateProvider>,
    /// gRFC A102's `allowed_grpc_services`: the targets a server without
    /// `trusted_xds_server` may name in a `GrpcService`, each with the
    /// credentials it is dialled with (the `GrpcService`'s own are ignored).
    pub allowed_grpc_services: BTreeMap<String, AllowedGrpcService>,
}

impl Bootstrap {
    /// Parses a bootstrap in JSON (gRPC's schema, or the Envoy-style keys).
    pub fn from_json_str(text: &str) -> Result<Self, BootstrapError> {
        Self::from_document(&document::parse_json(text)?)
    }

    /// Parses a bootstrap in YAML (gRPC's schema, or Envoy-style
    /// `config_sources` / `default_config_source`).
    pub fn from_yaml_str(text: &str) -> Result<Self, BootstrapError> {
        Self::from_document(&document::parse_yaml(text)?)
    }

    /// Parses `text` in `format`.
    pub fn from_str_as(text: &str, format: Format) -> Result<Self, BootstrapError> {
        match format {
            Format::Json => Self::from_json_str(text),
            Format::Yaml => Self::from_yaml_str(text),
        }
    }

    /// Reads a bootstrap file: YAML when its name ends in `.yaml` or `.yml`,
    /// JSON otherwise. Errors name the file. Only a regular file of at most
    /// 4 MiB is read: a FIFO, a device or a directory is refused unopened.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, BootstrapError> {
        let path = path.as_ref();
        let origin = Origin::File(path.to_path_buf());
        let unreadable = |message: String| {
            BootstrapError::new(BootstrapErrorKind::Read { message }).with_origin(origin.clone())
        };
        // Bounded: a FIFO would block forever, /dev/zero fill the memory.
        let bytes = read_bounded(path, BOOTSTRAP_LIMIT).map_err(|e| unreadable(e.to_string()))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| unreadable(format!("not UTF-8 text: {}", e.utf8_error())))?;
        // Editors on some platforms start UTF-8 files with a byte order mark,
        // which neither JSON nor YAML parsers expect.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        Self::from_str_as(text, format_of(path)).map_err(|e| e.with_origin(origin))
    }

    /// Loads the bootstrap the way gRPC does: from the file named by
    /// `GRPC_XDS_BOOTSTRAP` if it is set and not empty, else from the JSON
    /// in `GRPC_XDS_BOOTSTRAP_CONFIG`, else an error.
    pub fn from_env() -> Result<Self, BootstrapError> {
        Self::from_env_with(|name| std::env::var_os(name))
    }

    /// [`Bootstrap::from_env`] with the environment given as a function
    /// (for tests, and for callers with their own configuration layer).
    pub fn from_env_with(
        mut var: impl FnMut(&str) -> Option<OsString>,
    ) -> Result<Self, BootstrapError> {
        if let Some(path) = var(ENV_BOOTSTRAP_FILE).filter(|v| !v.is_empty()) {
            return Self::from_file(PathBuf::from(path));
        }
        if let Some(contents) = var(ENV_BOOTSTRAP_CONFIG).filter(|v| !v.is_empty()) {
            let origin = Origin::EnvVar(ENV_BOOTSTRAP_CONFIG);
            let Some(text) = contents.to_str() else {
                return Err(BootstrapError::new(BootstrapErrorKind::Read {
                    message: "the variable is not valid UTF-8".to_owned(),
                })
                .with_origin(origin));
            };
            return Self::from_json_str(text).map_err(|e| e.with_origin(origin));
        }
        Err(BootstrapError::new(BootstrapErrorKind::NotConfigured))
    }

    /// The `envoy.config.core.v3.Node` to send to servers; see [`Node::to_proto`].
    pub fn node_proto(&self) -> envoy_types::pb::envoy::config::core::v3::Node {
        self.node.to_proto()
    }

    /// The servers of `authority` (normalised name), falling back to the
    /// top-level list when the authority has none; `None` when the
    /// authority is not configured.
    pub fn servers_for_authority(&self, authority: &str) -> Option<&[ServerConfig]> {
        let config = self.authorities.get(authority)?;
        Some(if config.xds_servers.is_empty() {
            &self.xds_servers
        } else {
            &config.xds_servers
        })
    }

    fn from_document(doc: &serde_json::Value) -> Result<Self, BootstrapError> {
        let root = At::root(doc);
        root.object()?;
        let envoy_style =
            root.get("config_sources")?.is_some() || root.get("default_config_source")?.is_some();
        let (xds_servers, authorities) = if envoy_style {
            for key in ["xds_servers", "authorities"] {
                if let Some(at) = root.get(key)? {
                    return Err(at.error(
                        "cannot be combined with config_sources or default_config_source: use one schema",
                    ));
                }
            }
            envoy::parse_config_sources(&root)?
        } else {
            (
                grpc::parse_top_level_servers(&root)?,
                grpc::parse_authorities(&root)?,
            )
        };
        let node = match root.get("node")? {
            Some(at) => node::parse_node(&at)?,
            None => Node::default(),
        };
        let client_default_listener_resource_name_template =
            match root.get("client_default_listener_resource_name_template")? {
                Some(at) => grpc::default_template(&at)?,
                None => DEFAULT_LISTENER_TEMPLATE.to_owned(),
            };
        let server_listener_resource_name_template =
            match root.get("server_listener_resource_name_template")? {
                Some(at) => Some(grpc::default_template(&at)?),
                None => None,
            };
        let certificate_providers = match root.get("certificate_providers")? {
            Some(at) => certs::parse_certificate_providers(&at)?,
            None => BTreeMap::new(),
        };
        let allowed_grpc_services = allowed::parse_allowed_grpc_services(&root)?;
        Ok(Bootstrap {
            node,
            xds_servers,
            authorities,
            client_default_listener_resource_name_template,
            server_listener_resource_name_template,
            certificate_providers,
            allowed_grpc_services,
        })
    }
}

/// The format a file's extension announces.
pub fn format_of(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") => {
            Format::Yaml
        }
        _ => Format::Json,
    }
}

#[cfg(test)]
mod tests;
