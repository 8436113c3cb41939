//! [`Session`]: the state machine of one ADS stream to one server, across
//! its reconnects.

use crate::hash::{HashMap, TypeMap};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};

use super::ack::PendingAck;
use super::config::{SessionConfig, with_client_features};
use super::event::{CoreEvent, RemovedReason, ResourceKey};
use super::stream_end::{StreamEnd, StreamFailure};
use super::timers::{Timer, Timers};
use super::type_state::TypeState;
use super::undecoded::UndecodedResource;
use crate::bootstrap::ApiVariant;
use crate::error::GrpcCode;
use crate::types::{TypeRegistry, ValidationError};
use crate::version::Version;

/// A request for the driver to write on the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// On a `DeltaAggregatedResources` stream.
    Delta(DeltaDiscoveryRequest),
    /// On a `StreamAggregatedResources` stream.
    Sotw(DiscoveryRequest),
}

impl Request {
    /// The request's type URL.
    pub fn type_url(&self) -> &str {
        match self {
            Request::Delta(r) => &r.type_url,
            Request::Sotw(r) => &r.type_url,
        }
    }
}

/// Where a session's stream is, named after what it waits for.
///
/// ```text
///            handle_connected              first response
///  Idle ───────────────────► AwaitingFirstResponse ──────────► Streaming
///   ▲                              │  handle_stream_end            │
///   └──────────────────────────────┴───────────────────────────────┘
///        (from AwaitingFirstResponse: StreamFailed, gRFC A57)
/// ```
///
/// Within `AwaitingFirstResponse` the stream is *established* once its
/// connection proves ready ([`Session::handle_connection_ready`]), the
/// server accepts it ([`Session::handle_stream_accepted`]) or answers it:
/// the handshake deadline stops, and the does-not-exist timers of what was
/// written start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No stream: waiting for the driver to open one.
    Idle,
    /// A stream is open and nothing has come back yet; ending here is a
    /// server failure (gRFC A57).
    AwaitingFirstResponse,
    /// At least one response arrived on this stream.
    Streaming,
}

/// Valid and rejected resources received of one type (gRFC A78's
/// `resource_updates_valid` and `_invalid` with their
/// `grpc.xds.resource_type` label).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TypeUpdates {
    /// Resources received that were valid.
    pub valid: u64,
    /// Resources received that were rejected.
    pub invalid: u64,
}

/// Counters of one session, named after gRFC A78 where it names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Resources received that were valid (`resource_updates_valid`).
    pub resource_updates_valid: u64,
    /// Resources received that were rejected (`resource_updates_invalid`).
    pub resource_updates_invalid: u64,
    /// The two counters above split by the type URL of the response that
    /// carried the resources. Only types this session requested appear
    /// (responses of other types are not counted), so the map is bounded by
    /// the subscriptions, not by what a server sends.
    pub updates_by_type: BTreeMap<Arc<str>, TypeUpdates>,
    /// Streams that failed before any response (`server_failure`).
    pub server_failure: u64,
    /// Names of authorities this server may not deliver, ignored.
    pub foreign_names_ignored: u64,
    /// Resources nobody subscribed to (and no `*`), ignored.
    pub unrequested_ignored: u64,
    /// Responses of a type this stream never requested, neither ACKed nor
    /// NACKed.
    pub unknown_type_responses_ignored: u64,
    /// Deletions of full-state resources not applied because the server has
    /// `ignore_resource_deletion` (gRFC A53).
    pub deletions_ignored: u64,
    /// Responses received.
    pub responses: u64,
}

