//! The simulated world: the client (one protocol session per server, the
//! federation core, the model cache) and the four model servers.

use crate::hash::HashMap;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

use super::rng::Rng;
use super::server::{Body, ModelServer};
use super::{MAX_REQUESTS_PER_SECOND, SETTLE};
use crate::authority::{AuthorityRegistry, Partition, ServerId};
use crate::bootstrap::{ApiVariant, Bootstrap};
use crate::entry::{ResourceState, Source};
use crate::federation::tests::support::{CDS, with_reachability_only};
use crate::federation::{self, Action, Federation, Home};
use crate::name::{ResourceName, authority_of};
use crate::protocol::{
    AuthorityFilter, CoreEvent, Request, ResourceKey, Session, SessionConfig, StreamEnd,
};
use crate::types::TypeRegistry;

const SERVERS: [&str; 4] = ["a1", "a2", "b1", "b2"];
const AUTHORITIES: [&str; 2] = ["a", "b"];
const IDS: [&str; 4] = ["c0", "c1", "c2", "c3"];
/// How often a step is followed by one about list collections.
const LIST_STEP_PERCENT: u64 = 30;

/// Which authorities fall back on reachability alone (gRFC A95), drawn
/// from a generator of their own: the run's own draws, and so the runs of
/// the seeds kept as regressions, stay as they were.
fn draw_reachability_only(seed: u64) -> Vec<&'static str> {
    let mut rng = Rng::new(seed.rotate_left(32) ^ 0xa95);
    AUTHORITIES.into_iter().filter(|_| rng.chance(40)).collect()
}

/// The generator of the LEDS list collection draws, of its own like
/// [`draw_reachability_only`]'s, so that the run's other draws stay as
/// they were.
fn lists_rng(seed: u64) -> Rng {
    Rng::new(seed.rotate_left(16) ^ 0x1ed5)
}

fn name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

/// The client's side of one server, and the server.
struct Peer {
    id: ServerId,
    label: Arc<str>,
    types: Arc<TypeRegistry>,
    session: Session,
    server: ModelServer,
    open: bool,
    reconnect_at: Option<Instant>,
    failures: u32,
    down: VecDeque<(Instant, DeltaDiscoveryResponse)>,
}

/// One model cache entry.
struct Entry {
    state: ResourceState,
    reported: crate::entry::ReportedNack,
    watchers: usize,
    /// The server of its provenance (its authority's first).
    provenance: Arc<str>,
}

pub(crate) struct World {
    rng: Rng,
    trace: bool,
    t0: Instant,
    now: Instant,
    faults: bool,
    fed: Federation,
    peers: Peers,
    entries: BTreeMap<ResourceKey, Entry>,
    /// Watched names (with directives), one per watcher.
    watches: Vec<String>,
    /// Each authority's servers, by label.
    servers_of: HashMap<String, Vec<Arc<str>>>,
    /// The authorities with gRFC A95's `fallback_on_reachability_only`.
    reachability_only: Vec<&'static str>,
    /// Draws about LEDS list collections.
    lists_rng: Rng,
    /// Watched list collections, one per watcher.
    list_watches: Vec<String>,
    /// The members the cache holds for each watched list collection.
    views: BTreeMap<ResourceKey, BTreeMap<ResourceKey, Held>>,
    /// A list collection or a member changed since [`World::check_lists`]
    /// last ran.
    lists_touched: bool,
}

/// A model cache entry of a list collection's member.
struct Held {
    state: ResourceState,
    reported: crate::entry::ReportedNack,
}

