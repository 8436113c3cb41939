//! A deterministic simulation: a [`Session`] wired to a model management
//! server through two queues, in virtual time (after quinn's `Pair`).
//!
//! The model server reads requests the way the spec tells a server to
//! (subscriptions per type, `*` and the legacy empty-request rule, delta
//! `initial_resource_versions`, SotW full state for LDS/CDS) and answers
//! only when it has something new, so a NACK loop or a request storm shows
//! up as [`Sim::run_until_idle`] running out of steps.

use crate::hash::HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{Request, Session, StreamEnd};

/// A response on its way to the client.
#[derive(Debug)]
enum Response {
    Delta(DeltaDiscoveryResponse),
    Sotw(DiscoveryResponse),
}

/// One type's subscription as the server understands it, per stream.
#[derive(Debug, Default)]
struct ServerSub {
    names: BTreeSet<String>,
    wildcard: bool,
    /// Whether a request of this type named anything on this stream (after
    /// which an empty request no longer means `*`).
    ever_named: bool,
    /// What the client holds, by name: version (delta), or the versions
    /// sent (SotW).
    client_has: HashMap<String, String>,
    /// SotW: the subscription the last response answered.
    answered: Option<(BTreeSet<String>, bool)>,
}

impl ServerSub {
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

/// A management server that keeps one stream.
#[derive(Debug, Default)]
pub(super) struct ModelServer {
    /// The truth: type → name → (version, resource).
    resources: BTreeMap<String, BTreeMap<String, (String, Any)>>,
    /// Per type, per stream.
    subs: HashMap<String, ServerSub>,
    variant: Option<ApiVariant>,
    next_nonce: u64,
    next_version: u64,
    /// Every request received, all streams.
    pub(super) requests: Vec<Request>,
    /// Requests that carried `error_detail`.
    pub(super) nacks: usize,
    /// Whether SotW resources go out wrapped in `Resource` (the client
    /// advertises `xds.config.resource-in-sotw`).
    pub(super) wrap_sotw: bool,
}

impl ModelServer {
    fn open(&mut self, variant: ApiVariant) {
        self.variant = Some(variant);
        self.subs.clear();
    }

    fn close(&mut self) {
        self.variant = None;
        self.subs.clear();
    }

    fn nonce(&mut self) -> String {
        self.next_nonce += 1;
        format!("n{}", self.next_nonce)
    }

    /// Sets a resource; returns its new version.
    pub(super) fn set(&mut self, type_url: &str, name: &str, body: Any) -> String {
        self.next_version += 1;
        let version = self.next_version.to_string();
        self.resources
            .entry(type_url.to_owned())
            .or_default()
            .insert(name.to_owned(), (version.clone(), body));
        version
    }

    pub(super) fn delete(&mut self, type_url: &str, name: &str) {
        if let Some(m) = self.resources.get_mut(type_url) {
            m.remove(name);
        }
    }

    fn handle(&mut self, request: Request) -> Vec<Response> {
        self.requests.push(request.clone());
        match request {
            Request::Delta(r) => self.handle_delta(r),
            Request::Sotw(r) => self.handle_sotw(r),
        }
    }

    fn handle_delta(&mut self, r: DeltaDiscoveryRequest) -> Vec<Response> {
        if r.error_detail.is_some() {
            self.nacks += 1;
        }
        let sub = self.subs.entry(r.type_url.clone()).or_default();
        let legacy_wildcard = !sub.ever_named
            && r.resource_names_subscribe.is_empty()
            && r.resource_names_unsubscribe.is_empty();
        if legacy_wildcard && r.response_nonce.is_empty() {
            sub.wildcard = true;
        }
        for n in &r.resource_names_subscribe {
            sub.ever_named = true;
            if n == "*" {
                sub.wildcard = true;
            } else {
                sub.names.insert(n.clone());
                // "the server must still provide those resources in the
                // response": forget what the client may have.
                sub.client_has.remove(n);
            }
        }
        for n in &r.resource_names_unsubscribe {
            if n == "*" {
                sub.wildcard = false;
            } else {
                sub.names.remove(n);
            }
        }
        for (n, v) in &r.initial_resource_versions {
            sub.client_has.insert(n.clone(), v.clone());
        }
        let newly: Vec<String> = r.resource_names_subscribe.clone();
        self.push_delta(&r.type_url, &newly)
    }

