//! [`PolicySession`]: the state machine of the policy stream to one
//! control plane, across its reconnects.

use crate::hash::HashMap;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use self::told::Told;
use super::config::PolicySessionConfig;
use super::snapshot::{self, Rejection, Snapshot};
use super::wire::{
    ErrorDetail, HealthCheckRequest, PolicyDiscoveryRequest, PolicyDiscoveryResponse,
};
use crate::backoff::Jitter;
use crate::error::GrpcCode;
use crate::protocol::{CoreEvent, Phase, ResourceKey, SourceKind, StreamEnd, StreamFailure};
use crate::types::VALIDATING_POLICY_TYPE_URL;
use crate::version::Version;

/// What the driver writes: on the stream, or as a unary call.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyTransmit {
    /// A request on `PolicyDiscoveryStream`.
    Discovery(PolicyDiscoveryRequest),
    /// A `HealthCheck` call; the driver stamps `time` with the wall clock
    /// (the session reads no clock).
    HealthCheck(HealthCheckRequest),
}

/// What the driver logs as a warning, naming the server (the session
/// knows none). Server text in it is bounded but not escaped: the driver
/// escapes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyWarning {
    /// A snapshot was rejected (NACKed); the last good policies keep
    /// serving. Once per rejected version and reason.
    Nacked {
        /// The rejected snapshot's `version_info`.
        version: Arc<str>,
        /// The NACK's `error_detail`: the policy and the field.
        reason: String,
    },
    /// A policy is not considered: its evaluation mode is not one this
    /// client evaluates. Once per policy, while it stays so.
    Skipped {
        /// The accepted snapshot's `version_info`.
        version: Arc<str>,
        /// The policy's name (`policies[i]` without one).
        policy: String,
        /// Its `evaluation_mode`, as sent.
        evaluation_mode: String,
    },
}

/// Counters of one policy session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Snapshots received.
    pub responses: u64,
    /// Snapshots accepted (ACKed).
    pub acks: u64,
    /// Snapshots rejected (NACKed).
    pub nacks: u64,
    /// Policies of accepted snapshots (`resource_updates_valid`).
    pub resource_updates_valid: u64,
    /// Policies that failed validation (`resource_updates_invalid`).
    pub resource_updates_invalid: u64,
    /// Entries marked `delete` inside snapshots, left out.
    pub deletion_markers: u64,
    /// Policies of accepted snapshots not considered (of another
    /// evaluation mode), left out.
    pub policies_skipped: u64,
    /// Requests re-sent to learn of new versions.
    pub polls: u64,
    /// Health checks answered.
    pub health_checks_ok: u64,
    /// Health checks that failed (the stream goes on).
    pub health_checks_failed: u64,
    /// Streams that failed before any response (`server_failure`).
    pub server_failure: u64,
    /// Streams opened.
    pub streams_opened: u64,
}

/// The deadlines of a session; `None` is not armed.
#[derive(Debug, Clone, Copy, Default)]
struct Timers {
    handshake: Option<Instant>,
    first_response: Option<Instant>,
    poll: Option<Instant>,
    health_check: Option<Instant>,
}

