//! The model cache, and the invariants checked after every step and at
//! the end of a run.

use std::collections::BTreeMap;

use super::{Action, CoreEvent, Entry, ResourceKey, Source, World, authority_of, federation};
use crate::authority::Partition;
use crate::entry::ResourceStatus;
use crate::federation::tests::sim::endpoints::{Member, is_list};
use crate::federation::tests::sim::server::Body;
use crate::federation::tests::support::apply_delivery;
use crate::types::ClusterView;

/// What the federation core asks of the cache, read off the model.
pub(super) struct Answers<'a>(pub(super) &'a BTreeMap<ResourceKey, Entry>);

impl federation::Answers for Answers<'_> {
    fn is_answered(&self, key: &ResourceKey) -> bool {
        self.0
            .get(key)
            .is_some_and(|e| federation::is_answered(key, &e.state))
    }
    fn has_copy(&self, key: &ResourceKey) -> bool {
        self.0.get(key).is_some_and(|e| e.state.resource.is_some())
    }
}

impl World {
    pub(crate) fn apply_to_model(&mut self, action: Action) {
        match action {
            Action::Deliver { event, source } => self.deliver(&event, source),
            Action::DataError { key, error } => {
                if let Some(entry) = self.entries.get_mut(&key) {
                    federation::data_error(&mut entry.state, error);
                }
            }
            Action::Transient { key, error } => {
                if let Some(entry) = self.entries.get_mut(&key) {
                    federation::transient(&mut entry.state, &error);
                }
            }
            Action::ListMembers {
                collection,
                members,
            } => self.set_members(collection, members),
            Action::ForgetList { collection } => {
                self.views.remove(&collection);
                self.lists_touched = true;
            }
            Action::StreamHealthy { server } => {
                for entry in self.entries.values_mut() {
                    let served_by = entry.provenance == server
                        || entry
                            .state
                            .source
                            .as_ref()
                            .is_some_and(|s| s.server == server);
                    if served_by {
                        federation::healthy_again(&mut entry.state);
                    }
                }
            }
            _ => {}
        }
    }

    /// A delivery, with the invariants it must keep.
    fn deliver(&mut self, event: &CoreEvent, source: Source) {
        let Some(key) = federation::key_of(event).cloned() else {
            return;
        };
        if let CoreEvent::Upsert { .. } = event {
            let fetched_as = if source.fetched_as.is_empty() {
                &key.name
            } else {
                &source.fetched_as
            };
            let authority = authority_of(fetched_as).unwrap_or_default();
            let allowed = self
                .servers_of
                .get(authority)
                .is_some_and(|s| s.contains(&source.server));
            assert!(
                allowed,
                "{} delivered from {}, which does not serve the authority of {fetched_as}",
                key.name, source.server
            );
            if is_list(fetched_as) {
                self.check_served_by_active(fetched_as, &source);
            }
        }
        self.lists_touched |= is_list(&key.name);
        let trace = self.trace;
        let Some(entry) = self.entries.get_mut(&key) else {
            self.deliver_member(&key, event, source);
            return;
        };
        let had_copy = entry.state.resource.is_some();
        apply_delivery(&mut entry.state, &mut entry.reported, event, source);
        if had_copy && entry.state.resource.is_none() {
            assert!(
                matches!(event, CoreEvent::Removed { .. }),
                "{}: the last good copy was dropped by {event:?}",
                key.name
            );
        }
        if let Some(tag) = tag_of(&entry.state) {
            assert!(
                tag != "poison",
                "{}: a watcher saw a copy that failed validation",
                key.name
            );
            if trace {
                eprintln!("          {} now holds {tag}", key.name);
            }
        }
    }

