//! Which server fetches what, and which watched entry each answer fills:
//! server fallback within an authority (gRFC A71) and `#alt` alternatives
//! (xDS TP1).
//!
//! ```text
//!  watched entry E ──primary──► fetch E ──on──► authority A's servers[0..=active]
//!        │                                        (A71: the active server and every
//!        └──alt (while active)──► fetch ALT        higher-priority one, still retrying)
//!
//!  event(K) from server S ─► gate: S is A's server at index ≤ active
//!                          ─► each reader E of fetch K whose route shows K
//!                          ─► cache entry E (key rewritten, Source recorded)
//! ```
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
//!   the servers after it (their streams close when idle). Copies the
//!   fallback server delivered keep serving until the primary replaces them.
//! - Answers from a server after the active one (in flight while switching
//!   back) are dropped; failures of servers before it (still retrying) are
//!   not reported.
//!
//! # `#alt` alternatives (xDS TP1)
//!
//! A watched name with an `#alt=` directive has an alternative resource. It
//! is fetched, and its answers are delivered under the watched name, when
//! the primary cannot deliver the resource and no copy is cached:
//!
//! - every server of the primary's authority has failed (no fallback left),
//!   or
//! - the does-not-exist timer fired for the primary (no server answered it).
//!
//! An explicit deletion by the primary's server is an answer, not a failure:
//! it is delivered as such. The primary stays subscribed, and its first
//! update ends the alternative: it is unsubscribed and the primary's copy
//! replaces the alternative's.
//!
//! # Redirects (xDS TP1)
//!
//! An entry answered with a `ResourceLocator` may follow it only when it is
//! a list collection or a member of a watched glob collection; any other
//! redirect is refused. A followed target is fetched on its own authority
//! (which must be in the bootstrap) with the entry as reader, and its
//! answers are delivered under the entry's name, marked `redirected`. The
//! targets reached form the entry's chain: a target that redirects extends
//! it, one that answers for itself cuts it there (later targets are
//! unsubscribed), and the entry answering for itself drops it. A target
//! already on the chain (a loop), more hops than the limit, or a target of
//! another type is an error naming the chain.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::authority::{Partition, ServerKey};
use crate::bootstrap::ServerConfig;
use crate::cache::Source;
use crate::cache::short_type;
use crate::error::{ErrorKind, XdsError};
use crate::name::{ResourceName, authority_of};
use crate::protocol::{CoreEvent, ResourceKey, glob_of, is_glob};
use crate::transport::AdsConnection;

/// The client's routing state, under the client's one lock.
#[derive(Default)]
pub(super) struct State {
    pub(super) connections: HashMap<ServerKey, AdsConnection>,
    /// The connection each wildcard type is on.
    pub(super) wildcard: HashMap<&'static str, ServerKey>,
    /// Per authority (and the old-style partition): servers and which is
    /// active.
    pub(super) authorities: HashMap<Partition, AuthorityState>,
    /// What is subscribed on the wire, by the key sent.
    pub(super) fetches: HashMap<ResourceKey, Fetch>,
    /// Watched entries and what feeds them.
    pub(super) routes: HashMap<ResourceKey, Route>,
    /// Entries answered with a `ResourceLocator` and the chain of targets
    /// followed for them (xDS TP1 redirects): watched list collections and
    /// members of watched glob collections.
    pub(super) redirects: HashMap<ResourceKey, Redirect>,
    /// How many redirects one entry may follow in a row.
    pub(super) max_redirects: usize,
    /// Watched list collections (xDS TP1).
    pub(super) lists: HashMap<ResourceKey, ListState>,
}

/// A watched list collection.
pub(super) struct ListState {
    /// The members' type URL.
    pub(super) member_type: &'static str,
    /// The locator members, each watched for the collection.
    pub(super) locators: HashSet<ResourceKey>,
    /// Inline entries watched on their own (`#entry=`).
    pub(super) wanted: HashSet<ResourceKey>,
    /// The last body acted on.
    pub(super) last: Option<bytes::Bytes>,
}

impl ListState {
    pub(super) fn new(member_type: &'static str) -> Self {
        ListState {
            member_type,
            locators: HashSet::new(),
            wanted: HashSet::new(),
            last: None,
        }
    }
}

/// The redirects followed for one entry.
#[derive(Default)]
pub(super) struct Redirect {
    /// The targets, in the order they were reached; the last one is fetched
    /// for the entry and its answers are delivered under the entry's name.
    /// Earlier ones stay fetched, so a hop that stops redirecting is seen.
    pub(super) hops: Vec<ResourceKey>,
}

