//! What is subscribed where: fetches by key, per-server subscription
//! counts, and gRFC A71's subscribing on a new active server.

use super::state::{Fetch, Home, Readers, Route};
use super::{Action, Federation};
use crate::authority::{Partition, ServerId};
use crate::name::ResourceName;
use crate::protocol::{ResourceKey, glob_of, is_glob};
use std::sync::Arc;

impl Federation {
    /// Subscribes `key` for `reader`, on the servers of its home (once per
    /// key, whoever reads it).
    pub(super) fn fetch(&mut self, key: ResourceKey, home: Home, reader: ResourceKey) {
        if let Some(fetch) = self.fetches.get_mut(&key) {
            if fetch.readers.insert(&key, reader.clone()) && fetch.answer.is_some() {
                self.replays.push_back((reader, key));
            }
            return;
        }
        let servers: Vec<ServerId> = match &home {
            Home::Authority(partition) => match self.authorities.get_mut(partition) {
                Some(authority) => {
                    authority.keys.insert(key.clone());
                    authority.subscribed_on().collect()
                }
                None => Vec::new(),
            },
            Home::Server(server) => vec![*server],
        };
        for server in servers {
            self.subscribe(server, key.clone());
        }
        let readers = Readers::of(&key, reader);
        let fetch = Fetch {
            home,
            readers,
            answer: None,
            nack: None,
            route: Route::default(),
        };
        self.named_fetches.add(&key);
        self.fetches.insert(key, fetch);
    }

    /// The route of the watched entry `key`; `None` when no watcher holds
    /// it.
    pub(super) fn route(&self, key: &ResourceKey) -> Option<&Route> {
        self.fetches
            .get(key)
            .map(|f| &f.route)
            .filter(|r| r.watchers > 0)
    }

    /// [`Self::route`], to change.
    pub(super) fn route_mut(&mut self, key: &ResourceKey) -> Option<&mut Route> {
        self.fetches
            .get_mut(key)
            .map(|f| &mut f.route)
            .filter(|r| r.watchers > 0)
    }

    /// Gives back `reader`'s use of `key`; the last reader unsubscribes it.
    pub(super) fn unfetch(&mut self, key: &ResourceKey, reader: &ResourceKey) {
        let Some(fetch) = self.fetches.get_mut(key) else {
            return;
        };
        fetch.readers.remove(key, reader);
        if !fetch.readers.is_empty() {
            return;
        }
        let Some(fetch) = self.fetches.remove(key) else {
            return;
        };
        self.named_fetches.remove(key);
        let servers: Vec<ServerId> = match fetch.home {
            Home::Authority(partition) => match self.authorities.get_mut(&partition) {
                Some(authority) => {
                    authority.keys.remove(key);
                    let servers = authority.subscribed_on().collect();
                    if authority.keys.is_empty() {
                        // Nothing left to serve: the next watch starts on
                        // the primary, not on a fallback chosen long ago.
                        authority.active = 0;
                    }
                    servers
                }
                None => Vec::new(),
            },
            Home::Server(server) => vec![server],
        };
        for server in servers {
            self.unsubscribe(server, key.clone());
        }
    }

    pub(super) fn subscribe(&mut self, server: ServerId, key: ResourceKey) {
        *self.subscribed.entry(server).or_default() += 1;
        self.actions.push_back(Action::Subscribe { server, key });
    }

    pub(super) fn unsubscribe(&mut self, server: ServerId, key: ResourceKey) {
        self.release_subscription(server);
        self.actions.push_back(Action::Unsubscribe { server, key });
    }

    /// One subscription fewer on `server`. Returns whether none is left.
    pub(super) fn release_subscription(&mut self, server: ServerId) -> bool {
        let Some(count) = self.subscribed.get_mut(&server) else {
            return true;
        };
        *count = count.saturating_sub(1);
        if *count > 0 {
            return false;
        }
        self.subscribed.remove(&server);
        true
    }

    /// Whether anything is subscribed on `server`.
    pub(super) fn has_subscriptions(&self, server: ServerId) -> bool {
        self.subscribed.get(&server).is_some_and(|n| *n > 0)
    }