impl World {
    pub(crate) fn new(seed: u64, trace: bool) -> Self {
        let reachability_only = draw_reachability_only(seed);
        if trace {
            eprintln!("fallback_on_reachability_only on {reachability_only:?}");
        }
        let bootstrap = Bootstrap::from_json_str(&with_reachability_only(&reachability_only))
            .expect("a valid bootstrap");
        let registry = AuthorityRegistry::new(&bootstrap);
        let types = Arc::new(TypeRegistry::with_builtin());
        let t0 = Instant::now();
        let mut peers = BTreeMap::new();
        for id in registry.server_ids() {
            let short = super::super::support::short(registry.key(id));
            let Some(label) = SERVERS.iter().find(|s| **s == short) else {
                continue;
            };
            let filter = AuthorityFilter::new().with_authority(&label[..1]);
            let config = SessionConfig::new(Node::default())
                .with_variant(ApiVariant::Delta)
                .with_does_not_exist_timeout(Duration::from_secs(5))
                .with_handshake_timeout(Duration::from_secs(3))
                .with_first_response_timeout(Some(Duration::from_secs(5)))
                .with_authorities(filter);
            peers.insert(
                *label,
                Peer {
                    id,
                    label: Arc::clone(registry.name(id)),
                    types: Arc::clone(&types),
                    session: Session::new(config, Arc::clone(&types)),
                    server: ModelServer::default(),
                    open: false,
                    reconnect_at: None,
                    failures: 0,
                    down: VecDeque::new(),
                },
            );
        }
        let mut servers_of: HashMap<String, Vec<Arc<str>>> = HashMap::default();
        for label in SERVERS {
            let label_key = Arc::clone(&peers[label].label);
            servers_of
                .entry(label[..1].to_owned())
                .or_default()
                .push(label_key);
        }
        World {
            rng: Rng::new(seed),
            trace,
            t0,
            now: t0,
            faults: true,
            fed: Federation::new(registry, 8),
            peers: Peers::new(peers),
            entries: BTreeMap::new(),
            watches: Vec::new(),
            servers_of,
            reachability_only,
            lists_rng: lists_rng(seed),
            list_watches: Vec::new(),
            views: BTreeMap::new(),
            lists_touched: false,
        }
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("[{:>7.3}s] {}", (self.now - self.t0).as_secs_f64(), what());
        }
    }

    pub(crate) fn run(&mut self, steps: usize) {
        for label in SERVERS {
            for id in IDS {
                if self.rng.chance(70) {
                    let body = self.random_body(label);
                    self.peer(label).server.set(&name(&label[..1], id), body);
                }
            }
        }
        self.seed_lists();
        for _ in 0..steps {
            self.random_step();
            if self.lists_rng.chance(LIST_STEP_PERCENT) {
                self.random_list_step();
            }
            let pause = Duration::from_millis(self.rng.below(4_000) as u64);
            self.advance(pause);
        }
        self.heal();
        self.advance(SETTLE);
        self.check_converged();
    }

    fn random_body(&mut self, label: &str) -> Body {
        match self.rng.below(20) {
            0 => Body::Poison,
            1 => Body::Malformed,
            2 | 3 => Body::Redirect(
                self.rng.pick(&AUTHORITIES).to_string(),
                self.rng.pick(&IDS).to_string(),
            ),
            _ => Body::Valid(format!("{label}-{}", self.rng.below(1000))),
        }
    }

    fn random_step(&mut self) {
        let label = *self.rng.pick(&SERVERS);
        let until = self.now + Duration::from_millis(1_000 + self.rng.below(20_000) as u64);
        match self.rng.below(16) {
            0..=2 => self.watch_random(),
            3 => self.unwatch_random(),
            4..=7 => {
                let id = *self.rng.pick(&IDS);
                let body = self.random_body(label);
                self.log(|| format!("{label} sets {id} to {body:?}"));
                self.server_change(label, |s| s.set(&name(&label[..1], id), body));
            }
            8 => {
                let id = *self.rng.pick(&IDS);
                self.log(|| format!("{label} deletes {id}"));
                self.server_change(label, |s| s.delete(&name(&label[..1], id)));
            }
            9 => self.lose_stream(label, "stream lost"),
            10 => {
                self.log(|| format!("{label} refuses connections for a while"));
                self.peer(label).server.refusing_until = Some(until);
                self.lose_stream(label, "connection lost");
            }
            11 => {
                self.log(|| format!("{label} goes silent for a while"));
                self.peer(label).server.silent_until = Some(until);
                self.lose_stream(label, "server restarted silent");
            }
            12 => {
                let keep = self.rng.chance(50);
                self.log(|| format!("{label} restarts (keeping its state: {keep})"));
                if !keep {
                    self.peer(label).server.truth.clear();
                }
                self.lose_stream(label, "server restarted");
            }
            13 => {
                self.log(|| format!("{label} holds its responses for a while"));
                self.peer(label).server.delayed_until = Some(until);
            }
            14 => {
                self.log(|| format!("{label} will repeat a name"));
                self.peer(label).server.duplicate_next = true;
            }
            _ => {
                let other = if label.starts_with('a') { "b" } else { "a" };
                let id = *self.rng.pick(&IDS[..]);
                let foreign = name(other, id);
                self.log(|| format!("{label} will send {foreign}, of another authority"));
                self.peer(label).server.foreign_next = Some(foreign);
            }
        }
    }

    fn peer(&mut self, label: &str) -> &mut Peer {
        self.peers.get_mut(label)
    }

    fn server_change(&mut self, label: &str, change: impl FnOnce(&mut ModelServer)) {
        let now = self.now;
        let peer = self.peer(label);
        change(&mut peer.server);
        for response in peer.server.push(&[]) {
            let at = peer.server.delayed_until.unwrap_or(now).max(now);
            peer.down.push_back((at, response));
        }
    }

    fn watch_random(&mut self) {
        let authority = *self.rng.pick(&AUTHORITIES);
        let id = *self.rng.pick(&IDS);
        let mut watched = name(authority, id);
        if self.rng.chance(30) {
            let other = if authority == "a" { "b" } else { "a" };
            let id = *self.rng.pick(&IDS[..]);
            watched = format!("{watched}#alt={}", name(other, id));
        }
        self.log(|| format!("watch {watched}"));
        let parsed = ResourceName::parse_user_supplied(&watched).expect("a valid name");
        let key = ResourceKey::new(CDS, parsed.canonical().as_ref());
        let alt = parsed
            .as_xdstp()
            .and_then(|n| n.directives().alt())
            .map(|a| ResourceKey::new(CDS, a.canonical()));
        let partition = Partition::of(&parsed);
        self.add_entry_watcher(&key, &parsed, authority);
        let answers = checks::Answers(&self.entries);
        self.fed
            .watch(&key, Home::Authority(partition), alt, &answers);
        self.watches.push(watched);
        self.drain();
    }

    fn unwatch_random(&mut self) {
        if self.watches.is_empty() {
            return;
        }
        let at = self.rng.below(self.watches.len());
        let watched = self.watches.swap_remove(at);
        self.log(|| format!("unwatch {watched}"));
        let parsed = ResourceName::parse_user_supplied(&watched).expect("a valid name");
        let key = ResourceKey::new(CDS, parsed.canonical().as_ref());
        self.remove_entry_watcher(&key);
        self.fed.unwatch(&key);
        self.drain();
    }

    /// The cache's side of a new watcher of `key` (of `authority`): its
    /// entry, made on the first.
    fn add_entry_watcher(&mut self, key: &ResourceKey, parsed: &ResourceName, authority: &str) {
        let partition = Partition::of(parsed);
        self.fed
            .ensure_authority(&partition, parsed)
            .expect("a known authority");
        let provenance = Arc::clone(&self.servers_of[authority][0]);
        let entry = self.entries.entry(key.clone()).or_insert_with(|| Entry {
            state: ResourceState::requested(),
            reported: None,
            watchers: 0,
            provenance,
        });
        entry.watchers += 1;
    }

    /// The cache's side of a watcher of `key` leaving: the last one takes
    /// its entry.
    fn remove_entry_watcher(&mut self, key: &ResourceKey) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.watchers -= 1;
            if entry.watchers == 0 {
                self.entries.remove(key);
            }
        }
    }

    fn heal(&mut self) {
        self.log(|| "faults stop".to_owned());
        self.faults = false;
        for peer in self.peers.values_mut() {
            peer.server.refusing_until = None;
            peer.server.silent_until = None;
            peer.server.delayed_until = None;
            peer.server.duplicate_next = false;
            peer.server.foreign_next = None;
        }
        for peer in self.peers.values_mut() {
            for at in peer.down.iter_mut() {
                at.0 = self.now;
            }
        }
    }
}

mod checks;
mod io;
mod lists;
mod peers;

use peers::Peers;
