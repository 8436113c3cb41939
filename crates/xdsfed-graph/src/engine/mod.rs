//! The sans-IO graph engine.
//!
//! ```text
//!  on_listener / on_route_config ─►┐             ┌─► poll_snapshot ─► Arc<Snapshot> to publish
//!  on_cluster / on_endpoints      ─►│ GraphEngine ├─► poll_watch    ─► Watch / Unwatch for the client
//!  handle_timeout                 ─►┘             └─► poll_timeout  ─► when to call handle_timeout
//! ```
//!
//! The engine never reads a clock and never blocks: the driver passes `now`
//! in, delivers what the xDS client reported, and carries out what the
//! engine asks for. Methods come in four families, as in quinn-proto:
//! getters, `on_*`/`handle_*` inputs, and `#[must_use] poll_*` outputs.
//!
//! # Polling order
//! After feeding every event that is available (feed a whole batch before
//! polling, so a response carrying many resources yields one snapshot):
//! 1. drain [`poll_snapshot`](GraphEngine::poll_snapshot) and publish;
//! 2. drain [`poll_watch`](GraphEngine::poll_watch) (publishing a snapshot
//!    can release `Unwatch`es, so this comes second);
//! 3. sleep until [`poll_timeout`](GraphEngine::poll_timeout) or the next
//!    event.
//!
//! # Rules
//! - **Following.** A node is created, and watched, when an edge from a
//!   live node first reaches it (see [`crate::edges`]).
//! - **Readiness** (A74). A snapshot is produced only when no reachable
//!   node is cold: each has arrived, or is known not to exist, or has a
//!   definite error, or has outlived the warming timeout.
//! - **Make before break.** Because of readiness, an update that adds or
//!   repoints to a cold resource does not replace the published snapshot
//!   until that resource is warm: the old snapshot serves meanwhile.
//! - **Garbage collection.** A node that no root reaches any more is retired
//!   at once (it stops counting for readiness); its `Unwatch` is released
//!   when the next snapshot is published, so the old snapshot's resources keep
//!   being followed while it is still the one serving. Aggregate cluster
//!   cycles cut off from every root are found and retired too.
//! - **Collections.** A glob or list collection in the roots makes each of
//!   its members a root while it is a member (module `collections`); the
//!   first snapshot waits for the collection's first answer and for every
//!   member a list collection names.
//! - **LEDS.** A ClusterLoadAssignment's locality may name an `LbEndpoint`
//!   glob collection (module `leds`): the collection is one node, watched
//!   like any resource the graph reaches and warm at its first answer; the
//!   snapshot shows its members as that locality's `lb_endpoints`.
//! - **Work in proportion to change.** An update dirties the snapshot
//!   entries that depend on it (endpoints → their clusters; a cluster →
//!   itself and, if its aggregate children changed, its aggregate
//!   ancestors; a route configuration → itself and its listeners); only
//!   those are rebuilt, into persistent maps.
//! - **Building ahead.** While the graph is not ready, a cluster whose
//!   entry reads only present nodes (its own, and its assignment without
//!   LEDS localities) is built as soon as it is marked, while what it reads
//!   is fresh in the processor's cache, rather than all at once in the
//!   first snapshot; it is no longer dirty, and any later change to what it
//!   reads marks it again. The snapshots published are the same.

mod apply;
mod build;
mod collections;
mod leds;
mod links;
mod node;
#[cfg(test)]
mod tests;
mod warming;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;
use xdsfed_core::hash::{HashMap, HashSet};

use envoy_types::pb::envoy::config::listener::v3::Listener;
use imbl::OrdMap;
use xdsfed_core::types::ClusterView;
use xdsfed_core::types::RouteConfigView;
use xdsfed_core::types::{LedsEndpoint, LoadAssignment};

use crate::edges::{Key, KeyView, ParseCx, Via, canonical_name};
use crate::options::{GraphOptions, Roots};
use crate::resource::{CollectionUpdate, ResourceKind, Update};
use crate::snapshot::Snapshot;
use node::{Node, State};

