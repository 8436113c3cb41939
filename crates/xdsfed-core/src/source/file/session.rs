//! [`FileSession`]: what a filesystem source tells the cache, from each
//! read of its file and each change of what is asked of it.

use crate::hash::HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::entries::{self, Contents, Entry};
use crate::bootstrap::FileFormat;
use crate::protocol::{
    AuthorityFilter, CoreEvent, RemovedReason, ResourceKey, SourceKind, StreamFailure, TypeUpdates,
    is_glob,
};
use crate::types::TypeRegistry;
use crate::version::Version;

/// What a [`FileSession`] reads, and for whom.
#[derive(Debug, Clone)]
pub struct FileSessionConfig {
    /// The file, for messages.
    pub path: PathBuf,
    /// How it is written.
    pub format: FileFormat,
    /// Which names the source may deliver.
    pub filter: AuthorityFilter,
}

/// Counters of one filesystem source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileStats {
    /// Reads handled whose bytes differed from the read before.
    pub reads: u64,
    /// Reads that failed the file as a whole (`server_failure`).
    pub failures: u64,
    /// Copies delivered (`resource_updates_valid`).
    pub resource_updates_valid: u64,
    /// Invalid resources reported (`resource_updates_invalid`).
    pub resource_updates_invalid: u64,
    /// Both counters by type URL.
    pub by_type: BTreeMap<String, TypeUpdates>,
    /// Resources of authorities the source does not serve, ignored.
    pub foreign_names_ignored: u64,
}

/// What the cache was last told of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Told {
    /// A copy with these bytes; `error` when an invalid copy was reported
    /// since (the copy keeps serving).
    Copy { raw: Bytes, error: Option<String> },
    /// Only that it is invalid: no copy was ever valid.
    Invalid(String),
    /// That it does not exist.
    Absent,
}

/// The sans-IO core of a filesystem source. Commands
/// ([`subscribe`](Self::subscribe), …) and the input
/// [`handle_contents`](Self::handle_contents) queue events; the driver
/// drains [`poll_event`](Self::poll_event) after each. There is no timer
/// and nothing to transmit: the file is the whole answer.
#[derive(Debug)]
pub struct FileSession {
    cfg: FileSessionConfig,
    types: Arc<TypeRegistry>,
    subscribed: BTreeSet<ResourceKey>,
    wildcards: BTreeSet<Arc<str>>,
    /// The last good contents: they answer later subscriptions and keep
    /// serving while the file is bad.
    held: Option<Contents>,
    /// The digest of the last bytes handled (good or bad).
    last_digest: Option<u64>,
    /// Why the file is bad now, as reported.
    failing: Option<Arc<str>>,
    told: HashMap<ResourceKey, Told>,
    events: VecDeque<CoreEvent>,
    stats: FileStats,
}

impl FileSession {
    /// A session that has read nothing yet.
    pub fn new(cfg: FileSessionConfig, types: Arc<TypeRegistry>) -> Self {
        FileSession {
            cfg,
            types,
            subscribed: BTreeSet::new(),
            wildcards: BTreeSet::new(),
            held: None,
            last_digest: None,
            failing: None,
            told: HashMap::default(),
            events: VecDeque::new(),
            stats: FileStats::default(),
        }
    }

    // ----- getters -----

    /// Whether a good read is held and the last read was good.
    pub fn is_healthy(&self) -> bool {
        self.held.is_some() && self.failing.is_none()
    }

    /// The version of the held contents.
    pub fn version(&self) -> Option<&Version> {
        self.held.as_ref().map(|c| &c.version)
    }

    /// Whether anything is subscribed (names or wildcards).
    pub fn has_subscriptions(&self) -> bool {
        !self.subscribed.is_empty() || !self.wildcards.is_empty()
    }

    /// The types the held contents answer: every wildcard type and every
    /// type in the file (nothing before a good read).
    pub fn answered_types(&self) -> BTreeSet<String> {
        let Some(held) = &self.held else {
            return BTreeSet::new();
        };
        let in_file = held.entries.keys().map(|k| k.type_url.to_string());
        self.wildcards
            .iter()
            .map(|t| t.to_string())
            .chain(in_file)
            .collect()
    }

    /// The counters.
    pub fn stats(&self) -> &FileStats {
        &self.stats
    }

    // ----- commands -----

    /// Asks for `key`; held contents answer it at once.
    pub fn subscribe(&mut self, key: ResourceKey) {
        if is_glob(&key.name) {
            self.events.push_back(CoreEvent::NotRequested {
                key,
                reason: Arc::from(
                    "a filesystem source has no glob collections: watch a list collection or `*` instead",
                ),
            });
            return;
        }
        if self.subscribed.insert(key.clone()) {
            self.state(&key);
        }
    }

    /// Stops asking for `key`.
    pub fn unsubscribe(&mut self, key: &ResourceKey) {
        if self.subscribed.remove(key) && !self.wildcards.contains(&key.type_url) {
            self.told.remove(key);
        }
    }

