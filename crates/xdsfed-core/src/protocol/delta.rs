//! Incremental (delta) ADS: `DeltaAggregatedResources`.
//!
//! "DeltaDiscoveryRequest can be sent in the following situations:
//! - Initial message in a xDS bidirectional gRPC stream.
//! - As an ACK or NACK response to a previous DeltaDiscoveryResponse. In this
//!   case the response_nonce is set to the nonce value in the Response. ACK
//!   or NACK is determined by the absence or presence of error_detail.
//! - Spontaneous DeltaDiscoveryRequests from the client. This can be done to
//!   dynamically add or remove elements from the tracked resource_names set.
//!   In this case response_nonce must be omitted."
//!
//! (xds-protocol, older edition, "Incremental xDS")
//!
//! The first request of a type on a stream subscribes to every name (and `*`
//! explicitly, never through the legacy empty request) and carries
//! `initial_resource_versions` for what the session holds (and the copies
//! from the state directory it resumes, see `resume.rs`); later requests
//! carry only the changes.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;

use super::ack::{PendingAck, error_detail};
use super::ingest::{Body, HeartbeatRule, Item, RawAny, Text};
use super::session::{Request, Session};
use super::type_state::WILDCARD;
use super::wire::{WireDeltaResponse, as_text};
use crate::version::Version;

/// A delta response read into items, with what else it carries.
struct Delta<R, E> {
    items: Vec<Item>,
    /// Names removed (`removed_resources`, `removed_resource_names`).
    removed: R,
    /// `resource_errors`: name, code, message.
    errors: E,
    nonce: String,
}

/// The versions of one response's resources, which mostly share one: one
/// copy of it.
#[derive(Default)]
struct SharedVersion(Option<Version>);

impl SharedVersion {
    /// The version `version` spells, read from its bytes: a response's
    /// text fields were checked as UTF-8 when it was decoded, and a hex
    /// digest (the usual delta version) needs no second check.
    fn of(&mut self, version: &Text) -> Version {
        let bytes = version.as_ref();
        match &self.0 {
            Some(last) if last.is_spelled_by(bytes) => last.clone(),
            _ => {
                let version = Version::from_utf8(bytes)
                    .unwrap_or_else(|_| Version::new(&String::from_utf8_lossy(bytes)));
                self.0.insert(version).clone()
            }
        }
    }
}

/// gRPC's `UNKNOWN`, for a resource error that came without a status.
const UNKNOWN: i32 = 2;

impl Session {
    /// The next delta request for `type_url`, carrying `ack` if given; `None`
    /// if it would say nothing.
    pub(super) fn build_delta(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        ack: Option<PendingAck>,
    ) -> Option<Request> {
        if self
            .states
            .get(type_url)
            .is_some_and(|s| !s.stream.requested && s.has_interest())
        {
            self.claim_resumed(type_url);
        }
        let state = self.states.get_mut(type_url)?;
        let first = !state.stream.requested;
        if first && !state.has_interest() {
            // An empty first request would mean `*` (legacy rule).
            return None;
        }
        let changes = state.take_changes();
        if !first && ack.is_none() && changes.is_empty() {
            return None;
        }
        state.stream.requested = true;
        let initial_resource_versions = if first {
            state
                .durable
                .held
                .iter()
                // An empty version is one forgotten (`Session::forget_version`).
                .filter(|(_, version)| !version.is_empty())
                .map(|(name, version)| (name.to_string(), version.to_string()))
                .collect()
        } else {
            Default::default()
        };
        let mut subscribe: Vec<String> = Vec::with_capacity(changes.subscribe.len() + 1);
        let mut unsubscribe: Vec<String> = Vec::with_capacity(changes.unsubscribe.len() + 1);
        match changes.wildcard {
            Some(true) => subscribe.push(WILDCARD.to_owned()),
            Some(false) => unsubscribe.push(WILDCARD.to_owned()),
            None => {}
        }
        subscribe.extend(changes.subscribe.iter().map(|n| n.to_string()));
        unsubscribe.extend(changes.unsubscribe.iter().map(|n| n.to_string()));
        let (response_nonce, error_detail) = ack.map(|a| (a.nonce, a.error)).unwrap_or_default();
        self.arm_does_not_exist(now, type_url, &changes.subscribe);
        Some(Request::Delta(DeltaDiscoveryRequest {
            node: (!self.stream.node_sent).then(|| self.cfg.node.clone()),
            type_url: type_url.to_string(),
            resource_names_subscribe: subscribe,
            resource_names_unsubscribe: unsubscribe,
            initial_resource_versions,
            response_nonce,
            error_detail,
            ..Default::default()
        }))
    }

