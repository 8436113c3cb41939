//! A cluster's endpoints as a `tower::discover::Discover`: the changes
//! between one [`EndpointSet`] and the next.
//!
//! ```text
//! snapshots ─► EndpointSet per cluster ─► watch ─► EndpointDiscover ─► Change::Remove(addr) / Change::Insert(addr, Endpoint) ─► balancer
//! ```
//!
//! Endpoints are keyed by address. An endpoint in both sets stays in the
//! balancer with its service (its connection) untouched; only its weight
//! is updated, in place. Removals of a set are yielded before its inserts.
//! A discovery reads the latest set only: sets published while it was not
//! polled are skipped, never replayed.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::WatchStream;
use tower::discover::Change;
use xdsfed_core::types::UpstreamTls;
use xdsfed_graph::SnapshotReader;

use crate::connector::{ConnectTarget, Connector};
use crate::endpoint::{Endpoint, EndpointAddress, EndpointStats};
use crate::endpoints::EndpointSet;
use crate::outlier::OutlierConfig;
use crate::policy::LbPolicy;
use crate::subchannel::{Connectivity, Dial, Subchannel};

/// What every endpoint of one balancer shares: its cluster, how to connect,
/// how to compare loads.
#[derive(Clone)]
pub(crate) struct ClusterContext {
    pub(crate) cluster: Arc<str>,
    pub(crate) authority: Arc<str>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) policy: LbPolicy,
    /// The cluster's outlier detection (gRFC A50), if any.
    pub(crate) outlier: Option<OutlierConfig>,
    pub(crate) connector: Arc<dyn Connector>,
    /// The cluster's TLS (gRFC A29), if any.
    pub(crate) tls: Option<Arc<UpstreamTls>>,
}

/// The counters of a cluster's current endpoints, shared with its outlier
/// detection.
pub(crate) type EndpointRegistry = Arc<Mutex<HashMap<EndpointAddress, Arc<EndpointStats>>>>;

/// The registry's map; a panic elsewhere cannot leave it torn (entries are
/// inserted and removed whole).
pub(crate) fn registry_map(
    registry: &EndpointRegistry,
) -> std::sync::MutexGuard<'_, HashMap<EndpointAddress, Arc<EndpointStats>>> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
}

