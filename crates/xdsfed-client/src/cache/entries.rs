//! The cache's entries, each held in one of two forms.
//!
//! A full [`Entry`] carries everything an entry can have: watchers and
//! their channel, watch sets, the last NACK reported, any state gRFC A88
//! can reach. Most entries of a large configuration need none of it: the
//! members of a glob collection a graph follows, the resources a wildcard
//! watcher holds, are plain accepted copies read through queues. Those are
//! held as a [`Plain`]: the copy, its version, when it came and where from
//! (an [`Origin`] the entries of a server share), in one allocation of 88
//! bytes with its key, where a full entry and its state take two of 216
//! without it.
//!
//! Rule: a plain entry is exactly the state it stands for. An entry is
//! held plain when it has no watcher, no watch set, no NACK reported and
//! its state is an accepted copy (`ACKED`, no failed update) sent by its
//! own server under its own name, with or without an ambient error; it
//! becomes full again, with that same state, as soon as anything else is
//! asked of it. Each state read from a plain entry is the one a full entry
//! would have held (test `a_plain_entry_reads_as_the_state_it_holds`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};
use xdsfed_core::version::Version;

use xdsfed_core::entry::{
    DataErrorPolicy, Provenance, ReportedNack, ResourceState, ResourceStatus, Source,
};
use xdsfed_core::error::XdsError;
use xdsfed_core::hash::{HashSet, KeyedTable};
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::Decoded;

use super::Entry;
use super::slot::Slot;

/// An entry that is nothing but an accepted copy (see the module docs).
pub(super) struct Plain {
    resource: Decoded,
    version: Version,
    origin: Arc<Origin>,
    /// An ambient error (a stream failure, say): the copy still serves.
    error: Option<XdsError>,
    /// When the copy arrived, in nanoseconds since the Unix epoch.
    updated: u64,
}

/// What plain entries of one server, authority and server features share:
/// one copy, rather than 40 bytes in each.
#[derive(PartialEq, Eq, Hash)]
pub(super) struct Origin {
    /// The server the entries are held for, which sent their copies.
    server: Arc<str>,
    authority: Option<Arc<str>>,
    policy: DataErrorPolicy,
}

impl Origin {
    fn is(&self, provenance: &Provenance, policy: DataErrorPolicy) -> bool {
        self.server == provenance.server
            && self.authority == provenance.authority
            && self.policy == policy
    }
}

/// The origins plain entries share, a bounded number of them (names come
/// from servers): past the bound an origin is not shared, which costs
/// memory, not correctness.
#[derive(Default)]
struct Origins(HashSet<Arc<Origin>>);

impl Origins {
    const BOUND: usize = 1024;

    fn of(&mut self, provenance: &Provenance, policy: DataErrorPolicy) -> Arc<Origin> {
        let origin = Origin {
            server: Arc::clone(&provenance.server),
            authority: provenance.authority.clone(),
            policy,
        };
        if let Some(shared) = self.0.get(&origin) {
            return Arc::clone(shared);
        }
        let origin = Arc::new(origin);
        if self.0.len() < Self::BOUND {
            self.0.insert(Arc::clone(&origin));
        }
        origin
    }
}

/// An entry apart from its state and its watchers: what a change of a
/// plain entry works on, and what a new entry starts as.
pub(super) struct Unwatched {
    pub(super) provenance: Provenance,
    pub(super) policy: DataErrorPolicy,
    pub(super) reported: ReportedNack,
}

impl Unwatched {
    /// The full entry this is, in `state`.
    fn into_entry(self, state: ResourceState) -> Entry {
        let mut entry = Entry::with_slot(self.provenance, self.policy, Slot::bare(state));
        entry.reported_nack = self.reported;
        entry
    }
}

impl Plain {
    /// The form an unwatched entry of `origin` in `state` takes: plain if
    /// it can be.
    fn of(origin: Arc<Origin>, state: ResourceState) -> Form {
        let Some(updated) = plain_since_epoch(&origin, &state) else {
            return Form::Full(state);
        };
        match state {
            ResourceState {
                resource: Some(resource),
                version: Some(version),
                error,
                ..
            } => Form::Plain(Plain {
                resource,
                version,
                origin,
                error,
                updated,
            }),
            state => Form::Full(state),
        }
    }

