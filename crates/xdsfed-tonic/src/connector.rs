//! How an endpoint becomes a service: the [`Connector`] a channel uses for
//! every endpoint it adds.
//!
//! The default, [`PlaintextConnector`], opens a lazy tonic `Channel` over
//! plaintext HTTP/2. TLS to endpoints is not read from the cluster (its
//! `transport_socket`); a connector of your own can add it, or any other
//! transport:
//!
//! ```
//! use tonic::transport::Endpoint;
//! use xdsfed_tonic::{ConnectTarget, EndpointService, channel_service};
//!
//! // Any `Fn(&ConnectTarget) -> Result<EndpointService, BoxError>` is a connector.
//! let connector = |target: &ConnectTarget<'_>| -> Result<EndpointService, xdsfed_tonic::BoxError> {
//!     let endpoint = Endpoint::from_shared(format!("http://{}", target.address))?
//!         .tcp_nodelay(true);
//!     // …add TLS here: `.tls_config(…)` with an `https://` URI…
//!     Ok(channel_service(endpoint.connect_lazy()))
//! };
//! # let _ = connector;
//! ```

use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Uri};
use tower::ServiceExt;

use crate::endpoint::{EndpointAddress, EndpointService};
use crate::error::BoxError;

/// What a connector is asked to reach.
#[non_exhaustive]
#[derive(Debug, Clone, Copy)]
pub struct ConnectTarget<'a> {
    /// The endpoint's address.
    pub address: &'a EndpointAddress,
    /// The cluster it belongs to.
    pub cluster: &'a str,
    /// The channel's data-plane authority (the target's service name),
    /// which gRPC sends as `:authority`.
    pub authority: &'a str,
    /// The cluster's `connect_timeout`, if it sets one.
    pub connect_timeout: Option<Duration>,
}

/// Makes the service that reaches one endpoint. Called once per endpoint
/// when it joins a cluster's balancer; the service lives until the
/// endpoint leaves, so it should connect lazily and reconnect by itself
/// (a tonic `Channel` from `connect_lazy` does both).
pub trait Connector: Send + Sync + 'static {
    /// The service for `target`. An error leaves the endpoint out of the
    /// balancer until a later snapshot adds it again.
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<EndpointService, BoxError>;
}

impl<F> Connector for F
where
    F: Fn(&ConnectTarget<'_>) -> Result<EndpointService, BoxError> + Send + Sync + 'static,
{
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<EndpointService, BoxError> {
        self(target)
    }
}

/// Plaintext HTTP/2 to every endpoint, through a lazily connected tonic
/// `Channel` with the cluster's `connect_timeout`, sending the channel's
/// authority as `:authority` as gRPC does.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaintextConnector;

impl Connector for PlaintextConnector {
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<EndpointService, BoxError> {
        let mut endpoint = Endpoint::from_shared(format!("http://{}", target.address))?;
        if let Ok(origin) = format!("http://{}", target.authority).parse::<Uri>() {
            endpoint = endpoint.origin(origin);
        }
        if let Some(timeout) = target.connect_timeout {
            endpoint = endpoint.connect_timeout(timeout);
        }
        Ok(channel_service(endpoint.connect_lazy()))
    }
}

/// A tonic `Channel` as an [`EndpointService`], for connectors of your
/// own.
pub fn channel_service(channel: Channel) -> EndpointService {
    EndpointService::new(channel.map_err(BoxError::from))
}
