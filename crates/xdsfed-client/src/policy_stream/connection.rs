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
pub enum PolicyKind {}

/// A handle on the policy stream to one control plane. Nothing connects
/// until the first subscription; the driver task ends on
/// [`SourceHandle::shutdown`] or when every handle is dropped.
pub type PolicyConnection = SourceHandle<PolicyKind>;

impl SourceHandle<PolicyKind> {
    /// Spawns the driver for `server` on the current tokio runtime (panics
    /// outside one, like `tokio::spawn`). Policies are keyed under
    /// `authorities`; `filter` says which names the server may deliver.
    /// The client address is the node id (it must be unique among the
    /// control plane's clients), or a random one without a node id.
    pub fn spawn(
        server: ServerConfig,
        filter: AuthorityFilter,
        authorities: Vec<String>,
        sink: Arc<dyn EventSink>,
        opts: TransportOptions,
    ) -> Self {
        let mut cfg = PolicySessionConfig::new(client_address(&opts), authorities)
            .with_seed(crate::random::random_u64());
        cfg.filter = filter;
        if let ServerProtocol::PolicyStream(timing) = &server.protocol {
            cfg.timing = *timing;
        }
        cfg.handshake_timeout = opts.connect_timeout;
        cfg.first_response_timeout = opts.first_response_timeout.unwrap_or(opts.connect_timeout);
        // Full snapshots: the nearest of the two ADS variants.
        let (handle, commands, stats) = Self::new(ApiVariant::Sotw);
        let endpoint = endpoint(&server, &opts);
        let driver = Driver::new(server, cfg, sink, opts, endpoint, commands, stats);
        tokio::spawn(driver.run());
        handle
    }
}

/// The node id, or `xdsfed-` and a random number.
fn client_address(opts: &TransportOptions) -> String {
    if !opts.node.id.is_empty() {
        return opts.node.id.clone();
    }
    format!("xdsfed-{:016x}", crate::random::random_u64())
}
