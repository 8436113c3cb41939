//! Per-client ACK/NACK tracking and liveness.
//!
//! The policy distribution protocol counts a version as done once every
//! connected client has answered it, and a NACK counts as an answer: one
//! broken client must not block everyone else. This tracker keeps that rule
//! for xDS, per resource rather than per snapshot:
//!
//! ```text
//! stream sends response (nonce N: resources r1@v1, r2@v2) ─► sent[N]
//! client request echoes N, no error_detail ─► client ACKed r1@v1 and r2@v2
//! client request echoes N, error_detail    ─► client NACKed them, with the message
//! wait_acked(r1, v1): every connected client that subscribes to r1 has answered v1
//! ```
//!
//! Unlike that protocol, updates are pushed at once, so a client is only
//! waited for when it subscribes to the resource. A client is "connected"
//! while it has at least one open stream that has sent a request; when its
//! last stream ends it leaves the tracker with everything it answered.
//! A reconnecting delta client that lists `r1@v1` in
//! `initial_resource_versions` is taken to hold (and so to have ACKed) it.
//!
//! A client's answers are kept for the latest [`VERSIONS_KEPT`] versions of
//! each resource: a churning workload must not grow the tracker without
//! bound.
//! Likewise a stream remembers a response, with the resources it carried
//! (shared with the store), until it is answered or [`UNANSWERED_KEPT`]
//! more have been sent: an answer later than that records nothing.
//!
//! A client is its node id together with the address its connection comes
//! from (the peer): clients that share one bootstrap, and so one node id,
//! are still told apart, and the streams one client opens on one connection
//! count together. A client that reconnects comes back as a new client (a
//! new peer port); its old entry leaves as its streams end.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, SystemTime},
};

use tokio::sync::watch;

use crate::ads::Outgoing;
use crate::store::StoredResource;
use crate::subscription::Subscription;
use xdsfed_core::hash::HashMap as NameMap;

/// A client's answer to one version of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted.
    Acked,
    /// Rejected, with the client's `error_detail.message`.
    Nacked(String),
}

/// A client that rejected the awaited version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The client's node id.
    pub node_id: String,
    /// The address its connection comes from, when the transport knows it.
    pub peer: Option<SocketAddr>,
    /// The message of its `error_detail`.
    pub error: String,
}

/// The result of [`crate::Server::wait_acked`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckReport {
    /// Node ids of the clients that ACKed the version, sorted; a node id
    /// appears once per client (two clients may share one).
    pub acked_by: Vec<String>,
    /// Clients that NACKed it, sorted by node id, then peer.
    pub nacked_by: Vec<Nack>,
    /// Node ids of the subscribed clients that had not answered when the
    /// wait ended, sorted, once per client.
    pub pending: Vec<String>,
    /// True when the timeout passed before every client answered.
    pub timed_out: bool,
}

/// A connected client as the tracker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's node id.
    pub node_id: String,
    /// The address its connection comes from, when the transport knows it:
    /// with the node id, what tells clients that share a bootstrap apart.
    pub peer: Option<SocketAddr>,
    /// When its last request arrived, on any stream.
    pub last_request: SystemTime,
    /// How many open streams it has.
    pub streams: usize,
}

/// A client's answers: type URL → canonical key → the versions answered.
/// Keyed by type first so that recording a response's answers looks its
/// keys up by reference and allocates only for a key seen the first time.
type AnswersByType = HashMap<String, NameMap<String, Answers>>;

/// What one response carried: its type and the resources, shared with the
/// store (an `Arc` each, no copy of a name or version).
#[derive(Debug)]
struct Carried {
    type_url: String,
    resources: Vec<Arc<StoredResource>>,
}

/// A client: its node id (`<stream N>` when its requests carry none) and
/// its connection's peer address.
type ClientKey = (String, Option<SocketAddr>);

#[derive(Debug, Default)]
struct StreamEntry {
    peer: Option<SocketAddr>,
    /// Set by the first request.
    client: Option<ClientKey>,
    subscriptions: HashMap<String, Subscription>,
    /// Nonce → what that response carried.
    sent: HashMap<String, Carried>,
    /// The nonces of the latest responses sent, answered or not, oldest
    /// first: a client that never answers some responses must not make the
    /// stream hold their resources for its life ([`UNANSWERED_KEPT`]).
    sent_order: VecDeque<String>,
}

