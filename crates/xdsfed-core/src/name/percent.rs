//! RFC 3986 percent-encoding, as xdstp names and listener templates use it.
//!
//! Two operations live here:
//!
//! - [`normalise`] checks one URI component against the characters RFC 3986
//!   allows in it and brings its percent-encoding to the normal form of
//!   RFC 3986 §6.2.2: an escape of an *unreserved* character
//!   (`A-Z a-z 0-9 - . _ ~`) is decoded, every other escape keeps its
//!   encoding with upper-case hex digits. Reserved characters are never decoded: `%2F` and
//!   `/` mean different things, so decoding one into the other would merge
//!   two different names.
//! - [`encode_path`] percent-encodes the text substituted into a listener
//!   resource name template (gRFC A47): RFC 3986 §3.3 path characters and `/`
//!   stay as they are, every other byte becomes `%XX`.

/// The URI component a piece of text belongs to; it decides which
/// characters may appear literally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Component {
    /// `authority` (RFC 3986 §3.2): path characters plus `[` `]` for IP literals.
    Authority,
    /// One `segment` of the path (§3.3): `pchar`.
    PathSegment,
    /// A context parameter key or value (§3.4): `pchar`, `/` and `?`, less
    /// the `&` that separates parameters.
    Query,
    /// The fragment (§3.5): `pchar`, `/` and `?`.
    Fragment,
}

impl Component {
    /// How error messages name the component.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Component::Authority => "authority",
            Component::PathSegment => "path",
            Component::Query => "context parameters",
            Component::Fragment => "directives",
        }
    }

    fn allows(self, b: u8) -> bool {
        match self {
            Component::Authority => is_pchar(b) || b == b'[' || b == b']',
            Component::PathSegment => is_pchar(b),
            Component::Query => (is_pchar(b) || b == b'/' || b == b'?') && b != b'&',
            Component::Fragment => is_pchar(b) || b == b'/' || b == b'?',
        }
    }
}

/// RFC 3986 §2.3 `unreserved`.
pub(crate) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// RFC 3986 §2.2 `sub-delims`.
fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// RFC 3986 §3.3 `pchar`, without the `pct-encoded` alternative.
fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || b == b':' || b == b'@'
}

/// Why a component is not valid; offsets are relative to the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PercentError {
    /// A character the component may not hold literally.
    InvalidChar {
        /// Byte offset of the character.
        offset: usize,
        /// The character.
        ch: char,
    },
    /// A `%` not followed by two hex digits.
    BadEscape {
        /// Byte offset of the `%`.
        offset: usize,
    },
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_escape(out: &mut String, b: u8) {
    out.push('%');
    out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
    out.push(char::from(HEX_UPPER[usize::from(b & 0x0f)]));
}

/// Decodes the escape starting at `bytes[i]` (which is `%`).
fn escape_at(bytes: &[u8], i: usize) -> Result<u8, PercentError> {
    let hi = bytes.get(i + 1).copied().and_then(hex_value);
    let lo = bytes.get(i + 2).copied().and_then(hex_value);
    match (hi, lo) {
        (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
        _ => Err(PercentError::BadEscape { offset: i }),
    }
}

fn invalid_char(s: &str, offset: usize) -> PercentError {
    // `offset` is always a char boundary: the scan advances one byte over
    // ASCII and three over an escape, and stops at the first non-ASCII byte.
    let ch = s
        .get(offset..)
        .and_then(|rest| rest.chars().next())
        .unwrap_or(char::REPLACEMENT_CHARACTER);
    PercentError::InvalidChar { offset, ch }
}

/// Whether `s` is in normal form for `component` as it is: no escape, and
/// only characters the component allows. [`normalise`] returns such text
/// unchanged.
pub(crate) fn is_plain(s: &str, component: Component) -> bool {
    s.bytes().all(|b| b != b'%' && component.allows(b))
}

/// Checks `s` against `component` and returns it in normal form.
pub(crate) fn normalise(s: &str, component: Component) -> Result<String, PercentError> {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let decoded = escape_at(bytes, i)?;
            if is_unreserved(decoded) {
                out.push(char::from(decoded));
            } else {
                push_escape(&mut out, decoded);
            }
            i += 3;
        } else if b.is_ascii() && component.allows(b) {
            out.push(char::from(b));
            i += 1;
        } else {
            return Err(invalid_char(s, i));
        }
    }
    Ok(out)
}

/// Decodes every escape of `s` (as a URI parser does with a target's path).
/// Characters that are not escapes are taken as they are.
pub(crate) fn decode(s: &str) -> Result<Vec<u8>, PercentError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            out.push(escape_at(bytes, i)?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(out)
}

