//! Edges between live nodes, and garbage collection.
//!
//! Each live node knows its parents. A node stays live while it is a root or
//! has a parent; when the last parent lets go, the node is retired and lets
//! go of its own children in turn. That is reference counting, which alone
//! would keep an aggregate cluster cycle alive after the route that reached
//! it is gone. So when a cluster loses a parent but keeps only cluster
//! parents, the engine walks up from it: if no node on the way is a root or
//! has a listener or route configuration parent (those are always anchored,
//! since only roots reach them), the whole set walked is unreachable and is
//! retired together.
//!
//! The walks use explicit work lists rather than recursion: a server could
//! send an arbitrarily long chain of aggregate clusters.

use std::sync::Arc;
use std::time::Instant;
use xdsfed_core::hash::HashSet;

use super::GraphEngine;
use crate::edges::{Edge, Key};
use crate::resource::ResourceKind;

impl GraphEngine {
    /// Moves `parent`'s edges from `old` to `new`: targets only in `new` gain
    /// the parent (and are created, or revived, if they were not live);
    /// targets only in `old` lose it (and are retired if nothing else holds
    /// them).
    pub(super) fn relink(&mut self, now: Instant, parent: &Key, old: &[Edge], new: &[Edge]) {
        if old.is_empty() && new.is_empty() {
            return;
        }
        let old_targets: HashSet<&Key> = old.iter().map(|e| &e.target).collect();
        let new_targets: HashSet<&Key> = new.iter().map(|e| &e.target).collect();
        // Attach before detaching, so a target that merely moves between
        // two edges is never retired on the way.
        let added: Vec<(Key, Edge)> = new
            .iter()
            .filter(|e| !old_targets.contains(&e.target))
            .map(|e| (parent.clone(), e.clone()))
            .collect();
        self.attach_all(now, added);
        let removed: Vec<(Key, Key)> = old
            .iter()
            .filter(|e| !new_targets.contains(&e.target))
            .map(|e| (e.target.clone(), parent.clone()))
            .collect();
        self.detach_all(removed);
    }

    fn attach_all(&mut self, now: Instant, mut work: Vec<(Key, Edge)>) {
        while let Some((parent, edge)) = work.pop() {
            let target = edge.target;
            if let Some(node) = self.nodes.get_mut(&target) {
                node.parents.insert(parent);
                continue;
            }
            if let Some(mut node) = self.retired.remove(&target) {
                // Referenced again before its Unwatch went out: it was
                // watched all along, so its state is current.
                node.parents.clear();
                node.parents.insert(parent);
                let edges = node.edges();
                self.insert_node(target.clone(), node);
                work.extend(edges.iter().map(|e| (target.clone(), e.clone())));
                continue;
            }
            let mut node = self.new_node(now, &target, edge.via.map_err(|e| *e));
            node.parents.insert(parent);
            self.insert_node(target, node);
        }
    }

    /// Brings retired node `key` back as a root, before its `Unwatch` went
    /// out: its state is current, and its edges are attached again.
    pub(super) fn revive(&mut self, now: Instant, key: &Key) {
        let Some(mut node) = self.retired.remove(key) else {
            return;
        };
        node.parents.clear();
        let edges = node.edges();
        self.insert_node(key.clone(), node);
        let work = edges.iter().map(|e| (key.clone(), e.clone())).collect();
        self.attach_all(now, work);
    }

    /// Removes each `(child, parent)` edge and retires what becomes
    /// unreachable, cascading.
    pub(super) fn detach_all(&mut self, mut work: Vec<(Key, Key)>) {
        while let Some((child, parent)) = work.pop() {
            let Some(node) = self.nodes.get_mut(&child) else {
                continue;
            };
            node.parents.remove(&parent);
            if node.is_root() {
                continue;
            }
            let doomed = if node.parents.is_empty() {
                vec![child]
            } else if child.kind == ResourceKind::Cluster
                && node.parents.iter().all(|p| p.kind == ResourceKind::Cluster)
            {
                match self.unanchored_set(&child) {
                    Some(set) => set.into_iter().collect(),
                    None => continue,
                }
            } else {
                continue;
            };
            self.retire(doomed, &mut work);
        }
    }

    /// Retires a node whose own state says it is no longer a root (a wildcard
    /// member that was deleted), if nothing else holds it.
    pub(super) fn retire_if_orphan(&mut self, key: &Key) {
        let orphan = self
            .nodes
            .get(key)
            .is_some_and(|n| !n.is_root() && n.parents.is_empty());
        if orphan {
            let mut work = Vec::new();
            self.retire(vec![key.clone()], &mut work);
            self.detach_all(work);
        }
    }

    /// Takes `doomed` out of the live graph and queues the edges from it to
    /// nodes outside it for detaching. Every parent of a doomed node is
    /// itself doomed, so no live aggregate cluster loses a child here (a
    /// parent that drops a child changed its own shape and was marked then).
    fn retire(&mut self, doomed: Vec<Key>, work: &mut Vec<(Key, Key)>) {
        let set: HashSet<&Key> = doomed.iter().collect();
        let mut outgoing = Vec::new();
        for key in &doomed {
            let Some(node) = self.remove_node(key) else {
                continue;
            };
            outgoing.extend(
                node.edges()
                    .iter()
                    .filter(|e| !set.contains(&e.target))
                    .map(|e| (e.target.clone(), key.clone())),
            );
            self.retired.insert(key.clone(), node);
        }
        work.extend(outgoing);
    }

    /// `None` if `start` is reachable from a root; otherwise every node from
    /// which `start` can be reached (all of them unreachable).
    fn unanchored_set(&self, start: &Key) -> Option<HashSet<Key>> {
        let mut seen = HashSet::from_iter([start.clone()]);
        let mut queue = vec![start.clone()];
        while let Some(key) = queue.pop() {
            // A parent missing from the live graph would break an invariant;
            // keeping the node is the safe answer.
            let node = self.nodes.get(&key)?;
            if node.is_root() {
                return None;
            }
            for parent in &node.parents {
                if parent.kind != ResourceKind::Cluster {
                    return None;
                }
                if seen.insert(parent.clone()) {
                    queue.push(parent.clone());
                }
            }
        }
        Some(seen)
    }

    /// Marks cluster `key` and every aggregate cluster above it dirty: their
    /// leaf lists are computed through it.
    pub(super) fn mark_cluster_and_aggregate_ancestors(&mut self, key: &Key) {
        let mut seen = HashSet::from_iter([key.clone()]);
        let mut queue = vec![key.clone()];
        while let Some(k) = queue.pop() {
            self.mark_dirty(&k);
            let Some(node) = self.nodes.get(&k) else {
                continue;
            };
            for parent in &node.parents {
                if parent.kind == ResourceKind::Cluster && seen.insert(parent.clone()) {
                    queue.push(parent.clone());
                }
            }
        }
    }

    /// Names the retired nodes' watches to drop; called at publication.
    pub(super) fn release_retired(&mut self) {
        for (key, node) in self.retired.drain() {
            if node.watched {
                self.watch_changes.push_back(super::WatchChange::Unwatch {
                    kind: key.kind,
                    name: Arc::clone(&key.name),
                });
            }
        }
    }
}
