//! The client: watches by name, one ADS stream per server, one cache.
//!
//! ```text
//! watch::<T>(name) ─► parse + check type ─► authority ─► servers ─► ServerId
//!                                                                    │
//!      Watch<T> ◄── cache entry (latest value) ◄── CacheSink ◄── AdsConnection
//! ```
//!
//! Authorities whose servers are equal
//! ([`ServerKey`](xdsfed_core::authority::ServerKey), interned as one
//! [`ServerId`]) share one connection and one ADS stream. A connection is opened by the first subscription for
//! its server; the transport closes an idle stream after a grace period.

use std::sync::{Arc, Mutex, Weak};
use xdsfed_core::hash::HashMap;

use envoy_types::pb::envoy::config::core::v3::Node;

use crate::cache::{Cache, DataErrorPolicy, Provenance, WildcardQueue};
use crate::status::resources_of;
use crate::transport::TransportOptions;
use crate::watch::{
    CollectionGuard, CollectionWatch, Guard, Release, Watch, WildcardGuard, WildcardWatch,
};
use xdsfed_core::authority::{AuthorityError, AuthorityRegistry, Partition, ServerId};
use xdsfed_core::bootstrap::{ApiVariant, Bootstrap, ServerConfig};
use xdsfed_core::federation::{Federation, Home};
use xdsfed_core::name::{NameError, ResourceName};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::status::{ClientStatus, ServerStatus};
use xdsfed_core::types::{ResourceType, TypeRegistry, entry_key};

mod executor;
mod own_thread;
mod start;

pub use own_thread::THREAD_NAME as OWN_THREAD_NAME;

pub(crate) use executor::apply_to_cache;

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
    /// Clients spawn their streams on the current tokio runtime, unless
    /// built with [`XdsClientBuilder::own_thread`].
    #[error("XdsClient::build must be called inside a tokio runtime")]
    NoRuntime,
    /// The client's [own thread](XdsClientBuilder::own_thread) or its
    /// runtime could not be started.
    #[error("the client's own thread could not start: {0}")]
    OwnThread(#[source] std::io::Error),
    /// The [state directory](XdsClientBuilder::state_dir) cannot be used:
    /// not a directory, not the process user's, writable by others, or
    /// impossible to create.
    #[error(transparent)]
    StateDir(#[from] crate::state_dir::StateDirError),
    /// The bootstrap names a server of a source kind this build of
    /// xdsfed-client left out (see the crate's features).
    #[error(
        "server {server:?} needs the `{feature}` feature of xdsfed-client, which this build leaves out"
    )]
    SourceKindNotBuilt {
        /// The server's URI.
        server: String,
        /// The cargo feature that builds its source kind.
        feature: &'static str,
    },
}

/// Builds an [`XdsClient`].
#[derive(Debug)]
pub struct XdsClientBuilder {
    bootstrap: Bootstrap,
    types: TypeRegistry,
    transport: TransportOptions,
    max_redirects: usize,
    state_dir: Option<std::path::PathBuf>,
    state_dir_max_bytes: u64,
    own_thread: bool,
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

    /// Keeps a last-known-good copy of every accepted resource in `dir`
    /// (created 0700 if missing), and loads the copies found there when the
    /// client is built, so they serve at once with status
    /// [`ResourceStatus::FromDisk`](crate::cache::ResourceStatus::FromDisk)
    /// and an ambient error until a server confirms or replaces them.
    /// [`build`](Self::build) fails ([`BuildError::StateDir`]) when `dir`
    /// is not a directory, is not owned by the process's user, or its
    /// group or others may write it (the records hold what servers sent).
    /// One client per directory. Dropping the client's last handle waits
    /// for the writes that are due (at most one per resource), not for
    /// failed ones waiting to be retried. See docs/client.md, "The state
    /// directory".
    pub fn state_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Bounds the state directory's records in total
    /// ([`DEFAULT_MAX_TOTAL_BYTES`](crate::state_dir::DEFAULT_MAX_TOTAL_BYTES),
    /// 1 GiB, by default); each record is bounded by
    /// [`TransportOptions::max_message_size`]. A copy over a bound is not
    /// persisted, and reported once.
    pub fn state_dir_max_bytes(mut self, bytes: u64) -> Self {
        self.state_dir_max_bytes = bytes;
        self
    }