/// Percent-encodes `raw` so that it reads back as one `component`: the
/// characters the component holds literally stay, every other byte (`%`
/// included) becomes `%XX`.
pub(crate) fn encode_component(raw: &[u8], component: Component) -> String {
    encode_keeping(raw, |b| b != b'%' && component.allows(b))
}

/// Percent-encodes every byte of `raw` outside RFC 3986's unreserved
/// characters: the strictest encoding, which no host reads as anything but
/// the bytes it stands for.
pub(crate) fn encode_unreserved(raw: &[u8]) -> String {
    encode_keeping(raw, is_unreserved)
}

fn encode_keeping(raw: &[u8], literal: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(raw.len());
    for &b in raw {
        if literal(b) {
            out.push(char::from(b));
        } else {
            push_escape(&mut out, b);
        }
    }
    out
}

/// Percent-encodes `raw` for substitution into an `xdstp:` listener resource
/// name template, as gRFC A47 specifies: characters allowed in a URI path by
/// RFC 3986 §3.3 (`pchar`) and `/` are kept, everything else — `%` included,
/// and every byte of a non-ASCII character — becomes `%XX`.
///
/// ```
/// use xdsfed_core::name::encode_path;
/// assert_eq!(encode_path(b"a/b c"), "a/b%20c");
/// assert_eq!(encode_path(b"svc:8080"), "svc:8080");
/// assert_eq!(encode_path("caf\u{e9}?x#y".as_bytes()), "caf%C3%A9%3Fx%23y");
/// ```
pub fn encode_path(raw: &[u8]) -> String {
    encode_keeping(raw, |b| is_pchar(b) || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_decodes_unreserved_and_uppercases_the_rest() {
        assert_eq!(
            normalise("%7efoo%2fbar%41", Component::PathSegment).as_deref(),
            Ok("~foo%2FbarA")
        );
        assert_eq!(
            normalise("a%3a%3A", Component::Query).as_deref(),
            Ok("a%3A%3A")
        );
    }

    #[test]
    fn normalise_keeps_reserved_escapes_encoded() {
        for (input, expected) in [
            ("%2F", "%2F"),
            ("%26", "%26"),
            ("%3d", "%3D"),
            ("%2a", "%2A"),
        ] {
            assert_eq!(normalise(input, Component::Query).as_deref(), Ok(expected));
        }
    }

    #[test]
    fn normalise_rejects_characters_outside_the_component() {
        assert_eq!(
            normalise("a b", Component::PathSegment),
            Err(PercentError::InvalidChar { offset: 1, ch: ' ' })
        );
        assert_eq!(
            normalise("a/b", Component::PathSegment),
            Err(PercentError::InvalidChar { offset: 1, ch: '/' })
        );
        assert_eq!(
            normalise("a&b", Component::Query),
            Err(PercentError::InvalidChar { offset: 1, ch: '&' })
        );
        assert_eq!(
            normalise("ab\u{e9}", Component::Fragment),
            Err(PercentError::InvalidChar {
                offset: 2,
                ch: '\u{e9}'
            })
        );
        assert!(normalise("[::1]:80", Component::Authority).is_ok());
        assert!(normalise("[", Component::PathSegment).is_err());
    }

    #[test]
    fn normalise_rejects_truncated_or_non_hex_escapes() {
        for (input, offset) in [("%", 0), ("a%4", 1), ("%zz", 0), ("ab%g0", 2)] {
            assert_eq!(
                normalise(input, Component::PathSegment),
                Err(PercentError::BadEscape { offset }),
                "{input}"
            );
        }
    }

    #[test]
    fn encode_path_keeps_pchar_and_slash_and_escapes_everything_else() {
        assert_eq!(
            encode_path(b"!$&'()*+,;=:@-._~/Az09"),
            "!$&'()*+,;=:@-._~/Az09"
        );
        assert_eq!(
            encode_path(b" %?#[]\"<>\\^`{|}"),
            "%20%25%3F%23%5B%5D%22%3C%3E%5C%5E%60%7B%7C%7D"
        );
    }

    #[test]
    fn encode_then_decode_round_trips_any_bytes() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode_path(&all)), Ok(all));
    }

    #[test]
    fn decode_rejects_bad_escapes() {
        assert_eq!(decode("a%2"), Err(PercentError::BadEscape { offset: 1 }));
        assert_eq!(decode("a%20b").as_deref(), Ok(&b"a b"[..]));
    }
}
