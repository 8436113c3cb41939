//! Which watched entry each answer fills, and from which server it may
//! come (gRFC A71 gating).

use std::sync::Arc;

use super::state::{Home, is_list_collection};
use super::{Action, Answers, Federation};
use crate::authority::ServerId;
use crate::entry::Source;
use crate::error::{Cause, ErrorKind, RedirectRefusal, XdsError};
use crate::name::authority_of;
use crate::protocol::{CoreEvent, ResourceKey, glob_of, is_glob};

/// Where an answer came from, before it is known whom it is for.
pub(super) struct From<'a> {
    /// The registry's shared name of the server.
    pub(super) server: &'a Arc<str>,
    /// The server is a fallback server of the fetch's authority.
    pub(super) fallback: bool,
}

impl Federation {
    /// The source of an answer about `key`, from `from`, delivered to
    /// `entry`: every copy holds one, so its parts are shared copies (the
    /// server's registry name, the authority's, the one empty name), not
    /// an allocation each.
    pub(super) fn source(
        &mut self,
        from: &From<'_>,
        key: &ResourceKey,
        entry: &ResourceKey,
    ) -> Source {
        Source {
            server: Arc::clone(from.server),
            authority: authority_of(&key.name).map(|a| self.shared_authority_name(a)),
            fetched_as: if key == entry {
                crate::entry::own_name()
            } else {
                Arc::clone(&key.name)
            },
            fallback: from.fallback,
            alt: false,
            redirected: false,
        }
    }

    /// The shared copy of authority name `authority`: where copies came
    /// from and where watches go name their authority with it.
    pub fn shared_authority_name(&mut self, authority: &str) -> Arc<str> {
        self.authority_names.shared(authority)
    }

    /// Takes what one server's stream reported. `answers` tells what the
    /// cache holds, as of before these events.
    pub fn handle_events(
        &mut self,
        server: ServerId,
        events: Vec<CoreEvent>,
        answers: &dyn Answers,
    ) {
        // The registry's shared name: no delivery allocates one.
        let name = Arc::clone(self.registry.name(server));
        for event in events {
            match &event {
                CoreEvent::StreamHealthy => {
                    self.switch_back(server);
                    self.actions.push_back(Action::StreamHealthy {
                        server: Arc::clone(&name),
                    });
                }
                CoreEvent::StreamAccepted => self.actions.push_back(Action::StreamHealthy {
                    server: Arc::clone(&name),
                }),
                CoreEvent::StreamFailed { failure } => {
                    let error = XdsError::stream_failed(failure, Arc::clone(&name));
                    self.on_failure(server, &error, answers);
                    self.actions.push_back(Action::StreamFailedUnwatched {
                        server: Arc::clone(&name),
                        error,
                    });
                }
                _ => self.route_keyed(server, &name, event, answers),
            }
        }
        self.replay(answers);
    }

    /// Whether events from `server` about fetches homed at `home` count,
    /// and whether `server` is a fallback server there.
    fn gate(&self, home: &Home, server: ServerId) -> Option<bool> {
        match home {
            Home::Authority(partition) => {
                let authority = self.authorities.get(partition)?;
                let index = authority.index_of(server)?;
                (index <= authority.active).then_some(index > 0)
            }
            Home::Server(id) => (*id == server).then_some(false),
        }
    }

    fn route_keyed(
        &mut self,
        server: ServerId,
        name: &Arc<str>,
        event: CoreEvent,
        answers: &dyn Answers,
    ) {
        let Some(key) = key_of(&event).cloned() else {
            return;
        };
        let fetched = self
            .named_fetches
            .may_hold(&key)
            .then(|| self.fetches.get(&key))
            .flatten();
        let Some(fetch) = fetched else {
            self.route_unfetched(server, name, &key, event);
            return;
        };
        let Some(fallback) = self.gate(&fetch.home, server) else {
            tracing::debug!(%key, server = %name, "dropping an answer from a server that is not active for its authority");
            return;
        };
        let readers: Vec<ResourceKey> = fetch.readers.iter(&key).cloned().collect();
        let from = From {
            server: name,
            fallback,
        };
        self.record(&key, &event, &from);
        for reader in readers {
            self.route_to_reader(&reader, &key, &event, &from, answers);
        }
    }

