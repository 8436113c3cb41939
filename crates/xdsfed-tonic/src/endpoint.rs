//! One endpoint as the balancer sees it: its address, the service that
//! reaches it, and the counters its cluster's policy compares.
//!
//! The cluster's balancer draws a few ready endpoints and
//! sends to the one with the lowest [`Load`]. What the load is depends on
//! the cluster's [`LbPolicy`]:
//!
//! - ROUND_ROBIN: requests sent so far divided by the endpoint's weight.
//!   The lesser of two always catches up, so over time every endpoint gets
//!   its weighted share, spread evenly as round robin spreads it. An
//!   endpoint that joins starts level with the least-used one, not at zero,
//!   so it is not flooded while it catches up.
//! - LEAST_REQUEST: requests in flight (gRFC A48); a request counts until
//!   its response headers arrive or it fails.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use tower::Service;
use tower::load::Load;

use crate::error::BoxError;
use crate::policy::LbPolicy;
use crate::subchannel::{Connection, Subchannel};

/// The requests every service of this crate takes.
pub type Request = http::Request<tonic::body::Body>;
/// The responses every service of this crate returns.
pub type Response = http::Response<tonic::body::Body>;
/// A service that reaches one endpoint, as a [`Connector`](crate::Connector)
/// makes it.
pub type EndpointService = tower::util::BoxService<Request, Response, BoxError>;

/// An endpoint's address: host (an IP or a name) and port, as EDS gives
/// it. Endpoints are keyed by it: the same address in two snapshots is the
/// same endpoint, and keeps its connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointAddress {
    host: Arc<str>,
    port: u16,
}

impl EndpointAddress {
    /// An address from its host and port.
    pub fn new(host: impl Into<Arc<str>>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// The host: an IPv4 or IPv6 address, or a name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address as a plain [`SocketAddr`](std::net::SocketAddr) when its
    /// host is an IP address (as EDS endpoints for gRPC are); `None` for a
    /// host name, which a resolver must turn into addresses first.
    ///
    /// ```
    /// use xdsfed_tonic::EndpointAddress;
    ///
    /// let ip = EndpointAddress::new("10.0.0.7", 8080);
    /// assert_eq!(ip.socket_addr(), Some("10.0.0.7:8080".parse().unwrap()));
    /// let v6 = EndpointAddress::new("::1", 443);
    /// assert_eq!(v6.socket_addr(), Some("[::1]:443".parse().unwrap()));
    /// assert_eq!(EndpointAddress::new("backend.internal", 80).socket_addr(), None);
    /// ```
    pub fn socket_addr(&self) -> Option<std::net::SocketAddr> {
        let ip: std::net::IpAddr = self.host.parse().ok()?;
        Some(std::net::SocketAddr::new(ip, self.port))
    }
}

/// `host:port`, with an IPv6 host in brackets, as in a URI.
impl fmt::Display for EndpointAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The counters of one endpoint, shared between the [`Endpoint`] in the
/// balancer and the discovery that updates its weight in place.
#[derive(Debug)]
pub(crate) struct EndpointStats {
    picks: AtomicU64,
    in_flight: AtomicU64,
    /// The weight as `f64` bits: its share of the cluster, in (0, 1].
    weight: AtomicU64,
    /// Calls finished since outlier detection last looked (gRFC A50).
    successes: AtomicU64,
    failures: AtomicU64,
    /// Taken out of the picks by outlier detection.
    ejected: AtomicBool,
    /// The balancer's task, woken when the endpoint returns.
    returned: AtomicWaker,
}

impl EndpointStats {
    /// Fresh counters; `picks` starts at `level` × `weight`, level with the
    /// least-used endpoint of the cluster.
    pub(crate) fn new(weight: f64, level: f64) -> Self {
        let picks = (level * weight).max(0.0);
        Self {
            // Saturating float-to-int conversion: the level is a request count.
            picks: AtomicU64::new(picks as u64),
            in_flight: AtomicU64::new(0),
            weight: AtomicU64::new(weight.to_bits()),
            successes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            ejected: AtomicBool::new(false),
            returned: AtomicWaker::new(),
        }
    }

