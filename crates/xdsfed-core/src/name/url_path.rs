//! A resource name as a URL path under a file host's base, and back: the
//! one mapping an HTTP CDN source fetches by and a static host serves by
//! (docs/federation.md, "Where each file lives").
//!
//! ```text
//! xdstp://AUTH/TYPE/ID/SEGS?k=v   ─► /AUTH/TYPE/ID/SEGS?k=v
//! old-style NAME of type …/TYPE   ─► /TYPE/NAME
//! ```
//!
//! # The rule
//!
//! A file host percent-decodes a request's path before it looks for the
//! file (nginx and Python's `http.server` both do), so what a segment
//! *decodes to* decides which file is served, not how it is written. Each
//! part of the name that becomes a segment (an xdstp name's authority,
//! resource type and every id segment; an old-style name and its type's
//! short name) is therefore percent-decoded, and the name is refused if a
//! decoded segment
//!
//! - is `.` or `..`, a step a host resolves (climbing out of the base, or
//!   into another resource's file);
//! - holds `/` or `\` (written `%2F`, `%5C`), which a host may take as a
//!   separator, making `..%2F..%2Fsecret` the two steps up it spells;
//! - holds a control character (NUL included), which no file name should.
//!
//! Otherwise each decoded segment is written again with every byte outside
//! RFC 3986's unreserved characters percent-encoded, so the host sees
//! exactly one segment per part. An empty segment stays empty (it names no
//! step). The context parameters are the query, as the canonical form
//! writes them: a query is never resolved as a path.
//!
//! Names that differ only in whether a reserved character is escaped
//! (`a:b` and `a%3Ab`) decode alike and so share a file: a file host
//! cannot tell them apart either.

use std::fmt;

use super::percent::{self, Component};
use super::{ResourceName, canonical_key};

/// Which part of a name a refused segment came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamePart {
    /// An xdstp name's authority.
    Authority,
    /// An xdstp name's resource type.
    ResourceType,
    /// An xdstp name's id segment, counted from 1.
    IdSegment(usize),
    /// An old-style name (one segment).
    OldStyleName,
    /// The short type name an old-style name is filed under.
    TypeName,
}

impl fmt::Display for NamePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamePart::Authority => f.write_str("the authority"),
            NamePart::ResourceType => f.write_str("the resource type"),
            NamePart::IdSegment(n) => write!(f, "id segment {n}"),
            NamePart::OldStyleName => f.write_str("the name"),
            NamePart::TypeName => f.write_str("the type name"),
        }
    }
}

/// Why a decoded segment cannot be a segment of a file's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsafeSegment {
    /// `.` or `..`: a host resolves it as a step.
    DotSegment,
    /// It holds `/` or `\`, which a host may take as a separator.
    Separator,
    /// It holds a control character.
    ControlCharacter,
    /// A `%` not followed by two hex digits.
    BadEscape,
}

impl fmt::Display for UnsafeSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnsafeSegment::DotSegment => "a step a file host resolves (`.` or `..`)",
            UnsafeSegment::Separator => "a path separator (`/` or `\\`)",
            UnsafeSegment::ControlCharacter => "a control character",
            UnsafeSegment::BadEscape => "a malformed percent-escape",
        })
    }
}

/// Why a name has no file path, or a path names no resource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlPathError {
    /// A segment decodes to something a file host would not keep as one
    /// segment of a path under its base.
    #[error("{part} {segment:?} decodes to {decoded:?}, {why}: no file path can hold it")]
    Unsafe {
        /// Where the segment is.
        part: NamePart,
        /// The segment as written (percent-encoded).
        segment: String,
        /// The segment decoded (control characters escaped).
        decoded: String,
        /// What is wrong with it.
        why: UnsafeSegment,
    },
    /// The name does not parse, or a path has no resource's shape.
    #[error("{0}")]
    NotAName(String),
}

