//! The client: watches by name, one ADS stream per server, one cache.
//!
//! ```text
//! watch::<T>(name) ─► parse + check type ─► authority ─► servers ─► ServerKey
//!                                                                    │
//!      Watch<T> ◄── cache entry (latest value) ◄── CacheSink ◄── AdsConnection
//! ```
//!
//! Authorities whose servers are equal ([`ServerKey`]) share one connection
//! and one ADS stream. A connection is opened by the first subscription for
//! its server; the transport closes an idle stream after a grace period.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use envoy_types::pb::envoy::config::core::v3::Node;

use crate::authority::{AuthorityError, AuthorityRegistry, Partition, ServerKey};
use crate::bootstrap::{ApiVariant, Bootstrap, ServerConfig};
use crate::cache::short_type;
use crate::cache::{Cache, DataErrorPolicy, Provenance, Source, WildcardQueue};
use crate::error::{ErrorKind, XdsError};
use crate::name::{NameError, ResourceName};
use crate::protocol::{AuthorityFilter, CoreEvent, ResourceKey, glob_of};
use crate::status::{AuthorityStatus, ClientStatus, ServerStatus, resources_of};
use crate::transport::{AdsConnection, EventSink, TransportOptions};
use crate::types::{
    Decoded, ListCollection, ListEntry, ResourceType, TypeRegistry, anonymous_key, entry_key,
};
use crate::watch::{
    CollectionGuard, CollectionWatch, Guard, Release, Watch, WildcardGuard, WildcardWatch,
};

mod router;

use router::{Alt, AuthorityState, Fetch, Home, ListState, Route, State};

/// Why a watch could not be started.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The name is not a valid resource name, or not of the watched type.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The name's authority is not in the bootstrap.
    #[error(transparent)]
    Authority(#[from] AuthorityError),
    /// The type was not registered with the client.
    #[error("resource type {0} is not registered with this client")]
    UnknownType(&'static str),
    /// The name asks for something the client or its server cannot do
    /// (e.g. a glob collection over state-of-the-world xDS).
    #[error("{0}")]
    Unsupported(String),
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Clients spawn their streams on the current tokio runtime.
    #[error("XdsClient::build must be called inside a tokio runtime")]
    NoRuntime,
}

/// Builds an [`XdsClient`].
#[derive(Debug)]
pub struct XdsClientBuilder {
    bootstrap: Bootstrap,
    types: TypeRegistry,
    transport: TransportOptions,
    max_redirects: usize,
}

/// How many `ResourceLocator` redirects one resource may follow in a row
/// unless [`XdsClientBuilder::max_redirects`] says otherwise.
pub const DEFAULT_MAX_REDIRECTS: usize = 8;

impl XdsClientBuilder {
    /// Adds a resource type of the user's own; the four Envoy types are
    /// registered already.
    pub fn register<T: ResourceType>(mut self) -> Self {
        self.types.register::<T>();
        self
    }

    /// Replaces the transport options (timers, backoff, message size).
    pub fn transport_options(mut self, options: TransportOptions) -> Self {
        self.transport = options;
        self
    }

    /// Sets the does-not-exist timer (gRFC A57; 15 s by default).
    pub fn does_not_exist_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.transport.does_not_exist_timeout = timeout;
        self
    }

    /// Sets how many redirects (xDS TP1 `ResourceLocator`s) one resource may
    /// follow in a row ([`DEFAULT_MAX_REDIRECTS`] by default); a longer
    /// chain is an error naming it.
    pub fn max_redirects(mut self, hops: usize) -> Self {
        self.max_redirects = hops;
        self
    }

    /// Builds the client. Streams open lazily, on the first watch of each server.
    pub fn build(self) -> Result<XdsClient, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
        let node = self.bootstrap.node_proto();
        let mut transport = self.transport;
        transport.node = node.clone();
        Ok(XdsClient {
            inner: Arc::new(Inner {
                registry: AuthorityRegistry::new(&self.bootstrap),
                node,
                types: Arc::new(self.types),
                cache: Arc::new(Cache::new()),
                transport,
                runtime,
                state: Mutex::new(State {
                    max_redirects: self.max_redirects,
                    ..State::default()
                }),
            }),
        })
    }
}

/// A federated xDS client. Cheap to clone; clones share everything.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use xdsfed_core::bootstrap::Bootstrap;
/// use xdsfed_core::client::XdsClient;
/// use xdsfed_core::types::ListenerType;
///
/// let client = XdsClient::builder(Bootstrap::from_file("bootstrap.yaml")?).build()?;
/// let mut listener = client.watch::<ListenerType>("xdstp://cloud.example/envoy.config.listener.v3.Listener/frontend")?;
/// let first = listener.next().await;
/// println!("{}", client.status().to_json());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct XdsClient {
    inner: Arc<Inner>,
}

