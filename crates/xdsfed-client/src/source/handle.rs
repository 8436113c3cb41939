//! [`SourceHandle`]: the handle every kind of source gives the client's
//! executor, whatever its driver does.
//!
//! ```text
//!  SourceHandle<Kind> (Clone) ──Command / shutdown──► Commands ──► the kind's driver task
//!          ▲                                                          │
//!          └──────────────── StatsCell (the A78 counters) ◄───────────┘
//! ```
//!
//! The handle only forwards: each driver decides what a command means for
//! its kind (a file has no versions to forget; a CDN cannot serve a
//! wildcard), so that every rule stays beside the code it governs. The
//! kind parameter is a marker that gives each kind its own `spawn`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use xdsfed_core::version::Version;

use tokio::sync::mpsc;

use super::SourceConnection;
use crate::transport::ConnectionStats;
use xdsfed_core::bootstrap::ApiVariant;
use xdsfed_core::protocol::ResourceKey;
use xdsfed_core::types::Decoded;

/// What the executor asks of a source's driver (shutdown aside, which
/// [`Commands::recv`] reports as the end).
#[derive(Debug)]
pub(crate) enum Command {
    Subscribe(ResourceKey),
    Unsubscribe(ResourceKey),
    ForgetVersion(ResourceKey),
    /// A copy from the state directory this server sent (see
    /// [`Session::resume`](xdsfed_core::protocol::Session::resume)).
    Resume(ResourceKey, Version, Decoded),
    SubscribeWildcard(String),
    UnsubscribeWildcard(String),
}

/// A sans-IO session that keeps subscriptions the way the ADS session
/// does (the ADS and policy-stream sessions): a [`Command`] maps onto it
/// one for one.
pub(crate) trait Subscriptions {
    fn subscribe(&mut self, key: ResourceKey);
    fn unsubscribe(&mut self, key: &ResourceKey);
    fn forget_version(&mut self, key: &ResourceKey);
    fn subscribe_wildcard(&mut self, type_url: &str);
    fn unsubscribe_wildcard(&mut self, type_url: &str);
    /// Only a session with per-resource versions (delta ADS) resumes.
    fn resume(&mut self, key: ResourceKey, version: Version, resource: Decoded) {
        let _ = (key, version, resource);
    }
}

impl Command {
    /// Hands the command to `session`.
    pub(crate) fn apply_to(self, session: &mut impl Subscriptions) {
        match self {
            Command::Subscribe(key) => session.subscribe(key),
            Command::Unsubscribe(key) => session.unsubscribe(&key),
            Command::ForgetVersion(key) => session.forget_version(&key),
            Command::Resume(key, version, resource) => session.resume(key, version, resource),
            Command::SubscribeWildcard(t) => session.subscribe_wildcard(&t),
            Command::UnsubscribeWildcard(t) => session.unsubscribe_wildcard(&t),
        }
    }
}

/// Implements [`Subscriptions`] for a session type with those methods.
macro_rules! subscriptions_of {
    ($session:ty $(, $resume:ident)?) => {
        impl Subscriptions for $session {
            $(
                fn $resume(&mut self, key: ResourceKey, version: Version, resource: Decoded) {
                    <$session>::$resume(self, key, version, resource)
                }
            )?
            fn subscribe(&mut self, key: ResourceKey) {
                <$session>::subscribe(self, key)
            }
            fn unsubscribe(&mut self, key: &ResourceKey) {
                <$session>::unsubscribe(self, key)
            }
            fn forget_version(&mut self, key: &ResourceKey) {
                <$session>::forget_version(self, key)
            }
            fn subscribe_wildcard(&mut self, type_url: &str) {
                <$session>::subscribe_wildcard(self, type_url)
            }
            fn unsubscribe_wildcard(&mut self, type_url: &str) {
                <$session>::unsubscribe_wildcard(self, type_url)
            }
        }
    };
}

subscriptions_of!(xdsfed_core::protocol::Session, resume);
#[cfg(feature = "policy-stream")]
subscriptions_of!(xdsfed_core::policy_stream::PolicySession);

/// What travels on the channel.
#[derive(Debug)]
enum Message {
    Command(Command),
    Shutdown,
}

/// The driver's half of the channel.
#[derive(Debug)]
pub(crate) struct Commands {
    rx: mpsc::UnboundedReceiver<Message>,
}

impl Commands {
    /// The next command; `None` once the connection is shut down or every
    /// handle is dropped. Cancel-safe, as the channel's `recv` is.
    pub(crate) async fn recv(&mut self) -> Option<Command> {
        match self.rx.recv().await {
            Some(Message::Command(command)) => Some(command),
            Some(Message::Shutdown) | None => None,
        }
    }

    /// Hands `first` (what [`recv`](Self::recv) returned) and every command
    /// already queued behind it to `apply`, so that a burst of
    /// subscriptions (a graph reaching 10 000 clusters at once) leaves in
    /// one request per type, not one each. `false` on shutdown.
    pub(crate) fn apply_queued(
        &mut self,
        first: Option<Command>,
        mut apply: impl FnMut(Command),
    ) -> bool {
        let Some(first) = first else {
            return false;
        };
        apply(first);
        loop {
            match self.rx.try_recv() {
                Ok(Message::Command(command)) => apply(command),
                Ok(Message::Shutdown) => return false,
                // Empty, or every handle gone: the next `recv` tells.
                Err(_) => return true,
            }
        }
    }
}

