//! The federation core: which server fetches what, and which watched entry
//! each answer fills. Sans-IO, like the protocol core: inputs are methods
//! ([`Federation::watch`], [`Federation::unwatch`],
//! [`Federation::handle_events`]), outputs are [`Action`]s polled with
//! [`Federation::poll_action`]; there is no lock, task, clock or transport
//! handle inside. The client is the executor that applies the actions to
//! its ADS connections and its cache.
//!
//! ```text
//!  watched entry E ──primary──► fetch E ──on──► authority A's servers[0..=active]
//!        │                                        (A71: the active server and every
//!        ├──alt (while active)──► fetch ALT        higher-priority one, still retrying)
//!        └──redirect chain──► fetch HOP1 … HOPn (the last answers for E)
//!
//!  event(K) from server S ─► gate: S is A's server at index ≤ active
//!                          ─► each reader E of fetch K
//!                          ─► Action::Deliver (key rewritten to E, Source recorded)
//! ```
//!
//! A watched entry is always read through the fetch of its own key, so its
//! route (watchers, `#alt`) is held in that fetch: one record and one
//! lookup per watched name, not a route table beside the fetches.
//!
//! # Server fallback (gRFC A71)
//!
//! An authority's servers are in priority order. Fetches of the authority
//! are subscribed on its *active* server and on every server before it, so
//! that a failed higher-priority server that comes back answers at once.
//!
//! - **Falling back.** When the active server fails (gRFC A57: the
//!   connection fails, or the stream ends before any response) and a watched
//!   resource of the authority has no answer yet (neither a copy nor a known
//!   absence), the next server becomes active and every fetch of the
//!   authority is subscribed there. Watchers with a copy get an ambient
//!   error; watchers without one are not told of the failure, since the
//!   fallback server is being asked. With every resource answered there is
//!   no fallback: the cached copies keep serving.
//! - **Switching back.** The first response of a stream to a server before
//!   the active one makes it active again; the fetches are unsubscribed from
//!   the servers after it, and a server left with no subscription at all is
//!   closed at once (A71: the client closes its connections to
//!   lower-priority servers). Copies the fallback server delivered keep
//!   serving until the primary replaces them.
//! - **Starting afresh.** An authority with nothing left to fetch returns
//!   to its primary: the next watch does not go to a fallback chosen long
//!   before.
//! - **Gating.** Answers from a server after the active one (in flight while
//!   switching back) are dropped; failures of servers before it (still
//!   retrying) are not reported.
//!
//! # Falling back on reachability alone (gRFC A95)
//!
//! An authority whose bootstrap entry sets `fallback_on_reachability_only`
//! falls back "when the primary server is unreachable, even if we do not
//! have any uncached resources": the active server failing (gRFC A57, as
//! above) is enough, as long as the authority fetches anything. Answers
//! from a reachable server, a NACK or a does-not-exist among them, move
//! nothing. Everything else is A71's: the copies keep serving with an
//! ambient error until the next server replaces them, the first response of
//! the primary switches back, and the knob is per authority, so another
//! authority on the same failed server keeps its own rule.
//!
//! # `#alt` alternatives (xDS TP1)
//!
//! A watched name with an `#alt=` directive has an alternative resource. It
//! is fetched, and its answers are delivered under the watched name, when
//! the primary cannot deliver the resource and no copy is cached:
//!
//! - every server of the primary's authority has failed (no fallback left)
//!   and the entry has no answer (neither a copy nor a known absence), or
//! - the does-not-exist timer fired for the primary (no server answered it).
//!
//! An explicit deletion by the primary's server is an answer, not a failure:
//! it is delivered as such. The primary stays subscribed, and its first
//! answer (an update, a deletion or a redirect) ends the alternative: it is
//! unsubscribed and the primary's answer replaces the alternative's.
//!
//! # Redirects (xDS TP1)
//!
//! TP1 has a server answer a name with a `ResourceLocator` in two passages:
//! "Aliasing" lets any singleton resource be answered that way (route
//! configuration aliases, delegation to another authority), and the
//! collections section allows redirects of list collections and of the
//! members of glob collections, but says a glob collection "itself is not
//! redirectable". Read together: every redirect is followed except one of
//! a glob collection itself.
//!
//! - A followed target is fetched on its own authority, which must be in
//!   the bootstrap (a server cannot send the client to a server the
//!   bootstrap does not trust), with the entry as reader; its answers are
//!   delivered under the entry's name, marked `redirected`.
//! - The targets reached form the entry's chain: a target that redirects
//!   extends it, one that answers for itself cuts it there (later targets
//!   are unsubscribed), and the entry answering for itself drops it.
//! - A target already on the chain (a loop), more hops than the limit, a
//!   target of another type or a glob collection as target is an error
//!   naming the chain; the last good copy keeps serving.
//!
//! # Collections (xDS TP1)
//!
//! - **Glob collections.** A member of a watched glob answers for the
//!   glob's fetch and is gated by the glob's servers; it is delivered under
//!   its own name.
//! - **List collections.** A list's body names its members: each locator
//!   member is watched for the collection on its own authority (a member of
//!   an authority the bootstrap lacks is an error for that member), inline
//!   entries are delivered under `collection#entry=name` (or
//!   `#anonymous=index`), members that left are let go, and a body with the
//!   same bytes as the last one changes nothing.

