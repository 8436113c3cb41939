//! [`FileConnection`]: the handle on one filesystem source's driver task,
//! as the client's executor sees it (a [`SourceConnection`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::driver::Driver;
use super::session::{FileSession, FileSessionConfig};
use crate::bootstrap::{ApiVariant, FileSource, ServerConfig};
use crate::protocol::{AuthorityFilter, ResourceKey};
use crate::source::SourceConnection;
use crate::transport::{ConnectionStats, EventSink, TransportOptions};
use crate::types::TypeRegistry;

/// What the handle asks of the driver.
#[derive(Debug)]
pub(super) enum Command {
    Subscribe(ResourceKey),
    Unsubscribe(ResourceKey),
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

/// A handle on one filesystem source. Nothing is read until the first
/// subscription; from then on the file is re-read whenever its directory
/// changes. The driver task ends on [`SourceConnection::shutdown`] or when
/// every handle is dropped.
#[derive(Debug, Clone)]
pub struct FileConnection {
    commands: mpsc::UnboundedSender<Command>,
    shared: Arc<Shared>,
}

impl FileConnection {
    /// Spawns the driver of `source` (the file of `server`) on the current
    /// tokio runtime (panics outside one, like `tokio::spawn`). `filter`
    /// says which names the file may deliver; a file larger than
    /// `opts.max_message_size` is refused.
    pub fn spawn(
        server: ServerConfig,
        source: FileSource,
        filter: AuthorityFilter,
        types: Arc<TypeRegistry>,
        sink: Arc<dyn EventSink>,
        opts: &TransportOptions,
    ) -> Self {
        let cfg = FileSessionConfig {
            path: source.path.clone(),
            format: source.format,
            filter,
        };
        let shared = Arc::new(Shared {
            stats: Mutex::new(ConnectionStats {
                connected: false,
                server_failure: 0,
                resource_updates_valid: 0,
                resource_updates_invalid: 0,
                updates_by_type: BTreeMap::new(),
                foreign_names_ignored: 0,
                streams_opened: 0,
                // The file is the full state: the nearer of the variants.
                variant: ApiVariant::Sotw,
                answered_types: BTreeSet::new(),
            }),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let limit = u64::try_from(opts.max_message_size).unwrap_or(u64::MAX);
        let driver = Driver {
            session: FileSession::new(cfg, types),
            server,
            source,
            limit,
            sink,
            commands: rx,
            shared: Arc::clone(&shared),
        };
        tokio::spawn(driver.run());
        FileConnection {
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

impl SourceConnection for FileConnection {
    fn subscribe(&self, key: ResourceKey) {
        self.send(Command::Subscribe(key));
    }
    fn unsubscribe(&self, key: ResourceKey) {
        self.send(Command::Unsubscribe(key));
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