/// What the engine asks of the xDS client.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchChange {
    /// Start watching a resource the graph now reaches.
    Watch {
        /// Its type.
        kind: ResourceKind,
        /// Its canonical name; report updates under exactly this name.
        name: Arc<str>,
        /// How to reach its server.
        via: Via,
    },
    /// Stop watching: nothing in the published snapshot references it.
    Unwatch {
        /// Its type.
        kind: ResourceKind,
        /// Its name, as given in the `Watch`.
        name: Arc<str>,
    },
    /// Watch every resource of this type (wildcard LDS or CDS).
    WatchAll {
        /// The type.
        kind: ResourceKind,
    },
    /// Watch a glob or list collection of resources of this type (xDS
    /// TP1) and report it with
    /// [`on_listener_collection`](GraphEngine::on_listener_collection) or
    /// [`on_cluster_collection`](GraphEngine::on_cluster_collection).
    WatchCollection {
        /// The members' type: listeners or clusters.
        kind: ResourceKind,
        /// The collection's name, exactly as given in the roots.
        name: Arc<str>,
    },
}

/// Whether a root that is a set of resources (a wildcard subscription, a
/// collection) has said what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Off,
    /// Nothing delivered yet; holds snapshots back until `deadline`.
    Waiting {
        deadline: Instant,
    },
    Synced,
}

/// Follows the resource graph and decides when a complete snapshot exists.
/// See the [module documentation](self) for the rules.
#[derive(Debug)]
pub struct GraphEngine {
    opts: GraphOptions,
    /// Every live node: reached from a root. Boxed: a node is 200 bytes,
    /// and a table of a million of them inline would hold that room in
    /// every empty slot and move it at every rehash.
    nodes: HashMap<Key, Box<Node>>,
    /// Nodes retired since the last publication; their `Unwatch` waits for
    /// it, and a node referenced again before then is revived from here.
    retired: HashMap<Key, Box<Node>>,
    /// Warming deadlines of the cold live nodes, and stale ones (see
    /// [`warming`]).
    timers: warming::WarmingTimers,
    /// How many live nodes are cold.
    cold: usize,
    wildcard_listeners: Listing,
    wildcard_clusters: Listing,
    /// Collection roots by name.
    collections: HashMap<Arc<str>, collections::CollectionRoot>,
    /// Collections whose snapshot entry must be rebuilt.
    dirty_collections: HashSet<Arc<str>>,
    /// Snapshot entries to rebuild (listeners, route configurations,
    /// clusters) at the next publication.
    dirty: HashSet<Key>,
    /// LEDS collections whose clusters are in `dirty` already: the other
    /// members of a collection that change before the next publication
    /// have nothing more to mark.
    marked_leds: HashSet<Key>,
    /// Clusters marked dirty while the graph was not ready, since the last
    /// [`prebuild`](Self::prebuild): the ones whose entries may be built
    /// ahead of the first snapshot. Never longer than `dirty`.
    marked_cold: Vec<Key>,
    watch_changes: VecDeque<WatchChange>,
    /// The maps the next snapshot is cut from; always current for the
    /// entries not in `dirty`.
    out: Snapshot,
    last: Option<Arc<Snapshot>>,
}

