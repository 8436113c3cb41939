//! [`XdsChannel`]: the `tower::Service` a generated tonic client sends
//! through.
//!
//! Each request is matched against the routing of the latest applied
//! snapshot (lock-free: one `ArcSwap` load), which names a cluster; the
//! cluster's balancer picks the endpoint. Until the first snapshot is
//! applied, requests wait for it, at most the channel's ready timeout, as a
//! gRPC channel holds calls while it is CONNECTING.
//!
//! The virtual host is chosen by the channel's data-plane authority (the
//! target's service name), as gRPC chooses it; a request whose URI carries
//! an authority of its own (a client built with `with_origin`) is matched
//! by that authority instead, as Envoy matches `:authority`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tower::Service;
use xdsfed_graph::Snapshot;

use crate::attempts;
use crate::balancer::ClusterBalancer;
use crate::call_policy::CallPolicy;
use crate::endpoint::Response;
use crate::error::{BoxError, Unservable, shown};
use crate::follow::{Routing, Target};
use crate::hash_policy::request_hash;
use crate::ring::RequestHash;
use crate::rng;
use crate::routing::RequestView;
use crate::throttle::RetryBucket;

/// A channel for one `xds:` target: routes each request by the target's
/// listener and balances it over the chosen cluster's endpoints. Cheap to
/// clone; every clone shares the routing and the connections. The xDS
/// graph and its task stop when the last clone is dropped.
///
/// Build one with [`channel`](crate::channel) or [`ChannelBuilder`](crate::ChannelBuilder),
/// then hand it to a generated client: `GreeterClient::new(channel)`.
#[derive(Clone)]
pub struct XdsChannel {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) target: Arc<str>,
    pub(crate) listener: Arc<str>,
    pub(crate) authority: Arc<str>,
    pub(crate) ready_timeout: Duration,
    pub(crate) routing: Arc<ArcSwapOption<Routing>>,
    /// The channel's id, which `filter_state` hash policies hash (gRFC A42).
    pub(crate) channel_id: u64,
    /// The channel's retry throttling (gRFC A6), when configured.
    pub(crate) retry_bucket: Option<Arc<RetryBucket>>,
    pub(crate) generation: watch::Receiver<u64>,
    pub(crate) follower: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

impl fmt::Debug for XdsChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XdsChannel")
            .field("target", &self.inner.target)
            .field("listener", &self.inner.listener)
            .field("authority", &self.inner.authority)
            .finish_non_exhaustive()
    }
}

impl XdsChannel {
    pub(crate) fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The target the channel was built for.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// The listener resource the target resolved to (gRFC A47).
    pub fn listener(&self) -> &str {
        &self.inner.listener
    }

    /// The data-plane authority: the target's service name, which picks
    /// the virtual host of requests that carry no authority of their own.
    pub fn authority(&self) -> &str {
        &self.inner.authority
    }

    /// The snapshot the channel routes by now, once one was applied: every
    /// request that starts after this returns is routed by it or a newer
    /// one.
    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.inner
            .routing
            .load()
            .as_ref()
            .map(|r| Arc::clone(&r.snapshot))
    }

    /// Waits until the first snapshot is applied, at most the ready
    /// timeout. Calls do this by themselves; this is for callers that want
    /// to know before the first call.
    pub async fn ready(&self) -> Result<(), tonic::Status> {
        self.inner.wait().await.map(drop).map_err(|e| e.to_status())
    }
}

impl Inner {
    async fn wait(&self) -> Result<Arc<Routing>, Unservable> {
        if let Some(routing) = self.routing.load_full() {
            return Ok(routing);
        }
        let mut generation = self.generation.clone();
        let waited = tokio::time::timeout(self.ready_timeout, generation.wait_for(|g| *g > 0));
        let gone = || Unservable::GraphGone {
            target: Arc::clone(&self.target),
        };
        match waited.await {
            Ok(Ok(_)) => self.routing.load_full().ok_or_else(gone),
            Ok(Err(_)) => Err(gone()),
            Err(_) => Err(Unservable::NotReady {
                target: Arc::clone(&self.target),
                listener: shown(&self.listener).into(),
                after: self.ready_timeout,
            }),
        }
    }

    /// The balancer `request` goes to under `routing` and its route's call
    /// policy, or why none; the request's hash is set when the route has a
    /// hash policy.
    fn pick<B>(
        &self,
        routing: &Routing,
        request: &mut http::Request<B>,
    ) -> Result<(Arc<ClusterBalancer>, Arc<CallPolicy>), Unservable> {
        let table = routing.table.as_ref().map_err(Clone::clone)?;
        let uri = request.uri();
        let view = RequestView {
            authority: uri.authority().map_or(&*self.authority, |a| a.as_str()),
            path: uri.path(),
            method: request.method().as_str(),
            headers: request.headers(),
        };
        let picked = table.pick(&view, rng::next_u64)?;
        let hash = (!picked.policy.hash_policy.is_empty()).then(|| {
            request_hash(
                &picked.policy.hash_policy,
                &view,
                self.channel_id,
                rng::next_u64,
            )
        });
        let target = match &**picked.target {
            Target::Cluster(balancer) => (Arc::clone(balancer), Arc::clone(picked.policy)),
            Target::Unavailable(why) => return Err(why.clone()),
        };
        if let Some(hash) = hash {
            request.extensions_mut().insert(RequestHash(hash));
        }
        Ok(target)
    }
}

/// The response future of [`XdsChannel`].
pub struct ResponseFuture {
    inner: Pin<Box<dyn Future<Output = Result<Response, BoxError>> + Send>>,
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

/// Routing never makes the channel unready: a request that cannot be
/// served fails by itself, with `UNAVAILABLE`. Errors are boxed
/// `tonic::Status`es, which generated clients return as they are.
impl<B> Service<http::Request<B>> for XdsChannel
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> ResponseFuture {
        let mut request = request.map(tonic::body::Body::new);
        let inner = Arc::clone(&self.inner);
        let picked = inner
            .routing
            .load()
            .as_ref()
            .map(|routing| inner.pick(routing, &mut request));
        let future = async move {
            let (balancer, policy) = match picked {
                Some(picked) => picked,
                None => {
                    let routing = inner.wait().await.map_err(Unservable::into_box_error)?;
                    inner.pick(&routing, &mut request)
                }
            }
            .map_err(Unservable::into_box_error)?;
            attempts::send(balancer, &policy, inner.retry_bucket.as_deref(), request).await
        };
        ResponseFuture {
            inner: Box::pin(future),
        }
    }
}
