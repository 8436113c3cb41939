//! gRFC A95's LEDS list collections in the simulated world: watches of
//! `LbEndpointCollection`s, the servers' changes to them, the members the
//! cache holds for their watchers, and the invariants they keep.

use crate::hash::HashSet;
use std::collections::BTreeMap;

use bytes::Bytes;

use super::{
    AUTHORITIES, CoreEvent, Held, Partition, ResourceKey, ResourceName, ResourceState, SERVERS,
    Source, World, authority_of,
};
use crate::entry::ResourceStatus;
use crate::federation::Home;
use crate::federation::tests::sim::endpoints::{self, Flaw, LISTS, Member, POISON, list_name};
use crate::federation::tests::sim::server::Body;
use crate::federation::tests::support::apply_delivery;
use crate::types::{
    LB_ENDPOINT_COLLECTION_TYPE_URL, LbEndpointType, LedsEndpoint, ListCollection, ListEntry,
    ResourceType, anonymous_key, entry_key,
};

impl World {
    /// What the servers hold at the start.
    pub(super) fn seed_lists(&mut self) {
        for label in SERVERS {
            for id in LISTS {
                if self.lists_rng.chance(70) {
                    let members = endpoints::fresh(&mut self.lists_rng, label);
                    let name = list_name(&label[..1], id);
                    self.peer(label).server.set(&name, Body::List(members));
                }
            }
        }
    }

    /// One step about list collections: a watch or an unwatch, a change,
    /// deletion or invalid copy on a server, or a collection of another
    /// authority sent next.
    pub(super) fn random_list_step(&mut self) {
        let label = *self.lists_rng.pick(&SERVERS);
        let id = *self.lists_rng.pick(&LISTS);
        let name = list_name(&label[..1], id);
        let body = match self.lists_rng.below(12) {
            0..=2 => return self.watch_list_random(),
            3 => return self.unwatch_list_random(),
            4..=7 => Body::List(self.changed_list(label, &name)),
            8 => {
                self.log(|| format!("{label} deletes {name}"));
                self.server_change(label, |s| s.delete(&name));
                return;
            }
            9 | 10 => self.flawed_list(label, &name),
            _ => {
                let other = if label.starts_with('a') { "b" } else { "a" };
                let foreign = list_name(other, id);
                self.log(|| format!("{label} will send {foreign}, of another authority"));
                self.peer(label).server.foreign_next = Some(foreign);
                return;
            }
        };
        self.log(|| format!("{label} sets {name} to {body:?}"));
        self.server_change(label, |s| s.set(&name, body));
    }

    /// The endpoints `label` holds in `name`, changed once; a new list if
    /// it holds none (or an invalid one).
    fn changed_list(&mut self, label: &str, name: &str) -> Vec<Member> {
        match self.peer(label).server.truth.get(name) {
            Some((_, Body::List(members))) => {
                let members = members.clone();
                endpoints::changed(&mut self.lists_rng, label, members)
            }
            _ => endpoints::fresh(&mut self.lists_rng, label),
        }
    }

    /// A copy of `name` the client must refuse: an entry that is not
    /// inline, an endpoint that fails validation, or bytes that are no
    /// collection.
    fn flawed_list(&mut self, label: &str, name: &str) -> Body {
        let members = self.changed_list(label, name);
        match self.lists_rng.below(4) {
            0 => Body::FlawedList(members, Flaw::Locator),
            1 => Body::FlawedList(members, Flaw::BadPort),
            2 => Body::FlawedList(members, Flaw::ZeroWeight),
            _ => Body::Malformed,
        }
    }

    fn watch_list_random(&mut self) {
        let authority = *self.lists_rng.pick(&AUTHORITIES);
        let id = *self.lists_rng.pick(&LISTS);
        let watched = list_name(authority, id);
        self.log(|| format!("watch {watched}"));
        let parsed = ResourceName::parse_user_supplied(&watched).expect("a valid name");
        let key = ResourceKey::new(LB_ENDPOINT_COLLECTION_TYPE_URL, parsed.canonical().as_ref());
        let partition = Partition::of(&parsed);
        self.add_entry_watcher(&key, &parsed, authority);
        self.views.entry(key.clone()).or_default();
        let answers = super::checks::Answers(&self.entries);
        self.fed.watch_list(
            &key,
            LbEndpointType::TYPE_URL,
            Home::Authority(partition),
            &answers,
        );
        self.list_watches.push(watched);
        self.drain();
    }

    fn unwatch_list_random(&mut self) {
        if self.list_watches.is_empty() {
            return;
        }
        let at = self.lists_rng.below(self.list_watches.len());
        let watched = self.list_watches.swap_remove(at);
        self.log(|| format!("unwatch {watched}"));
        let key = ResourceKey::new(LB_ENDPOINT_COLLECTION_TYPE_URL, watched);
        self.remove_entry_watcher(&key);
        self.fed.unwatch(&key);
        self.drain();
    }

    /// The cache's `set_list_members`: members that left go, members that
    /// joined get an entry.
    pub(super) fn set_members(&mut self, collection: ResourceKey, members: HashSet<ResourceKey>) {
        self.lists_touched = true;
        let view = self.views.entry(collection).or_default();
        view.retain(|key, _| members.contains(key));
        for key in members {
            view.entry(key).or_insert_with(|| Held {
                state: ResourceState::requested(),
                reported: None,
            });
        }
    }

