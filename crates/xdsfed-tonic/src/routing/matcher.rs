//! A route's `match`: the path (prefix, exact path or `safe_regex`),
//! header matchers and the runtime fraction, as gRPC reads them (gRFC A28).
//!
//! - `case_sensitive` (default true) applies to `prefix` and `path`, not to
//!   regular expressions.
//! - Regular expressions (RE2 syntax, read with the `regex` crate, which
//!   accepts the same language less back-references) must match the whole
//!   value.
//! - A header with several values is matched against the values joined by
//!   `,`. Headers whose name ends in `-bin` are never seen by matchers; the
//!   pseudo-headers `:authority`, `:path` and `:method` are.
//! - A missing header fails every matcher but `present_match`, unless
//!   `treat_missing_header_as_empty`; `invert_match` flips the result.
//! - `runtime_fraction` uses its `default_value`: this crate has no
//!   runtime.
//! - Routes with query-parameter, cookie, TLS or metadata matchers, or a
//!   path specifier other than the three above, never match (gRPC skips
//!   them too).

use std::borrow::Cow;

use envoy_types::pb::envoy::config::route::v3::HeaderMatcher;
use envoy_types::pb::envoy::config::route::v3::RouteMatch;
use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::envoy::r#type::v3::fractional_percent::DenominatorType;
use http::HeaderMap;
use regex::Regex;

/// What a route matcher looks at in a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestView<'a> {
    pub(crate) authority: &'a str,
    pub(crate) path: &'a str,
    pub(crate) method: &'a str,
    pub(crate) headers: &'a HeaderMap,
}

impl<'a> RequestView<'a> {
    /// The header's value, several values joined by `,` (gRFC A28).
    pub(crate) fn header(&self, name: &str) -> Option<Cow<'a, str>> {
        match name {
            ":authority" => return Some(Cow::Borrowed(self.authority)),
            ":path" => return Some(Cow::Borrowed(self.path)),
            ":method" => return Some(Cow::Borrowed(self.method)),
            _ if name.ends_with("-bin") => return None,
            _ => {}
        }
        let mut values = self
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let first = values.next()?;
        match values.next() {
            None => Some(Cow::Borrowed(first)),
            Some(second) => {
                let mut joined = format!("{first},{second}");
                for v in values {
                    joined.push(',');
                    joined.push_str(v);
                }
                Some(Cow::Owned(joined))
            }
        }
    }
}

/// A compiled `RouteMatch`.
#[derive(Debug)]
pub(crate) struct RouteMatcher {
    path: PathMatcher,
    headers: Vec<HeaderMatch>,
    /// `numerator` out of `denominator`, when set.
    fraction: Option<(u64, u64)>,
}

#[derive(Debug)]
enum PathMatcher {
    Prefix { value: String, case_sensitive: bool },
    Exact { value: String, case_sensitive: bool },
    Regex(Regex),
}

#[derive(Debug)]
struct HeaderMatch {
    name: String,
    kind: HeaderKind,
    invert: bool,
    missing_as_empty: bool,
}

#[derive(Debug)]
enum HeaderKind {
    Text(TextMatch),
    /// `[start, end)`.
    Range(i64, i64),
    Present(bool),
}

#[derive(Debug)]
enum TextMatch {
    Exact(String, bool),
    Prefix(String, bool),
    Suffix(String, bool),
    Contains(String, bool),
    Regex(Regex),
}

impl RouteMatcher {
    /// Compiles `m`, or says why the route can never match.
    pub(crate) fn compile(m: &RouteMatch) -> Result<Self, String> {
        let case_sensitive = m.case_sensitive.as_ref().is_none_or(|b| b.value);
        let path = match &m.path_specifier {
            Some(PathSpecifier::Prefix(p)) => PathMatcher::Prefix {
                value: p.clone(),
                case_sensitive,
            },
            Some(PathSpecifier::Path(p)) => PathMatcher::Exact {
                value: p.clone(),
                case_sensitive,
            },
            Some(PathSpecifier::SafeRegex(r)) => PathMatcher::Regex(full_match(&r.regex)?),
            Some(_) => return Err("its path specifier is not prefix, path or safe_regex".into()),
            None => return Err("it has no path specifier".into()),
        };
        if !m.query_parameters.is_empty() {
            return Err("it matches query parameters".into());
        }
        if !m.cookies.is_empty() || m.tls_context.is_some() || !m.dynamic_metadata.is_empty() {
            return Err("it matches cookies, TLS context or metadata".into());
        }
        let headers = m
            .headers
            .iter()
            .map(HeaderMatch::compile)
            .collect::<Result<_, _>>()?;
        let fraction = m
            .runtime_fraction
            .as_ref()
            .and_then(|f| f.default_value.as_ref())
            .map(|f| {
                let denominator = match DenominatorType::try_from(f.denominator) {
                    Ok(DenominatorType::TenThousand) => 10_000,
                    Ok(DenominatorType::Million) => 1_000_000,
                    _ => 100,
                };
                (u64::from(f.numerator).min(denominator), denominator)
            });
        Ok(Self {
            path,
            headers,
            fraction,
        })
    }