impl Timers {
    fn next(&self) -> Option<Instant> {
        [
            self.handshake,
            self.first_response,
            self.poll,
            self.health_check,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// What lives only as long as one stream: the nonce and what is owed.
#[derive(Debug, Default)]
struct PerStream {
    /// Whether the stream was accepted or answered.
    established: bool,
    /// Whether the server accepted it (response headers).
    accepted: bool,
    /// What to write, in order; `true` marks an ACK or NACK (what a poll
    /// re-sends from then on), as opposed to the initial request, a poll
    /// or a health check.
    outbox: VecDeque<(PolicyTransmit, bool)>,
    /// What a poll re-sends: the initial request until the server answers
    /// (a server that only answers requests may have missed it), then the
    /// last ACK or NACK written.
    poll_request: Option<PolicyDiscoveryRequest>,
    /// Whether this stream's first snapshot was accepted: it re-states
    /// every key, since the cache may have been told otherwise meanwhile.
    restated: bool,
}

/// The sans-IO state machine of one policy stream.
///
/// Methods come in four families, as in [`crate::protocol::Session`]:
/// getters; commands ([`subscribe`](Self::subscribe), …); inputs
/// (`handle_*`, each with the current `now`); outputs (`poll_*`).
///
/// After any command or input, the driver asks
/// [`poll_close`](Self::poll_close) whether the stream must end, then
/// drains [`poll_transmit`](Self::poll_transmit), then
/// [`poll_event`](Self::poll_event), then sleeps until
/// [`poll_timeout`](Self::poll_timeout) and calls
/// [`handle_timeout`](Self::handle_timeout).
#[derive(Debug)]
pub struct PolicySession {
    cfg: PolicySessionConfig,
    phase: Phase,
    // Durable: survives reconnects.
    /// The last good snapshot, served while disconnected and after a NACK.
    held: Option<Snapshot>,
    subscribed: BTreeSet<ResourceKey>,
    wildcard: bool,
    told: HashMap<ResourceKey, Told>,
    /// Keys whose watchers heard of a NACK with their copy serving: the
    /// next accepted snapshot states them again, which clears the error.
    nacked: BTreeSet<ResourceKey>,
    /// The last NACK warned of (version, reason): the same is not again.
    last_nack: Option<(Version, String)>,
    /// Draws every poll and health-check interval.
    jitter: Jitter,
    stats: PolicyStats,
    warnings: VecDeque<PolicyWarning>,
    // Per stream.
    stream: PerStream,
    timers: Timers,
    events: VecDeque<CoreEvent>,
    close: Option<StreamEnd>,
}

impl PolicySession {
    /// A session with no stream and no subscriptions.
    pub fn new(cfg: PolicySessionConfig) -> Self {
        PolicySession {
            jitter: Jitter::new(cfg.jitter_seed, cfg.jitter),
            cfg,
            phase: Phase::Idle,
            held: None,
            subscribed: BTreeSet::new(),
            wildcard: false,
            told: HashMap::default(),
            nacked: BTreeSet::new(),
            last_nack: None,
            stats: PolicyStats::default(),
            warnings: VecDeque::new(),
            stream: PerStream::default(),
            timers: Timers::default(),
            events: VecDeque::new(),
            close: None,
        }
    }

    // ----- getters -----

    /// Where the stream is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The configuration.
    pub fn config(&self) -> &PolicySessionConfig {
        &self.cfg
    }

    /// The version of the last accepted snapshot.
    pub fn version(&self) -> Option<&Version> {
        self.held.as_ref().map(|s| &s.version)
    }

    /// The names of the policies served, sorted.
    pub fn policy_names(&self) -> impl Iterator<Item = &str> {
        self.held
            .iter()
            .flat_map(|s| s.policies.keys().map(String::as_str))
    }

    /// The names of the policies of the held snapshot that are not
    /// considered (another evaluation mode), sorted.
    pub fn skipped_policies(&self) -> impl Iterator<Item = &str> {
        self.held
            .iter()
            .flat_map(|s| s.skipped.keys().map(String::as_str))
    }

    /// Whether anything is subscribed (names or `*`).
    pub fn has_subscriptions(&self) -> bool {
        self.wildcard || !self.subscribed.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> &PolicyStats {
        &self.stats
    }

    // ----- commands -----

    /// Asks for `key`. The held snapshot answers at once; a stream opened
    /// later answers it with its first snapshot.
    pub fn subscribe(&mut self, key: ResourceKey) {
        if self.subscribed.insert(key.clone()) && self.held.is_some() {
            self.state(&key, true);
        }
    }

    /// Stops asking for `key`.
    pub fn unsubscribe(&mut self, key: &ResourceKey) {
        if self.subscribed.remove(key) && !self.wildcard_covers(key) {
            self.told.remove(key);
        }
    }

    /// The copy the client serves of `key` came from another server: the
    /// next snapshot states it again even if unchanged.
    pub fn forget_version(&mut self, key: &ResourceKey) {
        self.told.remove(key);
    }

    /// Asks for every policy (a wildcard of the policy type; other types
    /// have nothing on this stream).
    pub fn subscribe_wildcard(&mut self, type_url: &str) {
        if type_url != VALIDATING_POLICY_TYPE_URL || self.wildcard {
            return;
        }
        self.wildcard = true;
        if self.held.is_some() {
            for key in self.held_keys() {
                self.state(&key, true);
            }
        }
    }

    /// Stops asking for every policy.
    pub fn unsubscribe_wildcard(&mut self, type_url: &str) {
        if type_url != VALIDATING_POLICY_TYPE_URL || !self.wildcard {
            return;
        }
        self.wildcard = false;
        let subscribed = &self.subscribed;
        self.told.retain(|key, _| subscribed.contains(key));
    }

    // ----- inputs -----

    /// A stream was opened: its first request asks for a full snapshot
    /// (empty version and nonce, the protocol's initial request), whatever
    /// the session holds, so that any server answers it. It leaves at
    /// once, whether or not the server has said anything, and is what a
    /// poll re-sends until the server answers.
    pub fn handle_connected(&mut self, now: Instant) {
        self.phase = Phase::AwaitingFirstResponse;
        self.stream = PerStream::default();
        self.close = None;
        self.stats.streams_opened += 1;
        self.timers = Timers {
            handshake: Some(now + self.cfg.handshake_timeout),
            first_response: None,
            poll: None,
            // Liveness from the start: the control plane learns of the
            // client as soon as it connects.
            health_check: Some(now),
        };
        let initial = self.request("", "", None);
        self.stream.poll_request = Some(initial.clone());
        self.stream
            .outbox
            .push_back((PolicyTransmit::Discovery(initial), false));
    }

    /// The server accepted the stream (its response headers arrived).
    pub fn handle_stream_accepted(&mut self, now: Instant) {
        if self.phase != Phase::AwaitingFirstResponse || self.stream.accepted {
            return;
        }
        self.stream.accepted = true;
        self.events.push_back(CoreEvent::StreamAccepted);
        self.establish(now);
    }

    /// A snapshot arrived: accepted (events, ACK) or rejected (NACK naming
    /// the policy and field; the last good snapshot keeps serving).
    pub fn handle_response(&mut self, now: Instant, response: PolicyDiscoveryResponse) {
        if self.phase == Phase::Idle {
            return;
        }
        self.stats.responses += 1;
        if self.phase == Phase::AwaitingFirstResponse {
            self.establish(now);
            self.timers.first_response = None;
            self.phase = Phase::Streaming;
            self.events.push_back(CoreEvent::StreamHealthy);
        }
        let answer = match snapshot::check(&response) {
            Ok(snapshot) => self.accept(snapshot, &response.nonce),
            Err(rejection) => self.reject(rejection, &response),
        };
        self.stream
            .outbox
            .push_back((PolicyTransmit::Discovery(answer), true));
    }

    /// A health check ended; failures are counted, never fatal.
    pub fn handle_health_check(&mut self, _now: Instant, result: Result<(), String>) {
        match result {
            Ok(()) => self.stats.health_checks_ok += 1,
            Err(_) => self.stats.health_checks_failed += 1,
        }
    }

    /// The stream ended. Before any response it is a server failure (gRFC
    /// A57): the federation falls back or reports it; the held policies
    /// keep serving either way.
    pub fn handle_stream_end(&mut self, _now: Instant, end: StreamEnd) {
        if self.phase == Phase::Idle {
            return;
        }
        if self.phase != Phase::Streaming && end.initiator.is_remote() {
            self.stats.server_failure += 1;
            self.events.push_back(CoreEvent::StreamFailed {
                failure: StreamFailure::before_answer(SourceKind::PolicyStream, end),
            });
        }
        self.phase = Phase::Idle;
        self.stream = PerStream::default();
        self.timers = Timers::default();
        self.close = None;
    }

    /// Fires the deadlines that passed; spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if due(self.timers.handshake) {
            self.timers.handshake = None;
            self.close = Some(StreamEnd::transport(
                GrpcCode::Unavailable,
                format!(
                    "the server did not answer within {:?}",
                    self.cfg.handshake_timeout
                ),
            ));
        }
        if due(self.timers.first_response) {
            self.timers.first_response = None;
            self.close = Some(StreamEnd::new(
                GrpcCode::DeadlineExceeded,
                format!(
                    "the server sent no snapshot within {:?}",
                    self.cfg.first_response_timeout
                ),
            ));
        }
        if due(self.timers.poll) {
            self.timers.poll = Some(now + self.jitter.interval(self.cfg.timing.poll_interval));
            if let Some(request) = self.stream.poll_request.clone() {
                self.stats.polls += 1;
                self.stream
                    .outbox
                    .push_back((PolicyTransmit::Discovery(request), false));
            }
        }
        if due(self.timers.health_check) {
            let interval = self.jitter.interval(self.cfg.timing.health_check_interval);
            self.timers.health_check = Some(now + interval);
            let check = PolicyTransmit::HealthCheck(HealthCheckRequest {
                client_address: self.cfg.client_address.clone(),
                time: None,
            });
            self.stream.outbox.push_back((check, false));
        }
    }

    // ----- outputs -----

    /// Whether the stream must end now (a deadline passed), and how.
    #[must_use]
    pub fn poll_close(&mut self) -> Option<StreamEnd> {
        self.close.take()
    }

    /// The next thing to write. Writing any request (re)starts the poll
    /// timer: the next poll is one (jittered) interval after the last
    /// request, the initial one included.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<PolicyTransmit> {
        if self.phase == Phase::Idle {
            return None;
        }
        let (next, answer) = self.stream.outbox.pop_front()?;
        if let PolicyTransmit::Discovery(request) = &next {
            if answer {
                self.stream.poll_request = Some(request.clone());
            }
            self.timers.poll = Some(now + self.jitter.interval(self.cfg.timing.poll_interval));
        }
        Some(next)
    }

    /// The next warning for the log.
    #[must_use]
    pub fn poll_warning(&mut self) -> Option<PolicyWarning> {
        self.warnings.pop_front()
    }

    /// The next event for the cache.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        self.events.pop_front()
    }

