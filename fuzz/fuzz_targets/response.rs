//! Fuzzes the xDS response path: bytes become delta or SotW responses for a
//! sans-IO `Session` subscribed to Listener, RouteConfiguration, Cluster and
//! ClusterLoadAssignment names (two xdstp authorities, an old-style name, a
//! glob collection), between virtual-time timeouts, stream restarts, the
//! delta→SotW fallback and subscription changes; every event goes on
//! through the federation core (gating, redirects followed on the same
//! server, glob members) into the cache, as in the client, so the gRFC A88
//! transitions run too.
//!
//! Input: a flags byte (variant, authority filter, server features), then
//! operations, a tag byte and operands each (see `step`). A chunk that does
//! not decode as a response (or whose tag says so) becomes the bytes of one
//! resource with a chosen name, so malformed resources reach validation.
//!
//! Checked: a request's `response_nonce` was given on the current stream in
//! a response of its type; a response of a type requested on the stream is
//! answered by one request, its ACK or NACK, and any other by none; cached
//! states agree with A88 (an upsert leaves its bytes ACKED; ACKED has a copy
//! unless a glob; DOES_NOT_EXIST has none); nothing panics. Seeds:
//! `cargo test --manifest-path fuzz/Cargo.toml --test response_seeds`.

#![no_main]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse};
use envoy_types::pb::{envoy::service::discovery::v3::Resource, google::protobuf::Any};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use xdsfed_core::bootstrap::ApiVariant::{self, Delta, Sotw};
use xdsfed_core::cache::{DataErrorPolicy, ResourceStatus};
use xdsfed_core::fuzzing::Federated;
use xdsfed_core::name::canonical_key;
use xdsfed_core::protocol::{AuthorityFilter, CoreEvent, Request, ResourceKey, Session};
use xdsfed_core::protocol::{SessionConfig, StreamEnd, is_glob};
use xdsfed_core::types::TypeRegistry;

/// The first seven are subscribed at first; then a glob member, and a third
/// authority's name, which a filtered server may not deliver.
const NAMES: [&str; 9] = [
    "xdstp://a.example/envoy.config.listener.v3.Listener/l1",
    "old-style-listener",
    "xdstp://a.example/envoy.config.route.v3.RouteConfiguration/r1",
    "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1",
    "xdstp://b.example/envoy.config.cluster.v3.Cluster/c2",
    "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/c2",
    "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/pool/*",
    "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/pool/e1",
    "xdstp://c.example/envoy.config.cluster.v3.Cluster/c3",
];

fn key(i: usize) -> ResourceKey {
    let name = NAMES[i % NAMES.len()];
    let ty = name
        .split('/')
        .nth(3)
        .unwrap_or("envoy.config.listener.v3.Listener");
    ResourceKey::new(format!("type.googleapis.com/{ty}"), name)
}

struct Harness {
    session: Session,
    fed: Federated,
    /// Names watched by the harness (the core may subscribe others).
    watched: HashSet<ResourceKey>,
    now: Instant,
    /// Per stream: nonces given in responses of requested types, by type.
    given: HashMap<String, HashSet<String>>,
    responses: u32,
}

impl Harness {
    fn new(flags: u8) -> Self {
        let variant = if flags & 1 == 0 { Delta } else { Sotw };
        let ours = AuthorityFilter::new()
            .with_authority("a.example")
            .with_authority("b.example");
        let filter = if flags & 2 == 0 {
            AuthorityFilter::any()
        } else {
            ours.with_old_style(true)
        };
        let mut cfg = SessionConfig::new(Default::default())
            .with_variant(variant)
            .with_authorities(filter);
        cfg = cfg.with_first_response_timeout((flags & 4 != 0).then(|| Duration::from_secs(30)));
        cfg.ignore_resource_deletion = flags & 8 != 0;
        let (fail_on_data_errors, timer_is_transient) = (flags & 16 != 0, flags & 32 != 0);
        let policy = DataErrorPolicy {
            ignore_resource_deletion: flags & 8 != 0,
            fail_on_data_errors,
            timer_is_transient,
        };
        let session = Session::new(cfg, Arc::new(TypeRegistry::with_builtin()));
        let now = Instant::now();
        let Some(fed) = Federated::new(policy) else {
            panic!("the fixed bootstrap is valid");
        };
        let mut h = Harness {
            session,
            fed,
            watched: HashSet::new(),
            now,
            given: HashMap::new(),
            responses: 0,
        };
        (0..7).for_each(|i| h.toggle(i));
        h.restart(None, true);
        h
    }

    fn toggle(&mut self, i: usize) {
        let k = key(i);
        assert_eq!(canonical_key(&k.name).as_deref(), Ok(&*k.name));
        if self.watched.insert(k.clone()) {
            // A name of an authority the bootstrap lacks is refused, as
            // the client refuses it.
            if !self.fed.watch(&k) {
                self.watched.remove(&k);
            }
        } else {
            self.watched.remove(&k);
            self.fed.unwatch(&k);
        }
        self.ask();
    }

    /// Carries what the core asked for to the session.
    fn ask(&mut self) {
        for (subscribe, key) in self.fed.take_asked() {
            if subscribe {
                self.session.subscribe(key);
            } else {
                self.session.unsubscribe(&key);
            }
        }
    }

    /// Ends the stream (if `end`), opens the next, and drains it.
    fn restart(&mut self, end: Option<StreamEnd>, accepted: bool) {
        if let Some(end) = end {
            self.session.handle_stream_end(self.now, end);
        }
        self.given.clear();
        self.session.handle_connected(self.now);
        if accepted {
            self.session.handle_stream_accepted(self.now);
        }
        self.drive();
    }