/// How many responses later a response left unanswered is forgotten. A
/// client answers each response before the next few are due; one left
/// unanswered this long is not going to be, and its resources are let go.
const UNANSWERED_KEPT: usize = 1024;

#[derive(Debug)]
struct ClientEntry {
    last_request: SystemTime,
    streams: usize,
    answers: AnswersByType,
}

/// How many versions of one resource a client's answers are kept for. A
/// client under churn answers a new version of each resource every few
/// seconds for as long as it runs; only the recent ones are ever awaited.
const VERSIONS_KEPT: usize = 16;

/// A client's answers to the latest versions of one resource, oldest first,
/// at most [`VERSIONS_KEPT`].
#[derive(Debug, Default)]
struct Answers(VecDeque<(String, Outcome)>);

impl Answers {
    fn get(&self, version: &str) -> Option<&Outcome> {
        self.0.iter().find(|(v, _)| v == version).map(|(_, o)| o)
    }

    /// Records `outcome` for `version`; `replace` says whether an answer
    /// already recorded for it gives way.
    fn record(&mut self, version: &str, outcome: Outcome, replace: bool) {
        if let Some((_, old)) = self.0.iter_mut().find(|(v, _)| v == version) {
            if replace {
                *old = outcome;
            }
            return;
        }
        self.0.push_back((version.to_owned(), outcome));
        if self.0.len() > VERSIONS_KEPT {
            self.0.pop_front();
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    streams: HashMap<u64, StreamEntry>,
    clients: BTreeMap<ClientKey, ClientEntry>,
}

/// ACK tracking and liveness for one server's clients.
#[derive(Debug)]
pub(crate) struct AckTracker {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

impl Default for AckTracker {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl AckTracker {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Mutations are small inserts/removes; a poisoned lock holds usable data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The connected clients, sorted by node id, then peer.
    pub(crate) fn clients(&self) -> Vec<ClientInfo> {
        self.lock()
            .clients
            .iter()
            .map(|((node_id, peer), c)| ClientInfo {
                node_id: node_id.clone(),
                peer: *peer,
                last_request: c.last_request,
                streams: c.streams,
            })
            .collect()
    }

    /// The answers so far to `version` of (`type_url`, `key`).
    pub(crate) fn report(&self, type_url: &str, key: &str, version: &str) -> (AckReport, bool) {
        let inner = self.lock();
        let mut interested: BTreeSet<&ClientKey> = BTreeSet::new();
        for stream in inner.streams.values() {
            let (Some(client), Some(sub)) = (&stream.client, stream.subscriptions.get(type_url))
            else {
                continue;
            };
            if sub.covers(key) {
                interested.insert(client);
            }
        }
        let mut report = AckReport::default();
        for client in interested {
            let (node, peer) = client;
            let outcome = inner
                .clients
                .get(client)
                .and_then(|c| c.answers.get(type_url))
                .and_then(|by_key| by_key.get(key))
                .and_then(|answers| answers.get(version));
            match outcome {
                Some(Outcome::Acked) => report.acked_by.push(node.clone()),
                Some(Outcome::Nacked(error)) => report.nacked_by.push(Nack {
                    node_id: node.clone(),
                    peer: *peer,
                    error: error.clone(),
                }),
                None => report.pending.push(node.clone()),
            }
        }
        let done = report.pending.is_empty();
        (report, done)
    }

    /// Waits until every connected client subscribed to (`type_url`, `key`)
    /// has ACKed or NACKed `version`, or `timeout` passes.
    pub(crate) async fn wait(
        &self,
        type_url: &str,
        key: &str,
        version: &str,
        timeout: Duration,
    ) -> AckReport {
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changed.mark_unchanged();
            let (mut report, done) = self.report(type_url, key, version);
            if done {
                return report;
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) | Err(_) => {
                    report.timed_out = true;
                    return report;
                }
            }
        }
    }

    /// A stream opened on a connection from `peer`.
    pub(crate) fn open(&self, stream: u64, peer: Option<SocketAddr>) {
        self.lock().streams.insert(
            stream,
            StreamEntry {
                peer,
                ..StreamEntry::default()
            },
        );
    }

    /// A request arrived on `stream`; `node_id` is its node, if it carried one.
    pub(crate) fn request(&self, stream: u64, node_id: Option<&str>) {
        let mut inner = self.lock();
        let Inner { streams, clients } = &mut *inner;
        let Some(entry) = streams.get_mut(&stream) else {
            return;
        };
        if entry.client.is_none() {
            let node = node_id.map_or_else(|| format!("<stream {stream}>"), str::to_owned);
            let key = (node, entry.peer);
            clients
                .entry(key.clone())
                .or_insert_with(|| ClientEntry {
                    last_request: SystemTime::now(),
                    streams: 0,
                    answers: HashMap::new(),
                })
                .streams += 1;
            entry.client = Some(key);
        }
        if let Some(client) = entry.client.as_ref().and_then(|k| clients.get_mut(k)) {
            client.last_request = SystemTime::now();
        }
        drop(inner);
        self.bump();
    }

    pub(crate) fn subscribed(&self, stream: u64, type_url: &str, sub: &Subscription) {
        if let Some(entry) = self.lock().streams.get_mut(&stream) {
            entry.subscriptions.insert(type_url.to_owned(), sub.clone());
        }
        self.bump();
    }

    /// The stream sent the response `nonce`, of `type_url`, carrying
    /// `carried`.
    pub(crate) fn sent(&self, stream: u64, nonce: &str, type_url: &str, carried: &[Outgoing]) {
        let carried = Carried {
            type_url: type_url.to_owned(),
            resources: carried.iter().map(|o| Arc::clone(&o.stored)).collect(),
        };
        if let Some(entry) = self.lock().streams.get_mut(&stream) {
            entry.sent.insert(nonce.to_owned(), carried);
            entry.sent_order.push_back(nonce.to_owned());
            while entry.sent_order.len() > UNANSWERED_KEPT {
                if let Some(oldest) = entry.sent_order.pop_front() {
                    entry.sent.remove(&oldest);
                }
            }
        }
    }

    /// The client answered the response with `nonce`; `error` is a NACK's message.
    pub(crate) fn answered(&self, stream: u64, nonce: &str, error: Option<String>) {
        let mut inner = self.lock();
        let Inner { streams, clients } = &mut *inner;
        let Some(entry) = streams.get_mut(&stream) else {
            return;
        };
        let Some(carried) = entry.sent.remove(nonce) else {
            return;
        };
        let Some(client) = entry.client.as_ref().and_then(|k| clients.get_mut(k)) else {
            return;
        };
        let outcome = error.map_or(Outcome::Acked, Outcome::Nacked);
        let Some(by_key) = answers_of(&mut client.answers, &carried.type_url) else {
            return;
        };
        for stored in &carried.resources {
            record(by_key, &stored.key, &stored.version, outcome.clone(), true);
        }
        drop(inner);
        self.bump();
    }

    /// The client says it already holds these versions (delta reconnect).
    pub(crate) fn holds(&self, stream: u64, type_url: &str, held: &[(String, String)]) {
        let mut inner = self.lock();
        let Inner { streams, clients } = &mut *inner;
        let Some(client) = streams
            .get(&stream)
            .and_then(|e| e.client.as_ref())
            .and_then(|k| clients.get_mut(k))
        else {
            return;
        };
        let Some(by_key) = answers_of(&mut client.answers, type_url) else {
            return;
        };
        for (key, version) in held {
            record(by_key, key, version, Outcome::Acked, false);
        }
    }

    pub(crate) fn close(&self, stream: u64) {
        let mut inner = self.lock();
        if let Some(key) = inner.streams.remove(&stream).and_then(|e| e.client)
            && let Some(client) = inner.clients.get_mut(&key)
        {
            client.streams = client.streams.saturating_sub(1);
            if client.streams == 0 {
                inner.clients.remove(&key);
            }
        }
        drop(inner);
        self.bump();
    }
}

/// The answers of `type_url`, made empty the first time (always `Some`).
fn answers_of<'a>(
    answers: &'a mut AnswersByType,
    type_url: &str,
) -> Option<&'a mut NameMap<String, Answers>> {
    if !answers.contains_key(type_url) {
        answers.insert(type_url.to_owned(), NameMap::default());
    }
    answers.get_mut(type_url)
}

