//! [`XdstpName`]: a parsed `xdstp://` URI and its canonical form.

use std::fmt;

use super::directive::{Directives, parse_directives};
use super::error::NameError;
use super::percent::{Component, PercentError, is_plain, normalise};

/// The scheme prefix that makes a name an `xdstp:` name, in its canonical
/// (lower) case. Schemes are case-insensitive (RFC 3986, section 3.1), so
/// `XDSTP:…` is an `xdstp:` name too ([`super::has_xdstp_scheme`]); its
/// canonical form, which is what goes on the wire, is lower case, so a
/// server that matches the prefix exactly, as gRPC and Envoy do, still sees
/// an `xdstp:` name.
pub(crate) const SCHEME: &str = "xdstp:";

/// A parsed `xdstp://[authority]/{resource type}/{id/*}?{context params}{#directives}`.
///
/// Every component is held in normal form (see [`crate::name`]): context
/// parameters sorted by key then value, percent-encoding normalised. Two
/// names that differ only in parameter order or in how they percent-encode
/// unreserved characters therefore compare equal and have one
/// [`canonical`](XdstpName::canonical) form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct XdstpName {
    authority: String,
    resource_type: String,
    /// The id path, segments joined by `/`; ends in `*` for a glob.
    id: String,
    /// Sorted by key, then value.
    context_params: Vec<(String, String)>,
    directives: Directives,
}

/// Whether the `xds.` context parameter namespace is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// From a server or the cache: the `xds.` namespace is allowed (the
    /// client itself may have added such parameters).
    Wire,
    /// Typed by a user or read from configuration: `xds.` keys are refused.
    User,
}

impl XdstpName {
    /// Parses an `xdstp:` name as it may arrive from a server: any context
    /// parameter key is allowed.
    pub fn parse(name: &str) -> Result<Self, NameError> {
        parse(name, Origin::Wire)
    }

    /// Parses an `xdstp:` name supplied by a user (a watch, a template in a
    /// bootstrap): context parameter keys in the reserved `xds.` namespace
    /// are refused, as xDS TP1 requires of names presented by the client.
    pub fn parse_user_supplied(name: &str) -> Result<Self, NameError> {
        parse(name, Origin::User)
    }

    /// The authority, normalised; empty for `xdstp:///…`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The resource type named in the path, e.g. `envoy.config.cluster.v3.Cluster`.
    pub fn resource_type(&self) -> &str {
        &self.resource_type
    }

    /// The id: the path after the resource type (segments joined by `/`,
    /// percent-encoded in normal form; a glob ends in `*`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id's path segments, percent-encoded in normal form.
    pub fn id_segments(&self) -> impl Iterator<Item = &str> {
        self.id.split('/')
    }

    /// The context parameters, sorted by key then value, percent-encoded in
    /// normal form.
    pub fn context_params(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.context_params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether this is a glob collection (xDS TP1): the id's last segment is
    /// exactly `*`. (`%2A` is not a glob: it is an escaped, literal `*`.)
    pub fn is_glob(&self) -> bool {
        self.id == "*" || self.id.ends_with("/*")
    }

    /// The processing directives (`#alt=…,entry=…`).
    pub fn directives(&self) -> &Directives {
        &self.directives
    }

    /// Whether this is a URN in xDS TP1's sense: neither directives nor a
    /// glob. URNs name exactly one resource; URLs tell a client how to find
    /// resources.
    pub fn is_urn(&self) -> bool {
        self.directives.is_empty() && !self.is_glob()
    }

    /// The canonical name: the cache key and the name sent to servers.
    /// Context parameters sorted, percent-encoding normalised, directives
    /// removed; a glob keeps its `/*`.
    pub fn canonical(&self) -> String {
        let mut out = String::with_capacity(
            SCHEME.len() + 4 + self.authority.len() + self.resource_type.len() + self.id.len(),
        );
        out.push_str("xdstp://");
        out.push_str(&self.authority);
        out.push('/');
        out.push_str(&self.resource_type);
        out.push('/');
        out.push_str(&self.id);
        for (i, (k, v)) in self.context_params.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            out.push_str(k);
            out.push('=');
            out.push_str(v);
        }
        out
    }

    /// Byte offset of the resource type in [`XdstpName::canonical`].
    fn resource_type_offset(&self) -> usize {
        "xdstp://".len() + self.authority.len() + 1
    }

    /// Checks that this name may be watched as `type_url`
    /// (`type.googleapis.com/<T>`): the resource type in the path must be
    /// `<T>` or its list collection `<T>Collection`. An `alt=` directive is
    /// checked too, since the client would watch it as the same type.
    pub fn check_type(&self, type_url: &str) -> Result<(), NameError> {
        let watched = type_url.rsplit_once('/').map_or(type_url, |(_, t)| t);
        let matches = self.resource_type == watched
            || self
                .resource_type
                .strip_suffix("Collection")
                .is_some_and(|base| base == watched);
        if !matches {
            return Err(NameError::TypeMismatch {
                name: self.canonical(),
                position: self.resource_type_offset(),
                name_type: self.resource_type.clone(),
                watched_type: type_url.to_owned(),
            });
        }
        match self.directives.alt() {
            Some(alt) => alt.check_type(type_url),
            None => Ok(()),
        }
    }
}

/// The canonical name followed by the directives, if any: a URL that parses
/// back to an equal [`XdstpName`].
impl fmt::Display for XdstpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())?;
        if !self.directives.is_empty() {
            write!(f, "#{}", self.directives)?;
        }
        Ok(())
    }
}

/// The name being parsed, for turning component errors into [`NameError`]s
/// with absolute positions.
pub(crate) struct Input<'a> {
    pub(crate) name: &'a str,
}