struct Inner {
    registry: AuthorityRegistry,
    node: Node,
    types: Arc<TypeRegistry>,
    cache: Arc<Cache>,
    transport: TransportOptions,
    runtime: tokio::runtime::Handle,
    /// Connections, authorities and who is subscribed where. One lock over
    /// all of it, so a subscribe and an unsubscribe of the same key cannot
    /// cross on the wire, and routing decisions see one consistent state.
    state: Mutex<State>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsClient")
            .field("node", &self.node.id)
            .finish_non_exhaustive()
    }
}

impl XdsClient {
    /// Starts building a client for `bootstrap`.
    pub fn builder(bootstrap: Bootstrap) -> XdsClientBuilder {
        XdsClientBuilder {
            bootstrap,
            types: TypeRegistry::with_builtin(),
            transport: TransportOptions::default(),
            max_redirects: DEFAULT_MAX_REDIRECTS,
        }
    }

    /// Watches the resource `name` of type `T`.
    ///
    /// `name` is an `xdstp://` name of `T`'s type (or an old-style name). The
    /// watch fails at once when the name is malformed, is of another type, or
    /// names an authority the bootstrap does not know; the client never sends
    /// a name to a server that does not serve its authority.
    pub fn watch<T: ResourceType>(&self, name: &str) -> Result<Watch<T>, WatchError> {
        if let Ok(parsed) = ResourceName::parse_user_supplied(name)
            && let Some(entry) = parsed.as_xdstp().and_then(|n| n.directives().entry())
        {
            return self.watch_entry::<T>(&parsed, entry);
        }
        let parsed = self.inner.parse::<T>(name)?;
        let (server_key, server) = self.inner.server_for(&parsed)?;
        let home = Home::Authority(Partition::of(&parsed));
        self.inner
            .start_watch::<T>(&parsed, home, &server_key, &server)
    }

    /// Watches `name` on `server`, whatever the bootstrap maps its authority
    /// to: for names found next to a ConfigSource that lists their authority
    /// and names its own server (xDS TP1). That ConfigSource is the
    /// authorisation to send the name there. There is no server fallback:
    /// the ConfigSource names one server.
    pub fn watch_on_server<T: ResourceType>(
        &self,
        name: &str,
        server: &ServerConfig,
    ) -> Result<Watch<T>, WatchError> {
        let parsed = self.inner.parse::<T>(name)?;
        let key = ServerKey::new(server);
        let home = Home::Server(key.clone(), Box::new(server.clone()));
        self.inner.start_watch::<T>(&parsed, home, &key, server)
    }

    /// Watches the glob collection `glob` (xDS TP1 §Glob), e.g.
    /// `xdstp://a/envoy.config.listener.v3.Listener/edge/*?region=eu`: its
    /// members are the resources of type `T` directly under `edge/` with
    /// exactly its context parameters. Glob collections need delta xDS: a
    /// server pinned to state-of-the-world is refused.
    pub fn watch_collection<T: ResourceType>(
        &self,
        glob: &str,
    ) -> Result<CollectionWatch<T>, WatchError> {
        let parsed = self.inner.parse::<T>(glob)?;
        if !parsed.as_xdstp().is_some_and(|n| n.is_glob()) {
            return Err(WatchError::Unsupported(format!(
                "{glob} is not a glob collection (xdstp://authority/type/path/*)"
            )));
        }
        let (server_key, server) = self.inner.server_for(&parsed)?;
        if let Some(sotw) = self
            .inner
            .registry
            .resolve(&parsed)?
            .iter()
            .find(|s| s.api == ApiVariant::Sotw && s.api_pinned)
        {
            return Err(WatchError::Unsupported(format!(
                "glob collection {glob}: server {} speaks state-of-the-world xDS, and glob collections need delta xDS (xDS TP1)",
                sotw.server_uri
            )));
        }
        let key = ResourceKey::new(T::TYPE_URL, parsed.canonical().as_ref());
        // The queue first, so no member arriving after the subscription is missed.
        let queue = self.inner.cache.add_collection(&key);
        let collection = CollectionGuard {
            cache: Arc::clone(&self.inner.cache),
            glob: key,
            queue,
        };
        let home = Home::Authority(Partition::of(&parsed));
        let glob = self
            .inner
            .start_watch::<T>(&parsed, home, &server_key, &server)?;
        Ok(CollectionWatch::new(collection, glob))
    }

