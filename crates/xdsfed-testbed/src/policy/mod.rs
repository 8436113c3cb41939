//! A policy-distribution server (`kyverno.http.v1alpha1.ValidatingPolicyService`),
//! as the Kyverno Envoy plugin's xDS-like protocol (messages in
//! `proto/xdsfed/policy/v1/policy.proto`) describes it.
//!
//! A [`crate::Server`] started with [`crate::Protocol::PolicyStream`] serves
//! this instead of ADS. Its policies are the `ValidatingPolicy` resources of
//! its store (set with [`crate::Server::set_resource`], a scenario or the
//! control API, under any name: the policy's own `name` is what counts);
//! every change reloads the [`PolicyPlane`], which keeps the spec's
//! control-plane state (policies, current version and nonce,
//! pendingVersion, connections, health checks) and decides each request
//! by the spec's five cases. The server pushes nothing: lazy notification,
//! as specified.
//!
//! ```text
//!  Server::set_resource ─► Store ─► PolicyPlane::load (version = SHA-256, new nonce, new pendingVersion)
//!  client request ─► PolicyService ─► PolicyPlane::process ─► snapshot or nothing
//!  Server::wait_acked ─► PolicyPlane::wait_acked (every connected client ACKed or NACKed the snapshot version)
//!  HealthCheck, request ─► last active; every prune interval, clients silent too long are flushed
//! ```

mod plane;
mod service;
pub mod stub;
pub mod version;

pub use plane::{Call, CallKind, PolicyClient, PolicyPlane, Processed};
pub(crate) use service::PolicyService;

use std::collections::BTreeMap;

use prost::Message;
use xdsfed_core::policy_stream::wire::ValidatingPolicy;
use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

use crate::store::Store;

/// The policies of `store`, by their own name (or, for a policy without
/// one, the last segment of the name it was stored under). Bytes that do
/// not decode are left out.
pub(crate) fn policies_of(store: &Store) -> BTreeMap<String, ValidatingPolicy> {
    let (_, table) = store.table(VALIDATING_POLICY_TYPE_URL);
    let mut policies = BTreeMap::new();
    for stored in table.values() {
        let Ok(mut policy) = ValidatingPolicy::decode(stored.resource.value.as_slice()) else {
            tracing::warn!(name = %stored.name, "stored policy does not decode; not served");
            continue;
        };
        if policy.name.is_empty() {
            policy.name = stored
                .name
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
        }
        policies.insert(policy.name.clone(), policy);
    }
    policies
}