impl Input<'_> {
    /// Normalises `name[start..end]` as `component`.
    pub(crate) fn component(
        &self,
        start: usize,
        end: usize,
        component: Component,
    ) -> Result<String, NameError> {
        let text = self.name.get(start..end).unwrap_or_default();
        normalise(text, component).map_err(|e| match e {
            PercentError::InvalidChar { offset, ch } => NameError::InvalidChar {
                name: self.name.to_owned(),
                position: start + offset,
                ch,
                component: component.describe(),
            },
            PercentError::BadEscape { offset } => NameError::BadPercentEncoding {
                name: self.name.to_owned(),
                position: start + offset,
            },
        })
    }
}

/// Position of the first of `stops` in `name[from..]`, or `name.len()`.
fn find_any(name: &str, from: usize, stops: &[u8]) -> usize {
    name.as_bytes()
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, b)| stops.contains(b))
        .map_or(name.len(), |(i, _)| i)
}

/// Whether `name` is an `xdstp:` name already in canonical form with
/// nothing to normalise: the scheme in lower case, no percent escape, no
/// context parameter or directive, an authority, a resource type and an id
/// of characters their components allow. Most names servers send are; they
/// are checked in one pass, without being taken apart into strings, and
/// [`parse`] would give them back unchanged.
pub(crate) fn is_plain_canonical(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("xdstp://") else {
        return false;
    };
    if rest.bytes().any(|b| matches!(b, b'%' | b'?' | b'#')) {
        return false;
    }
    let Some((authority, path)) = rest.split_once('/') else {
        return false;
    };
    let Some((resource_type, id)) = path.split_once('/') else {
        return false;
    };
    !resource_type.is_empty()
        && !id.is_empty()
        && is_plain(authority, Component::Authority)
        && is_plain(resource_type, Component::PathSegment)
        && id
            .split('/')
            .all(|segment| is_plain(segment, Component::PathSegment))
}

pub(crate) fn parse(name: &str, origin: Origin) -> Result<XdstpName, NameError> {
    let input = Input { name };
    let scheme_end = SCHEME.len();
    if !super::has_xdstp_scheme(name) || name.get(scheme_end..scheme_end + 2) != Some("//") {
        return Err(NameError::NotHierarchical {
            name: name.to_owned(),
            position: scheme_end.min(name.len()),
        });
    }
    let authority_start = scheme_end + 2;
    let authority_end = find_any(name, authority_start, b"/?#");
    let authority = input.component(authority_start, authority_end, Component::Authority)?;
    if name.as_bytes().get(authority_end) != Some(&b'/') {
        return Err(NameError::MissingResourceType {
            name: name.to_owned(),
            position: authority_end,
        });
    }

    let path_start = authority_end + 1;
    let path_end = find_any(name, path_start, b"?#");
    let type_end = find_any(name, path_start, b"/?#").min(path_end);
    if type_end == path_start {
        return Err(NameError::MissingResourceType {
            name: name.to_owned(),
            position: path_start,
        });
    }
    let resource_type = input.component(path_start, type_end, Component::PathSegment)?;
    if type_end == path_end || type_end + 1 == path_end {
        return Err(NameError::MissingId {
            name: name.to_owned(),
            position: (type_end + 1).min(path_end),
        });
    }
    let id = parse_id(&input, type_end + 1, path_end)?;

    let (query_end, context_params) = if name.as_bytes().get(path_end) == Some(&b'?') {
        let end = find_any(name, path_end + 1, b"#");
        (end, parse_query(&input, path_end + 1, end, origin)?)
    } else {
        (path_end, Vec::new())
    };

    let directives = if query_end < name.len() {
        parse_directives(&input, query_end + 1, origin)?
    } else {
        Directives::default()
    };

    Ok(XdstpName {
        authority,
        resource_type,
        id,
        context_params,
        directives,
    })
}

/// Normalises the id path `name[start..end]` segment by segment.
fn parse_id(input: &Input<'_>, start: usize, end: usize) -> Result<String, NameError> {
    let mut id = String::with_capacity(end - start);
    let mut seg_start = start;
    loop {
        let seg_end = find_any(input.name, seg_start, b"/").min(end);
        id.push_str(&input.component(seg_start, seg_end, Component::PathSegment)?);
        if seg_end >= end {
            return Ok(id);
        }
        id.push('/');
        seg_start = seg_end + 1;
    }
}

/// Parses `k=v&k2=v2` in `name[start..end]`: empty pieces (`a=1&&b=2`) are
/// skipped, a piece without `=` is a key with an empty value. The result is
/// sorted by key, then value (xDS TP1 "Normalization").
fn parse_query(
    input: &Input<'_>,
    start: usize,
    end: usize,
    origin: Origin,
) -> Result<Vec<(String, String)>, NameError> {
    let mut params = Vec::new();
    let mut piece_start = start;
    while piece_start <= end {
        let piece_end = find_any(input.name, piece_start, b"&").min(end);
        if piece_end > piece_start {
            let eq = find_any(input.name, piece_start, b"=").min(piece_end);
            if eq == piece_start {
                return Err(NameError::EmptyContextParamKey {
                    name: input.name.to_owned(),
                    position: piece_start,
                });
            }
            let key = input.component(piece_start, eq, Component::Query)?;
            let value = if eq < piece_end {
                input.component(eq + 1, piece_end, Component::Query)?
            } else {
                String::new()
            };
            if origin == Origin::User && key.starts_with("xds.") {
                return Err(NameError::ReservedContextParam {
                    name: input.name.to_owned(),
                    position: piece_start,
                    key,
                });
            }
            params.push((key, value));
        }
        piece_start = piece_end + 1;
    }
    params.sort();
    Ok(params)
}