    /// Watches the list collection `name` (xDS TP1 §List collections), e.g.
    /// `xdstp://a/envoy.config.listener.v3.ListenerCollection/foo` for
    /// `T` = [`ListenerType`](crate::types::ListenerType): the collection is
    /// fetched, its `locator` entries are fetched as resources of their own
    /// (on any authority of the bootstrap) and its `inline_entry` resources
    /// are used as they are. Members are reported by key: a locator's
    /// target, `name#entry=<entry>` for a named inline entry (which
    /// [`XdsClient::watch`] accepts too), and `name#anonymous=<index>` for an
    /// anonymous one (not watchable on its own). The collection may be
    /// redirected (TP1). The type's list collection must be registered
    /// ([`TypeRegistry::register_list_collection`]; listeners' and
    /// clusters' are).
    pub fn watch_list_collection<T: ResourceType>(
        &self,
        name: &str,
    ) -> Result<CollectionWatch<T>, WatchError> {
        let (parsed, key) = self.inner.parse_list::<T>(name)?;
        if parsed
            .as_xdstp()
            .is_some_and(|n| !n.directives().is_empty())
        {
            return Err(WatchError::Unsupported(format!(
                "list collection {name}: directives (#alt, #entry) do not apply to a collection watch"
            )));
        }
        let queue = self.inner.cache.add_collection(&key);
        let collection = CollectionGuard {
            cache: Arc::clone(&self.inner.cache),
            glob: key.clone(),
            queue,
        };
        let glob = self.inner.start_list::<T>(&key)?;
        Ok(CollectionWatch::new(collection, glob))
    }

    /// Watches the inline entry `entry` of a list collection
    /// (`…Collection/foo#entry=bar`): the collection is watched for it.
    fn watch_entry<T: ResourceType>(
        &self,
        parsed: &ResourceName,
        entry: &str,
    ) -> Result<Watch<T>, WatchError> {
        let (parsed, collection) = self.inner.parse_list::<T>(&parsed.to_string())?;
        let held = self.inner.start_list::<T>(&collection)?.into_guard();
        let key = ResourceKey::new(T::TYPE_URL, entry_key(&collection.name, entry));
        let (server_key, server) = self.inner.server_for(&parsed)?;
        let provenance = Provenance {
            authority: parsed.authority().map(Arc::from),
            server: Arc::from(server_key.to_string()),
        };
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.inner.lock();
        let (rx, _) = self
            .inner
            .cache
            .add_watcher(&key, provenance.clone(), policy);
        if let Some(list) = state.lists.get_mut(&collection) {
            list.wanted.insert(key.clone());
        }
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(&self.inner) as Arc<dyn Release>;
        Ok(Watch::new(
            rx,
            Arc::new(Guard {
                owner,
                key,
                holds: Some(held),
            }),
            provenance,
        ))
    }

    /// Watches every resource of type `T` on the default servers (wildcard
    /// LDS/CDS, as Envoy does).
    pub fn watch_wildcard<T: ResourceType>(&self) -> Result<WildcardWatch<T>, WatchError> {
        if self.inner.types.get(T::TYPE_URL).is_none() {
            return Err(WatchError::UnknownType(T::TYPE_URL));
        }
        let (server_key, server) = self.inner.default_server()?;
        let provenance = Provenance {
            authority: None,
            server: Arc::from(server_key.to_string()),
        };
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.inner.lock();
        let (queue, first) = self
            .inner
            .cache
            .add_wildcard(T::TYPE_URL, provenance, policy);
        if first {
            let conn = self.inner.connection(&mut state, &server_key, &server);
            conn.subscribe_wildcard(T::TYPE_URL);
            state.wildcard.insert(T::TYPE_URL, server_key);
        }
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(&self.inner) as Arc<dyn Release>;
        Ok(WildcardWatch::new(
            WildcardGuard {
                owner,
                type_url: T::TYPE_URL,
                queue,
            },
            Arc::clone(&self.inner.cache),
        ))
    }

    /// A CSDS-style dump of every resource and every server connection.
    pub fn status(&self) -> ClientStatus {
        let resources = resources_of(&self.inner.cache);
        let state = self.inner.lock();
        let mut servers: Vec<ServerStatus> = state
            .connections
            .iter()
            .map(|(key, conn)| {
                let stats = conn.stats();
                ServerStatus {
                    server: key.to_string(),
                    connected: stats.connected,
                    server_failure: stats.server_failure,
                    resource_updates_valid: stats.resource_updates_valid,
                    resource_updates_invalid: stats.resource_updates_invalid,
                    resource_updates_by_type: stats.updates_by_type,
                    foreign_resources_ignored: stats.foreign_names_ignored,
                    variant: format!("{:?}", stats.variant).to_lowercase(),
                    answered_types: stats.answered_types.into_iter().collect(),
                }
            })
            .collect();
        servers.sort_by(|a, b| a.server.cmp(&b.server));
        let mut authorities: Vec<AuthorityStatus> = state
            .authorities
            .iter()
            .map(|(partition, a)| AuthorityStatus {
                authority: match partition {
                    Partition::Authority(name) => Some(name.clone()),
                    Partition::OldStyle => None,
                },
                servers: a.servers.iter().map(|(k, _)| k.to_string()).collect(),
                active: a
                    .servers
                    .get(a.active)
                    .map(|(k, _)| k.to_string())
                    .unwrap_or_default(),
                on_fallback: a.active > 0,
            })
            .collect();
        authorities.sort_by(|a, b| a.authority.cmp(&b.authority));
        ClientStatus {
            node_id: self.inner.node.id.clone(),
            resources,
            servers,
            authorities,
        }
    }

