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
//!
//! After a full comparison `sent` holds exactly what is selected, at the
//! selected versions, and `reported_absent` exactly what is absent. While the
//! subscription and the faults stay as they are, only a change of a stored
//! resource can break that, and only for its own key (and the glob
//! collections it belongs to), so a push after a store change compares just
//! the keys the store reports changed: O(changed · log n), not O(n).

use std::collections::{BTreeSet, HashMap};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};
use tokio::sync::mpsc;
use tonic::Status;
use xdsfed_core::hash::HashMap as NameMap;
use xdsfed_core::protocol::is_glob;

use super::{
    End, Outgoing, Protocol, StreamCtx, node_id, on_the_wire, plain_selection, select, send,
};
use crate::{
    faults::Faults,
    recording::Message,
    store::TypeTable,
    subscription::{Subscription, key_of},
    version,
};

type Tx = mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>;

#[derive(Debug, Default, Clone)]
pub(super) struct TypeState {
    sub: Subscription,
    /// Key → (name sent, version) of what the client holds: one entry per
    /// resource the client holds, so hashed by the fast seeded hasher.
    sent: NameMap<String, (String, String)>,
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

/// The incremental variant, run by [`super::serve`].
pub(super) struct Delta;

impl Protocol for Delta {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    type TypeState = TypeState;

    fn on_request(
        ctx: &mut StreamCtx,
        types: &mut HashMap<String, TypeState>,
        request: DeltaDiscoveryRequest,
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
    request: DeltaDiscoveryRequest,
    tx: &Tx,
) -> Result<(), End> {
    ctx.on_request(node_id(request.node.as_ref()));
    ctx.shared
        .recorder
        .record(ctx.id, true, &request, Message::DeltaRequest);
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
    let plain = plain_selection(&ctx.shared.faults(), &request.type_url);
    let held = apply_request(state, &request, plain);
    if !held.is_empty() {
        ctx.shared.tracker.holds(ctx.id, &request.type_url, &held);
    }
    ctx.shared
        .tracker
        .subscribed(ctx.id, &request.type_url, &state.sub);
    push(ctx, &request.type_url, state, tx).await
}

/// Applies what `request` says to the stream's state for its type: the
/// resources a new stream's client holds (returned, for the ACK tracker)
/// and the subscription change. Leaves `seen_revision` set only when the
/// next push may compare just what changed (see [`diff_changed`]).
fn apply_request(
    state: &mut TypeState,
    request: &DeltaDiscoveryRequest,
    plain: bool,
) -> Vec<(String, String)> {
    let first = !state.sub.seen;
    let was_wildcard = state.sub.wildcard;
    let mut held = Vec::new();
    if first {
        held.reserve(request.initial_resource_versions.len());
        for (name, version) in &request.initial_resource_versions {
            let key = key_of(name);
            held.push((key.clone(), version.clone()));
            state.sent.insert(key, (name.clone(), version.clone()));
        }
    }
    let change = state.sub.apply_delta(
        &request.resource_names_subscribe,
        &request.resource_names_unsubscribe,
    );
    let change_is_empty = change.subscribed.is_empty() && change.unsubscribed.is_empty();
    let glob_left = change.unsubscribed.iter().any(|k| is_glob(k));
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
                .or_else(|| unsubscribed_wire(request, &key))
                .unwrap_or_else(|| key.clone());
            state.force.insert(key.clone());
            state.must_answer.push((key, wire));
        } else if !state.sub.covers(&key) {
            state.sent.remove(&key);
        }
    }
    // A request that changes nothing (an ACK, a NACK) keeps what was last
    // evaluated, so it costs nothing. One that only names more (or fewer)
    // resources is answered from those names alone: the newly named ones
    // are in `force`, the ones let go were dropped from `sent` above; so a
    // client subscribing its resources in batches costs O(batch) per
    // request, not O(subscribed). A wildcard change, a glob let go (its
    // members' entries in `sent` must go) or content faults (which may
    // answer any request) make the whole selection be compared again.
    let incremental = !first
        && state.sub.wildcard == was_wildcard
        && (change_is_empty || !state.sub.wildcard)
        && !glob_left
        && plain;
    if !incremental {
        state.seen_revision = None;
    }
    held
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
    let (revision, table, changed) = match state.seen_revision {
        Some(seen) if state.must_answer.is_empty() => {
            let changes = ctx.shared.store.changes(type_url, seen);
            if changes.revision == seen && state.force.is_empty() {
                return Ok(());
            }
            (changes.revision, changes.table, changes.keys)
        }
        _ => {
            let (revision, table) = ctx.shared.store.table(type_url);
            (revision, table, None)
        }
    };
    if faults.silent_types.contains(type_url) {
        return Ok(());
    }
    state.seen_revision = Some(revision);
    let (carried, removed) = match changed {
        Some(keys) if plain_selection(&faults, type_url) => diff_changed(state, &table, keys),
        _ => diff_all(state, &faults, type_url, &table),
    };

