//! The executor: applies the federation core's actions to the ADS
//! connections and the cache, and feeds each connection's events back in.

use std::sync::{Arc, Weak};

use super::{Inner, State};
use crate::cache::{Cache, DataErrorPolicy, Provenance, Source, WildcardQueue};
use crate::source::{Opening, SourceConnection};
use crate::transport::EventSink;
use crate::watch::Release;
use xdsfed_core::authority::{AuthorityRegistry, ServerId};
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::federation::{Action, Federation};
use xdsfed_core::protocol::{AuthorityFilter, CoreEvent, ResourceKey};

impl Inner {
    /// Applies every action the federation core has queued, in order.
    /// Deliveries in a row, and events in a row that no entry reads, go to
    /// the cache as one batch each, under one lock: a watcher woken by the
    /// first of a response's copies finds the rest of the response in the
    /// cache already (what `xdsfed dump` relies on). `policy` is that of the
    /// server whose events are being applied.
    pub(super) fn run(&self, state: &mut State, policy: DataErrorPolicy) {
        let mut batch = Batch {
            routed: std::mem::take(&mut state.spare.0),
            unrouted: None,
        };
        while let Some(action) = state.federation.poll_action() {
            let Some(action) = batch.take(action) else {
                continue;
            };
            batch.flush(&self.cache, policy);
            // An empty batch takes any delivery; anything else is applied.
            let Some(action) = batch.take(action) else {
                continue;
            };
            self.apply(state, action, policy);
        }
        batch.flush(&self.cache, policy);
        state.spare = Spare::of(batch.routed);
    }

    fn apply(&self, state: &mut State, action: Action, policy: DataErrorPolicy) {
        match action {
            Action::Subscribe { server, key } => {
                if let Some(conn) = self.connection(state, server) {
                    self.resume_from_disk(state, server, &key, conn.as_ref());
                    conn.subscribe(key);
                }
            }
            Action::Unsubscribe { server, key } => {
                if let Some(conn) = state.connections.get(&server) {
                    conn.unsubscribe(key);
                }
            }
            Action::ForgetVersion { server, key } => {
                if let Some(conn) = state.connections.get(&server) {
                    conn.forget_version(key);
                }
            }
            Action::SubscribeWildcard { server, type_url } => {
                if let Some(conn) = self.connection(state, server) {
                    conn.subscribe_wildcard(type_url);
                }
            }
            Action::UnsubscribeWildcard { server, type_url } => {
                if let Some(conn) = state.connections.get(&server) {
                    conn.unsubscribe_wildcard(type_url);
                }
            }
            Action::Close { server } => {
                if let Some(conn) = state.connections.remove(&server) {
                    let name = state.federation.registry().name(server);
                    tracing::info!(server = %name, "closing the stream to a lower-priority server");
                    conn.shutdown();
                }
            }
            other => apply_to_cache(&self.cache, &state.federation, other, policy),
        }
    }

    /// Hands the connection to `server` the copy of `key` from the state
    /// directory, if that server sent it (by server identity), so that its
    /// first delta request claims the version and the server need not send
    /// an unchanged resource again.
    fn resume_from_disk(
        &self,
        state: &State,
        server: ServerId,
        key: &ResourceKey,
        conn: &dyn SourceConnection,
    ) {
        let Some(copy) = self.cache.disk_copy(key) else {
            return;
        };
        let registry = state.federation.registry();
        if xdsfed_core::state_dir::claim::sent_by(registry, &copy.server, server) {
            conn.resume(key.clone(), copy.version, copy.resource);
        }
    }

    /// The connection to `id`, opened on first use.
    fn connection(&self, state: &mut State, id: ServerId) -> Option<Arc<dyn SourceConnection>> {
        if let Some(conn) = state.connections.get(&id) {
            return Some(Arc::clone(conn));
        }
        let server = state.federation.server_config(id)?.clone();
        let registry = state.federation.registry();
        let sink = Arc::new(RouterSink {
            client: Weak::clone(&self.this),
            server: id,
            policy: DataErrorPolicy::from_features(&server.server_features),
        });
        let opening = Opening {
            server,
            authorities: authority_filter(registry, id),
            authority_names: registry.authorities_for(id).map(str::to_owned).collect(),
            types: Arc::clone(&self.types),
            sink,
            options: self.transport.clone(),
        };
        let _enter = self.runtime.enter();
        let conn = crate::source::open(opening);
        state.connections.insert(id, Arc::clone(&conn));
        Some(conn)
    }

    /// One server's events, through the federation core into the cache,
    /// under the lock so that they cannot interleave with another server's.
    fn deliver(&self, server: ServerId, policy: DataErrorPolicy, events: Vec<CoreEvent>) {
        let mut state = self.lock();
        self.note_answered(state.federation.registry().name(server), &events);
        state
            .federation
            .handle_events(server, events, self.cache.as_ref());
        self.run(&mut state, policy);
    }
}

/// The authorities whose names the server `id` may deliver.
fn authority_filter(registry: &AuthorityRegistry, id: ServerId) -> AuthorityFilter {
    // A server the bootstrap does not list was named by a ConfigSource
    // beside a name (`XdsClient::watch_on_server`), which authorised
    // the names sent to it; it is asked for nothing else, and a session
    // ignores what it did not ask for.
    if !registry.in_bootstrap(id) {
        return AuthorityFilter::any();
    }
    let mut filter = AuthorityFilter::new().with_old_style(registry.serves_old_style(id));
    for authority in registry.authorities_for(id) {
        filter = filter.with_authority(authority);
    }
    filter
}