/// The sans-IO state machine of one ADS stream to one server.
///
/// Methods come in four families (after quinn-proto):
///
/// - getters: [`phase`](Self::phase), [`is_subscribed`](Self::is_subscribed),
///   [`subscriptions`](Self::subscriptions), [`stats`](Self::stats), …;
/// - commands: [`subscribe`](Self::subscribe),
///   [`unsubscribe`](Self::unsubscribe),
///   [`subscribe_wildcard`](Self::subscribe_wildcard), …;
/// - inputs: `handle_*`, each taking the current `now`;
/// - outputs: `poll_*`.
///
/// After any command or input, the driver first asks
/// [`poll_close`](Self::poll_close) whether the stream must end (a deadline
/// passed), then drains the outputs in this order:
/// [`poll_transmit`](Self::poll_transmit) until `None` (it arms the
/// does-not-exist timers of what it writes), then
/// [`poll_event`](Self::poll_event) until `None`, then sleeps until
/// [`poll_timeout`](Self::poll_timeout) and calls
/// [`handle_timeout`](Self::handle_timeout).
#[derive(Debug)]
pub struct Session {
    pub(super) cfg: SessionConfig,
    pub(super) types: Arc<TypeRegistry>,
    pub(super) phase: Phase,
    pub(super) states: TypeMap<TypeState>,
    pub(super) timers: Timers,
    pub(super) events: VecDeque<CoreEvent>,
    pub(super) stats: SessionStats,
    /// What lives and dies with one stream: reset whole when a stream
    /// opens or ends.
    pub(super) stream: PerStream,
}

/// The session's state that does not survive a stream (the versions and
/// subscriptions of [`TypeState`]'s durable part do).
#[derive(Debug, Default)]
pub(super) struct PerStream {
    /// Whether the first request (which carries `node`) left.
    pub(super) node_sent: bool,
    /// Types with subscription changes to write, in the order they changed.
    pub(super) dirty: VecDeque<Arc<str>>,
    /// ACKs and NACKs owed, in the order of the responses.
    pub(super) acks: VecDeque<PendingAck>,
    /// Whether its connection proved ready, or the server accepted or
    /// answered it.
    pub(super) established: bool,
    /// Whether the server accepted it (response headers).
    pub(super) accepted: bool,
    /// Names written before the stream was established, whose
    /// does-not-exist timers start when it is (gRFC A57).
    pub(super) written_early: Vec<(Arc<str>, Arc<str>)>,
    /// Whether anything was unsubscribed on it: until then every name
    /// written early is still wanted, and a cold start of a million names
    /// need not look each up again when the stream is established.
    pub(super) unsubscribed: bool,
    /// Why the session wants the stream closed (a deadline passed).
    pub(super) close: Option<StreamEnd>,
    /// Copies from the state directory its first requests claimed, to
    /// confirm once the server accepts or answers it.
    pub(super) claimed: Vec<ResourceKey>,
}