    /// Counts a finished call: OK is a success, anything else a failure.
    pub(crate) fn record_call(&self, ok: bool) {
        let counter = if ok { &self.successes } else { &self.failures };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The calls counted since the last take, as (successes, failures);
    /// the counters start over.
    pub(crate) fn take_calls(&self) -> (u64, u64) {
        (
            self.successes.swap(0, Ordering::Relaxed),
            self.failures.swap(0, Ordering::Relaxed),
        )
    }

    /// Ejects the endpoint from the picks, or returns it (waking the
    /// balancer, which may be waiting for it).
    pub(crate) fn set_ejected(&self, ejected: bool) {
        self.ejected.store(ejected, Ordering::Release);
        if !ejected {
            self.returned.wake();
        }
    }

    /// Whether outlier detection holds the endpoint out.
    pub(crate) fn is_ejected(&self) -> bool {
        self.ejected.load(Ordering::Acquire)
    }

    /// Whether outlier detection holds the endpoint out, registering to be
    /// woken when it returns.
    fn poll_ejected(&self, cx: &Context<'_>) -> bool {
        if !self.ejected.load(Ordering::Acquire) {
            return false;
        }
        self.returned.register(cx.waker());
        // Returned between the load and the registration: not ejected.
        self.ejected.load(Ordering::Acquire)
    }

    pub(crate) fn set_weight(&self, weight: f64) {
        self.weight.store(weight.to_bits(), Ordering::Relaxed);
    }

    pub(crate) fn weight(&self) -> f64 {
        f64::from_bits(self.weight.load(Ordering::Relaxed))
    }

    /// Requests sent per unit of weight: ROUND_ROBIN's load.
    pub(crate) fn level(&self) -> f64 {
        let weight = self.weight();
        if weight > 0.0 {
            self.picks.load(Ordering::Relaxed) as f64 / weight
        } else {
            f64::INFINITY
        }
    }

    fn in_flight(&self) -> f64 {
        self.in_flight.load(Ordering::Relaxed) as f64
    }
}

/// One endpoint in a cluster's balancer: its connection (kept up by its
/// subchannel), and its load.
pub struct Endpoint {
    address: EndpointAddress,
    connection: Option<Connection>,
    subchannel: Subchannel,
    stats: Arc<EndpointStats>,
    policy: LbPolicy,
}

impl Endpoint {
    pub(crate) fn new(
        address: EndpointAddress,
        subchannel: Subchannel,
        stats: Arc<EndpointStats>,
        policy: LbPolicy,
    ) -> Self {
        Self {
            address,
            connection: None,
            subchannel,
            stats,
            policy,
        }
    }

    /// Where the endpoint is.
    pub fn address(&self) -> &EndpointAddress {
        &self.address
    }

    /// Its share of the cluster's traffic, in (0, 1]: the locality's share
    /// of its priority times the endpoint's share of its locality.
    pub fn weight(&self) -> f64 {
        self.stats.weight()
    }

    /// Drops a connection that failed, and has its subchannel reconnect.
    fn drop_broken_connection(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.health.fail();
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("address", &self.address)
            .field("stats", &self.stats)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Load for Endpoint {
    type Metric = f64;

    fn load(&self) -> f64 {
        match self.policy {
            LbPolicy::RoundRobin => self.stats.level(),
            LbPolicy::LeastRequest { .. } => self.stats.in_flight(),
            // The ring picks by hash, not by load.
            LbPolicy::RingHash { .. } => 0.0,
        }
    }
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<EndpointStats>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Ready only while its connection is up: the balancer never picks an
/// endpoint that is connecting or failing, and an endpoint whose connection
/// fails is pending again until its subchannel reconnects (never an error,
/// which would take it out of the balancer for good).
impl Service<Request> for Endpoint {
    type Response = Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if self.stats.poll_ejected(cx) {
            return Poll::Pending;
        }
        loop {
            if let Some(connection) = &mut self.connection {
                if connection.health.is_broken() {
                    self.drop_broken_connection();
                    continue;
                }
                match connection.service.poll_ready(cx) {
                    Poll::Ready(Ok(())) => return Poll::Ready(Ok(())),
                    Poll::Ready(Err(_)) => {
                        self.drop_broken_connection();
                        continue;
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
            match self.subchannel.poll_connection(cx) {
                Poll::Ready(Some(connection)) => self.connection = Some(connection),
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let Some(connection) = &mut self.connection else {
            // tower calls only after poll_ready said ready, which needs a
            // connection; answer a misuse with an error, not a panic.
            return Box::pin(std::future::ready(Err(BoxError::from(
                "endpoint called before it was ready",
            ))));
        };
        self.stats.picks.fetch_add(1, Ordering::Relaxed);
        self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = InFlight(Arc::clone(&self.stats));
        let health = Arc::clone(&connection.health);
        let stats = Arc::clone(&self.stats);
        let response = connection.service.call(request);
        Box::pin(async move {
            let _guard = guard;
            let result = response.await;
            // The service's own errors are transport errors (a gRPC status
            // is a response): the connection is gone.
            if result.is_err() {
                health.fail();
                stats.record_call(false);
            }
            result.map(|response| crate::outcome::counted(response, stats))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(EndpointAddress::new("::1", 80).to_string(), "[::1]:80");
        assert_eq!(
            EndpointAddress::new("10.0.0.1", 80).to_string(),
            "10.0.0.1:80"
        );
    }

    #[test]
    fn a_new_endpoint_starts_level_with_the_least_used() {
        let stats = EndpointStats::new(0.5, 100.0);
        assert_eq!(stats.level(), 100.0);
    }
}
