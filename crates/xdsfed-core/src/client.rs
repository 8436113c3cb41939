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

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

use envoy_types::pb::envoy::config::core::v3::Node;

use crate::authority::{AuthorityError, AuthorityRegistry, ServerKey};
use crate::bootstrap::{Bootstrap, ServerConfig};
use crate::cache::{Cache, DataErrorPolicy, Provenance, WildcardQueue};
use crate::name::{NameError, ResourceName};
use crate::protocol::{AuthorityFilter, CoreEvent, ResourceKey};
use crate::status::{ClientStatus, ServerStatus, resources_of};
use crate::transport::{AdsConnection, EventSink, TransportOptions};
use crate::types::{ResourceType, TypeRegistry};
use crate::watch::{Guard, Release, Watch, WildcardGuard, WildcardWatch};

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
}

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
                state: Mutex::new(State::default()),
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
    /// Connections and who is subscribed where. One lock over both, so a
    /// subscribe and an unsubscribe of the same key cannot cross on the wire.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    connections: HashMap<ServerKey, AdsConnection>,
    /// The connection each subscribed key is on.
    subscribed: HashMap<ResourceKey, ServerKey>,
    /// The connection each wildcard type is on.
    wildcard: HashMap<&'static str, ServerKey>,
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
        }
    }

    /// Watches the resource `name` of type `T`.
    ///
    /// `name` is an `xdstp://` name of `T`'s type (or an old-style name). The
    /// watch fails at once when the name is malformed, is of another type, or
    /// names an authority the bootstrap does not know; the client never sends
    /// a name to a server that does not serve its authority.
    pub fn watch<T: ResourceType>(&self, name: &str) -> Result<Watch<T>, WatchError> {
        let parsed = self.inner.parse::<T>(name)?;
        let (server_key, server) = self.inner.server_for(&parsed)?;
        Ok(self.inner.start_watch::<T>(&parsed, server_key, &server))
    }

    /// Watches `name` on `server`, whatever the bootstrap maps its authority
    /// to: for names found next to a ConfigSource that lists their authority
    /// and names its own server (xDS TP1). That ConfigSource is the
    /// authorisation to send the name there.
    pub fn watch_on_server<T: ResourceType>(
        &self,
        name: &str,
        server: &ServerConfig,
    ) -> Result<Watch<T>, WatchError> {
        let parsed = self.inner.parse::<T>(name)?;
        Ok(self
            .inner
            .start_watch::<T>(&parsed, ServerKey::new(server), server))
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
        Ok(WildcardWatch {
            guard: WildcardGuard {
                owner,
                type_url: T::TYPE_URL,
                queue,
            },
            cache: Arc::clone(&self.inner.cache),
            _type: PhantomData,
        })
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
                    foreign_resources_ignored: stats.foreign_names_ignored,
                    variant: format!("{:?}", stats.variant).to_lowercase(),
                }
            })
            .collect();
        servers.sort_by(|a, b| a.server.cmp(&b.server));
        ClientStatus {
            node_id: self.inner.node.id.clone(),
            resources,
            servers,
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

    fn start_watch<T: ResourceType>(
        self: &Arc<Self>,
        parsed: &ResourceName,
        server_key: ServerKey,
        server: &ServerConfig,
    ) -> Watch<T> {
        let key = ResourceKey::new(T::TYPE_URL, parsed.canonical().as_ref());
        let provenance = Provenance {
            authority: parsed.authority().map(Arc::from),
            server: Arc::from(server_key.to_string()),
        };
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.lock();
        let (rx, first) = self.cache.add_watcher(&key, provenance.clone(), policy);
        if first {
            let conn = self.connection(&mut state, &server_key, server);
            conn.subscribe(key.clone());
            state.subscribed.insert(key.clone(), server_key);
        }
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(self) as Arc<dyn Release>;
        Watch::new(rx, Arc::new(Guard { owner, key }), provenance)
    }

    fn server_for(&self, name: &ResourceName) -> Result<(ServerKey, ServerConfig), AuthorityError> {
        let servers = self.registry.resolve(name)?;
        // Servers are in priority order; fallback (gRFC A71) is not chosen here.
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
        &self,
        state: &mut State,
        key: &ServerKey,
        server: &ServerConfig,
    ) -> AdsConnection {
        if let Some(conn) = state.connections.get(key) {
            return conn.clone();
        }
        let sink = Arc::new(CacheSink {
            cache: Arc::clone(&self.cache),
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
        if self.cache.remove_watcher(key)
            && let Some(server) = state.subscribed.remove(key)
            && let Some(conn) = state.connections.get(&server)
        {
            conn.unsubscribe(key.clone());
        }
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

/// Feeds one server's events into the cache.
struct CacheSink {
    cache: Arc<Cache>,
    server: Arc<str>,
    policy: DataErrorPolicy,
}

impl EventSink for CacheSink {
    fn deliver(&self, _server: &ServerConfig, events: Vec<CoreEvent>) {
        self.cache.apply(&self.server, self.policy, events);
    }
}
