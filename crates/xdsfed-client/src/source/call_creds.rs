//! A server's call credentials (gRFC A97) at the moment a stream opens or
//! a request leaves: the `authorization` headers to add, or why the
//! connection fails. Every source kind that talks to a server asks here:
//! ADS (gRPC metadata), the policy stream, REST-JSON and HTTP CDN (HTTP
//! headers).
//!
//! What a token file must hold and when it is read again is
//! [`xdsfed_core::jwt_token`]'s; this module stats and reads the file
//! (bounded, regular files only, through [`read_bounded`]) and passes the
//! wall clock in. A missing or unreadable file, or a token that cannot be
//! sent, fails the connection (the transport's failure) with a message
//! naming the server and the file, never the token.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tonic::codegen::http::HeaderValue;
use xdsfed_core::bootstrap::{CallCreds, ChannelCreds, ServerConfig};
use xdsfed_core::file::read_bounded;
use xdsfed_core::jwt_token::{FileStamp, TOKEN_FILE_LIMIT, TokenCache, parse_token};

/// Why no `authorization` header could be made: the connection fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallCredsError {
    /// Whose fault: the file's or the token's.
    pub(crate) failure: Failure,
    /// The sentence, naming the server and the file.
    pub(crate) message: String,
}

/// What went wrong with a call credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The file could not be read (missing, not a regular file, too large).
    Unreadable,
    /// The file holds no token that may be sent (not a JWT with `exp`,
    /// expired), or the channel is not TLS.
    Unusable,
}

impl CallCredsError {
    /// The status a call fails with (gRFC A97): UNAVAILABLE when the file
    /// could not be read, UNAUTHENTICATED when its token cannot be sent.
    pub(crate) fn code(&self) -> tonic::Code {
        match self.failure {
            Failure::Unreadable => tonic::Code::Unavailable,
            Failure::Unusable => tonic::Code::Unauthenticated,
        }
    }
}

/// The call credentials of one server; shared by every stream and request
/// to it.
#[derive(Debug)]
pub(crate) struct CallCredentials {
    server_uri: String,
    tls: bool,
    files: Vec<TokenFile>,
}

/// One `jwt_token_file`, and the token last read from it.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    cache: Mutex<TokenCache>,
}

impl CallCredentials {
    /// The call credentials of `server`; `None` when it has none.
    pub(crate) fn of(server: &ServerConfig) -> Option<Arc<Self>> {
        if server.call_creds.is_empty() {
            return None;
        }
        let files = server
            .call_creds
            .iter()
            .filter_map(|creds| match creds {
                CallCreds::JwtTokenFile { path } => Some(TokenFile {
                    path: path.clone(),
                    cache: Mutex::new(TokenCache::default()),
                }),
                // A type this client does not know is skipped (gRFC A97).
                _ => None,
            })
            .collect();
        Some(Arc::new(CallCredentials {
            server_uri: server.server_uri.clone(),
            tls: server.channel_creds != ChannelCreds::Insecure,
            files,
        }))
    }

    /// The `authorization` header values (`Bearer <token>`, marked
    /// sensitive) for a stream or request that starts now.
    pub(crate) fn headers(&self) -> Result<Vec<HeaderValue>, CallCredsError> {
        if !self.tls {
            // The bootstrap refuses this; a configuration built in code is
            // refused here, before any token is read.
            return Err(CallCredsError {
                failure: Failure::Unusable,
                message: format!(
                    "{}: call credentials are sent only over TLS, and this server's channel is insecure",
                    self.server_uri
                ),
            });
        }
        let now = SystemTime::now();
        self.files
            .iter()
            .map(|file| file.header(now).map_err(|e| self.named(&file.path, e)))
            .collect()
    }

    fn named(&self, path: &Path, (failure, why): (Failure, String)) -> CallCredsError {
        CallCredsError {
            failure,
            message: format!(
                "{}: call credentials: jwt_token_file {}: {why}",
                self.server_uri,
                path.display()
            ),
        }
    }
}

impl TokenFile {
    /// The header for the token of this file at `now`, reading the file
    /// when the cache says so; otherwise whose fault it is, and why.
    fn header(&self, now: SystemTime) -> Result<HeaderValue, (Failure, String)> {
        let stamp = stamp(&self.path).map_err(|e| (Failure::Unreadable, e))?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let bearer = match cache.fresh(&stamp, now) {
            Some(bearer) => bearer.clone(),
            None => {
                let read = read_bounded(&self.path, TOKEN_FILE_LIMIT)
                    .map_err(|e| (Failure::Unreadable, e.to_string()))
                    .and_then(|bytes| {
                        parse_token(&bytes, now).map_err(|e| (Failure::Unusable, e.to_string()))
                    });
                match read {
                    Ok(token) => cache.store(stamp, token).clone(),
                    Err(e) => {
                        cache.clear();
                        return Err(e);
                    }
                }
            }
        };
        let mut value = HeaderValue::from_str(&bearer.header_value()).map_err(|_| {
            (
                Failure::Unusable,
                "the token cannot be a header value".to_owned(),
            )
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// The stamp of the file at `path` (following a symlink, as token files
/// mounted from secrets are).
fn stamp(path: &Path) -> Result<FileStamp, String> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = std::fs::metadata(path).map_err(|e| e.to_string())?;
    Ok(FileStamp {
        len: metadata.len(),
        modified: metadata.modified().ok(),
        inode: metadata.ino(),
    })
}

/// A gRPC request carrying `message` with the `authorization` headers.
#[cfg(feature = "policy-stream")]
pub(crate) fn with_authorization<T>(
    message: T,
    authorization: Vec<HeaderValue>,
) -> tonic::Request<T> {
    let metadata = tonic::metadata::MetadataMap::from_headers(authorization_headers(authorization));
    tonic::Request::from_parts(metadata, Default::default(), message)
}

/// Request headers carrying the `authorization` values, for a call that
/// writes its own request.
pub(crate) fn authorization_headers(
    authorization: Vec<HeaderValue>,
) -> tonic::codegen::http::HeaderMap {
    let mut headers = tonic::codegen::http::HeaderMap::with_capacity(authorization.len());
    for value in authorization {
        headers.append(tonic::codegen::http::header::AUTHORIZATION, value);
    }
    headers
}

/// The `authorization` headers of a gRPC stream to the server of `creds`
/// that opens now (none without call credentials); otherwise the status
/// the stream fails with: UNAVAILABLE for a file that cannot be read,
/// UNAUTHENTICATED for a token that cannot be sent (gRFC A97).
pub(crate) fn grpc_headers(
    creds: Option<&CallCredentials>,
) -> Result<Vec<HeaderValue>, (tonic::Code, String)> {
    match creds.map(CallCredentials::headers) {
        None => Ok(Vec::new()),
        Some(Ok(headers)) => Ok(headers),
        Some(Err(e)) => Err((e.code(), e.message)),
    }
}
