//! `DeltaAggregatedResources`: the incremental variant.
//!
//! Per type the stream remembers what the client holds (`sent`: key → version)
//! and sends only differences:
//!
//! - a wanted resource whose version differs from `sent`, or that the client
//!   (re)subscribed by name, goes in `resources`;
//! - a resource the client holds that is still subscribed but no longer exists
//!   goes in `removed_resources`, and so does a subscribed name that never
//!   existed and a glob collection that matches nothing (TP1's empty-glob
//!   removal) — each once, until it appears and disappears again;
//! - unsubscribing a name needs no answer, except while a wildcard is active:
//!   then the name is sent again if the wildcard includes it, or removed if
//!   not (§Unsubscribing from Resources);
//! - `initial_resource_versions` of the first request seed `sent`, so a
//!   reconnecting client is not sent what it already has.

use std::collections::{BTreeSet, HashMap};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

use super::{End, StreamCtx, finish, node_id, on_the_wire, select, send, stopped};
use crate::{
    recording::Message,
    subscription::{Subscription, key_of},
    version,
};

type Tx = mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>;

#[derive(Debug, Default)]
struct TypeState {
    sub: Subscription,
    /// Key → (name sent, version) of what the client holds.
    sent: HashMap<String, (String, String)>,
    /// Absent names and empty globs already reported in `removed_resources`.
    reported_absent: BTreeSet<String>,
    /// Keys to send even if the client seems to hold them.
    force: BTreeSet<String>,
    /// Names the client unsubscribed under a wildcard that must be answered
    /// with a removal if the wildcard does not include them.
    must_answer: Vec<(String, String)>,
    /// The store revision of this type last evaluated.
    seen_revision: Option<u64>,
}

pub(super) async fn run(mut ctx: StreamCtx, mut inbound: Streaming<DeltaDiscoveryRequest>, tx: Tx) {
    let mut types: HashMap<String, TypeState> = HashMap::new();
    let end = loop {
        // Biased: a change made before a request was sent is handled before
        // that request, so a test's fence request is answered after the push.
        let step = tokio::select! {
            biased;
            () = stopped(&mut ctx.shutdown) => Err(End::stopping()),
            _ = ctx.faults_changed.changed() => push_all(&mut ctx, &mut types, &tx, true).await,
            _ = ctx.store_changed.changed() => push_all(&mut ctx, &mut types, &tx, false).await,
            message = inbound.message() => match message {
                Ok(Some(request)) => on_request(&mut ctx, &mut types, request, &tx).await,
                Ok(None) => Err(End::ClientClosed),
                Err(status) => Err(End::ClientFailed(status)),
            },
        };
        if let Err(end) = step {
            break end;
        }
    };
    finish(ctx, tx, end).await;
}

async fn on_request(
    ctx: &mut StreamCtx,
    types: &mut HashMap<String, TypeState>,
    request: DeltaDiscoveryRequest,
    tx: &Tx,
) -> Result<(), End> {
    ctx.on_request(node_id(request.node.as_ref()));
    ctx.shared
        .recorder
        .record(ctx.id, Message::DeltaRequest(request.clone()));
    if request.type_url.is_empty() {
        return Err(End::Status(Status::invalid_argument(
            "DeltaDiscoveryRequest.type_url is empty",
        )));
    }
    if !request.response_nonce.is_empty() {
        let error = request.error_detail.as_ref().map(|s| s.message.clone());
        ctx.shared
            .tracker
            .answered(ctx.id, &request.response_nonce, error);
    }
    let state = types.entry(request.type_url.clone()).or_default();
    let first = !state.sub.seen;
    if first && !request.initial_resource_versions.is_empty() {
        let mut held = Vec::with_capacity(request.initial_resource_versions.len());
        for (name, version) in &request.initial_resource_versions {
            let key = key_of(name);
            held.push((key.clone(), version.clone()));
            state.sent.insert(key, (name.clone(), version.clone()));
        }
        ctx.shared.tracker.holds(ctx.id, &request.type_url, &held);
    }
    let change = state.sub.apply_delta(
        &request.resource_names_subscribe,
        &request.resource_names_unsubscribe,
    );
    for key in change.subscribed {
        state.reported_absent.remove(&key);
        // On a new stream the client said what it holds; elsewhere a name
        // subscribed again is resent even if unchanged (§Subscribing to Resources).
        if !(first && state.sent.contains_key(&key)) {
            state.force.insert(key);
        }
    }
    for key in change.unsubscribed {
        state.reported_absent.remove(&key);
        if state.sub.wildcard {
            let wire = state
                .sent
                .get(&key)
                .map(|(n, _)| n.clone())
                .or_else(|| unsubscribed_wire(&request, &key))
                .unwrap_or_else(|| key.clone());
            state.force.insert(key.clone());
            state.must_answer.push((key, wire));
        } else if !state.sub.covers(&key) {
            state.sent.remove(&key);
        }
    }
    ctx.shared
        .tracker
        .subscribed(ctx.id, &request.type_url, &state.sub);
    // The subscription may select something else from the same revision.
    state.seen_revision = None;
    push(ctx, &request.type_url, state, tx).await
}

