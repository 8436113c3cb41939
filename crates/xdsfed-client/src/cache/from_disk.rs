//! Copies loaded from the state directory: how they enter the cache, and
//! the two transitions of theirs that gRFC A88's table (federation/a88.rs)
//! does not have.

use std::sync::Arc;
use xdsfed_core::version::Version;

use super::{Cache, DataErrorPolicy, Entry, Provenance, ResourceState, ResourceStatus, Source};
use crate::state_dir::Record;
use xdsfed_core::entry::{Context, short_type};
use xdsfed_core::error::{Cause, ErrorKind, XdsError};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::Decoded;

impl Cache {
    /// Inserts a copy loaded from the state directory: it serves at once,
    /// with status [`ResourceStatus::FromDisk`] and an ambient error saying
    /// no server has confirmed it. An entry that already holds a copy is
    /// left alone.
    pub(crate) fn insert_from_disk(&self, record: &Record, resource: Decoded) {
        let key = record.key();
        let mut inner = self.lock();
        if inner.entries.get(&key).is_some_and(|e| e.has_copy()) {
            return;
        }
        let provenance = Provenance {
            authority: xdsfed_core::name::authority_of(&key.name).map(Arc::from),
            server: Arc::clone(&record.server),
        };
        if !inner.entries.contains_key(&key) {
            inner.insert_entry(&key, Entry::new(provenance, DataErrorPolicy::default()));
        }
        let state = ResourceState {
            resource: Some(resource),
            version: Some(Version::new(&record.version)),
            status: ResourceStatus::FromDisk,
            error: Some(from_disk_error(&key, &record.server)),
            source: Some(Source::direct(&record.server, &key)),
            ..ResourceState::requested()
        };
        if let Some(entry) = inner.entries.get_mut(&key) {
            entry.slot.replace(state);
        }
        inner.mark_wildcard_dirty(&key);
    }
}

/// A copy from the state directory that no server has confirmed yet.
#[derive(Debug, Clone)]
pub(crate) struct DiskCopy {
    /// The server that sent it, as the record names it.
    pub(crate) server: Arc<str>,
    /// The version it was sent with.
    pub(crate) version: Version,
    /// The copy.
    pub(crate) resource: Decoded,
}

impl Cache {
    /// `key`'s copy from the state directory, while no server has
    /// confirmed or replaced it.
    pub(crate) fn disk_copy(&self, key: &ResourceKey) -> Option<DiskCopy> {
        let inner = self.lock();
        let entry = inner.entries.get(key)?;
        if entry.status() != ResourceStatus::FromDisk {
            return None;
        }
        entry.with(|_, state| {
            if state.status != ResourceStatus::FromDisk {
                return None;
            }
            Some(DiskCopy {
                server: Arc::clone(&state.source.as_ref()?.server),
                version: state.version.clone()?,
                resource: state.resource.clone()?,
            })
        })
    }
}

impl super::Inner {
    /// A copy loaded before anyone watched it takes its first watcher's
    /// subscription: that server's features decide how events change it,
    /// and its failures reach it.
    pub(super) fn adopt_from_disk(
        &mut self,
        key: &ResourceKey,
        provenance: &Provenance,
        policy: DataErrorPolicy,
    ) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        if entry.watchers > 0 || entry.slot.with(|s| s.status != ResourceStatus::FromDisk) {
            return;
        }
        entry.policy = policy;
        if entry.provenance == *provenance {
            return;
        }
        entry.provenance = provenance.clone();
    }
}

/// What a copy from the state directory was persisted as: its bytes and
/// the server that sent it.
pub(super) struct Persisted {
    raw: Option<bytes::Bytes>,
    server: Option<Arc<str>>,
}

impl Persisted {
    /// The persisted copy `state` holds (status `FromDisk`).
    pub(super) fn of(state: &ResourceState) -> Self {
        Persisted {
            raw: state.resource.as_ref().map(|r| r.raw().clone()),
            server: state.source.as_ref().map(|s| Arc::clone(&s.server)),
        }
    }

    /// Whether `state` now holds the same bytes, sent by the same server
    /// (`sent_by`): its record needs no new write.
    pub(super) fn is(&self, state: &ResourceState, sent_by: &Arc<str>) -> bool {
        self.server.as_ref() == Some(sent_by)
            && self.raw.as_ref() == state.resource.as_ref().map(|r| r.raw())
    }
}

/// The ambient error of a copy loaded from the state directory.
pub(super) fn from_disk_error(key: &ResourceKey, server: &Arc<str>) -> XdsError {
    let message = format!(
        "{} {} is served from the state directory: no server has confirmed it yet (last sent by {server})",
        short_type(&key.type_url),
        key.name,
    );
    XdsError::new(ErrorKind::Transient, message)
        .with_resource(key.clone())
        .with_server(Arc::clone(server))
}

/// The does-not-exist timer fired for a copy from the state directory
/// after its server answered on the current stream: the server does not
/// have it, so it is dropped.
pub(super) fn disk_copy_not_found(
    state: &mut ResourceState,
    key: &ResourceKey,
    cx: &Context<'_>,
) -> bool {
    let message = format!(
        "{} {} from the state directory: server {} answered without it before the does-not-exist timer fired",
        short_type(&key.type_url),
        key.name,
        cx.server
    );
    state.resource = None;
    state.version = None;
    state.status = ResourceStatus::DoesNotExist;
    let error = XdsError::new(ErrorKind::NotFound, message)
        .with_cause(Cause::NotReceived)
        .with_resource(key.clone())
        .with_server(Arc::clone(cx.server));
    state.error = Some(error);
    true
}