    /// Right after `label` failed (`reachable` false: gRFC A57's failure)
    /// or answered (true), for the authority whose primary it is:
    ///
    /// - gRFC A95: with `fallback_on_reachability_only`, a failed primary
    ///   leaves an authority that fetches anything on its secondary, which
    ///   is asked for every one of its resources, cached or not;
    /// - gRFC A71 (and A95): an answering primary is active again, and the
    ///   secondary is asked for none of them.
    pub(crate) fn check_primary_reachability(&self, label: &str, reachable: bool) {
        let Some(authority) = label.strip_suffix('1') else {
            return;
        };
        let partition = Partition::Authority(authority.to_owned());
        let Some(state) = self.fed.authorities.get(&partition) else {
            return;
        };
        let secondary = &self.peers[format!("{authority}2").as_str()].session;
        let asked = state.keys.iter().filter(|k| secondary.is_subscribed(k));
        if reachable {
            assert_eq!(
                state.active, 0,
                "authority {authority}: its primary {label} answers, yet it stays on its fallback"
            );
            assert_eq!(
                asked.count(),
                0,
                "authority {authority}: back on {label}, yet its secondary is still asked"
            );
        } else if self.reachability_only.contains(&authority) && !state.keys.is_empty() {
            assert!(
                state.active > 0,
                "authority {authority} (fallback_on_reachability_only): its primary {label} is unreachable, yet it stays on it"
            );
            assert_eq!(
                asked.count(),
                state.keys.len(),
                "authority {authority} (fallback_on_reachability_only): on its fallback, not every resource is asked of it"
            );
        }
    }

    /// Once faults stop: every authority is back on its primary, and every
    /// watched entry holds what the primary holds (following redirects).
    pub(crate) fn check_converged(&self) {
        for authority in self.fed.authority_status() {
            assert!(
                !authority.on_fallback,
                "authority {:?} is still on its fallback server {}",
                authority.authority, authority.active
            );
        }
        for (key, entry) in &self.entries {
            if is_list(&key.name) {
                self.check_list_converged(key, &entry.state);
                continue;
            }
            match self.expected(&key.name) {
                Expect::Copy(tag) => assert_eq!(
                    tag_of(&entry.state).as_deref(),
                    Some(tag.as_str()),
                    "{} holds the wrong copy after the faults stopped ({:?})",
                    key.name,
                    entry.state.status
                ),
                Expect::Absent => assert_eq!(
                    entry.state.status,
                    ResourceStatus::DoesNotExist,
                    "{} should not exist after the faults stopped",
                    key.name
                ),
                _ => {}
            }
        }
    }

    /// What `name`'s watchers should hold: the primary's copy, through its
    /// redirects.
    pub(super) fn expected(&self, name: &str) -> Expect {
        let mut name = name.to_owned();
        let mut seen = vec![name.clone()];
        loop {
            let authority = authority_of(&name).unwrap_or_default();
            let primary = &self.peers[if authority == "a" { "a1" } else { "b1" }];
            let held = primary.server.truth.get(&name);
            if held.is_some_and(|(v, _)| primary.server.spoiled.contains(&(name.clone(), *v))) {
                return Expect::Unknown;
            }
            match held.map(|(_, b)| b) {
                None if seen.len() == 1 => return Expect::Absent,
                None => return Expect::Unknown,
                Some(Body::Valid(tag)) => return Expect::Copy(tag.clone()),
                Some(Body::List(members)) => return Expect::List(members.clone()),
                Some(Body::Poison | Body::Malformed | Body::FlawedList(..)) => {
                    return Expect::Unknown;
                }
                Some(Body::Redirect(authority, id)) => {
                    name = super::name(authority, id);
                    if seen.contains(&name) || seen.len() > 8 {
                        return Expect::Unknown;
                    }
                    seen.push(name.clone());
                }
            }
        }
    }
}

/// What a watcher should hold once faults stop.
pub(super) enum Expect {
    /// A cluster, by its tag.
    Copy(String),
    /// A LEDS list collection's endpoints.
    List(Vec<Member>),
    Absent,
    Unknown,
}

fn tag_of(state: &crate::entry::ResourceState) -> Option<String> {
    let cluster = state.resource.as_ref()?.downcast::<ClusterView>()?;
    Some(cluster.decode().ok()?.alt_stat_name)
}
