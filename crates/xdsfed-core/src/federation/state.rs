//! What the federation core holds: authorities and their servers, what is
//! fetched where, and what feeds each watched entry.

use crate::hash::{HashSet, SmallSet};
use std::sync::Arc;

use crate::authority::{Partition, ServerId};
use crate::protocol::{CoreEvent, ResourceKey};
use crate::types::Decoded;
use crate::version::Version;

/// One authority's servers, in priority order (gRFC A71).
pub(crate) struct AuthorityState {
    pub(crate) servers: Vec<ServerId>,
    /// gRFC A95's `fallback_on_reachability_only`: the active server
    /// failing is reason enough to fall back.
    pub(crate) reachability_only: bool,
    /// The server answers are taken from; fetches are subscribed on it and
    /// on every server before it.
    pub(crate) active: usize,
    /// The fetches homed here.
    pub(crate) keys: HashSet<ResourceKey>,
}

impl AuthorityState {
    pub(crate) fn new(servers: Vec<ServerId>, reachability_only: bool) -> Self {
        AuthorityState {
            servers,
            reachability_only,
            active: 0,
            keys: HashSet::default(),
        }
    }

    /// The priority of `server` in this authority, if it is one of its.
    pub(crate) fn index_of(&self, server: ServerId) -> Option<usize> {
        self.servers.iter().position(|id| *id == server)
    }

    /// The servers fetches are subscribed on.
    pub(crate) fn subscribed_on(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.servers.iter().take(self.active + 1).copied()
    }
}

/// Where a fetch is subscribed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// On its authority's servers, with fallback.
    Authority(Partition),
    /// On the one server a ConfigSource names (no fallback).
    Server(ServerId),
}

/// One key subscribed on the wire, and the watched entries it feeds.
pub(crate) struct Fetch {
    pub(crate) home: Home,
    /// Usually one: the entry of the same name.
    pub(crate) readers: SmallSet<ResourceKey>,
    /// The last answer its servers gave (a copy, a deletion, an absence, a
    /// redirect, an error), for a reader that joins later: the server will
    /// not send it again.
    /// Boxed, as is `nack`: a fetch that has none (or no NACK, the usual
    /// case) should not hold the room.
    pub(crate) answer: Option<Box<Answer>>,
    /// The NACK since that answer, if any.
    pub(crate) nack: Option<Box<Answer>>,
    /// The watched entry of the fetch's own key, if it is one: a watched
    /// entry is always fed by the fetch of its own key, so its route lives
    /// in that fetch rather than in a table of its own (one record, one
    /// lookup and one copy of the key per watched name).
    pub(crate) route: Route,
}

/// An event about a fetched key, as its server sent it.
pub(crate) struct Answer {
    pub(crate) event: Recorded,
    /// The registry's shared name of the server.
    pub(crate) server: Arc<str>,
    pub(crate) fallback: bool,
}

/// What an answer said. A copy without a TTL, the answer nearly every
/// fetch holds, is kept without its key (the fetch's own) and its empty
/// TTL: 112 bytes an answer, where the whole event made it 160, at one
/// answer per fetch (200 000 of them for 100 000 EDS clusters).
#[derive(Clone)]
pub(crate) enum Recorded {
    Copy { resource: Decoded, version: Version },
    Event(Box<CoreEvent>),
}

impl Recorded {
    pub(crate) fn of(event: &CoreEvent) -> Self {
        match event {
            CoreEvent::Upsert {
                resource,
                version,
                ttl: None,
                ..
            } => Recorded::Copy {
                resource: resource.clone(),
                version: version.clone(),
            },
            other => Recorded::Event(Box::new(other.clone())),
        }
    }

    /// The event again, about `key`.
    pub(crate) fn event(&self, key: &ResourceKey) -> CoreEvent {
        match self {
            Recorded::Copy { resource, version } => CoreEvent::Upsert {
                key: key.clone(),
                resource: resource.clone(),
                version: version.clone(),
                ttl: None,
            },
            Recorded::Event(event) => CoreEvent::clone(event),
        }
    }
}

/// A watched entry: how many hold it (none: the fetch is not a watched
/// entry), and what feeds it besides the fetch of its own key, its
/// primary.
#[derive(Default)]
pub(crate) struct Route {
    pub(crate) watchers: u32,
    /// Its `#alt` alternative, if the name had one.
    /// Boxed: few names have one, and every entry would hold its room.
    pub(crate) alt: Option<Box<Alt>>,
}

/// An `#alt` alternative.
pub(crate) struct Alt {
    pub(crate) key: ResourceKey,
    /// Whether it is fetched and serving.
    pub(crate) active: bool,
}

/// The redirect targets followed for one entry, in the order reached; the
/// last one answers for the entry. Earlier ones stay fetched, so a hop that
/// stops redirecting is seen.
#[derive(Default)]
pub(crate) struct Redirect {
    pub(crate) hops: Vec<ResourceKey>,
}

/// A watched list collection.
pub(crate) struct ListState {
    /// The members' type URL.
    pub(crate) member_type: &'static str,
    /// The locator members, each watched for the collection.
    pub(crate) locators: HashSet<ResourceKey>,
    /// Inline entries watched on their own (`#entry=`).
    pub(crate) wanted: HashSet<ResourceKey>,
    /// The last body acted on.
    pub(crate) last: Option<bytes::Bytes>,
}

impl ListState {
    pub(crate) fn new(member_type: &'static str) -> Self {
        ListState {
            member_type,
            locators: HashSet::default(),
            wanted: HashSet::default(),
            last: None,
        }
    }
}

/// Whether `key` is a list collection (xDS TP1: a `<T>Collection` type).
pub(crate) fn is_list_collection(key: &ResourceKey) -> bool {
    key.type_url.ends_with("Collection")
}
