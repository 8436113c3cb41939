//! An endpoint's connection, kept up in the background as gRPC keeps a
//! subchannel: connecting at once, reconnecting with backoff, and telling
//! its cluster whether it is ready.
//!
//! ```text
//!            connect ok                         the connection fails (a call's transport error)
//! Connecting ─────────► Ready ─► service handed to the Endpoint ─┐
//!     ▲  │ fails or times out                                    │
//!     │  ▼                                                       │
//!     └─ TransientFailure (sleep: gRPC connection backoff) ◄─────┘ (reconnects at once)
//! ```
//!
//! Rules (gRPC "Connection Backoff", A62's pick-first/subchannel states):
//! - Every attempt has a deadline: the cluster's `connect_timeout`, else
//!   20 s (gRPC's minimum connect timeout).
//! - A failed attempt waits 1 s, then 1.6× longer each time up to 120 s,
//!   each delay spread ±20 % so endpoints that failed together do not
//!   retry together. A connection that was ready and then failed is
//!   reconnected at once, and the backoff starts over.
//! - The balancer picks only endpoints whose connection is ready
//!   ([`Endpoint`](crate::Endpoint)'s `poll_ready` stays pending
//!   otherwise); a request waits while some endpoint of its cluster is
//!   still connecting, and fails at once when every one is in transient
//!   failure ([`Connectivity::all_failing`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use xdsfed_core::types::UpstreamTls;

use crate::connector::{ConnectTarget, Connector};
use crate::endpoint::{EndpointAddress, EndpointService};
use crate::error::{BoxError, cleaned};

/// How long one connection attempt may take when the cluster sets no
/// `connect_timeout` (gRPC's minimum connect timeout).
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// One connection attempt under way: the transport's handshake, ending in
/// a service that reaches the endpoint.
pub type Connecting = Pin<Box<dyn Future<Output = Result<EndpointService, BoxError>> + Send>>;

/// Where an endpoint's connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Ready,
    TransientFailure,
    /// The endpoint left its cluster; counted nowhere.
    Gone,
}

/// How many endpoints of one cluster are in each phase, and a signal when
/// that changes.
#[derive(Debug, Default)]
pub(crate) struct Connectivity {
    connecting: AtomicUsize,
    ready: AtomicUsize,
    failing: AtomicUsize,
    changed: Notify,
    /// Why the latest failed attempt of any endpoint failed, for the
    /// message of calls failed while every endpoint is failing.
    last_error: Mutex<Option<Arc<str>>>,
    /// How many endpoints outlier detection holds out, when it holds out
    /// every one of them; 0 otherwise.
    all_ejected: AtomicUsize,
}

impl Connectivity {
    /// Every endpoint has failed its last attempt and none is connecting or
    /// ready: a request can only fail (gRPC fails a call at once when all
    /// subchannels are in TRANSIENT_FAILURE).
    pub(crate) fn all_failing(&self) -> bool {
        self.failing.load(Ordering::Acquire) > 0
            && self.ready.load(Ordering::Acquire) == 0
            && self.connecting.load(Ordering::Acquire) == 0
    }

    /// Outlier detection's verdict after an interval: `ejected` of the
    /// cluster's `endpoints` are held out. Wakes waiting calls when every
    /// endpoint becomes ejected, or stops being.
    pub(crate) fn set_ejected(&self, ejected: usize, endpoints: usize) {
        let all = if endpoints > 0 && ejected == endpoints {
            ejected
        } else {
            0
        };
        if self.all_ejected.swap(all, Ordering::AcqRel) != all {
            self.changed.notify_waiters();
        }
    }

    /// How many endpoints are ejected when outlier detection holds out
    /// every one; `None` while any endpoint may be picked.
    pub(crate) fn all_ejected(&self) -> Option<usize> {
        Some(self.all_ejected.load(Ordering::Acquire)).filter(|n| *n > 0)
    }

    /// Why the latest failed connection attempt failed, if one did.
    pub(crate) fn last_error(&self) -> Option<Arc<str>> {
        // A plain value replaced whole: a panic cannot leave it torn.
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn record_error(&self, why: &str) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(cleaned(why).into());
    }

    /// How many endpoints are in transient failure.
    pub(crate) fn failing(&self) -> usize {
        self.failing.load(Ordering::Acquire)
    }