    /// A delta response with what the client lacks; subscribed names that
    /// do not exist (among `newly`) go in `removed_resources`.
    fn push_delta(&mut self, type_url: &str, newly: &[String]) -> Vec<Response> {
        let Some(sub) = self.subs.get_mut(type_url) else {
            return Vec::new();
        };
        let empty = BTreeMap::new();
        let truth = self.resources.get(type_url).unwrap_or(&empty);
        let mut resources = Vec::new();
        for (name, (version, body)) in truth {
            if sub.wants(name) && sub.client_has.get(name) != Some(version) {
                resources.push(Resource {
                    name: name.clone(),
                    version: version.clone(),
                    resource: Some(body.clone()),
                    ..Resource::default()
                });
                sub.client_has.insert(name.clone(), version.clone());
            }
        }
        let mut removed = Vec::new();
        let gone: Vec<String> = sub
            .client_has
            .keys()
            .filter(|n| !truth.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            sub.client_has.remove(&n);
            if sub.wants(&n) {
                removed.push(n);
            }
        }
        for n in newly {
            if n != "*" && !truth.contains_key(n) && !removed.contains(n) {
                removed.push(n.clone());
            }
        }
        if resources.is_empty() && removed.is_empty() {
            return Vec::new();
        }
        let nonce = self.nonce();
        vec![Response::Delta(DeltaDiscoveryResponse {
            type_url: type_url.to_owned(),
            nonce,
            resources,
            removed_resources: removed,
            ..DeltaDiscoveryResponse::default()
        })]
    }

    fn handle_sotw(&mut self, r: DiscoveryRequest) -> Vec<Response> {
        if r.error_detail.is_some() {
            self.nacks += 1;
        }
        let sub = self.subs.entry(r.type_url.clone()).or_default();
        if r.resource_names.is_empty() && !sub.ever_named {
            sub.wildcard = true;
        } else {
            sub.ever_named = true;
            sub.wildcard = r.resource_names.iter().any(|n| n == "*");
            sub.names = r
                .resource_names
                .iter()
                .filter(|n| *n != "*")
                .cloned()
                .collect();
        }
        self.push_sotw(&r.type_url, false)
    }

    /// A SotW response with every wanted resource, when the subscription or
    /// the data changed since the last one (or `force`).
    fn push_sotw(&mut self, type_url: &str, force: bool) -> Vec<Response> {
        let Some(sub) = self.subs.get_mut(type_url) else {
            return Vec::new();
        };
        let current = (sub.names.clone(), sub.wildcard);
        if !force && sub.answered.as_ref() == Some(&current) {
            return Vec::new();
        }
        sub.answered = Some(current);
        let empty = BTreeMap::new();
        let truth = self.resources.get(type_url).unwrap_or(&empty);
        let resources: Vec<Any> = truth
            .iter()
            .filter(|(n, _)| sub.wants(n))
            .map(|(name, (version, body))| {
                if self.wrap_sotw {
                    let wrapper = Resource {
                        name: name.clone(),
                        version: version.clone(),
                        resource: Some(body.clone()),
                        ..Resource::default()
                    };
                    Any {
                        type_url: crate::protocol::RESOURCE_WRAPPER_TYPE_URL.into(),
                        value: prost::Message::encode_to_vec(&wrapper),
                    }
                } else {
                    body.clone()
                }
            })
            .collect();
        let version = self.next_version.to_string();
        let nonce = self.nonce();
        vec![Response::Sotw(DiscoveryResponse {
            type_url: type_url.to_owned(),
            version_info: version,
            nonce,
            resources,
            ..DiscoveryResponse::default()
        })]
    }

    /// Pushes the current data of `type_url` to the open stream.
    fn push(&mut self, type_url: &str) -> Vec<Response> {
        match self.variant {
            Some(ApiVariant::Delta) => self.push_delta(type_url, &[]),
            Some(ApiVariant::Sotw) => self.push_sotw(type_url, true),
            None => Vec::new(),
        }
    }
}

/// The client, the model server, the two directions and the clock.
pub(super) struct Sim {
    pub(super) client: Session,
    pub(super) server: ModelServer,
    pub(super) now: Instant,
    up: VecDeque<Request>,
    down: VecDeque<Response>,
    /// Every event the client produced, summarised.
    pub(super) events: Vec<String>,
}

/// Steps after which [`Sim::run_until_idle`] declares a livelock.
const MAX_STEPS: usize = 10_000;

impl Sim {
    pub(super) fn new(variant: ApiVariant) -> Self {
        Sim {
            client: session(variant),
            server: ModelServer::default(),
            now: t0(),
            up: VecDeque::new(),
            down: VecDeque::new(),
            events: Vec::new(),
        }
    }

    pub(super) fn connect(&mut self) {
        super::support::open(&mut self.client, self.now);
        self.server.open(self.client.variant());
    }

