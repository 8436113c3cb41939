//! How a [`PolicySession`](super::PolicySession) is set up.

use std::time::Duration;

use crate::backoff::DEFAULT_JITTER;
use crate::bootstrap::PolicyStreamTiming;
use crate::protocol::{AuthorityFilter, DEFAULT_HANDSHAKE_TIMEOUT};

/// The configuration of one policy session.
#[derive(Debug, Clone)]
pub struct PolicySessionConfig {
    /// `client_address` of every request and health check: the identity
    /// the control plane tracks ACKs and liveness by, so it must be unique
    /// among its clients.
    pub client_address: String,
    /// The authorities policies are keyed under:
    /// `xdstp://{authority}/kyverno.http.v1alpha1.ValidatingPolicy/{name}`.
    pub authorities: Vec<String>,
    /// Which names the server may deliver; old-style names (the bare policy
    /// name) only when it allows them.
    pub filter: AuthorityFilter,
    /// The poll and health-check intervals.
    pub timing: PolicyStreamTiming,
    /// How long a new stream may take to be accepted or answered.
    pub handshake_timeout: Duration,
    /// How long an established stream may wait for its first response. The
    /// protocol's server answers the first request at once, so silence is a
    /// failure (the default is the handshake timeout).
    pub first_response_timeout: Duration,
    /// The spread of every poll and health-check interval, as a fraction
    /// either way: each interval is drawn from `[1 − jitter, 1 + jitter]` ×
    /// the configured one (default 0.2), so that sidecars started together
    /// do not poll in lockstep.
    pub jitter: f32,
    /// The seed the session draws its jitter from. The session has no
    /// randomness of its own: its driver seeds it at random
    /// ([`with_seed`](Self::with_seed)); until then it is 0, and sessions
    /// left with the same seed draw the same intervals.
    pub jitter_seed: u64,
}

impl PolicySessionConfig {
    /// A session for `client_address` keying policies under `authorities`
    /// (old-style names too), with the default timers and jitter, seeded
    /// with 0 (see [`jitter_seed`](Self::jitter_seed)).
    pub fn new(
        client_address: impl Into<String>,
        authorities: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let authorities: Vec<String> = authorities.into_iter().map(Into::into).collect();
        let mut filter = AuthorityFilter::new().with_old_style(true);
        for authority in &authorities {
            filter = filter.with_authority(authority.clone());
        }
        PolicySessionConfig {
            client_address: client_address.into(),
            authorities,
            filter,
            timing: PolicyStreamTiming::default(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            first_response_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            jitter: DEFAULT_JITTER,
            jitter_seed: 0,
        }
    }

    /// The same, with intervals spread by `jitter` either way, drawn from
    /// `seed` (no spread at all with `0.0`).
    pub fn with_jitter(mut self, jitter: f32, seed: u64) -> Self {
        self.jitter = jitter;
        self.jitter_seed = seed;
        self
    }

    /// The same, drawing the jitter from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = seed;
        self
    }

    /// The same, with `timing`.
    pub fn with_timing(mut self, timing: PolicyStreamTiming) -> Self {
        self.timing = timing;
        self
    }

    /// The same, keying old-style (bare) names only if `allowed`.
    pub fn with_old_style(mut self, allowed: bool) -> Self {
        self.filter = self.filter.with_old_style(allowed);
        self
    }

    /// Whether bare policy names are keys too.
    pub fn old_style(&self) -> bool {
        // A name without an authority is old-style: the filter's own rule.
        self.filter.allows("policy")
    }
}