impl Inner {
    /// Tells the cache whether the stream of the server named `server` has
    /// delivered a response (only then may the does-not-exist timer drop a
    /// copy from the state directory). Set before the events are applied,
    /// so a timer in the same batch as the first response sees it.
    fn note_answered(&self, server: &Arc<str>, events: &[CoreEvent]) {
        for event in events {
            let answered = match event {
                CoreEvent::StreamHealthy => true,
                CoreEvent::StreamFailed { .. } => false,
                _ => continue,
            };
            self.cache.set_answered(server, answered);
        }
    }
}

impl Release for Inner {
    fn release(&self, key: &ResourceKey) {
        let mut state = self.lock();
        self.cache.remove_watcher(key);
        state.federation.unwatch(key);
        self.run(&mut state, DataErrorPolicy::default());
    }

    fn release_wildcard(&self, type_url: &str, queue: &Arc<WildcardQueue>) {
        let mut state = self.lock();
        self.cache.remove_wildcard(type_url, queue);
        state.federation.unwatch_wildcard(type_url);
        self.run(&mut state, DataErrorPolicy::default());
    }
}

/// Feeds one server's events through the federation core into the cache.
/// Holds the client weakly: the client owns the connections, not the other
/// way round.
struct RouterSink {
    client: Weak<Inner>,
    server: ServerId,
    policy: DataErrorPolicy,
}

impl EventSink for RouterSink {
    fn deliver(&self, _server: &ServerConfig, events: Vec<CoreEvent>) {
        if let Some(client) = self.client.upgrade() {
            client.deliver(self.server, self.policy, events);
        }
    }
}

/// Applies an action about the cache: deliveries, errors, list members,
/// entries held for list collections. `policy` is that of the server whose
/// events are being applied.
pub(crate) fn apply_to_cache(
    cache: &Cache,
    federation: &Federation,
    action: Action,
    policy: DataErrorPolicy,
) {
    match action {
        Action::Unrouted { server, event } => cache.apply(&server, policy, vec![event]),
        Action::DataError { key, error } => {
            let server: Arc<str> = Arc::from(error.server().unwrap_or(""));
            tracing::warn!(resource = %key, %error, "answer refused");
            cache.data_error(&key, &server, error);
        }
        Action::Transient { key, error } => cache.transient_error(&key, &error),
        Action::StreamFailedUnwatched { server, error } => {
            cache.stream_failed_unwatched(&server, &error);
        }
        Action::StreamHealthy { server } => cache.stream_healthy(&server),
        Action::ListMembers {
            collection,
            members,
        } => cache.set_list_members(&collection, members),
        Action::ForgetList { collection } => cache.forget_list(&collection),
        Action::HoldEntry { key, server } => hold_entry(cache, federation, &key, server),
        Action::ReleaseEntry { key } => cache.remove_watcher(&key),
        Action::Deliver { event, source } => {
            cache.apply_routed(policy, &mut vec![(event, source)]);
        }
        Action::Subscribe { .. }
        | Action::Unsubscribe { .. }
        | Action::ForgetVersion { .. }
        | Action::SubscribeWildcard { .. }
        | Action::UnsubscribeWildcard { .. }
        | Action::Close { .. } => {}
    }
}

/// An entry for a list collection's member, fetched from `server`.
fn hold_entry(cache: &Cache, federation: &Federation, key: &ResourceKey, server: Option<ServerId>) {
    let config = server.and_then(|s| federation.server_config(s));
    let provenance = Provenance {
        authority: xdsfed_core::name::authority_of(&key.name).map(Arc::from),
        server: server.map_or_else(
            || Arc::from(""),
            |s| Arc::clone(federation.registry().name(s)),
        ),
    };
    let policy = config
        .map(|c| DataErrorPolicy::from_features(&c.server_features))
        .unwrap_or_default();
    let _ = cache.add_watcher(key, provenance, policy);
}

/// The room of a batch's deliveries, empty, kept from one response to the
/// next: a response of a dozen resources needed a list of a few kilobytes,
/// and the allocator made each such request (past its small sizes) sweep
/// the small blocks freed since, a sizeable part of a churn's cost.
#[derive(Default)]
pub(super) struct Spare(Vec<(CoreEvent, Source)>);

impl Spare {
    /// Up to how many deliveries' room is kept: a cold start's batch of a
    /// million is not held for good.
    const MOST: usize = 1024;

    fn of(mut routed: Vec<(CoreEvent, Source)>) -> Self {
        routed.clear();
        if routed.capacity() > Self::MOST {
            routed = Vec::new();
        }
        Spare(routed)
    }
}

/// Deliveries, or events no entry reads, gathered to go to the cache at once.
struct Batch {
    routed: Vec<(CoreEvent, Source)>,
    unrouted: Option<(Arc<str>, Vec<CoreEvent>)>,
}

impl Batch {
    /// Takes `action` into the batch if it belongs there; otherwise gives
    /// it back. A delivery after unrouted events (or the reverse, or events
    /// of another server) flushes what is gathered first, keeping the order.
    fn take(&mut self, action: Action) -> Option<Action> {
        match action {
            Action::Deliver { event, source } if self.unrouted.is_none() => {
                self.routed.push((event, source));
                None
            }
            Action::Unrouted { server, event } if self.routed.is_empty() => {
                match &mut self.unrouted {
                    Some((batch_server, events)) if *batch_server == server => {
                        events.push(event);
                        None
                    }
                    Some(_) => Some(Action::Unrouted { server, event }),
                    None => {
                        self.unrouted = Some((server, vec![event]));
                        None
                    }
                }
            }
            other => Some(other),
        }
    }

    fn flush(&mut self, cache: &Cache, policy: DataErrorPolicy) {
        if !self.routed.is_empty() {
            cache.apply_routed(policy, &mut self.routed);
        }
        if let Some((server, events)) = self.unrouted.take() {
            cache.apply(&server, policy, events);
        }
    }
}