    /// The node the client presents to servers.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    /// The authority registry built from the bootstrap.
    pub fn registry(&self) -> &AuthorityRegistry {
        &self.inner.registry
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn parse<T: ResourceType>(&self, name: &str) -> Result<ResourceName, WatchError> {
        if self.types.get(T::TYPE_URL).is_none() {
            return Err(WatchError::UnknownType(T::TYPE_URL));
        }
        let parsed = ResourceName::parse_user_supplied(name)?;
        parsed.check_type(T::TYPE_URL)?;
        Ok(parsed)
    }

    /// Parses a list collection name of `T`s: its name and cache key.
    fn parse_list<T: ResourceType>(
        &self,
        name: &str,
    ) -> Result<(ResourceName, ResourceKey), WatchError> {
        let Some(collection_type) = self.types.list_collection_of(T::TYPE_URL) else {
            return Err(WatchError::Unsupported(format!(
                "{name}: no list collection type is registered for {}",
                T::TYPE_URL
            )));
        };
        let parsed = ResourceName::parse_user_supplied(name)?;
        if parsed.as_xdstp().is_none_or(|n| n.is_glob()) {
            return Err(WatchError::Unsupported(format!(
                "{name} is not a list collection (xdstp://authority/<type>Collection/id)"
            )));
        }
        parsed.check_type(collection_type)?;
        let key = ResourceKey::new(collection_type, parsed.canonical().as_ref());
        Ok((parsed, key))
    }

    /// Watches the list collection `key` of `T`s.
    fn start_list<T: ResourceType>(
        self: &Arc<Self>,
        key: &ResourceKey,
    ) -> Result<Watch<T>, WatchError> {
        // From the key: the collection is watched as itself, without
        // directives.
        let parsed = ResourceName::parse(&key.name)?;
        let (server_key, server) = self.server_for(&parsed)?;
        let home = Home::Authority(Partition::of(&parsed));
        let type_url: &'static str = self
            .types
            .get(&key.type_url)
            .map(|t| t.type_url())
            .ok_or(WatchError::UnknownType(T::TYPE_URL))?;
        self.start_watch_as::<T>(type_url, &parsed, home, &server_key, &server)
    }

    fn start_watch<T: ResourceType>(
        self: &Arc<Self>,
        parsed: &ResourceName,
        home: Home,
        server_key: &ServerKey,
        server: &ServerConfig,
    ) -> Result<Watch<T>, WatchError> {
        self.start_watch_as::<T>(T::TYPE_URL, parsed, home, server_key, server)
    }

    /// [`Self::start_watch`] of `parsed` as `type_url`: `T`'s own, or the
    /// type of its list collection (whose members are `T`s).
    fn start_watch_as<T: ResourceType>(
        self: &Arc<Self>,
        type_url: &'static str,
        parsed: &ResourceName,
        home: Home,
        server_key: &ServerKey,
        server: &ServerConfig,
    ) -> Result<Watch<T>, WatchError> {
        let key = ResourceKey::new(type_url, parsed.canonical().as_ref());
        let alt = self.alt_of(type_url, parsed)?;
        let provenance = Provenance {
            authority: parsed.authority().map(Arc::from),
            server: Arc::from(server_key.to_string()),
        };
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.lock();
        if let Home::Authority(partition) = &home {
            self.ensure_authority(&mut state, partition, parsed)?;
        }
        let (rx, first) = self.cache.add_watcher(&key, provenance.clone(), policy);
        if type_url != T::TYPE_URL {
            state
                .lists
                .entry(key.clone())
                .or_insert_with(|| ListState::new(T::TYPE_URL));
        }
        if first {
            state.routes.insert(
                key.clone(),
                Route {
                    primary: key.clone(),
                    alt: alt.map(|key| Alt { key, active: false }),
                },
            );
            self.fetch(&mut state, key.clone(), home, key.clone());
        } else if let Some(alt) = alt
            && let Some(route) = state.routes.get_mut(&key)
            && route.alt.is_none()
        {
            // The first watch that names an alternative gives the entry one.
            route.alt = Some(Alt {
                key: alt,
                active: false,
            });
        }
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(self) as Arc<dyn Release>;
        Ok(Watch::new(
            rx,
            Arc::new(Guard {
                owner,
                key,
                holds: None,
            }),
            provenance,
        ))
    }

    /// The `#alt` alternative of `parsed`, checked: same type, an authority
    /// of the bootstrap.
    fn alt_of(
        &self,
        type_url: &'static str,
        parsed: &ResourceName,
    ) -> Result<Option<ResourceKey>, WatchError> {
        let Some(alt) = parsed.as_xdstp().and_then(|n| n.directives().alt()) else {
            return Ok(None);
        };
        alt.check_type(type_url)?;
        let alt_name = ResourceName::Xdstp(alt.clone());
        self.registry.resolve(&alt_name)?;
        Ok(Some(ResourceKey::new(type_url, alt.canonical())))
    }

    /// Makes sure the routing state knows `partition`'s servers.
    fn ensure_authority(
        &self,
        state: &mut State,
        partition: &Partition,
        name: &ResourceName,
    ) -> Result<(), AuthorityError> {
        if state.authorities.contains_key(partition) {
            return Ok(());
        }
        let servers: Vec<(ServerKey, ServerConfig)> = self
            .registry
            .resolve(name)?
            .iter()
            .map(|s| (ServerKey::new(s), s.clone()))
            .collect();
        if servers.is_empty() {
            return Err(AuthorityError::no_servers(name));
        }
        state
            .authorities
            .insert(partition.clone(), AuthorityState::new(servers));
        Ok(())
    }

    /// Subscribes `key` for `reader`, on the servers of its home (once per
    /// key, whoever reads it).
    fn fetch(
        self: &Arc<Self>,
        state: &mut State,
        key: ResourceKey,
        home: Home,
        reader: ResourceKey,
    ) {
        if let Some(fetch) = state.fetches.get_mut(&key) {
            fetch.readers.insert(reader);
            return;
        }
        let servers: Vec<(ServerKey, ServerConfig)> = match &home {
            Home::Authority(partition) => match state.authorities.get_mut(partition) {
                Some(authority) => {
                    authority.keys.insert(key.clone());
                    authority.subscribed_on().cloned().collect()
                }
                None => Vec::new(),
            },
            Home::Server(server_key, server) => vec![(server_key.clone(), (**server).clone())],
        };
        for (server_key, server) in &servers {
            self.connection(state, server_key, server)
                .subscribe(key.clone());
        }
        state.fetches.insert(
            key,
            Fetch {
                home,
                readers: [reader].into_iter().collect(),
            },
        );
    }

    /// Gives back `reader`'s use of `key`; the last reader unsubscribes it.
    fn unfetch(&self, state: &mut State, key: &ResourceKey, reader: &ResourceKey) {
        let Some(fetch) = state.fetches.get_mut(key) else {
            return;
        };
        fetch.readers.remove(reader);
        if !fetch.readers.is_empty() {
            return;
        }
        let Some(fetch) = state.fetches.remove(key) else {
            return;
        };
        let servers: Vec<ServerKey> = match fetch.home {
            Home::Authority(partition) => match state.authorities.get_mut(&partition) {
                Some(authority) => {
                    authority.keys.remove(key);
                    authority.subscribed_on().map(|(k, _)| k.clone()).collect()
                }
                None => Vec::new(),
            },
            Home::Server(server_key, _) => vec![server_key],
        };
        for server_key in servers {
            if let Some(conn) = state.connections.get(&server_key) {
                conn.unsubscribe(key.clone());
            }
        }
    }

    /// The home of a key fetched for routing (an `#alt` target).
    fn home_of(&self, state: &mut State, key: &ResourceKey) -> Option<Home> {
        let name = ResourceName::parse(&key.name).ok()?;
        let partition = Partition::of(&name);
        self.ensure_authority(state, &partition, &name).ok()?;
        Some(Home::Authority(partition))
    }

    /// The home of a redirect target: its authority, which must be one of
    /// the bootstrap's (a server cannot send the client to a server the
    /// bootstrap does not trust).
    fn redirect_home(&self, state: &mut State, name: &str) -> Result<Home, String> {
        let name = ResourceName::parse(name).map_err(|e| e.to_string())?;
        let partition = Partition::of(&name);
        self.ensure_authority(state, &partition, &name)
            .map_err(|e| e.to_string())?;
        Ok(Home::Authority(partition))
    }

    /// Routes one server's events (see [`router`]) and applies them to the
    /// cache, under the lock so that routing and applying cannot interleave
    /// with another server's.
    fn deliver(
        self: &Arc<Self>,
        server_key: &ServerKey,
        server_name: &Arc<str>,
        policy: DataErrorPolicy,
        events: Vec<CoreEvent>,
    ) {
        let mut state = self.lock();
        let cache = &self.cache;
        let fx = state.route(
            server_key,
            server_name,
            events,
            &|k| cache.is_answered(k),
            &|k| cache.has_copy(k),
        );
        for partition in &fx.fall_back {
            self.subscribe_on_active(&mut state, partition);
        }
        for (entry, alt) in &fx.start_alt {
            tracing::info!(resource = %entry, alt = %alt, "primary cannot deliver; using the #alt alternative");
            match self.home_of(&mut state, alt) {
                Some(home) => self.fetch(&mut state, alt.clone(), home, entry.clone()),
                None => tracing::warn!(alt = %alt, "the #alt alternative has no servers"),
            }
        }
        for (entry, hop) in &fx.unfollow {
            self.unfetch(&mut state, hop, entry);
        }
        let mut refused = fx.refused;
        let mut replayed = Vec::new();
        for follow in &fx.follow {
            match self.redirect_home(&mut state, &follow.hop.name) {
                Ok(home) => {
                    tracing::debug!(resource = %follow.entry, chain = %follow.chain, "following a redirect");
                    let fetched = state.fetches.contains_key(&follow.hop);
                    self.fetch(&mut state, follow.hop.clone(), home, follow.entry.clone());
                    // Already fetched for someone else: the server will not
                    // send it again, so the entry starts from the copy held.
                    if fetched
                        && let Some((resource, version, mut source)) = cache.copy_of(&follow.hop)
                    {
                        source.fetched_as = Arc::clone(&follow.hop.name);
                        source.redirected = true;
                        source.alt = false;
                        replayed.push((
                            CoreEvent::Upsert {
                                key: follow.entry.clone(),
                                resource,
                                version,
                                ttl: None,
                            },
                            source,
                        ));
                    }
                }
                Err(e) => {
                    // Not fetched, so not part of the chain.
                    if let Some(redirect) = state.redirects.get_mut(&follow.entry) {
                        redirect.hops.retain(|h| *h != follow.hop);
                    }
                    refused.push((
                        follow.entry.clone(),
                        XdsError::new(
                            ErrorKind::ServerError,
                            format!(
                                "{} {} redirected by server {} to {}: refused ({}): {e}",
                                short_type(&follow.entry.type_url),
                                follow.entry.name,
                                follow.server,
                                follow.hop.name,
                                follow.chain
                            ),
                        ),
                    ));
                }
            }
        }
        for (entry, alt) in &fx.stop_alt {
            tracing::info!(resource = %entry, alt = %alt, "primary delivers again; leaving the #alt alternative");
            self.unfetch(&mut state, alt, entry);
        }
        let mut routed = fx.routed;
        routed.extend(replayed);
        // List collections whose body changed (or went), to act on once the
        // cache holds the new body.
        let lists: Vec<(ResourceKey, Option<Decoded>, Source)> = routed
            .iter()
            .filter_map(|(event, source)| match event {
                CoreEvent::Upsert { key, resource, .. } if state.lists.contains_key(key) => {
                    Some((key.clone(), Some(resource.clone()), source.clone()))
                }
                CoreEvent::Removed { key, .. } if state.lists.contains_key(key) => {
                    Some((key.clone(), None, source.clone()))
                }
                _ => None,
            })
            .collect();
        if !routed.is_empty() {
            cache.apply_routed(policy, routed);
        }
        for (collection, body, source) in lists {
            self.update_list(&mut state, &collection, body.as_ref(), &source, policy);
        }
        if !fx.passthrough.is_empty() {
            cache.apply(server_name, policy, fx.passthrough);
        }
        for (entry, error) in refused {
            tracing::warn!(resource = %entry, %error, "answer refused");
            cache.data_error(&entry, server_name, policy, error);
        }
        if let Some(error) = &fx.failure {
            cache.transient_error(&fx.transient, error);
            cache.stream_failed_unwatched(server_name, error);
        }
        if fx.healthy {
            cache.stream_healthy(server_name);
        }
    }

    /// Acts on a new body of the watched list collection `collection`
    /// (`None`: it was deleted, so it has no members): locator members are
    /// watched on their own, inline ones are delivered under their keys, and
    /// members that left are let go. A body with the same bytes as the last
    /// one changes nothing.
    fn update_list(
        self: &Arc<Self>,
        state: &mut State,
        collection: &ResourceKey,
        body: Option<&Decoded>,
        source: &Source,
        policy: DataErrorPolicy,
    ) {
        let Some(list) = state.lists.get_mut(collection) else {
            return;
        };
        let raw = body.map(|b| b.raw().clone());
        if list.last == raw {
            return;
        }
        list.last = raw;
        let member_type = list.member_type;
        let body = match body.map(|b| b.downcast::<ListCollection>()) {
            Some(Some(c)) => Some(c),
            Some(None) => {
                tracing::warn!(%collection, "list collection body of an unexpected type");
                return;
            }
            None => None,
        };
        let entries: &[ListEntry] = body.as_ref().map_or(&[], |c| &c.entries);
        let mut locators: HashSet<ResourceKey> = HashSet::new();
        let mut inline: Vec<(CoreEvent, Source)> = Vec::new();
        let mut members: HashSet<ResourceKey> = HashSet::new();
        for (index, entry) in entries.iter().enumerate() {
            match entry {
                ListEntry::Locator(target) => {
                    let key = ResourceKey::new(member_type, Arc::clone(target));
                    members.insert(key.clone());
                    locators.insert(key);
                }
                ListEntry::Inline {
                    name,
                    version,
                    resource,
                } => {
                    let key = ResourceKey::new(
                        member_type,
                        match name {
                            Some(name) => entry_key(&collection.name, name),
                            None => anonymous_key(&collection.name, index),
                        },
                    );
                    members.insert(key.clone());
                    let mut source = source.clone();
                    source.fetched_as = Arc::clone(&collection.name);
                    inline.push((
                        CoreEvent::Upsert {
                            key,
                            resource: resource.clone(),
                            version: Arc::clone(version),
                            ttl: None,
                        },
                        source,
                    ));
                }
            }
        }
        // `#entry=` watches of entries the collection no longer has.
        let gone: Vec<(CoreEvent, Source)> = list
            .wanted
            .iter()
            .filter(|k| !members.contains(*k))
            .map(|k| {
                (
                    CoreEvent::Removed {
                        key: k.clone(),
                        reason: crate::protocol::RemovedReason::Deleted,
                    },
                    source.clone(),
                )
            })
            .collect();
        let joined: Vec<ResourceKey> = locators.difference(&list.locators).cloned().collect();
        let left: Vec<ResourceKey> = list.locators.difference(&locators).cloned().collect();
        list.locators = locators;
        self.cache.set_list_members(collection, members);
        if !inline.is_empty() || !gone.is_empty() {
            inline.extend(gone);
            self.cache.apply_routed(policy, inline);
        }
        for member in joined {
            self.watch_member(state, collection, &member);
        }
        for member in left {
            self.release_locked(state, &member);
        }
    }

    /// Watches the locator member `member` of `collection` for it, on the
    /// member's own authority (which must be in the bootstrap).
    fn watch_member(
        self: &Arc<Self>,
        state: &mut State,
        collection: &ResourceKey,
        member: &ResourceKey,
    ) {
        let parsed = match ResourceName::parse(&member.name) {
            Ok(parsed) => parsed,
            Err(e) => {
                tracing::warn!(%collection, %member, error = %e, "list collection member has an invalid name");
                return;
            }
        };
        let (server_key, server) = match self.server_for(&parsed) {
            Ok(found) => found,
            Err(e) => {
                // The member gets an entry, so the collection's watchers
                // hear why it is missing.
                let (_, _) = self.cache.add_watcher(
                    member,
                    Provenance {
                        authority: parsed.authority().map(Arc::from),
                        server: Arc::from(""),
                    },
                    DataErrorPolicy::default(),
                );
                self.cache.data_error(
                    member,
                    &Arc::from(""),
                    DataErrorPolicy::default(),
                    XdsError::new(
                        ErrorKind::ServerError,
                        format!(
                            "{} {} listed by list collection {}: refused: {e}",
                            short_type(&member.type_url),
                            member.name,
                            collection.name
                        ),
                    ),
                );
                return;
            }
        };
        let provenance = Provenance {
            authority: parsed.authority().map(Arc::from),
            server: Arc::from(server_key.to_string()),
        };
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let partition = Partition::of(&parsed);
        if let Err(e) = self.ensure_authority(state, &partition, &parsed) {
            tracing::warn!(%member, error = %e, "list collection member's authority has no servers");
            return;
        }
        let (_, first) = self.cache.add_watcher(member, provenance, policy);
        if first {
            state.routes.insert(
                member.clone(),
                Route {
                    primary: member.clone(),
                    alt: None,
                },
            );
            self.fetch(
                state,
                member.clone(),
                Home::Authority(partition),
                member.clone(),
            );
        }
    }

    /// gRFC A71: subscribes every fetch of `partition` on its (new) active
    /// server.
    fn subscribe_on_active(self: &Arc<Self>, state: &mut State, partition: &Partition) {
        let Some(authority) = state.authorities.get(partition) else {
            return;
        };
        let Some((server_key, server)) = authority.servers.get(authority.active).cloned() else {
            return;
        };
        let keys: Vec<ResourceKey> = authority.keys.iter().cloned().collect();
        tracing::warn!(%partition, server = %server_key, "falling back to the next server of the authority");
        let conn = self.connection(state, &server_key, &server);
        for key in keys {
            conn.subscribe(key);
        }
    }

    fn server_for(&self, name: &ResourceName) -> Result<(ServerKey, ServerConfig), AuthorityError> {
        let servers = self.registry.resolve(name)?;
        // The first server names the subscription in `Watch::provenance`;
        // which server serves is the router's choice (gRFC A71).
        let server = servers
            .first()
            .cloned()
            .ok_or_else(|| AuthorityError::no_servers(name))?;
        Ok((ServerKey::new(&server), server))
    }

    fn default_server(&self) -> Result<(ServerKey, ServerConfig), AuthorityError> {
        self.server_for(&ResourceName::OldStyle(String::new()))
    }

    fn connection(
        self: &Arc<Self>,
        state: &mut State,
        key: &ServerKey,
        server: &ServerConfig,
    ) -> AdsConnection {
        if let Some(conn) = state.connections.get(key) {
            return conn.clone();
        }
        let sink = Arc::new(RouterSink {
            client: Arc::downgrade(self),
            server_key: key.clone(),
            server: Arc::from(key.to_string()),
            policy: DataErrorPolicy::from_features(&server.server_features),
        });
        let filter = self.authority_filter(key);
        let _enter = self.runtime.enter();
        let conn = AdsConnection::spawn(
            server.clone(),
            filter,
            Arc::clone(&self.types),
            sink,
            self.transport.clone(),
        );
        state.connections.insert(key.clone(), conn.clone());
        conn
    }

    /// The authorities whose names this server may deliver.
    fn authority_filter(&self, key: &ServerKey) -> AuthorityFilter {
        let mut filter = AuthorityFilter::new().with_old_style(self.registry.serves_old_style(key));
        for authority in self.registry.authorities_for(key) {
            filter = filter.with_authority(authority);
        }
        filter
    }
}

impl Release for Inner {
    fn release(&self, key: &ResourceKey) {
        let mut state = self.lock();
        self.release_locked(&mut state, key);
    }