/// A redirect target to fetch for an entry.
pub(super) struct Follow {
    /// The entry the target answers for.
    pub(super) entry: ResourceKey,
    /// The target.
    pub(super) hop: ResourceKey,
    /// The chain that led there, for error messages.
    pub(super) chain: String,
    /// The server that sent the redirect.
    pub(super) server: Arc<str>,
}

/// One authority's servers (gRFC A71).
pub(super) struct AuthorityState {
    /// In priority order.
    pub(super) servers: Vec<(ServerKey, ServerConfig)>,
    /// The server answers are taken from; fetches are subscribed on it and
    /// every server before it.
    pub(super) active: usize,
    /// The fetches homed here.
    pub(super) keys: HashSet<ResourceKey>,
}

impl AuthorityState {
    pub(super) fn new(servers: Vec<(ServerKey, ServerConfig)>) -> Self {
        AuthorityState {
            servers,
            active: 0,
            keys: HashSet::new(),
        }
    }

    /// The priority of `server` in this authority, if it is one of its.
    fn index_of(&self, server: &ServerKey) -> Option<usize> {
        self.servers.iter().position(|(k, _)| k == server)
    }

    /// The servers fetches are subscribed on.
    pub(super) fn subscribed_on(&self) -> impl Iterator<Item = &(ServerKey, ServerConfig)> {
        self.servers.iter().take(self.active + 1)
    }
}

/// Where a fetch is subscribed.
#[derive(Clone)]
pub(super) enum Home {
    /// On its authority's servers, with fallback.
    Authority(Partition),
    /// On one server named by a ConfigSource (`watch_on_server`).
    Server(ServerKey, Box<ServerConfig>),
}

/// One key subscribed on the wire.
pub(super) struct Fetch {
    pub(super) home: Home,
    /// The watched entries it feeds.
    pub(super) readers: HashSet<ResourceKey>,
}

/// What feeds a watched entry.
pub(super) struct Route {
    /// The key fetched for it (its own key).
    pub(super) primary: ResourceKey,
    /// Its `#alt` alternative, if the name had one.
    pub(super) alt: Option<Alt>,
}

/// An `#alt` alternative.
pub(super) struct Alt {
    pub(super) key: ResourceKey,
    /// Whether it is fetched and serving.
    pub(super) active: bool,
}

/// What routing one batch of events decided; carried out after the lock's
/// bookkeeping, in this order.
#[derive(Default)]
pub(super) struct Effects {
    /// Events for watched entries, keyed to them.
    pub(super) routed: Vec<(CoreEvent, Source)>,
    /// Events nobody routes (wildcard deliveries), as they came.
    pub(super) passthrough: Vec<CoreEvent>,
    /// Entries to tell of a transient failure.
    pub(super) transient: Vec<ResourceKey>,
    /// Alternatives to start: (entry, alt key).
    pub(super) start_alt: Vec<(ResourceKey, ResourceKey)>,
    /// Alternatives to stop: (entry, alt key).
    pub(super) stop_alt: Vec<(ResourceKey, ResourceKey)>,
    /// Authorities that fall back to their next server.
    pub(super) fall_back: Vec<Partition>,
    /// The stream failure, when one was reported.
    pub(super) failure: Option<XdsError>,
    /// The stream had a response after being (re)established.
    pub(super) healthy: bool,
    /// Entries whose answer is refused (a redirect TP1 does not allow, a
    /// redirect loop, too many redirects).
    pub(super) refused: Vec<(ResourceKey, XdsError)>,
    /// Redirect targets no longer followed: (entry, target). Carried out
    /// before `follow`.
    pub(super) unfollow: Vec<(ResourceKey, ResourceKey)>,
    /// Redirect targets to fetch.
    pub(super) follow: Vec<Follow>,
}

/// Whether `key` is a list collection (xDS TP1: a `<T>Collection` type).
pub(super) fn is_list_collection(key: &ResourceKey) -> bool {
    key.type_url.ends_with("Collection")
}

/// The key an event is about, if any.
pub(super) fn key_of(event: &CoreEvent) -> Option<&ResourceKey> {
    match event {
        CoreEvent::Upsert { key, .. }
        | CoreEvent::Invalid { key, .. }
        | CoreEvent::Removed { key, .. }
        | CoreEvent::DoesNotExist { key }
        | CoreEvent::Redirect { key, .. }
        | CoreEvent::ResourceError { key, .. }
        | CoreEvent::NotRequested { key, .. } => Some(key),
        _ => None,
    }
}

