//! [`PolicyConnection`]: the handle on one policy stream's driver task, as
//! the client's executor sees it (a [`SourceConnection`](crate::source::SourceConnection)).

use std::sync::Arc;

use super::driver::Driver;
use crate::source::SourceHandle;
use crate::transport::{EventSink, TransportOptions, endpoint};
use xdsfed_core::bootstrap::{ApiVariant, ServerConfig, ServerProtocol};
use xdsfed_core::policy_stream::PolicySessionConfig;
use xdsfed_core::protocol::AuthorityFilter;

/// Marks a [`SourceHandle`] as a policy stream's.
#[derive(Debug)]
pub(crate) enum PolicyKind {}

/// A handle on the policy stream to one control plane. Nothing connects
/// until the first subscription; the driver task ends on
/// [`SourceHandle::shutdown`] or when every handle is dropped.
pub(crate) type PolicyConnection = SourceHandle<PolicyKind>;

impl SourceHandle<PolicyKind> {
    /// Spawns the driver for `server` on the current tokio runtime (panics
    /// outside one, like `tokio::spawn`). Policies are keyed under
    /// `authorities`; `filter` says which names the server may deliver.
    /// The client address is the node id (it must be unique among the
    /// control plane's clients), or a random one without a node id.
    pub(crate) fn spawn(
        server: ServerConfig,
        filter: AuthorityFilter,
        authorities: Vec<String>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let cfg = session_config(&server, filter, authorities, &opts);
        // Full snapshots: the nearest of the two ADS variants.
        let (handle, commands, stats) = Self::new(ApiVariant::Sotw);
        let endpoint = endpoint(&server, &opts);
        let backoff = opts.backoff;
        let driver = Driver::new(server, cfg, sink, opts, endpoint, stats);
        tokio::spawn(crate::source::reconnect::run(driver, commands, backoff));
        handle
    }
}

/// How the session of `server` is set up. Its jitter is seeded at random,
/// so that sidecars started together do not poll in lockstep.
pub(super) fn session_config(
    server: &ServerConfig,
    filter: AuthorityFilter,
    authorities: Vec<String>,
    opts: &TransportOptions,
) -> PolicySessionConfig {
    let mut cfg = PolicySessionConfig::new(client_address(opts), authorities)
        .with_seed(crate::random::random_u64());
    cfg.filter = filter;
    if let ServerProtocol::PolicyStream(timing) = &server.protocol {
        cfg.timing = *timing;
    }
    cfg.handshake_timeout = opts.connect_timeout;
    cfg.first_response_timeout = opts.first_response_timeout.unwrap_or(opts.connect_timeout);
    cfg
}

/// The node id, or `xdsfed-` and a random number.
fn client_address(opts: &TransportOptions) -> String {
    if !opts.node.id.is_empty() {
        return opts.node.id.clone();
    }
    format!("xdsfed-{:016x}", crate::random::random_u64())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use xdsfed_core::policy_stream::wire::{
        PolicyDiscoveryResponse, ValidatingPolicy, ValidatingPolicySpec, Validation,
    };
    use xdsfed_core::policy_stream::{PolicySession, PolicyTransmit};
    use xdsfed_core::protocol::ResourceKey;
    use xdsfed_core::types::VALIDATING_POLICY_TYPE_URL;

    use super::*;

    /// The times of the first twenty polls and health checks of a session
    /// the client sets up, after its first snapshot.
    fn schedule(cfg: PolicySessionConfig) -> Vec<(&'static str, Duration)> {
        let t0 = Instant::now();
        let mut s = PolicySession::new(cfg);
        s.subscribe(ResourceKey::new(VALIDATING_POLICY_TYPE_URL, "a"));
        s.handle_connected(t0);
        s.handle_timeout(t0);
        let _ = std::iter::from_fn(|| s.poll_transmit(t0)).count();
        let policy = ValidatingPolicy {
            name: "a".into(),
            delete: false,
            spec: Some(ValidatingPolicySpec {
                validations: vec![Validation {
                    expression: "true".into(),
                    ..Default::default()
                }],
                evaluation_mode: "Envoy".into(),
                ..Default::default()
            }),
        };
        s.handle_response(
            t0,
            PolicyDiscoveryResponse {
                version_info: "v1".into(),
                policies: vec![policy],
                nonce: "n1".into(),
            },
        );
        let _ = std::iter::from_fn(|| s.poll_transmit(t0)).count();
        let mut fired = Vec::new();
        while fired.len() < 20 {
            let at = s.poll_timeout().unwrap();
            s.handle_timeout(at);
            for sent in std::iter::from_fn(|| s.poll_transmit(at)).collect::<Vec<_>>() {
                let kind = match sent {
                    PolicyTransmit::Discovery(_) => "poll",
                    PolicyTransmit::HealthCheck(_) => "health",
                };
                fired.push((kind, at - t0));
            }
        }
        fired
    }

    fn config() -> PolicySessionConfig {
        let server = ServerConfig::insecure("127.0.0.1:1");
        let filter = AuthorityFilter::new().with_old_style(true);
        session_config(&server, filter, Vec::new(), &TransportOptions::default())
    }

    /// Sidecars started together must not poll in lockstep: two sessions
    /// made alike, driven alike, poll at different times (the client seeds
    /// each session's jitter at random).
    #[test]
    fn sidecars_started_together_poll_at_different_times() {
        assert_ne!(schedule(config()), schedule(config()));
    }
}