    /// An answer about a key nobody fetched by name: a member of a watched
    /// glob collection (gated by the glob's servers), or a wildcard delivery.
    fn route_unfetched(
        &mut self,
        server: ServerId,
        name: &Arc<str>,
        key: &ResourceKey,
        event: CoreEvent,
    ) {
        let glob = glob_of(&key.name).and_then(|g| {
            self.fetches
                .get(&ResourceKey::new(Arc::clone(&key.type_url), g))
        });
        let Some(glob) = glob else {
            self.actions.push_back(Action::Unrouted {
                server: Arc::clone(name),
                event,
            });
            return;
        };
        let Some(fallback) = self.gate(&glob.home, server) else {
            return;
        };
        let from = From {
            server: name,
            fallback,
        };
        match &event {
            // xDS TP1: "Glob collections may have individual resources
            // redirected".
            CoreEvent::Redirect { target, .. } => {
                self.on_redirect(key, key, target, &from);
            }
            _ => {
                // The member answers for itself again.
                self.stop_redirect(key);
                let source = self.source(&from, key, key);
                self.deliver(event, source);
            }
        }
    }

    /// `event`, about `key`, for the watched entry `reader`.
    pub(super) fn route_to_reader(
        &mut self,
        reader: &ResourceKey,
        key: &ResourceKey,
        event: &CoreEvent,
        from: &From<'_>,
        answers: &dyn Answers,
    ) {
        if self.route_hop(reader, key, event, from) {
            return;
        }
        let Some(route) = self.route(reader) else {
            return;
        };
        if reader == key {
            self.route_primary(reader, event, from, answers);
        } else if route
            .alt
            .as_ref()
            .is_some_and(|a| a.active && a.key == *key)
        {
            let mut source = self.source(from, key, reader);
            source.alt = true;
            self.deliver(rekeyed(event, reader), source);
        }
    }

    /// `event` about the entry's own key.
    fn route_primary(
        &mut self,
        entry: &ResourceKey,
        event: &CoreEvent,
        from: &From<'_>,
        answers: &dyn Answers,
    ) {
        if let CoreEvent::Redirect { target, .. } = event {
            // The primary's answer, if a pointer: the alternative gives way.
            self.leave_alt(entry);
            self.redirect_entry(entry, target, from);
            return;
        }
        let source = self.source(from, entry, entry);
        match event {
            // An update, or an explicit deletion, is the primary's answer:
            // the alternative, if serving, is let go.
            CoreEvent::Upsert { .. } | CoreEvent::Removed { .. } => {
                self.stop_redirect(entry);
                self.leave_alt(entry);
                self.deliver(event.clone(), source);
            }
            CoreEvent::DoesNotExist { .. } if self.has_alt(entry) && !answers.has_copy(entry) => {
                // No server answered the primary in time: try the alternative.
                self.stop_redirect(entry);
                self.start_alt(entry);
            }
            _ => {
                // The entry answers for itself again.
                self.stop_redirect(entry);
                if !self.alt_active(entry) {
                    self.deliver(event.clone(), source);
                }
            }
        }
    }

    /// The entry's own server redirects it: followed, unless it is a glob
    /// collection (xDS TP1: "the collection itself is not redirectable").
    fn redirect_entry(&mut self, entry: &ResourceKey, target: &Arc<str>, from: &From<'_>) {
        if is_glob(&entry.name) && !is_list_collection(entry) {
            let message = format!(
                "{} {} redirected by server {} to {}: refused, xDS TP1: a glob collection itself is not redirectable",
                super::short_type(&entry.type_url),
                entry.name,
                from.server,
                target
            );
            let error = XdsError::new(ErrorKind::ServerError, message)
                .with_cause(Cause::RedirectRefused(RedirectRefusal::GlobCollection))
                .with_resource(entry.clone())
                .with_server(Arc::clone(from.server));
            self.actions.push_back(Action::DataError {
                key: entry.clone(),
                error,
            });
            return;
        }
        self.on_redirect(entry, entry, target, from);
    }

    /// Queues an event for the watched entry its key names.
    pub(super) fn deliver(&mut self, event: CoreEvent, source: Source) {
        let list_body = match &event {
            CoreEvent::Upsert { key, resource, .. } if self.lists.contains_key(key) => {
                Some((key.clone(), Some(resource.clone())))
            }
            CoreEvent::Removed { key, .. } if self.lists.contains_key(key) => {
                Some((key.clone(), None))
            }
            _ => None,
        };
        self.actions.push_back(Action::Deliver {
            event,
            source: source.clone(),
        });
        if let Some((collection, body)) = list_body {
            self.update_list(&collection, body.as_ref(), &source);
        }
    }
}

/// The key an event is about, if any.
pub fn key_of(event: &CoreEvent) -> Option<&ResourceKey> {
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
pub(super) fn rekeyed(event: &CoreEvent, to: &ResourceKey) -> CoreEvent {
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
