//! Server ids: each distinct [`ServerKey`] interned once, with its name
//! and URI as shared strings, so that per-resource state and every message
//! naming a server copy a small id or bump a reference count instead of
//! cloning a key or formatting a name.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{AuthorityError, AuthorityRegistry, Partition, ServerKey};
use crate::bootstrap::ServerConfig;

/// A server of an [`AuthorityRegistry`]: an index into its table of
/// distinct [`ServerKey`]s, so equal ids mean one channel and one stream.
///
/// The bootstrap's servers are numbered in the order they first appear
/// (the top-level list, then each authority's in name order); servers a
/// ConfigSource names ([`AuthorityRegistry::intern`]) come after them. An
/// id means something only to the registry that made it and its clones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(u32);

impl ServerId {
    /// The position of the server in its registry's table.
    pub fn index(self) -> usize {
        // Lossless: a `u32` fits the `usize` of every target this builds for.
        self.0 as usize
    }
}

/// What the registry keeps per id.
#[derive(Debug, Clone)]
pub(super) struct Interned {
    pub(super) key: ServerKey,
    /// The key's `Display`, shared by every message naming the server.
    pub(super) name: Arc<str>,
    pub(super) uri: Arc<str>,
    /// The first bootstrap entry (or ConfigSource) with this key.
    pub(super) config: ServerConfig,
    /// The partitions whose names the server may deliver.
    pub(super) partitions: BTreeSet<Partition>,
}

impl AuthorityRegistry {
    /// The id of `server`, interning it first if the registry does not know
    /// its key: for a server a ConfigSource names, which the bootstrap may
    /// not list. Such a server serves no partition of the bootstrap's. An
    /// error only once `u32::MAX` distinct servers are known.
    pub fn intern(&mut self, server: &ServerConfig) -> Result<ServerId, AuthorityError> {
        let key = ServerKey::new(server);
        if let Some(id) = self.ids.get(&key) {
            return Ok(*id);
        }
        let id = u32::try_from(self.servers.len())
            .map(ServerId)
            .map_err(|_| AuthorityError::TooManyServers {
                server: key.to_string(),
            })?;
        self.servers.push(Interned {
            name: Arc::from(key.to_string()),
            uri: Arc::from(key.server_uri.as_str()),
            config: server.clone(),
            partitions: BTreeSet::new(),
            key: key.clone(),
        });
        self.ids.insert(key, id);
        Ok(id)
    }

    /// The id of the server with key `key`, if the registry knows it.
    pub fn id_of(&self, key: &ServerKey) -> Option<ServerId> {
        self.ids.get(key).copied()
    }

    /// Every server id, in order: the bootstrap's, then those interned
    /// since.
    pub fn server_ids(&self) -> impl Iterator<Item = ServerId> + '_ {
        (0..self.servers.len()).filter_map(|i| u32::try_from(i).ok().map(ServerId))
    }

    /// Whether `id` is a server of the bootstrap (not one a ConfigSource
    /// named later).
    pub fn in_bootstrap(&self, id: ServerId) -> bool {
        id.index() < self.bootstrap_servers
    }

    /// The key of `id`.
    ///
    /// # Panics
    ///
    /// If `id` was not made by this registry or one it was cloned from.
    pub fn key(&self, id: ServerId) -> &ServerKey {
        &self.interned(id).key
    }

    /// The name of `id` (its key's `Display`, e.g. `127.0.0.1:18000
    /// (insecure)`), one `Arc` shared by everything that names the server:
    /// cloning it allocates nothing.
    ///
    /// # Panics
    ///
    /// If `id` was not made by this registry or one it was cloned from.
    pub fn name(&self, id: ServerId) -> &Arc<str> {
        &self.interned(id).name
    }

    /// The target URI of `id`, shared like [`AuthorityRegistry::name`].
    ///
    /// # Panics
    ///
    /// If `id` was not made by this registry or one it was cloned from.
    pub fn uri(&self, id: ServerId) -> &Arc<str> {
        &self.interned(id).uri
    }

    /// The configuration of `id`: the first bootstrap entry with its key
    /// (entries with equal keys differ only in what the key leaves out), or
    /// the ConfigSource's server it was interned from. `None` for an id of
    /// another registry.
    pub fn config(&self, id: ServerId) -> Option<&ServerConfig> {
        self.servers.get(id.index()).map(|s| &s.config)
    }

    /// The partitions whose names `server` may deliver (empty for a server
    /// the bootstrap does not list).
    pub fn partitions_served_by(&self, server: ServerId) -> impl Iterator<Item = &Partition> {
        self.servers
            .get(server.index())
            .map(|s| &s.partitions)
            .into_iter()
            .flatten()
    }

    /// Whether `server` serves `partition`, as primary or fallback.
    pub fn serves(&self, server: ServerId, partition: &Partition) -> bool {
        self.servers
            .get(server.index())
            .is_some_and(|s| s.partitions.contains(partition))
    }

    /// Whether a resource with canonical key `key` may arrive on the stream
    /// to `server`: its partition must be one the server serves.
    pub fn may_deliver(&self, server: ServerId, key: &str) -> bool {
        self.serves(server, &Partition::of_key(key))
    }

    /// Whether `server` serves old-style names (it is one of the top-level
    /// servers).
    pub fn serves_old_style(&self, server: ServerId) -> bool {
        self.serves(server, &Partition::OldStyle)
    }

    /// The (normalised) authorities whose names `server` may deliver,
    /// without the old-style partition (see
    /// [`AuthorityRegistry::serves_old_style`]).
    pub fn authorities_for(&self, server: ServerId) -> impl Iterator<Item = &str> {
        self.partitions_served_by(server).filter_map(|p| match p {
            Partition::Authority(a) => Some(a.as_str()),
            Partition::OldStyle => None,
        })
    }

    fn interned(&self, id: ServerId) -> &Interned {
        &self.servers[id.index()]
    }

    /// Interns each of `servers` as serving `partition`: their ids, in
    /// order.
    pub(super) fn intern_serving(
        &mut self,
        servers: &[ServerConfig],
        partition: &Partition,
    ) -> Vec<ServerId> {
        let mut ids = Vec::with_capacity(servers.len());
        for server in servers {
            // Unreachable for a bootstrap: it would need `u32::MAX` servers.
            let Ok(id) = self.intern(server) else {
                continue;
            };
            if let Some(interned) = self.servers.get_mut(id.index()) {
                interned.partitions.insert(partition.clone());
            }
            ids.push(id);
        }
        ids
    }
}
