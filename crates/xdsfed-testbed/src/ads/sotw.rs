//! `StreamAggregatedResources`: the state-of-the-world variant.
//!
//! Every response of a type carries everything the client's subscription
//! selects: with a wildcard (the Listener/Cluster "full state") every resource
//! of the type, otherwise exactly the requested names that exist. Its
//! `version_info` is the hash over the sorted `(name, version)` pairs it
//! carries, so it changes exactly when the content does.
//!
//! A response is sent for the first request of a type, when a request names a
//! resource it did not name before (§How the client specifies what resources
//! to return: newly requested resources are always resent), and when the
//! selected content changes. A request echoing a nonce other than the latest
//! one of its type is stale and is ignored (§Resource updates).
//!
//! A full-state response is O(selected) to build, which the protocol makes
//! inherent. What is avoided: evaluating again when a request changes
//! nothing (an ACK) and when none of the store's changed keys is
//! subscribed (a stream that asked for a few names is not touched by
//! changes to the others).
//!
//! A resource whose message carries no name of its own (a list collection
//! such as `LbEndpointCollection`, a LEDS `LbEndpoint`) is sent wrapped in
//! `envoy.service.discovery.v3.Resource` with its name, as the protocol
//! allows a client that advertises `xds.config.resource-in-sotw`:
//! unwrapped, the client could not tell what it is.

use std::collections::HashMap;

use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message as _, Name as _};
use tokio::sync::mpsc;
use tonic::Status;

use super::{End, Protocol, StreamCtx, node_id, on_the_wire, plain_selection, select, send};
use crate::{recording::Message, subscription::Subscription, version};

type Tx = mpsc::Sender<Result<DiscoveryResponse, Status>>;

#[derive(Debug, Default)]
pub(super) struct TypeState {
    sub: Subscription,
    /// The nonce of the latest response of this type.
    last_nonce: Option<String>,
    /// The version of the latest response of this type.
    last_version: Option<String>,
    /// Send even if the content did not change.
    force: bool,
    /// The store revision of this type last evaluated.
    seen_revision: Option<u64>,
}

/// The state-of-the-world variant, run by [`super::serve`].
pub(super) struct Sotw;

impl Protocol for Sotw {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    type TypeState = TypeState;

    fn on_request(
        ctx: &mut StreamCtx,
        types: &mut HashMap<String, TypeState>,
        request: DiscoveryRequest,
        tx: &Tx,
    ) -> impl Future<Output = Result<(), End>> + Send {
        on_request(ctx, types, request, tx)
    }

    fn push_all(
        ctx: &mut StreamCtx,
        types: &mut HashMap<String, TypeState>,
        tx: &Tx,
        everything: bool,
    ) -> impl Future<Output = Result<(), End>> + Send {
        push_all(ctx, types, tx, everything)
    }
}

async fn on_request(
    ctx: &mut StreamCtx,
    types: &mut HashMap<String, TypeState>,
    request: DiscoveryRequest,
    tx: &Tx,
) -> Result<(), End> {
    ctx.on_request(node_id(request.node.as_ref()));
    ctx.shared
        .recorder
        .record(ctx.id, true, &request, Message::Request);
    if request.type_url.is_empty() {
        return Err(End::Status(Status::invalid_argument(
            "DiscoveryRequest.type_url is empty",
        )));
    }
    let state = types.entry(request.type_url.clone()).or_default();
    if !request.response_nonce.is_empty() {
        if state.last_nonce.as_deref() != Some(request.response_nonce.as_str()) {
            return Ok(()); // stale: a newer response is on its way
        }
        let error = request.error_detail.as_ref().map(|s| s.message.clone());
        ctx.shared
            .tracker
            .answered(ctx.id, &request.response_nonce, error);
    }
    let first = !state.sub.seen;
    let was_wildcard = state.sub.wildcard;
    let change = state.sub.apply_sotw(&request.resource_names);
    state.force |= first || !change.subscribed.is_empty();
    // A changed subscription may select something else from the same
    // revision; a request that changes nothing (an ACK) would select what
    // was last sent, so it keeps the revision and costs nothing.
    let unchanged = !first
        && change.subscribed.is_empty()
        && change.unsubscribed.is_empty()
        && state.sub.wildcard == was_wildcard
        && plain_selection(&ctx.shared.faults(), &request.type_url);
    if !unchanged {
        state.seen_revision = None;
    }
    ctx.shared
        .tracker
        .subscribed(ctx.id, &request.type_url, &state.sub);
    push(ctx, &request.type_url, state, tx).await
}

async fn push_all(
    ctx: &mut StreamCtx,
    types: &mut HashMap<String, TypeState>,
    tx: &Tx,
    everything: bool,
) -> Result<(), End> {
    for (type_url, state) in types.iter_mut() {
        if everything {
            state.seen_revision = None;
        }
        push(ctx, type_url, state, tx).await?;
    }
    Ok(())
}

/// Sends the selected state of this type if it changed or must be resent.
async fn push(
    ctx: &mut StreamCtx,
    type_url: &str,
    state: &mut TypeState,
    tx: &Tx,
) -> Result<(), End> {
    let faults = ctx.shared.faults();
    let (revision, table, changed) = match state.seen_revision {
        Some(seen) if !state.force => {
            let changes = ctx.shared.store.changes(type_url, seen);
            if changes.revision == seen {
                return Ok(());
            }
            (changes.revision, changes.table, changes.keys)
        }
        _ => {
            let (revision, table) = ctx.shared.store.table(type_url);
            (revision, table, None)
        }
    };
    if faults.silent_types.contains(type_url) || (state.sub.is_empty() && !state.force) {
        return Ok(());
    }
    state.seen_revision = Some(revision);
    // What was last evaluated was sent or equal to what was; with a plain
    // selection, changes to keys the subscription does not cover leave it so.
    if let Some(keys) = changed
        && plain_selection(&faults, type_url)
        && !keys.iter().any(|key| state.sub.covers(key))
    {
        return Ok(());
    }
    let selected = select(&faults, type_url, &state.sub, &table);
    let carried: Vec<_> = selected.wanted.into_values().collect();
    let version_info = version::of_pairs(carried.iter().map(|o| (o.wire.as_str(), o.version())));
    if !state.force && state.last_version.as_deref() == Some(version_info.as_str()) {
        return Ok(());
    }
    state.force = false;
    let nonce = ctx.nonce();
    state.last_nonce = Some(nonce.clone());
    state.last_version = Some(version_info.clone());
    let response = DiscoveryResponse {
        version_info,
        type_url: type_url.to_owned(),
        resources: on_the_wire(&faults, type_url, &carried)
            .into_iter()
            .map(|(name, resource, version)| named(type_url, name, resource, version))
            .collect(),
        nonce: nonce.clone(),
        ..Default::default()
    };
    ctx.shared.tracker.sent(ctx.id, &nonce, type_url, &carried);
    send(ctx, tx, response, Message::Response).await
}

/// `resource` as a SotW response carries it: as it is, or wrapped in a
/// `Resource` with its name when its message has no name field
/// (`…Collection`, `LbEndpoint`).
fn named(type_url: &str, name: String, resource: Any, version: String) -> Any {
    let nameless = type_url.ends_with("Collection")
        || type_url == "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";
    if !nameless {
        return resource;
    }
    let wrapped = Resource {
        name,
        version,
        resource: Some(resource),
        ..Default::default()
    };
    Any {
        type_url: Resource::type_url(),
        value: wrapped.encode_to_vec(),
    }
}