    /// Resolves at the next change of any endpoint's phase. Create it
    /// before reading the counts, so that no change is missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn counter(&self, phase: Phase) -> Option<&AtomicUsize> {
        match phase {
            Phase::Connecting => Some(&self.connecting),
            Phase::Ready => Some(&self.ready),
            Phase::TransientFailure => Some(&self.failing),
            Phase::Gone => None,
        }
    }
}

/// One endpoint's phase, kept in its cluster's counts.
#[derive(Debug)]
struct PhaseCell {
    phase: Mutex<Phase>,
    cluster: Arc<Connectivity>,
}

impl PhaseCell {
    fn new(cluster: Arc<Connectivity>) -> Self {
        cluster.connecting.fetch_add(1, Ordering::AcqRel);
        cluster.changed.notify_waiters();
        Self {
            phase: Mutex::new(Phase::Connecting),
            cluster,
        }
    }

    /// Moves to `next`; once `Gone`, stays there.
    fn set(&self, next: Phase) {
        // The phase is a plain value: a panic cannot leave it torn.
        let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        if *phase == next || *phase == Phase::Gone {
            return;
        }
        if let Some(old) = self.cluster.counter(*phase) {
            old.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(new) = self.cluster.counter(next) {
            new.fetch_add(1, Ordering::AcqRel);
        }
        *phase = next;
        drop(phase);
        self.cluster.changed.notify_waiters();
    }
}

/// A live connection as the endpoint holds it: the service, and its health,
/// which a failed call marks.
pub(crate) struct Connection {
    pub(crate) service: EndpointService,
    pub(crate) health: Arc<ConnectionHealth>,
}

/// Whether a connection has failed, shared by its endpoint, the calls on it
/// and its subchannel's task.
#[derive(Debug)]
pub(crate) struct ConnectionHealth {
    broken: AtomicBool,
    subchannel: Arc<Notify>,
}

impl ConnectionHealth {
    /// The connection failed: its subchannel reconnects.
    pub(crate) fn fail(&self) {
        self.broken.store(true, Ordering::Release);
        self.subchannel.notify_one();
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }
}

/// The background half of an endpoint: connects, hands each new connection
/// over, and reconnects when told the last one failed. Dropping it stops
/// the task and takes the endpoint out of its cluster's counts.
pub(crate) struct Subchannel {
    connections: mpsc::Receiver<Connection>,
    phase: Arc<PhaseCell>,
    task: JoinHandle<()>,
}

/// What the task needs to make attempts after the first.
pub(crate) struct Dial {
    pub(crate) connector: Arc<dyn Connector>,
    pub(crate) address: EndpointAddress,
    pub(crate) cluster: Arc<str>,
    pub(crate) authority: Arc<str>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) tls: Option<Arc<UpstreamTls>>,
}

impl Dial {
    fn attempt(&self) -> Result<Connecting, BoxError> {
        self.connector.connect(&ConnectTarget {
            address: &self.address,
            cluster: &self.cluster,
            authority: &self.authority,
            connect_timeout: self.connect_timeout,
            tls: self.tls.as_deref(),
        })
    }

    fn deadline(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }
}

impl Subchannel {
    /// Starts keeping `dial`'s endpoint connected, `first` being the
    /// attempt already begun. Spawns a task on the current runtime.
    pub(crate) fn spawn(dial: Dial, first: Connecting, cluster: Arc<Connectivity>) -> Self {
        let (tx, connections) = mpsc::channel(1);
        let failed = Arc::new(Notify::new());
        let phase = Arc::new(PhaseCell::new(cluster));
        let task = tokio::spawn(keep_connected(dial, first, tx, failed, Arc::clone(&phase)));
        Self {
            connections,
            phase,
            task,
        }
    }