    /// Runs the client's streams, their connections and timers on a thread
    /// of the client's own ([`OWN_THREAD_NAME`]), a single-threaded tokio
    /// runtime, instead of the runtime current at [`build`](Self::build);
    /// tasks spawned on [`XdsClient::runtime`], such as a resource graph's,
    /// run there too. [`build`](Self::build) then needs no runtime, and
    /// the thread ends when the client's last handle is dropped.
    ///
    /// Watches are read from any runtime or thread as before. What it
    /// saves: a response's tasks no longer move between the embedder's
    /// workers, which costs a client following a churning graph a sixth
    /// to a fifth of its CPU (docs/performance.md, "A thread of the
    /// client's own"); what it costs: a cold start's decoding and the
    /// graph no longer run side by side (a large cold start takes longer),
    /// and a test's paused clock does not reach the client's timers.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use xdsfed_client::{Bootstrap, XdsClient};
    ///
    /// let bootstrap = Bootstrap::from_json_str(
    ///     r#"{"xds_servers": [{"server_uri": "127.0.0.1:1",
    ///         "channel_creds": [{"type": "insecure"}]}]}"#,
    /// )?;
    /// // No tokio runtime here: the client brings its own thread.
    /// let client = XdsClient::builder(bootstrap).own_thread().build()?;
    /// drop(client); // and its thread ends
    /// # Ok(()) }
    /// ```
    pub fn own_thread(mut self) -> Self {
        self.own_thread = true;
        self
    }