/// The path under a file host's base of the resource `name` of type
/// `type_url`, with a leading `/` and the context parameters as the query:
/// each segment percent-decoded, refused if it decodes to `.`, `..`, a
/// `/`, a `\` or a control character, else re-encoded with only unreserved
/// characters literal (docs/federation.md). A glob collection is the caller's
/// to refuse: its path would be that of a file named `*`.
///
/// ```
/// use xdsfed_core::name::{ResourceName, url_path_of};
///
/// let name = ResourceName::parse("xdstp://cdn.example/envoy.config.cluster.v3.Cluster/a/b:c?x=1")?;
/// let path = url_path_of("type.googleapis.com/envoy.config.cluster.v3.Cluster", &name).unwrap();
/// assert_eq!(path, "/cdn.example/envoy.config.cluster.v3.Cluster/a/b%3Ac?x=1");
///
/// let climbing = ResourceName::parse("xdstp://cdn.example/envoy.config.cluster.v3.Cluster/%2e%2e/x")?;
/// assert!(url_path_of("type.googleapis.com/envoy.config.cluster.v3.Cluster", &climbing).is_err());
/// # Ok::<(), xdsfed_core::name::NameError>(())
/// ```
pub fn url_path_of(type_url: &str, name: &ResourceName) -> Result<String, UrlPathError> {
    let mut path = String::with_capacity(type_url.len() + 64);
    let Some(xdstp) = name.as_xdstp() else {
        let short = type_url.rsplit('/').next().unwrap_or(type_url);
        let raw_name = name.canonical();
        for (part, raw) in [
            (NamePart::TypeName, short),
            (NamePart::OldStyleName, &*raw_name),
        ] {
            // An old-style name is opaque: its `%` is a character, not an escape.
            path.push('/');
            path.push_str(&percent::encode_unreserved(checked(
                part,
                raw,
                raw.as_bytes(),
            )?));
        }
        return Ok(path);
    };
    let parts = [
        (NamePart::Authority, xdstp.authority()),
        (NamePart::ResourceType, xdstp.resource_type()),
    ]
    .into_iter()
    .chain(
        xdstp
            .id_segments()
            .enumerate()
            .map(|(i, s)| (NamePart::IdSegment(i + 1), s)),
    );
    for (part, segment) in parts {
        path.push('/');
        path.push_str(&percent::encode_unreserved(&decode_segment(part, segment)?));
    }
    for (i, (k, v)) in xdstp.context_params().enumerate() {
        path.push(if i == 0 { '?' } else { '&' });
        path.push_str(k);
        path.push('=');
        path.push_str(v);
    }
    Ok(path)
}

/// The type URL and the canonical name of the resource a request's `path`
/// (and `query`) names: the inverse of [`url_path_of`], under the same
/// rule. `/TYPE/NAME` is an old-style name; `/AUTH/TYPE/ID…` an xdstp name.
///
/// ```
/// use xdsfed_core::name::resource_of_url_path;
///
/// let (type_url, name) =
///     resource_of_url_path("/cdn.example/envoy.config.cluster.v3.Cluster/a/b%3Ac", Some("x=1")).unwrap();
/// assert_eq!(type_url, "type.googleapis.com/envoy.config.cluster.v3.Cluster");
/// assert_eq!(name, "xdstp://cdn.example/envoy.config.cluster.v3.Cluster/a/b:c?x=1");
/// assert!(resource_of_url_path("/cdn.example/envoy.config.cluster.v3.Cluster/..%2Fx", None).is_err());
/// ```
pub fn resource_of_url_path(
    path: &str,
    query: Option<&str>,
) -> Result<(String, String), UrlPathError> {
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    if let [short, name] = segments.as_slice() {
        let short = String::from_utf8(decode_segment(NamePart::TypeName, short)?)
            .map_err(|_| UrlPathError::NotAName(format!("{short:?} is not UTF-8")))?;
        let name = String::from_utf8(decode_segment(NamePart::OldStyleName, name)?)
            .map_err(|_| UrlPathError::NotAName(format!("{name:?} is not UTF-8")))?;
        // Not an xdstp name: that would have three segments or more.
        if name.is_empty() || super::has_xdstp_scheme(&name) {
            return Err(UrlPathError::NotAName(format!(
                "{name:?} is no old-style name"
            )));
        }
        return Ok((format!("type.googleapis.com/{short}"), name));
    }
    let [authority, short, id @ ..] = segments.as_slice() else {
        return Err(UrlPathError::NotAName(format!(
            "{path:?} has too few segments"
        )));
    };
    if id.is_empty() {
        return Err(UrlPathError::NotAName(format!("{path:?} has no id")));
    }
    let authority = decode_segment(NamePart::Authority, authority)?;
    let resource_type = decode_segment(NamePart::ResourceType, short)?;
    let mut name = format!(
        "xdstp://{}/{}",
        percent::encode_component(&authority, Component::Authority),
        percent::encode_component(&resource_type, Component::PathSegment),
    );
    for (i, segment) in id.iter().enumerate() {
        let decoded = decode_segment(NamePart::IdSegment(i + 1), segment)?;
        name.push('/');
        name.push_str(&percent::encode_component(&decoded, Component::PathSegment));
    }
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        name.push('?');
        name.push_str(query);
    }
    let name = canonical_key(&name).map_err(|e| UrlPathError::NotAName(e.to_string()))?;
    let type_url = format!(
        "type.googleapis.com/{}",
        String::from_utf8_lossy(&resource_type)
    );
    Ok((type_url, name))
}

