//! Collection roots (xDS TP1): listeners or clusters that are roots because
//! a glob or list collection holds them.
//!
//! A member is a root like a named one, counted once per collection holding
//! it ([`Node::collections`]). The collection delivers its members' values
//! itself, so the engine does not watch a member on its own, unless the
//! member leaves the collection while something else still reaches it: then
//! it is watched from that moment, by name.
//!
//! Readiness: a collection holds snapshots back until its first answer of
//! any kind (or the warming timeout). A list collection names its members
//! ([`CollectionUpdate::Listed`]); each named member without a value is a
//! cold node, so the first snapshot waits for all of them, as for any
//! resource the graph reaches. A glob has no member list: its members
//! arrive together in the server's response, which the driver feeds as one
//! batch.

use std::sync::Arc;
use std::time::Instant;
use xdsfed_core::hash::HashSet;

use imbl::OrdSet;

use super::apply::GraphResource;
use super::node::{Node, State};
use super::{GraphEngine, Listing, WatchChange};
use crate::edges::{Key, ParseCx};
use crate::error::GraphError;
use crate::resource::{CollectionUpdate, ResourceKind, Update};
use crate::snapshot::CollectionSnapshot;

/// One collection root.
#[derive(Debug)]
pub(super) struct CollectionRoot {
    pub(super) kind: ResourceKind,
    pub(super) listing: Listing,
    /// Its members now; shared with the snapshots cut from it.
    pub(super) members: OrdSet<Arc<str>>,
    /// Whether it has named its members (a list collection).
    pub(super) listed: bool,
    /// The collection's own error, until its next good update.
    pub(super) error: Option<GraphError>,
}

impl GraphEngine {
    /// Registers collection root `name` and asks for its watch.
    pub(super) fn add_collection(&mut self, now: Instant, kind: ResourceKind, name: &str) {
        let name: Arc<str> = Arc::from(name);
        if self.collections.contains_key(&name) {
            return;
        }
        self.watch_changes.push_back(WatchChange::WatchCollection {
            kind,
            name: Arc::clone(&name),
        });
        self.dirty_collections.insert(Arc::clone(&name));
        self.collections.insert(
            name,
            CollectionRoot {
                kind,
                listing: Listing::Waiting {
                    deadline: now + self.opts.warming_timeout,
                },
                members: OrdSet::new(),
                listed: false,
                error: None,
            },
        );
    }

    /// Applies `update` to collection `collection` of members of `kind`.
    pub(super) fn on_collection_update<T: GraphResource>(
        &mut self,
        now: Instant,
        kind: ResourceKind,
        collection: &str,
        update: CollectionUpdate<T>,
    ) {
        let Some((name, root)) = self.collections.get_key_value(collection) else {
            tracing::debug!(%collection, "update for a collection the graph does not follow");
            return;
        };
        if root.kind != kind {
            tracing::debug!(%collection, %kind, "collection update of another kind");
            return;
        }
        let name = Arc::clone(name);
        if let Some(root) = self.collections.get_mut(&name) {
            root.listing = Listing::Synced;
        }
        match update {
            CollectionUpdate::Listed(members) => {
                let gone = self.with_root(&name, |root| {
                    root.listed = true;
                    root.error = None;
                    let listed: HashSet<&Arc<str>> = members.iter().collect();
                    root.members
                        .iter()
                        .filter(|m| !listed.contains(m))
                        .cloned()
                        .collect()
                });
                for member in &gone {
                    self.leave(&name, kind, member);
                }
                for member in members.iter() {
                    self.join(now, &name, kind, member);
                }
            }
            CollectionUpdate::Member(member, update) => {
                self.on_member(now, &name, kind, &member, update)
            }
            CollectionUpdate::Removed(member) => self.leave(&name, kind, &member),
            CollectionUpdate::Empty => {
                let members = self.with_root(&name, |root| {
                    root.error = None;
                    root.members.iter().cloned().collect()
                });
                for member in &members {
                    self.leave(&name, kind, member);
                }
            }
            CollectionUpdate::Error(error) => {
                let error = GraphError::Resource {
                    kind,
                    name: Arc::clone(&name),
                    error: Arc::new(error),
                };
                self.with_root(&name, |root| {
                    root.error = Some(error);
                    Vec::new()
                });
            }
        }
    }