    /// The earliest deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    // ----- helpers -----

    fn request(&self, version: &str, nonce: &str, error: Option<String>) -> PolicyDiscoveryRequest {
        PolicyDiscoveryRequest {
            client_address: self.cfg.client_address.clone(),
            version_info: version.to_owned(),
            response_nonce: nonce.to_owned(),
            error_detail: error.map(|message| ErrorDetail { message }),
        }
    }

    fn establish(&mut self, now: Instant) {
        if self.stream.established {
            return;
        }
        self.stream.established = true;
        self.timers.handshake = None;
        if self.phase == Phase::AwaitingFirstResponse {
            self.timers.first_response = Some(now + self.cfg.first_response_timeout);
        }
    }

    /// Holds `snapshot`, tells the cache what changed, and returns the ACK.
    fn accept(&mut self, snapshot: Snapshot, nonce: &str) -> PolicyDiscoveryRequest {
        self.stats.acks += 1;
        self.stats.resource_updates_valid += snapshot.policies.len() as u64;
        self.stats.deletion_markers += snapshot.deletion_markers;
        self.stats.policies_skipped += snapshot.skipped.len() as u64;
        self.warn_skipped(&snapshot);
        self.last_nack = None;
        let ack = self.request(&snapshot.version.as_str(), nonce, None);
        // Keys the cache holds copies of but that may now be gone.
        let mut keys: BTreeSet<ResourceKey> = self
            .told
            .iter()
            .filter(|(_, t)| matches!(t, Told::Copy(_)))
            .map(|(k, _)| k.clone())
            .collect();
        self.held = Some(snapshot);
        keys.extend(self.subscribed.iter().cloned());
        keys.extend(self.held_keys());
        let restate_all = !self.stream.restated;
        self.stream.restated = true;
        for key in keys {
            let restate = self.nacked.remove(&key) || restate_all;
            self.state(&key, restate);
        }
        self.nacked.clear();
        ack
    }