    /// The stream breaks: everything in flight is lost.
    pub(super) fn disconnect(&mut self) {
        self.up.clear();
        self.down.clear();
        self.server.close();
        self.client
            .handle_stream_end(self.now, StreamEnd::new(14, "simulated failure"));
        self.collect_events();
    }

    /// Loses every response in flight (the stream stays up).
    pub(super) fn lose_all_downstream(&mut self) {
        self.down.clear();
    }

    /// Changes the server's data and pushes it on the stream.
    pub(super) fn server_set(&mut self, type_url: &str, name: &str, body: Any) -> String {
        let v = self.server.set(type_url, name, body);
        let pushed = self.server.push(type_url);
        self.down.extend(pushed);
        v
    }

    pub(super) fn server_delete(&mut self, type_url: &str, name: &str) {
        self.server.delete(type_url, name);
        let pushed = self.server.push(type_url);
        self.down.extend(pushed);
    }

    fn collect_events(&mut self) {
        while let Some(e) = self.client.poll_event() {
            self.events.push(summary(&e));
        }
    }

    /// One step: write what the client has to write, deliver one message
    /// upstream or downstream. Returns whether anything happened.
    pub(super) fn step(&mut self) -> bool {
        let mut progressed = false;
        while let Some(r) = self.client.poll_transmit(self.now) {
            self.up.push_back(r);
            progressed = true;
        }
        self.collect_events();
        if let Some(r) = self.up.pop_front() {
            let responses = self.server.handle(r);
            self.down.extend(responses);
            return true;
        }
        if let Some(r) = self.down.pop_front() {
            match r {
                Response::Delta(r) => self.client.handle_delta_response(self.now, r),
                Response::Sotw(r) => self.client.handle_sotw_response(self.now, r),
            }
            self.collect_events();
            return true;
        }
        progressed
    }

    /// Steps until nothing moves. Panics after [`MAX_STEPS`]: a livelock
    /// (an ACK/NACK loop, a request storm) is a bug.
    pub(super) fn run_until_idle(&mut self) {
        for _ in 0..MAX_STEPS {
            if !self.step() {
                return;
            }
        }
        panic!("livelock: still busy after {MAX_STEPS} steps");
    }

    /// Lets `d` of virtual time pass, firing timers as they fall due.
    pub(super) fn advance(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until_idle();
        while let Some(at) = self.client.poll_timeout().filter(|at| *at <= until) {
            self.now = self.now.max(at);
            self.client.handle_timeout(self.now);
            self.run_until_idle();
        }
        self.now = until;
    }

    pub(super) fn take_events(&mut self) -> Vec<String> {
        std::mem::take(&mut self.events)
    }
}

/// Both variants: subscribe, receive, update, delete, through the model.
#[test]
fn sim_subscribe_update_delete_converges() {
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let mut sim = Sim::new(variant);
        sim.server.set(CDS, "a", cluster("a"));
        sim.client.subscribe(key(CDS, "a"));
        sim.connect();
        sim.run_until_idle();
        let v1 = sim.client.held_version(&key(CDS, "a")).map(String::from);
        assert!(v1.is_some(), "{variant:?}");
        sim.server_set(CDS, "a", cluster_with("a", "v2"));
        sim.run_until_idle();
        assert_ne!(
            sim.client.held_version(&key(CDS, "a")).map(String::from),
            v1,
            "{variant:?}"
        );
        sim.server_delete(CDS, "a");
        sim.run_until_idle();
        assert_eq!(
            sim.client.held_version(&key(CDS, "a")).map(String::from),
            None,
            "{variant:?}"
        );
        let events = sim.take_events();
        assert_eq!(
            events.first().map(String::as_str),
            Some("healthy"),
            "{variant:?}"
        );
        assert_eq!(
            events.last().map(String::as_str),
            Some("removed a"),
            "{variant:?}"
        );
        assert_eq!(sim.server.nacks, 0);
    }
}

/// A bad resource is NACKed once; the model server does not resend it, so
/// there is no loop, and the good copy keeps serving.
#[test]
fn sim_bad_update_is_nacked_once_and_the_good_copy_serves() {
    for variant in [ApiVariant::Delta, ApiVariant::Sotw] {
        let mut sim = Sim::new(variant);
        // Bare SotW resources are named by a field inside them, which an
        // invalid resource cannot be trusted for: wrap them.
        sim.server.wrap_sotw = true;
        sim.server.set(CDS, "a", cluster("a"));
        sim.client.subscribe(key(CDS, "a"));
        sim.connect();
        sim.run_until_idle();
        let good = sim.client.held_version(&key(CDS, "a")).map(String::from);
        sim.server_set(CDS, "a", bad_cluster("a"));
        sim.run_until_idle();
        assert_eq!(sim.server.nacks, 1, "{variant:?}");
        assert_eq!(
            sim.client.held_version(&key(CDS, "a")).map(String::from),
            good
        );
        assert!(sim.take_events().contains(&"invalid a".to_owned()));
    }
}