/// Records `outcome` for `version` of `key` (see [`Answers::record`]); the
/// key is copied only the first time it is answered.
fn record(
    by_key: &mut NameMap<String, Answers>,
    key: &str,
    version: &str,
    outcome: Outcome,
    replace: bool,
) {
    match by_key.get_mut(key) {
        Some(answers) => answers.record(version, outcome, replace),
        None => {
            let mut answers = Answers::default();
            answers.record(version, outcome, replace);
            by_key.insert(key.to_owned(), answers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

    /// A client that has answered version after version of one resource
    /// for a long time is remembered for the latest [`VERSIONS_KEPT`] only:
    /// the tracker stays the same size under churn.
    #[test]
    fn answers_are_kept_for_the_latest_versions_only() {
        let tracker = AckTracker::default();
        tracker.open(1, None);
        tracker.request(1, Some("node"));
        let mut sub = Subscription::default();
        let _ = sub.apply_delta(&["c".to_owned()], &[]);
        tracker.subscribed(1, EDS, &sub);
        let total = VERSIONS_KEPT * 3;
        for v in 0..total {
            let nonce = v.to_string();
            let stored = StoredResource {
                name: "c".into(),
                key: "c".into(),
                resource: Default::default(),
                version: format!("v{v}"),
            };
            tracker.sent(
                1,
                &nonce,
                EDS,
                &[Outgoing::new("c".into(), Arc::new(stored))],
            );
            tracker.answered(1, &nonce, None);
        }

        let (newest, done) = tracker.report(EDS, "c", &format!("v{}", total - 1));
        assert!(done);
        assert_eq!(newest.acked_by, vec!["node".to_owned()]);
        let (oldest_kept, _) = tracker.report(EDS, "c", &format!("v{}", total - VERSIONS_KEPT));
        assert_eq!(oldest_kept.acked_by, vec!["node".to_owned()]);
        let (forgotten, done) = tracker.report(EDS, "c", "v0");
        assert!(!done);
        assert_eq!(forgotten.pending, vec!["node".to_owned()]);

        let inner = tracker.lock();
        let client = inner.clients.values().next().map(|c| &c.answers);
        let kept = client
            .and_then(|a| a.get(EDS))
            .and_then(|by_key| by_key.get("c"));
        assert_eq!(kept.map(|a| a.0.len()), Some(VERSIONS_KEPT));
    }

    /// A response left unanswered while [`UNANSWERED_KEPT`] more are sent
    /// is forgotten: an answer to it finds nothing to record, and the
    /// resources it carried are let go.
    #[test]
    fn a_stream_forgets_responses_left_unanswered_too_long() {
        let tracker = AckTracker::default();
        tracker.open(1, None);
        tracker.request(1, Some("node"));
        let stored = Arc::new(StoredResource {
            name: "c".into(),
            key: "c".into(),
            resource: Default::default(),
            version: "v1".into(),
        });
        let carried = [Outgoing::new("c".into(), Arc::clone(&stored))];
        for n in 0..=UNANSWERED_KEPT {
            tracker.sent(1, &n.to_string(), EDS, &carried);
        }
        assert_eq!(Arc::strong_count(&stored), 1 + 1 + UNANSWERED_KEPT);
        tracker.answered(1, "0", None);
        let answered = |tracker: &AckTracker| {
            let inner = tracker.lock();
            inner
                .clients
                .values()
                .map(|c| c.answers.len())
                .sum::<usize>()
        };
        assert_eq!(answered(&tracker), 0, "the oldest response was forgotten");
        tracker.answered(1, &UNANSWERED_KEPT.to_string(), None);
        assert_eq!(answered(&tracker), 1);
        assert_eq!(Arc::strong_count(&stored), 1 + UNANSWERED_KEPT);
    }

    /// A NACK recorded for a version is replaced by a later answer to the
    /// same version, but a reconnecting client's claim to hold a version
    /// does not overwrite what it answered.
    #[test]
    fn a_later_answer_replaces_an_earlier_one_but_a_held_claim_does_not() {
        let mut answers = Answers::default();
        answers.record("v1", Outcome::Nacked("bad".into()), true);
        answers.record("v1", Outcome::Acked, false);
        assert_eq!(answers.get("v1"), Some(&Outcome::Nacked("bad".into())));
        answers.record("v1", Outcome::Acked, true);
        assert_eq!(answers.get("v1"), Some(&Outcome::Acked));
    }
}
