//! gRPC's bootstrap schema (gRFC A27, A47): `xds_servers`, `authorities` and
//! the listener resource name templates.

use std::collections::BTreeMap;

use super::AuthorityConfig;
use super::server::{ServerConfig, parse_server_list};
use super::walk::{At, Result};
use crate::name::{self, XdstpName};

/// The type URL listener templates must name.
const LISTENER_TYPE_URL: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

/// gRFC A47's default per-authority template.
pub(crate) fn default_authority_template(authority: &str) -> String {
    format!("xdstp://{authority}/envoy.config.listener.v3.Listener/%s")
}

/// Reads the required, non-empty top-level `xds_servers`.
pub(crate) fn parse_top_level_servers(root: &At<'_>) -> Result<Vec<ServerConfig>> {
    let at = root.require("xds_servers", "a non-empty array of servers")?;
    let servers = parse_server_list(&at)?;
    if servers.is_empty() {
        return Err(at.error("expected at least one server"));
    }
    Ok(servers)
}

/// gRFC A95's per-authority fallback knob, in both schemas.
pub(crate) const REACHABILITY_ONLY: &str = "fallback_on_reachability_only";

/// Reads `authorities`: authority name →
/// `{client_listener_resource_name_template, xds_servers, fallback_on_reachability_only}`.
/// Keys are normalised like the authority of an `xdstp:` name, so that two
/// spellings of one authority are caught as duplicates.
pub(crate) fn parse_authorities(root: &At<'_>) -> Result<BTreeMap<String, AuthorityConfig>> {
    let mut out = BTreeMap::new();
    let Some(at) = root.get("authorities")? else {
        return Ok(out);
    };
    for (raw, entry) in at.entries()? {
        entry.object()?;
        let template = match entry.get("client_listener_resource_name_template")? {
            Some(t) => authority_template(&t, raw)?,
            None => default_authority_template(raw),
        };
        // An empty list means "use the top-level servers", like an absent one.
        let xds_servers = match entry.get("xds_servers")? {
            Some(list) => parse_server_list(&list)?,
            None => Vec::new(),
        };
        let fallback_on_reachability_only = entry.opt_bool(REACHABILITY_ONLY)?;
        insert_authority(
            &mut out,
            raw,
            &entry,
            AuthorityConfig {
                client_listener_resource_name_template: template,
                xds_servers,
                fallback_on_reachability_only,
            },
        )?;
    }
    Ok(out)
}

/// The longest authority name accepted: an authority is a host-like
/// name, and every resource name of it repeats it.
pub(crate) const MAX_AUTHORITY_BYTES: usize = 1024;

/// Inserts an authority under its normalised name, refusing a duplicate
/// and a name over [`MAX_AUTHORITY_BYTES`].
pub(crate) fn insert_authority(
    map: &mut BTreeMap<String, AuthorityConfig>,
    raw: &str,
    at: &At<'_>,
    config: AuthorityConfig,
) -> Result<()> {
    if raw.len() > MAX_AUTHORITY_BYTES {
        return Err(at.error(format!(
            "an authority name of {} bytes: at most {MAX_AUTHORITY_BYTES} are accepted",
            raw.len()
        )));
    }
    let key = name::normalise_authority(raw).map_err(|problem| at.error(problem))?;
    if map.contains_key(&key) {
        return Err(at.error(format!(
            "duplicate authority {key:?}: another entry names the same authority (names are compared with percent-encoding normalised)"
        )));
    }
    map.insert(key, config);
    Ok(())
}

/// gRFC A47: a per-authority template "must start with
/// `xdstp://<authority_name>/`. If it does not, that is considered a
/// bootstrap file parsing error."
fn authority_template(at: &At<'_>, authority: &str) -> Result<String> {
    let template = at.str()?;
    let prefix = format!("xdstp://{authority}/");
    if !template.starts_with(&prefix) {
        return Err(at.error(format!("must start with {prefix:?}")));
    }
    check_xdstp_template(at, template)?;
    Ok(template.to_owned())
}

/// `client_default_listener_resource_name_template`: any string (default
/// `%s`); one starting with `xdstp:` must give a valid listener name.
pub(crate) fn default_template(at: &At<'_>) -> Result<String> {
    let template = at.str()?;
    if crate::name::has_xdstp_scheme(template) {
        check_xdstp_template(at, template)?;
    }
    Ok(template.to_owned())
}

/// Checks that `template` expands to a valid, user-supplied listener name.
/// Catching this at load time turns a typo into a bootstrap error instead of
/// a failure of every later watch.
fn check_xdstp_template(at: &At<'_>, template: &str) -> Result<()> {
    let sample = template.replace("%s", "svc");
    let parsed = XdstpName::parse_user_supplied(&sample)
        .map_err(|e| at.error(format!("not a valid xdstp name once %s is replaced: {e}")))?;
    parsed
        .check_type(LISTENER_TYPE_URL)
        .map_err(|e| at.error(format!("must name a Listener: {e}")))
}