    /// Runs `f` on collection `name`'s root, marking its entry for
    /// rebuilding when its error changed; returns the members `f` picks.
    fn with_root(
        &mut self,
        name: &Arc<str>,
        f: impl FnOnce(&mut CollectionRoot) -> Vec<Arc<str>>,
    ) -> Vec<Arc<str>> {
        let Some(root) = self.collections.get_mut(name) else {
            return Vec::new();
        };
        let had_error = root.error.is_some();
        let picked = f(root);
        if had_error || root.error.is_some() {
            self.dirty_collections.insert(Arc::clone(name));
        }
        picked
    }

    /// One member's update.
    fn on_member<T: GraphResource>(
        &mut self,
        now: Instant,
        collection: &Arc<str>,
        kind: ResourceKind,
        member: &Arc<str>,
        update: Update<T>,
    ) {
        let key = Key::new(kind, Arc::clone(member));
        let listed = self.collections.get(collection).is_some_and(|c| c.listed);
        let state = match update {
            Update::AmbientError(error) => {
                return self.on_ambient(&key, error);
            }
            // A glob member the server deleted has left the glob; a listed
            // member that does not exist is still listed, and absent.
            Update::DoesNotExist if !listed => return self.leave(collection, kind, member),
            Update::DoesNotExist => {
                if !self.is_member(collection, member) {
                    return;
                }
                self.state_of(kind, &key, Update::<T>::DoesNotExist)
            }
            update => self.state_of(kind, &key, update),
        };
        let Some(state) = state else { return };
        if matches!(state, State::Present { .. }) {
            self.with_root(collection, |root| {
                root.error = None;
                Vec::new()
            });
        }
        self.join(now, collection, kind, member);
        self.replace_state(now, &key, state);
    }

    fn is_member(&self, collection: &Arc<str>, member: &Arc<str>) -> bool {
        self.collections
            .get(collection)
            .is_some_and(|c| c.members.contains(member))
    }

    /// Makes `member` a member of `collection`: a root, live, and cold until
    /// its value arrives if it had none.
    fn join(&mut self, now: Instant, collection: &Arc<str>, kind: ResourceKind, member: &Arc<str>) {
        let Some(root) = self.collections.get_mut(collection) else {
            return;
        };
        if root.members.insert(Arc::clone(member)).is_some() {
            return;
        }
        self.dirty_collections.insert(Arc::clone(collection));
        let key = Key::new(kind, Arc::clone(member));
        if let Some(node) = self.nodes.get_mut(&key) {
            node.collections += 1;
            return;
        }
        if self.retired.contains_key(&key) {
            self.revive(now, &key);
            if let Some(node) = self.nodes.get_mut(&key) {
                node.collections += 1;
            }
            return;
        }
        // The collection delivers its members: no watch of its own.
        let mut node = Node::new(State::Cold {
            deadline: now + self.opts.warming_timeout,
            last_error: None,
        });
        node.collections = 1;
        self.insert_node(key, node);
    }

    /// Takes `member` out of `collection`. A member nothing else holds is
    /// retired; one something still reaches is watched on its own from now.
    fn leave(&mut self, collection: &Arc<str>, kind: ResourceKind, member: &Arc<str>) {
        let Some(root) = self.collections.get_mut(collection) else {
            return;
        };
        if root.members.remove(member).is_none() {
            return;
        }
        self.dirty_collections.insert(Arc::clone(collection));
        let key = Key::new(kind, Arc::clone(member));
        let Some(node) = self.nodes.get_mut(&key) else {
            return;
        };
        node.collections = node.collections.saturating_sub(1);
        if node.collections > 0 {
            return;
        }
        self.retire_if_orphan(&key);
        let Some(node) = self.nodes.get_mut(&key) else {
            return;
        };
        if !node.watched && !node.wildcard_member {
            let cx = ParseCx {
                known: &self.opts.known_authorities,
                trust: self.opts.trust(),
                server: "",
            };
            let referrer: Arc<str> = Arc::clone(collection);
            if let Ok(via) = cx.resolve(kind, member, None, &referrer) {
                node.watched = true;
                self.watch_changes.push_back(WatchChange::Watch {
                    kind,
                    name: Arc::clone(member),
                    via,
                });
            }
        }
    }

    /// The collection's entry of the next snapshot.
    pub(super) fn build_collection(&self, name: &Arc<str>) -> Option<CollectionSnapshot> {
        let root = self.collections.get(name)?;
        Some(CollectionSnapshot {
            name: Arc::clone(name),
            kind: root.kind,
            error: root.error.clone(),
            members: root.members.clone(),
        })
    }
}
