//! How a source's stream ended or failed, as typed values: who ended it,
//! the gRPC code and the message, and which kind of source it was. The
//! sentence watchers read is made where it is shown ([`StreamFailure`]'s
//! `Display`), never edited after the fact.

use std::fmt;

use crate::error::GrpcCode;

/// Which side ended a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    /// The client closed it (idle, shutdown, a variant switch): never a
    /// server failure.
    Local,
    /// The server ended it with a status.
    Server,
    /// The connection failed or never answered (refused, reset, a
    /// handshake deadline): the server never had its say.
    Transport,
}

impl Initiator {
    /// Whether the far side (the server or the path to it) ended the
    /// stream: the ends gRFC A57 counts as server failures.
    pub fn is_remote(self) -> bool {
        self != Initiator::Local
    }
}

/// How a stream ended, as the driver saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEnd {
    /// Which side ended it.
    pub initiator: Initiator,
    /// The gRPC status code (`OK` for a clean end; a connection that never
    /// opened is `UNAVAILABLE`).
    pub code: GrpcCode,
    /// What happened, for people: the status message or the connection error.
    pub message: String,
}

impl StreamEnd {
    /// An end the server caused, with its status `code` and `message`.
    pub fn new(code: impl Into<GrpcCode>, message: impl Into<String>) -> Self {
        StreamEnd {
            initiator: Initiator::Server,
            code: code.into(),
            message: message.into(),
        }
    }

    /// A connection that failed or never answered in time, reported as
    /// gRPC reports one: `code` (usually `UNAVAILABLE`) and `message`.
    pub fn transport(code: impl Into<GrpcCode>, message: impl Into<String>) -> Self {
        StreamEnd {
            initiator: Initiator::Transport,
            code: code.into(),
            message: message.into(),
        }
    }

    /// An end the client chose, e.g. closing an idle stream.
    pub fn local(message: impl Into<String>) -> Self {
        StreamEnd {
            initiator: Initiator::Local,
            code: GrpcCode::Ok,
            message: message.into(),
        }
    }
}

/// The kind of source a failure comes from; it names the failure for
/// people ("ADS stream", "REST-JSON polling", ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum SourceKind {
    /// An ADS stream (gRPC, delta or state-of-the-world).
    #[default]
    Ads,
    /// REST-JSON polling: the ADS session over HTTP requests.
    RestJson,
    /// A policy stream.
    PolicyStream,
    /// Resources fetched from a CDN.
    Cdn,
    /// A file on the local filesystem.
    File,
}

impl SourceKind {
    /// How a failure before the first answer reads for this kind of
    /// source; `None` for sources that are not streams, whose message
    /// says it all.
    fn before_answer(self) -> Option<&'static str> {
        match self {
            SourceKind::Ads => Some("ADS stream failed before any response"),
            SourceKind::RestJson => Some("REST-JSON polling failed before any answer"),
            SourceKind::PolicyStream => Some("policy stream failed before any response"),
            SourceKind::Cdn | SourceKind::File => None,
        }
    }
}

/// A source failed (gRFC A57: a connection failure, or a stream that ended
/// before any response; a CDN fetch or a file that could not be used).
/// Its `Display` is the sentence watchers see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFailure {
    /// Which kind of source failed.
    pub source: SourceKind,
    /// How its stream (or fetch, or read) ended.
    pub end: StreamEnd,
}

impl StreamFailure {
    /// `end` of a stream of `source` that never answered.
    pub fn before_answer(source: SourceKind, end: StreamEnd) -> Self {
        StreamFailure { source, end }
    }

    /// A failure of a source that is not a stream (a CDN fetch, a file),
    /// described whole by `message`: no server status, so `UNAVAILABLE`.
    pub fn described(source: SourceKind, message: impl Into<String>) -> Self {
        StreamFailure {
            source,
            end: StreamEnd::transport(GrpcCode::Unavailable, message),
        }
    }
}

impl fmt::Display for StreamFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source.before_answer() {
            Some(what) => write!(
                f,
                "{what}: code {}: {}",
                self.end.code.as_i32(),
                self.end.message
            ),
            None => f.write_str(&self.end.message),
        }
    }
}