/// The endpoints of one cluster as a stream of
/// `tower::discover::Change<EndpointAddress, Endpoint>`, following the
/// graph's snapshots. Give it to `tower::balance::p2c::Balance::new`.
///
/// ```no_run
/// # async fn run(graph: xdsfed_graph::ConfigGraph) {
/// use std::sync::Arc;
/// use tower::balance::p2c::Balance;
/// use xdsfed_tonic::{EndpointDiscover, LbPolicy, PlaintextConnector, Request};
///
/// let discover = EndpointDiscover::follow(
///     graph.reader(),
///     "backend",
///     "backend.example",
///     LbPolicy::RoundRobin,
///     Arc::new(PlaintextConnector),
/// );
/// let balancer: Balance<_, Request> = Balance::new(discover);
/// # }
/// ```
pub struct EndpointDiscover {
    context: ClusterContext,
    sets: WatchStream<Arc<EndpointSet>>,
    known: HashMap<EndpointAddress, Arc<EndpointStats>>,
    /// `known`, as outlier detection reads it.
    registry: EndpointRegistry,
    pending: VecDeque<Change<EndpointAddress, Endpoint>>,
    /// Where the connections of the endpoints added so far are.
    connectivity: Arc<Connectivity>,
    /// The task turning snapshots into sets, when this discovery follows a
    /// graph on its own; stopped when the discovery is dropped.
    follower: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EndpointDiscover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointDiscover")
            .field("cluster", &self.context.cluster)
            .field("known", &self.known.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl EndpointDiscover {
    pub(crate) fn new(context: ClusterContext, sets: watch::Receiver<Arc<EndpointSet>>) -> Self {
        Self {
            context,
            sets: WatchStream::new(sets),
            known: HashMap::new(),
            registry: EndpointRegistry::default(),
            pending: VecDeque::new(),
            connectivity: Arc::new(Connectivity::default()),
            follower: None,
        }
    }

    /// The counters of this cluster's endpoints, for outlier detection.
    pub(crate) fn registry(&self) -> EndpointRegistry {
        Arc::clone(&self.registry)
    }

    /// The connection states of this cluster's endpoints, which a balancer
    /// reads to fail requests at once when none can connect.
    pub(crate) fn connectivity(&self) -> Arc<Connectivity> {
        Arc::clone(&self.connectivity)
    }

    /// The endpoints of `cluster` in every snapshot `reader` sees, each
    /// reached through `connector`. A snapshot in which the cluster cannot
    /// be used empties the set (and the balancer waits for endpoints).
    /// Spawns a task on the current tokio runtime, stopped when the
    /// discovery is dropped.
    ///
    /// # Panics
    /// When called outside a tokio runtime, as `tokio::spawn` does.
    pub fn follow(
        mut reader: SnapshotReader,
        cluster: &str,
        authority: &str,
        policy: LbPolicy,
        connector: Arc<dyn Connector>,
    ) -> Self {
        let (tx, rx) = watch::channel(Arc::new(EndpointSet::default()));
        let name: Arc<str> = cluster.into();
        let follower = tokio::spawn({
            let name = Arc::clone(&name);
            async move {
                let mut next = reader.ready().await;
                while let Ok(snapshot) = next {
                    let set = EndpointSet::of(&snapshot, &name).unwrap_or_default();
                    if tx.send(Arc::new(set)).is_err() {
                        return;
                    }
                    next = reader.changed().await;
                }
            }
        });
        let context = ClusterContext {
            cluster: name,
            authority: authority.into(),
            connect_timeout: None,
            policy,
            outlier: None,
            connector,
            tls: None,
        };
        let mut discover = Self::new(context, rx);
        discover.follower = Some(follower);
        discover
    }

    /// Queues the changes from the endpoints known so far to `set`.
    fn apply(&mut self, set: &EndpointSet) {
        let gone: Vec<EndpointAddress> = self
            .known
            .keys()
            .filter(|a| !set.contains(a))
            .cloned()
            .collect();
        for address in gone {
            self.known.remove(&address);
            registry_map(&self.registry).remove(&address);
            self.pending.push_back(Change::Remove(address));
        }
        let level = self
            .known
            .values()
            .map(|s| s.level())
            .fold(f64::INFINITY, f64::min);
        let level = if level.is_finite() { level } else { 0.0 };
        for (address, weight) in set.iter() {
            if let Some(stats) = self.known.get(address) {
                stats.set_weight(weight);
                continue;
            }
            let target = ConnectTarget {
                address,
                cluster: &self.context.cluster,
                authority: &self.context.authority,
                connect_timeout: self.context.connect_timeout,
                tls: self.context.tls.as_deref(),
            };
            match self.context.connector.connect(&target) {
                Ok(first) => {
                    let stats = Arc::new(EndpointStats::new(weight, level));
                    self.known.insert(address.clone(), Arc::clone(&stats));
                    registry_map(&self.registry).insert(address.clone(), Arc::clone(&stats));
                    let subchannel = Subchannel::spawn(
                        self.dial(address),
                        first,
                        Arc::clone(&self.connectivity),
                    );
                    let endpoint =
                        Endpoint::new(address.clone(), subchannel, stats, self.context.policy);
                    self.pending
                        .push_back(Change::Insert(address.clone(), endpoint));
                }
                Err(error) => tracing::warn!(
                    cluster = %self.context.cluster,
                    endpoint = %address,
                    %error,
                    "cannot connect to endpoint; left out until the next update"
                ),
            }
        }
    }
}

impl EndpointDiscover {
    /// What `address`'s subchannel needs to reconnect.
    fn dial(&self, address: &EndpointAddress) -> Dial {
        Dial {
            connector: Arc::clone(&self.context.connector),
            address: address.clone(),
            cluster: Arc::clone(&self.context.cluster),
            authority: Arc::clone(&self.context.authority),
            connect_timeout: self.context.connect_timeout,
            tls: self.context.tls.clone(),
        }
    }
}

impl Drop for EndpointDiscover {
    fn drop(&mut self) {
        if let Some(task) = self.follower.take() {
            task.abort();
        }
    }
}

impl Stream for EndpointDiscover {
    type Item = Result<Change<EndpointAddress, Endpoint>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(change) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(change)));
            }
            match Pin::new(&mut this.sets).poll_next(cx) {
                Poll::Ready(Some(set)) => this.apply(&set),
                // The publisher is gone: the last set stays as it is.
                Poll::Ready(None) => return Poll::Pending,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests;