/// `segment` (percent-encoded) decoded, if it is safe as one segment of a
/// file's path.
fn decode_segment(part: NamePart, segment: &str) -> Result<Vec<u8>, UrlPathError> {
    let decoded = percent::decode(segment).map_err(|_| UrlPathError::Unsafe {
        part,
        segment: segment.to_owned(),
        decoded: String::new(),
        why: UnsafeSegment::BadEscape,
    })?;
    checked(part, segment, &decoded)?;
    Ok(decoded)
}

/// `decoded` if no file host would resolve it, split it, or store a
/// control character from it.
fn checked<'a>(part: NamePart, segment: &str, decoded: &'a [u8]) -> Result<&'a [u8], UrlPathError> {
    let text = String::from_utf8_lossy(decoded);
    let why = if matches!(decoded, b"." | b"..") {
        Some(UnsafeSegment::DotSegment)
    } else if decoded.iter().any(|b| matches!(b, b'/' | b'\\')) {
        Some(UnsafeSegment::Separator)
    } else if text.chars().any(char::is_control) {
        Some(UnsafeSegment::ControlCharacter)
    } else {
        None
    };
    match why {
        None => Ok(decoded),
        Some(why) => Err(UrlPathError::Unsafe {
            part,
            segment: segment.to_owned(),
            decoded: text.escape_debug().to_string(),
            why,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";

    fn path(name: &str) -> Result<String, UrlPathError> {
        url_path_of(CDS, &ResourceName::parse(name).unwrap())
    }

    fn refused(name: &str) -> (NamePart, UnsafeSegment) {
        match path(name) {
            Err(UrlPathError::Unsafe { part, why, .. }) => (part, why),
            other => panic!("{name}: {other:?}"),
        }
    }

    /// An xdstp name's authority, type and id segments are the path; its
    /// sorted context parameters the query.
    #[test]
    fn xdstp_name_is_authority_type_and_id_segments_then_the_query() {
        assert_eq!(
            path("xdstp://mesh.example/envoy.config.cluster.v3.ClusterCollection/a/b%20c?y=2&x=1")
                .unwrap(),
            "/mesh.example/envoy.config.cluster.v3.ClusterCollection/a/b%20c?x=1&y=2"
        );
    }

    /// Rule: a decoded segment is written again with only unreserved
    /// characters literal.
    #[test]
    fn segments_are_re_encoded_with_only_unreserved_characters_literal() {
        assert_eq!(
            path("xdstp://[::1]/envoy.config.cluster.v3.ClusterCollection/a:b@c!$'(),;=+*/%7e~")
                .unwrap(),
            "/%5B%3A%3A1%5D/envoy.config.cluster.v3.ClusterCollection/a%3Ab%40c%21%24%27%28%29%2C%3B%3D%2B%2A/~~"
        );
    }

    /// Rule: a segment that decodes to `.` or `..` is refused, however it
    /// is written.
    #[test]
    fn dot_segments_are_refused_however_encoded() {
        for id in ["..", ".", "%2E%2E", "%2e%2e/%2e%2e/secret", ".%2E", "x/%2E"] {
            let name = format!("xdstp://a/envoy.config.cluster.v3.ClusterCollection/{id}");
            assert_eq!(refused(&name).1, UnsafeSegment::DotSegment, "{name}");
        }
        assert_eq!(
            refused("xdstp://%2E%2E/envoy.config.cluster.v3.ClusterCollection/x"),
            (NamePart::Authority, UnsafeSegment::DotSegment)
        );
    }

    /// Rule: a segment that decodes to a `/` or `\` is refused.
    #[test]
    fn encoded_separators_are_refused() {
        for id in ["..%2F..%2Fsecret", "a%2fb", "a%5Cb", "..%5C..%5Csecret"] {
            let name = format!("xdstp://a/envoy.config.cluster.v3.ClusterCollection/{id}");
            assert_eq!(
                refused(&name),
                (NamePart::IdSegment(1), UnsafeSegment::Separator),
                "{name}"
            );
        }
    }

    /// Rule: a segment that decodes to a control character is refused.
    #[test]
    fn control_characters_are_refused() {
        for id in ["a%00", "%0A", "x%7F", "%C2%85"] {
            let name = format!("xdstp://a/envoy.config.cluster.v3.ClusterCollection/ok/{id}");
            assert_eq!(
                refused(&name),
                (NamePart::IdSegment(2), UnsafeSegment::ControlCharacter),
                "{name}"
            );
        }
    }

    /// The refusal names the part, the segment and what it decodes to.
    #[test]
    fn refusal_names_the_segment_and_what_it_decodes_to() {
        let error = path("xdstp://a/envoy.config.cluster.v3.ClusterCollection/x/..%2Fsecret")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "id segment 2 \"..%2Fsecret\" decodes to \"../secret\", \
             a path separator (`/` or `\\`): no file path can hold it"
        );
    }

    /// An old-style name is one segment under the type's short name, the
    /// same rule applied to it as written.
    #[test]
    fn old_style_name_is_one_segment_under_the_type() {
        let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
        let of = |name: &str| url_path_of(cds, &ResourceName::parse(name).unwrap());
        assert_eq!(
            of("pay v2 ?#%").unwrap(),
            "/envoy.config.cluster.v3.Cluster/pay%20v2%20%3F%23%25"
        );
        for name in ["..", ".", "pay/v2", "..\\x", "a\u{0}b"] {
            assert!(
                matches!(
                    of(name),
                    Err(UrlPathError::Unsafe {
                        part: NamePart::OldStyleName,
                        ..
                    })
                ),
                "{name:?}"
            );
        }
        // `%2E%2E` is an opaque name's own characters: the file `%2E%2E`.
        assert_eq!(
            of("%2E%2E").unwrap(),
            "/envoy.config.cluster.v3.Cluster/%252E%252E"
        );
        assert!(url_path_of("type.googleapis.com/..", &ResourceName::parse("x").unwrap()).is_err());
    }

    /// A path maps back to the name it was made from.
    #[test]
    fn paths_map_back_to_their_names() {
        for name in [
            "xdstp://mesh.example/envoy.config.cluster.v3.ClusterCollection/mesh/all?a=1&b=2",
            "xdstp://[::1]:8080/envoy.config.cluster.v3.ClusterCollection/a:b@c/%20%25/~",
            "xdstp:///envoy.config.cluster.v3.ClusterCollection/x",
        ] {
            let p = path(name).unwrap();
            let (p, q) = p.split_once('?').map_or((&*p, None), |(p, q)| (p, Some(q)));
            assert_eq!(
                resource_of_url_path(p, q).unwrap(),
                (CDS.to_owned(), name.to_owned())
            );
        }
        assert_eq!(
            resource_of_url_path("/envoy.config.cluster.v3.Cluster/pay%20v2%25", None).unwrap(),
            (
                "type.googleapis.com/envoy.config.cluster.v3.Cluster".to_owned(),
                "pay v2%".to_owned()
            )
        );
    }

    /// A request path is held to the same rule.
    #[test]
    fn paths_that_climb_or_split_name_nothing() {
        for p in [
            "/a/envoy.config.cluster.v3.Cluster/%2e%2e/%2e%2e/secret",
            "/a/envoy.config.cluster.v3.Cluster/..%2F..%2Fsecret",
            "/a/envoy.config.cluster.v3.Cluster/x%00",
            "/envoy.config.cluster.v3.Cluster/..",
            "/envoy.config.cluster.v3.Cluster/a%2Fb",
            "/a/envoy.config.cluster.v3.Cluster/%zz",
            "/only-one",
        ] {
            assert!(resource_of_url_path(p, None).is_err(), "{p}");
        }
    }
}
