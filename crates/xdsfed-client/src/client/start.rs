//! Starting watches: names parsed and checked, authorities resolved, the
//! cache entry made, and the federation core told.

use std::sync::{Arc, MutexGuard};

use super::{Inner, State, WatchError};
use crate::cache::{Cache, DataErrorPolicy, Provenance};
use crate::watch::{Guard, Release, Watch};
use xdsfed_core::authority::{AuthorityError, Partition, ServerId};
use xdsfed_core::bootstrap::ServerConfig;
use xdsfed_core::federation::Home;
use xdsfed_core::name::{NameError, ResourceName};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::ResourceType;

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn parse<T: ResourceType>(&self, name: &str) -> Result<ResourceName, WatchError> {
        self.checked::<T>(ResourceName::parse_user_supplied(name))
    }

    /// [`Self::parse`] of a name already parsed: `T` must be registered
    /// (checked first) and the name of a `T`.
    pub(super) fn checked<T: ResourceType>(
        &self,
        parsed: Result<ResourceName, NameError>,
    ) -> Result<ResourceName, WatchError> {
        if self.types.get(T::TYPE_URL).is_none() {
            return Err(WatchError::UnknownType(T::TYPE_URL));
        }
        let parsed = parsed?;
        parsed.check_type(T::TYPE_URL)?;
        Ok(parsed)
    }

    /// Parses a list collection name of `T`s: its name and cache key.
    pub(super) fn parse_list<T: ResourceType>(
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
    pub(super) fn start_list<T: ResourceType>(
        self: &Arc<Self>,
        key: &ResourceKey,
    ) -> Result<Watch<T>, WatchError> {
        // From the key: the collection is watched as itself, without
        // directives.
        let parsed = ResourceName::parse(&key.name)?;
        let (server_id, server) = self.server_for(&parsed)?;
        let home = Home::Authority(Partition::of(&parsed));
        let type_url: &'static str = self
            .types
            .get(&key.type_url)
            .map(|t| t.type_url())
            .ok_or(WatchError::UnknownType(T::TYPE_URL))?;
        self.start_watch_as::<T>(type_url, &parsed, home, server_id, server, None)
    }

    /// Starts a watch of `parsed`; `given` is the caller's shared copy of
    /// the name, the key's own when it is the canonical form.
    pub(super) fn start_watch<T: ResourceType>(
        self: &Arc<Self>,
        parsed: &ResourceName,
        home: Home,
        server_id: ServerId,
        server: &ServerConfig,
        given: Option<&Arc<str>>,
    ) -> Result<Watch<T>, WatchError> {
        self.start_watch_as::<T>(T::TYPE_URL, parsed, home, server_id, server, given)
    }

    /// [`Self::start_watch`] of `parsed` as `type_url`: `T`'s own, or the
    /// type of its list collection (whose members are `T`s).
    fn start_watch_as<T: ResourceType>(
        self: &Arc<Self>,
        type_url: &'static str,
        parsed: &ResourceName,
        home: Home,
        server_id: ServerId,
        server: &ServerConfig,
        given: Option<&Arc<str>>,
    ) -> Result<Watch<T>, WatchError> {
        let attach = |cache: &Cache, key: &ResourceKey, provenance, policy| {
            cache.add_watcher(key, provenance, policy).0
        };
        let first = (server_id, server);
        let (rx, guard, provenance) =
            self.register::<T, _>(type_url, parsed, home, first, given, attach)?;
        Ok(Watch::new(rx, guard, provenance))
    }

    /// [`Self::start_watch`] for a member of a watch set, which reads the
    /// state through the cache: the subscription's guard and provenance,
    /// and no channel (a channel made only to be dropped, and the state
    /// boxed anew, cost two allocations and 600 bytes a member, a hundred
    /// thousand times in a graph's cold start).
    pub(super) fn start_member<T: ResourceType>(
        self: &Arc<Self>,
        parsed: &ResourceName,
        home: Home,
        first: (ServerId, &ServerConfig),
        given: Option<&Arc<str>>,
    ) -> Result<(Arc<Guard>, Provenance), WatchError> {
        let attach = |cache: &Cache, key: &ResourceKey, provenance, policy| {
            cache.add_quiet_watcher(key, provenance, policy);
        };
        let ((), guard, provenance) =
            self.register::<T, _>(T::TYPE_URL, parsed, home, first, given, attach)?;
        Ok((guard, provenance))
    }

    /// Registers a watcher of `parsed` as `type_url` with the cache
    /// (through `attach`, which says what the watcher holds) and the
    /// federation core; the guard that releases it, and the provenance.
    fn register<T: ResourceType, R>(
        self: &Arc<Self>,
        type_url: &'static str,
        parsed: &ResourceName,
        home: Home,
        (server_id, server): (ServerId, &ServerConfig),
        given: Option<&Arc<str>>,
        attach: impl FnOnce(&Cache, &ResourceKey, Provenance, DataErrorPolicy) -> R,
    ) -> Result<(R, Arc<Guard>, Provenance), WatchError> {
        let canonical = parsed.canonical();
        let name = match given {
            Some(given) if **given == *canonical => Arc::clone(given),
            _ => Arc::from(canonical.as_ref()),
        };
        let key = ResourceKey::new(type_url, name);
        let alt = self.alt_of(type_url, parsed)?;
        let policy = DataErrorPolicy::from_features(&server.server_features);
        let mut state = self.lock();
        // The core's registry: it also knows the servers ConfigSources named.
        let provenance = Provenance {
            authority: parsed
                .authority()
                .map(|a| state.federation.shared_authority_name(a)),
            server: Arc::clone(state.federation.registry().name(server_id)),
        };
        if let Home::Authority(partition) = &home {
            state.federation.ensure_authority(partition, parsed)?;
        }
        let attached = attach(&self.cache, &key, provenance.clone(), policy);
        let answers = self.cache.as_ref();
        if type_url == T::TYPE_URL {
            state.federation.watch(&key, home, alt, answers);
        } else {
            state
                .federation
                .watch_list(&key, T::TYPE_URL, home, answers);
        }
        self.run(&mut state, policy);
        drop(state);
        let owner: Arc<dyn Release> = Arc::clone(self) as Arc<dyn Release>;
        let guard = Guard {
            owner: Some(owner),
            key,
            holds: None,
        };
        Ok((attached, Arc::new(guard), provenance))
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

    /// The first server of `name`'s authority: it names the subscription in
    /// `Watch::provenance`; which server serves is the federation core's
    /// choice (gRFC A71).
    pub(super) fn server_for(
        &self,
        name: &ResourceName,
    ) -> Result<(ServerId, &ServerConfig), AuthorityError> {
        let servers = self.registry.resolve(name)?;
        let ids = self.registry.resolve_ids(name)?;
        match (ids.first(), servers.first()) {
            (Some(id), Some(server)) => Ok((*id, server)),
            _ => Err(AuthorityError::no_servers(name)),
        }
    }

    pub(super) fn default_server(&self) -> Result<(ServerId, &ServerConfig), AuthorityError> {
        self.server_for(&ResourceName::OldStyle(String::new()))
    }
}
