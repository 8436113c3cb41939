//! State-of-the-world ADS: `StreamAggregatedResources`.
//!
//! Every SotW request carries the full list of subscribed names (with `*`
//! explicit when subscribed), the last ACKed `version_info` of its type and
//! the last nonce of its type on this stream. A reconnect therefore resends
//! the last ACKed version and the full lists: "the client's initial request
//! on the new stream should indicate the most recent version seen by the
//! client on the previous stream" (xds-protocol-v3, ACK/NACK).
//!
//! Resources arrive bare (named by a field inside them) or wrapped in
//! `envoy.service.discovery.v3.Resource` (`xds.config.resource-in-sotw`),
//! which also carries a TTL. For full-state types (Listener, Cluster) a held
//! resource absent from a response is deleted: "if a previously seen resource
//! is not present in a new response, that indicates that the resource has
//! been removed" (xds-protocol-v3, "Deleting Resources"); for other types
//! absence means nothing.

use crate::hash::HashSet;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;

use super::ack::{PendingAck, Rejected, error_detail};
use super::event::{CoreEvent, ResourceKey};
use super::glob::is_glob;
use super::ingest::{Body, HeartbeatRule, Item};
use super::session::{Request, Session};
use super::type_state::WILDCARD;
use super::undecoded::{UndecodedResource, decoded_positions};
use crate::types::ValidationError;
use crate::version::Version;

/// The type URL of the `Resource` wrapper.
pub const RESOURCE_WRAPPER_TYPE_URL: &str =
    "type.googleapis.com/envoy.service.discovery.v3.Resource";

/// gRPC's `UNKNOWN`, for a resource error that came without a status.
const UNKNOWN: i32 = 2;

impl Session {
    /// The next SotW request for `type_url`, carrying `ack` if given; `None`
    /// if it would say nothing.
    pub(super) fn build_sotw(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        ack: Option<PendingAck>,
    ) -> Option<Request> {
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
        let mut names: Vec<String> = Vec::with_capacity(state.durable.subscribed.len() + 1);
        if state.durable.wildcard {
            names.push(WILDCARD.to_owned());
        }
        // xDS TP1: a glob collection needs delta xDS. A stream that fell
        // back to SotW (the server answered UNIMPLEMENTED for delta) cannot
        // ask for one; a SotW server would take it for a plain name.
        names.extend(
            state
                .durable
                .subscribed
                .iter()
                .filter(|n| !is_glob(n))
                .map(|n| n.to_string()),
        );
        names.sort_unstable();
        let (version_info, response_nonce, error_detail) = match ack {
            Some(ack) => (ack.version.to_string(), ack.nonce, ack.error),
            None => (
                state.durable.acked_version.to_string(),
                state.stream.nonce.clone(),
                None,
            ),
        };
        let (globs, plain): (Vec<Arc<str>>, Vec<Arc<str>>) =
            changes.subscribe.into_iter().partition(|n| is_glob(n));
        self.arm_does_not_exist(now, type_url, &plain);
        for glob in globs {
            self.events.push_back(CoreEvent::NotRequested {
                key: ResourceKey::new(Arc::clone(type_url), glob),
                reason: Arc::from(
                    "glob collections need delta xDS (xDS TP1), and this server speaks only state-of-the-world xDS (it answered UNIMPLEMENTED for delta ADS)",
                ),
            });
        }
        Some(Request::Sotw(DiscoveryRequest {
            version_info,
            node: (!self.stream.node_sent).then(|| self.cfg.node.clone()),
            resource_names: names,
            type_url: type_url.to_string(),
            response_nonce,
            error_detail,
            ..Default::default()
        }))
    }