    /// Drains the session in its documented order; returns the requests.
    fn drive(&mut self) -> Vec<Request> {
        if let Some(end) = self.session.poll_close() {
            self.restart(Some(end), false);
        }
        let requests: Vec<Request> =
            std::iter::from_fn(|| self.session.poll_transmit(self.now)).collect();
        for r in &requests {
            let (ty, nonce) = (r.type_url().to_owned(), nonce_of(r));
            let given = self.given.entry(ty).or_default();
            assert!(
                nonce.is_empty() || given.contains(nonce),
                "{nonce:?} never given: {r:?}"
            );
        }
        while let Some(event) = self.session.poll_event() {
            let upsert = match &event {
                CoreEvent::Upsert { key, resource, .. } => {
                    Some((key.clone(), resource.raw().clone()))
                }
                _ => None,
            };
            self.fed.handle_events(vec![event]);
            self.ask();
            let upsert = upsert.filter(|(k, _)| self.watched.contains(k));
            if let Some((s, raw)) =
                upsert.and_then(|(k, raw)| Some((self.fed.cache().state(&k)?, raw)))
            {
                assert!(
                    s.status == ResourceStatus::Acked
                        && s.resource.is_some_and(|r| *r.raw() == raw)
                );
            }
            self.fed.cache().for_each(|k, _, s| {
                let copy = s.resource.is_some();
                assert!(
                    s.status != ResourceStatus::DoesNotExist || !copy,
                    "{k}: {s:?}"
                );
                assert!(
                    s.status != ResourceStatus::Acked || copy || is_glob(&k.name),
                    "{k}: {s:?}"
                );
            });
        }
        requests
    }

    /// Feeds one response, `chunk` decoded, or as the bytes of the resource
    /// named by `tag >> 3` (always if `tag & 1`), and checks its answer.
    fn respond(&mut self, tag: u8, chunk: &[u8]) {
        self.responses += 1;
        let k = key(usize::from(tag >> 3));
        let (ty, nonce) = (k.type_url.to_string(), format!("x{}", self.responses));
        let any = Any {
            type_url: ty.clone(),
            value: chunk.to_vec(),
        };
        let resource = Resource {
            name: k.name.to_string(),
            version: "v".into(),
            resource: Some(any.clone()),
            ..Default::default()
        };
        let (ty, nonce) = if self.session.variant() == Delta {
            let own = DeltaDiscoveryResponse {
                type_url: ty,
                nonce,
                resources: vec![resource],
                ..Default::default()
            };
            let r = DeltaDiscoveryResponse::decode(chunk)
                .ok()
                .filter(|_| tag & 1 == 0)
                .unwrap_or(own);
            let sent = (r.type_url.clone(), r.nonce.clone());
            self.session.handle_delta_response(self.now, r);
            sent
        } else {
            let own = DiscoveryResponse {
                type_url: ty,
                nonce,
                resources: vec![any],
                ..Default::default()
            };
            let r = DiscoveryResponse::decode(chunk)
                .ok()
                .filter(|_| tag & 1 == 0)
                .unwrap_or(own);
            let sent = (r.type_url.clone(), r.nonce.clone());
            self.session.handle_sotw_response(self.now, r);
            sent
        };
        // A type is requested on this stream once a request of it was sent.
        let requested = self
            .given
            .get_mut(&ty)
            .map(|given| given.insert(nonce.clone()))
            .is_some();
        // Besides its ACK or NACK, a response may be followed by requests
        // the federation core asked for (a redirect's target subscribed);
        // only the answer names this response's type and nonce (every
        // nonce named at all was given on this stream: see `drive`).
        let requests = self.drive();
        let answers = requests
            .iter()
            .filter(|r| r.type_url() == ty && nonce_of(r) == nonce)
            .count();
        assert_eq!(
            answers,
            usize::from(requested),
            "{ty} answered by {requests:?}"
        );
    }

    /// One operation; returns how many bytes of `ops` it used.
    fn step(&mut self, ops: &[u8]) -> usize {
        let (tag, arg) = (ops[0], ops.get(1).copied().unwrap_or(0));
        match tag % 8 {
            0..=3 => {
                let len = usize::from(u16::from_le_bytes([arg, ops.get(2).copied().unwrap_or(0)]));
                let chunk = ops.get(3..).unwrap_or_default();
                let chunk = &chunk[..len.min(chunk.len())];
                self.respond(tag, chunk);
                return 3 + chunk.len();
            }
            4 => {
                // To the next deadline, but never more than a day at once: a
                // real clock does not reach deadlines centuries away.
                let next = self.session.poll_timeout().unwrap_or(self.now);
                let next = next.clamp(self.now, self.now + Duration::from_secs(86_400));
                self.now = if arg == 0 {
                    next
                } else {
                    self.now + Duration::from_secs(arg.into())
                };
                self.session.handle_timeout(self.now);
            }
            5 => {
                if tag & 32 != 0 {
                    self.session.set_variant(ApiVariant::Sotw);
                }
                let end = if tag & 8 != 0 {
                    StreamEnd::new(14, "unavailable")
                } else {
                    StreamEnd::local("idle")
                };
                self.restart(Some(end), tag & 16 != 0);
            }
            6 if tag & 8 != 0 => self.session.handle_stream_accepted(self.now),
            6 => self.session.handle_connection_ready(self.now),
            _ => self.toggle(usize::from(arg) % NAMES.len()),
        }
        self.drive();
        2
    }
}

fn nonce_of(r: &Request) -> &str {
    match r {
        Request::Delta(d) => &d.response_nonce,
        Request::Sotw(s) => &s.response_nonce,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut ops)) = data.split_first() else {
        return;
    };
    let mut h = Harness::new(flags);
    while !ops.is_empty() {
        let used = h.step(ops);
        ops = ops.get(used..).unwrap_or_default();
    }
});
