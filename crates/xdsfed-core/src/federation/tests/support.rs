//! A federation core driven by hand: a bootstrap with two authorities of
//! two servers each, a model of the cache's entries that runs the same
//! gRFC A88 transitions as the cache, and what is subscribed where.

use crate::hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use super::super::{Action, Answers, Federation, Home};
use crate::authority::{AuthorityRegistry, Partition, ServerId, ServerKey};
use crate::bootstrap::Bootstrap;
use crate::entry::{Context, ReportedNack};
use crate::entry::{DataErrorPolicy, ResourceState, Source};
use crate::name::ResourceName;
use crate::protocol::{CoreEvent, RemovedReason, ResourceKey, SourceKind, StreamFailure};
use crate::types::testing::cluster_copy;

pub(crate) const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// Authority `a` on servers `a1`, `a2`; `b` on `b1`, `b2`; old-style names
/// on `a1`.
pub(crate) const BOOTSTRAP: &str = r#"{
  "xds_servers": [{"server_uri": "a1:1", "channel_creds": [{"type": "insecure"}]}],
  "node": {"id": "n"},
  "authorities": {
    "a": {"xds_servers": [
      {"server_uri": "a1:1", "channel_creds": [{"type": "insecure"}]},
      {"server_uri": "a2:1", "channel_creds": [{"type": "insecure"}]}]},
    "b": {"xds_servers": [
      {"server_uri": "b1:1", "channel_creds": [{"type": "insecure"}]},
      {"server_uri": "b2:1", "channel_creds": [{"type": "insecure"}]}]}
  }
}"#;

/// [`BOOTSTRAP`] with gRFC A95's `fallback_on_reachability_only` set on
/// each of `authorities`.
pub(crate) fn with_reachability_only(authorities: &[&str]) -> String {
    authorities
        .iter()
        .fold(BOOTSTRAP.to_owned(), |bootstrap, a| {
            bootstrap.replace(
                &format!(r#""{a}": {{"xds_servers""#),
                &format!(r#""{a}": {{"fallback_on_reachability_only": true, "xds_servers""#),
            )
        })
}

/// `xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}` as a key.
pub(crate) fn cluster(authority: &str, id: &str) -> ResourceKey {
    ResourceKey::new(
        CDS,
        format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}"),
    )
}

/// One model entry: its state and the NACK last reported.
pub(crate) struct Entry {
    pub(crate) state: Option<ResourceState>,
    pub(crate) reported: ReportedNack,
    /// How many times its watchers were woken.
    pub(crate) wakes: usize,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            state: Some(ResourceState::requested()),
            reported: None,
            wakes: 0,
        }
    }
}

/// The cache, as a map run through the same transitions.
#[derive(Default)]
pub(crate) struct Model {
    pub(crate) entries: HashMap<ResourceKey, Entry>,
}

impl Answers for Model {
    fn is_answered(&self, key: &ResourceKey) -> bool {
        self.state(key)
            .is_some_and(|s| super::super::is_answered(key, s))
    }
    fn has_copy(&self, key: &ResourceKey) -> bool {
        self.state(key).is_some_and(|s| s.resource.is_some())
    }
}

impl Model {
    pub(crate) fn state(&self, key: &ResourceKey) -> Option<&ResourceState> {
        self.entries.get(key).and_then(|e| e.state.as_ref())
    }

    fn apply(&mut self, event: &CoreEvent, source: Source) {
        let Some(key) = super::super::key_of(event) else {
            return;
        };
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        let state = entry.state.get_or_insert_with(ResourceState::requested);
        if apply_delivery(state, &mut entry.reported, event, source) {
            entry.wakes += 1;
        }
    }

    fn modify(&mut self, key: &ResourceKey, f: impl FnOnce(&mut ResourceState) -> bool) {
        if let Some(entry) = self.entries.get_mut(key) {
            let state = entry.state.get_or_insert_with(ResourceState::requested);
            if f(state) {
                entry.wakes += 1;
            }
        }
    }
}

/// Runs the cache's transition of a delivery on a model entry, under the
/// default server features. Returns whether its watchers would wake.
pub(crate) fn apply_delivery(
    state: &mut ResourceState,
    reported: &mut ReportedNack,
    event: &CoreEvent,
    source: Source,
) -> bool {
    let server = super::super::named_server(&source);
    let cx = Context {
        server: &server,
        policy: DataErrorPolicy::default(),
        now: SystemTime::UNIX_EPOCH,
    };
    super::super::apply_event(state, reported, event, source, &cx)
}

/// A federation core, its model cache and the wire as the core left it.
pub(crate) struct Harness {
    pub(crate) fed: Federation,
    pub(crate) model: Model,
    /// What is subscribed on each server.
    pub(crate) wire: BTreeMap<String, BTreeSet<ResourceKey>>,
    /// Servers closed by the core, in order.
    pub(crate) closed: Vec<String>,
    servers: HashMap<String, ServerId>,
}

impl Harness {
    pub(crate) fn new() -> Self {
        Self::with(BOOTSTRAP, 8)
    }

