//! Server authorization by subject alternative names (gRFC A29): the
//! cluster's `match_subject_alt_names` against the SANs of the server's
//! leaf certificate, after its chain was validated.
//!
//! - No matchers: every certificate whose chain is valid is accepted.
//! - Otherwise the certificate is accepted when any matcher matches any of
//!   its SANs (DNS names, URIs, e-mail addresses, IP addresses as text).
//! - An `exact` matcher against a DNS SAN compares domain names: case
//!   insensitive, trailing dot ignored, and a SAN `*.example.com` matches
//!   exactly one label in place of `*` (only as the whole leftmost label,
//!   never for a single-label name), as grpc-go and grpc-java do.
//! - Other matchers compare text; `ignore_case` compares ASCII case
//!   insensitively (it does not apply to `safe_regex`, as in Envoy).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use regex::Regex;

/// One `match_subject_alt_names` entry, compiled.
#[derive(Debug, Clone)]
pub struct SanMatcher {
    pattern: SanPattern,
    ignore_case: bool,
}

#[derive(Debug, Clone)]
enum SanPattern {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(Regex),
}

impl PartialEq for SanMatcher {
    fn eq(&self, other: &Self) -> bool {
        use SanPattern::*;
        self.ignore_case == other.ignore_case
            && match (&self.pattern, &other.pattern) {
                (Exact(a), Exact(b))
                | (Prefix(a), Prefix(b))
                | (Suffix(a), Suffix(b))
                | (Contains(a), Contains(b)) => a == b,
                (Regex(a), Regex(b)) => a.as_str() == b.as_str(),
                _ => false,
            }
    }
}

impl Eq for SanMatcher {}

impl SanMatcher {
    /// Compiles a `StringMatcher`; a custom or empty one, or a regex that
    /// does not compile, is refused with the reason.
    pub fn compile(matcher: &StringMatcher) -> Result<Self, String> {
        let pattern = match &matcher.match_pattern {
            Some(MatchPattern::Exact(v)) => SanPattern::Exact(v.clone()),
            Some(MatchPattern::Prefix(v)) => SanPattern::Prefix(v.clone()),
            Some(MatchPattern::Suffix(v)) => SanPattern::Suffix(v.clone()),
            Some(MatchPattern::Contains(v)) => SanPattern::Contains(v.clone()),
            Some(MatchPattern::SafeRegex(r)) => SanPattern::Regex(
                Regex::new(&format!("^(?:{})$", r.regex)).map_err(|e| format!("bad regex: {e}"))?,
            ),
            Some(MatchPattern::Custom(_)) => return Err("custom matchers are not supported".into()),
            None => return Err("no match pattern".into()),
        };
        Ok(Self {
            pattern,
            ignore_case: matcher.ignore_case,
        })
    }

    /// Whether this matcher accepts `san`.
    pub fn matches(&self, san: &SubjectAltName) -> bool {
        match (&self.pattern, san) {
            (SanPattern::Exact(host), SubjectAltName::Dns(name)) => dns_match(host, name),
            (pattern, san) => self.matches_text(pattern, &san.to_string()),
        }
    }

    fn matches_text(&self, pattern: &SanPattern, text: &str) -> bool {
        let fold = |s: &str| {
            if self.ignore_case {
                s.to_ascii_lowercase()
            } else {
                s.to_owned()
            }
        };
        match pattern {
            SanPattern::Exact(v) => fold(text) == fold(v),
            SanPattern::Prefix(v) => fold(text).starts_with(&fold(v)),
            SanPattern::Suffix(v) => fold(text).ends_with(&fold(v)),
            SanPattern::Contains(v) => fold(text).contains(&fold(v)),
            SanPattern::Regex(re) => re.is_match(text),
        }
    }
}

/// Whether a certificate with these SANs is accepted by `matchers`: any
/// matcher matching any SAN, or no matchers at all.
pub fn san_matches(matchers: &[SanMatcher], sans: &[SubjectAltName]) -> bool {
    matchers.is_empty()
        || sans
            .iter()
            .any(|san| matchers.iter().any(|m| m.matches(san)))
}

/// `host` (the exact matcher's value) against a DNS SAN that may be a
/// wildcard: domain names compared without case and trailing dot, `*`
/// only as the whole leftmost label of a name of two labels or more, and
/// standing for exactly one label.
fn dns_match(host: &str, san: &str) -> bool {
    let absolute = |s: &str| {
        let mut s = s.to_ascii_lowercase();
        if !s.ends_with('.') {
            s.push('.');
        }
        s
    };
    let (host, san) = (absolute(host), absolute(san));
    if !san.contains('*') {
        return host == san;
    }
    let Some(rest) = san.strip_prefix('*') else {
        return false;
    };
    if san == "*." || !rest.starts_with('.') || rest.contains('*') || rest == "." {
        return false;
    }
    match host.strip_suffix(rest) {
        Some(label) => !label.is_empty() && !label.contains('.'),
        None => false,
    }
}