impl Session {
    /// A session with no stream and no subscriptions. The node gains the
    /// client features the core implements, however `cfg` was built.
    pub fn new(mut cfg: SessionConfig, types: Arc<TypeRegistry>) -> Self {
        cfg.node = with_client_features(cfg.node);
        Session {
            cfg,
            types,
            phase: Phase::Idle,
            states: TypeMap::default(),
            timers: Timers::default(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
            stream: PerStream::default(),
        }
    }

    // ----- getters -----

    /// Where the stream is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The variant the next (or current) stream speaks.
    pub fn variant(&self) -> ApiVariant {
        self.cfg.variant
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Whether `key` is explicitly subscribed.
    pub fn is_subscribed(&self, key: &ResourceKey) -> bool {
        self.states
            .get(&key.type_url)
            .is_some_and(|s| s.durable.subscribed.contains(&key.name))
    }

    /// Whether `*` is subscribed for `type_url`.
    pub fn is_wildcard(&self, type_url: &str) -> bool {
        self.states
            .get(type_url)
            .is_some_and(|s| s.durable.wildcard)
    }

    /// Whether anything (a name or `*`) is subscribed.
    pub fn has_subscriptions(&self) -> bool {
        self.states.values().any(TypeState::has_interest)
    }

    /// Every explicit subscription, in no particular order.
    pub fn subscriptions(&self) -> impl Iterator<Item = ResourceKey> + '_ {
        self.states.iter().flat_map(|(type_url, s)| {
            s.durable
                .subscribed
                .iter()
                .map(|name| ResourceKey::new(Arc::clone(type_url), Arc::clone(name)))
        })
    }

    /// The version of the received copy of `key`, if the session holds one.
    pub fn held_version(&self, key: &ResourceKey) -> Option<&Version> {
        self.states
            .get(&key.type_url)
            .and_then(|s| s.durable.held.get(&key.name))
    }

    /// The counters.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    // ----- commands -----

    /// Subscribes to `key` (its `name` a canonical key, see
    /// [`crate::name::canonical_key`]). Subscribing twice is a no-op.
    pub fn subscribe(&mut self, key: ResourceKey) {
        let state = self
            .states
            .get_or_insert_with(&key.type_url, TypeState::default);
        if state.subscribe(key.name) {
            self.mark_dirty(&key.type_url);
        }
    }

    /// Unsubscribes from `key`, forgetting its received copy and timers
    /// (unless `*` still delivers it).
    pub fn unsubscribe(&mut self, key: &ResourceKey) {
        let Some(state) = self.states.get_mut(&key.type_url) else {
            return;
        };
        if !state.unsubscribe(&key.name) {
            return;
        }
        self.stream.unsubscribed = true;
        state.durable.resumed.remove(&key.name);
        if !state.durable.wildcard {
            self.timers.stop_does_not_exist(key);
            self.timers.cancel(&Timer::TtlExpiry(key.clone()));
        }
        self.mark_dirty(&key.type_url);
    }

    /// Forgets the version held of `key`, so that the next stream asks for
    /// it afresh (no delta `initial_resource_versions` entry). The copy the
    /// client serves came from another server (gRFC A71 fallback), so what
    /// this server sent last is not what the client holds. The resource
    /// still counts as held (gRFC A57: no does-not-exist timer for it).
    pub fn forget_version(&mut self, key: &ResourceKey) {
        let Some(state) = self.states.get_mut(&key.type_url) else {
            return;
        };
        // A known absence is forgotten too: this server's next answer about
        // the name, even a deletion, is news to the client.
        state.durable.absent.remove(&key.name);
        state.durable.timed_out.remove(&key.name);
        state.durable.resumed.remove(&key.name);
        if let Some(version) = state.durable.held.get_mut(&key.name) {
            *version = Version::empty();
        }
    }

    /// Subscribes to `*` for `type_url`: every resource the server deems ours.
    pub fn subscribe_wildcard(&mut self, type_url: &str) {
        let type_url: Arc<str> = Arc::from(type_url);
        let state = self
            .states
            .get_or_insert_with(&type_url, TypeState::default);
        if state.set_wildcard(true).is_some() {
            self.mark_dirty(&type_url);
        }
    }

    /// Unsubscribes from `*` for `type_url`; explicitly subscribed names stay,
    /// what only `*` delivered is forgotten.
    pub fn unsubscribe_wildcard(&mut self, type_url: &str) {
        let Some(type_url) = self
            .states
            .get_key_value(type_url)
            .map(|(k, _)| Arc::clone(k))
        else {
            return;
        };
        let Some(dropped) = self
            .states
            .get_mut(&type_url)
            .and_then(|state| state.set_wildcard(false))
        else {
            return;
        };
        self.stream.unsubscribed = true;
        for name in dropped {
            self.timers.cancel(&Timer::TtlExpiry(ResourceKey::new(
                Arc::clone(&type_url),
                name,
            )));
        }
        self.mark_dirty(&type_url);
    }

    /// Sets the variant of the next stream (the transport's delta→SotW
    /// fallback). Versions and received resources carry over.
    pub fn set_variant(&mut self, variant: ApiVariant) {
        self.cfg.variant = variant;
    }

    // ----- inputs -----

    /// A new stream is being opened: its requests may be written now, and
    /// the server has [`SessionConfig::handshake_timeout`] to accept or
    /// answer it (the driver calls this before connecting, so the deadline
    /// covers the whole attempt). Per-stream state starts afresh; every
    /// subscription is written again.
    pub fn handle_connected(&mut self, now: Instant) {
        self.phase = Phase::AwaitingFirstResponse;
        self.stream = PerStream::default();
        self.timers.cancel(&Timer::FirstResponse);
        self.timers
            .set(Timer::Handshake, now + self.cfg.handshake_timeout);
        let mut types: Vec<&Arc<str>> = Vec::new();
        for (type_url, state) in self.states.iter_mut() {
            state.reset_stream();
            if state.has_interest() {
                state.stream.queued = true;
                types.push(type_url);
            }
        }
        // Sorted, so that the first requests are deterministic.
        types.sort();
        self.stream.dirty.extend(types.into_iter().cloned());
    }

    /// How many timers are armed, for tests of what is kept.
    #[cfg(test)]
    pub(super) fn armed_timers(&self) -> usize {
        self.timers.len()
    }

    /// The server accepted the stream (its response headers arrived): the
    /// stream is established.
    pub fn handle_stream_accepted(&mut self, now: Instant) {
        if self.phase != Phase::AwaitingFirstResponse || self.stream.accepted {
            return;
        }
        self.stream.accepted = true;
        self.events.push_back(CoreEvent::StreamAccepted);
        self.establish(now);
        self.confirm_claimed();
    }

    /// The server answered a request on the stream's connection: it speaks
    /// HTTP/2, so the connection is ready (gRPC's READY), though the stream
    /// itself may wait for its headers until the first response (grpc-go and
    /// grpc-java servers send them together). The stream is established:
    /// the handshake deadline stops and what was written starts its
    /// does-not-exist timers. No event: the stream has not answered yet.
    pub fn handle_connection_ready(&mut self, now: Instant) {
        if self.phase == Phase::AwaitingFirstResponse {
            self.establish(now);
        }
    }

    /// A `DeltaDiscoveryResponse` arrived.
    pub fn handle_delta_response(&mut self, now: Instant, response: DeltaDiscoveryResponse) {
        let before = self.update_totals();
        let type_url = response.type_url.clone();
        self.on_delta_response(now, response);
        // After the response, so that a copy it replaced is not confirmed.
        self.confirm_claimed();
        self.count_by_type(&type_url, before);
    }

    /// A `DeltaDiscoveryResponse` arrived, read in place
    /// ([`WireDeltaResponse`](super::WireDeltaResponse), its text checked
    /// with [`check_text`](super::WireDeltaResponse::check_text)): as
    /// [`Session::handle_delta_response`], without a `String` for each
    /// name, version and type URL.
    pub fn handle_delta_wire(&mut self, now: Instant, response: super::WireDeltaResponse) {
        let before = self.update_totals();
        // A second handle on the bytes, not a copy of the text.
        let type_url = response.type_url.clone();
        self.on_delta_wire(now, response);
        self.confirm_claimed();
        self.count_by_type(super::wire::as_text(&type_url), before);
    }

    /// A SotW `DiscoveryResponse` arrived.
    pub fn handle_sotw_response(&mut self, now: Instant, response: DiscoveryResponse) {
        self.handle_sotw_response_with_undecoded(now, response, Vec::new());
    }

    /// A SotW `DiscoveryResponse` arrived, some of whose resources the
    /// transport could not decode (REST-JSON: a resource whose JSON does not
    /// map): those are rejected like resources that fail validation, by the
    /// name they give themselves when the transport could read it.
    pub fn handle_sotw_response_with_undecoded(
        &mut self,
        now: Instant,
        response: DiscoveryResponse,
        undecoded: Vec<UndecodedResource>,
    ) {
        let before = self.update_totals();
        let type_url = response.type_url.clone();
        self.on_sotw_response(now, response, undecoded);
        self.count_by_type(&type_url, before);
    }

    /// A SotW response of `type_url` arrived that cannot be read as a whole
    /// (REST-JSON: a body that is not a `DiscoveryResponse` of the polled
    /// type). It is NACKed with the last accepted version and `error`;
    /// every name of the type the session wants hears of it, and keeps its
    /// last good copy. `nonce` and `version` are the response's, as far as
    /// they could be read. The server answered: not a stream failure.
    pub fn handle_sotw_rejected(
        &mut self,
        now: Instant,
        type_url: &str,
        nonce: String,
        version: &str,
        error: ValidationError,
    ) {
        self.on_sotw_rejected(now, type_url, nonce, version, error);
    }

    fn update_totals(&self) -> TypeUpdates {
        TypeUpdates {
            valid: self.stats.resource_updates_valid,
            invalid: self.stats.resource_updates_invalid,
        }
    }

    /// Adds what one response of `type_url` added to the totals to that
    /// type's counters. The totals are counted where each resource is
    /// judged; one response carries one type, so the difference is that
    /// type's. A type never requested is not counted, and not entered.
    fn count_by_type(&mut self, type_url: &str, before: TypeUpdates) {
        let after = self.update_totals();
        let added = TypeUpdates {
            valid: after.valid.saturating_sub(before.valid),
            invalid: after.invalid.saturating_sub(before.invalid),
        };
        if added == TypeUpdates::default() {
            return;
        }
        let Some(type_url) = self
            .states
            .get_key_value(type_url)
            .map(|(k, _)| Arc::clone(k))
        else {
            return;
        };
        let counts = self.stats.updates_by_type.entry(type_url).or_default();
        counts.valid += added.valid;
        counts.invalid += added.invalid;
    }

    /// The stream ended (or could not be opened). A stream the remote side
    /// ends before any response is a server failure and reported as
    /// [`CoreEvent::StreamFailed`] (gRFC A57); either way the does-not-exist
    /// timers stop until the next stream writes its requests.
    pub fn handle_stream_end(&mut self, _now: Instant, end: StreamEnd) {
        if self.phase != Phase::Streaming && end.initiator.is_remote() {
            self.stats.server_failure += 1;
            self.events.push_back(CoreEvent::StreamFailed {
                failure: StreamFailure::before_answer(self.cfg.source, end),
            });
        }
        self.phase = Phase::Idle;
        self.stream = PerStream::default();
        self.timers.cancel(&Timer::Handshake);
        self.timers.cancel(&Timer::FirstResponse);
        // A57: "the timer is cancelled if the stream fails" — the server
        // never had a chance to answer.
        self.timers.cancel_does_not_exist();
    }

    /// Fires every timer due at `now`. Spurious calls are no-ops.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(timer) = self.timers.pop_expired(now) {
            match timer {
                Timer::DoesNotExist(key) => {
                    if let Some(state) = self.states.get_mut(&key.type_url)
                        && state.wants(&key.name)
                        && !state.durable.held.contains_key(&key.name)
                    {
                        state.durable.timed_out.insert(Arc::clone(&key.name));
                        self.events.push_back(CoreEvent::DoesNotExist { key });
                    }
                }
                Timer::TtlExpiry(key) => {
                    if let Some(state) = self.states.get_mut(&key.type_url)
                        && state.durable.held.remove(&key.name).is_some()
                    {
                        self.events.push_back(CoreEvent::Removed {
                            key,
                            reason: RemovedReason::TtlExpired,
                        });
                    }
                }
                Timer::Handshake => {
                    // UNAVAILABLE, as gRPC reports a connection that never
                    // became ready.
                    self.stream.close = Some(StreamEnd::transport(
                        GrpcCode::Unavailable,
                        format!(
                            "the server did not answer within {:?} (TCP connect, TLS and HTTP/2 handshakes, response headers or a response)",
                            self.cfg.handshake_timeout
                        ),
                    ));
                }
                Timer::FirstResponse => {
                    let timeout = self.cfg.first_response_timeout.unwrap_or_default();
                    self.stream.close = Some(StreamEnd::new(
                        GrpcCode::DeadlineExceeded,
                        format!("the server is reachable but sent no response within {timeout:?}"),
                    ));
                }
            }
        }
    }

    // ----- outputs -----

    /// The next request to write, if any: ACKs/NACKs first, in the order of
    /// the responses, then subscription changes. Arms the does-not-exist
    /// timer of every name it writes that is neither held nor known absent
    /// (gRFC A57: the timer starts when the request is actually sent on an
    /// established stream; on a stream not yet established, when it is).
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Request> {
        if self.phase == Phase::Idle {
            return None;
        }
        loop {
            let (type_url, ack) = if let Some(ack) = self.stream.acks.pop_front() {
                (Arc::clone(&ack.type_url), Some(ack))
            } else {
                let type_url = self.stream.dirty.pop_front()?;
                if let Some(state) = self.states.get_mut(&type_url) {
                    state.stream.queued = false;
                }
                (type_url, None)
            };
            let request = match self.cfg.variant {
                ApiVariant::Delta => self.build_delta(now, &type_url, ack),
                ApiVariant::Sotw => self.build_sotw(now, &type_url, ack),
            };
            if let Some(request) = request {
                self.stream.node_sent = true;
                return Some(request);
            }
        }
    }

    /// Whether the stream must be closed, and how to report it: a deadline
    /// passed (the handshake, or the first response). The driver closes the
    /// stream and passes the end to
    /// [`handle_stream_end`](Self::handle_stream_end), which counts it as a
    /// server failure.
    #[must_use]
    pub fn poll_close(&mut self) -> Option<StreamEnd> {
        self.stream.close.take()
    }

    /// The next event for the cache.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CoreEvent> {
        crate::queue::pop_front(&mut self.events)
    }

    /// Every event [`poll_event`](Self::poll_event) would give, at once, in
    /// order. The queue's own buffer is handed over: a response of 100 000
    /// resources is 100 000 events, and collecting them one by one would
    /// hold them twice while the list doubles its way there.
    #[must_use]
    pub fn poll_events(&mut self) -> Vec<CoreEvent> {
        Vec::from(std::mem::take(&mut self.events))
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    // ----- shared helpers -----

    fn mark_dirty(&mut self, type_url: &Arc<str>) {
        if self.phase == Phase::Idle {
            // The next stream writes everything anyway.
            return;
        }
        if let Some(state) = self.states.get_mut(type_url)
            && !state.stream.queued
        {
            state.stream.queued = true;
            self.stream.dirty.push_back(Arc::clone(type_url));
        }
    }

    /// Arms the does-not-exist timers of names just written, or, on a
    /// stream not yet established, keeps them for when it is.
    pub(super) fn arm_does_not_exist(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        names: &[Arc<str>],
    ) {
        if !self.stream.established {
            self.stream.written_early.extend(
                names
                    .iter()
                    .map(|name| (Arc::clone(type_url), Arc::clone(name))),
            );
            return;
        }
        let Some(state) = self.states.get(type_url) else {
            return;
        };
        let deadline = now + self.cfg.does_not_exist_timeout;
        self.timers.reserve_does_not_exist(names.len());
        for name in names {
            let durable = &state.durable;
            if durable.held.contains_key(name)
                || durable.absent.contains(name)
                || durable.timed_out.contains(name)
            {
                continue;
            }
            self.timers.set(
                Timer::DoesNotExist(ResourceKey::new(Arc::clone(type_url), Arc::clone(name))),
                deadline,
            );
        }
    }

    /// Counts a response and moves to [`Phase::Streaming`] on the first,
    /// which establishes the stream if its headers did not.
    pub(super) fn note_response(&mut self, now: Instant) {
        self.stats.responses += 1;
        if self.phase == Phase::AwaitingFirstResponse {
            self.establish(now);
            self.timers.cancel(&Timer::FirstResponse);
            self.phase = Phase::Streaming;
            self.events.push_back(CoreEvent::StreamHealthy);
        }
    }

    /// The connection proved ready, or the server accepted or answered the
    /// stream: the handshake deadline stops, the first-response deadline
    /// starts (if configured), and what was written so far starts its
    /// does-not-exist timers now (gRFC A57: from when the request was sent
    /// on an established stream).
    fn establish(&mut self, now: Instant) {
        if self.stream.established {
            return;
        }
        self.stream.established = true;
        self.timers.cancel(&Timer::Handshake);
        if let Some(timeout) = self.cfg.first_response_timeout {
            self.timers.set(Timer::FirstResponse, now + timeout);
        }
        let mut written: HashMap<Arc<str>, Vec<Arc<str>>> = HashMap::default();
        let recheck = self.stream.unsubscribed;
        for (type_url, name) in std::mem::take(&mut self.stream.written_early) {
            let wanted = !recheck
                || self
                    .states
                    .get(&type_url)
                    .is_some_and(|state| state.wants(&name));
            if wanted {
                written.entry(type_url).or_default().push(name);
            }
        }
        for (type_url, names) in written {
            self.arm_does_not_exist(now, &type_url, &names);
        }
    }
}