    fn release_wildcard(&self, type_url: &str, queue: &Arc<WildcardQueue>) {
        let mut state = self.lock();
        if self.cache.remove_wildcard(type_url, queue)
            && let Some(server) = state.wildcard.remove(type_url)
            && let Some(conn) = state.connections.get(&server)
        {
            conn.unsubscribe_wildcard(type_url);
        }
    }
}

impl Inner {
    /// Gives back one watcher of `key`; the last one unsubscribes what feeds
    /// it, and a list collection's last one lets its members go.
    fn release_locked(&self, state: &mut State, key: &ResourceKey) {
        for list in state.lists.values_mut() {
            list.wanted.remove(key);
        }
        if self.cache.remove_watcher(key)
            && let Some(route) = state.routes.remove(key)
        {
            self.unfetch(state, &route.primary, key);
            if let Some(alt) = route.alt.filter(|a| a.active) {
                self.unfetch(state, &alt.key, key);
            }
            // The redirects followed for it, or for members of it (a glob).
            let redirected: Vec<ResourceKey> = state
                .redirects
                .keys()
                .filter(|e| {
                    *e == key
                        || e.type_url == key.type_url
                            && glob_of(&e.name).is_some_and(|g| *g == *key.name)
                })
                .cloned()
                .collect();
            for entry in redirected {
                if let Some(redirect) = state.redirects.remove(&entry) {
                    for hop in redirect.hops {
                        self.unfetch(state, &hop, &entry);
                    }
                }
            }
            if let Some(list) = state.lists.remove(key) {
                self.cache.forget_list(key);
                for member in list.locators {
                    self.release_locked(state, &member);
                }
            }
        }
    }
}

/// Feeds one server's events through the router into the cache. Holds the
/// client weakly: the client owns the connections, not the other way round.
struct RouterSink {
    client: Weak<Inner>,
    server_key: ServerKey,
    server: Arc<str>,
    policy: DataErrorPolicy,
}

impl EventSink for RouterSink {
    fn deliver(&self, _server: &ServerConfig, events: Vec<CoreEvent>) {
        if let Some(client) = self.client.upgrade() {
            client.deliver(&self.server_key, &self.server, self.policy, events);
        }
    }
}