/// A subject alternative name of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectAltName {
    /// `dNSName`.
    Dns(String),
    /// `uniformResourceIdentifier`.
    Uri(String),
    /// `rfc822Name`.
    Email(String),
    /// `iPAddress`.
    Ip(IpAddr),
}

impl fmt::Display for SubjectAltName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dns(s) | Self::Uri(s) | Self::Email(s) => f.write_str(s),
            Self::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// The SANs of a DER certificate (its `subjectAltName` extension; none
/// without one). Names of other kinds, and names that are not ASCII text,
/// are skipped. Errors say what is malformed.
pub fn leaf_subject_alt_names(der: &[u8]) -> Result<Vec<SubjectAltName>, String> {
    let certificate = Der::new(der).expect(SEQUENCE, "certificate")?;
    let tbs = Der::new(certificate).expect(SEQUENCE, "tbsCertificate")?;
    let mut fields = Der::new(tbs);
    while let Some((tag, body)) = fields.next()? {
        if tag == EXTENSIONS {
            let list = Der::new(body).expect(SEQUENCE, "extensions")?;
            return san_extension(list);
        }
    }
    Ok(Vec::new())
}

const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const OCTET_STRING: u8 = 0x04;
/// `[3] EXPLICIT Extensions` in `TBSCertificate`.
const EXTENSIONS: u8 = 0xA3;
/// 2.5.29.17, `id-ce-subjectAltName`.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1D, 0x11];

fn san_extension(list: &[u8]) -> Result<Vec<SubjectAltName>, String> {
    let mut extensions = Der::new(list);
    while let Some((tag, extension)) = extensions.next()? {
        if tag != SEQUENCE {
            return Err("extension: not a SEQUENCE".into());
        }
        let mut parts = Der::new(extension);
        let oid = parts.expect(OID, "extension id")?;
        if oid != SUBJECT_ALT_NAME {
            continue;
        }
        let mut value = parts.next()?.ok_or("subjectAltName: no value")?;
        if value.0 == BOOLEAN {
            value = parts.next()?.ok_or("subjectAltName: no value")?;
        }
        if value.0 != OCTET_STRING {
            return Err("subjectAltName: value is not an OCTET STRING".into());
        }
        let names = Der::new(value.1).expect(SEQUENCE, "GeneralNames")?;
        return general_names(names);
    }
    Ok(Vec::new())
}

fn general_names(names: &[u8]) -> Result<Vec<SubjectAltName>, String> {
    let text = |body: &[u8]| {
        std::str::from_utf8(body)
            .ok()
            .filter(|s| s.is_ascii())
            .map(str::to_owned)
    };
    let mut out = Vec::new();
    let mut reader = Der::new(names);
    while let Some((tag, body)) = reader.next()? {
        let name = match tag {
            0x81 => text(body).map(SubjectAltName::Email),
            0x82 => text(body).map(SubjectAltName::Dns),
            0x86 => text(body).map(SubjectAltName::Uri),
            0x87 => ip_address(body).map(SubjectAltName::Ip),
            _ => None,
        };
        out.extend(name);
    }
    Ok(out)
}

fn ip_address(body: &[u8]) -> Option<IpAddr> {
    if let Ok(v4) = <[u8; 4]>::try_from(body) {
        return Some(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    <[u8; 16]>::try_from(body)
        .ok()
        .map(|v6| IpAddr::V6(Ipv6Addr::from(v6)))
}

/// A reader of DER TLVs (single-byte tags, definite lengths up to 4
/// bytes); every length is checked against what is left.
struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next TLV's tag and contents, or `None` at the end.
    fn next(&mut self) -> Result<Option<(u8, &'a [u8])>, String> {
        let Some((&tag, rest)) = self.rest.split_first() else {
            return Ok(None);
        };
        if tag & 0x1F == 0x1F {
            return Err("multi-byte DER tags are not expected in a certificate".into());
        }
        let (&first, mut rest) = rest.split_first().ok_or("DER: truncated length")?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7F);
            if count == 0 || count > 4 || count > rest.len() {
                return Err("DER: bad length".into());
            }
            let (bytes, after) = rest.split_at(count);
            rest = after;
            bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b))
        };
        if len > rest.len() {
            return Err("DER: length past the end".into());
        }
        let (body, after) = rest.split_at(len);
        self.rest = after;
        Ok(Some((tag, body)))
    }

    /// The next TLV's contents, which must have tag `tag`.
    fn expect(&mut self, tag: u8, what: &str) -> Result<&'a [u8], String> {
        match self.next()? {
            Some((t, body)) if t == tag => Ok(body),
            _ => Err(format!("{what}: malformed")),
        }
    }
}

#[cfg(test)]
mod tests;
