//! A resource's version, held in one small allocation.
//!
//! A delta xDS server versions each resource on its own, and a client holds
//! a version for every resource it holds: a million of them at xDS TP1's
//! design load. Many servers send the hex SHA-256 of the resource's bytes
//! (go-control-plane's delta cache does; so does the testbed): 64
//! characters, 80 bytes as an `Arc<str>` with its counts, behind a pointer
//! of 16. A [`Version`] is one pointer of 8 bytes to 56 bytes: those 64
//! characters packed into the 32 bytes they spell, any text of up to 38
//! bytes inline, and a longer text (rare) boxed beside.
//!
//! Rule: one text has one form. Only 64 *lower-case* hex digits are packed
//! (upper case would not come back as it was sent), so two versions are
//! equal exactly when their texts are, and hash alike then (tests
//! `tests::one_text_one_form`, `tests::only_lower_case_hex_digits_are_packed`).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock};

/// A resource's version as its server sent it, compactly (see the
/// [module docs](self)).
///
/// ```
/// use xdsfed_core::version::Version;
///
/// let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
/// let version = Version::from(sha);
/// assert_eq!(version, *sha);
/// assert_eq!(version.to_string(), sha);
/// assert_eq!(Version::from("v7").as_str(), "v7");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Version(Arc<Repr>);

/// Longest text held inline.
const INLINE: usize = 38;

#[derive(PartialEq, Eq, Hash)]
enum Repr {
    /// 64 lower-case hex digits, as the bytes they spell.
    Hex([u8; 32]),
    /// A text of up to [`INLINE`] bytes: its length, then its bytes.
    Inline(u8, [u8; INLINE]),
    /// A longer text.
    Boxed(Box<str>),
}

static EMPTY: LazyLock<Version> = LazyLock::new(|| Version::new(""));

impl Version {
    /// Holds `text`.
    pub fn new(text: &str) -> Self {
        Version(Arc::new(Repr::of(text)))
    }

    /// Holds the text `bytes` spell, or says they are no UTF-8. Hex digits
    /// are packed without a UTF-8 check of their own: each is ASCII, which
    /// reading them as digits already shows.
    ///
    /// ```
    /// use xdsfed_core::version::Version;
    ///
    /// let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    /// assert_eq!(Version::from_utf8(sha.as_bytes()), Ok(Version::from(sha)));
    /// assert_eq!(Version::from_utf8(b"v7"), Ok(Version::from("v7")));
    /// assert!(Version::from_utf8(b"v\xff").is_err());
    /// ```
    pub fn from_utf8(bytes: &[u8]) -> Result<Self, std::str::Utf8Error> {
        if let Some(packed) = unhex(bytes) {
            return Ok(Version(Arc::new(Repr::Hex(packed))));
        }
        std::str::from_utf8(bytes).map(Version::new)
    }

    /// Whether this is the text `bytes` spell; the bytes need not be
    /// checked as UTF-8 first, since only a version's own text matches.
    ///
    /// ```
    /// use xdsfed_core::version::Version;
    ///
    /// assert!(Version::from("v7").is_spelled_by(b"v7"));
    /// assert!(!Version::from("v7").is_spelled_by(b"v8"));
    /// ```
    pub fn is_spelled_by(&self, bytes: &[u8]) -> bool {
        match &*self.0 {
            Repr::Hex(packed) => spells(bytes, packed),
            Repr::Inline(len, inline) => inline.get(..usize::from(*len)) == Some(bytes),
            Repr::Boxed(text) => text.as_bytes() == bytes,
        }
    }

    /// The empty version (a copy asked for afresh; a source that sends
    /// none): one shared copy.
    pub fn empty() -> Self {
        EMPTY.clone()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        matches!(&*self.0, Repr::Inline(0, _))
    }

    /// The text: borrowed, unless it was packed.
    pub fn as_str(&self) -> Cow<'_, str> {
        match &*self.0 {
            Repr::Hex(bytes) => Cow::Owned(hex::encode(bytes)),
            Repr::Inline(len, bytes) => Cow::Borrowed(inline_text(bytes, *len)),
            Repr::Boxed(text) => Cow::Borrowed(text),
        }
    }
}

impl Repr {
    fn of(text: &str) -> Self {
        if let Some(bytes) = unhex(text.as_bytes()) {
            return Repr::Hex(bytes);
        }
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                Repr::Inline(len, bytes)
            }
            _ => Repr::Boxed(text.into()),
        }
    }
}

/// The text an inline form holds. Built only from a `str`'s bytes, so it
/// is UTF-8; an empty text otherwise, which cannot happen.
fn inline_text(bytes: &[u8; INLINE], len: u8) -> &str {
    bytes
        .get(..usize::from(len))
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or_default()
}

/// The bytes 64 lower-case hex digits spell; `None` for any other text.
/// One table read per digit and one test at the end, no branch per digit:
/// every delta resource's version passes through here.
fn unhex(text: &[u8]) -> Option<[u8; 32]> {
    let (pairs, []) = text.as_chunks::<2>() else {
        return None;
    };
    if pairs.len() != 32 {
        return None;
    }
    let mut bytes = [0; 32];
    let mut invalid = 0;
    for (byte, pair) in bytes.iter_mut().zip(pairs) {
        let (value, flags) = read_pair(pair);
        invalid |= flags;
        *byte = value;
    }
    (invalid & NOT_A_DIGIT == 0).then_some(bytes)
}

