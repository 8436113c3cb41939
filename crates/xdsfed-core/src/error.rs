//! Errors that reach watchers and the status dump.
//!
//! An [`XdsError`] says what went wrong as data — its [`ErrorKind`] (gRFC
//! A88's split of transient errors from data errors), its [`Cause`], the
//! resource, server and authority it is about — and as a message naming
//! all of them, for people.
//!
//! ```
//! use xdsfed_core::error::{Cause, ErrorKind, GrpcCode, XdsError};
//! use xdsfed_core::protocol::ResourceKey;
//!
//! let key = ResourceKey::new("type.googleapis.com/envoy.config.cluster.v3.Cluster", "payments");
//! let error = XdsError::new(ErrorKind::ServerError, "server a reported NOT_FOUND for payments")
//!     .with_cause(Cause::ServerReported { code: GrpcCode::NotFound })
//!     .with_resource(key.clone())
//!     .with_server("a");
//! assert_eq!(error.resource(), Some(&key));
//! assert!(matches!(error.cause(), Cause::ServerReported { code: GrpcCode::NotFound }));
//! ```

use std::fmt;
use std::sync::Arc;

use crate::protocol::{ResourceKey, StreamFailure};

/// What kind of trouble an [`XdsError`] reports, after gRFC A88's split of
/// transient errors from data errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server could not be reached, or its stream failed before any
    /// response (gRFC A57). Cached copies keep serving.
    Transient,
    /// The client rejected (NACKed) the resource.
    Nacked,
    /// The server reported an error for the resource (TP3 `resource_errors`).
    ServerError,
    /// The server deleted the resource, or never had it.
    NotFound,
    /// The name could not be watched: bad name, wrong type, unknown authority.
    Watch,
}

/// Why an [`XdsError`] happened, for code that acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// No more precise cause is known.
    Other,
    /// The stream to the server failed (gRFC A57).
    StreamFailed,
    /// The resource failed validation and was NACKed.
    Rejected {
        /// The version of the rejected response.
        version: Arc<str>,
    },
    /// The server reported an error for the resource (TP3 `resource_errors`).
    ServerReported {
        /// The status code the server sent.
        code: GrpcCode,
    },
    /// The server deleted the resource.
    Deleted,
    /// The server said it does not have the resource, which the client
    /// held no copy of (a delta `removed_resources` entry for a name the
    /// server never sent).
    NotOnServer,
    /// The resource's TTL passed without a refresh.
    TtlExpired,
    /// The does-not-exist timer fired before any server sent it (gRFC A57).
    NotReceived,
    /// A `ResourceLocator` redirect was not followed (xDS TP1).
    RedirectRefused(RedirectRefusal),
    /// The name's authority is not in the bootstrap (a list collection's
    /// member, a redirect target).
    UnknownAuthority,
    /// The resource cannot be asked of this server (a glob collection over
    /// state-of-the-world xDS).
    NotRequested,
}

/// Why a redirect was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectRefusal {
    /// A glob collection itself is not redirectable (xDS TP1).
    GlobCollection,
    /// The target is a glob collection, which names no resource.
    GlobTarget,
    /// The target is already on the chain.
    Loop,
    /// The chain is longer than the client's limit.
    TooManyHops {
        /// The limit.
        limit: usize,
    },
    /// The target is of another type, or not a valid name.
    InvalidTarget,
    /// The target's authority is not in the bootstrap.
    UnknownAuthority,
}

/// A gRPC status code (`google.rpc.Code`), as servers send them in TP3
/// `resource_errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GrpcCode {
    /// `OK` (0).
    Ok,
    /// `CANCELLED` (1).
    Cancelled,
    /// `UNKNOWN` (2).
    Unknown,
    /// `INVALID_ARGUMENT` (3).
    InvalidArgument,
    /// `DEADLINE_EXCEEDED` (4).
    DeadlineExceeded,
    /// `NOT_FOUND` (5).
    NotFound,
    /// `ALREADY_EXISTS` (6).
    AlreadyExists,
    /// `PERMISSION_DENIED` (7).
    PermissionDenied,
    /// `RESOURCE_EXHAUSTED` (8).
    ResourceExhausted,
    /// `FAILED_PRECONDITION` (9).
    FailedPrecondition,
    /// `ABORTED` (10).
    Aborted,
    /// `OUT_OF_RANGE` (11).
    OutOfRange,
    /// `UNIMPLEMENTED` (12).
    Unimplemented,
    /// `INTERNAL` (13).
    Internal,
    /// `UNAVAILABLE` (14).
    Unavailable,
    /// `DATA_LOSS` (15).
    DataLoss,
    /// `UNAUTHENTICATED` (16).
    Unauthenticated,
    /// A number gRPC does not define.
    Other(i32),
}

const CODES: [GrpcCode; 17] = [
    GrpcCode::Ok,
    GrpcCode::Cancelled,
    GrpcCode::Unknown,
    GrpcCode::InvalidArgument,
    GrpcCode::DeadlineExceeded,
    GrpcCode::NotFound,
    GrpcCode::AlreadyExists,
    GrpcCode::PermissionDenied,
    GrpcCode::ResourceExhausted,
    GrpcCode::FailedPrecondition,
    GrpcCode::Aborted,
    GrpcCode::OutOfRange,
    GrpcCode::Unimplemented,
    GrpcCode::Internal,
    GrpcCode::Unavailable,
    GrpcCode::DataLoss,
    GrpcCode::Unauthenticated,
];