fn unsubscribed_wire(request: &DeltaDiscoveryRequest, key: &str) -> Option<String> {
    request
        .resource_names_unsubscribe
        .iter()
        .find(|n| key_of(n) == key)
        .cloned()
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

/// Sends what the client of this type is missing, if anything.
async fn push(
    ctx: &mut StreamCtx,
    type_url: &str,
    state: &mut TypeState,
    tx: &Tx,
) -> Result<(), End> {
    let faults = ctx.shared.faults();
    let (revision, table) = ctx.shared.store.table(type_url);
    if state.seen_revision == Some(revision)
        && state.force.is_empty()
        && state.must_answer.is_empty()
    {
        return Ok(());
    }
    if faults.silent_types.contains(type_url) {
        return Ok(());
    }
    state.seen_revision = Some(revision);
    let selected = select(&faults, type_url, &state.sub, &table);

    let mut carried = Vec::new();
    for (key, out) in &selected.wanted {
        let stale = state.sent.get(key).is_none_or(|(_, v)| *v != out.version);
        if stale || state.force.contains(key) {
            carried.push(out);
        }
    }
    let mut removed = Vec::new();
    state.sent.retain(|key, (wire, _)| {
        if selected.wanted.contains_key(key) {
            return true;
        }
        if state.sub.covers(key) && !faults.is_silent(type_url, key) {
            removed.push(wire.clone());
        }
        false
    });
    for (key, wire) in state.must_answer.drain(..) {
        if !selected.wanted.contains_key(&key) && !removed.contains(&wire) {
            removed.push(wire);
        }
    }
    let absent: BTreeSet<String> = selected.absent.iter().map(|(k, _)| k.clone()).collect();
    for (key, wire) in &selected.absent {
        if state.reported_absent.insert(key.clone()) && !removed.contains(wire) {
            removed.push(wire.clone());
        }
    }
    state.reported_absent.retain(|k| absent.contains(k));
    state.force.clear();

    for out in &carried {
        state
            .sent
            .insert(out.key.clone(), (out.wire.clone(), out.version.clone()));
    }
    let wire = on_the_wire(&faults, type_url, &carried);
    if wire.is_empty() && removed.is_empty() {
        return Ok(());
    }
    let nonce = ctx.nonce();
    let system_version_info = version::of_pairs(
        carried
            .iter()
            .map(|o| (o.wire.as_str(), o.version.as_str())),
    );
    let response = DeltaDiscoveryResponse {
        system_version_info,
        type_url: type_url.to_owned(),
        resources: wire
            .into_iter()
            .map(|(name, resource, version)| Resource {
                name,
                version,
                resource: Some(resource),
                ..Default::default()
            })
            .collect(),
        removed_resources: removed,
        nonce: nonce.clone(),
        ..Default::default()
    };
    ctx.shared.tracker.sent(
        ctx.id,
        &nonce,
        carried
            .iter()
            .map(|o| (type_url.to_owned(), o.key.clone(), o.version.clone()))
            .collect(),
    );
    send(ctx, tx, response, Message::DeltaResponse).await
}