    /// The state it stands for.
    pub(super) fn state(&self) -> ResourceState {
        ResourceState {
            resource: Some(self.resource.clone()),
            version: Some(self.version.clone()),
            status: ResourceStatus::Acked,
            error: self.error.clone(),
            last_updated: Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(self.updated)),
            failed_update: None,
            source: Some(Source::direct_under(
                &self.origin.server,
                self.origin.authority.clone(),
            )),
        }
    }

    /// What it is apart from its state.
    pub(super) fn unwatched(&self) -> Unwatched {
        Unwatched {
            provenance: self.provenance(),
            policy: self.origin.policy,
            reported: None,
        }
    }

    fn provenance(&self) -> Provenance {
        Provenance {
            authority: self.origin.authority.clone(),
            server: Arc::clone(&self.origin.server),
        }
    }

    /// Takes `state` in, if the entry is still plain in it; hands both
    /// back, to be held full, otherwise.
    #[must_use]
    pub(super) fn update(
        &mut self,
        entry: Unwatched,
        state: ResourceState,
    ) -> Option<(Unwatched, ResourceState)> {
        if entry.reported.is_some() || !self.origin.is(&entry.provenance, entry.policy) {
            return Some((entry, state));
        }
        match Plain::of(Arc::clone(&self.origin), state) {
            Form::Plain(still) => {
                *self = still;
                None
            }
            Form::Full(state) => Some((entry, state)),
        }
    }
}

/// The form an entry's state is held in.
enum Form {
    Plain(Plain),
    Full(ResourceState),
}

/// When the copy in `state` arrived (nanoseconds since the Unix epoch),
/// if an unwatched entry of `origin` can be held plain in it.
fn plain_since_epoch(origin: &Origin, state: &ResourceState) -> Option<u64> {
    if state.status != ResourceStatus::Acked
        || state.failed_update.is_some()
        || state.resource.is_none()
        || state.version.is_none()
    {
        return None;
    }
    let source = state.source.as_ref()?;
    let direct = source.server == origin.server
        && source.authority == origin.authority
        && source.fetched_as.is_empty()
        && !(source.fallback || source.alt || source.redirected);
    if !direct {
        return None;
    }
    let since = state.last_updated?.duration_since(SystemTime::UNIX_EPOCH);
    u64::try_from(since.ok()?.as_nanos()).ok()
}

impl Entry {
    /// Whether nothing but its state keeps it full.
    pub(super) fn is_unwatched(&self) -> bool {
        self.watchers == 0
            && self.sets.is_empty()
            && self.reported_nack.is_none()
            && !matches!(self.slot, Slot::Watched(_))
    }
}

/// One entry, in whichever form it is held.
#[derive(Clone, Copy)]
pub(super) enum Held<'a> {
    Full(&'a Entry),
    Plain(&'a Plain),
}

impl Held<'_> {
    /// Its explicit watchers (a plain entry has none).
    pub(super) fn watchers(&self) -> usize {
        match self {
            Held::Full(entry) => entry.watchers,
            Held::Plain(_) => 0,
        }
    }

    /// The server its subscription is on.
    pub(super) fn server(&self) -> &Arc<str> {
        match self {
            Held::Full(entry) => &entry.provenance.server,
            Held::Plain(plain) => &plain.origin.server,
        }
    }

    /// Whether its subscription is on `server`, or its copy came from it.
    pub(super) fn served_by(&self, server: &Arc<str>) -> bool {
        match self {
            Held::Full(entry) => {
                entry.provenance.server == *server
                    || entry
                        .slot
                        .with(|s| s.source.as_ref().is_some_and(|s| s.server == *server))
            }
            Held::Plain(plain) => plain.origin.server == *server,
        }
    }

    /// Calls `f` with its provenance and state.
    pub(super) fn with<R>(&self, f: impl FnOnce(&Provenance, &ResourceState) -> R) -> R {
        match self {
            Held::Full(entry) => entry.slot.with(|state| f(&entry.provenance, state)),
            Held::Plain(plain) => f(&plain.provenance(), &plain.state()),
        }
    }

    /// Its authority and the server its subscription is on.
    pub(super) fn provenance(&self) -> Provenance {
        match self {
            Held::Full(entry) => entry.provenance.clone(),
            Held::Plain(plain) => plain.provenance(),
        }
    }

    /// Its status, without building a state.
    pub(super) fn status(&self) -> ResourceStatus {
        match self {
            Held::Full(entry) => entry.slot.with(|s| s.status),
            Held::Plain(_) => ResourceStatus::Acked,
        }
    }

    /// Whether it holds a copy, without building a state.
    pub(super) fn has_copy(&self) -> bool {
        match self {
            Held::Full(entry) => entry.slot.with(|s| s.resource.is_some()),
            Held::Plain(_) => true,
        }
    }

    /// A copy of its state.
    pub(super) fn state(&self) -> ResourceState {
        match self {
            Held::Full(entry) => entry.slot.get(),
            Held::Plain(plain) => plain.state(),
        }
    }

    /// Queues its change for the watch sets it is a member of (a plain
    /// entry is in none).
    pub(super) fn mark_sets(&self) {
        if let Held::Full(entry) = self {
            entry.mark_sets();
        }
    }
}

