//! What the federation core asks its executor to do, and what it asks of
//! the cache it cannot hold itself.

use crate::hash::HashSet;
use std::sync::Arc;

use crate::authority::ServerId;
use crate::entry::Source;
use crate::error::XdsError;
use crate::protocol::{CoreEvent, ResourceKey};

/// One output of the federation core, applied in order.
#[derive(Debug)]
pub enum Action {
    /// Ask `server` for `key`.
    Subscribe {
        /// The server to ask.
        server: ServerId,
        /// The resource.
        key: ResourceKey,
    },
    /// Stop asking `server` for `key`.
    Unsubscribe {
        /// The server asked so far.
        server: ServerId,
        /// The resource.
        key: ResourceKey,
    },
    /// `server`'s next stream asks for `key` afresh: the copy the client
    /// serves will come from another server (gRFC A71 fallback).
    ForgetVersion {
        /// The server whose stream forgets.
        server: ServerId,
        /// The resource.
        key: ResourceKey,
    },
    /// Ask `server` for every resource of `type_url`.
    SubscribeWildcard {
        /// The server to ask.
        server: ServerId,
        /// The resource type.
        type_url: &'static str,
    },
    /// Stop the wildcard subscription of `type_url` on `server`.
    UnsubscribeWildcard {
        /// The server asked so far.
        server: ServerId,
        /// The resource type.
        type_url: &'static str,
    },
    /// Close the stream to `server` now: nothing is subscribed on it and it
    /// is a lower-priority server the client switched back from (gRFC A71).
    Close {
        /// The server to close the stream to.
        server: ServerId,
    },
    /// An event for the watched entry its key names, with where it came from.
    Deliver {
        /// The event, keyed by the watched entry's name.
        event: CoreEvent,
        /// Where the copy came from.
        source: Source,
    },
    /// An event about a key no watched entry reads (wildcard deliveries), as
    /// `server` sent it.
    Unrouted {
        /// The server that sent it.
        server: Arc<str>,
        /// The event.
        event: CoreEvent,
    },
    /// A permanent error for `key`; the last good copy keeps serving.
    DataError {
        /// The watched entry.
        key: ResourceKey,
        /// The error.
        error: XdsError,
    },
    /// A transient error for `key` (its server's stream failed).
    Transient {
        /// The watched entry.
        key: ResourceKey,
        /// The error.
        error: XdsError,
    },
    /// `server` failed: entries held only for wildcard watchers of it hear.
    StreamFailedUnwatched {
        /// The server that failed.
        server: Arc<str>,
        /// How it failed.
        error: XdsError,
    },
    /// `server` answers again: the transient errors it left are over.
    StreamHealthy {
        /// The server.
        server: Arc<str>,
    },
    /// The members of the list collection `collection` are now `members`.
    ListMembers {
        /// The list collection.
        collection: ResourceKey,
        /// Its members now.
        members: HashSet<ResourceKey>,
    },
    /// The list collection `collection` is no longer watched.
    ForgetList {
        /// The list collection.
        collection: ResourceKey,
    },
    /// Hold an entry for `key`, a list collection's member (one watcher),
    /// fetched from `server` (none: its authority is not in the bootstrap).
    HoldEntry {
        /// The member.
        key: ResourceKey,
        /// The server it is fetched from, if its authority is known.
        server: Option<ServerId>,
    },
    /// Give back the entry held for `key`.
    ReleaseEntry {
        /// The member.
        key: ResourceKey,
    },
}

/// What the federation core asks of the cache: whether an entry has an
/// answer (gRFC A71's "cached": a copy or a known absence), and whether it
/// has a copy.
pub trait Answers {
    /// A copy, or a known absence.
    fn is_answered(&self, key: &ResourceKey) -> bool;
    /// A copy a server delivered (one loaded from the state directory and
    /// not yet confirmed does not count).
    fn has_copy(&self, key: &ResourceKey) -> bool;
}