/// `event` about another key.
fn rekeyed(event: &CoreEvent, to: &ResourceKey) -> CoreEvent {
    let mut event = event.clone();
    match &mut event {
        CoreEvent::Upsert { key, .. }
        | CoreEvent::Invalid { key, .. }
        | CoreEvent::Removed { key, .. }
        | CoreEvent::DoesNotExist { key }
        | CoreEvent::Redirect { key, .. }
        | CoreEvent::ResourceError { key, .. }
        | CoreEvent::NotRequested { key, .. } => *key = to.clone(),
        _ => {}
    }
    event
}

impl State {
    /// Decides what one server's events do. `is_answered` tells whether a
    /// watched entry has a copy or a known absence (gRFC A71's "cached").
    pub(super) fn route(
        &mut self,
        server: &ServerKey,
        server_name: &Arc<str>,
        events: Vec<CoreEvent>,
        is_answered: &dyn Fn(&ResourceKey) -> bool,
        has_copy: &dyn Fn(&ResourceKey) -> bool,
    ) -> Effects {
        let mut fx = Effects::default();
        for event in events {
            match &event {
                CoreEvent::StreamHealthy => {
                    self.switch_back(server);
                    fx.healthy = true;
                }
                CoreEvent::StreamAccepted => fx.healthy = true,
                CoreEvent::StreamFailed { error } => {
                    let error = XdsError::new(ErrorKind::Transient, Arc::clone(error));
                    self.on_failure(server, is_answered, has_copy, &mut fx);
                    fx.failure = Some(error);
                }
                _ => self.route_keyed(server, server_name, event, &mut fx),
            }
        }
        fx
    }

    /// Whether events from `server` about fetches homed at `home` count,
    /// and whether `server` is a fallback server there.
    fn gate(&self, home: &Home, server: &ServerKey) -> Option<bool> {
        match home {
            Home::Authority(partition) => {
                let authority = self.authorities.get(partition)?;
                let index = authority.index_of(server)?;
                (index <= authority.active).then_some(index > 0)
            }
            Home::Server(key, _) => (key == server).then_some(false),
        }
    }

    fn route_keyed(
        &mut self,
        server: &ServerKey,
        server_name: &Arc<str>,
        event: CoreEvent,
        fx: &mut Effects,
    ) {
        let Some(key) = key_of(&event).cloned() else {
            return;
        };
        let Some(fetch) = self.fetches.get(&key) else {
            // A member of a glob collection answers for its glob's fetch:
            // the same servers may deliver it (gRFC A71 gating).
            let glob = glob_of(&key.name).and_then(|g| {
                self.fetches
                    .get(&ResourceKey::new(Arc::clone(&key.type_url), g))
            });
            let Some(glob) = glob else {
                fx.passthrough.push(event);
                return;
            };
            let Some(fallback) = self.gate(&glob.home, server) else {
                return;
            };
            match &event {
                // xDS TP1: "Glob collections may have individual resources
                // redirected".
                CoreEvent::Redirect { target, .. } => {
                    self.on_redirect(&key, &key, target, server_name, fx);
                }
                _ => {
                    // The member answers for itself again.
                    self.stop_redirect(&key, fx);
                    let source = Source {
                        server: Arc::clone(server_name),
                        authority: authority_of(&key.name).map(Arc::from),
                        fetched_as: Arc::from(""),
                        fallback,
                        alt: false,
                        redirected: false,
                    };
                    fx.routed.push((event, source));
                }
            }
            return;
        };
        let Some(fallback) = self.gate(&fetch.home, server) else {
            tracing::debug!(%key, server = %server_name, "dropping an answer from a server that is not active for its authority");
            return;
        };
        let readers: Vec<ResourceKey> = fetch.readers.iter().cloned().collect();
        for reader in readers {
            if self.route_hop(&reader, &key, &event, server_name, fallback, fx) {
                continue;
            }
            if self.routes.get(&reader).is_some_and(|r| r.primary == key) {
                match &event {
                    // xDS TP1: "Redirects are only supported for list
                    // collections".
                    CoreEvent::Redirect { target, .. } if is_list_collection(&reader) => {
                        self.on_redirect(&reader, &reader, target, server_name, fx);
                        continue;
                    }
                    CoreEvent::Redirect { .. } => {}
                    // The entry answers for itself again.
                    _ => self.stop_redirect(&reader, fx),
                }
            }
            let Some(route) = self.routes.get_mut(&reader) else {
                continue;
            };
            let source = |alt: bool| Source {
                server: Arc::clone(server_name),
                authority: authority_of(&key.name).map(Arc::from),
                fetched_as: if key == reader {
                    Arc::from("")
                } else {
                    Arc::clone(&key.name)
                },
                fallback,
                alt,
                redirected: false,
            };
            if route.primary == key {
                let alt_active = route.alt.as_ref().is_some_and(|a| a.active);
                match &event {
                    CoreEvent::Redirect { target, .. } => {
                        // xDS TP1: "Redirects are only supported for list
                        // collections. Glob collections may have individual
                        // resources redirected but the collection itself is
                        // not redirectable".
                        fx.refused.push((
                            reader.clone(),
                            XdsError::new(
                                ErrorKind::ServerError,
                                format!(
                                    "{} {} redirected by server {} to {}: refused, xDS TP1 allows redirects only for list collections and members of glob collections",
                                    short_type(&reader.type_url),
                                    reader.name,
                                    server_name,
                                    target
                                ),
                            ),
                        ));
                    }
                    CoreEvent::Upsert { .. } => {
                        if let Some(alt) = route.alt.as_mut().filter(|a| a.active) {
                            // TP1 #alt: the primary delivers again; back to it.
                            alt.active = false;
                            fx.stop_alt.push((reader.clone(), alt.key.clone()));
                        }
                        fx.routed.push((rekeyed(&event, &reader), source(false)));
                    }
                    CoreEvent::DoesNotExist { .. } => match route.alt.as_mut() {
                        Some(alt) if !alt.active => {
                            // No server answered the primary in time: try the
                            // alternative.
                            alt.active = true;
                            fx.start_alt.push((reader.clone(), alt.key.clone()));
                        }
                        Some(_) => {}
                        None => fx.routed.push((rekeyed(&event, &reader), source(false))),
                    },
                    _ if alt_active => {}
                    _ => fx.routed.push((rekeyed(&event, &reader), source(false))),
                }
            } else if route.alt.as_ref().is_some_and(|a| a.active && a.key == key) {
                fx.routed.push((rekeyed(&event, &reader), source(true)));
            }
        }
    }

