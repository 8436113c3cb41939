//! The policy-distribution stream (`kyverno.http.v1alpha1`): a second kind
//! of source beside ADS, for control planes that push `ValidatingPolicy`
//! snapshots to authorization sidecars
//! (the Kyverno Envoy plugin's xDS-like protocol (messages in
//! `proto/xdsfed/policy/v1/policy.proto`)).
//!
//! A bootstrap server entry with `"protocol": "policy_stream"` (Envoy style:
//! `api_type: POLICY_STREAM_GRPC`) gets a `PolicyConnection` (in xdsfed-client) instead of an
//! ADS stream. Its policies enter the cache as resources of type
//! [`ValidatingPolicyType`](crate::types::ValidatingPolicyType), named
//! `xdstp://{authority}/kyverno.http.v1alpha1.ValidatingPolicy/{name}` under
//! every authority the bootstrap maps to the server (and by their bare name
//! when it serves old-style names), so that watches, wildcard watches,
//! `#alt`, fallback, status and metrics work as for xDS types.
//!
//! ```text
//!  subscribe / unsubscribe / *  ──►┐                ┌─► poll_transmit ─► initial request, ACK, NACK,
//!  handle_connected             ──►│                │                   poll (last request again), HealthCheck
//!  handle_stream_accepted       ──►│ PolicySession  ├─► poll_event    ─► CoreEvent (Upsert / Removed /
//!  handle_response (snapshot)   ──►│                │                   DoesNotExist / Invalid / Stream*)
//!  handle_health_check          ──►│                ├─► poll_warning  ─► the driver's log (NACK, skipped policy)
//!  handle_stream_end / timeout  ──►┘                ├─► poll_close    ─► the driver ends the stream
//!                                                   └─► poll_timeout  ─► the driver's sleep
//! ```
//!
//! # The protocol's rules, and where this client does better
//!
//! - Each stream starts with the initial request (empty version and
//!   nonce), which any server answers with the full snapshot. It is sent
//!   at once, whatever the server does, and again at every poll until the
//!   server answers: a server that speaks only when spoken to, and missed
//!   it (still loading after a restart), is asked again one poll later
//!   instead of at the first-response deadline.
//! - A policy whose `evaluation_mode` is not one this client evaluates
//!   (`Envoy`, `HTTP`), or is unset, is not considered: the upstream
//!   plugin skips such a policy (a `ValidatingPolicy` is generic, and one
//!   for Kubernetes "doesn't apply"), and so does this client, unchecked,
//!   without failing the snapshot. Its watchers learn it does not exist,
//!   the status naming why (`Removed` with `NotConsidered`), and the log
//!   warns once per policy.
//! - The rest of a snapshot is validated whole: every policy passes, and
//!   the client ACKs with the snapshot's version and nonce; or one policy
//!   fails, and the client NACKs with its last good version, the
//!   snapshot's nonce and an `error_detail` naming the policy and the
//!   field, and keeps serving its last good policies. The NACK is not
//!   silent: every policy served from the stream gets an ambient error
//!   naming the snapshot's version and the reason (the bad policy its
//!   own error), and the log one warning per rejected version.
//! - An accepted snapshot is diffed with what the cache was told, key by
//!   key: `Upsert` for new and changed policies, `Removed` for policies
//!   gone or never in it (absence from a whole snapshot is the server's
//!   answer, not the does-not-exist timer: no reason for an `#alt`).
//! - The protocol's server pushes nothing (lazy notification): it answers
//!   a request whose nonce is stale with the full snapshot. The client
//!   therefore re-sends its last ACK or NACK every `poll_interval`: while
//!   the server's version is unchanged that is a duplicate ACK, which the
//!   server ignores; once a new version exists its nonce is stale, and the
//!   server answers with the new snapshot (docs/rules.md says why this and
//!   not another trigger).
//! - `HealthCheck` every `health_check_interval`, from the moment a stream
//!   opens; a failed health check is counted, not fatal.
//! - Every poll and health-check interval is jittered (±20 % by default,
//!   drawn from a seeded source the driver seeds at random), so that
//!   sidecars started together do not poll in lockstep.
//! - Where the spec's client exits on a stream error and relies on a
//!   restart, this one reconnects with the transport's backoff, and its
//!   held policies keep serving meanwhile (a stream that fails before any
//!   response reports `StreamFailed`, the federation's cue for gRFC A71
//!   fallback and A88 ambient errors).
//! - Deadlines: a stream must be accepted or answered within the
//!   handshake timeout, and answered within the first-response timeout
//!   (the server answers the initial request at once, so silence fails
//!   the stream).
//!
//! `docs/rules.md` ("Policy stream") maps each rule and each row of the
//! spec's edge-case table to its test.

mod config;
mod session;
mod snapshot;
pub mod wire;

pub use config::PolicySessionConfig;
pub use session::{PolicySession, PolicyStats, PolicyTransmit, PolicyWarning};
