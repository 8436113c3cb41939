//! Backends: tiny gRPC servers that endpoints in a scenario can point at.
//!
//! A backend serves the standard `grpc.health.v1.Health` service on
//! `127.0.0.1:0` and reports `SERVING` for the empty service name and for its
//! own name. That is enough for a gRPC xDS client to pick it through the
//! listener → route → cluster → endpoint chain and make a real call.

use std::net::SocketAddr;

use tokio::{net::TcpListener, sync::watch, task::JoinHandle};
use tokio_stream::wrappers::TcpListenerStream;
use tonic_health::ServingStatus;

/// A running health backend.
#[derive(Debug)]
pub struct Backend {
    name: String,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Backend {
    /// Starts a backend named `name` on an ephemeral loopback port.
    pub async fn start(name: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("", ServingStatus::Serving)
            .await;
        reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
        let (stop, mut stopped) = watch::channel(false);
        let backend_name = name.to_owned();
        let task = tokio::spawn(async move {
            // The reporter must live as long as the server, or the statuses vanish.
            let _reporter = reporter;
            let result = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(backend = %backend_name, error = %e, "backend stopped with an error");
            }
        });
        Ok(Self {
            name: name.to_owned(),
            addr,
            stop,
            task,
        })
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.task.abort();
    }
}
