//! Resource names: `xdstp://` URIs (xDS TP1) and old-style opaque names.
//!
//! A resource name decides two things: which server the client asks (its
//! authority, see [`crate::authority`]) and which cache entry the answer
//! fills (its canonical form). Both must be exact: two clients that
//! canonicalise one name differently fetch different resources.
//!
//! ```text
//! xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pay/v2?b=2&a=1#alt=xdstp://onprem.example/…
//! └─┬──┘  └────┬──────┘ └─────────────┬────────────────┘ └─┬──┘ └─┬───┘ └────────┬─────────────────┘
//! scheme   authority          resource type              id     context        directives
//!                                                            params         (URLs only)
//! ```
//!
//! # Two partitions
//!
//! Anything that does not start with `xdstp:` is an old-style name: opaque,
//! compared byte for byte, fetched from the bootstrap's top-level servers.
//! It lives in its own partition of the cache, apart from every authority
//! (gRFC A47), so an old-style name can never collide with an `xdstp:` one.
//!
//! # URLs and URNs
//!
//! xDS TP1 distinguishes *URLs*, which tell the client how to locate
//! resources and may carry directives (`#alt=…`, `#entry=…`) and a trailing
//! glob `/*`, from *URNs*, which name exactly one resource and carry
//! neither. A URN is a self-contained cache key.
//!
//! # Canonical form
//!
//! "Two xdstp:// URNs are considered equivalent if they match
//! component-wise modulo context parameter ordering" (TP1 §Normalization).
//! [`XdstpName::canonical`] makes that equivalence an equality of strings:
//!
//! - context parameters sorted by key, then value;
//! - percent-encoding normalised (RFC 3986 §6.2.2): escapes of unreserved
//!   characters decoded (`%7E` → `~`), other escapes upper-case (`%2f` →
//!   `%2F`); reserved characters keep their encoding, since `%2F` and `/`
//!   differ;
//! - the fragment (directives) removed; a glob keeps its `/*`.
//!
//! Most names a server sends are canonical already. [`canonical_key`]
//! recognises those in one pass over the text (lower-case scheme; no
//! escape, context parameter or directive; an authority, a type and an id
//! of characters their parts allow) and copies them, or with
//! [`canonical_key_of`] borrows them; only the others are taken apart. A property test holds both ways to the same key.
//!
//! ```
//! use xdsfed_core::name::{ResourceName, canonical_key};
//!
//! let a = canonical_key("xdstp://auth/envoy.config.cluster.v3.Cluster/c%7e1?b=2&a=1")?;
//! let b = canonical_key("xdstp://auth/envoy.config.cluster.v3.Cluster/c~1?a=1&b=2#entry=x")?;
//! assert_eq!(a, b);
//! assert_eq!(a, "xdstp://auth/envoy.config.cluster.v3.Cluster/c~1?a=1&b=2");
//!
//! let name = ResourceName::parse_user_supplied(
//!     "xdstp://auth/envoy.config.listener.v3.Listener/edge/*?region=eu",
//! )?;
//! assert_eq!(name.authority(), Some("auth"));
//! assert!(name.as_xdstp().is_some_and(|n| n.is_glob()));
//! name.check_type("type.googleapis.com/envoy.config.listener.v3.Listener")?;
//! # Ok::<(), xdsfed_core::name::NameError>(())
//! ```
//!
//! # Who may set `xds.` context parameters
//!
//! TP1 reserves the `xds.` namespace for parameters the client computes
//! itself. Names a user supplies are parsed with
//! [`ResourceName::parse_user_supplied`], which refuses such keys; names
//! arriving from a server (and [`canonical_key`]) accept them, since they
//! may echo parameters the client added.

mod directive;
mod error;
pub(crate) mod percent;
mod url_path;
mod xdstp;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;

pub use directive::Directives;
pub use error::NameError;
pub(crate) use percent::decode as percent_decode;
pub use percent::encode_path;
pub use url_path::{NamePart, UnsafeSegment, UrlPathError, resource_of_url_path, url_path_of};
pub use xdstp::XdstpName;

/// A resource name: an `xdstp:` URI, or an old-style opaque name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceName {
    /// A name starting with `xdstp:`.
    Xdstp(XdstpName),
    /// Any other name, kept byte for byte.
    OldStyle(String),
}

impl ResourceName {
    /// Parses a name as it arrives from a server: `xdstp:` names are checked
    /// and normalised, context parameters in the `xds.` namespace allowed.
    /// The empty string is refused: no resource is named so.
    pub fn parse(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            Err(NameError::Empty)
        } else if has_xdstp_scheme(name) {
            XdstpName::parse(name).map(ResourceName::Xdstp)
        } else {
            Ok(ResourceName::OldStyle(name.to_owned()))
        }
    }

    /// Parses a name supplied by a user or by configuration: as
    /// [`ResourceName::parse`], but context parameter keys in the reserved
    /// `xds.` namespace are refused.
    pub fn parse_user_supplied(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            Err(NameError::Empty)
        } else if has_xdstp_scheme(name) {
            XdstpName::parse_user_supplied(name).map(ResourceName::Xdstp)
        } else {
            Ok(ResourceName::OldStyle(name.to_owned()))
        }
    }

    /// The authority of an `xdstp:` name (`Some("")` for `xdstp:///…`);
    /// `None` for an old-style name.
    pub fn authority(&self) -> Option<&str> {
        match self {
            ResourceName::Xdstp(n) => Some(n.authority()),
            ResourceName::OldStyle(_) => None,
        }
    }

    /// The parsed `xdstp:` name, if this is one.
    pub fn as_xdstp(&self) -> Option<&XdstpName> {
        match self {
            ResourceName::Xdstp(n) => Some(n),
            ResourceName::OldStyle(_) => None,
        }
    }

    /// The cache key: [`XdstpName::canonical`], or the old-style name as it is.
    pub fn canonical(&self) -> Cow<'_, str> {
        match self {
            ResourceName::Xdstp(n) => Cow::Owned(n.canonical()),
            ResourceName::OldStyle(s) => Cow::Borrowed(s),
        }
    }

    /// Checks that this name may be watched as `type_url`; see
    /// [`XdstpName::check_type`]. Old-style names carry no type and always
    /// pass.
    pub fn check_type(&self, type_url: &str) -> Result<(), NameError> {
        match self {
            ResourceName::Xdstp(n) => n.check_type(type_url),
            ResourceName::OldStyle(_) => Ok(()),
        }
    }
}

