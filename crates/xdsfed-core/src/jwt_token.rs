//! The token of gRFC A97's JWT token file call credential: what a file's
//! bytes must be to be sent, how long the token is used, and when the file
//! is read again. No IO and no clock: the client stats and reads the file
//! and passes `now` in.
//!
//! ```text
//! stat the file ─► FileStamp ─► TokenCache::fresh(stamp, now) ─► Some: send the cached token
//!                                      │ None (first use, file changed, expiry near)
//!                                      ▼
//!              read (bounded) ─► parse_token(bytes, now) ─► store ─► send
//!                                      │ Err
//!                                      ▼
//!                 the connection fails, naming the file (never the token)
//! ```
//!
//! The rules (gRFC A97, "JwtTokenFileCallCredentials"):
//! - the file "will contain the JWT token"; surrounding whitespace (a
//!   trailing newline) is trimmed, as grpc-go does;
//! - the client "does need to extract the `exp` field for caching
//!   purposes. If the `exp` field cannot be extracted (i.e., the JWT token
//!   is invalid)" the call fails (UNAUTHENTICATED); nothing else of the
//!   token is checked ("that is the responsibility of the server side");
//! - "the credential will set the cache expiration time to be 30 seconds
//!   before the expiration time encoded in the token", and a token past
//!   that is not sent (grpc-go refuses an expired token too);
//! - "if [...] the cached token will expire within some fixed refresh
//!   interval (typically 1 minute), the credential will start re-reading
//!   it from the file".
//!
//! One rule is this client's: a file whose size, modification time or
//! inode changed is read again at once, so that a rotated token is used by
//! the next stream or request, not only near the old one's expiry.
//!
//! The token is a secret: [`BearerToken`]'s `Debug` shows its length only,
//! it has no `Display`, and no error here quotes the file's content.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The most a token file may hold. Service account tokens are a few KiB.
pub const TOKEN_FILE_LIMIT: u64 = 64 * 1024;

/// How long before the token's `exp` it stops being used (gRFC A97).
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

/// How long before that the file is read again (gRFC A97's refresh
/// interval, "typically 1 minute").
pub const REFRESH_WINDOW: Duration = Duration::from_secs(60);

/// A bearer token, as read from its file. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    /// The value of the `authorization` header: `Bearer <token>`.
    pub fn header_value(&self) -> String {
        format!("Bearer {}", self.0)
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BearerToken(<redacted, {} bytes>)", self.0.len())
    }
}

/// Why a token file's content cannot be sent. No variant holds any of the
/// content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Nothing but whitespace.
    #[error("the token file is empty")]
    Empty,
    /// Not a JWT whose `exp` can be read: why, in words.
    #[error("not a JWT whose exp can be read: {0}")]
    Malformed(&'static str),
    /// The claims have no positive numeric `exp`.
    #[error("the JWT has no exp claim")]
    NoExpiry,
    /// Past `exp` (less the margin).
    #[error("the JWT expired (exp {exp}, less the {margin}s margin, has passed)", margin = EXPIRY_MARGIN.as_secs())]
    Expired {
        /// The token's `exp`, in seconds since the Unix epoch.
        exp: u64,
    },
}

/// A token that may be sent, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub bearer: BearerToken,
    /// Its `exp` less [`EXPIRY_MARGIN`]: not sent from then on.
    pub valid_until: SystemTime,
}

/// Reads a token file's bytes at `now`: trimmed, one JWT (three
/// base64url parts) whose claims hold a numeric `exp` that is not past
/// (less the margin). Only characters a header can carry are accepted.
pub fn parse_token(bytes: &[u8], now: SystemTime) -> Result<Token, TokenError> {
    let text = std::str::from_utf8(bytes).map_err(|_| TokenError::Malformed("not UTF-8"))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(TokenError::Empty);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::Malformed(
            "holds a character a header cannot carry (a space, a control character, non-ASCII)",
        ));
    }
    let mut parts = token.split('.');
    let (Some(_header), Some(claims), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed("expected three dot-separated parts"));
    };
    let claims =
        base64url_decode(claims).ok_or(TokenError::Malformed("the claims are not base64url"))?;
    let claims: serde_json::Value = serde_json::from_slice(&claims)
        .map_err(|_| TokenError::Malformed("the claims are not JSON"))?;
    let exp = claims
        .as_object()
        .ok_or(TokenError::Malformed("the claims are not a JSON object"))?
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        .filter(|exp| exp.is_finite() && *exp >= 1.0)
        .ok_or(TokenError::NoExpiry)?;
    // A NumericDate may have a fraction; whole seconds are enough here.
    // Saturating: a float past u64 becomes u64::MAX.
    let exp = exp as u64;
    let valid_until = SystemTime::UNIX_EPOCH
        .checked_add(Duration::from_secs(exp))
        .and_then(|at| at.checked_sub(EXPIRY_MARGIN))
        .ok_or(TokenError::NoExpiry)?;
    if now >= valid_until {
        return Err(TokenError::Expired { exp });
    }
    Ok(Token {
        bearer: BearerToken(Arc::from(token)),
        valid_until,
    })
}

/// What identifies one version of a token file: when any part changes, the
/// file was rewritten or replaced (a rotation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Its length in bytes.
    pub len: u64,
    /// Its modification time, where the platform gives one.
    pub modified: Option<SystemTime>,
    /// Its inode (a file renamed over the old one has another).
    pub inode: u64,
}

/// The token last read from one file.
#[derive(Debug, Default)]
pub struct TokenCache {
    current: Option<(FileStamp, Token)>,
}

