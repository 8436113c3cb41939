//! `xds:///` targets for tonic: one line gives a channel that routes each
//! request by the target's xDS listener and balances it over the chosen
//! cluster's endpoints, following every update without a restart.
//!
//! ```no_run
//! # use xdsfed::proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let bootstrap = xdsfed_tonic::Bootstrap::from_env()?; // GRPC_XDS_BOOTSTRAP, as gRPC reads it
//! let mut client = GreeterClient::new(xdsfed_tonic::channel("xds:///greeter", bootstrap)?);
//! let reply = client.say_hello(HelloRequest { name: "tonic".into() }).await?;
//! # Ok(()) }
//! ```
//!
//! ```text
//!  bootstrap + xds:///svc ─► listener name (gRFC A47) ─► ConfigGraph ─► Arc<Snapshot> ─► follower task
//!                                                                                       │
//!   ┌──────────────────────────────── XdsChannel (tower::Service) ◄── routing ──────────┤
//!   │ request ─► virtual host (domain) ─► route (path, headers, fraction) ─► cluster    │
//!   │            (weighted clusters by weight)                                ▼         │
//!   │                  per cluster: p2c Balance ◄── EndpointDiscover ◄── EndpointSet ◄──┘
//!   │                                   ▼
//!   └──────────────────────── endpoint (tonic Channel, one per address) ─► backend
//! ```
//!
//! # What a channel does
//! - **Target** ([`ChannelBuilder`]): `xds:///svc`, `xds:svc` or
//!   `xds://authority/svc`, resolved to a listener name with the
//!   bootstrap's listener templates exactly as gRFC A47 says, so one
//!   bootstrap serves a grpc-go and a Rust service side by side.
//! - **Readiness**: a call made before the first snapshot waits for it, at
//!   most [`ChannelBuilder::ready_timeout`] (20 s by default), then fails
//!   with `UNAVAILABLE`.
//! - **Routing** (gRFC A28): the virtual host whose domains best match the
//!   authority (exact, then `*.suffix`, then `prefix.*`, then `*`), then
//!   its first route whose match accepts the request (path `prefix`,
//!   `path` or `safe_regex`, header matchers, `case_sensitive`,
//!   `runtime_fraction`), then one cluster or weighted clusters picked by
//!   weight.
//! - **Endpoints** ([`EndpointSet`], [`EndpointDiscover`]): HEALTHY and
//!   UNKNOWN endpoints of the lowest priority that has any, with locality
//!   and endpoint weights; aggregate clusters flattened in priority order
//!   (gRFC A37). An endpoint that stays across snapshots keeps its
//!   connection.
//! - **Connections** (gRPC subchannels): every endpoint connects as soon
//!   as its cluster is first used and reconnects by itself, each attempt
//!   with a deadline (the cluster's `connect_timeout`, else 20 s) and
//!   failed ones retried with gRPC's connection backoff (1 s × 1.6ⁿ up to
//!   120 s, ±20 %). Only endpoints whose connection is up are picked: a
//!   request waits while some endpoint is still connecting and fails at
//!   once, `UNAVAILABLE` naming the cluster, when every one is failing
//!   ([`Unservable::Unreachable`]). A call that fails with a transport
//!   error takes its endpoint out of the picks until it reconnects.
//! - **Balancing** ([`LbPolicy`]): tower's power-of-two-choices balancer
//!   per cluster; ROUND_ROBIN compares requests sent per weight,
//!   LEAST_REQUEST requests in flight (gRFC A48). Other policies are
//!   refused, naming the policy.
//! - **Failures stay per request**: a route to a missing or failed cluster,
//!   a refused policy, a cluster without healthy endpoints or a route that
//!   does not forward fails only the requests it takes, with
//!   `UNAVAILABLE` and a message naming the cluster or the route
//!   ([`Unservable`]). A control plane that goes away leaves the channel
//!   serving from the last snapshot.
//!
//! # Not done
//! - **TLS to endpoints** is not read from the cluster: the default
//!   [`PlaintextConnector`] speaks plaintext HTTP/2. A [`Connector`] of
//!   your own can reach endpoints any way (TLS, a Unix socket, a proxy).
//! - Route timeouts, retries, hedging, fault injection, `max_stream_duration`,
//!   `cluster_header`, cluster specifier plugins, ring hash and other LB
//!   policies, outlier detection and load reporting are not applied. A
//!   request that fails on an endpoint is not retried on another.
//! - LEAST_REQUEST compares two candidates whatever its `choice_count`
//!   (tower's balancer samples two).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod balancer;
mod builder;
mod channel;
mod connector;
mod discover;
mod endpoint;
mod endpoints;
mod error;
mod follow;
mod policy;
mod rng;
mod routing;
mod shared;
mod subchannel;
#[cfg(test)]
mod test_support;

pub use builder::{ChannelBuilder, DEFAULT_READY_TIMEOUT};
pub use channel::{ResponseFuture, XdsChannel};
pub use connector::{ConnectTarget, Connector, PlaintextConnector, channel_service};
pub use discover::EndpointDiscover;
pub use endpoint::{Endpoint, EndpointAddress, EndpointService, Request, Response};
pub use endpoints::EndpointSet;
pub use error::{BoxError, ChannelError, Unservable};
pub use policy::LbPolicy;
pub use subchannel::Connecting;

/// The bootstrap a channel's client reads (gRFC A27/A47), re-exported so
/// that a service needs no direct dependency on `xdsfed-core` to make one:
/// `Bootstrap::from_env()` reads `GRPC_XDS_BOOTSTRAP`, else
/// `GRPC_XDS_BOOTSTRAP_CONFIG`, as gRPC does.
pub use xdsfed_core::bootstrap::Bootstrap;

/// A channel for `target` (`xds:///svc`, `xds://authority/svc`) through
/// the process's xDS client for `bootstrap` (one per bootstrap, shared by
/// its channels), with the default settings; see [`ChannelBuilder`] for
/// the others.
///
/// # Errors
/// A target the bootstrap cannot resolve, or a client that cannot start.
///
/// # Panics
/// When called outside a tokio runtime.
pub fn channel(target: &str, bootstrap: Bootstrap) -> Result<XdsChannel, ChannelError> {
    ChannelBuilder::new(target, bootstrap).build()
}

/// A channel for `target` with the bootstrap gRPC reads: the file named by
/// `GRPC_XDS_BOOTSTRAP`, else the JSON in `GRPC_XDS_BOOTSTRAP_CONFIG`
/// (gRFC A27), through the process's one client for it.
///
/// ```no_run
/// # use xdsfed::proto::greeter::v1::{HelloRequest, greeter_client::GreeterClient};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let mut greeter = GreeterClient::new(xdsfed_tonic::channel_from_env("xds:///greeter")?);
/// let reply = greeter.say_hello(HelloRequest { name: "tonic".into() }).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// No bootstrap in the environment, or one that does not load; a target
/// it cannot resolve, or a client that cannot start.
///
/// # Panics
/// When called outside a tokio runtime.
pub fn channel_from_env(target: &str) -> Result<XdsChannel, ChannelError> {
    let bootstrap = Bootstrap::from_env()?;
    channel(target, bootstrap)
}
