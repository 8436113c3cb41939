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
//!   │                per cluster: choice-of-N ◄──── EndpointDiscover ◄── EndpointSet ◄──┘
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
//!   once, `UNAVAILABLE` naming the cluster and the latest attempt's
//!   error, when every one is failing ([`Unservable::Unreachable`]), or
//!   when outlier detection has ejected every one
//!   ([`Unservable::AllEjected`]). A call that fails with a transport
//!   error takes its endpoint out of the picks until it reconnects.
//! - **Balancing** ([`LbPolicy`]): a choice-of-N balancer per cluster (N
//!   random ready endpoints, the least loaded wins); ROUND_ROBIN compares
//!   two by requests sent per weight, LEAST_REQUEST compares
//!   `choice_count` (default 2) by requests in flight (gRFC A48).
//!   RING_HASH (gRFC A42) builds an XXH64 ring of the endpoints
//!   (`minimum_ring_size`/`maximum_ring_size`, by weight) and sends a
//!   request to the first ready endpoint walking it from the request's
//!   hash: the route's `hash_policy` (`header`, `filter_state`
//!   `io.grpc.channel_id`), random without one. Other policies are
//!   refused, naming the policy.
//! - **Outlier detection** (gRFC A50): a cluster's `outlier_detection`
//!   counts each endpoint's calls (OK or not, from the final gRPC status)
//!   and, every `interval`, ejects endpoints by success rate and failure
//!   percentage, at most `max_ejection_percent` of them, for
//!   `base_ejection_time` × the times ejected (capped by
//!   `max_ejection_time`). Ejected endpoints are not picked; a request
//!   whose every ready endpoint is ejected waits for one to return or
//!   connect (gRPC would fail it at once).
//! - **Timeouts** (gRFC A31): the route's `max_stream_duration`
//!   (`grpc_timeout_header_max`, else `max_stream_duration`, else the
//!   HttpConnectionManager's) bounds each call; the deadline is the
//!   earlier of the application's `grpc-timeout` and the route's, is sent
//!   on to the endpoint, and a call past it fails with
//!   `DEADLINE_EXCEEDED`. `grpc_timeout_header_offset` is not applied, as
//!   in gRPC.
//! - **Retries** (gRFC A44): the route's `retry_policy`, else its virtual
//!   host's: `retry_on` (cancelled, deadline-exceeded, internal,
//!   resource-exhausted, unavailable), `num_retries` (default 1, at most 5
//!   attempts), `retry_back_off` with gRPC's jittered exponential backoff,
//!   `grpc-retry-pushback-ms`. Each retry re-picks an endpoint of the same
//!   cluster. Only trailers-only answers and failures before any answer
//!   are retried, and only while the request body (kept up to 256 KiB) can
//!   be sent again. Throttling is per channel
//!   ([`ChannelBuilder::retry_throttling`], gRPC's `retryThrottling`).
//! - **TLS to endpoints** (gRFC A29): a cluster whose `transport_socket`
//!   is an `UpstreamTlsContext` is reached over TLS (rustls, ALPN `h2`)
//!   with the bootstrap's `file_watcher` `certificate_providers` it names:
//!   roots from `ca_certificate_file`, the client certificate for mTLS
//!   from `certificate_file`/`private_key_file`, all read again at each
//!   connection attempt. The server's chain is checked against those
//!   roots, not its hostname; `match_subject_alt_names` is applied to its
//!   leaf certificate instead. An instance the bootstrap lacks, or a file
//!   that cannot be read, fails the cluster's connections naming it.
//!   Other clusters are plaintext.
//! - **Failures stay per request**: a route to a missing or failed cluster,
//!   a refused policy, a cluster without healthy endpoints or a route that
//!   does not forward fails only the requests it takes, with
//!   `UNAVAILABLE` and a message naming the cluster or the route
//!   ([`Unservable`]). A control plane that goes away leaves the channel
//!   serving from the last snapshot.
//!
//! # Not done
//! - TLS certificate providers other than `file_watcher`,
//!   `match_typed_subject_alt_names`, `sni` and system roots (refused or
//!   ignored as the cluster docs say). A [`Connector`] of your own
//!   replaces the default one and can reach endpoints any way (a Unix
//!   socket, a proxy).
//! - Hedging, `per_try_timeout`, fault injection, `cluster_header`, cluster
//!   specifier plugins, LB policies other than the three above, and load
//!   reporting are not applied.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod attempts;
mod balancer;
mod builder;
mod call_policy;
mod channel;
mod choice;
mod connector;
mod discover;
mod ejection;
mod endpoint;
mod endpoints;
mod error;
mod follow;
mod hash_policy;
mod outcome;
mod outlier;
mod policy;
mod replay;
mod ring;
mod rng;
mod routing;
mod shared;
mod subchannel;
#[cfg(test)]
mod test_support;
mod throttle;
mod tls;

pub use builder::{ChannelBuilder, DEFAULT_READY_TIMEOUT};
pub use channel::{ResponseFuture, XdsChannel};
pub use connector::{ConnectTarget, Connector, PlaintextConnector, channel_service};
pub use discover::EndpointDiscover;
pub use endpoint::{Endpoint, EndpointAddress, EndpointService, Request, Response};
pub use endpoints::EndpointSet;
pub use error::{BoxError, ChannelError, Unservable};
pub use policy::LbPolicy;
pub use subchannel::Connecting;
pub use throttle::RetryThrottling;

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