impl GraphEngine {
    /// An engine that starts from `roots`. Their watches are waiting in
    /// [`poll_watch`](Self::poll_watch); their warming timers start at `now`.
    pub fn new(roots: Roots, opts: GraphOptions, now: Instant) -> Self {
        let deadline = now + opts.warming_timeout;
        let wildcard = |on: bool| {
            if on {
                Listing::Waiting { deadline }
            } else {
                Listing::Off
            }
        };
        let mut engine = Self {
            wildcard_listeners: wildcard(roots.all_listeners),
            wildcard_clusters: wildcard(roots.all_clusters),
            opts,
            nodes: HashMap::default(),
            retired: HashMap::default(),
            timers: warming::WarmingTimers::default(),
            cold: 0,
            collections: HashMap::default(),
            dirty_collections: HashSet::default(),
            dirty: HashSet::default(),
            marked_leds: HashSet::default(),
            marked_cold: Vec::new(),
            watch_changes: VecDeque::new(),
            out: Snapshot {
                generation: 0,
                listeners: OrdMap::new(),
                route_configs: OrdMap::new(),
                clusters: OrdMap::new(),
                collections: OrdMap::new(),
            },
            last: None,
        };
        for (kind, all) in [
            (ResourceKind::Listener, roots.all_listeners),
            (ResourceKind::Cluster, roots.all_clusters),
        ] {
            if all {
                engine
                    .watch_changes
                    .push_back(WatchChange::WatchAll { kind });
            }
        }
        let named = roots
            .listeners
            .iter()
            .map(|n| (ResourceKind::Listener, n))
            .chain(roots.clusters.iter().map(|n| (ResourceKind::Cluster, n)));
        for (kind, raw) in named {
            engine.add_root(now, kind, raw);
        }
        let collections = roots
            .listener_collections
            .iter()
            .map(|n| (ResourceKind::Listener, n))
            .chain(
                roots
                    .cluster_collections
                    .iter()
                    .map(|n| (ResourceKind::Cluster, n)),
            );
        for (kind, name) in collections {
            engine.add_collection(now, kind, name);
        }
        engine
    }

    fn add_root(&mut self, now: Instant, kind: ResourceKind, raw: &str) {
        let referrer: Arc<str> = Arc::from("the graph's roots");
        let cx = ParseCx {
            known: &self.opts.known_authorities,
            trust: self.opts.trust(),
            server: "",
        };
        let (name, via) = match canonical_name(kind, raw) {
            Ok(name) => {
                let via = cx.resolve(kind, &name, None, &referrer);
                (name, via)
            }
            Err(e) => (Arc::from(raw), Err(e)),
        };
        let key = Key::new(kind, name);
        if let Some(node) = self.nodes.get_mut(&key) {
            node.named_root = true;
            return;
        }
        let mut node = self.new_node(now, &key, via);
        node.named_root = true;
        self.insert_node(key, node);
    }

    // ---- getters ----

    /// The options the engine runs with.
    pub fn options(&self) -> &GraphOptions {
        &self.opts
    }

    /// The snapshot most recently returned by
    /// [`poll_snapshot`](Self::poll_snapshot).
    pub fn current(&self) -> Option<&Arc<Snapshot>> {
        self.last.as_ref()
    }

    /// How many reachable resources are still cold.
    pub fn cold_count(&self) -> usize {
        self.cold
    }

    /// How many resources the graph currently reaches.
    pub fn reachable_count(&self) -> usize {
        self.nodes.len()
    }

    /// Whether every reachable resource is warm or definitely failed, so
    /// that a snapshot can be cut.
    pub fn is_ready(&self) -> bool {
        self.cold == 0
            && !matches!(self.wildcard_listeners, Listing::Waiting { .. })
            && !matches!(self.wildcard_clusters, Listing::Waiting { .. })
            && !self
                .collections
                .values()
                .any(|c| matches!(c.listing, Listing::Waiting { .. }))
    }

    // ---- inputs ----

    /// The client reported on listener `name`.
    pub fn on_listener(&mut self, now: Instant, name: &str, update: Update<Listener>) {
        self.on_update(now, ResourceKind::Listener, name, update);
    }

    /// The client reported on route configuration `name`.
    pub fn on_route_config(&mut self, now: Instant, name: &str, update: Update<RouteConfigView>) {
        self.on_update(now, ResourceKind::RouteConfiguration, name, update);
    }

    /// The client reported on cluster `name`.
    pub fn on_cluster(&mut self, now: Instant, name: &str, update: Update<ClusterView>) {
        self.on_update(now, ResourceKind::Cluster, name, update);
    }