mod actions;
mod alt;
mod fallback;
mod fetch;
mod lists;
mod redirect;
mod replay;
mod route;
mod state;
#[cfg(test)]
mod tests;

use crate::hash::{HashMap, HashSet, KeyedTable};
use std::collections::VecDeque;
use std::sync::Arc;

pub use crate::entry::short_type;
#[cfg(test)]
pub use crate::entry::{
    apply as apply_event, data_error, healthy_again, is_answered, named_server, transient,
};
pub use actions::{Action, Answers};
pub use route::key_of;
pub use state::Home;

use crate::authority::{AuthorityError, AuthorityRegistry, Partition, ServerId};
use crate::bootstrap::ServerConfig;
use crate::name::ResourceName;
use crate::protocol::ResourceKey;
use crate::status::AuthorityStatus;
use state::{Alt, AuthorityState, Fetch, ListState, Redirect, Route};

/// The federation core's state. See the [module docs](self).
pub struct Federation {
    /// The bootstrap's servers and those ConfigSources named since, each
    /// interned once: everything below names servers by id.
    registry: AuthorityRegistry,
    max_redirects: usize,
    /// How many keys (and wildcard types) are subscribed on each server.
    subscribed: HashMap<ServerId, usize>,
    authorities: HashMap<Partition, AuthorityState>,
    /// Boxed: inline, the table's empty slots alone would hold tens of
    /// megabytes at a million keys, and each rehash would move them.
    /// A watched entry's route is held in the fetch of its own key.
    fetches: KeyedTable<ResourceKey, Fetch>,
    named_fetches: fetch::NamedFetches,
    redirects: HashMap<ResourceKey, Redirect>,
    /// Members of each glob with a redirect chain, so letting a glob go
    /// touches only its own.
    glob_redirects: HashMap<ResourceKey, HashSet<ResourceKey>>,
    lists: HashMap<ResourceKey, ListState>,
    /// `#entry=` watches and the collection each is an entry of.
    entry_of: HashMap<ResourceKey, ResourceKey>,
    /// Wildcard subscriptions: type → (server, watchers).
    wildcard: HashMap<&'static str, (ServerId, usize)>,
    /// Readers that joined a fetch with an answer already: (reader, key).
    replays: VecDeque<(ResourceKey, ResourceKey)>,
    actions: VecDeque<Action>,
    /// One copy of each authority name a delivered copy records as its
    /// source, shared by every copy of that authority.
    authority_names: crate::hash::Interner,
}

/// How many authority names [`Federation`] shares; names beyond it (only
/// ever redirect targets a server chose) get a copy each.
const SHARED_AUTHORITY_NAMES: usize = 1024;