    /// Routes `event`, about `key`, to `entry` if `key` is a target of the
    /// entry's redirect chain. Returns whether it was one.
    fn route_hop(
        &mut self,
        entry: &ResourceKey,
        key: &ResourceKey,
        event: &CoreEvent,
        server_name: &Arc<str>,
        fallback: bool,
        fx: &mut Effects,
    ) -> bool {
        let Some(redirect) = self.redirects.get_mut(entry) else {
            return false;
        };
        let Some(at) = redirect.hops.iter().position(|h| h == key) else {
            return false;
        };
        if let CoreEvent::Redirect { target, .. } = event {
            self.on_redirect(entry, key, target, server_name, fx);
            return true;
        }
        // This target answers for itself now: the ones it led to are no
        // longer followed.
        for hop in redirect.hops.drain(at + 1..) {
            fx.unfollow.push((entry.clone(), hop));
        }
        let source = Source {
            server: Arc::clone(server_name),
            authority: authority_of(&key.name).map(Arc::from),
            fetched_as: Arc::clone(&key.name),
            fallback,
            alt: false,
            redirected: true,
        };
        fx.routed.push((rekeyed(event, entry), source));
        true
    }

    /// `from` (the entry itself, or a target of its chain) redirects to
    /// `target`: follows it, unless that makes a loop, exceeds the hop limit
    /// or changes the type. Targets after `from` are no longer followed.
    fn on_redirect(
        &mut self,
        entry: &ResourceKey,
        from: &ResourceKey,
        target: &Arc<str>,
        server_name: &Arc<str>,
        fx: &mut Effects,
    ) {
        let max = self.max_redirects;
        let redirect = self.redirects.entry(entry.clone()).or_default();
        let keep = redirect
            .hops
            .iter()
            .position(|h| h == from)
            .map_or(0, |at| at + 1);
        for hop in redirect.hops.drain(keep..) {
            fx.unfollow.push((entry.clone(), hop));
        }
        let hop = ResourceKey::new(Arc::clone(&entry.type_url), Arc::clone(target));
        let chain: Vec<&str> = std::iter::once(&*entry.name)
            .chain(redirect.hops.iter().map(|h| &*h.name))
            .chain(std::iter::once(&**target))
            .collect();
        let chain = chain.join(" -> ");
        let what = format!(
            "{} {} redirected by server {} (authority {})",
            short_type(&entry.type_url),
            entry.name,
            server_name,
            authority_of(&from.name).unwrap_or("none"),
        );
        let refusal = if is_glob(target) {
            // A glob collection names no resource to stand in for the entry
            // (and a member redirected to its own glob would wait forever).
            Some(format!(
                "{what}: the target {target} is a glob collection, not a resource: {chain}"
            ))
        } else if hop == *entry || redirect.hops.contains(&hop) {
            Some(format!("{what}: redirect loop {chain}"))
        } else if redirect.hops.len() >= max {
            Some(format!(
                "{what}: more than {max} redirects in a row: {chain}"
            ))
        } else if let Err(e) =
            ResourceName::parse(target).and_then(|n| n.check_type(&entry.type_url))
        {
            Some(format!(
                "{what}: target of another type refused: {chain}: {e}"
            ))
        } else {
            None
        };
        if let Some(message) = refusal {
            fx.refused.push((
                entry.clone(),
                XdsError::new(ErrorKind::ServerError, message),
            ));
            return;
        }
        redirect.hops.push(hop.clone());
        fx.follow.push(Follow {
            entry: entry.clone(),
            hop,
            chain,
            server: Arc::clone(server_name),
        });
    }