const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl GrpcCode {
    /// The code for a number off the wire.
    pub fn from_i32(code: i32) -> Self {
        usize::try_from(code)
            .ok()
            .and_then(|i| CODES.get(i).copied())
            .unwrap_or(GrpcCode::Other(code))
    }

    /// The code gRPC names `name`, in any case (`NOT_FOUND`, `unavailable`).
    pub fn from_name(name: &str) -> Option<Self> {
        NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .and_then(|i| CODES.get(i).copied())
    }

    /// The number on the wire.
    pub fn as_i32(self) -> i32 {
        match self {
            GrpcCode::Other(code) => code,
            known => CODES
                .iter()
                .position(|c| *c == known)
                .and_then(|i| i32::try_from(i).ok())
                .unwrap_or(2),
        }
    }

    /// The name gRPC gives it, e.g. `NOT_FOUND`.
    pub fn name(self) -> &'static str {
        match self {
            GrpcCode::Other(_) => "UNKNOWN_CODE",
            known => usize::try_from(known.as_i32())
                .ok()
                .and_then(|i| NAMES.get(i).copied())
                .unwrap_or("UNKNOWN_CODE"),
        }
    }
}

impl From<i32> for GrpcCode {
    fn from(code: i32) -> Self {
        GrpcCode::from_i32(code)
    }
}

/// Compares with the number on the wire, as tests and logs read codes.
impl PartialEq<i32> for GrpcCode {
    fn eq(&self, code: &i32) -> bool {
        self.as_i32() == *code
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.as_i32())
    }
}

/// An error about one resource, naming the resource and the server.
///
/// Cheap to clone: one error goes to every watcher of the resource. One
/// pointer wide, so that the state of every resource, which has room for
/// an error whether or not it has one, pays eight bytes for it, not a
/// hundred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsError(Arc<Details>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Details {
    kind: ErrorKind,
    cause: Cause,
    resource: Option<ResourceKey>,
    server: Option<Arc<str>>,
    authority: Option<Arc<str>>,
    message: Arc<str>,
}

impl XdsError {
    /// An error of `kind` with a message that names the resource and server;
    /// the typed fields are set with the `with_*` methods.
    pub fn new(kind: ErrorKind, message: impl Into<Arc<str>>) -> Self {
        XdsError(Arc::new(Details {
            kind,
            cause: Cause::Other,
            resource: None,
            server: None,
            authority: None,
            message: message.into(),
        }))
    }

    /// The transient error watchers get when `server`'s source failed
    /// (gRFC A57): the failure's sentence, naming the server.
    pub fn stream_failed(failure: &StreamFailure, server: impl Into<Arc<str>>) -> Self {
        XdsError::new(ErrorKind::Transient, failure.to_string())
            .with_cause(Cause::StreamFailed)
            .with_server(server)
    }

    /// This error with its cause.
    #[must_use]
    pub fn with_cause(mut self, cause: Cause) -> Self {
        Arc::make_mut(&mut self.0).cause = cause;
        self
    }

    /// This error about `key` (its authority is taken from the name).
    #[must_use]
    pub fn with_resource(mut self, key: ResourceKey) -> Self {
        let details = Arc::make_mut(&mut self.0);
        if details.authority.is_none() {
            details.authority = crate::name::authority_of(&key.name).map(Arc::from);
        }
        details.resource = Some(key);
        self
    }

    /// This error from `server`.
    #[must_use]
    pub fn with_server(mut self, server: impl Into<Arc<str>>) -> Self {
        Arc::make_mut(&mut self.0).server = Some(server.into());
        self
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Why it happened.
    pub fn cause(&self) -> &Cause {
        &self.0.cause
    }

    /// The resource it is about, when it is about one.
    pub fn resource(&self) -> Option<&ResourceKey> {
        self.0.resource.as_ref()
    }

    /// The server it came from, when one is known.
    pub fn server(&self) -> Option<&str> {
        self.0.server.as_deref()
    }

    /// The authority of the resource, when it has one.
    pub fn authority(&self) -> Option<&str> {
        self.0.authority.as_deref()
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl fmt::Display for XdsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for XdsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_round_trip_and_unknown_numbers_are_kept() {
        for n in -1..20 {
            assert_eq!(GrpcCode::from_i32(n).as_i32(), n);
        }
        assert_eq!(GrpcCode::from_i32(5), GrpcCode::NotFound);
        assert_eq!(GrpcCode::from_i32(7), GrpcCode::PermissionDenied);
        assert_eq!(GrpcCode::NotFound.to_string(), "NOT_FOUND (5)");
        assert_eq!(GrpcCode::from_i32(99).name(), "UNKNOWN_CODE");
        assert_eq!(
            GrpcCode::from_name("unavailable"),
            Some(GrpcCode::Unavailable)
        );
        assert_eq!(GrpcCode::from_name("NOPE"), None);
    }
}