    /// Builds the client. Streams open lazily, on the first watch of each
    /// server. With a [state directory](Self::state_dir), its records are
    /// read and validated first (blocking file IO, bounded by
    /// [`Self::state_dir_max_bytes`]).
    pub fn build(self) -> Result<XdsClient, BuildError> {
        crate::source::check_built(&self.bootstrap)?;
        let (runtime, own_thread) = if self.own_thread {
            let (handle, stop) = own_thread::start().map_err(BuildError::OwnThread)?;
            (handle, Some(stop))
        } else {
            let handle =
                tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime)?;
            (handle, None)
        };
        let node = self.bootstrap.node_proto();
        let mut transport = self.transport;
        transport.node = node.clone();
        let registry = AuthorityRegistry::new(&self.bootstrap);
        let federation = Federation::new(registry.clone(), self.max_redirects);
        let (cache, state_dir) = match &self.state_dir {
            Some(dir) => {
                let max_record = transport.max_message_size as u64;
                let opened =
                    crate::state_dir::open(dir, max_record, self.state_dir_max_bytes, &self.types)?;
                let cache = Cache::with_writer(opened.writer);
                for (record, decoded) in opened.loaded {
                    cache.insert_from_disk(&record, decoded);
                }
                (cache, Some(opened.counters))
            }
            None => (Cache::new(), None),
        };
        Ok(XdsClient {
            inner: Arc::new_cyclic(|this| Inner {
                this: Weak::clone(this),
                registry,
                node,
                types: Arc::new(self.types),
                cache: Arc::new(cache),
                state_dir,
                transport,
                runtime,
                _own_thread: own_thread,
                state: Mutex::new(State {
                    federation,
                    connections: HashMap::default(),
                    spare: executor::Spare::default(),
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
/// use xdsfed_client::XdsClient;
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
    /// The client itself, for the connections' sinks, which hold it weakly.
    this: Weak<Inner>,
    /// The bootstrap's registry. Its ids are the federation core's, whose
    /// copy also interns the servers ConfigSources name: ids that come
    /// out of the core are looked up there.
    registry: AuthorityRegistry,
    node: Node,
    types: Arc<TypeRegistry>,
    cache: Arc<Cache>,
    /// The state directory's counters, when the client has one.
    state_dir: Option<Arc<crate::state_dir::Counters>>,
    transport: TransportOptions,
    /// Where the client's streams run: the runtime current at build, or
    /// its own thread's.
    runtime: tokio::runtime::Handle,
    /// Ends the client's own thread, when it has one, once the client is
    /// dropped.
    _own_thread: Option<own_thread::Stop>,
    /// The federation core and the connections it drives. One lock over
    /// both, so a subscribe and an unsubscribe of the same key cannot cross
    /// on the wire, and the core's decisions are applied in the order made.
    state: Mutex<State>,
}

/// What the client's lock guards.
struct State {
    federation: Federation,
    /// By the ids of the federation core's registry.
    connections: HashMap<ServerId, Arc<dyn crate::source::SourceConnection>>,
    /// The room of the last batch of deliveries, kept for the next.
    spare: executor::Spare,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsClient")
            .field("node", &self.node.id)
            .finish_non_exhaustive()
    }
}

/// A handle on an [`XdsClient`] that does not keep it alive: for a
/// registry of shared clients, which must not hold them past their last
/// user.
#[derive(Clone, Debug)]
pub struct WeakXdsClient {
    inner: Weak<Inner>,
}

impl WeakXdsClient {
    /// The client, if a handle on it is still held somewhere.
    pub fn upgrade(&self) -> Option<XdsClient> {
        self.inner.upgrade().map(|inner| XdsClient { inner })
    }
}

impl XdsClient {
    /// Whether `self` and `other` are handles on the same client.
    pub fn ptr_eq(&self, other: &XdsClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The runtime the client's streams run on: the one current when it
    /// was built, or its [own thread](XdsClientBuilder::own_thread)'s.
    /// What follows the client (a resource graph's task) is spawned here,
    /// so that it runs beside the streams that feed it.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// A handle that does not keep this client alive.
    pub fn downgrade(&self) -> WeakXdsClient {
        WeakXdsClient {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Starts building a client for `bootstrap`.
    pub fn builder(bootstrap: Bootstrap) -> XdsClientBuilder {
        XdsClientBuilder {
            bootstrap,
            types: TypeRegistry::with_builtin(),
            transport: TransportOptions::default(),
            max_redirects: DEFAULT_MAX_REDIRECTS,
            state_dir: None,
            state_dir_max_bytes: crate::state_dir::DEFAULT_MAX_TOTAL_BYTES,
            own_thread: false,
        }
    }

    /// Watches the resource `name` of type `T`.
    ///
    /// `name` is an `xdstp://` name of `T`'s type (or an old-style name). The
    /// watch fails at once when the name is malformed, is of another type, or
    /// names an authority the bootstrap does not know; the client never sends
    /// a name to a server that does not serve its authority.
    pub fn watch<T: ResourceType>(&self, name: &str) -> Result<Watch<T>, WatchError> {
        self.watch_given::<T>(name, None)
    }

    /// [`watch`](Self::watch) of a name the caller holds shared (`given`,
    /// the same text as `name`): when it is already canonical, the client's
    /// key is that copy, not one more.
    pub(crate) fn watch_given<T: ResourceType>(
        &self,
        name: &str,
        given: Option<&Arc<str>>,
    ) -> Result<Watch<T>, WatchError> {
        let parsed = ResourceName::parse_user_supplied(name);
        if let Ok(parsed) = &parsed
            && let Some(entry) = parsed.as_xdstp().and_then(|n| n.directives().entry())
        {
            return self.watch_entry::<T>(parsed, entry);
        }
        // Parsed once: a graph of a hundred thousand clusters watches as
        // many names through here.
        let parsed = self.inner.checked::<T>(parsed)?;
        let (server_id, server) = self.inner.server_for(&parsed)?;
        let home = Home::Authority(Partition::of(&parsed));
        self.inner
            .start_watch::<T>(&parsed, home, server_id, server, given)
    }

    /// [`Self::watch_given`] for a member of a watch set, which reads the
    /// state through the cache: the subscription's guard and provenance.
    pub(crate) fn member_given<T: ResourceType>(
        &self,
        name: &str,
        given: Option<&Arc<str>>,
    ) -> Result<(Arc<Guard>, Provenance), WatchError> {
        let parsed = ResourceName::parse_user_supplied(name);
        if let Ok(parsed) = &parsed
            && let Some(entry) = parsed.as_xdstp().and_then(|n| n.directives().entry())
        {
            return self.watch_entry::<T>(parsed, entry).map(Watch::into_parts);
        }
        let parsed = self.inner.checked::<T>(parsed)?;
        let first = self.inner.server_for(&parsed)?;
        let home = Home::Authority(Partition::of(&parsed));
        self.inner.start_member::<T>(&parsed, home, first, given)
    }

    /// [`Self::watch_on_server_given`] for a member of a watch set.
    pub(crate) fn member_on_server_given<T: ResourceType>(
        &self,
        name: &str,
        server: &ServerConfig,
        given: Option<&Arc<str>>,
    ) -> Result<(Arc<Guard>, Provenance), WatchError> {
        let parsed = self.inner.parse::<T>(name)?;
        let id = self.inner.lock().federation.add_server(server)?;
        self.inner
            .start_member::<T>(&parsed, Home::Server(id), (id, server), given)
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
        self.watch_on_server_given::<T>(name, server, None)
    }

    /// [`watch_on_server`](Self::watch_on_server) of a name the caller
    /// holds shared, as [`watch_given`](Self::watch_given).
    pub(crate) fn watch_on_server_given<T: ResourceType>(
        &self,
        name: &str,
        server: &ServerConfig,
        given: Option<&Arc<str>>,
    ) -> Result<Watch<T>, WatchError> {
        let parsed = self.inner.parse::<T>(name)?;
        let id = self.inner.lock().federation.add_server(server)?;
        self.inner
            .start_watch::<T>(&parsed, Home::Server(id), id, server, given)
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
        let queue = Arc::new(WildcardQueue::default());
        let (key, glob) = self.subscribe_glob::<T>(glob, None, &queue)?;
        let collection = CollectionGuard {
            cache: Arc::clone(&self.inner.cache),
            glob: key,
            queue,
        };
        Ok(CollectionWatch::new(collection, glob))
    }

    /// Subscribes the glob collection `glob` as
    /// [`watch_collection`](Self::watch_collection) does, its changes
    /// queued on `queue`: its cache key and its own subscription. `given`
    /// is the caller's shared copy of the name, kept as the key when it is
    /// canonical. The caller detaches the queue
    /// ([`Cache::remove_collection`]) before it drops the subscription.
    pub(crate) fn subscribe_glob<T: ResourceType>(
        &self,
        glob: &str,
        given: Option<&Arc<str>>,
        queue: &Arc<WildcardQueue>,
    ) -> Result<(ResourceKey, Watch<T>), WatchError> {
        let parsed = self.inner.parse::<T>(glob)?;
        if !parsed.as_xdstp().is_some_and(|n| n.is_glob()) {
            return Err(WatchError::Unsupported(format!(
                "{glob} is not a glob collection (xdstp://authority/type/path/*)"
            )));
        }
        let (server_id, server) = self.inner.server_for(&parsed)?;
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
        let canonical = parsed.canonical();
        let name = match given {
            Some(given) if **given == *canonical => Arc::clone(given),
            _ => Arc::from(canonical.as_ref()),
        };
        let key = ResourceKey::new(T::TYPE_URL, Arc::clone(&name));
        // The queue first, so no member arriving after the subscription is missed.
        self.inner.cache.add_collection(&key, Some(queue));
        let home = Home::Authority(Partition::of(&parsed));
        match self
            .inner
            .start_watch::<T>(&parsed, home, server_id, server, Some(&name))
        {
            Ok(watch) => Ok((key, watch)),
            Err(e) => {
                self.inner.cache.remove_collection(&key, queue);
                Err(e)
            }
        }
    }

    /// Watches the list collection `name` (xDS TP1 §List collections), e.g.
    /// `xdstp://a/envoy.config.listener.v3.ListenerCollection/foo` for
    /// `T` = [`ListenerType`](xdsfed_core::types::ListenerType): the collection is
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
        let queue = self.inner.cache.add_collection(&key, None);
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
        let (server_id, server) = self.inner.server_for(&parsed)?;
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.inner.lock();
        let provenance = Provenance {
            authority: parsed.authority().map(Arc::from),
            server: Arc::clone(state.federation.registry().name(server_id)),
        };
        let (rx, _) = self
            .inner
            .cache
            .add_watcher(&key, provenance.clone(), policy);
        state.federation.want_entry(&collection, &key);
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(&self.inner) as Arc<dyn Release>;
        Ok(Watch::new(
            rx,
            Arc::new(Guard {
                owner: Some(owner),
                key,
                holds: Some(held),
            }),
            provenance,
        ))
    }

    /// An empty set of watches of type `T`: one stream for many resources,
    /// each subscribed as [`watch`](Self::watch) subscribes it (see
    /// [`WatchSet`](crate::watch::WatchSet)).
    pub fn watch_set<T: ResourceType>(&self) -> crate::watch::WatchSet<T> {
        crate::watch::WatchSet::new(self.clone(), Arc::clone(&self.inner.cache))
    }

    /// An empty set of glob collection watches of type `T`: one stream for
    /// many collections, each subscribed as
    /// [`watch_collection`](Self::watch_collection) subscribes it (see
    /// [`CollectionSet`](crate::watch::CollectionSet)).
    pub fn collection_set<T: ResourceType>(&self) -> crate::watch::CollectionSet<T> {
        crate::watch::CollectionSet::new(self.clone(), Arc::clone(&self.inner.cache))
    }

    /// Watches every resource of type `T` on the default servers (wildcard
    /// LDS/CDS, as Envoy does).
    pub fn watch_wildcard<T: ResourceType>(&self) -> Result<WildcardWatch<T>, WatchError> {
        if self.inner.types.get(T::TYPE_URL).is_none() {
            return Err(WatchError::UnknownType(T::TYPE_URL));
        }
        let (server_id, server) = self.inner.default_server()?;
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.inner.lock();
        let provenance = Provenance {
            authority: None,
            server: Arc::clone(state.federation.registry().name(server_id)),
        };
        let (queue, _) = self
            .inner
            .cache
            .add_wildcard(T::TYPE_URL, provenance, policy);
        state.federation.watch_wildcard(T::TYPE_URL, server_id);
        self.inner.run(&mut state, policy);
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
        let uris = self.inner.lock().federation.server_uris();
        let resources = resources_of(&self.inner.cache, &uris);
        let state = self.inner.lock();
        let registry = state.federation.registry();
        let mut servers: Vec<ServerStatus> = state
            .connections
            .iter()
            .map(|(id, conn)| {
                let stats = conn.stats();
                ServerStatus {
                    server: registry.name(*id).to_string(),
                    server_uri: registry.uri(*id).to_string(),
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
        let authorities = state.federation.authority_status();
        ClientStatus {
            node_id: self.inner.node.id.clone(),
            resources,
            servers,
            authorities,
            state_dir: self.inner.state_dir.as_ref().map(|c| c.snapshot()),
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