    /// gRFC A71: subscribes every fetch of `partition` on its (new) active
    /// server.
    pub(super) fn subscribe_on_active(&mut self, partition: &Partition) {
        let Some(authority) = self.authorities.get(partition) else {
            return;
        };
        let Some(server) = authority.servers.get(authority.active).copied() else {
            return;
        };
        let keys: Vec<ResourceKey> = authority.keys.iter().cloned().collect();
        let before: Vec<ServerId> = authority
            .servers
            .iter()
            .take(authority.active)
            .copied()
            .collect();
        let name = self.registry.name(server);
        tracing::warn!(%partition, server = %name, "falling back to the next server of the authority");
        for key in keys {
            // What the servers before it sent will be replaced: when one
            // answers again, it must send everything, not only changes.
            for higher in &before {
                self.actions.push_back(Action::ForgetVersion {
                    server: *higher,
                    key: key.clone(),
                });
            }
            self.subscribe(server, key);
        }
    }

    /// The home of a key fetched for routing (an `#alt` target, a redirect
    /// target): its authority, which must be one of the bootstrap's.
    pub(super) fn home_of(&mut self, name: &str) -> Result<Home, String> {
        let name = ResourceName::parse(name).map_err(|e| e.to_string())?;
        let partition = Partition::of(&name);
        self.ensure_authority(&partition, &name)
            .map_err(|e| e.to_string())?;
        Ok(Home::Authority(partition))
    }

    /// Drops the redirect chains followed for `key` and, if it is a glob,
    /// for its members.
    pub(super) fn drop_redirects_of(&mut self, key: &ResourceKey) {
        let members = self.glob_redirects.remove(key).unwrap_or_default();
        for entry in members.into_iter().chain(std::iter::once(key.clone())) {
            if let Some(redirect) = self.redirects.remove(&entry) {
                for hop in redirect.hops {
                    self.unfetch(&hop, &entry);
                }
            }
        }
    }

    /// Notes that `entry` has a redirect chain, under its glob if it is a
    /// glob's member.
    pub(super) fn index_redirect(&mut self, entry: &ResourceKey) {
        if let Some(glob) = glob_of(&entry.name) {
            let glob = ResourceKey::new(entry.type_url.clone(), glob);
            self.glob_redirects
                .entry(glob)
                .or_default()
                .insert(entry.clone());
        }
    }
}

/// How many fetches of each type are of a name that is no glob.
///
/// Rule: an answer about a name that is no glob, of a type with no such
/// fetch, is not looked up among the fetches: it can only be a glob's
/// member (or unrouted), and the look would miss. A LEDS endpoint's update
/// then costs a probe of its glob's fetch only (test
/// `named_fetches_count_names_not_globs`).
#[derive(Debug, Default)]
pub(super) struct NamedFetches(Vec<(Arc<str>, usize)>);

impl NamedFetches {
    fn add(&mut self, key: &ResourceKey) {
        if is_glob(&key.name) {
            return;
        }
        match self.0.iter_mut().find(|(t, _)| *t == key.type_url) {
            Some((_, count)) => *count += 1,
            None => self.0.push((Arc::clone(&key.type_url), 1)),
        }
    }

    fn remove(&mut self, key: &ResourceKey) {
        if is_glob(&key.name) {
            return;
        }
        if let Some((_, count)) = self.0.iter_mut().find(|(t, _)| *t == key.type_url) {
            *count = count.saturating_sub(1);
        }
    }

    /// Whether `key` may be fetched by its own name.
    pub(super) fn may_hold(&self, key: &ResourceKey) -> bool {
        // `Arc`'s equality looks at the address first: type URLs are shared.
        is_glob(&key.name)
            || self
                .0
                .iter()
                .any(|(t, count)| *count > 0 && *t == key.type_url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_fetches_count_names_not_globs() {
        let key = |name: &str| ResourceKey::new(Arc::from("T"), Arc::from(name));
        let (glob, member) = (key("xdstp://a/T/c/*"), key("xdstp://a/T/c/e1"));
        let mut named = NamedFetches::default();
        named.add(&glob);
        assert!(named.may_hold(&glob), "a glob is always looked up");
        assert!(!named.may_hold(&member), "no name of the type is fetched");
        named.add(&member);
        assert!(named.may_hold(&key("xdstp://a/T/c/e2")));
        named.remove(&member);
        assert!(!named.may_hold(&member));
    }
}
