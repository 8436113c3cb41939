//! The control plane's state and its request processing, as the protocol
//! describes them (§State Management, §Request Processing Logic).
//!
//! ```text
//! policies ─► currentVersion (SHA-256, names sorted) ─► currentNonce (timestamp) ─► pendingVersion
//! request(nonce, version, error):
//!   1 nonce = current ∧ version = current          → ACK: record, maybe all-ACKed     (no response)
//!   2 nonce = current ∧ version ≠ current ∧ error  → NACK: record as done             (no response)
//!   3 nonce ≠ "" ∧ nonce ≠ current                 → stale: full snapshot
//!   4 nonce = "" ∧ version = ""                    → initial: full snapshot
//!   5 otherwise                                    → nothing
//! ```
//!
//! A stream's first request registers the client (its `client_address`,
//! required) and is answered with the snapshot, whatever it says
//! (§Connection Lifecycle 3–4); every later request goes through the five
//! cases. Before any policy was loaded the version and nonce are empty, so
//! an early client gets an empty snapshot (§Edge Cases).
//!
//! Liveness (§Health Checks): a client is active when it registers, sends
//! a request or calls `HealthCheck`. One silent for longer than the
//! inactivity limit is flushed, whether or not it ever health-checked, so
//! that a client that connected, took a snapshot and went quiet does not
//! hold the all-ACKed barrier for ever; if it speaks again on its stream,
//! it is tracked again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use xdsfed_core::policy_stream::wire::{
    PolicyDiscoveryRequest, PolicyDiscoveryResponse, ValidatingPolicy,
};

use super::version::of_policies;
use crate::ack::{AckReport, Nack};

/// What the processing of one request decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Processed {
    /// Case 1: the client applied the current version.
    Ack,
    /// Case 2: the client rejected it; counted as done.
    Nack(String),
    /// Case 3: the client missed an update: the snapshot to send.
    Stale(PolicyDiscoveryResponse),
    /// Case 4: a request with empty version and nonce: the snapshot.
    Initial(PolicyDiscoveryResponse),
    /// Case 5: nothing to do.
    Nothing,
}

impl Processed {
    /// The response to send, if any.
    pub fn response(self) -> Option<PolicyDiscoveryResponse> {
        match self {
            Processed::Stale(r) | Processed::Initial(r) => Some(r),
            _ => None,
        }
    }
}

/// `pendingVersion`: who answered the current version.
#[derive(Debug, Clone, Default)]
struct Pending {
    version: String,
    /// Client → `None` for an ACK, the error for a NACK.
    answered: BTreeMap<String, Option<String>>,
}

/// A client as the control plane sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyClient {
    /// Its `client_address`.
    pub client_address: String,
    /// Whether it has a stream open now.
    pub connected: bool,
    /// Its last health check, if it is still tracked (not flushed).
    pub last_health_check: Option<SystemTime>,
}

#[derive(Debug, Default)]
struct Inner {
    policies: BTreeMap<String, ValidatingPolicy>,
    /// Whether policies were ever loaded: before, version and nonce are empty.
    loaded: bool,
    current_version: String,
    current_nonce: String,
    pending: Option<Pending>,
    /// Client → the id of its open stream (a reconnect replaces it).
    connections: BTreeMap<String, u64>,
    last_health_check: BTreeMap<String, SystemTime>,
    /// Client → when it was last heard from: registration, request or
    /// health check (`lastActive`).
    last_active: BTreeMap<String, SystemTime>,
    last_nonce_nanos: u128,
    /// Whether any stream has registered since the server started.
    requested: bool,
    /// The `authorization` values of the latest calls (streams and health
    /// checks), oldest first, at most [`AUTHORIZATIONS_KEPT`].
    authorizations: std::collections::VecDeque<Call>,
}

/// How many calls' `authorization` values a policy server keeps.
const AUTHORIZATIONS_KEPT: usize = 64;

/// Which call of the policy service carried an `authorization` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `PolicyDiscoveryStream`.
    Stream,
    /// `HealthCheck`.
    HealthCheck,
}

/// One call and the `authorization` header values it carried: what a
/// client's call credentials sent (gRFC A97).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The method.
    pub kind: CallKind,
    /// The values, as received.
    pub authorization: Vec<String>,
}

