//! The admin endpoint of a running client: CSDS and Prometheus metrics on
//! one port.
//!
//! ```text
//!                    ┌─ gRPC (HTTP/2) ─► envoy.service.status.v3.ClientStatusDiscoveryService
//!  127.0.0.1:PORT ───┤                    (StreamClientStatus, FetchClientStatus) ─► client.status()
//!                    └─ HTTP/1.1 GET /metrics ─► Prometheus text (gRFC A78 names)
//! ```
//!
//! One tonic server carries both: the CSDS service is turned into an axum
//! router, `/metrics` is added to it, and the server accepts HTTP/1.1 next to
//! HTTP/2, so `curl` and Prometheus reach the same port as `grpcurl`.

pub mod csds;
pub(crate) mod metrics;

use std::net::SocketAddr;

use crate::client::client::XdsClient;
use axum::http::header::CONTENT_TYPE;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

/// Listens on `addr` and serves CSDS and `/metrics` for `client` until the
/// returned task is aborted. `target` names the client the way gRPC names a
/// channel's xDS client (for example `xds:///my-service`): it is CSDS's
/// `client_scope` (gRFC A40) and the metrics' `grpc_target` (gRFC A78).
/// Returns the bound address, which differs from `addr` when its port is 0.
///
/// ```no_run
/// # async fn example(client: xdsfed::client::client::XdsClient) -> std::io::Result<()> {
/// let addr = "127.0.0.1:0".parse().expect("a literal address");
/// let (bound, task) = xdsfed::admin::serve(client, addr, "xds:///my-service".into()).await?;
/// println!("CSDS and /metrics on {bound}");
/// task.abort();
/// # Ok(())
/// # }
/// ```
pub async fn serve(
    client: XdsClient,
    addr: SocketAddr,
    target: String,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let metrics_client = client.clone();
    let router =
        tonic::service::Routes::new(csds::CsdsService::new(client, target.clone()).into_server())
            .into_axum_router()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let client = metrics_client.clone();
                    let target = target.clone();
                    async move {
                        (
                            [(CONTENT_TYPE, metrics::CONTENT_TYPE)],
                            metrics::render(&client.status(), &target),
                        )
                    }
                }),
            );
    let task = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .accept_http1(true)
            .add_routes(tonic::service::Routes::from(router))
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await;
        if let Err(e) = served {
            tracing::error!("admin endpoint on {bound} failed: {e}");
        }
    });
    Ok((bound, task))
}