impl TokenCache {
    /// The cached token, if it may be sent at `now` without reading the
    /// file again: the file is the one it was read from (`stamp`), and its
    /// expiry is not within [`REFRESH_WINDOW`].
    pub fn fresh(&self, stamp: &FileStamp, now: SystemTime) -> Option<&BearerToken> {
        let (cached, token) = self.current.as_ref()?;
        let refresh_at = token
            .valid_until
            .checked_sub(REFRESH_WINDOW)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        (cached == stamp && now < refresh_at).then_some(&token.bearer)
    }

    /// Keeps `token`, read from the file with `stamp`.
    pub fn store(&mut self, stamp: FileStamp, token: Token) -> &BearerToken {
        &self.current.insert((stamp, token)).1.bearer
    }

    /// Forgets the token (the file could not be read).
    pub fn clear(&mut self) {
        self.current = None;
    }
}

/// Decodes unpadded base64url (RFC 4648 §5), as JWT parts are written; a
/// padded input is accepted too. `None` for any other character, or a
/// length no encoding has.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer: u32 = 0;
    let mut bits = 0u32;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n =
                chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    fn jwt(claims: &str) -> String {
        format!(
            "{}.{}.sig",
            b64(br#"{"alg":"none"}"#),
            b64(claims.as_bytes())
        )
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    const STAMP: FileStamp = FileStamp {
        len: 10,
        modified: None,
        inode: 1,
    };

    #[test]
    fn base64url_decodes_every_tail_length() {
        for text in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            assert_eq!(
                base64url_decode(&b64(text.as_bytes())).as_deref(),
                Some(text.as_bytes())
            );
        }
        assert_eq!(base64url_decode("Zm9v+"), None, "not the URL alphabet");
        assert_eq!(
            base64url_decode("Z"),
            None,
            "no encoding is one character long"
        );
    }

    /// gRFC A97: the token is the file's content (trimmed); its `exp` is
    /// read, and the token is used until 30 s before it.
    #[test]
    fn token_is_the_trimmed_file_and_serves_until_30s_before_exp() {
        let token = jwt(r#"{"exp": 2000, "sub": "x"}"#);
        let parsed = parse_token(format!("  {token}\n").as_bytes(), at(1000)).unwrap();
        assert_eq!(parsed.bearer.header_value(), format!("Bearer {token}"));
        assert_eq!(parsed.valid_until, at(1970));
        assert_eq!(
            parse_token(token.as_bytes(), at(1970)),
            Err(TokenError::Expired { exp: 2000 })
        );
    }

    /// gRFC A97: "If the `exp` field cannot be extracted (i.e., the JWT
    /// token is invalid)", the token is not used.
    #[test]
    fn token_without_a_readable_exp_is_refused() {
        let now = at(0);
        assert_eq!(parse_token(b" \n", now), Err(TokenError::Empty));
        assert!(matches!(
            parse_token(b"abc", now),
            Err(TokenError::Malformed(_))
        ));
        assert!(matches!(
            parse_token(b"a.b.c.d", now),
            Err(TokenError::Malformed(_))
        ));
        assert!(matches!(
            parse_token(b"a.!!.c", now),
            Err(TokenError::Malformed(_))
        ));
        let not_json = format!("a.{}.c", b64(b"exp"));
        assert!(matches!(
            parse_token(not_json.as_bytes(), now),
            Err(TokenError::Malformed(_))
        ));
        for claims in [
            r#"{"sub": "x"}"#,
            r#"{"exp": "2000"}"#,
            r#"{"exp": 0}"#,
            r#"{"exp": -5}"#,
        ] {
            assert_eq!(
                parse_token(jwt(claims).as_bytes(), now),
                Err(TokenError::NoExpiry),
                "{claims}"
            );
        }
        let inner_space = format!("{} x", jwt(r#"{"exp": 2000}"#));
        assert!(matches!(
            parse_token(inner_space.as_bytes(), now),
            Err(TokenError::Malformed(_))
        ));
    }

    /// The token never shows in `Debug` or in an error.
    #[test]
    fn token_never_appears_in_debug_output_or_errors() {
        let token = jwt(r#"{"exp": 2000}"#);
        let parsed = parse_token(token.as_bytes(), at(0)).unwrap();
        assert!(!format!("{parsed:?}").contains(&token));
        let expired = parse_token(token.as_bytes(), at(5000)).unwrap_err();
        assert!(!format!("{expired} {expired:?}").contains(&token));
    }

    /// Any bytes give a token or an error, never a panic.
    #[test]
    fn parse_token_never_panics() {
        let token = jwt(r#"{"exp": 1e300}"#);
        let _ = parse_token(token.as_bytes(), at(0));
        for len in 0..token.len() {
            let _ = parse_token(&token.as_bytes()[..len], at(0));
        }
        let _ = parse_token(&[0xff, 0xfe, b'.', b'.'], at(0));
    }

    /// The file is read again when it changed (a rotation) or when the
    /// token's expiry is within the refresh interval (gRFC A97).
    #[test]
    fn cached_token_is_reread_when_the_file_changes_or_expiry_nears() {
        let mut cache = TokenCache::default();
        assert!(cache.fresh(&STAMP, at(0)).is_none(), "nothing read yet");
        let token = parse_token(jwt(r#"{"exp": 2000}"#).as_bytes(), at(0)).unwrap();
        cache.store(STAMP, token);
        assert!(cache.fresh(&STAMP, at(1000)).is_some());
        let rotated = FileStamp { inode: 2, ..STAMP };
        assert!(
            cache.fresh(&rotated, at(1000)).is_none(),
            "the file was replaced"
        );
        // 2000 - 30 - 60.
        assert!(cache.fresh(&STAMP, at(1909)).is_some());
        assert!(cache.fresh(&STAMP, at(1910)).is_none(), "expiry is near");
        cache.clear();
        assert!(cache.fresh(&STAMP, at(1000)).is_none());
    }
}