    /// Whether the request matches; `random` decides the runtime fraction.
    pub(crate) fn matches(&self, request: &RequestView<'_>, random: u64) -> bool {
        self.path.matches(request.path)
            && self.headers.iter().all(|h| h.matches(request))
            && self
                .fraction
                .is_none_or(|(numerator, denominator)| random % denominator < numerator)
    }
}

/// A regular expression that must match the whole value.
fn full_match(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("bad regex: {e}"))
}

/// ASCII-case-insensitive `starts_with`, on bytes so that no char
/// boundary can be split.
fn starts_with(value: &str, prefix: &str, case_sensitive: bool) -> bool {
    match value.as_bytes().get(..prefix.len()) {
        Some(head) if case_sensitive => head == prefix.as_bytes(),
        Some(head) => head.eq_ignore_ascii_case(prefix.as_bytes()),
        None => false,
    }
}

fn ends_with(value: &str, suffix: &str, case_sensitive: bool) -> bool {
    match value.len().checked_sub(suffix.len()) {
        Some(at) if case_sensitive => value.as_bytes()[at..] == *suffix.as_bytes(),
        Some(at) => value.as_bytes()[at..].eq_ignore_ascii_case(suffix.as_bytes()),
        None => false,
    }
}

impl PathMatcher {
    fn matches(&self, path: &str) -> bool {
        match self {
            Self::Prefix {
                value,
                case_sensitive,
            } => starts_with(path, value, *case_sensitive),
            Self::Exact {
                value,
                case_sensitive: true,
            } => path == value,
            Self::Exact { value, .. } => path.eq_ignore_ascii_case(value),
            Self::Regex(re) => re.is_match(path),
        }
    }
}

impl HeaderMatch {
    #[allow(deprecated)] // The older one-field matchers are still sent by control planes.
    fn compile(h: &HeaderMatcher) -> Result<Self, String> {
        let kind = match &h.header_match_specifier {
            Some(HeaderMatchSpecifier::ExactMatch(v)) => {
                HeaderKind::Text(TextMatch::Exact(v.clone(), true))
            }
            Some(HeaderMatchSpecifier::SafeRegexMatch(r)) => {
                HeaderKind::Text(TextMatch::Regex(full_match(&r.regex)?))
            }
            Some(HeaderMatchSpecifier::RangeMatch(r)) => HeaderKind::Range(r.start, r.end),
            Some(HeaderMatchSpecifier::PresentMatch(p)) => HeaderKind::Present(*p),
            Some(HeaderMatchSpecifier::PrefixMatch(v)) => {
                HeaderKind::Text(TextMatch::Prefix(v.clone(), true))
            }
            Some(HeaderMatchSpecifier::SuffixMatch(v)) => {
                HeaderKind::Text(TextMatch::Suffix(v.clone(), true))
            }
            Some(HeaderMatchSpecifier::ContainsMatch(v)) => {
                HeaderKind::Text(TextMatch::Contains(v.clone(), true))
            }
            Some(HeaderMatchSpecifier::StringMatch(s)) => HeaderKind::Text(TextMatch::compile(s)?),
            // No specifier: the header must be present (Envoy's default).
            None => HeaderKind::Present(true),
        };
        Ok(Self {
            name: h.name.to_ascii_lowercase(),
            kind,
            invert: h.invert_match,
            missing_as_empty: h.treat_missing_header_as_empty,
        })
    }

    fn matches(&self, request: &RequestView<'_>) -> bool {
        let value = request.header(&self.name);
        let value = match (value, self.missing_as_empty) {
            (Some(v), _) => Some(v),
            (None, true) => Some(Cow::Borrowed("")),
            (None, false) => None,
        };
        let matched = match (&self.kind, value) {
            (HeaderKind::Present(want), value) => value.is_some() == *want,
            (_, None) => return false,
            (HeaderKind::Text(t), Some(v)) => t.matches(&v),
            (HeaderKind::Range(start, end), Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| *start <= n && n < *end)
            }
        };
        matched != self.invert
    }
}

impl TextMatch {
    fn compile(s: &StringMatcher) -> Result<Self, String> {
        let sensitive = !s.ignore_case;
        Ok(match &s.match_pattern {
            Some(MatchPattern::Exact(v)) => Self::Exact(v.clone(), sensitive),
            Some(MatchPattern::Prefix(v)) => Self::Prefix(v.clone(), sensitive),
            Some(MatchPattern::Suffix(v)) => Self::Suffix(v.clone(), sensitive),
            Some(MatchPattern::Contains(v)) => Self::Contains(v.clone(), sensitive),
            Some(MatchPattern::SafeRegex(r)) => Self::Regex(full_match(&r.regex)?),
            Some(MatchPattern::Custom(_)) | None => {
                return Err("a header's string matcher is custom or empty".into());
            }
        })
    }

    fn matches(&self, value: &str) -> bool {
        match self {
            Self::Exact(v, true) => value == v,
            Self::Exact(v, false) => value.eq_ignore_ascii_case(v),
            Self::Prefix(v, sensitive) => starts_with(value, v, *sensitive),
            Self::Suffix(v, sensitive) => ends_with(value, v, *sensitive),
            Self::Contains(v, true) => value.contains(v.as_str()),
            Self::Contains(v, false) => {
                value.to_ascii_lowercase().contains(&v.to_ascii_lowercase())
            }
            Self::Regex(re) => re.is_match(value),
        }
    }
}