    /// Asks for every resource of `type_url`.
    pub fn subscribe_wildcard(&mut self, type_url: &str) {
        if !self.wildcards.insert(Arc::from(type_url)) {
            return;
        }
        let keys: Vec<ResourceKey> = match &self.held {
            Some(held) => held
                .entries
                .keys()
                .filter(|k| &*k.type_url == type_url)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        for key in keys {
            self.state(&key);
        }
    }

    /// Stops asking for every resource of `type_url`.
    pub fn unsubscribe_wildcard(&mut self, type_url: &str) {
        if !self.wildcards.remove(type_url) {
            return;
        }
        let subscribed = &self.subscribed;
        self.told
            .retain(|key, _| &*key.type_url != type_url || subscribed.contains(key));
    }

    // ----- inputs -----

    /// The outcome of reading the file: its bytes, or why it could not be
    /// read (missing, too large, not a regular file).
    pub fn handle_contents(&mut self, read: Result<&[u8], String>) {
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(problem) => {
                // The next good bytes are news, even if they equal the
                // last good ones: they end the failure.
                self.last_digest = None;
                let path = self.cfg.path.display();
                return self.fail(format!("{path}: cannot be read: {problem}"));
            }
        };
        let digest = entries::digest(bytes);
        if self.last_digest == Some(digest) {
            return;
        }
        self.last_digest = Some(digest);
        self.stats.reads += 1;
        let decoded = entries::decode(bytes, self.cfg.format).and_then(|response| {
            entries::contents(response, digest, &self.types, &self.cfg.filter)
        });
        match decoded {
            Ok(contents) => self.accept(contents),
            Err(problem) => self.fail(format!("{}: {problem}", self.cfg.path.display())),
        }
    }

    // ----- outputs -----

    /// The next event for the cache.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    // ----- helpers -----

    /// The file is bad as a whole: every copy keeps serving.
    fn fail(&mut self, message: String) {
        if self.failing.as_deref() == Some(message.as_str()) {
            return;
        }
        tracing::warn!(error = %message, "rejected the contents of a filesystem source; the last good contents keep serving");
        self.stats.failures += 1;
        let error: Arc<str> = Arc::from(message);
        self.failing = Some(Arc::clone(&error));
        self.events.push_back(CoreEvent::StreamFailed {
            failure: StreamFailure::described(SourceKind::File, &*error),
        });
    }

    /// Good contents: held from now on, and told key by key.
    fn accept(&mut self, contents: Contents) {
        let first = self.held.is_none();
        if self.failing.take().is_some() || first {
            self.events.push_back(CoreEvent::StreamHealthy);
        }
        self.stats.foreign_names_ignored += contents.foreign;
        let mut keys: BTreeSet<ResourceKey> = self.told.keys().cloned().collect();
        keys.extend(self.subscribed.iter().cloned());
        keys.extend(
            contents
                .entries
                .keys()
                .filter(|k| self.wildcards.contains(&k.type_url))
                .cloned(),
        );
        self.held = Some(contents);
        for key in keys {
            self.state(&key);
        }
    }

    fn wants(&self, key: &ResourceKey) -> bool {
        self.subscribed.contains(key) || self.wildcards.contains(&key.type_url)
    }

    /// Tells the cache what the held contents say of `key`, unless it was
    /// told exactly that already.
    fn state(&mut self, key: &ResourceKey) {
        let Some(held) = &self.held else {
            return;
        };
        let wanted = self.wants(key);
        let version = held.version.clone();
        let before = self.told.get(key);
        let event = match held.entries.get(key) {
            Some(_) if !wanted => return,
            Some(Entry::Valid(decoded)) => {
                if let Some(Told::Copy { raw, error: None }) = before
                    && raw == decoded.raw()
                {
                    return;
                }
                let told = Told::Copy {
                    raw: decoded.raw().clone(),
                    error: None,
                };
                self.told.insert(key.clone(), told);
                count(&mut self.stats, key, true);
                CoreEvent::Upsert {
                    key: key.clone(),
                    resource: decoded.clone(),
                    version,
                    ttl: None,
                }
            }
            Some(Entry::Invalid(error)) => {
                let message = error.0.clone();
                let told = match before {
                    Some(Told::Copy { error: Some(e), .. }) | Some(Told::Invalid(e))
                        if *e == message =>
                    {
                        return;
                    }
                    Some(Told::Copy { raw, .. }) => Told::Copy {
                        raw: raw.clone(),
                        error: Some(message),
                    },
                    _ => Told::Invalid(message),
                };
                tracing::warn!(file = %self.cfg.path.display(), resource = %key, %error, "rejected a resource of a filesystem source");
                let error = error.clone();
                self.told.insert(key.clone(), told);
                count(&mut self.stats, key, false);
                CoreEvent::Invalid {
                    key: key.clone(),
                    error,
                    version,
                }
            }
            None => match before {
                Some(Told::Absent) => return,
                None if !wanted => return,
                // Never told anything: the file is the answer, at once.
                None => {
                    self.told.insert(key.clone(), Told::Absent);
                    CoreEvent::DoesNotExist { key: key.clone() }
                }
                Some(_) => {
                    if self.subscribed.contains(key) {
                        self.told.insert(key.clone(), Told::Absent);
                    } else {
                        self.told.remove(key);
                    }
                    CoreEvent::Removed {
                        key: key.clone(),
                        reason: RemovedReason::Deleted,
                    }
                }
            },
        };
        self.events.push_back(event);
    }
}

/// Counts one copy delivered (`valid`) or one invalid copy reported.
fn count(stats: &mut FileStats, key: &ResourceKey, valid: bool) {
    let by_type = stats.by_type.entry(key.type_url.to_string()).or_default();
    if valid {
        by_type.valid += 1;
        stats.resource_updates_valid += 1;
    } else {
        by_type.invalid += 1;
        stats.resource_updates_invalid += 1;
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
