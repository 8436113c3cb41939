//! How an endpoint becomes a service: the [`Connector`] a channel uses for
//! every endpoint it adds.
//!
//! A connector begins one connection attempt at a time; the channel runs
//! each attempt with a deadline, retries failed ones with gRPC's connection
//! backoff, and picks an endpoint only once its connection is up (the
//! `subchannel` rules in the crate docs). A channel's default connector
//! reaches a cluster with an `UpstreamTlsContext` over TLS (gRFC A29, see
//! the crate docs) and the others through [`PlaintextConnector`], which
//! opens a tonic `Channel` over plaintext HTTP/2. A connector of your own
//! replaces both (the cluster's TLS is in [`ConnectTarget::tls`]), for
//! any other transport:
//!
//! ```
//! use tonic::transport::Endpoint;
//! use xdsfed_tonic::{ConnectTarget, Connecting, channel_service};
//!
//! // Any `Fn(&ConnectTarget) -> Result<Connecting, BoxError>` is a connector.
//! let connector = |target: &ConnectTarget<'_>| -> Result<Connecting, xdsfed_tonic::BoxError> {
//!     let endpoint = Endpoint::from_shared(format!("http://{}", target.address))?
//!         .tcp_nodelay(true);
//!     // …add TLS here: `.tls_config(…)` with an `https://` URI…
//!     Ok(Box::pin(async move { Ok(channel_service(endpoint.connect().await?)) }))
//! };
//! # let _ = connector;
//! ```

use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Uri};
use tower::ServiceExt;
use xdsfed_core::types::UpstreamTls;

use crate::endpoint::{EndpointAddress, EndpointService};
use crate::error::BoxError;
use crate::subchannel::Connecting;

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
    /// The cluster's TLS (its `UpstreamTlsContext`, gRFC A29), if it has
    /// one; `None` is plaintext.
    pub tls: Option<&'a UpstreamTls>,
}

/// Connects to one endpoint. Called when the endpoint joins a cluster's
/// balancer and again for every reconnection attempt; the service an
/// attempt yields is used until a call on it fails with a transport error.
pub trait Connector: Send + Sync + 'static {
    /// Begins an attempt to reach `target`: the future ends once the
    /// connection is up (a tonic `Endpoint::connect`, not `connect_lazy`:
    /// the balancer treats an endpoint as ready when it ends). An error
    /// here, when the endpoint first joins, leaves it out of the balancer
    /// until a later snapshot adds it again; an error of the future is a
    /// failed attempt, retried with backoff.
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<Connecting, BoxError>;
}

impl<F> Connector for F
where
    F: Fn(&ConnectTarget<'_>) -> Result<Connecting, BoxError> + Send + Sync + 'static,
{
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<Connecting, BoxError> {
        self(target)
    }
}

/// Plaintext HTTP/2 to every endpoint, through a tonic `Channel` connected
/// at once with the cluster's `connect_timeout`, sending the channel's
/// authority as `:authority` as gRPC does.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaintextConnector;

impl Connector for PlaintextConnector {
    fn connect(&self, target: &ConnectTarget<'_>) -> Result<Connecting, BoxError> {
        let mut endpoint = Endpoint::from_shared(format!("http://{}", target.address))?;
        if let Ok(origin) = format!("http://{}", target.authority).parse::<Uri>() {
            endpoint = endpoint.origin(origin);
        }
        if let Some(timeout) = target.connect_timeout {
            endpoint = endpoint.connect_timeout(timeout);
        }
        Ok(Box::pin(async move {
            Ok(channel_service(endpoint.connect().await?))
        }))
    }
}

/// A tonic `Channel` as an [`EndpointService`], for connectors of your
/// own.
pub fn channel_service(channel: Channel) -> EndpointService {
    EndpointService::new(channel.map_err(BoxError::from))
}