    /// The next connection the task made, if one is waiting.
    pub(crate) fn poll_connection(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Connection>> {
        self.connections.poll_recv(cx)
    }
}

impl Drop for Subchannel {
    fn drop(&mut self) {
        self.task.abort();
        self.phase.set(Phase::Gone);
    }
}

/// The task: attempts with deadlines and backoff until a connection is
/// made, hands it over, waits for it to fail, and starts again.
async fn keep_connected(
    dial: Dial,
    first: Connecting,
    tx: mpsc::Sender<Connection>,
    failed: Arc<Notify>,
    phase: Arc<PhaseCell>,
) {
    let mut attempt = Some(first);
    let mut failures: u32 = 0;
    loop {
        phase.set(Phase::Connecting);
        let connecting = match attempt.take().map_or_else(|| dial.attempt(), Ok) {
            Ok(connecting) => connecting,
            Err(error) => Box::pin(std::future::ready(Err(error))),
        };
        match tokio::time::timeout(dial.deadline(), connecting).await {
            Ok(Ok(service)) => {
                failures = 0;
                let health = Arc::new(ConnectionHealth {
                    broken: AtomicBool::new(false),
                    subchannel: Arc::clone(&failed),
                });
                phase.set(Phase::Ready);
                let connection = Connection {
                    service,
                    health: Arc::clone(&health),
                };
                if tx.send(connection).await.is_err() {
                    return;
                }
                // Only a failure of this connection counts; a late report
                // about an older one is ignored.
                while !health.is_broken() {
                    failed.notified().await;
                }
                tracing::debug!(endpoint = %dial.address, "connection to endpoint failed; reconnecting");
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no connection within {:?}", dial.deadline()),
                };
                // Before the phase changes, so that a call failed by this
                // change reads this reason.
                phase.cluster.record_error(&why);
                if failures == 0 {
                    tracing::warn!(cluster = %dial.cluster, endpoint = %dial.address, error = %why, "cannot connect to endpoint; retrying with backoff");
                }
                phase.set(Phase::TransientFailure);
                tokio::time::sleep(backoff_delay(failures, crate::rng::next_u64())).await;
                failures = failures.saturating_add(1);
            }
        }
    }
}

/// gRPC's connection backoff after `failures` failed attempts: 1 s × 1.6ⁿ,
/// capped at 120 s, spread ±20 % by `random`.
pub(crate) fn backoff_delay(failures: u32, random: u64) -> Duration {
    const INITIAL: f64 = 1.0;
    const MULTIPLIER: f64 = 1.6;
    const MAX: f64 = 120.0;
    const JITTER: f64 = 0.2;
    let base = (INITIAL * MULTIPLIER.powi(failures.min(64) as i32)).min(MAX);
    // `random` as a fraction in [0, 1), then a factor in [0.8, 1.2).
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    Duration::from_secs_f64(base * (1.0 - JITTER + 2.0 * JITTER * unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gRPC Connection Backoff: 1 s, 1.6× each time, capped at 120 s,
    /// every delay within ±20 %.
    #[test]
    fn backoff_grows_by_1_6_to_120_s_within_twenty_percent() {
        let low = |n| backoff_delay(n, 0).as_secs_f64();
        let high = |n| backoff_delay(n, u64::MAX).as_secs_f64();
        assert!((low(0) - 0.8).abs() < 1e-9, "{}", low(0));
        assert!((high(0) - 1.2).abs() < 1e-6, "{}", high(0));
        assert!((low(1) - 1.6 * 0.8).abs() < 1e-9);
        assert!((low(40) - 120.0 * 0.8).abs() < 1e-6);
        assert!(high(u32::MAX) <= 120.0 * 1.2 + 1e-6);
    }

    /// A cluster is failing as a whole only when no endpoint is ready or
    /// still connecting; an endpoint that leaves is counted nowhere.
    #[tokio::test]
    async fn cluster_fails_only_when_every_endpoint_is_in_transient_failure() {
        let cluster = Arc::new(Connectivity::default());
        let a = PhaseCell::new(Arc::clone(&cluster));
        let b = PhaseCell::new(Arc::clone(&cluster));
        assert!(!cluster.all_failing(), "both connecting");
        a.set(Phase::TransientFailure);
        assert!(!cluster.all_failing(), "b is still connecting");
        b.set(Phase::Ready);
        assert!(!cluster.all_failing());
        b.set(Phase::TransientFailure);
        assert!(cluster.all_failing());
        a.set(Phase::Gone);
        a.set(Phase::Ready);
        assert_eq!(
            cluster.failing(),
            1,
            "a left: its later phases count nowhere"
        );
    }
}