impl Federation {
    /// A federation core for the authorities of `registry`.
    pub fn new(registry: AuthorityRegistry, max_redirects: usize) -> Self {
        Federation {
            registry,
            max_redirects,
            subscribed: HashMap::default(),
            authorities: HashMap::default(),
            fetches: KeyedTable::default(),
            named_fetches: fetch::NamedFetches::default(),
            redirects: HashMap::default(),
            glob_redirects: HashMap::default(),
            lists: HashMap::default(),
            entry_of: HashMap::default(),
            wildcard: HashMap::default(),
            replays: VecDeque::new(),
            actions: VecDeque::new(),
            authority_names: crate::hash::Interner::new(SHARED_AUTHORITY_NAMES),
        }
    }

    /// The next thing to do, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        crate::queue::pop_front(&mut self.actions)
    }

    /// The configuration of a server some action names.
    pub fn server_config(&self, server: ServerId) -> Option<&ServerConfig> {
        self.registry.config(server)
    }

    /// The registry the core's server ids index: the bootstrap's servers,
    /// then those [`Federation::add_server`] interned.
    pub fn registry(&self) -> &AuthorityRegistry {
        &self.registry
    }

    /// Adds a watcher of the entry `key`, fetched at `home`, with its `#alt`
    /// alternative. The first watcher subscribes it; if the key is fetched
    /// for another entry already, it starts from that fetch's answer.
    pub fn watch(
        &mut self,
        key: &ResourceKey,
        home: Home,
        alt: Option<ResourceKey>,
        answers: &dyn Answers,
    ) {
        self.add_watcher(key, home, alt);
        self.replay(answers);
    }

    pub(super) fn add_watcher(&mut self, key: &ResourceKey, home: Home, alt: Option<ResourceKey>) {
        // A name cannot stand in for itself: letting such an alternative go
        // would give back the entry's own fetch.
        let alt = alt
            .filter(|a| a != key)
            .map(|key| Box::new(Alt { key, active: false }));
        if let Some(route) = self.route_mut(key) {
            route.watchers = route.watchers.saturating_add(1);
            if route.alt.is_none() {
                // The first watch that names an alternative gives the entry one.
                route.alt = alt;
            }
            return;
        }
        self.fetch(key.clone(), home, key.clone());
        if let Some(fetch) = self.fetches.get_mut(key) {
            fetch.route = Route { watchers: 1, alt };
        }
    }

    /// Adds a watcher of the list collection `key` of `member_type`s.
    pub fn watch_list(
        &mut self,
        key: &ResourceKey,
        member_type: &'static str,
        home: Home,
        answers: &dyn Answers,
    ) {
        self.lists
            .entry(key.clone())
            .or_insert_with(|| ListState::new(member_type));
        self.watch(key, home, None, answers);
    }

    /// Marks `entry` as an `#entry=` watch of the list `collection` (which
    /// the caller watches for it), so it hears when the entry leaves.
    pub fn want_entry(&mut self, collection: &ResourceKey, entry: &ResourceKey) {
        if let Some(list) = self.lists.get_mut(collection) {
            list.wanted.insert(entry.clone());
            self.entry_of.insert(entry.clone(), collection.clone());
        }
    }

    /// Gives back one watcher of `key`; the last one unsubscribes what feeds
    /// it, and a list collection's last one lets its members go.
    pub fn unwatch(&mut self, key: &ResourceKey) {
        if let Some(collection) = self.entry_of.remove(key)
            && let Some(list) = self.lists.get_mut(&collection)
        {
            list.wanted.remove(key);
        }
        let Some(route) = self.route_mut(key) else {
            return;
        };
        route.watchers = route.watchers.saturating_sub(1);
        if route.watchers > 0 {
            return;
        }
        let alt = route.alt.take();
        self.unfetch(key, key);
        if let Some(alt) = alt.filter(|a| a.active) {
            self.unfetch(&alt.key, key);
        }
        self.drop_redirects_of(key);
        if let Some(list) = self.lists.remove(key) {
            self.actions.push_back(Action::ForgetList {
                collection: key.clone(),
            });
            for member in list.locators {
                self.release_member(&member);
            }
        }
    }

    /// Adds a wildcard watcher of `type_url` on `server`; the first one
    /// subscribes.
    pub fn watch_wildcard(&mut self, type_url: &'static str, server: ServerId) {
        if let Some((_, watchers)) = self.wildcard.get_mut(type_url) {
            *watchers += 1;
            return;
        }
        *self.subscribed.entry(server).or_default() += 1;
        self.actions
            .push_back(Action::SubscribeWildcard { server, type_url });
        self.wildcard.insert(type_url, (server, 1));
    }

    /// Gives back one wildcard watcher of `type_url`.
    pub fn unwatch_wildcard(&mut self, type_url: &str) {
        let Some((_, watchers)) = self.wildcard.get_mut(type_url) else {
            return;
        };
        *watchers -= 1;
        if *watchers > 0 {
            return;
        }
        if let Some((type_url, (server, _))) = self.wildcard.remove_entry(type_url) {
            self.release_subscription(server);
            self.actions
                .push_back(Action::UnsubscribeWildcard { server, type_url });
        }
    }

    /// Makes sure the core knows `partition`'s servers.
    pub fn ensure_authority(
        &mut self,
        partition: &Partition,
        name: &ResourceName,
    ) -> Result<(), AuthorityError> {
        if self.authorities.contains_key(partition) {
            return Ok(());
        }
        let servers = self.registry.resolve_ids(name)?;
        if servers.is_empty() {
            return Err(AuthorityError::no_servers(name));
        }
        let reachability_only = self.registry.falls_back_on_reachability_only(partition);
        self.authorities.insert(
            partition.clone(),
            AuthorityState::new(servers.to_vec(), reachability_only),
        );
        Ok(())
    }

    /// Registers the one server a ConfigSource names, for
    /// [`Home::Server`] fetches: its id (the bootstrap's, if the bootstrap
    /// lists a server with its key).
    pub fn add_server(&mut self, config: &ServerConfig) -> Result<ServerId, AuthorityError> {
        self.registry.intern(config)
    }

    /// Each known authority's servers and which is active, sorted.
    pub fn authority_status(&self) -> Vec<AuthorityStatus> {
        let mut authorities: Vec<AuthorityStatus> = self
            .authorities
            .iter()
            .map(|(partition, a)| AuthorityStatus {
                authority: match partition {
                    Partition::Authority(name) => Some(name.clone()),
                    Partition::OldStyle => None,
                },
                servers: a
                    .servers
                    .iter()
                    .map(|id| self.registry.name(*id).to_string())
                    .collect(),
                active: a
                    .servers
                    .get(a.active)
                    .map(|id| self.registry.name(*id).to_string())
                    .unwrap_or_default(),
                active_uri: a
                    .servers
                    .get(a.active)
                    .map(|id| self.registry.uri(*id).to_string())
                    .unwrap_or_default(),
                on_fallback: a.active > 0,
            })
            .collect();
        authorities.sort_by(|a, b| a.authority.cmp(&b.authority));
        authorities
    }
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation")
            .field("authorities", &self.authorities.len())
            .field("fetches", &self.fetches.len())
            .finish_non_exhaustive()
    }
}

impl Federation {
    /// The URI of every server a fetch may use, by the name events,
    /// entries and messages give it (see [`Source::server`](crate::entry::Source::server)):
    /// status and metrics label servers by URI without taking that name
    /// apart.
    pub fn server_uris(&self) -> HashMap<Arc<str>, Arc<str>> {
        self.registry
            .server_ids()
            .map(|id| {
                (
                    Arc::clone(self.registry.name(id)),
                    Arc::clone(self.registry.uri(id)),
                )
            })
            .collect()
    }
}