/// The counters a handle reads and its driver writes.
#[derive(Debug)]
pub(crate) struct StatsCell {
    stats: Mutex<ConnectionStats>,
}

impl StatsCell {
    /// Counters at zero for a source that speaks `variant` (or is nearest
    /// to it: whole snapshots are state of the world).
    pub(crate) fn new(variant: ApiVariant) -> Self {
        StatsCell {
            stats: Mutex::new(ConnectionStats {
                connected: false,
                server_failure: 0,
                resource_updates_valid: 0,
                resource_updates_invalid: 0,
                updates_by_type: BTreeMap::new(),
                foreign_names_ignored: 0,
                streams_opened: 0,
                variant,
                answered_types: BTreeSet::new(),
            }),
        }
    }

    /// The counters, locked. A writer that panicked left them whole (each
    /// write is a field assignment), so a poisoned lock is used as is.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ConnectionStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on one source's driver task. Cloning is cheap; the task ends
/// on [`shutdown`](Self::shutdown) or when every handle is dropped. `K`
/// marks the kind of source (ADS, file, REST, CDN, policy stream), whose
/// module gives it a `spawn`.
pub(crate) struct SourceHandle<K> {
    commands: mpsc::UnboundedSender<Message>,
    stats: Arc<StatsCell>,
    kind: PhantomData<fn() -> K>,
}

impl<K> SourceHandle<K> {
    /// A handle, the driver's half of its channel, and the counters they
    /// share, at zero for `variant`.
    pub(crate) fn new(variant: ApiVariant) -> (Self, Commands, Arc<StatsCell>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(StatsCell::new(variant));
        let handle = SourceHandle {
            commands: tx,
            stats: Arc::clone(&stats),
            kind: PhantomData,
        };
        (handle, Commands { rx }, stats)
    }

    /// Subscribes to `key` (its name a canonical key).
    pub(crate) fn subscribe(&self, key: ResourceKey) {
        self.send(Message::Command(Command::Subscribe(key)));
    }

    /// Unsubscribes from `key`.
    pub(crate) fn unsubscribe(&self, key: ResourceKey) {
        self.send(Message::Command(Command::Unsubscribe(key)));
    }

    /// Forgets the version held of `key`: the next stream asks for it
    /// afresh (see [`Session::forget_version`](xdsfed_core::protocol::Session::forget_version)).
    /// A source without versions ignores it.
    pub(crate) fn forget_version(&self, key: ResourceKey) {
        self.send(Message::Command(Command::ForgetVersion(key)));
    }

    /// Hands over a copy from the state directory that this server sent
    /// (see [`Session::resume`](xdsfed_core::protocol::Session::resume)).
    /// A source without versions ignores it.
    pub(crate) fn resume(&self, key: ResourceKey, version: Version, resource: Decoded) {
        self.send(Message::Command(Command::Resume(key, version, resource)));
    }

    /// Subscribes to `*` for `type_url`.
    pub(crate) fn subscribe_wildcard(&self, type_url: &str) {
        self.send(Message::Command(Command::SubscribeWildcard(
            type_url.to_owned(),
        )));
    }

    /// Unsubscribes from `*` for `type_url`.
    pub(crate) fn unsubscribe_wildcard(&self, type_url: &str) {
        self.send(Message::Command(Command::UnsubscribeWildcard(
            type_url.to_owned(),
        )));
    }

    /// The connection's counters.
    pub(crate) fn stats(&self) -> ConnectionStats {
        self.stats.lock().clone()
    }

    /// Closes the connection and ends the driver task.
    pub(crate) fn shutdown(&self) {
        self.send(Message::Shutdown);
    }

    fn send(&self, message: Message) {
        // The driver is gone only after a shutdown; then there is nothing
        // left to do with the command.
        let _ = self.commands.send(message);
    }
}

// By hand: the derives would ask `K` (a marker) for `Clone` and `Debug`.
impl<K> Clone for SourceHandle<K> {
    fn clone(&self) -> Self {
        SourceHandle {
            commands: self.commands.clone(),
            stats: Arc::clone(&self.stats),
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for SourceHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceHandle")
            .field("kind", &std::any::type_name::<K>())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<K: 'static> SourceConnection for SourceHandle<K> {
    fn subscribe(&self, key: ResourceKey) {
        SourceHandle::subscribe(self, key);
    }
    fn unsubscribe(&self, key: ResourceKey) {
        SourceHandle::unsubscribe(self, key);
    }
    fn forget_version(&self, key: ResourceKey) {
        SourceHandle::forget_version(self, key);
    }
    fn resume(&self, key: ResourceKey, version: Version, resource: Decoded) {
        SourceHandle::resume(self, key, version, resource);
    }
    fn subscribe_wildcard(&self, type_url: &str) {
        SourceHandle::subscribe_wildcard(self, type_url);
    }
    fn unsubscribe_wildcard(&self, type_url: &str) {
        SourceHandle::unsubscribe_wildcard(self, type_url);
    }
    fn stats(&self) -> ConnectionStats {
        SourceHandle::stats(self)
    }
    fn shutdown(&self) {
        SourceHandle::shutdown(self);
    }
}
