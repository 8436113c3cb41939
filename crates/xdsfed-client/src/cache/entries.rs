//! The cache's entries, each held in one of two forms.
//!
//! A full [`Entry`] carries everything an entry can have: watchers and
//! their channel, watch sets, the last NACK reported, any state gRFC A88
//! can reach. Most entries of a large configuration need none of it: the
//! members of a glob collection a graph follows, the resources a wildcard
//! watcher holds, are plain accepted copies read through queues. Those are
//! held as a [`Plain`]: the copy, its version, when it came and where from
//! (an [`Origin`] the entries of a server share, with the ambient error
//! they are held with), 48 bytes, in one allocation of 80 with its key,
//! where a full entry and its state take two of 216 without it.
//!
//! Rule: once a glob collection of a type has been watched, an entry of
//! that type that is a member of a glob by its spelling is indexed under
//! its glob, and a plain one is held there and nowhere else: its name and
//! its 48 bytes in the glob's exact slice ([`NameMap`]). A full member is
//! named in the index and held with the other full entries. A LEDS
//! endpoint then costs 64 bytes in its collection's slice, where a boxed
//! entry in the table of every key (98, with an error's pointer of its
//! own) and a name in the glob's index beside it (16) took 114 (test
//! `a_plain_member_is_held_in_its_globs_index_only`).
//!
//! Rule: a plain entry is exactly the state it stands for. An entry is
//! held plain when it has no watcher, no watch set, no NACK reported and
//! its state is an accepted copy (`ACKED`, no failed update) sent by its
//! own server under its own name, with or without an ambient error; it
//! becomes full again, with that same state, as soon as anything else is
//! asked of it. Each state read from a plain entry is the one a full entry
//! would have held (tests `a_plain_entry_reads_as_the_state_it_holds`,
//! `a_plain_member_reads_as_a_full_one_after_its_servers_next_copies`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};
use xdsfed_core::version::Version;

use xdsfed_core::entry::{
    DataErrorPolicy, Provenance, ReportedNack, ResourceState, ResourceStatus, Source,
};
use xdsfed_core::error::XdsError;
use xdsfed_core::hash::{HashMap, HashSet, KeyedTable, NameMap};
use xdsfed_core::protocol::{ResourceKey, glob_of};
use xdsfed_core::types::Decoded;

use super::Entry;
use super::slot::Slot;

/// An entry that is nothing but an accepted copy (see the module docs).
pub(super) struct Plain {
    resource: Decoded,
    version: Version,
    /// Where the copy came from, and the ambient error it is held with.
    origin: Arc<Origin>,
    /// When the copy arrived, in nanoseconds since the Unix epoch.
    updated: u64,
}

/// What plain entries of one server, authority and server features share,
/// with the ambient error they are held with: one copy, rather than 48
/// bytes in each. An ambient error (a stream failure, say) reaches every
/// entry of a server at once and leaves them together, so it is shared
/// as the rest is.
#[derive(PartialEq, Eq)]
pub(super) struct Origin {
    /// The server the entries are held for, which sent their copies.
    server: Arc<str>,
    authority: Option<Arc<str>>,
    policy: DataErrorPolicy,
    /// An ambient error: the copies still serve.
    error: Option<XdsError>,
}