/// The control plane of one policy server.
#[derive(Debug)]
pub struct PolicyPlane {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

impl Default for PolicyPlane {
    fn default() -> Self {
        PolicyPlane {
            inner: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl PolicyPlane {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Replaces the policy set (StorePolicy / DeletePolicy /
    /// LoadInitialPolicies). A new version gets a new nonce and a new
    /// pendingVersion; the same version changes nothing.
    pub fn load(&self, policies: BTreeMap<String, ValidatingPolicy>) {
        let mut inner = self.lock();
        let version = of_policies(&policies);
        inner.policies = policies;
        let first = !inner.loaded;
        inner.loaded = true;
        if first || version != inner.current_version {
            inner.current_version = version.clone();
            new_nonce(&mut inner);
            inner.pending = Some(Pending {
                version,
                answered: BTreeMap::new(),
            });
        }
        drop(inner);
        self.bump();
    }

    /// A restart of the control plane: every client is gone and the nonce
    /// is new (the version, a content hash, is not), so a client's next
    /// request carries a stale nonce. Without `keep_state` the policies go
    /// too, back to the empty, never-loaded state.
    pub fn restart(&self, keep_state: bool) {
        let mut inner = self.lock();
        inner.connections.clear();
        inner.last_health_check.clear();
        inner.last_active.clear();
        if keep_state {
            if inner.loaded {
                new_nonce(&mut inner);
                let version = inner.current_version.clone();
                inner.pending = Some(Pending {
                    version,
                    answered: BTreeMap::new(),
                });
            }
        } else {
            let (last, requested) = (inner.last_nonce_nanos, inner.requested);
            *inner = Inner {
                last_nonce_nanos: last,
                requested,
                ..Inner::default()
            };
        }
        drop(inner);
        self.bump();
    }

    /// `currentVersion` and `currentNonce`.
    pub fn current(&self) -> (String, String) {
        let inner = self.lock();
        (inner.current_version.clone(), inner.current_nonce.clone())
    }

    /// The full snapshot: the current version, every policy (by name) and
    /// the current nonce.
    pub fn snapshot(&self) -> PolicyDiscoveryResponse {
        snapshot_of(&self.lock())
    }

    /// Registers the stream `stream` of `client`, active at `at` (a
    /// reconnect replaces its older stream).
    pub fn register(&self, client: &str, stream: u64, at: SystemTime) {
        let mut inner = self.lock();
        inner.connections.insert(client.to_owned(), stream);
        inner.last_active.insert(client.to_owned(), at);
        inner.requested = true;
        drop(inner);
        self.bump();
    }

    /// `client` spoke on its stream `stream` at `at`: it is active, and
    /// tracked again if it had been flushed while its stream stayed open.
    pub fn heard_from(&self, client: &str, stream: u64, at: SystemTime) {
        let mut inner = self.lock();
        inner.last_active.insert(client.to_owned(), at);
        let back = !inner.connections.contains_key(client);
        if back {
            inner.connections.insert(client.to_owned(), stream);
        }
        drop(inner);
        if back {
            self.bump();
        }
    }

    /// Resolves once a client's first request has arrived (a scenario's
    /// `schedule_clock: first_request`).
    pub async fn wait_for_request(&self) {
        let mut changed = self.changed.subscribe();
        while !self.lock().requested {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// The stream `stream` of `client` ended: the client leaves the
    /// connections and the tracker (§Client Disconnection 3–4), unless a
    /// newer stream of it replaced this one.
    pub fn unregister(&self, client: &str, stream: u64) {
        let mut inner = self.lock();
        if inner.connections.get(client) == Some(&stream) {
            inner.connections.remove(client);
            if let Some(pending) = &mut inner.pending {
                pending.answered.remove(client);
            }
        }
        drop(inner);
        self.bump();
    }

    /// The five cases, for a request after the stream's first.
    pub fn process(&self, client: &str, request: &PolicyDiscoveryRequest) -> Processed {
        let mut inner = self.lock();
        let nonce = request.response_nonce.as_str();
        let version = request.version_info.as_str();
        let processed = if nonce == inner.current_nonce && version == inner.current_version {
            if let Some(pending) = &mut inner.pending {
                // Duplicate ACKs are not counted twice: the map keeps one.
                pending.answered.entry(client.to_owned()).or_insert(None);
            }
            Processed::Ack
        } else if nonce == inner.current_nonce
            && version != inner.current_version
            && let Some(error) = &request.error_detail
        {
            if let Some(pending) = &mut inner.pending {
                pending
                    .answered
                    .insert(client.to_owned(), Some(error.message.clone()));
            }
            Processed::Nack(error.message.clone())
        } else if !nonce.is_empty() && nonce != inner.current_nonce {
            Processed::Stale(snapshot_of(&inner))
        } else if nonce.is_empty() && version.is_empty() {
            Processed::Initial(snapshot_of(&inner))
        } else {
            Processed::Nothing
        };
        drop(inner);
        if matches!(processed, Processed::Ack | Processed::Nack(_)) {
            self.bump();
        }
        processed
    }

    /// A health check from `client` at `at`.
    pub fn health_check(&self, client: &str, at: SystemTime) {
        let mut inner = self.lock();
        inner.last_health_check.insert(client.to_owned(), at);
        inner.last_active.insert(client.to_owned(), at);
    }

    /// Flushes the clients not heard from (registration, request or health
    /// check) for longer than `max_inactive` at `now`: they leave the
    /// liveness maps and, if still registered, the connections, so that a
    /// client that went quiet or vanished without closing its stream stops
    /// holding the all-ACKed barrier. Returns them.
    pub fn flush_inactive(&self, now: SystemTime, max_inactive: Duration) -> Vec<String> {
        let mut inner = self.lock();
        let stale: Vec<String> = inner
            .last_active
            .iter()
            .filter(|(_, at)| now.duration_since(**at).unwrap_or_default() > max_inactive)
            .map(|(client, _)| client.clone())
            .collect();
        for client in &stale {
            inner.last_active.remove(client);
            inner.last_health_check.remove(client);
            inner.connections.remove(client);
        }
        drop(inner);
        if !stale.is_empty() {
            self.bump();
        }
        stale
    }

    /// Records a call's `authorization` values, keeping the latest.
    pub(crate) fn note_call(&self, call: Call) {
        let mut inner = self.lock();
        if inner.authorizations.len() >= AUTHORIZATIONS_KEPT {
            inner.authorizations.pop_front();
        }
        inner.authorizations.push_back(call);
    }

    /// The latest calls (at most 64), oldest first, with the
    /// `authorization` values each carried.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().authorizations.iter().cloned().collect()
    }

    /// The clients: connected or health-checked.
    pub fn clients(&self) -> Vec<PolicyClient> {
        let inner = self.lock();
        let names: BTreeSet<&String> = inner
            .connections
            .keys()
            .chain(inner.last_health_check.keys())
            .collect();
        names
            .into_iter()
            .map(|name| PolicyClient {
                client_address: name.clone(),
                connected: inner.connections.contains_key(name),
                last_health_check: inner.last_health_check.get(name).copied(),
            })
            .collect()
    }

    /// The barrier: waits until every connected client has ACKed or NACKed
    /// the current version (the `allAcked` channel), or `timeout` passes.
    /// Returns the version waited for and who answered how.
    pub async fn wait_acked(&self, timeout: Duration) -> (String, AckReport) {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (version, report) = self.report();
            if report.pending.is_empty() {
                return (version, report);
            }
            let wake = tokio::time::timeout_at(deadline, changed.changed()).await;
            if !matches!(wake, Ok(Ok(()))) {
                let (version, mut report) = self.report();
                report.timed_out = true;
                return (version, report);
            }
        }
    }

    fn report(&self) -> (String, AckReport) {
        let inner = self.lock();
        let mut report = AckReport::default();
        let empty = Pending::default();
        let pending = inner.pending.as_ref().unwrap_or(&empty);
        for client in inner.connections.keys() {
            match pending.answered.get(client) {
                Some(None) => report.acked_by.push(client.clone()),
                Some(Some(error)) => report.nacked_by.push(Nack {
                    node_id: client.clone(),
                    peer: None,
                    error: error.clone(),
                }),
                None => report.pending.push(client.clone()),
            }
        }
        let version = if inner.pending.is_some() {
            pending.version.clone()
        } else {
            inner.current_version.clone()
        };
        (version, report)
    }
}

fn snapshot_of(inner: &Inner) -> PolicyDiscoveryResponse {
    PolicyDiscoveryResponse {
        version_info: inner.current_version.clone(),
        policies: inner.policies.values().cloned().collect(),
        nonce: inner.current_nonce.clone(),
    }
}

/// A timestamp nonce (hex nanoseconds since the epoch), strictly greater
/// than the last one, so that two changes within a clock tick differ.
fn new_nonce(inner: &mut Inner) {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let nanos = now.max(inner.last_nonce_nanos + 1);
    inner.last_nonce_nanos = nanos;
    inner.current_nonce = format!("{nanos:x}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdsfed_core::policy_stream::wire::ErrorDetail;

    fn policies(names: &[&str]) -> BTreeMap<String, ValidatingPolicy> {
        names
            .iter()
            .map(|n| {
                (
                    (*n).to_owned(),
                    ValidatingPolicy {
                        name: (*n).into(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    fn request(version: &str, nonce: &str, error: Option<&str>) -> PolicyDiscoveryRequest {
        PolicyDiscoveryRequest {
            client_address: "c".into(),
            version_info: version.into(),
            response_nonce: nonce.into(),
            error_detail: error.map(|m| ErrorDetail { message: m.into() }),
        }
    }

    #[test]
    fn the_five_cases_are_told_apart() {
        let plane = PolicyPlane::default();
        plane.load(policies(&["a"]));
        let (v, n) = plane.current();
        assert_eq!(plane.process("c", &request(&v, &n, None)), Processed::Ack);
        assert_eq!(
            plane.process("c", &request("old", &n, Some("bad"))),
            Processed::Nack("bad".into())
        );
        assert!(matches!(
            plane.process("c", &request(&v, "0", None)),
            Processed::Stale(r) if r.nonce == n
        ));
        assert!(matches!(
            plane.process("c", &request("", "", None)),
            Processed::Initial(r) if r.version_info == v
        ));
        // Current nonce, another version, no error: none of the above.
        assert_eq!(
            plane.process("c", &request("x", &n, None)),
            Processed::Nothing
        );
    }

    #[test]
    fn before_any_load_version_and_nonce_are_empty() {
        let plane = PolicyPlane::default();
        assert_eq!(plane.current(), (String::new(), String::new()));
        plane.load(BTreeMap::new());
        let (v, n) = plane.current();
        assert_eq!(v.len(), 64);
        assert!(!n.is_empty());
    }

    #[test]
    fn same_version_keeps_the_nonce_and_a_restart_renews_it() {
        let plane = PolicyPlane::default();
        plane.load(policies(&["a"]));
        let before = plane.current();
        plane.load(policies(&["a"]));
        assert_eq!(plane.current(), before);
        plane.restart(true);
        let after = plane.current();
        assert_eq!(after.0, before.0);
        assert_ne!(after.1, before.1);
    }

    #[tokio::test]
    async fn barrier_counts_acks_and_nacks_of_connected_clients() {
        let plane = PolicyPlane::default();
        plane.load(policies(&["a"]));
        let (v, n) = plane.current();
        plane.register("c", 1, SystemTime::now());
        plane.register("d", 2, SystemTime::now());
        plane.process("c", &request(&v, &n, None));
        let (_, report) = plane.wait_acked(Duration::from_millis(10)).await;
        assert!(report.timed_out);
        assert_eq!(report.pending, ["d"]);
        let nack = PolicyDiscoveryRequest {
            client_address: "d".into(),
            ..request("old", &n, Some("no"))
        };
        plane.process("d", &nack);
        let (version, report) = plane.wait_acked(Duration::from_secs(5)).await;
        assert_eq!(version, v);
        assert!(!report.timed_out);
        assert_eq!(report.acked_by, ["c"]);
        assert_eq!(report.nacked_by[0].error, "no");
    }

    #[test]
    fn flush_drops_clients_without_recent_health_checks() {
        let plane = PolicyPlane::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        plane.register("quiet", 1, t0);
        plane.health_check("quiet", t0);
        plane.health_check("alive", t0 + Duration::from_secs(50));
        let flushed = plane.flush_inactive(t0 + Duration::from_secs(60), Duration::from_secs(30));
        assert_eq!(flushed, ["quiet"]);
        let clients = plane.clients();
        assert_eq!(clients.len(), 1);
        assert_eq!(clients[0].client_address, "alive");
    }

    /// §Health Checks, liveness by any sign of life: a client that never
    /// health-checked is flushed once silent past the limit; one that
    /// keeps polling is not; a flushed client that speaks again on its
    /// open stream is tracked again.
    #[test]
    fn silent_client_is_flushed_without_ever_health_checking() {
        let plane = PolicyPlane::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let limit = Duration::from_secs(30);
        plane.register("silent", 1, t0);
        plane.register("polling", 2, t0);
        plane.heard_from("polling", 2, t0 + Duration::from_secs(50));
        let flushed = plane.flush_inactive(t0 + Duration::from_secs(60), limit);
        assert_eq!(flushed, ["silent"]);
        let names = |plane: &PolicyPlane| -> Vec<String> {
            plane
                .clients()
                .into_iter()
                .filter(|c| c.connected)
                .map(|c| c.client_address)
                .collect()
        };
        assert_eq!(names(&plane), ["polling"]);
        plane.heard_from("silent", 1, t0 + Duration::from_secs(61));
        assert_eq!(names(&plane), ["polling", "silent"]);
    }
}