    /// Applies one delta response and queues its ACK or NACK.
    pub(super) fn on_delta_response(&mut self, now: Instant, r: DeltaDiscoveryResponse) {
        let read = self.delta_items(now, &r.type_url, r.resources, |res| {
            let name = if res.name.is_empty() {
                res.resource_name.map(|n| n.name).unwrap_or_default()
            } else {
                res.name
            };
            let body = res
                .resource
                .map_or(Body::Heartbeat, |any| Body::Raw(any.into()));
            (name.into(), body, res.version.into(), res.ttl)
        });
        let Some((type_url, items)) = read else {
            return;
        };
        let removed = r
            .removed_resources
            .into_iter()
            .chain(r.removed_resource_names.into_iter().map(|n| n.name));
        let errors = r.resource_errors.into_iter().map(|e| {
            let name = e.resource_name.map(|n| n.name).unwrap_or_default();
            let (code, message) = e
                .error_detail
                .map_or((UNKNOWN, String::new()), |s| (s.code, s.message));
            (name, code, message)
        });
        let delta = Delta {
            items,
            removed,
            errors,
            nonce: r.nonce,
        };
        self.apply_delta(now, type_url, delta);
    }

    /// [`Session::on_delta_response`] for a response read in place: its
    /// names, versions and type URLs are read where they lie, and a
    /// resource's bytes are copied out of the message (a held resource
    /// must not keep the whole message alive).
    pub(super) fn on_delta_wire(&mut self, now: Instant, r: WireDeltaResponse) {
        let read = self.delta_items(now, as_text(&r.type_url), r.resources, |res| {
            let name = match res.resource_name {
                Some(n) if res.name.is_empty() => n.name,
                _ => res.name,
            };
            let body = res.resource.map_or(Body::Heartbeat, |any| {
                Body::Raw(RawAny {
                    type_url: Text::InMessage(any.type_url),
                    value: Bytes::copy_from_slice(&any.value),
                })
            });
            let version = Text::InMessage(res.version);
            (Text::InMessage(name), body, version, res.ttl)
        });
        let Some((type_url, items)) = read else {
            return;
        };
        let removed = r
            .removed_resources
            .iter()
            .chain(r.removed_resource_names.iter().map(|n| &n.name))
            .map(|name| as_text(name).to_owned());
        let errors = r.resource_errors.into_iter().map(|e| {
            let name = e.resource_name.map(|n| n.name).unwrap_or_default();
            let (code, message) = e.error_detail.map_or((UNKNOWN, String::new()), |s| {
                (s.code, as_text(&s.message).to_owned())
            });
            (as_text(&name).to_owned(), code, message)
        });
        let delta = Delta {
            items,
            removed,
            errors,
            nonce: as_text(&r.nonce).to_owned(),
        };
        self.apply_delta(now, type_url, delta);
    }

    /// Counts the response and, when its type was requested, reads its
    /// resources into items (`parts` gives each one's name, body, version
    /// and TTL): the type's own copy of its URL, and the items.
    fn delta_items<R>(
        &mut self,
        now: Instant,
        type_url: &str,
        resources: Vec<R>,
        parts: impl Fn(R) -> (Text, Body, Text, Option<PbDuration>),
    ) -> Option<(Arc<str>, Vec<Item>)> {
        self.note_response(now);
        let type_url = self.requested_type(type_url)?;
        let known = self.states.get(&type_url).map(|s| &s.durable);
        let mut versions = SharedVersion::default();
        let items = resources
            .into_iter()
            .map(|resource| {
                let (name, body, version, ttl) = parts(resource);
                let version = versions.of(&version);
                Item::named(name, body, version, ttl, known)
            })
            .collect();
        Some((type_url, items))
    }

    /// What both readings of a delta response share: the rules of
    /// `ingest`, the removals and resource errors, and the ACK or NACK.
    fn apply_delta(
        &mut self,
        now: Instant,
        type_url: Arc<str>,
        delta: Delta<impl Iterator<Item = String>, impl Iterator<Item = (String, i32, String)>>,
    ) {
        let mut rejected = Vec::new();
        self.ingest(
            now,
            &type_url,
            delta.items,
            HeartbeatRule::SameVersion,
            &mut rejected,
            None,
        );
        let full_state = self.full_state(&type_url);
        for raw in delta.removed {
            match crate::name::canonical_key(&raw) {
                Ok(name) => self.server_removed(&type_url, Arc::from(name), full_state),
                Err(e) => {
                    tracing::debug!(error = %e, "ignoring an invalid name in removed_resources")
                }
            }
        }
        for (name, code, message) in delta.errors {
            self.resource_error(&type_url, &name, code, message);
        }
        let error = (!rejected.is_empty()).then(|| error_detail(&type_url, &rejected));
        self.stream.acks.push_back(PendingAck {
            type_url,
            nonce: delta.nonce,
            version: Version::empty(),
            error,
        });
    }

    /// The type of a response, if this stream requested it; otherwise the
    /// response is neither ACKed nor NACKed (answering a type never requested
    /// would, by the legacy rule, subscribe to `*`).
    pub(super) fn requested_type(&mut self, type_url: &str) -> Option<Arc<str>> {
        match self.states.get_key_value(type_url) {
            Some((type_url, state)) if state.stream.requested => Some(Arc::clone(type_url)),
            _ => {
                self.stats.unknown_type_responses_ignored += 1;
                tracing::debug!(
                    type_url,
                    "ignoring a response of a type this stream did not request"
                );
                None
            }
        }
    }
}
