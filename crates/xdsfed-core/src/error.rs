//! Errors that reach watchers and the status dump.

use std::fmt;
use std::sync::Arc;

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

/// An error about one resource, naming the resource and the server.
///
/// Cheap to clone: one error goes to every watcher of the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdsError {
    kind: ErrorKind,
    message: Arc<str>,
}

impl XdsError {
    /// An error of `kind` with a message that names the resource and server.
    pub fn new(kind: ErrorKind, message: impl Into<Arc<str>>) -> Self {
        XdsError {
            kind,
            message: message.into(),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for XdsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for XdsError {}