impl std::hash::Hash for Origin {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Errors are few and compared when equal origins are looked for.
        self.server.hash(state);
        self.authority.hash(state);
        self.policy.hash(state);
    }
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

    fn of(
        &mut self,
        provenance: &Provenance,
        policy: DataErrorPolicy,
        error: Option<&XdsError>,
    ) -> Arc<Origin> {
        let origin = Origin {
            server: Arc::clone(&provenance.server),
            authority: provenance.authority.clone(),
            policy,
            error: error.cloned(),
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
    /// it can be, and `origin` holds the state's ambient error.
    fn of(origin: Arc<Origin>, state: ResourceState) -> Form {
        let Some(updated) = plain_since_epoch(&origin, &state) else {
            return Form::Full(state);
        };
        if origin.error != state.error {
            return Form::Full(state);
        }
        match state {
            ResourceState {
                resource: Some(resource),
                version: Some(version),
                ..
            } => Form::Plain(Plain {
                resource,
                version,
                origin,
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
            error: self.origin.error.clone(),
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

    /// A new copy from where the entry's copy came from, taken in place:
    /// the usual change of a plain entry (a LEDS member's next copy), done
    /// without building its full state and taking it apart again. The same
    /// change as [`entry::apply`](xdsfed_core::entry::apply) followed by
    /// [`update`](Self::update) (test
    /// `an_update_in_place_is_the_update_through_the_full_state`). Returns
    /// whether the copy's bytes changed; `None` for an update of another
    /// kind (from another server or authority, through a fallback, an
    /// `#alt` or a redirect, or clearing an ambient error), which the
    /// caller applies through the full state.
    pub(super) fn update_in_place(
        &mut self,
        resource: &Decoded,
        version: &Version,
        source: Option<&Source>,
        server: &Arc<str>,
        now: SystemTime,
    ) -> Option<bool> {
        let origin = &*self.origin;
        let direct = match source {
            Some(s) => {
                s.server == origin.server
                    && s.authority == origin.authority
                    && s.fetched_as.is_empty()
                    && !(s.fallback || s.alt || s.redirected)
            }
            None => *server == origin.server,
        };
        if !direct || origin.error.is_some() {
            return None;
        }
        let same_bytes = self.resource.raw() == resource.raw();
        if !same_bytes {
            let since = now.duration_since(SystemTime::UNIX_EPOCH).ok()?;
            self.updated = u64::try_from(since.as_nanos()).ok()?;
            self.resource = resource.clone();
        }
        self.version = version.clone();
        Some(!same_bytes)
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

    /// [`update`](Self::update), finding the origin of another ambient
    /// error among `origins`: a stream failure changes every entry of its
    /// server, and each stays plain, in place.
    #[must_use]
    fn update_among(
        &mut self,
        origins: &mut Origins,
        entry: Unwatched,
        state: ResourceState,
    ) -> Option<(Unwatched, ResourceState)> {
        if entry.reported.is_none()
            && self.origin.is(&entry.provenance, entry.policy)
            && self.origin.error != state.error
        {
            self.origin = origins.of(&entry.provenance, entry.policy, state.error.as_ref());
        }
        self.update(entry, state)
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

/// Every entry, full or plain (see the module docs for where each is
/// held).
#[derive(Default)]
pub(super) struct Entries {
    full: KeyedTable<ResourceKey, Entry>,
    /// Plain entries that are no indexed glob's member.
    plain: KeyedTable<ResourceKey, Plain>,
    /// The entries of the types in `indexed` under the glob they could be
    /// a member of, so that a new glob watcher finds the members already
    /// cached without walking every entry: a member held plain is held
    /// here (`Some`) and nowhere else, a full one is named here (`None`)
    /// and held in `full`. A glob with an entry of its own is keyed by
    /// that entry's copy of the name.
    by_glob: HashMap<ResourceKey, NameMap<Option<Plain>>>,
    /// The types a glob collection has been watched of: the others' entries
    /// stay out of `by_glob`, where a hundred thousand clusters named by
    /// `xdstp:` names would each cost a slot (and an insert) nobody reads.
    /// A type joins when its first glob is watched, once, by a walk of the
    /// entries; it never leaves, so the index stays whole. A handful of
    /// types at most, told apart by their shared copies before their
    /// spelling: a look costs no hashing of a type URL.
    indexed: Vec<Arc<str>>,
    /// How many entries are held plain in `by_glob`.
    plain_members: usize,
    origins: Origins,
}

impl Entries {
    pub(super) fn len(&self) -> usize {
        self.full.len() + self.plain.len() + self.plain_members
    }

    pub(super) fn contains_key(&self, key: &ResourceKey) -> bool {
        self.get(key).is_some()
    }

    /// The glob `key` is indexed under, when its type is indexed and it is
    /// a member of one by its spelling.
    fn glob_of(&self, key: &ResourceKey) -> Option<ResourceKey> {
        indexed_glob_of(&self.indexed, key)
    }

    /// `key`'s slot in its glob's index.
    fn member(&self, key: &ResourceKey) -> Option<(&Arc<str>, &Option<Plain>)> {
        self.by_glob
            .get(&self.glob_of(key)?)?
            .get_key_value(&key.name)
    }

    pub(super) fn get(&self, key: &ResourceKey) -> Option<Held<'_>> {
        // An indexed member's slot says how it is held, so a plain one
        // costs no probe of the table of full entries, which it would miss.
        match self.member(key) {
            Some((_, Some(plain))) => return Some(Held::Plain(plain)),
            Some((_, None)) => return self.full.get(key).map(Held::Full),
            None => {}
        }
        if let Some(entry) = self.full.get(key) {
            return Some(Held::Full(entry));
        }
        if !self.plain.is_empty()
            && let Some(plain) = self.plain.get(key)
        {
            return Some(Held::Plain(plain));
        }
        None
    }

    /// The cache's own copy of a key that is no glob's member (a glob's,
    /// say), when it holds an entry under it.
    pub(super) fn own_key(&self, key: &ResourceKey) -> Option<&ResourceKey> {
        match self.full.get_key_value(key) {
            Some((own, _)) => Some(own),
            None => self.plain.get_key_value(key).map(|(own, _)| own),
        }
    }

    /// The full entry of `key`, made full if it was plain.
    pub(super) fn get_mut(&mut self, key: &ResourceKey) -> Option<&mut Entry> {
        if !self.full.contains_key(key) {
            let (own, plain) = self.take_plain(key)?;
            let entry = plain.unwatched().into_entry(plain.state());
            self.full.insert(own, entry);
        }
        self.full.get_mut(key)
    }

    /// Takes `key`'s plain entry out, with the cache's own copy of its
    /// key; a member stays named in its glob's index, as full ones are.
    fn take_plain(&mut self, key: &ResourceKey) -> Option<(ResourceKey, Plain)> {
        if let Some(taken) = self.plain.remove_entry(key) {
            return Some(taken);
        }
        let glob = self.glob_of(key)?;
        let members = self.by_glob.get_mut(&glob)?;
        let (name, _) = members.get_key_value(&key.name)?;
        let own = ResourceKey {
            type_url: Arc::clone(&key.type_url),
            name: Arc::clone(name),
        };
        let plain = members.get_mut(&key.name)?.take()?;
        self.plain_members -= 1;
        Some((own, plain))
    }

    /// The full entry of `key`, if it is one.
    pub(super) fn full_mut(&mut self, key: &ResourceKey) -> Option<&mut Entry> {
        self.full.get_mut(key)
    }

    /// `key`'s entry, in the form it is held.
    pub(super) fn locate_mut(&mut self, key: &ResourceKey) -> Option<HeldMut<'_>> {
        // One lookup for the entry that exists, as nearly every one does:
        // the fields are borrowed apart, not through `self`. An indexed
        // member's slot comes first: it says whether the entry is full.
        let member = indexed_glob_of(&self.indexed, key)
            .and_then(|glob| self.by_glob.get_mut(&glob)?.get_mut(&key.name));
        match member {
            Some(Some(plain)) => return Some(HeldMut::Plain(plain)),
            Some(None) => return self.full.get_mut(key).map(HeldMut::Full),
            None => {}
        }
        if let Some(entry) = self.full.get_mut(key) {
            return Some(HeldMut::Full(entry));
        }
        if !self.plain.is_empty()
            && let Some(plain) = self.plain.get_mut(key)
        {
            return Some(HeldMut::Plain(plain));
        }
        None
    }

    /// Holds `entry` under `key`, full.
    pub(super) fn insert(&mut self, key: ResourceKey, entry: Entry) {
        // Given no copy, `place` gives none back.
        let _none = self.place(&key, None);
        self.full.insert(key, entry);
    }

    /// Holds the unwatched `entry` in `state` under `key`: plain if it can
    /// be, full otherwise.
    pub(super) fn put(&mut self, key: ResourceKey, entry: Unwatched, state: ResourceState) {
        if entry.reported.is_none() {
            let origin = self
                .origins
                .of(&entry.provenance, entry.policy, state.error.as_ref());
            match Plain::of(origin, state) {
                Form::Plain(plain) => {
                    self.full.remove(&key);
                    self.hold_plain(key, plain);
                }
                Form::Full(state) => self.insert(key, entry.into_entry(state)),
            }
        } else {
            self.insert(key, entry.into_entry(state));
        }
    }

    /// Holds `plain` under `key`, which no full entry holds: in its glob's
    /// index when it is an indexed member, in the plain table otherwise.
    fn hold_plain(&mut self, key: ResourceKey, plain: Plain) {
        if let Some(plain) = self.place(&key, Some(plain)) {
            self.plain.insert(key, plain);
        }
    }

    /// Sets `key`'s slot in its glob's index to `plain` (`None`: its
    /// entry is full); takes a plain `key` out of the plain table when it
    /// is to be full. Gives `plain` back when `key` is no indexed member.
    #[must_use]
    fn place(&mut self, key: &ResourceKey, plain: Option<Plain>) -> Option<Plain> {
        let Some(glob) = self.glob_of(key) else {
            if plain.is_none() {
                self.plain.remove(key);
            }
            return plain;
        };
        let adds = usize::from(plain.is_some());
        let members = match self.by_glob.get_mut(&glob) {
            Some(members) => members,
            None => {
                let glob = self.own_key(&glob).cloned().unwrap_or(glob);
                self.by_glob.entry(glob).or_default()
            }
        };
        let name = members
            .get_key_value(&key.name)
            .map_or_else(|| Arc::clone(&key.name), |(own, _)| Arc::clone(own));
        let had = members.insert(name, plain).flatten();
        self.plain_members = self.plain_members + adds - usize::from(had.is_some());
        None
    }

    /// Holds `key`'s full entry plain, if it can be.
    pub(super) fn shrink(&mut self, key: &ResourceKey) {
        let entry = self.full.get(key).filter(|entry| entry.is_unwatched());
        let plain = entry.and_then(|entry| {
            let state = entry.slot.get();
            let origin = self
                .origins
                .of(&entry.provenance, entry.policy, state.error.as_ref());
            match Plain::of(origin, state) {
                Form::Plain(plain) => Some(plain),
                Form::Full(_) => None,
            }
        });
        if let Some(plain) = plain
            && let Some((key, _)) = self.full.remove_entry(key)
        {
            self.hold_plain(key, plain);
        }
    }

    /// The index of members by glob, for tests to look at.
    #[cfg(test)]
    pub(super) fn by_glob(&self) -> &HashMap<ResourceKey, NameMap<Option<Plain>>> {
        &self.by_glob
    }

    /// How many entries are held plain.
    #[cfg(test)]
    pub(super) fn plain_len(&self) -> usize {
        self.plain.len() + self.plain_members
    }

    pub(super) fn remove(&mut self, key: &ResourceKey) -> bool {
        let full = self.full.remove(key).is_some();
        let plain = !full && !self.plain.is_empty() && self.plain.remove(key).is_some();
        // A full member is named in its glob's index too.
        let member = self.forget_member(key);
        full || plain || member
    }

    /// Takes `key` out of its glob's index; whether it was held plain
    /// there.
    fn forget_member(&mut self, key: &ResourceKey) -> bool {
        let Some(glob) = self.glob_of(key) else {
            return false;
        };
        let Some(members) = self.by_glob.get_mut(&glob) else {
            return false;
        };
        let was_plain = members.remove(&key.name).flatten().is_some();
        if members.is_empty() {
            self.by_glob.remove(&glob);
        }
        self.plain_members -= usize::from(was_plain);
        was_plain
    }

    /// Every entry, with its key.
    pub(super) fn iter(&self) -> impl Iterator<Item = (ResourceKey, Held<'_>)> {
        let full = self.full.iter().map(|(k, e)| (k.clone(), Held::Full(e)));
        let plain = self.plain.iter().map(|(k, p)| (k.clone(), Held::Plain(p)));
        let members = self.by_glob.iter().flat_map(|(glob, members)| {
            members.iter().filter_map(|(name, plain)| {
                let plain = plain.as_ref()?;
                Some((member_key(glob, name), Held::Plain(plain)))
            })
        });
        full.chain(plain).chain(members)
    }

    /// Indexes the entries of `type_url` by glob, from now on and the ones
    /// already cached, unless that was done already.
    pub(super) fn index_globs_of(&mut self, type_url: &Arc<str>) {
        if is_indexed(&self.indexed, type_url) {
            return;
        }
        self.indexed.push(Arc::clone(type_url));
        let of_type = |k: &ResourceKey| k.type_url == *type_url && glob_of(&k.name).is_some();
        let full: Vec<ResourceKey> = self.full.keys().filter(|k| of_type(k)).cloned().collect();
        for key in full {
            let _plain = self.place(&key, None);
        }
        let plain: Vec<ResourceKey> = self.plain.keys().filter(|k| of_type(k)).cloned().collect();
        for key in plain {
            if let Some((key, plain)) = self.plain.remove_entry(&key) {
                self.hold_plain(key, plain);
            }
        }
    }

    /// The cached entries that would be members of glob `glob`.
    pub(super) fn under_glob<'a>(
        &'a self,
        glob: &'a ResourceKey,
    ) -> impl Iterator<Item = (ResourceKey, Held<'a>)> {
        let members = self.by_glob.get(glob).into_iter().flat_map(NameMap::iter);
        members.filter_map(move |(name, plain)| {
            let key = member_key(glob, name);
            let held = match plain {
                Some(plain) => Held::Plain(plain),
                None => Held::Full(self.full.get(&key)?),
            };
            Some((key, held))
        })
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
        let origins = &mut self.origins;
        let mut modify = |key: &dyn Fn() -> ResourceKey, plain: &mut Plain| {
            if !which(Held::Plain(plain)) {
                return;
            }
            let mut state = plain.state();
            if !f(&mut state) {
                return;
            }
            changed.push(key());
            if let Some((entry, state)) = plain.update_among(origins, plain.unwatched(), state) {
                unplain.push((key(), entry, state));
            }
        };
        for (key, plain) in self.plain.iter_mut() {
            modify(&|| key.clone(), plain);
        }
        for (glob, members) in &mut self.by_glob {
            for (name, plain) in members.iter_mut() {
                if let Some(plain) = plain {
                    modify(&|| member_key(glob, name), plain);
                }
            }
        }
        for (key, entry, state) in unplain {
            self.put(key, entry, state);
        }
        changed
    }
}

/// The glob `key` is indexed under, when its type is in `indexed` and it
/// is a member of one by its spelling.
fn indexed_glob_of(indexed: &[Arc<str>], key: &ResourceKey) -> Option<ResourceKey> {
    if !is_indexed(indexed, &key.type_url) {
        return None;
    }
    Some(ResourceKey {
        type_url: Arc::clone(&key.type_url),
        name: glob_of(&key.name)?,
    })
}

/// Whether `type_url` is one of `indexed`.
fn is_indexed(indexed: &[Arc<str>], type_url: &Arc<str>) -> bool {
    // `Arc`'s equality looks at the address first: type URLs are shared.
    indexed.iter().any(|t| t == type_url)
}

/// The key of member `name` of `glob`.
fn member_key(glob: &ResourceKey, name: &Arc<str>) -> ResourceKey {
    ResourceKey {
        type_url: Arc::clone(&glob.type_url),
        name: Arc::clone(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdsfed_core::entry::{Context, apply};
    use xdsfed_core::protocol::CoreEvent;
    use xdsfed_core::types::testing::cluster_copy;

    /// Each update a plain entry can be given, taken in place where that
    /// applies, leaves the entry as the update through its full state does
    /// (and says alike whether watchers wake); the usual one, a new copy
    /// from the entry's own server, is taken in place.
    #[test]
    fn an_update_in_place_is_the_update_through_the_full_state() {
        let server: Arc<str> = Arc::from("s");
        let provenance = Provenance {
            server: Arc::clone(&server),
            authority: Some(Arc::from("a")),
        };
        let policy = DataErrorPolicy::default();
        let down = XdsError::new(xdsfed_core::error::ErrorKind::Transient, "down");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let later = now + Duration::from_secs(5);
        let direct = Source::direct_under(&server, Some(Arc::from("a")));
        let sources = [
            None,
            Some(direct.clone()),
            Some(Source::direct_under(&Arc::from("t"), Some(Arc::from("a")))),
            Some(Source::direct_under(&server, Some(Arc::from("b")))),
            Some(Source {
                fallback: true,
                ..direct.clone()
            }),
            Some(Source {
                alt: true,
                ..direct.clone()
            }),
            Some(Source {
                redirected: true,
                ..direct.clone()
            }),
            Some(Source {
                fetched_as: Arc::from("x"),
                ..direct.clone()
            }),
        ];
        let mut taken_in_place = 0;
        for error in [None, Some(&down)] {
            for alt in ["same", "other"] {
                for source in &sources {
                    for sent_by in [&server, &Arc::from("t")] {
                        let origin = Origins::default().of(&provenance, policy, error);
                        let state = ResourceState {
                            resource: Some(cluster_copy("c", "same")),
                            version: Some(Version::from("1")),
                            status: ResourceStatus::Acked,
                            error: error.cloned(),
                            last_updated: Some(now),
                            failed_update: None,
                            source: Some(direct.clone()),
                        };
                        let plain = || match Plain::of(Arc::clone(&origin), state.clone()) {
                            Form::Plain(plain) => plain,
                            Form::Full(_) => panic!("a plain entry to start from"),
                        };
                        let resource = cluster_copy("c", alt);
                        let version = Version::from("2");
                        let mut fast = plain();
                        let Some(woke) = fast.update_in_place(
                            &resource,
                            &version,
                            source.as_ref(),
                            sent_by,
                            later,
                        ) else {
                            continue;
                        };
                        taken_in_place += 1;
                        let mut slow = plain();
                        let mut entry = slow.unwatched();
                        let mut state = slow.state();
                        let event = CoreEvent::Upsert {
                            key: ResourceKey::new("type.googleapis.com/t", "c"),
                            resource,
                            version,
                            ttl: None,
                        };
                        let source = source
                            .clone()
                            .unwrap_or_else(|| Source::direct_under(sent_by, Some(Arc::from("a"))));
                        let cx = Context {
                            server: sent_by,
                            policy,
                            now: later,
                        };
                        let via = format!("{source:?}");
                        let slow_woke = apply(&mut state, &mut entry.reported, &event, source, &cx);
                        assert!(slow.update(entry, state).is_none(), "still plain");
                        assert_eq!(woke, slow_woke, "{alt} from {sent_by} via {via}");
                        let (fast, slow) = (fast.state(), slow.state());
                        assert_eq!(
                            fast.resource.as_ref().map(Decoded::raw),
                            slow.resource.as_ref().map(Decoded::raw)
                        );
                        assert_eq!(fast.version, slow.version);
                        assert_eq!(fast.status, slow.status);
                        assert_eq!(fast.error, slow.error);
                        assert_eq!(fast.last_updated, slow.last_updated);
                        assert_eq!(format!("{:?}", fast.source), format!("{:?}", slow.source));
                    }
                }
            }
        }
        // Both copies, from the entry's own server: named, or not named
        // and sent by it.
        assert_eq!(taken_in_place, 6);
    }

    /// A plain entry is 48 bytes (on 64-bit targets), 80 with its key:
    /// the copy (24: the value's pointer and how its bytes are read), its
    /// version's pointer, its origin's pointer (which holds the ambient
    /// error) and its time of arrival.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_plain_entry_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Plain>(), 48);
        assert_eq!(std::mem::size_of::<(ResourceKey, Plain)>(), 80);
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
        let a = origins.of(&provenance("s", Some("a")), policy, None);
        let again = origins.of(&provenance("s", Some("a")), policy, None);
        assert!(Arc::ptr_eq(&a, &again));
        let down = XdsError::new(xdsfed_core::error::ErrorKind::Transient, "down");
        let failed = origins.of(&provenance("s", Some("a")), policy, Some(&down));
        assert!(!Arc::ptr_eq(&a, &failed), "another ambient error");
        let failed_again = origins.of(&provenance("s", Some("a")), policy, Some(&down.clone()));
        assert!(Arc::ptr_eq(&failed, &failed_again));
        let strict = DataErrorPolicy {
            fail_on_data_errors: true,
            ..policy
        };
        for other in [
            origins.of(&provenance("t", Some("a")), policy, None),
            origins.of(&provenance("s", None), policy, None),
            origins.of(&provenance("s", Some("a")), strict, None),
        ] {
            assert!(!Arc::ptr_eq(&a, &other));
        }
    }
}