    /// The entry answers for itself: its redirect targets are no longer
    /// followed.
    pub(super) fn stop_redirect(&mut self, entry: &ResourceKey, fx: &mut Effects) {
        if let Some(redirect) = self.redirects.remove(entry) {
            fx.unfollow
                .extend(redirect.hops.into_iter().map(|h| (entry.clone(), h)));
        }
    }

    /// gRFC A71: the first response from a server before an authority's
    /// active one makes it active again.
    fn switch_back(&mut self, server: &ServerKey) {
        for (partition, authority) in &mut self.authorities {
            let Some(index) = authority.index_of(server) else {
                continue;
            };
            if index >= authority.active {
                continue;
            }
            tracing::info!(%partition, server = %server, "higher-priority server answers again; switching back to it");
            for (key, _) in authority
                .servers
                .iter()
                .take(authority.active + 1)
                .skip(index + 1)
            {
                if let Some(conn) = self.connections.get(key) {
                    for fetched in &authority.keys {
                        conn.unsubscribe(fetched.clone());
                    }
                }
            }
            authority.active = index;
        }
    }

    /// gRFC A57 failure of `server`: fall back, start alternatives, or
    /// report the failure, per authority for which it is the active server.
    fn on_failure(
        &mut self,
        server: &ServerKey,
        is_answered: &dyn Fn(&ResourceKey) -> bool,
        has_copy: &dyn Fn(&ResourceKey) -> bool,
        fx: &mut Effects,
    ) {
        let mut affected: Vec<ResourceKey> = Vec::new();
        let mut transient = HashSet::new();
        for (partition, authority) in &mut self.authorities {
            if authority.index_of(server) != Some(authority.active) {
                continue;
            }
            let waiting = authority.keys.iter().any(|k| {
                self.fetches
                    .get(k)
                    .is_some_and(|f| f.readers.iter().any(|r| !is_answered(r)))
            });
            if waiting && authority.active + 1 < authority.servers.len() {
                authority.active += 1;
                fx.fall_back.push(partition.clone());
                // Copies keep serving, with an ambient error; watchers
                // without one wait for the fallback server.
                for key in &authority.keys {
                    if let Some(fetch) = self.fetches.get(key) {
                        transient.extend(fetch.readers.iter().filter(|r| has_copy(r)).cloned());
                    }
                }
                continue;
            }
            affected.extend(authority.keys.iter().cloned());
        }
        for fetch in self
            .fetches
            .iter()
            .filter(|(_, f)| matches!(&f.home, Home::Server(k, _) if k == server))
        {
            affected.push(fetch.0.clone());
        }
        // Each affected fetch's readers: start an alternative where the
        // primary failed with nothing cached, else report the failure.
        for key in affected {
            let Some(fetch) = self.fetches.get(&key) else {
                continue;
            };
            let readers: Vec<ResourceKey> = fetch.readers.iter().cloned().collect();
            for reader in readers {
                let Some(route) = self.routes.get_mut(&reader) else {
                    continue;
                };
                if route.primary == key
                    && !has_copy(&reader)
                    && let Some(alt) = route.alt.as_mut()
                {
                    if !alt.active {
                        alt.active = true;
                        fx.start_alt.push((reader.clone(), alt.key.clone()));
                    }
                    continue;
                }
                let shows_key = route.primary == key
                    && !route.alt.as_ref().is_some_and(|a| a.active)
                    || route.alt.as_ref().is_some_and(|a| a.active && a.key == key);
                if shows_key {
                    transient.insert(reader);
                }
            }
        }
        fx.transient.extend(transient);
    }
}
