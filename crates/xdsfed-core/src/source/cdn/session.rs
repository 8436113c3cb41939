//! [`CdnSession`]: the sans-IO core of an HTTP CDN source. It decides which
//! file to `GET` when, and what each answer means for the cache; the driver
//! (`connection.rs`) does the HTTP and the sleeping.
//!
//! ```text
//!  subscribe / unsubscribe / forget_version ──►┐            ┌─► poll_fetch   ─► GET url (If-None-Match, If-Modified-Since)
//!  handle_fetched(id, reply | failure, now) ──►│ CdnSession ├─► poll_event   ─► CoreEvent ─► EventSink
//!                                              ┘            └─► poll_timeout ─► the driver's sleep
//! ```
//!
//! Polling order: after any input, drain `poll_fetch(now)` (issue each
//! fetch), then `poll_event`, then sleep until `poll_timeout` or the next
//! input.
//!
//! # Rules
//!
//! 1. A new subscription is fetched at once; after each answer it is
//!    fetched again `refresh_delay × (1 ± poll_jitter)` later, drawn from
//!    the session's seeded generator, and never before the answer's
//!    freshness in a shared cache (`Cache-Control: max-age` less `Age`,
//!    else `Expires`; `pacing.rs`) runs out. A resource has at most one
//!    fetch in flight, and the source at most `max_in_flight`.
//! 2. A glob collection has no file (a CDN cannot list): it is reported
//!    `NotRequested`, never fetched. So is a name with no safe file path
//!    (a segment that decodes to `.`, `..`, a separator or a control
//!    character; [`crate::name::url_path_of`]), the reason naming the
//!    segment.
//! 3. A fetch names the last `ETag` in `If-None-Match` and the last
//!    `Last-Modified` in `If-Modified-Since`; `304 Not Modified` means
//!    unchanged: no event.
//! 4. A `200` body is a `DiscoveryResponse` (JSON when the `Content-Type`
//!    is `application/json`, else binary protobuf) holding exactly the one
//!    resource, of the key's type, bare or wrapped, naming the key; its
//!    version is `version_info`, or the `ETag` when that is empty.
//! 5. A valid resource is reported `Upsert` (not again while its version
//!    and bytes stay the same); an invalid one `Invalid`, and the held copy
//!    keeps serving. A `ResourceLocator` is a `Redirect` (not again while
//!    its target and version stay the same).
//! 6. `404` (or `410`) is the server's answer that the resource does not
//!    exist: `Removed` at once, for a held copy and for a resource never
//!    seen alike (no does-not-exist timer: the server answered), once.
//! 7. No answer (refused, timed out, too large), or an answer that the
//!    server is failing (`5xx`, `429`), is a failure of the source: the
//!    copies keep serving, and `StreamFailed`, naming the server's base URL
//!    (never one file: the outage is the server's), gives watchers an
//!    ambient error once when the outage begins, and once more for each
//!    resource first failing during it; an authority with another server
//!    falls back to it (gRFC A71). An answer that is no use for its file
//!    (any other status but `200`, `304`, `404` and `410`, a body that is
//!    not a `DiscoveryResponse`, a `304` to an unconditional fetch) is that
//!    file's error alone: `ResourceError` (`UNAVAILABLE`) naming its URL,
//!    once, so only its own watchers hear of it; its next usable answer
//!    (`304` included) ends it by reporting the held copy again. Either way
//!    the server backs off as a whole (`pacing.rs`): no file of it is
//!    fetched until the backoff, never shorter than `refresh_delay` and
//!    lengthened by `Retry-After`, has run out; the next answer ends it
//!    and reports `StreamHealthy`.
//! 8. An unsubscribed resource is forgotten; the answer to a fetch still in
//!    flight for it is dropped (fetches carry an id, so a resubscription
//!    does not take an old answer for its own).

use crate::hash::HashSet;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::pacing::{POLL_JITTER, Pacing};
use super::reply::{Answer, answer, is_json, parse};
use super::url::resource_url;
use crate::backoff::BackoffConfig;
use crate::bootstrap::CdnTiming;
use crate::error::GrpcCode;
use crate::protocol::{CoreEvent, RemovedReason, ResourceKey, SourceKind, StreamFailure};
use crate::types::TypeRegistry;
use crate::version::Version;

/// The default bound on fetches in flight to one server: a client holds
/// about this many HTTP/1.1 connections to it (one over HTTP/2); the pool
/// may dial one more while a finished fetch's connection is on its way
/// back to it.
pub const MAX_IN_FLIGHT: usize = 4;