    for out in &carried {
        state.sent.insert(
            out.key().to_owned(),
            (out.wire.clone(), out.version().to_owned()),
        );
    }
    let wire = on_the_wire(&faults, type_url, &carried);
    if wire.is_empty() && removed.is_empty() {
        return Ok(());
    }
    let nonce = ctx.nonce();
    let system_version_info =
        version::of_pairs(carried.iter().map(|o| (o.wire.as_str(), o.version())));
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
    ctx.shared.tracker.sent(ctx.id, &nonce, type_url, &carried);
    send(ctx, tx, response, Message::DeltaResponse).await
}

/// Compares everything the subscription selects with what the client
/// holds: (resources to send, names to remove). O(selected + held).
fn diff_all(
    state: &mut TypeState,
    faults: &Faults,
    type_url: &str,
    table: &TypeTable,
) -> (Vec<Outgoing>, Vec<String>) {
    let selected = select(faults, type_url, &state.sub, table);

    let mut carried = Vec::new();
    for (key, out) in &selected.wanted {
        let stale = state.sent.get(key).is_none_or(|(_, v)| v != out.version());
        if stale || state.force.contains(key) {
            carried.push(out.clone());
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
    for (key, wire) in selected.absent {
        if state.reported_absent.insert(key) && !removed.contains(&wire) {
            removed.push(wire);
        }
    }
    state.reported_absent.retain(|k| absent.contains(k));
    state.force.clear();
    (carried, removed)
}

/// Compares only the keys in `changed`, which must be every key that
/// changed in the store since the last comparison, and the keys in `force`
/// (names and globs newly subscribed), with the selection plain
/// ([`plain_selection`]) and nothing else changed in the subscription but
/// names let go (already dropped from `sent`). Gives what [`diff_all`]
/// would, in O((changed + forced) · log n) plus the members of forced globs.
fn diff_changed(
    state: &mut TypeState,
    table: &TypeTable,
    mut changed: BTreeSet<String>,
) -> (Vec<Outgoing>, Vec<String>) {
    let force = std::mem::take(&mut state.force);
    let sub = &state.sub;
    let mut touched_globs = BTreeSet::new();
    for key in &force {
        match sub.globs.get(key) {
            Some(glob) => {
                changed.extend(glob.members(table).map(|(member, _)| member.clone()));
                touched_globs.insert(key);
            }
            None => {
                changed.insert(key.clone());
            }
        }
    }
    let mut carried = Vec::new();
    let mut removed = Vec::new();
    let mut absent_names = Vec::new();
    for key in &changed {
        let stored = table.get(key);
        match stored.filter(|_| sub.covers(key)) {
            Some(stored) => {
                let stale = state
                    .sent
                    .get(key)
                    .is_none_or(|(_, v)| *v != stored.version);
                if stale || force.contains(key) {
                    let wire = sub.wire_name(stored).to_owned();
                    carried.push(Outgoing::new(wire, stored.clone()));
                }
            }
            None => {
                // What the client holds and is subscribed to is gone.
                if let Some((wire, _)) = state.sent.remove(key)
                    && sub.covers(key)
                {
                    removed.push(wire);
                }
            }
        }
        if let Some(wire) = sub.names.get(key) {
            if stored.is_none() {
                absent_names.push((key, wire));
            } else {
                state.reported_absent.remove(key);
            }
        }
        touched_globs.extend(sub.glob_of(key).map(|(glob_key, _)| glob_key));
    }
    // The same order as a full comparison: absent names, then empty globs.
    for (key, wire) in absent_names {
        if state.reported_absent.insert(key.clone()) && !removed.contains(wire) {
            removed.push(wire.clone());
        }
    }
    // A glob is empty when no member is left; the changed keys alone cannot
    // tell, but the first member in key order can.
    for (glob_key, glob) in touched_globs
        .into_iter()
        .filter_map(|k| sub.globs.get_key_value(k))
    {
        if glob.members(table).next().is_some() {
            state.reported_absent.remove(glob_key);
        } else if state.reported_absent.insert(glob_key.clone()) && !removed.contains(&glob.wire) {
            removed.push(glob.wire.clone());
        }
    }
    (carried, removed)
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Any;

    use super::*;
    use crate::store::Store;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    /// Old-style names, collection members, a member one level too deep and
    /// one with other context parameters.
    const NAMES: [&str; 8] = [
        "c1",
        "c2",
        "c3",
        "xdstp://a/envoy.config.cluster.v3.Cluster/g/m1",
        "xdstp://a/envoy.config.cluster.v3.Cluster/g/m2",
        "xdstp://a/envoy.config.cluster.v3.Cluster/g/deep/m3",
        "xdstp://a/envoy.config.cluster.v3.Cluster/g/m4?k=v",
        "xdstp://a/envoy.config.cluster.v3.Cluster/h/m5",
    ];

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn sorted(mut list: Vec<String>) -> Vec<String> {
        list.sort();
        list
    }

    fn described(carried: &[Outgoing]) -> Vec<(String, String, String)> {
        carried
            .iter()
            .map(|o| (o.key().to_owned(), o.wire.clone(), o.version().to_owned()))
            .collect()
    }

    /// Comparing only the changed keys gives what a full comparison gives,
    /// for every kind of subscription, through sets, rewrites and deletes.
    #[test]
    fn diff_of_changed_keys_matches_full_diff() {
        let subscriptions: [&[&str]; 5] = [
            &[],
            &["c1", "c3", "c9"],
            &["xdstp://a/envoy.config.cluster.v3.Cluster/g/*"],
            &["*", "c2", "c9"],
            &["c2", "xdstp://a/envoy.config.cluster.v3.Cluster/h/*"],
        ];
        for subscribe in subscriptions {
            let store = Store::new();
            let mut state = TypeState::default();
            state.sub.apply_delta(&names(subscribe), &[]);
            let (mut seen, table) = store.table(CDS);
            diff_all(&mut state, &Faults::default(), CDS, &table);
            // A fixed pseudo-random walk over sets and deletes.
            let mut rng: u32 = 7;
            for step in 0..400u32 {
                rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let name = NAMES[(rng >> 16) as usize % NAMES.len()];
                if (rng >> 8).is_multiple_of(3) {
                    store.delete(CDS, name).unwrap();
                } else {
                    let value = ((rng >> 4) % 3).to_be_bytes().to_vec();
                    let any = Any {
                        type_url: CDS.into(),
                        value,
                    };
                    store.set(name, any).unwrap();
                }
                if !step.is_multiple_of(3) {
                    continue; // let several changes pile up
                }
                let changes = store.changes(CDS, seen);
                let keys = changes.keys.expect("log reaches back");
                let mut full = state.clone();
                let (carried, removed) = diff_changed(&mut state, &changes.table, keys);
                let (want_carried, want_removed) =
                    diff_all(&mut full, &Faults::default(), CDS, &changes.table);
                let context = format!("{subscribe:?} step {step}");
                assert_eq!(described(&carried), described(&want_carried), "{context}");
                assert_eq!(sorted(removed), sorted(want_removed), "{context}");
                for out in &carried {
                    state.sent.insert(
                        out.key().to_owned(),
                        (out.wire.clone(), out.version().to_owned()),
                    );
                    full.sent.insert(
                        out.key().to_owned(),
                        (out.wire.clone(), out.version().to_owned()),
                    );
                }
                assert_eq!(state.sent, full.sent, "{context}");
                assert_eq!(state.reported_absent, full.reported_absent, "{context}");
                seen = changes.revision;
            }
        }
    }

    fn request(subscribe: &[&str], unsubscribe: &[&str]) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            type_url: CDS.into(),
            resource_names_subscribe: names(subscribe),
            resource_names_unsubscribe: names(unsubscribe),
            ..Default::default()
        }
    }

    /// A client that subscribes and lets go of names (and globs) while the
    /// store changes: whenever a request leaves the comparison incremental,
    /// comparing the changed and newly named keys gives what a full
    /// comparison gives.
    #[test]
    fn diff_after_subscription_changes_matches_full_diff() {
        let subscribable: Vec<&str> = NAMES
            .iter()
            .copied()
            .chain([
                "c9",
                "xdstp://a/envoy.config.cluster.v3.Cluster/g/*",
                "xdstp://a/envoy.config.cluster.v3.Cluster/h/*",
            ])
            .collect();
        let store = Store::new();
        let mut state = TypeState::default();
        apply_request(&mut state, &request(&["c1"], &[]), true);
        let (mut seen, table) = store.table(CDS);
        diff_all(&mut state, &Faults::default(), CDS, &table);
        state.seen_revision = Some(seen);
        let mut incremental_steps = 0;
        let mut rng: u32 = 11;
        for step in 0..600u32 {
            rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let pick = (rng >> 16) as usize;
            match (rng >> 8) % 4 {
                0 => {
                    let name = subscribable[pick % subscribable.len()];
                    apply_request(&mut state, &request(&[name], &[]), true);
                }
                1 => {
                    let name = subscribable[pick % subscribable.len()];
                    apply_request(&mut state, &request(&[], &[name]), true);
                }
                2 => {
                    store.delete(CDS, NAMES[pick % NAMES.len()]).unwrap();
                }
                _ => {
                    let any = Any {
                        type_url: CDS.into(),
                        value: ((rng >> 4) % 3).to_be_bytes().to_vec(),
                    };
                    store.set(NAMES[pick % NAMES.len()], any).unwrap();
                }
            }
            let changes = store.changes(CDS, seen);
            let mut full = state.clone();
            let (want_carried, want_removed) =
                diff_all(&mut full, &Faults::default(), CDS, &changes.table);
            let (carried, removed) = match state.seen_revision {
                Some(_) if state.must_answer.is_empty() => {
                    incremental_steps += 1;
                    let keys = changes.keys.expect("log reaches back");
                    diff_changed(&mut state, &changes.table, keys)
                }
                _ => diff_all(&mut state, &Faults::default(), CDS, &changes.table),
            };
            let context = format!("step {step}: {:?}", state.sub);
            assert_eq!(described(&carried), described(&want_carried), "{context}");
            assert_eq!(sorted(removed), sorted(want_removed), "{context}");
            for out in &carried {
                let entry = (out.wire.clone(), out.version().to_owned());
                state.sent.insert(out.key().to_owned(), entry.clone());
                full.sent.insert(out.key().to_owned(), entry);
            }
            assert_eq!(state.sent, full.sent, "{context}");
            assert_eq!(state.reported_absent, full.reported_absent, "{context}");
            seen = changes.revision;
            state.seen_revision = Some(seen);
        }
        assert!(
            incremental_steps > 300,
            "the walk must exercise the incremental path: {incremental_steps}"
        );
    }
}