    /// A delivery to a list collection's member, if a watched collection
    /// lists it (the cache drops it otherwise).
    pub(super) fn deliver_member(&mut self, key: &ResourceKey, event: &CoreEvent, source: Source) {
        let collection = key.name.split('#').next().unwrap_or_default();
        let collection = ResourceKey::new(LB_ENDPOINT_COLLECTION_TYPE_URL, collection);
        let Some(held) = self.views.get_mut(&collection).and_then(|v| v.get_mut(key)) else {
            return;
        };
        apply_delivery(&mut held.state, &mut held.reported, event, source);
        let endpoint = held
            .state
            .resource
            .as_ref()
            .and_then(|r| r.downcast::<LedsEndpoint>());
        assert!(
            endpoint.is_none_or(|e| e.view().address != POISON),
            "{}: a watcher holds an endpoint that failed validation",
            key.name
        );
    }

    /// A list collection's copy comes from its authority's active server:
    /// the secondary while the primary is unreachable, the primary again
    /// once it answers (gRFC A71, A95).
    pub(super) fn check_served_by_active(&self, fetched_as: &str, source: &Source) {
        let authority = authority_of(fetched_as).unwrap_or_default();
        let partition = Partition::Authority(authority.to_owned());
        let Some(state) = self.fed.authorities.get(&partition) else {
            return;
        };
        let active = &self.servers_of[authority][state.active];
        assert_eq!(
            &source.server, active,
            "{fetched_as} delivered from {}, while {active} is its authority's active server",
            source.server
        );
    }

    /// After every step: each watched collection's members are the entries
    /// of the last good copy its entry holds, each holding that entry's
    /// endpoint; none is a locator, none failed validation.
    pub(super) fn check_lists(&mut self) {
        if !std::mem::take(&mut self.lists_touched) {
            return;
        }
        for (collection, view) in &self.views {
            let Some(entry) = self.entries.get(collection) else {
                continue;
            };
            let want = members_of(collection, &entry.state);
            let held: BTreeMap<ResourceKey, Bytes> = view
                .iter()
                .filter_map(|(k, h)| Some((k.clone(), h.state.resource.as_ref()?.raw().clone())))
                .collect();
            assert!(
                held == want,
                "{}: its watchers hold members {:?}, its copy lists {:?}",
                collection.name,
                held.keys().map(|k| &k.name).collect::<Vec<_>>(),
                want.keys().map(|k| &k.name).collect::<Vec<_>>()
            );
        }
    }

    /// Once faults stop: the watchers of `collection` hold exactly the
    /// endpoints its primary holds (none, for an empty list), or nothing
    /// and a known absence if the primary holds no such collection.
    pub(super) fn check_list_converged(&self, collection: &ResourceKey, state: &ResourceState) {
        let held: BTreeMap<String, (String, u16)> = self
            .views
            .get(collection)
            .into_iter()
            .flatten()
            .filter_map(|(k, h)| {
                let endpoint = h.state.resource.as_ref()?.downcast::<LedsEndpoint>()?;
                let view = endpoint.view();
                Some((k.name.to_string(), (view.address.to_owned(), view.port)))
            })
            .collect();
        match self.expected(&collection.name) {
            super::checks::Expect::List(members) => {
                let want: BTreeMap<String, (String, u16)> = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        let name = match &m.name {
                            Some(entry) => entry_key(&collection.name, entry),
                            None => anonymous_key(&collection.name, i),
                        };
                        (name, (m.address.clone(), m.port))
                    })
                    .collect();
                assert_eq!(
                    held, want,
                    "{} holds the wrong endpoints after the faults stopped ({:?})",
                    collection.name, state.status
                );
            }
            super::checks::Expect::Absent => {
                assert_eq!(
                    state.status,
                    ResourceStatus::DoesNotExist,
                    "{} should not exist after the faults stopped",
                    collection.name
                );
                assert!(
                    held.is_empty(),
                    "{}: members of no collection",
                    collection.name
                );
            }
            _ => {}
        }
    }
}

/// The members the copy `state` holds lists, with their bytes. A locator
/// entry, or an endpoint that failed validation, is a bypassed NACK.
fn members_of(collection: &ResourceKey, state: &ResourceState) -> BTreeMap<ResourceKey, Bytes> {
    let Some(resource) = &state.resource else {
        return BTreeMap::new();
    };
    let Some(list) = resource.downcast::<ListCollection>() else {
        panic!(
            "{}: holds something other than a list collection",
            collection.name
        );
    };
    let mut members = BTreeMap::new();
    for (i, entry) in list.entries.iter().enumerate() {
        let (name, resource) = match entry {
            ListEntry::Locator(target) => panic!(
                "{}: a watcher holds a collection with a locator entry ({target}), which gRFC A95 refuses",
                collection.name
            ),
            ListEntry::Inline { name, resource, .. } => (name, resource),
        };
        let endpoint = resource.downcast::<LedsEndpoint>();
        assert!(
            endpoint.is_some_and(|e| e.view().address != POISON),
            "{}: a watcher holds a collection whose endpoint failed validation",
            collection.name
        );
        let name = match name {
            Some(entry) => entry_key(&collection.name, entry),
            None => anonymous_key(&collection.name, i),
        };
        members.insert(
            ResourceKey::new(LbEndpointType::TYPE_URL, name),
            resource.raw().clone(),
        );
    }
    members
}