/// An `xdstp:` name with its directives, or the old-style name.
impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceName::Xdstp(n) => n.fmt(f),
            ResourceName::OldStyle(s) => f.write_str(s),
        }
    }
}

/// Whether `name` is an `xdstp:` name. The scheme is matched in any case,
/// as URI schemes are (RFC 3986, section 3.1): `XDSTP://a/T/x` is the same
/// name as `xdstp://a/T/x`, whose canonical form is lower case.
///
/// ```
/// use xdsfed_core::name::has_xdstp_scheme;
/// assert!(has_xdstp_scheme("XDSTP://auth/envoy.config.cluster.v3.Cluster/c1"));
/// assert!(!has_xdstp_scheme("cluster-1"));
/// ```
pub fn has_xdstp_scheme(name: &str) -> bool {
    name.get(..xdstp::SCHEME.len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(xdstp::SCHEME))
}

/// The resource type segment of an `xdstp:` name (`T` in
/// `xdstp://a/T/x`, the scheme in any case); `None` for an old-style name
/// or one with no type. Read in place: nothing is parsed or decoded.
///
/// ```
/// use xdsfed_core::name::xdstp_type_of;
/// let name = "xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/c";
/// assert_eq!(xdstp_type_of(name), Some("envoy.config.endpoint.v3.ClusterLoadAssignment"));
/// assert_eq!(xdstp_type_of("xdstp://a/T/x/envoy.config.cluster.v3.Cluster/y"), Some("T"));
/// assert_eq!(xdstp_type_of("cluster-1"), None);
/// ```
pub fn xdstp_type_of(name: &str) -> Option<&str> {
    if !has_xdstp_scheme(name) {
        return None;
    }
    let rest = name.get(xdstp::SCHEME.len()..)?.strip_prefix("//")?;
    let path = &rest[rest.find('/')? + 1..];
    let end = path.find(['/', '?', '#']).unwrap_or(path.len());
    Some(&path[..end]).filter(|t| !t.is_empty())
}

/// The cache key of a resource name as it appears on the wire: for an
/// `xdstp:` name the canonical form (context parameters sorted,
/// percent-encoding normalised, directives removed, a glob's `/*` kept); an
/// old-style name unchanged. The empty string is refused
/// ([`NameError::Empty`]).
///
/// Names from servers may carry `xds.` context parameters, so this does not
/// refuse them (use [`ResourceName::parse_user_supplied`] for user input).
pub fn canonical_key(name: &str) -> Result<String, NameError> {
    canonical_key_of(name).map(Cow::into_owned)
}

/// [`canonical_key`], borrowing `name` when it is its own key (an old-style
/// name, or an `xdstp:` name already canonical): nothing is allocated for
/// the names servers mostly send.
///
/// ```
/// use std::borrow::Cow;
/// use xdsfed_core::name::canonical_key_of;
///
/// let plain = "xdstp://auth/envoy.config.cluster.v3.Cluster/c1";
/// assert!(matches!(canonical_key_of(plain)?, Cow::Borrowed(k) if k == plain));
/// let spelled = "xdstp://auth/envoy.config.cluster.v3.Cluster/c%31";
/// assert_eq!(canonical_key_of(spelled)?, plain);
/// # Ok::<(), xdsfed_core::name::NameError>(())
/// ```
pub fn canonical_key_of(name: &str) -> Result<Cow<'_, str>, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if !has_xdstp_scheme(name) || xdstp::is_plain_canonical(name) {
        return Ok(Cow::Borrowed(name));
    }
    Ok(Cow::Owned(XdstpName::parse(name)?.canonical()))
}

/// The authority of a canonical key: `Some("")` for `xdstp:///…`, `None` for
/// an old-style name.
pub fn authority_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("xdstp://")?;
    // Bytes, not chars: the three are ASCII, and a search for a set of
    // chars decodes each one (this runs for every resource received).
    let end = rest
        .bytes()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    rest.get(..end)
}

/// Normalises an authority as it appears in a bootstrap, so that it compares
/// equal to the authority of any name that means it. The error says what is
/// wrong, for the bootstrap's own error message.
pub(crate) fn normalise_authority(raw: &str) -> Result<String, String> {
    percent::normalise(raw, percent::Component::Authority).map_err(|e| match e {
        percent::PercentError::InvalidChar { offset, ch } => format!(
            "invalid authority name: character {ch:?} at byte {offset} is not allowed in a URI authority"
        ),
        percent::PercentError::BadEscape { offset } => {
            format!("invalid authority name: malformed percent-encoding at byte {offset}")
        }
    })
}