/// An entry to change: full, or plain.
pub(super) enum HeldMut<'a> {
    Full(&'a mut Entry),
    Plain(&'a mut Plain),
}

/// Every entry, full or plain; a key is in one of the two tables at most.
#[derive(Default)]
pub(super) struct Entries {
    full: KeyedTable<ResourceKey, Entry>,
    plain: KeyedTable<ResourceKey, Plain>,
    origins: Origins,
}

impl Entries {
    pub(super) fn len(&self) -> usize {
        self.full.len() + self.plain.len()
    }

    pub(super) fn contains_key(&self, key: &ResourceKey) -> bool {
        self.full.contains_key(key) || (!self.plain.is_empty() && self.plain.contains_key(key))
    }

    pub(super) fn get(&self, key: &ResourceKey) -> Option<Held<'_>> {
        self.get_key_value(key).map(|(_, held)| held)
    }

    pub(super) fn get_key_value(&self, key: &ResourceKey) -> Option<(&ResourceKey, Held<'_>)> {
        if let Some((key, entry)) = self.full.get_key_value(key) {
            return Some((key, Held::Full(entry)));
        }
        if self.plain.is_empty() {
            return None;
        }
        let (key, plain) = self.plain.get_key_value(key)?;
        Some((key, Held::Plain(plain)))
    }

    /// The full entry of `key`, made full if it was plain.
    pub(super) fn get_mut(&mut self, key: &ResourceKey) -> Option<&mut Entry> {
        if !self.full.contains_key(key) {
            let (key, plain) = self.plain.remove_entry(key)?;
            let entry = plain.unwatched().into_entry(plain.state());
            self.full.insert(key, entry);
        }
        self.full.get_mut(key)
    }

    /// The full entry of `key`, if it is one.
    pub(super) fn full_mut(&mut self, key: &ResourceKey) -> Option<&mut Entry> {
        self.full.get_mut(key)
    }

    /// `key`'s entry, in the form it is held.
    pub(super) fn locate_mut(&mut self, key: &ResourceKey) -> Option<HeldMut<'_>> {
        if let Some(entry) = self.full.get_mut(key) {
            return Some(HeldMut::Full(entry));
        }
        if self.plain.is_empty() {
            return None;
        }
        self.plain.get_mut(key).map(HeldMut::Plain)
    }

    /// Holds `entry` under `key`, full.
    pub(super) fn insert(&mut self, key: ResourceKey, entry: Entry) {
        self.plain.remove(&key);
        self.full.insert(key, entry);
    }

    /// Holds the unwatched `entry` in `state` under `key`: plain if it can
    /// be, full otherwise.
    pub(super) fn put(&mut self, key: ResourceKey, entry: Unwatched, state: ResourceState) {
        if entry.reported.is_none() {
            let origin = self.origins.of(&entry.provenance, entry.policy);
            match Plain::of(origin, state) {
                Form::Plain(plain) => {
                    self.full.remove(&key);
                    self.plain.insert(key, plain);
                }
                Form::Full(state) => self.insert(key, entry.into_entry(state)),
            }
        } else {
            self.insert(key, entry.into_entry(state));
        }
    }

    /// Holds `key`'s full entry plain, if it can be.
    pub(super) fn shrink(&mut self, key: &ResourceKey) {
        let entry = self.full.get(key).filter(|entry| entry.is_unwatched());
        let plain = entry.and_then(|entry| {
            let origin = self.origins.of(&entry.provenance, entry.policy);
            match Plain::of(origin, entry.slot.get()) {
                Form::Plain(plain) => Some(plain),
                Form::Full(_) => None,
            }
        });
        if let Some(plain) = plain
            && let Some((key, _)) = self.full.remove_entry(key)
        {
            self.plain.insert(key, plain);
        }
    }

    /// How many entries are held plain.
    #[cfg(test)]
    pub(super) fn plain_len(&self) -> usize {
        self.plain.len()
    }

    pub(super) fn remove(&mut self, key: &ResourceKey) -> bool {
        self.full.remove(key).is_some() || self.plain.remove(key).is_some()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&ResourceKey, Held<'_>)> {
        let full = self.full.iter().map(|(k, e)| (k, Held::Full(e)));
        let plain = self.plain.iter().map(|(k, p)| (k, Held::Plain(p)));
        full.chain(plain)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &ResourceKey> {
        self.full.keys().chain(self.plain.keys())
    }

    /// Runs `f` on `key`'s state; says whether `f` said it changed.
    pub(super) fn modify(
        &mut self,
        key: &ResourceKey,
        f: impl FnOnce(&mut ResourceState) -> bool,
    ) -> bool {
        match self.locate_mut(key) {
            Some(HeldMut::Full(entry)) => entry.slot.modify(f),
            Some(HeldMut::Plain(plain)) => {
                let mut state = plain.state();
                if !f(&mut state) {
                    return false;
                }
                if let Some((entry, state)) = plain.update(plain.unwatched(), state) {
                    self.put(key.clone(), entry, state);
                }
                true
            }
            None => false,
        }
    }

    /// Runs `f` on the state of every entry `which` picks, in place; an
    /// entry `f` changed is named in the result. A plain entry whose new
    /// state is not plain becomes full.
    pub(super) fn modify_each(
        &mut self,
        which: impl Fn(Held<'_>) -> bool,
        f: impl Fn(&mut ResourceState) -> bool,
    ) -> Vec<ResourceKey> {
        let mut changed = Vec::new();
        for (key, entry) in self.full.iter_mut() {
            if which(Held::Full(entry)) && entry.slot.modify(&f) {
                changed.push(key.clone());
            }
        }
        let mut unplain = Vec::new();
        for (key, plain) in self.plain.iter_mut() {
            if !which(Held::Plain(plain)) {
                continue;
            }
            let mut state = plain.state();
            if !f(&mut state) {
                continue;
            }
            changed.push(key.clone());
            if let Some((entry, state)) = plain.update(plain.unwatched(), state) {
                unplain.push((key.clone(), entry, state));
            }
        }
        for (key, entry, state) in unplain {
            self.put(key, entry, state);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain entry is 56 bytes (on 64-bit targets), one allocation of
    /// 88 with its key: the copy (24: the value's pointer and how its
    /// bytes are read), its version's pointer, its origin's pointer, an
    /// ambient error's pointer and its time of arrival.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_plain_entry_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Plain>(), 56);
        assert_eq!(std::mem::size_of::<(ResourceKey, Plain)>(), 88);
    }

    /// Entries of one server, authority and server features share one
    /// origin; another of any of the three is another origin.
    #[test]
    fn entries_of_one_origin_share_it() {
        let mut origins = Origins::default();
        let provenance = |server: &str, authority: Option<&str>| Provenance {
            server: Arc::from(server),
            authority: authority.map(Arc::from),
        };
        let policy = DataErrorPolicy::default();
        let a = origins.of(&provenance("s", Some("a")), policy);
        let again = origins.of(&provenance("s", Some("a")), policy);
        assert!(Arc::ptr_eq(&a, &again));
        let strict = DataErrorPolicy {
            fail_on_data_errors: true,
            ..policy
        };
        for other in [
            origins.of(&provenance("t", Some("a")), policy),
            origins.of(&provenance("s", None), policy),
            origins.of(&provenance("s", Some("a")), strict),
        ] {
            assert!(!Arc::ptr_eq(&a, &other));
        }
    }
}
