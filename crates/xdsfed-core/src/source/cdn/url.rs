//! Where a resource lives on an HTTP CDN: the URL layout an operator
//! publishes files under (docs/federation.md, "HTTP CDN delivery").
//!
//! ```text
//! xdstp://AUTH/TYPE/ID/SEGS?k=v   ─► {base}/AUTH/TYPE/ID/SEGS?k=v
//! old-style name, of type URL …/T ─► {base}/T/<the name as one segment>
//! ```
//!
//! The path is [`url_path_of`]'s, the mapping a static host (the testbed's
//! among them) serves by: every segment percent-decoded and written again
//! with only unreserved characters literal, and a name refused outright if
//! a segment decodes to `.` or `..`, to something holding `/` or `\`, or to
//! a control character, so that no name can make a host serve a file
//! outside `{base}` or another resource's file.

use crate::name::{ResourceName, url_path_of};
use crate::protocol::is_glob;

/// The URL of the resource `name` (a canonical key) of type `type_url`
/// under `base` (the server's URI; a trailing `/` is dropped). The error is
/// why the CDN cannot serve the name, for the watchers: a glob collection,
/// a name that does not parse, or one [`url_path_of`] refuses.
pub(super) fn resource_url(base: &str, type_url: &str, name: &str) -> Result<String, String> {
    if is_glob(name) {
        return Err(
            "an HTTP CDN serves files, one per resource, and cannot list a glob collection"
                .to_owned(),
        );
    }
    let parsed = ResourceName::parse(name).map_err(|e| e.to_string())?;
    let path = url_path_of(type_url, &parsed)
        .map_err(|e| format!("the name has no file on an HTTP CDN: {e}"))?;
    Ok(format!("{}{path}", base.trim_end_matches('/')))
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
            Ok(
                "http://cdn.example:8080/xds/mesh.example/envoy.config.cluster.v3.ClusterCollection/a/b%20c?x=1&y=2"
            )
        );
    }

    /// A name with a segment that decodes to `.`, `..` or a separator has
    /// no URL, and the reason says which segment and why.
    #[test]
    fn names_that_would_climb_out_of_the_base_have_no_url() {
        for id in [
            "../x",
            "x/.",
            "%2e%2e/%2e%2e/secret",
            "..%2F..%2Fsecret",
            "a%5Cb",
        ] {
            let name = format!("xdstp://a/envoy.config.cluster.v3.ClusterCollection/{id}");
            let why = resource_url("http://cdn/xds", CDS, &name).unwrap_err();
            assert!(
                why.contains("has no file on an HTTP CDN: id segment"),
                "{why}"
            );
        }
    }

    /// An old-style name is one segment under the short type name.
    #[test]
    fn old_style_name_is_one_escaped_segment_under_the_type() {
        let url = resource_url(
            "https://cdn",
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "pay v2 ?#%",
        );
        assert_eq!(
            url.as_deref(),
            Ok("https://cdn/envoy.config.cluster.v3.Cluster/pay%20v2%20%3F%23%25")
        );
    }

    /// A glob collection is not a file.
    #[test]
    fn glob_collection_has_no_url() {
        let why = resource_url(
            "http://cdn",
            CDS,
            "xdstp://a/envoy.config.cluster.v3.Cluster/*",
        )
        .unwrap_err();
        assert!(why.contains("glob collection"), "{why}");
    }
}