/// Whether `text` is the 64 lower-case hex digits of `bytes`: read only as
/// far as the first digit that differs, since a response's versions are
/// compared with the one before (two hashes differ at once).
fn spells(text: &[u8], bytes: &[u8; 32]) -> bool {
    let (pairs, []) = text.as_chunks::<2>() else {
        return false;
    };
    pairs.len() == 32
        && pairs.iter().zip(bytes).all(|(pair, byte)| {
            let (value, flags) = read_pair(pair);
            flags & NOT_A_DIGIT == 0 && value == *byte
        })
}

/// The byte two hex digits spell, and their table entries or'ed together:
/// [`NOT_A_DIGIT`] is set in them when either is no lower-case hex digit.
fn read_pair([high, low]: &[u8; 2]) -> (u8, u8) {
    let (high, low) = (DIGIT[usize::from(*high)], DIGIT[usize::from(*low)]);
    (high << 4 | low, high | low)
}

/// The bit [`DIGIT`] sets for a byte that is no lower-case hex digit.
const NOT_A_DIGIT: u8 = 0x10;

/// Each byte's value as a lower-case hex digit, or [`NOT_A_DIGIT`]. Not the
/// `hex` crate's decoding, which takes upper case too: such a version would
/// not read back as sent.
static DIGIT: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut c = 0;
    while c < 10 {
        table[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        table[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    table
};

impl Default for Version {
    fn default() -> Self {
        Self::empty()
    }
}

impl From<&str> for Version {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<&String> for Version {
    fn from(text: &String) -> Self {
        Self::new(text)
    }
}

impl From<String> for Version {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl From<Version> for String {
    fn from(version: Version) -> Self {
        version.as_str().into_owned()
    }
}

impl From<&Version> for String {
    fn from(version: &Version) -> Self {
        version.as_str().into_owned()
    }
}

impl PartialEq<str> for Version {
    fn eq(&self, other: &str) -> bool {
        match &*self.0 {
            Repr::Hex(bytes) => spells(other.as_bytes(), bytes),
            Repr::Inline(len, bytes) => inline_text(bytes, *len) == other,
            Repr::Boxed(text) => **text == *other,
        }
    }
}

impl PartialEq<&str> for Version {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<Version> for str {
    fn eq(&self, other: &Version) -> bool {
        *other == *self
    }
}

impl PartialEq<Version> for &str {
    fn eq(&self, other: &Version) -> bool {
        *other == **self
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn every_form_reads_back_as_sent() {
        let long = "x".repeat(100);
        for text in [
            "",
            "1",
            "v7-abc",
            SHA,
            &SHA.to_uppercase(),
            &SHA[..63],
            &long,
        ] {
            let version = Version::from(text);
            assert_eq!(version.as_str(), text);
            assert_eq!(version.to_string(), text);
            assert_eq!(version, *text);
            assert_eq!(format!("{version:?}"), format!("{text:?}"));
        }
        assert!(Version::empty().is_empty());
        assert!(!Version::from("0").is_empty());
    }

    #[test]
    fn a_hex_sha_is_packed_and_texts_up_to_38_bytes_are_inline() {
        assert!(matches!(*Version::from(SHA).0, Repr::Hex(_)));
        assert!(matches!(
            *Version::from(&*"é".repeat(19)).0,
            Repr::Inline(38, _)
        ));
        assert!(matches!(*Version::from(&*"x".repeat(39)).0, Repr::Boxed(_)));
        assert!(matches!(
            *Version::from(&*SHA.to_uppercase()).0,
            Repr::Boxed(_)
        ));
    }

    /// A version is one pointer to 56 bytes (with the `Arc`'s counts).
    #[test]
    fn a_version_is_one_word_to_56_bytes() {
        assert_eq!(size_of::<Version>(), 8);
        assert_eq!(size_of::<Option<Version>>(), 8);
        assert_eq!(size_of::<Repr>() + 16, 56);
    }

    /// Every ASCII byte in every place of a SHA: packed exactly when it is
    /// a lower-case hex digit, and compared as such.
    #[test]
    fn only_lower_case_hex_digits_are_packed() {
        let sha = Version::from(SHA);
        for place in [0, 1, 31, 62, 63] {
            for c in 0..=127u8 {
                let mut text = SHA.as_bytes().to_vec();
                text[place] = c;
                let text = String::from_utf8(text).unwrap();
                let digit = c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
                let version = Version::from(&*text);
                assert_eq!(matches!(*version.0, Repr::Hex(_)), digit, "{text}");
                assert_eq!(version.as_str(), text);
                assert_eq!(sha == *text.as_str(), text == SHA);
            }
        }
    }

    #[test]
    fn one_text_one_form() {
        let hasher = std::collections::hash_map::RandomState::new();
        let a = Version::from(SHA);
        let b = Version::from(String::from(SHA));
        assert_eq!(a, b);
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        assert_ne!(a, Version::from(&*SHA.to_uppercase()));
        assert_ne!(Version::from(&SHA[..62]), Version::from(&SHA[..63]));
        let last_differs = format!("{}9", &SHA[..63]);
        assert!(a != *last_differs.as_str(), "every digit is compared");
        assert!(
            a != *SHA.replacen('9', "g", 1).as_str(),
            "a non-hex digit is no digit"
        );
        let upper = SHA.to_uppercase();
        assert!(
            a != *upper.as_str(),
            "a packed version is not its upper-case text"
        );
    }
}
