//! List collections (xDS TP1): a body's members, watched or delivered.

use crate::hash::HashSet;
use std::sync::Arc;

use super::state::Home;
use super::{Action, Federation, short_type};
use crate::authority::Partition;
use crate::entry::Source;
use crate::error::{Cause, ErrorKind, XdsError};
use crate::name::ResourceName;
use crate::protocol::{CoreEvent, RemovedReason, ResourceKey};
use crate::types::{Decoded, ListCollection, ListEntry, anonymous_key, entry_key};

impl Federation {
    /// Acts on a new body of the watched list collection `collection`
    /// (`None`: it was deleted, so it has no members): locator members are
    /// watched on their own, inline ones are delivered under their keys, and
    /// members that left are let go. A body with the same bytes as the last
    /// one changes nothing.
    pub(super) fn update_list(
        &mut self,
        collection: &ResourceKey,
        body: Option<&Decoded>,
        source: &Source,
    ) {
        let Some(list) = self.lists.get_mut(collection) else {
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
        let members = Members::of(collection, member_type, entries, source);
        self.apply_members(collection, members, source);
    }

    fn apply_members(&mut self, collection: &ResourceKey, members: Members, source: &Source) {
        let Some(list) = self.lists.get_mut(collection) else {
            return;
        };
        // `#entry=` watches of entries the collection no longer has.
        let gone: Vec<ResourceKey> = list
            .wanted
            .iter()
            .filter(|k| !members.all.contains(*k))
            .cloned()
            .collect();
        let joined: Vec<ResourceKey> = members
            .locators
            .difference(&list.locators)
            .cloned()
            .collect();
        let left: Vec<ResourceKey> = list
            .locators
            .difference(&members.locators)
            .cloned()
            .collect();
        list.locators = members.locators;
        self.actions.push_back(Action::ListMembers {
            collection: collection.clone(),
            members: members.all,
        });
        for (event, source) in members.inline {
            self.actions.push_back(Action::Deliver { event, source });
        }
        for key in gone {
            let event = CoreEvent::Removed {
                key,
                reason: RemovedReason::Deleted,
            };
            self.actions.push_back(Action::Deliver {
                event,
                source: source.clone(),
            });
        }
        for member in joined {
            self.watch_member(collection, &member);
        }
        for member in left {
            self.release_member(&member);
        }
    }

    /// Watches the locator member `member` of `collection` for it, on the
    /// member's own authority (which must be in the bootstrap).
    fn watch_member(&mut self, collection: &ResourceKey, member: &ResourceKey) {
        let parsed = match ResourceName::parse(&member.name) {
            Ok(parsed) => parsed,
            Err(e) => {
                tracing::warn!(%collection, %member, error = %e, "list collection member has an invalid name");
                return;
            }
        };
        let partition = Partition::of(&parsed);
        if let Err(e) = self.ensure_authority(&partition, &parsed) {
            // The member gets an entry, so the collection's watchers hear
            // why it is missing.
            self.actions.push_back(Action::HoldEntry {
                key: member.clone(),
                server: None,
            });
            let message = format!(
                "{} {} listed by list collection {}: refused: {e}",
                short_type(&member.type_url),
                member.name,
                collection.name
            );
            let error = XdsError::new(ErrorKind::ServerError, message)
                .with_cause(Cause::UnknownAuthority)
                .with_resource(member.clone());
            self.actions.push_back(Action::DataError {
                key: member.clone(),
                error,
            });
            return;
        }
        let server = self
            .authorities
            .get(&partition)
            .and_then(|a| a.servers.first().copied());
        self.actions.push_back(Action::HoldEntry {
            key: member.clone(),
            server,
        });
        self.add_watcher(member, Home::Authority(partition), None);
    }

    /// Lets go of a member the collection no longer lists (or no longer
    /// holds).
    pub(super) fn release_member(&mut self, member: &ResourceKey) {
        self.actions.push_back(Action::ReleaseEntry {
            key: member.clone(),
        });
        self.unwatch(member);
    }
}

/// A list body's members.
struct Members {
    /// Every member's key.
    all: HashSet<ResourceKey>,
    /// The locator members.
    locators: HashSet<ResourceKey>,
    /// The inline entries, as deliveries under their keys.
    inline: Vec<(CoreEvent, Source)>,
}

impl Members {
    fn of(
        collection: &ResourceKey,
        member_type: &'static str,
        entries: &[ListEntry],
        source: &Source,
    ) -> Self {
        let mut members = Members {
            all: HashSet::default(),
            locators: HashSet::default(),
            inline: Vec::new(),
        };
        for (index, entry) in entries.iter().enumerate() {
            match entry {
                ListEntry::Locator(target) => {
                    let key = ResourceKey::new(member_type, Arc::clone(target));
                    members.all.insert(key.clone());
                    members.locators.insert(key);
                }
                ListEntry::Inline {
                    name,
                    version,
                    resource,
                } => {
                    let name = match name {
                        Some(name) => entry_key(&collection.name, name),
                        None => anonymous_key(&collection.name, index),
                    };
                    let key = ResourceKey::new(member_type, name);
                    members.all.insert(key.clone());
                    let source = Source {
                        fetched_as: Arc::clone(&collection.name),
                        ..source.clone()
                    };
                    let event = CoreEvent::Upsert {
                        key,
                        resource: resource.clone(),
                        version: version.clone(),
                        ttl: None,
                    };
                    members.inline.push((event, source));
                }
            }
        }
        members
    }
}
