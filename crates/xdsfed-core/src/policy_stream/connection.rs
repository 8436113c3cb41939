//! [`PolicyConnection`]: the handle on one policy stream's driver task, as
//! the client's executor sees it (a [`SourceConnection`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::config::PolicySessionConfig;
use super::driver::Driver;
use crate::bootstrap::{ApiVariant, ServerConfig, ServerProtocol};
use crate::protocol::{AuthorityFilter, ResourceKey};
use crate::source::SourceConnection;
use crate::transport::{ConnectionStats, EventSink, TransportOptions, endpoint};

/// What the handle asks of the driver.
#[derive(Debug)]
pub(super) enum Command {
    Subscribe(ResourceKey),
    Unsubscribe(ResourceKey),
    ForgetVersion(ResourceKey),
    SubscribeWildcard(String),
    UnsubscribeWildcard(String),
    Shutdown,
}

/// The counters the handle and the driver share.
#[derive(Debug)]
pub(super) struct Shared {
    stats: Mutex<ConnectionStats>,
}

impl Shared {
    pub(super) fn stats(&self) -> MutexGuard<'_, ConnectionStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on the policy stream to one control plane. Nothing connects
/// until the first subscription; the driver task ends on
/// [`SourceConnection::shutdown`] or when every handle is dropped.
#[derive(Debug, Clone)]
pub struct PolicyConnection {
    commands: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl PolicyConnection {
    /// Spawns the driver for `server` on the current tokio runtime (panics
    /// outside one, like `tokio::spawn`). Policies are keyed under
    /// `authorities`; `filter` says which names the server may deliver.
    /// The client address is the node id (it must be unique among the
    /// control plane's clients), or a random one without a node id.
    pub fn spawn(
        server: ServerConfig,
        filter: AuthorityFilter,
        authorities: Vec<String>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let mut cfg = PolicySessionConfig::new(client_address(&opts), authorities);
        cfg.filter = filter;
        if let ServerProtocol::PolicyStream(timing) = &server.protocol {
            cfg.timing = *timing;
        }
        cfg.handshake_timeout = opts.connect_timeout;
        cfg.first_response_timeout = opts.first_response_timeout.unwrap_or(opts.connect_timeout);
        let shared = Arc::new(Shared {
            stats: Mutex::new(ConnectionStats {
                connected: false,
                server_failure: 0,
                resource_updates_valid: 0,
                resource_updates_invalid: 0,
                updates_by_type: BTreeMap::new(),
                foreign_names_ignored: 0,
                streams_opened: 0,
                // Full snapshots: the nearest of the two ADS variants.
                variant: ApiVariant::Sotw,
                answered_types: BTreeSet::new(),
            }),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let endpoint = endpoint(&server, &opts);
        let driver = Driver::new(server, cfg, sink, opts, endpoint, rx, Arc::clone(&shared));
        tokio::spawn(driver.run());
        PolicyConnection {
            commands: tx,
            shared,
        }
    }

    fn send(&self, command: Command) {
        // The driver is gone only after a shutdown; then there is nothing
        // left to do with the command.
        let _ = self.commands.send(command);
    }
}

/// The node id, or `xdsfed-` and a random number.
fn client_address(opts: &TransportOptions) -> String {
    if !opts.node.id.is_empty() {
        return opts.node.id.clone();
    }
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("xdsfed-{random:016x}")
}

impl SourceConnection for PolicyConnection {
    fn subscribe(&self, key: ResourceKey) {
        self.send(Command::Subscribe(key));
    }
    fn unsubscribe(&self, key: ResourceKey) {
        self.send(Command::Unsubscribe(key));
    }
    fn forget_version(&self, key: ResourceKey) {
        self.send(Command::ForgetVersion(key));
    }
    fn subscribe_wildcard(&self, type_url: &str) {
        self.send(Command::SubscribeWildcard(type_url.to_owned()));
    }
    fn unsubscribe_wildcard(&self, type_url: &str) {
        self.send(Command::UnsubscribeWildcard(type_url.to_owned()));
    }
    fn stats(&self) -> ConnectionStats {
        self.shared.stats().clone()
    }
    fn shutdown(&self) {
        self.send(Command::Shutdown);
    }
}
