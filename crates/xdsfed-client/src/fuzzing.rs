//! The federation core and the cache as one, for fuzz targets: what a
//! session reports goes through the core's gating and routing, and its
//! actions into a cache, as in the client, with no connection. Not part of
//! the API (hidden; its shape may change with any release).

use std::sync::Arc;

use crate::cache::{Cache, DataErrorPolicy, Provenance};
use crate::client::apply_to_cache;
use xdsfed_core::authority::{AuthorityRegistry, Partition, ServerId};
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::federation::{Action, Federation, Home};
use xdsfed_core::name::ResourceName;
use xdsfed_core::protocol::{CoreEvent, ResourceKey};

/// A federation core over one server, `fuzz:1`, that serves `a.example`,
/// `b.example` and old-style names, applying its actions to a cache.
#[derive(Debug)]
pub struct Federated {
    federation: Federation,
    cache: Cache,
    server: ServerId,
    policy: DataErrorPolicy,
    /// What the core asked of the server, not yet taken: (subscribe?, key).
    asked: Vec<(bool, ResourceKey)>,
}

const BOOTSTRAP: &str = r#"{
  "xds_servers": [{"server_uri": "fuzz:1", "channel_creds": [{"type": "insecure"}]}],
  "node": {"id": "fuzz"},
  "authorities": {"a.example": {}, "b.example": {}}
}"#;

impl Federated {
    /// A core whose server applies `policy` (its server features).
    pub fn new(policy: DataErrorPolicy) -> Option<Self> {
        let bootstrap = Bootstrap::from_json_str(BOOTSTRAP).ok()?;
        let registry = AuthorityRegistry::new(&bootstrap);
        let server = registry.server_ids().next()?;
        Some(Federated {
            federation: Federation::new(registry, 8),
            cache: Cache::new(),
            server,
            policy,
            asked: Vec::new(),
        })
    }

    /// Watches `key`, as a user of the client would. Names the bootstrap
    /// does not serve are refused, as `XdsClient::watch` refuses them.
    pub fn watch(&mut self, key: &ResourceKey) -> bool {
        let Ok(name) = ResourceName::parse(&key.name) else {
            return false;
        };
        let partition = Partition::of(&name);
        if self.federation.ensure_authority(&partition, &name).is_err() {
            return false;
        }
        let provenance = Provenance {
            authority: name.authority().map(Arc::from),
            server: Arc::clone(self.federation.registry().name(self.server)),
        };
        let _ = self.cache.add_watcher(key, provenance, self.policy);
        let home = Home::Authority(partition);
        self.federation.watch(key, home, None, &self.cache);
        self.run();
        true
    }

    /// Gives back one watch of `key`.
    pub fn unwatch(&mut self, key: &ResourceKey) {
        self.cache.remove_watcher(key);
        self.federation.unwatch(key);
        self.run();
    }

    /// What the server's session reported.
    pub fn handle_events(&mut self, events: Vec<CoreEvent>) {
        self.federation
            .handle_events(self.server, events, &self.cache);
        self.run();
    }

    /// The cache the actions went to.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// What the core asked the server for since the last call, in order:
    /// `(true, key)` to subscribe, `(false, key)` to unsubscribe.
    pub fn take_asked(&mut self) -> Vec<(bool, ResourceKey)> {
        std::mem::take(&mut self.asked)
    }

    fn run(&mut self) {
        while let Some(action) = self.federation.poll_action() {
            match action {
                Action::Subscribe { key, .. } => self.asked.push((true, key)),
                Action::Unsubscribe { key, .. } => self.asked.push((false, key)),
                Action::ForgetVersion { .. }
                | Action::SubscribeWildcard { .. }
                | Action::UnsubscribeWildcard { .. }
                | Action::Close { .. } => {}
                other => apply_to_cache(&self.cache, &self.federation, other, self.policy),
            }
        }
    }
}