/// How a [`CdnSession`] is set up.
#[derive(Debug, Clone)]
pub struct CdnConfig {
    /// The server's URI: every file's URL starts with it.
    pub base: String,
    /// How often to fetch again, and how long a fetch may take.
    pub timing: CdnTiming,
    /// The server's backoff after a failed fetch (its first delay is at
    /// least `refresh_delay`).
    pub backoff: BackoffConfig,
    /// The spread of each poll either way, as a fraction of
    /// `refresh_delay` (default 0.2).
    pub poll_jitter: f32,
    /// The most fetches in flight at once: the connections a client holds
    /// to the server over HTTP/1.1.
    pub max_in_flight: usize,
    /// The seed of the poll and backoff draws: the driver draws one at
    /// random, so clients started together drift apart; a test fixes it.
    pub seed: u64,
}

impl CdnConfig {
    /// A session fetching under `base`, with the default timers.
    pub fn new(base: impl Into<String>) -> Self {
        CdnConfig {
            base: base.into(),
            timing: CdnTiming::default(),
            backoff: BackoffConfig::default(),
            poll_jitter: POLL_JITTER,
            max_in_flight: MAX_IN_FLIGHT,
            seed: 0,
        }
    }
}

/// One `GET` the driver is to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// Names this fetch in [`CdnSession::handle_fetched`].
    pub id: u64,
    /// The resource it is for.
    pub key: ResourceKey,
    /// Its URL.
    pub url: Arc<str>,
    /// The `ETag` for `If-None-Match`, if a copy is held.
    pub etag: Option<Arc<str>>,
    /// The `Last-Modified` for `If-Modified-Since`, if a copy is held.
    pub last_modified: Option<Arc<str>>,
}

/// What the server said to a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The `ETag` header.
    pub etag: Option<Arc<str>>,
    /// The `Last-Modified` header.
    pub last_modified: Option<Arc<str>>,
    /// The `Content-Type` header.
    pub content_type: Option<String>,
    /// How long the answer stays fresh in a shared cache, from its
    /// caching headers (`Cache-Control: max-age` less `Age`, else
    /// `Expires`), if it says.
    pub fresh_for: Option<Duration>,
    /// The delay `Retry-After` asks for, if sent.
    pub retry_after: Option<Duration>,
    /// The body, at most the message size limit.
    pub body: Bytes,
}

impl HttpReply {
    /// An answer with `status` and `body`, and no headers.
    pub fn new(status: u16, body: Bytes) -> Self {
        HttpReply {
            status,
            etag: None,
            last_modified: None,
            content_type: None,
            fresh_for: None,
            retry_after: None,
            body,
        }
    }
}

/// What came of a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The server answered.
    Reply(HttpReply),
    /// It did not: why (refused, timed out, body over the limit, …).
    Failed(Arc<str>),
}

/// The session's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CdnStats {
    /// Fetches answered `200` with a valid resource.
    pub valid: u64,
    /// Fetches answered `200` with an invalid one.
    pub invalid: u64,
    /// Fetches answered `304`.
    pub not_modified: u64,
    /// Fetches that failed.
    pub failed: u64,
}

/// What the session holds of one resource.
#[derive(Debug, Clone, PartialEq)]
enum Held {
    /// Nothing yet.
    Nothing,
    /// A copy: its version and bytes (rule 5 compares them).
    Copy { version: Version, raw: Bytes },
    /// A redirect: its target and version (rule 5 compares them).
    Redirect { target: Arc<str>, version: Version },
    /// The last answer was invalid (the copy the cache holds stays).
    Invalid,
    /// The server said it does not exist.
    Absent,
}

/// One subscribed resource.
#[derive(Debug)]
struct Tracked {
    url: Arc<str>,
    etag: Option<Arc<str>>,
    last_modified: Option<Arc<str>>,
    held: Held,
    /// The id of the fetch in flight.
    in_flight: Option<u64>,
    /// When the next fetch is due; `None` while one is in flight.
    due: Option<Instant>,
    /// Its last answer was no use and was reported as its error (rule 7).
    erring: bool,
}

/// Why a fetch did not give its file's answer (rule 7).
#[derive(Debug)]
enum Failure {
    /// The server did not answer, or answered that it is failing (`5xx`,
    /// `429`): the source's failure.
    NoAnswer(String),
    /// The server answered, but not with something usable for this file.
    Unusable(String),
}