/// Reconnect: delta tells the server what it holds, so nothing is resent.
#[test]
fn sim_delta_reconnect_does_not_refetch_what_is_held() {
    let mut sim = Sim::new(ApiVariant::Delta);
    sim.server.set(CDS, "a", cluster("a"));
    sim.client.subscribe(key(CDS, "a"));
    sim.connect();
    sim.run_until_idle();
    sim.disconnect();
    sim.connect();
    sim.run_until_idle();
    assert_eq!(sim.take_events(), ["healthy", "upsert a 1"]);
    let Some(Request::Delta(last)) = sim.server.requests.last() else {
        panic!("a delta request");
    };
    assert_eq!(
        last.initial_resource_versions.get("a").map(String::as_str),
        Some("1")
    );
}

/// The does-not-exist timer in the simulation: a name the server does not
/// have is reported by delta removal at once and by the timer in SotW.
#[test]
fn sim_missing_resource_is_reported_missing_in_both_variants() {
    let mut sim = Sim::new(ApiVariant::Delta);
    sim.client.subscribe(key(EDS, "nope"));
    sim.connect();
    sim.run_until_idle();
    assert!(
        sim.take_events().contains(&"removed nope".to_owned()),
        "delta: at once, by the server"
    );

    let mut sim = Sim::new(ApiVariant::Sotw);
    sim.client.subscribe(key(EDS, "nope"));
    sim.connect();
    sim.run_until_idle();
    assert!(!sim.events.contains(&"dne nope".to_owned()));
    sim.advance(Duration::from_secs(15));
    assert!(
        sim.take_events().contains(&"dne nope".to_owned()),
        "SotW: by the timer"
    );
}

/// Responses lost on a live stream: the client keeps its state, and the
/// next push converges.
#[test]
fn sim_lost_responses_are_recovered_by_the_next_push() {
    let mut sim = Sim::new(ApiVariant::Sotw);
    sim.server.set(LDS, "l", listener("l"));
    sim.client.subscribe_wildcard(LDS);
    sim.connect();
    assert!(
        sim.step(),
        "the request reaches the server, its answer is in flight"
    );
    sim.lose_all_downstream();
    sim.run_until_idle();
    assert!(sim.client.held_version(&key(LDS, "l")).is_none());
    sim.server_set(LDS, "m", listener("m"));
    sim.run_until_idle();
    assert!(sim.client.held_version(&key(LDS, "l")).is_some());
    assert!(sim.client.held_version(&key(LDS, "m")).is_some());
}

/// Wildcard CDS over the model, with the SotW full-state deletion.
#[test]
fn sim_sotw_wildcard_tracks_the_server_set() {
    let mut sim = Sim::new(ApiVariant::Sotw);
    sim.server.set(CDS, "a", cluster("a"));
    sim.server.set(CDS, "b", cluster("b"));
    sim.client.subscribe_wildcard(CDS);
    sim.connect();
    sim.run_until_idle();
    sim.server_delete(CDS, "a");
    sim.run_until_idle();
    assert!(sim.client.held_version(&key(CDS, "a")).is_none());
    assert!(sim.client.held_version(&key(CDS, "b")).is_some());
    assert!(sim.take_events().contains(&"removed a".to_owned()));
}

/// Many subscriptions and churn stay within the livelock bound and cost one
/// request per change.
#[test]
fn sim_subscription_churn_sends_one_request_per_change() {
    let mut sim = Sim::new(ApiVariant::Delta);
    for i in 0..100 {
        sim.server
            .set(EDS, &format!("e{i}"), endpoints(&format!("e{i}")));
    }
    sim.connect();
    sim.run_until_idle();
    for i in 0..100 {
        sim.client.subscribe(key(EDS, &format!("e{i}")));
        sim.run_until_idle();
    }
    let before = sim.server.requests.len();
    sim.client.unsubscribe(&key(EDS, "e5"));
    sim.run_until_idle();
    assert_eq!(sim.server.requests.len(), before + 1);
    let Some(Request::Delta(last)) = sim.server.requests.last() else {
        panic!("a delta request");
    };
    assert_eq!(last.resource_names_unsubscribe, vec!["e5".to_owned()]);
    assert!(last.resource_names_subscribe.is_empty());
}