    /// Warns of each policy newly not considered.
    fn warn_skipped(&mut self, snapshot: &Snapshot) {
        let before = self.held.as_ref().map(|held| &held.skipped);
        for (policy, mode) in &snapshot.skipped {
            if before.and_then(|b| b.get(policy)) == Some(mode) {
                continue;
            }
            self.warnings.push_back(PolicyWarning::Skipped {
                version: Arc::from(snapshot::shorten(&snapshot.version.as_str())),
                policy: snapshot::shorten(policy),
                evaluation_mode: snapshot::shorten(mode),
            });
        }
    }

    /// Reports the NACK and returns it; it carries the last good version.
    fn reject(
        &mut self,
        rejection: Rejection,
        response: &PolicyDiscoveryResponse,
    ) -> PolicyDiscoveryRequest {
        self.stats.nacks += 1;
        self.stats.resource_updates_invalid += 1;
        let version = Version::new(&response.version_info);
        self.report_nack(&rejection, &version);
        let news = (version.clone(), rejection.message.clone());
        if self.last_nack.as_ref() != Some(&news) {
            self.warnings.push_back(PolicyWarning::Nacked {
                version: Arc::from(snapshot::shorten(&version.as_str())),
                reason: rejection.message.clone(),
            });
            self.last_nack = Some(news);
        }
        let held = self.version().map(String::from).unwrap_or_default();
        self.request(&held, &response.nonce, Some(rejection.message))
    }
}

#[path = "told.rs"]
mod told;

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
