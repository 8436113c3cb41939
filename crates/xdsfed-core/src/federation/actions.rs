//! What the federation core asks its executor to do, and what it asks of
//! the cache it cannot hold itself.

use std::collections::HashSet;
use std::sync::Arc;

use crate::authority::ServerKey;
use crate::cache::Source;
use crate::error::XdsError;
use crate::protocol::{CoreEvent, ResourceKey};

/// One output of the federation core, applied in order.
#[derive(Debug)]
pub(crate) enum Action {
    /// Ask `server` for `key`.
    Subscribe { server: ServerKey, key: ResourceKey },
    /// Stop asking `server` for `key`.
    Unsubscribe { server: ServerKey, key: ResourceKey },
    /// `server`'s next stream asks for `key` afresh: the copy the client
    /// serves will come from another server (gRFC A71 fallback).
    ForgetVersion { server: ServerKey, key: ResourceKey },
    /// Ask `server` for every resource of `type_url`.
    SubscribeWildcard {
        server: ServerKey,
        type_url: &'static str,
    },
    /// Stop the wildcard subscription of `type_url` on `server`.
    UnsubscribeWildcard {
        server: ServerKey,
        type_url: &'static str,
    },
    /// Close the stream to `server` now: nothing is subscribed on it and it
    /// is a lower-priority server the client switched back from (gRFC A71).
    Close { server: ServerKey },
    /// An event for the watched entry its key names, with where it came from.
    Deliver { event: CoreEvent, source: Source },
    /// An event about a key no watched entry reads (wildcard deliveries), as
    /// `server` sent it.
    Unrouted { server: Arc<str>, event: CoreEvent },
    /// A permanent error for `key`; the last good copy keeps serving.
    DataError { key: ResourceKey, error: XdsError },
    /// A transient error for `key` (its server's stream failed).
    Transient { key: ResourceKey, error: XdsError },
    /// `server` failed: entries held only for wildcard watchers of it hear.
    StreamFailedUnwatched { server: Arc<str>, error: XdsError },
    /// `server` answers again: the transient errors it left are over.
    StreamHealthy { server: Arc<str> },
    /// The members of the list collection `collection` are now `members`.
    ListMembers {
        collection: ResourceKey,
        members: HashSet<ResourceKey>,
    },
    /// The list collection `collection` is no longer watched.
    ForgetList { collection: ResourceKey },
    /// Hold an entry for `key`, a list collection's member (one watcher),
    /// fetched from `server` (none: its authority is not in the bootstrap).
    HoldEntry {
        key: ResourceKey,
        server: Option<ServerKey>,
    },
    /// Give back the entry held for `key`.
    ReleaseEntry { key: ResourceKey },
}

/// What the federation core asks of the cache: whether an entry has an
/// answer (gRFC A71's "cached": a copy or a known absence), and whether it
/// has a copy.
pub(crate) trait Answers {
    /// A copy, or a known absence.
    fn is_answered(&self, key: &ResourceKey) -> bool;
    /// A copy a server delivered (one loaded from the state directory and
    /// not yet confirmed does not count).
    fn has_copy(&self, key: &ResourceKey) -> bool;
}