    /// Applies one SotW response and queues its ACK or NACK. `undecoded`
    /// are resources of it the transport could not decode, each at its
    /// position; `r.resources` are the others, in order.
    pub(super) fn on_sotw_response(
        &mut self,
        now: Instant,
        r: DiscoveryResponse,
        undecoded: Vec<UndecodedResource>,
    ) {
        self.note_response(now);
        let Some(type_url) = self.requested_type(&r.type_url) else {
            return;
        };
        if let Some(state) = self.states.get_mut(&type_url) {
            state.stream.nonce.clone_from(&r.nonce);
        }
        let version = Version::new(&r.version_info);
        let mut rejected = Vec::new();
        let mut names_known = true;
        let mut items = Vec::with_capacity(r.resources.len() + undecoded.len());
        let positions = decoded_positions(&undecoded);
        let decoded = positions
            .zip(r.resources)
            .map(|(index, any)| self.sotw_item(&type_url, index, any, &version));
        let undecoded = undecoded.into_iter().map(|u| u.into_item(&version));
        for item in decoded.collect::<Vec<_>>().into_iter().chain(undecoded) {
            match item {
                Ok(item) => items.push(item),
                Err(r) => {
                    names_known = false;
                    self.stats.resource_updates_invalid += 1;
                    rejected.push(r);
                }
            }
        }
        let full_state = self.full_state(&type_url);
        let mut present = full_state.then(HashSet::default);
        self.ingest(
            now,
            &type_url,
            items,
            HeartbeatRule::Held,
            &mut rejected,
            present.as_mut(),
        );
        match present {
            Some(present) if names_known => self.delete_absent(&type_url, &present),
            Some(_) => tracing::warn!(
                type_url = %type_url,
                "not deleting absent resources: a resource of the response has no known name"
            ),
            None => {}
        }
        for e in r.resource_errors {
            let name = e.resource_name.map(|n| n.name).unwrap_or_default();
            let (code, message) = e
                .error_detail
                .map_or((UNKNOWN, String::new()), |s| (s.code, s.message));
            self.resource_error(&type_url, &name, code, message);
        }
        let (error, ack_version) = if rejected.is_empty() {
            if let Some(state) = self.states.get_mut(&type_url) {
                state.durable.acked_version = version.clone();
            }
            (None, version)
        } else {
            // "it would reply with error_detail populated and its previous
            // version" (xds-protocol-v3, NACK).
            let previous = self
                .states
                .get(&type_url)
                .map_or_else(Version::empty, |s| s.durable.acked_version.clone());
            (Some(error_detail(&type_url, &rejected)), previous)
        };
        self.stream.acks.push_back(PendingAck {
            type_url,
            nonce: r.nonce,
            version: ack_version,
            error,
        });
    }

    /// One resource of a SotW response as an [`Item`]; `Err` when its name
    /// cannot be known.
    fn sotw_item(
        &self,
        type_url: &str,
        index: usize,
        any: Any,
        version: &Version,
    ) -> Result<Item, Rejected> {
        let unnamed = |error| Rejected::Unnamed { index, error };
        if any.type_url != RESOURCE_WRAPPER_TYPE_URL {
            // Only the resource itself can say its name here; `raw` shares
            // the bytes, so a rejection can still read the name.
            let raw = Bytes::from(any.value);
            let decoded = match self.decode_bytes(type_url, &any.type_url, raw.clone()) {
                Ok(decoded) => decoded,
                Err(error) => {
                    let name = (any.type_url == type_url)
                        .then(|| self.types.get(type_url))
                        .flatten()
                        .and_then(|ty| ty.name_of_invalid(&raw));
                    return match name {
                        Some(name) => {
                            Ok(Item::new(name, Body::Failed(error), version.clone(), None))
                        }
                        None => Err(unnamed(error)),
                    };
                }
            };
            let name = decoded
                .name()
                .ok_or_else(|| {
                    unnamed(ValidationError::field(
                        "name",
                        "the resource carries no name",
                    ))
                })?
                .to_owned();
            return Ok(Item::new(
                name,
                Body::Decoded(decoded),
                version.clone(),
                None,
            ));
        }
        let wrapper = Resource::decode(Bytes::from(any.value))
            .map_err(|e| unnamed(ValidationError(format!("Resource wrapper: {e}"))))?;
        let mut name = if wrapper.name.is_empty() {
            wrapper.resource_name.map(|n| n.name).unwrap_or_default()
        } else {
            wrapper.name
        };
        let body = match wrapper.resource {
            None => Body::Heartbeat,
            Some(inner) if name.is_empty() => {
                // A wrapper without a name: the resource names itself.
                let decoded = self.decode(type_url, inner).map_err(unnamed)?;
                name = decoded.name().unwrap_or_default().to_owned();
                Body::Decoded(decoded)
            }
            Some(inner) => Body::Raw(inner.into()),
        };
        Ok(Item::new(name, body, version.clone(), wrapper.ttl))
    }

    /// Deletes every held resource of the full-state type `type_url` that
    /// the response did not carry.
    fn delete_absent(&mut self, type_url: &Arc<str>, present: &HashSet<Arc<str>>) {
        let Some(state) = self.states.get(type_url) else {
            return;
        };
        let gone: Vec<Arc<str>> = state
            .durable
            .held
            .keys()
            .filter(|name| !present.contains(*name))
            .cloned()
            .collect();
        for name in gone {
            self.server_removed(type_url, name, true);
        }
    }
}
