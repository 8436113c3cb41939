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
    pub(crate) readers: Readers,
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

/// The watched entries a fetch feeds. Nearly always exactly one, the
/// entry of the fetch's own key, which is held as a flag rather than as a
/// second copy of the key: 16 bytes a fetch, where a set of one key took 40
/// (a fetch per cluster, per assignment and per LEDS collection).
#[derive(Default)]
pub(crate) struct Readers {
    /// The entry of the fetch's own key reads it.
    own: bool,
    /// Any other readers (an `#alt` primary, a redirect's origin, a list).
    others: Option<Box<SmallSet<ResourceKey>>>,
}

impl Readers {
    /// `reader`, of the fetch of `fetched`.
    pub(crate) fn of(fetched: &ResourceKey, reader: ResourceKey) -> Self {
        let mut readers = Readers::default();
        readers.insert(fetched, reader);
        readers
    }

    /// Adds `reader` of the fetch of `fetched`; false when it was there.
    pub(crate) fn insert(&mut self, fetched: &ResourceKey, reader: ResourceKey) -> bool {
        if reader == *fetched {
            return !std::mem::replace(&mut self.own, true);
        }
        self.others.get_or_insert_default().insert(reader)
    }

    /// Removes `reader` of the fetch of `fetched`; false when it was not
    /// there.
    pub(crate) fn remove(&mut self, fetched: &ResourceKey, reader: &ResourceKey) -> bool {
        if reader == fetched {
            return std::mem::replace(&mut self.own, false);
        }
        let Some(others) = &mut self.others else {
            return false;
        };
        let removed = others.remove(reader);
        if others.is_empty() {
            self.others = None;
        }
        removed
    }

    /// Whether `reader` reads the fetch of `fetched`.
    pub(crate) fn contains(&self, fetched: &ResourceKey, reader: &ResourceKey) -> bool {
        if reader == fetched {
            return self.own;
        }
        self.others.as_ref().is_some_and(|o| o.contains(reader))
    }

    /// Whether none is left.
    pub(crate) fn is_empty(&self) -> bool {
        !self.own && self.others.is_none()
    }

    /// Every reader of the fetch of `fetched`.
    pub(crate) fn iter<'a>(
        &'a self,
        fetched: &'a ResourceKey,
    ) -> impl Iterator<Item = &'a ResourceKey> {
        let others = self.others.iter().flat_map(|o| o.iter());
        self.own.then_some(fetched).into_iter().chain(others)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fetch's readers answer as a set does: the fetch's own key as a
    /// flag, any other in the set beside it, which goes with its last one.
    #[test]
    fn readers_answer_as_a_set_with_the_own_key_as_a_flag() {
        let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
        let fetched = ResourceKey::new(cds, "c");
        let other = ResourceKey::new(cds, "c#alt");
        let mut readers = Readers::of(&fetched, fetched.clone());
        assert!(readers.others.is_none(), "its own key takes no set");
        assert!(!readers.insert(&fetched, ResourceKey::new(cds, "c")));
        assert!(readers.insert(&fetched, other.clone()));
        assert!(readers.contains(&fetched, &other));
        let all: Vec<&ResourceKey> = readers.iter(&fetched).collect();
        assert_eq!(all, [&fetched, &other]);

        assert!(readers.remove(&fetched, &fetched));
        assert!(!readers.remove(&fetched, &fetched));
        assert!(!readers.is_empty());
        assert!(readers.remove(&fetched, &other));
        assert!(readers.is_empty());
        assert!(
            readers.others.is_none(),
            "the set goes with its last reader"
        );
        assert_eq!(std::mem::size_of::<Readers>(), 16);
    }
}