/// The source's health, for `StreamFailed` and `StreamHealthy` (rule 7).
#[derive(Debug)]
enum Health {
    /// No fetch has finished yet.
    Unknown,
    /// The last fetch to finish was answered.
    Healthy,
    /// In an outage: the resources already reported failing in it.
    Failing(HashSet<ResourceKey>),
}

/// The sans-IO core of one HTTP CDN source (see the module docs).
#[derive(Debug)]
pub struct CdnSession {
    cfg: CdnConfig,
    types: Arc<TypeRegistry>,
    tracked: BTreeMap<ResourceKey, Tracked>,
    /// Subscribed and not yet fetched: fetched before anything due.
    fresh: VecDeque<ResourceKey>,
    /// Refreshes and retries, by due time.
    due: BTreeSet<(Instant, ResourceKey)>,
    events: VecDeque<CoreEvent>,
    health: Health,
    /// When to poll and when to retry (rules 1 and 7).
    pacing: Pacing,
    next_id: u64,
    in_flight: usize,
    stats: CdnStats,
}

impl CdnSession {
    /// A session with no subscriptions; `types` validates what it fetches.
    pub fn new(cfg: CdnConfig, types: Arc<TypeRegistry>) -> Self {
        let pacing = Pacing::new(
            cfg.timing.refresh_delay,
            cfg.poll_jitter,
            cfg.backoff,
            cfg.seed,
        );
        CdnSession {
            cfg,
            pacing,
            types,
            tracked: BTreeMap::new(),
            fresh: VecDeque::new(),
            due: BTreeSet::new(),
            events: VecDeque::new(),
            health: Health::Unknown,
            next_id: 0,
            in_flight: 0,
            stats: CdnStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> CdnStats {
        self.stats
    }

    /// Whether the last fetch to finish was answered.
    pub fn is_healthy(&self) -> bool {
        matches!(self.health, Health::Healthy)
    }

    /// Whether anything is subscribed.
    pub fn has_subscriptions(&self) -> bool {
        !self.tracked.is_empty()
    }

    /// Asks for `key`: fetched at once (rule 1), unless it is a glob
    /// collection (rule 2). Subscribing twice is a no-op.
    pub fn subscribe(&mut self, key: ResourceKey) {
        if self.tracked.contains_key(&key) {
            return;
        }
        let url = match resource_url(&self.cfg.base, &key.type_url, &key.name) {
            Ok(url) => url,
            Err(reason) => {
                self.events.push_back(CoreEvent::NotRequested {
                    key,
                    reason: Arc::from(reason),
                });
                return;
            }
        };
        self.tracked.insert(
            key.clone(),
            Tracked {
                url: Arc::from(url),
                etag: None,
                last_modified: None,
                held: Held::Nothing,
                in_flight: None,
                due: None,
                erring: false,
            },
        );
        self.fresh.push_back(key);
    }

    /// Stops asking for `key` (rule 8).
    pub fn unsubscribe(&mut self, key: &ResourceKey) {
        let Some(t) = self.tracked.remove(key) else {
            return;
        };
        if let Some(due) = t.due {
            self.due.remove(&(due, key.clone()));
        }
        if t.in_flight.is_some() {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        self.fresh.retain(|k| k != key);
        if let Health::Failing(reported) = &mut self.health {
            reported.remove(key);
        }
    }

    /// The copy the client serves of `key` came from elsewhere: the next
    /// fetch is unconditional, and its answer reported even if unchanged.
    pub fn forget_version(&mut self, key: &ResourceKey) {
        if let Some(t) = self.tracked.get_mut(key) {
            t.etag = None;
            t.last_modified = None;
            t.held = Held::Nothing;
        }
    }

    /// The next fetch to issue at `now`, if any (rule 1); none while the
    /// server backs off (rule 7).
    #[must_use]
    pub fn poll_fetch(&mut self, now: Instant) -> Option<Fetch> {
        if self.in_flight >= self.cfg.max_in_flight || self.pacing.backing_off(now).is_some() {
            return None;
        }
        // Every queued key is tracked (unsubscribe removes both); skip any
        // that is not rather than stall the queue behind it.
        let (key, t) = loop {
            let key = match self.fresh.pop_front() {
                Some(key) => key,
                None => {
                    let first = self.due.first().filter(|(at, _)| *at <= now)?.clone();
                    self.due.remove(&first);
                    first.1
                }
            };
            if let Some(t) = self.tracked.get_mut(&key) {
                break (key, t);
            }
        };
        self.next_id += 1;
        t.in_flight = Some(self.next_id);
        t.due = None;
        self.in_flight += 1;
        Some(Fetch {
            id: self.next_id,
            key,
            url: Arc::clone(&t.url),
            etag: t.etag.clone(),
            last_modified: t.last_modified.clone(),
        })
    }

    /// The next event for the cache.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    /// When [`poll_fetch`](Self::poll_fetch) next has something; `None`
    /// while nothing is due or the fetches in flight are at their limit
    /// (an answer is then the next input); never before the server's
    /// backoff ends.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.in_flight >= self.cfg.max_in_flight {
            return None;
        }
        let backoff = self.pacing.until();
        if !self.fresh.is_empty() {
            return backoff;
        }
        let due = self.due.first()?.0;
        Some(backoff.map_or(due, |until| until.max(due)))
    }

    /// What came of the fetch `id` of `key`, at `now`.
    pub fn handle_fetched(&mut self, id: u64, key: &ResourceKey, fetched: Fetched, now: Instant) {
        let Some(t) = self.tracked.get_mut(key) else {
            return;
        };
        if t.in_flight != Some(id) {
            return;
        }
        t.in_flight = None;
        self.in_flight = self.in_flight.saturating_sub(1);
        let (fresh_for, retry_after) = match &fetched {
            Fetched::Reply(reply) => (reply.fresh_for, reply.retry_after),
            Fetched::Failed(_) => (None, None),
        };
        match self.outcome(key, fetched) {
            Ok(event) => {
                self.answered(key, now, fresh_for);
                let event = event.or_else(|| self.confirmation(key));
                if let Some(t) = self.tracked.get_mut(key) {
                    t.erring = false;
                }
                self.events.extend(event);
            }
            Err(Failure::NoAnswer(why)) => self.failed(key, &why, now, retry_after),
            Err(Failure::Unusable(why)) => self.unusable(key, why, now, retry_after),
        }
    }

    /// The event (if any) an answer means, or why it is a failure (rule 7).
    fn outcome(
        &mut self,
        key: &ResourceKey,
        fetched: Fetched,
    ) -> Result<Option<CoreEvent>, Failure> {
        let Some(t) = self.tracked.get_mut(key) else {
            return Ok(None);
        };
        let reply = match fetched {
            Fetched::Failed(why) => {
                return Err(Failure::NoAnswer(format!(
                    "no answer from {}: {why}",
                    self.cfg.base
                )));
            }
            Fetched::Reply(reply) => reply,
        };
        match reply.status {
            200 => {}
            304 if t.etag.is_some() || t.last_modified.is_some() => {
                self.stats.not_modified += 1;
                return Ok(None);
            }
            304 => {
                return Err(Failure::Unusable(format!(
                    "GET {}: 304 to a fetch without If-None-Match or If-Modified-Since",
                    t.url
                )));
            }
            404 | 410 => {
                t.etag = None;
                t.last_modified = None;
                let before = std::mem::replace(&mut t.held, Held::Absent);
                return Ok((before != Held::Absent).then(|| CoreEvent::Removed {
                    key: key.clone(),
                    reason: RemovedReason::Deleted,
                }));
            }
            // The server says it is failing (or overloaded): the source's
            // failure, named by the server, as a refused connection is.
            status if status >= 500 || status == 429 => {
                return Err(Failure::NoAnswer(format!(
                    "{} answered HTTP status {status}",
                    self.cfg.base
                )));
            }
            status => {
                return Err(Failure::Unusable(format!(
                    "GET {}: HTTP status {status}",
                    t.url
                )));
            }
        }
        let json = is_json(reply.content_type.as_deref());
        let response = match parse(&reply.body, json) {
            Ok(response) => response,
            Err(why) => return Err(Failure::Unusable(format!("GET {}: {why}", t.url))),
        };
        let version: Version = match (&response.version_info, &reply.etag) {
            (v, Some(etag)) if v.is_empty() => Version::new(etag),
            (v, _) => Version::new(v),
        };
        t.etag = reply.etag;
        t.last_modified = reply.last_modified;
        Ok(self.resource_event(key, response, version))
    }

    /// The event a parsed `DiscoveryResponse` means for `key` (rules 4–5).
    fn resource_event(
        &mut self,
        key: &ResourceKey,
        response: envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse,
        version: Version,
    ) -> Option<CoreEvent> {
        let result = answer(&self.types, key, response);
        let t = self.tracked.get_mut(key)?;
        match result {
            Ok(Answer::Resource(resource)) => {
                self.stats.valid += 1;
                let copy = Held::Copy {
                    version: version.clone(),
                    raw: resource.raw().clone(),
                };
                if t.held == copy {
                    return None;
                }
                t.held = copy;
                Some(CoreEvent::Upsert {
                    key: key.clone(),
                    resource,
                    version,
                    ttl: None,
                })
            }
            Ok(Answer::Redirect(target)) => {
                self.stats.valid += 1;
                let redirect = Held::Redirect {
                    target: Arc::clone(&target),
                    version: version.clone(),
                };
                if t.held == redirect {
                    return None;
                }
                t.held = redirect;
                Some(CoreEvent::Redirect {
                    key: key.clone(),
                    target,
                    version,
                })
            }
            Err(error) => {
                self.stats.invalid += 1;
                t.held = Held::Invalid;
                tracing::warn!(resource = %key, url = %t.url, %error, "rejected resource");
                Some(CoreEvent::Invalid {
                    key: key.clone(),
                    error,
                    version,
                })
            }
        }
    }

    /// An answer, fresh in a shared cache for `fresh_for`: the source is
    /// healthy, its backoff over; poll again (rule 1).
    fn answered(&mut self, key: &ResourceKey, now: Instant, fresh_for: Option<Duration>) {
        if !self.is_healthy() {
            self.health = Health::Healthy;
            self.events.push_back(CoreEvent::StreamHealthy);
        }
        self.pacing.answered();
        let delay = self.pacing.next_poll(fresh_for);
        self.schedule(key, now.checked_add(delay).unwrap_or(now));
    }

    /// A failure: report it; the server backs off (rule 7).
    fn failed(
        &mut self,
        key: &ResourceKey,
        why: &str,
        now: Instant,
        retry_after: Option<Duration>,
    ) {
        self.stats.failed += 1;
        tracing::debug!(resource = %key, error = why, "CDN fetch failed");
        let report = match &mut self.health {
            Health::Failing(reported) => reported.insert(key.clone()),
            _ => {
                self.health = Health::Failing(HashSet::from_iter([key.clone()]));
                true
            }
        };
        if report {
            self.events.push_back(CoreEvent::StreamFailed {
                failure: StreamFailure::described(SourceKind::Cdn, why),
            });
        }
        let until = self.pacing.failed(now, retry_after);
        self.schedule(key, until);
    }

    /// An answer that is no use for `key`'s file: its own error, reported
    /// once; the server backs off all the same (rule 7).
    fn unusable(
        &mut self,
        key: &ResourceKey,
        why: String,
        now: Instant,
        retry_after: Option<Duration>,
    ) {
        self.stats.failed += 1;
        tracing::debug!(resource = %key, error = %why, "CDN answer not usable");
        if let Some(t) = self.tracked.get_mut(key).filter(|t| !t.erring) {
            t.erring = true;
            self.events.push_back(CoreEvent::ResourceError {
                key: key.clone(),
                code: GrpcCode::Unavailable,
                message: Arc::from(why),
            });
        }
        let until = self.pacing.failed(now, retry_after);
        self.schedule(key, until);
    }

    /// After the file's own error, its next usable answer reports what it
    /// holds again, so the error is over for its watchers (rule 7). A copy
    /// is decoded anew from its bytes: it passed validation when it came.
    fn confirmation(&self, key: &ResourceKey) -> Option<CoreEvent> {
        let t = self.tracked.get(key).filter(|t| t.erring)?;
        match &t.held {
            Held::Copy { version, raw } => {
                let resource = self.types.get(&key.type_url)?.decode(raw.clone()).ok()?;
                Some(CoreEvent::Upsert {
                    key: key.clone(),
                    resource,
                    version: version.clone(),
                    ttl: None,
                })
            }
            Held::Redirect { target, version } => Some(CoreEvent::Redirect {
                key: key.clone(),
                target: Arc::clone(target),
                version: version.clone(),
            }),
            Held::Absent => Some(CoreEvent::Removed {
                key: key.clone(),
                reason: RemovedReason::Deleted,
            }),
            Held::Nothing | Held::Invalid => None,
        }
    }

    fn schedule(&mut self, key: &ResourceKey, at: Instant) {
        let Some(t) = self.tracked.get_mut(key) else {
            return;
        };
        t.due = Some(at);
        self.due.insert((at, key.clone()));
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