    /// The client reported on the ClusterLoadAssignment `name` (an EDS
    /// service name).
    pub fn on_endpoints(&mut self, now: Instant, name: &str, update: Update<LoadAssignment>) {
        self.on_update(now, ResourceKind::ClusterLoadAssignment, name, update);
    }

    /// The client reported on the LEDS glob collection `collection` (xDS
    /// TP1), which the engine asked for with a
    /// [`WatchChange::Watch`] of kind [`ResourceKind::LbEndpoint`]: a
    /// ClusterLoadAssignment's locality takes its endpoints from it.
    pub fn on_leds(
        &mut self,
        now: Instant,
        collection: &str,
        update: CollectionUpdate<LedsEndpoint>,
    ) {
        self.on_leds_update(now, Arc::from(collection), update);
    }

    /// [`GraphEngine::on_leds`] with the collection's name already shared:
    /// the driver's, which has one for every member's change.
    pub(crate) fn on_leds_shared(
        &mut self,
        now: Instant,
        collection: Arc<str>,
        update: CollectionUpdate<LedsEndpoint>,
    ) {
        self.on_leds_update(now, collection, update);
    }

    /// The client reported on the listener collection `collection`, a root
    /// given to [`Roots::listener_collection`].
    pub fn on_listener_collection(
        &mut self,
        now: Instant,
        collection: &str,
        update: CollectionUpdate<Listener>,
    ) {
        self.on_collection_update(now, ResourceKind::Listener, collection, update);
    }

    /// The client reported on the cluster collection `collection`, a root
    /// given to [`Roots::cluster_collection`].
    pub fn on_cluster_collection(
        &mut self,
        now: Instant,
        collection: &str,
        update: CollectionUpdate<ClusterView>,
    ) {
        self.on_collection_update(now, ResourceKind::Cluster, collection, update);
    }