    pub(crate) fn with(bootstrap: &str, max_redirects: usize) -> Self {
        let bootstrap = Bootstrap::from_json_str(bootstrap).expect("a valid bootstrap");
        let registry = AuthorityRegistry::new(&bootstrap);
        let servers = registry
            .server_ids()
            .map(|id| (short(registry.key(id)), id))
            .collect();
        Harness {
            fed: Federation::new(registry, max_redirects),
            model: Model::default(),
            wire: BTreeMap::new(),
            closed: Vec::new(),
            servers,
        }
    }

    /// The id of server `name` (`a1`, …).
    pub(crate) fn id(&self, name: &str) -> ServerId {
        self.servers
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("no server {name}"))
    }

    /// The key of server `name` (`a1`, …).
    pub(crate) fn server(&self, name: &str) -> ServerKey {
        self.fed.registry().key(self.id(name)).clone()
    }

    /// The name (`a1`, …) of the server `id`.
    fn label(&self, id: ServerId) -> String {
        short(self.fed.registry().key(id))
    }

    /// Watches `key` (its name may carry `#alt=`).
    pub(crate) fn watch(&mut self, name: &str) -> ResourceKey {
        let parsed = ResourceName::parse_user_supplied(name).expect("a valid name");
        let key = ResourceKey::new(CDS, parsed.canonical().as_ref());
        let alt = parsed
            .as_xdstp()
            .and_then(|n| n.directives().alt())
            .map(|alt| ResourceKey::new(CDS, alt.canonical()));
        let partition = Partition::of(&parsed);
        self.fed
            .ensure_authority(&partition, &parsed)
            .expect("a known authority");
        self.model.entries.entry(key.clone()).or_default();
        self.fed
            .watch(&key, Home::Authority(partition), alt, &self.model);
        self.drain();
        key
    }

    pub(crate) fn unwatch(&mut self, key: &ResourceKey) {
        self.fed.unwatch(key);
        self.drain();
    }

    /// `server` reports `events`.
    pub(crate) fn events(&mut self, server: &str, events: Vec<CoreEvent>) {
        let server = self.id(server);
        self.fed.handle_events(server, events, &self.model);
        self.drain();
    }

    pub(crate) fn upsert(&mut self, server: &str, key: &ResourceKey, tag: &str) {
        let event = upsert(key, tag);
        self.events(server, vec![event]);
    }

    pub(crate) fn fail(&mut self, server: &str) {
        let failure =
            StreamFailure::described(SourceKind::Ads, format!("{server} refused the connection"));
        self.events(server, vec![CoreEvent::StreamFailed { failure }]);
    }

    pub(crate) fn healthy(&mut self, server: &str) {
        self.events(server, vec![CoreEvent::StreamHealthy]);
    }

    /// The servers `key` is subscribed on, by name.
    pub(crate) fn subscribed(&self, key: &ResourceKey) -> Vec<String> {
        self.wire
            .iter()
            .filter(|(_, keys)| keys.contains(key))
            .map(|(s, _)| s.clone())
            .collect()
    }

    pub(crate) fn state(&self, key: &ResourceKey) -> &ResourceState {
        self.model.state(key).expect("a watched entry")
    }

    /// The `alt_stat_name` of the copy `key` holds.
    pub(crate) fn tag(&self, key: &ResourceKey) -> Option<String> {
        let resource = self.model.state(key)?.resource.as_ref()?;
        let cluster = resource.downcast::<crate::types::ClusterView>()?;
        Some(cluster.decode().ok()?.alt_stat_name)
    }

    pub(crate) fn drain(&mut self) {
        while let Some(action) = self.fed.poll_action() {
            self.apply(action);
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::Subscribe { server, key } => {
                let label = self.label(server);
                self.wire.entry(label).or_default().insert(key);
            }
            Action::Unsubscribe { server, key } => {
                let label = self.label(server);
                if let Some(keys) = self.wire.get_mut(&label) {
                    keys.remove(&key);
                }
            }
            Action::Close { server } => {
                let label = self.label(server);
                self.closed.push(label);
            }
            Action::Deliver { event, source } => self.model.apply(&event, source),
            Action::DataError { key, error } => {
                self.model
                    .modify(&key, |s| super::super::data_error(s, error));
            }
            Action::Transient { key, error } => {
                self.model
                    .modify(&key, |s| super::super::transient(s, &error));
            }
            Action::HoldEntry { key, .. } => {
                self.model.entries.entry(key).or_default();
            }
            Action::ReleaseEntry { key } => {
                self.model.entries.remove(&key);
            }
            _ => {}
        }
    }
}

/// `a1` for the server `a1:1 (insecure)`.
pub(crate) fn short(server: &ServerKey) -> String {
    server
        .server_uri
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn upsert(key: &ResourceKey, tag: &str) -> CoreEvent {
    let id = key.name.rsplit('/').next().unwrap_or_default();
    CoreEvent::Upsert {
        key: key.clone(),
        resource: cluster_copy(id, tag),
        version: crate::version::Version::from(tag),
        ttl: None,
    }
}

pub(crate) fn redirect(key: &ResourceKey, target: &ResourceKey) -> CoreEvent {
    CoreEvent::Redirect {
        key: key.clone(),
        target: Arc::clone(&target.name),
        version: crate::version::Version::from("r"),
    }
}

pub(crate) fn deleted(key: &ResourceKey) -> CoreEvent {
    CoreEvent::Removed {
        key: key.clone(),
        reason: RemovedReason::Deleted,
    }
}
