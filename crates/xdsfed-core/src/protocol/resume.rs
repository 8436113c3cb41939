//! Resuming from the state directory: a copy persisted by a previous run
//! of the client, sent by this same server, is claimed in the first delta
//! request of its type on each stream, so that an unchanged resource costs
//! the server nothing and the server's silence confirms the copy.
//!
//! "On reconnect the Incremental xDS client may tell the server of its
//! known resources to avoid resending them over the network by sending
//! them in initial_resource_versions." (xds-protocol-v3, "Incremental
//! xDS"). A client that restarts with its state directory reconnects in
//! that sense: it holds what the server sent before.
//!
//! ```text
//! resume(key, version, copy) ─► Durable::resumed (unconfirmed, not yet claimed)
//! first delta request of the type, key wanted ─► held + initial_resource_versions
//! stream accepted / first response ─► CoreEvent::Upsert of the copy, as if re-sent
//! ```
//!
//! The rules:
//! - Only a delta stream claims: a SotW request has no per-resource
//!   versions, so there is nothing to claim.
//! - Only a resource the stream asks for (subscribed, `*`, or a member of
//!   a subscribed glob) is claimed, and only in the first request of its
//!   type on a stream (`initial_resource_versions` "must be omitted"
//!   otherwise).
//! - A claimed copy is held, as a copy this session received would be:
//!   no does-not-exist timer runs for it (gRFC A57), and a reconnect's
//!   first request names it again.
//! - Once the server has accepted the stream that claimed it (or answered
//!   on it), the server has been told the version and did not replace it:
//!   the copy is confirmed, reported as an [`CoreEvent::Upsert`] of the
//!   persisted copy, which is what a delta reconnect's held copies get
//!   today (nothing re-sent, the stream's acceptance clears their errors)
//!   plus the status change a copy from disk needs. A server that sends a
//!   new version or removes the resource does so afterwards, as on any
//!   reconnect.
//! - Which server sent a persisted copy is the client's business: the
//!   session claims what it is handed ([`Session::resume`]).

use std::sync::Arc;

use super::event::{CoreEvent, ResourceKey};
use super::session::Session;
use crate::bootstrap::ApiVariant;
use crate::types::Decoded;
use crate::version::Version;

/// A copy from the state directory, not yet confirmed by this server.
#[derive(Debug, Clone)]
pub(crate) struct Resumed {
    /// The version the server sent it with.
    pub(crate) version: Version,
    /// The persisted copy, validated when it was loaded.
    pub(crate) resource: Decoded,
}

impl Session {
    /// This server sent `key` at `version` to a previous run of the client,
    /// whose state directory holds `resource`: the next delta stream claims
    /// it in its first request of the type (`initial_resource_versions`)
    /// if `key` is then asked for, and reports it as an
    /// [`Upsert`](CoreEvent::Upsert) once the server has accepted the
    /// stream. Ignored when the session already holds a copy of `key`, or
    /// when the current stream's first request of the type has left (it
    /// can no longer carry initial versions).
    pub fn resume(&mut self, key: ResourceKey, version: Version, resource: Decoded) {
        if version.is_empty() {
            return;
        }
        let state = self
            .states
            .get_or_insert_with(&key.type_url, super::type_state::TypeState::default);
        if state.durable.held.contains_key(&key.name) || state.stream.requested {
            return;
        }
        state
            .durable
            .resumed
            .insert(key.name, Resumed { version, resource });
    }

    /// The persisted copies of `type_url` that its first delta request on
    /// this stream claims: those asked for, not held already. They are
    /// held from now on (no does-not-exist timer) and await confirmation.
    pub(super) fn claim_resumed(&mut self, type_url: &Arc<str>) {
        if self.cfg.variant != ApiVariant::Delta {
            return;
        }
        let Some(state) = self.states.get_mut(type_url) else {
            return;
        };
        if state.durable.resumed.is_empty() {
            return;
        }
        // Held at another version: the server sent a copy since, and the
        // persisted one is stale.
        let held = &state.durable.held;
        state
            .durable
            .resumed
            .retain(|name, resumed| held.get(name).is_none_or(|v| *v == resumed.version));
        let globs = state.durable.globs > 0;
        let mut claimed = Vec::new();
        for (name, resumed) in &state.durable.resumed {
            if state.wants(name) {
                claimed.push((Arc::clone(name), resumed.version.clone()));
            }
        }
        for (name, version) in claimed {
            let durable = &mut state.durable;
            if !durable.held.contains_key(&name) {
                let globs = globs.then_some(&durable.subscribed);
                durable.held.insert(Arc::clone(&name), version, globs);
            }
            self.stream
                .claimed
                .push(ResourceKey::new(Arc::clone(type_url), name));
        }
        if self.stream.accepted || self.phase == super::Phase::Streaming {
            // Accepted before this type's first request was written.
            self.confirm_claimed();
        }
    }

    /// The server accepted (or answered) a stream whose first requests
    /// claimed persisted copies: each copy still held at the version
    /// claimed is confirmed, reported as if the server had sent it again.
    pub(super) fn confirm_claimed(&mut self) {
        for key in std::mem::take(&mut self.stream.claimed) {
            let Some(state) = self.states.get_mut(&key.type_url) else {
                continue;
            };
            let Some(resumed) = state.durable.resumed.remove(&key.name) else {
                continue;
            };
            let unchanged = state
                .durable
                .held
                .get(&key.name)
                .is_some_and(|held| *held == resumed.version);
            if unchanged && state.wants(&key.name) {
                self.events.push_back(CoreEvent::Upsert {
                    key,
                    resource: resumed.resource,
                    version: resumed.version,
                    ttl: None,
                });
            }
        }
    }
}
