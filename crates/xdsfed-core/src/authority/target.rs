//! Listener resource names for data-plane targets (gRFC A47 §"xds Resolver
//! Changes").
//!
//! ```text
//! xds:///svc            → client_default_listener_resource_name_template, "%s" by default;
//!                         the service is percent-encoded only if the template starts with "xdstp:"
//! xds://authority/svc   → authorities[authority].client_listener_resource_name_template,
//!                         "xdstp://authority/envoy.config.listener.v3.Listener/%s" by default;
//!                         the service is always percent-encoded; an unknown authority is an error
//! ```
//!
//! The service is the target's path without its leading `/`, percent-decoded
//! as any URI parser does; when substituted into an `xdstp:` template it is
//! percent-encoded again with [`crate::name::encode_path`], which keeps `/`,
//! so `xds:///a/b` gives `…/Listener/a/b`.

use super::{AuthorityError, AuthorityRegistry};
use crate::name::{self, ResourceName, encode_path};

/// The parts of an `xds:` target URI that matter here.
struct Target<'a> {
    /// `Some` for `xds://authority/…` with a non-empty authority.
    authority: Option<&'a str>,
    /// The path, without its leading `/`, percent-decoded.
    service: Vec<u8>,
}

fn parse_target(target: &str) -> Result<Target<'_>, String> {
    let (scheme, rest) = target
        .split_once(':')
        .ok_or_else(|| "expected an \"xds:\" URI".to_owned())?;
    if !scheme.eq_ignore_ascii_case("xds") {
        return Err(format!("expected the \"xds\" scheme, found {scheme:?}"));
    }
    // Query and fragment do not name the service.
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.strip_prefix("//") {
        Some(hier) => {
            let end = hier.find('/').unwrap_or(hier.len());
            let (authority, path) = hier.split_at(end);
            (Some(authority).filter(|a| !a.is_empty()), path)
        }
        None => (None, rest),
    };
    let path = path.strip_prefix('/').unwrap_or(path);
    if path.is_empty() {
        return Err("the target names no service (its path is empty)".to_owned());
    }
    let service = name::percent_decode(path)
        .map_err(|_| "malformed percent-encoding in the path".to_owned())?;
    Ok(Target { authority, service })
}

impl AuthorityRegistry {
    /// The Listener resource name to watch for the data-plane target
    /// `target` (`xds:///svc`, `xds:svc` or `xds://authority/svc`), exactly
    /// as gRFC A47 specifies. Resolve the result with
    /// [`AuthorityRegistry::resolve`] to find its servers (a default
    /// template may name an authority the bootstrap lacks).
    ///
    /// ```
    /// # use xdsfed_core::{authority::AuthorityRegistry, bootstrap::Bootstrap};
    /// let bootstrap = Bootstrap::from_json_str(r#"{
    ///   "xds_servers": [{"server_uri": "127.0.0.1:18000", "channel_creds": [{"type": "insecure"}]}],
    ///   "authorities": {"cloud.example": {}}
    /// }"#)?;
    /// let registry = AuthorityRegistry::new(&bootstrap);
    /// assert_eq!(registry.listener_resource_name("xds:///a/b c")?.to_string(), "a/b c");
    /// assert_eq!(
    ///     registry.listener_resource_name("xds://cloud.example/svc 1")?.to_string(),
    ///     "xdstp://cloud.example/envoy.config.listener.v3.Listener/svc%201"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listener_resource_name(&self, target: &str) -> Result<ResourceName, AuthorityError> {
        let parsed = parse_target(target).map_err(|problem| AuthorityError::InvalidTarget {
            target: target.to_owned(),
            problem,
        })?;
        let expanded = match parsed.authority {
            Some(raw) => {
                let unknown = || AuthorityError::UnknownTargetAuthority {
                    target: target.to_owned(),
                    authority: raw.to_owned(),
                };
                let authority = name::normalise_authority(raw).map_err(|_| unknown())?;
                let entry = self.authorities.get(&authority).ok_or_else(unknown)?;
                entry
                    .listener_template
                    .replace("%s", &encode_path(&parsed.service))
            }
            None => {
                let template = &self.default_listener_template;
                let service = if crate::name::has_xdstp_scheme(template) {
                    encode_path(&parsed.service)
                } else {
                    String::from_utf8(parsed.service).map_err(|_| {
                        AuthorityError::InvalidTarget {
                            target: target.to_owned(),
                            problem: "the service name is not valid UTF-8 once percent-decoded"
                                .to_owned(),
                        }
                    })?
                };
                template.replace("%s", &service)
            }
        };
        ResourceName::parse_user_supplied(&expanded).map_err(|source| AuthorityError::InvalidName {
            target: target.to_owned(),
            source,
        })
    }
}
