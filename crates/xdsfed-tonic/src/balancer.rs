//! One cluster's balancer: a choice-of-N balancer ([`ChoiceBalance`]: N
//! candidates, the least loaded wins) over the cluster's
//! [`EndpointDiscover`], shared by every request to the cluster.
//!
//! The balancer sits behind an async mutex rather than a `Buffer` task: a
//! request takes the lock, polls the balancer ready (which first applies
//! every pending endpoint change), dispatches, and releases the lock before
//! awaiting its response. So the request that follows a published endpoint
//! change sees the change, with no queue hop per request; requests to one
//! cluster take turns only for the pick itself.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::{Mutex, watch};
use tower::Service;

use crate::choice::{ChoiceBalance, Picker};
use crate::discover::{ClusterContext, EndpointDiscover};
use crate::endpoint::{Request, Response};
use crate::endpoints::EndpointSet;
use crate::error::{BoxError, Unservable, shown};
use crate::policy::LbPolicy;
use crate::ring::RequestHash;
use crate::subchannel::Connectivity;

/// The balancer of one cluster.
pub(crate) struct ClusterBalancer {
    /// The cluster's name as messages show it.
    shown_name: Arc<str>,
    /// The set the discovery follows, read to fail fast when it is empty.
    endpoints: watch::Receiver<Arc<EndpointSet>>,
    /// Where the endpoints' connections are, read to fail fast when none
    /// can connect.
    connectivity: Arc<Connectivity>,
    balance: Mutex<ChoiceBalance>,
    /// The cluster's outlier detection task, if it has one.
    outlier: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for ClusterBalancer {
    fn drop(&mut self) {
        if let Some(task) = &self.outlier {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ClusterBalancer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBalancer")
            .field("cluster", &self.shown_name)
            .field("endpoints", &self.endpoints.borrow().len())
            .finish_non_exhaustive()
    }
}

impl ClusterBalancer {
    pub(crate) fn new(
        context: ClusterContext,
        endpoints: watch::Receiver<Arc<EndpointSet>>,
    ) -> Self {
        let shown_name = shown(&context.cluster).into();
        let picker = match context.policy {
            LbPolicy::LeastRequest { choice_count } => Picker::LeastLoaded {
                choices: usize::try_from(choice_count).unwrap_or(usize::MAX),
            },
            LbPolicy::RoundRobin => Picker::LeastLoaded { choices: 2 },
            LbPolicy::RingHash {
                min_ring_size,
                max_ring_size,
            } => Picker::ring(min_ring_size, max_ring_size),
        };
        let outlier = context.outlier;
        let cluster = std::sync::Arc::clone(&context.cluster);
        let discover = EndpointDiscover::new(context, endpoints.clone());
        let outlier = outlier.map(|config| {
            crate::ejection::spawn(
                config,
                cluster,
                discover.registry(),
                discover.connectivity(),
            )
        });
        Self {
            shown_name,
            endpoints,
            connectivity: discover.connectivity(),
            balance: Mutex::new(ChoiceBalance::new(discover, picker)),
            outlier,
        }
    }

    /// Sends `request` to the endpoint the balancer picks among those whose
    /// connection is ready. While some endpoint is still connecting the
    /// request waits; a cluster with no usable endpoint, or whose every
    /// endpoint is failing to connect, fails it at once (UNAVAILABLE)
    /// instead of holding it.
    pub(crate) async fn send(&self, request: Request) -> Result<Response, BoxError> {
        if self.endpoints.borrow().is_empty() {
            return Err(Unservable::NoEndpoints(Arc::clone(&self.shown_name)).into_box_error());
        }
        let response = {
            let mut balance = self.balance.lock().await;
            balance.set_request_hash(request.extensions().get::<RequestHash>().map(|h| h.0));
            self.ready(&mut balance).await?;
            balance.call(request)
        };
        response.await
    }

    /// Waits until the balancer has a ready endpoint, or fails when every
    /// endpoint is in transient failure or ejected by outlier detection.
    async fn ready(&self, balance: &mut ChoiceBalance) -> Result<(), BoxError> {
        loop {
            let changed = self.connectivity.changed();
            tokio::pin!(changed);
            // Registers for the next change before reading the counts.
            changed.as_mut().enable();
            if let Some(unservable) = self.unservable() {
                // One more look: an endpoint that just came up wins.
                if let Poll::Ready(ready) = poll_fn(|cx| Poll::Ready(balance.poll_ready(cx))).await
                {
                    return ready;
                }
                return Err(unservable.into_box_error());
            }
            tokio::select! {
                biased;
                ready = poll_fn(|cx| balance.poll_ready(cx)) => return ready,
                () = &mut changed => {}
            }
        }
    }

    /// Why no call can be sent now: every endpoint failing to connect, or
    /// every one ejected (gRPC's picker then sees only endpoints in
    /// TRANSIENT_FAILURE, and fails the call).
    fn unservable(&self) -> Option<Unservable> {
        if self.connectivity.all_failing() {
            return Some(Unservable::Unreachable {
                cluster: Arc::clone(&self.shown_name),
                endpoints: self.connectivity.failing(),
                last_error: self.connectivity.last_error(),
            });
        }
        let endpoints = self.connectivity.all_ejected()?;
        Some(Unservable::AllEjected {
            cluster: Arc::clone(&self.shown_name),
            endpoints,
        })
    }
}
