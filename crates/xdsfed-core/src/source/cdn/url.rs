//! Where a resource lives on an HTTP CDN: the URL layout an operator
//! publishes files under (docs/federation.md, "HTTP CDN delivery").
//!
//! ```text
//! xdstp://AUTH/TYPE/ID/SEGS?k=v   ─► {base}/AUTH/TYPE/ID/SEGS?k=v
//! old-style name, of type URL …/T ─► {base}/T/<the name as one segment>
//! ```
//!
//! An xdstp name's segments are already percent-encoded in normal form
//! (the name module's canonical key), so they are kept as they are: a
//! segment of the name is a segment of the path. Two exceptions, both
//! encoded as `%2E`: a segment that is `.` or `..`, which an HTTP client or
//! server would otherwise resolve, climbing out of `{base}` or into another
//! resource's file. The context parameters are the query string, sorted as
//! in the canonical key.

use std::fmt::Write as _;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use crate::name::ResourceName;

/// What an old-style name's segment escapes: everything but RFC 3986's
/// unreserved characters, so `/`, `?`, `#` and `%` stay inside it.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'!')
    .add(b'"')
    .add(b'#')
    .add(b'$')
    .add(b'%')
    .add(b'&')
    .add(b'\'')
    .add(b'(')
    .add(b')')
    .add(b'*')
    .add(b'+')
    .add(b',')
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'<')
    .add(b'=')
    .add(b'>')
    .add(b'?')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// The URL of the resource `name` (a canonical key) of type `type_url`
/// under `base` (the server's URI, without a trailing `/`). `None` for a
/// name the CDN cannot serve: a glob collection, or a name that does not
/// parse.
pub(crate) fn resource_url(base: &str, type_url: &str, name: &str) -> Option<String> {
    let base = base.trim_end_matches('/');
    let parsed = ResourceName::parse(name).ok()?;
    let Some(xdstp) = parsed.as_xdstp() else {
        let short = type_url.rsplit('/').next().unwrap_or(type_url);
        let mut url = format!("{base}/{}/", segment(short));
        url.push_str(&segment(name));
        return Some(url);
    };
    if xdstp.is_glob() {
        return None;
    }
    let mut url = String::with_capacity(base.len() + name.len() + 8);
    url.push_str(base);
    for part in [xdstp.authority(), xdstp.resource_type()]
        .into_iter()
        .chain(xdstp.id_segments())
    {
        url.push('/');
        url.push_str(&dot_safe(part));
    }
    for (i, (k, v)) in xdstp.context_params().enumerate() {
        let _ = write!(url, "{}{k}={v}", if i == 0 { '?' } else { '&' });
    }
    Some(url)
}

/// A segment of the canonical form, with `.` and `..` escaped.
fn dot_safe(segment: &str) -> std::borrow::Cow<'_, str> {
    match segment {
        "." => "%2E".into(),
        ".." => "%2E%2E".into(),
        other => other.into(),
    }
}

/// `raw` as one path segment: every reserved character escaped; `.` and
/// `..` too.
fn segment(raw: &str) -> String {
    let encoded = utf8_percent_encode(raw, SEGMENT).to_string();
    dot_safe(&encoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";

    /// An xdstp name's authority, type and id segments are the path under
    /// the base; its sorted context parameters are the query.
    #[test]
    fn xdstp_name_maps_to_base_authority_type_id_and_query() {
        let url = resource_url(
            "http://cdn.example:8080/xds/",
            CDS,
            "xdstp://mesh.example/envoy.config.cluster.v3.ClusterCollection/a/b%20c?x=1&y=2",
        );
        assert_eq!(
            url.as_deref(),
            Some(
                "http://cdn.example:8080/xds/mesh.example/envoy.config.cluster.v3.ClusterCollection/a/b%20c?x=1&y=2"
            )
        );
    }

    /// A `.` or `..` segment cannot climb out of the base.
    #[test]
    fn dot_segments_are_escaped() {
        let url = resource_url(
            "http://cdn",
            CDS,
            "xdstp://a/envoy.config.cluster.v3.ClusterCollection/../x/.",
        );
        assert_eq!(
            url.as_deref(),
            Some("http://cdn/a/envoy.config.cluster.v3.ClusterCollection/%2E%2E/x/%2E")
        );
    }

    /// An old-style name is one segment under the short type name.
    #[test]
    fn old_style_name_is_one_escaped_segment_under_the_type() {
        let url = resource_url(
            "https://cdn",
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "pay/v2 ?#%",
        );
        assert_eq!(
            url.as_deref(),
            Some("https://cdn/envoy.config.cluster.v3.Cluster/pay%2Fv2%20%3F%23%25")
        );
    }

    /// A glob collection is not a file.
    #[test]
    fn glob_collection_has_no_url() {
        assert_eq!(
            resource_url(
                "http://cdn",
                CDS,
                "xdstp://a/envoy.config.cluster.v3.Cluster/*"
            ),
            None
        );
    }
}