    /// Fires the warming timers due at `now`: each resource still cold is
    /// marked failed, so that the snapshot can go out without it. Spurious
    /// calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((deadline, key)) = self.timers.pop_due(now) {
            self.fire_warming_timeout(&key, deadline);
        }
        let collections = self.collections.values_mut().map(|c| &mut c.listing);
        for wildcard in [&mut self.wildcard_listeners, &mut self.wildcard_clusters]
            .into_iter()
            .chain(collections)
        {
            if let Listing::Waiting { deadline } = *wildcard
                && deadline <= now
            {
                // An empty or silent server: publish what there is.
                *wildcard = Listing::Synced;
            }
        }
    }

    // ---- outputs ----

    /// The next watch change for the client.
    #[must_use]
    pub fn poll_watch(&mut self) -> Option<WatchChange> {
        xdsfed_core::queue::pop_front(&mut self.watch_changes)
    }

    /// A new complete snapshot, when the graph is ready and something changed
    /// since the last one (or none was produced yet).
    #[must_use]
    pub fn poll_snapshot(&mut self) -> Option<Arc<Snapshot>> {
        if !self.is_ready() {
            self.prebuild();
            return None;
        }
        let unchanged = self.dirty.is_empty() && self.dirty_collections.is_empty();
        if unchanged && self.last.is_some() {
            return None;
        }
        let snapshot = Arc::new(self.publish());
        self.last = Some(Arc::clone(&snapshot));
        Some(snapshot)
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let wildcard = |w: Listing| match w {
            Listing::Waiting { deadline } => Some(deadline),
            Listing::Off | Listing::Synced => None,
        };
        [
            self.timers.first(),
            wildcard(self.wildcard_listeners),
            wildcard(self.wildcard_clusters),
        ]
        .into_iter()
        .chain(self.collections.values().map(|c| wildcard(c.listing)))
        .flatten()
        .min()
    }

    // ---- node bookkeeping shared by the submodules ----

    /// A fresh node for `key`: cold and watched when it can be fetched, in
    /// error (and never watched) when it cannot.
    fn new_node(&mut self, now: Instant, key: &Key, via: Result<Via, crate::GraphError>) -> Node {
        match via {
            Ok(via) => {
                self.watch_changes.push_back(WatchChange::Watch {
                    kind: key.kind,
                    name: Arc::clone(&key.name),
                    via,
                });
                let mut node = Node::new(State::Cold {
                    deadline: now + self.opts.warming_timeout,
                    last_error: None,
                });
                node.watched = true;
                node
            }
            Err(e) => Node::new(State::Absent(e)),
        }
    }

    /// The key of `kind` `name`: the node's own when it is live or
    /// retired (an update shares its name rather than allocating it
    /// again), a new one otherwise.
    fn key_of(&self, kind: ResourceKind, name: &str) -> Key {
        let view: &dyn KeyView = &(kind, name);
        self.nodes
            .get_key_value(view)
            .or_else(|| self.retired.get_key_value(view))
            .map_or_else(|| Key::new(kind, Arc::from(name)), |(key, _)| key.clone())
    }

    /// Makes `node` live, keeping the cold count and timers true.
    fn insert_node(&mut self, key: Key, node: impl Into<Box<Node>>) {
        let node = node.into();
        if let State::Cold { deadline, .. } = node.state {
            self.cold += 1;
            self.timers.arm(key.clone(), deadline);
        }
        self.mark_dirty(&key);
        self.nodes.insert(key, node);
    }

    /// Takes `key` out of the live graph, keeping the cold count true (its
    /// timer, if armed, goes stale).
    fn remove_node(&mut self, key: &Key) -> Option<Box<Node>> {
        let node = self.nodes.remove(key)?;
        if let State::Cold { .. } = node.state {
            self.cold -= 1;
            self.timers_wait_ended();
        }
        self.mark_dirty(key);
        Some(node)
    }

    /// Replaces the state of live node `key`, keeping the cold count and
    /// timers true. Returns whether the node's aggregate children changed.
    fn set_state(&mut self, key: &Key, state: State) -> bool {
        let Some(node) = self.nodes.get_mut(key) else {
            return false;
        };
        let before = node.aggregate_children().cloned();
        let armed = match node.state {
            State::Cold { deadline, .. } => {
                self.cold -= 1;
                Some(deadline)
            }
            _ => None,
        };
        if let State::Cold { deadline, .. } = state {
            self.cold += 1;
            // Still cold for the same deadline: its timer stands.
            if armed != Some(deadline) {
                self.timers.arm(key.clone(), deadline);
            }
        }
        node.state = state;
        let changed = before.as_ref() != node.aggregate_children();
        if armed.is_some() {
            self.timers_wait_ended();
        }
        changed
    }

    /// Lets the warming timers drop the entries of ended waits (see
    /// [`warming`]): an entry is live while its node is cold for its
    /// deadline.
    fn timers_wait_ended(&mut self) {
        let nodes = &self.nodes;
        self.timers.wait_ended(self.cold, |deadline, key| {
            matches!(
                nodes.get(key).map(|n| &n.state),
                Some(State::Cold { deadline: until, .. }) if *until == deadline
            )
        });
    }

    /// Records that the snapshot entry of `key` must be rebuilt. Endpoints
    /// and LEDS collections have no entry of their own.
    fn mark_dirty(&mut self, key: &Key) {
        if !matches!(
            key.kind,
            ResourceKind::ClusterLoadAssignment | ResourceKind::LbEndpoint
        ) {
            self.dirty.insert(key.clone());
            // Bounded by the dirty entries: a caller that feeds without
            // polling marks the same clusters again and again, and a mark
            // left out only means that entry is built at publication.
            if key.kind == ResourceKind::Cluster
                && self.cold > 0
                && self.marked_cold.len() < self.dirty.len()
            {
                self.marked_cold.push(key.clone());
            }
        }
    }
}
