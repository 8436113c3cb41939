//! One management server: a loopback listener serving ADS (or the
//! policy-distribution stream, see [`crate::policy`]) for one or more
//! authorities, with its store, faults, recording and ACK tracker.
//!
//! A [`Server`] outlives the runs of its listener: [`Server::restart`] stops
//! serving (every open stream ends with `UNAVAILABLE`), optionally drops the
//! resources, and listens again on the same port. The recording, the faults
//! and the tracker's history carry over, so a test can look at both sides of
//! the restart.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use crate::policy::stub::validating_policy_service_server::ValidatingPolicyServiceServer;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryServiceServer;
use envoy_types::pb::google::protobuf::Any;
use std::sync::atomic::AtomicU64;
use tokio::{
    net::TcpListener,
    sync::{Mutex, watch},
    task::JoinHandle,
};
use tokio_stream::{StreamExt, wrappers::TcpListenerStream};
use xdsfed_core::name::{authority_of, canonical_key};
use xdsfed_core::protocol::DEFAULT_MAX_MESSAGE_SIZE;

use crate::{
    ack::{AckReport, AckTracker, ClientInfo},
    ads::Ads,
    cdn::{CdnLog, CdnRequest},
    faults::Faults,
    policy::{PolicyPlane, PolicyService, policies_of},
    recording::Recorder,
    store::{Store, StoreError, StoredResource},
    subscription::key_of,
};

/// How long a stopping server waits for its connections to drain before it
/// drops them.
const DRAIN: Duration = Duration::from_secs(1);

/// What describes a server: its name, authorities and optional fixed port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// A name unique within the testbed, e.g. `cloud`.
    pub name: String,
    /// The authorities it serves, e.g. `cloud.example`.
    pub authorities: Vec<String>,
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Serve TLS instead of plaintext.
    pub tls: Option<ServerTls>,
    /// ADS, or the policy-distribution stream.
    pub protocol: Protocol,
}

/// What a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// xDS: `StreamAggregatedResources` and `DeltaAggregatedResources`.
    #[default]
    Ads,
    /// `kyverno.http.v1alpha1.ValidatingPolicyService` (see [`crate::policy`]).
    PolicyStream {
        /// A client not heard from (request or health check) for longer
        /// than this is flushed (checked every half of it).
        max_client_inactive: Duration,
    },
    /// REST-JSON polling: `POST /v3/discovery:{type}` over HTTP/1.1 (see
    /// [`crate::rest`]). Plaintext only.
    Rest,
    /// A static file host for HTTP CDN sources: HTTP/1.1 `GET`s of the
    /// store's resources (see [`crate::cdn`]), HTTPS with a [`ServerTls`].
    HttpCdn,
}

impl Protocol {
    /// The policy stream, flushing clients after 60 s without a health check.
    pub fn policy_stream() -> Self {
        Protocol::PolicyStream {
            max_client_inactive: Duration::from_secs(60),
        }
    }
}

/// TLS for a management server, PEM-encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// The server's certificate chain.
    pub cert_pem: String,
    /// The server's private key.
    pub key_pem: String,
    /// When set, clients must present a certificate signed by these CAs (mTLS).
    pub client_ca_pem: Option<String>,
}

impl std::fmt::Debug for ServerTls {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mtls", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerSpec {
    /// A server on an ephemeral port.
    pub fn new(
        name: impl Into<String>,
        authorities: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            authorities: authorities.into_iter().map(Into::into).collect(),
            port: 0,
            tls: None,
            protocol: Protocol::Ads,
        }
    }

    /// The same server, speaking `protocol`.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// The same server, serving TLS.
    pub fn with_tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }
}

/// Why a server operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listener could not bind.
    #[error("server {server:?}: cannot listen on {addr}: {source}")]
    Bind {
        /// The server's name.
        server: String,
        /// The address it tried.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS configuration was refused.
    #[error("server {server:?}: bad TLS configuration: {source}")]
    Tls {
        /// The server's name.
        server: String,
        /// What tonic said.
        source: tonic::transport::Error,
    },
    /// The TLS credentials of an HTTP CDN or REST-JSON server were refused.
    #[error("server {server:?}: bad TLS configuration: {why}")]
    CdnTls {
        /// The server's name.
        server: String,
        /// What rustls said.
        why: String,
    },
    /// The resource was refused by the store.
    #[error("server {server:?}: {source}")]
    Store {
        /// The server's name.
        server: String,
        /// What the store said.
        source: StoreError,
    },
    /// An xdstp name of an authority this server does not serve.
    #[error(
        "server {server:?} does not serve authority {authority:?} of resource {name:?} (it serves {served:?})"
    )]
    ForeignAuthority {
        /// The server's name.
        server: String,
        /// The resource's name.
        name: String,
        /// The authority in the name.
        authority: String,
        /// The authorities the server serves.
        served: Vec<String>,
    },
    /// The server's spec asks for something it cannot serve.
    #[error("server {server:?}: {what}")]
    Unsupported {
        /// The server's name.
        server: String,
        /// What, and what to do instead.
        what: String,
    },
    /// [`Server::stop`] ended a restart's down period: the server stays stopped.
    #[error("server {server:?} was stopped while it was down for a restart")]
    Stopped {
        /// The server's name.
        server: String,
    },
    /// `wait_acked` without a version for a resource the server does not hold.
    #[error("server {server:?} holds no {type_url} named {name:?}")]
    NoSuchResource {
        /// The server's name.
        server: String,
        /// The type URL.
        type_url: String,
        /// The name.
        name: String,
    },
}

/// The state that survives restarts, shared with the stream tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) tracker: AckTracker,
    pub(crate) recorder: Recorder,
    /// The policy control plane (used by policy-stream servers only).
    pub(crate) policies: PolicyPlane,
    /// The requests an HTTP CDN server answered.
    pub(crate) cdn_log: CdnLog,
    faults: watch::Sender<Arc<Faults>>,
}

impl Shared {
    /// The faults in force now.
    pub(crate) fn faults(&self) -> Arc<Faults> {
        self.faults.borrow().clone()
    }

    pub(crate) fn subscribe_faults(&self) -> watch::Receiver<Arc<Faults>> {
        self.faults.subscribe()
    }
}

#[derive(Debug)]
struct Run {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// A running management server: its address, store, faults, recording and
/// ACK tracking, and restarts on the same port.
#[derive(Debug)]
pub struct Server {
    spec: ServerSpec,
    addr: SocketAddr,
    shared: Arc<Shared>,
    run: Mutex<Option<Run>>,
    /// Counts calls of [`Server::stop`], so that a restart waiting out its
    /// down period sees a stop without holding up the caller.
    stops: watch::Sender<u64>,
}

impl Server {
    /// Binds `127.0.0.1:{spec.port}` and starts serving.
    pub async fn start(spec: ServerSpec) -> Result<Self, ServerError> {
        let shared = Arc::new(Shared {
            store: Store::new(),
            tracker: AckTracker::default(),
            recorder: Recorder::default(),
            policies: PolicyPlane::default(),
            cdn_log: CdnLog::default(),
            faults: watch::Sender::new(Arc::new(Faults::default())),
        });
        let wanted = SocketAddr::from(([127, 0, 0, 1], spec.port));
        let (addr, run) = serve(&spec, wanted, shared.clone()).await?;
        Ok(Self {
            spec,
            addr,
            shared,
            run: Mutex::new(Some(run)),
            stops: watch::Sender::new(0),
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The authorities it serves.
    pub fn authorities(&self) -> &[String] {
        &self.spec.authorities
    }

    /// `127.0.0.1:PORT`; the same after a restart.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for a tonic client.
    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` when serving
    /// TLS (certificates for it carry the IP address as a SAN).
    pub fn uri(&self) -> String {
        match self.spec.tls {
            Some(_) => format!("https://{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }

    /// The store: set, update and delete resources at run time. Prefer
    /// [`Server::set_resource`], which also checks the authority.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// What it speaks.
    pub fn protocol(&self) -> Protocol {
        self.spec.protocol
    }

    /// The policy control plane: its version, nonce, clients and barrier.
    /// Serves only when the server speaks [`Protocol::PolicyStream`].
    pub fn policies(&self) -> &PolicyPlane {
        &self.shared.policies
    }

    /// Reloads the policy plane from the store (a policy server only).
    fn sync_policies(&self) {
        if let Protocol::PolicyStream { .. } = self.spec.protocol {
            self.shared.policies.load(policies_of(&self.shared.store));
        }
    }

    /// The `GET`s an HTTP CDN server answered, oldest first (the last
    /// 10 000).
    pub fn cdn_requests(&self) -> Vec<CdnRequest> {
        self.shared.cdn_log.all()
    }

    /// The recording of every stream.
    pub fn recording(&self) -> &Recorder {
        &self.shared.recorder
    }

    /// The connected clients with their last request time, one per node id
    /// and connection (clients that share a node id are listed apart).
    pub fn clients(&self) -> Vec<ClientInfo> {
        self.shared.tracker.clients()
    }

    /// Creates or replaces a resource and pushes it to every subscribed
    /// stream. An xdstp name must be of one of the server's authorities.
    pub fn set_resource(
        &self,
        name: &str,
        resource: Any,
    ) -> Result<Arc<StoredResource>, ServerError> {
        if let Ok(key) = canonical_key(name)
            && let Some(authority) = authority_of(&key)
            && !self.spec.authorities.iter().any(|a| a == authority)
        {
            return Err(ServerError::ForeignAuthority {
                server: self.spec.name.clone(),
                name: name.to_owned(),
                authority: authority.to_owned(),
                served: self.spec.authorities.clone(),
            });
        }
        let stored = self
            .shared
            .store
            .set(name, resource)
            .map_err(|source| self.store_error(source))?;
        self.sync_policies();
        Ok(stored)
    }

    /// Encodes `message` and stores it as `name`.
    pub fn set_message<M: prost::Name>(
        &self,
        name: &str,
        message: &M,
    ) -> Result<Arc<StoredResource>, ServerError> {
        let resource = Any {
            type_url: M::type_url(),
            value: message.encode_to_vec(),
        };
        self.set_resource(name, resource)
    }

    /// Deletes a resource; subscribed delta streams get it in `removed_resources`.
    /// Returns whether it existed.
    pub fn delete_resource(&self, type_url: &str, name: &str) -> Result<bool, ServerError> {
        let existed = self
            .shared
            .store
            .delete(type_url, name)
            .map_err(|source| self.store_error(source))?;
        self.sync_policies();
        Ok(existed)
    }

    fn store_error(&self, source: StoreError) -> ServerError {
        ServerError::Store {
            server: self.spec.name.clone(),
            source,
        }
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        (*self.shared.faults()).clone()
    }

    /// Replaces the faults; open streams apply them from their next step.
    pub fn set_faults(&self, faults: Faults) {
        self.shared.faults.send_replace(Arc::new(faults));
    }

    /// Changes the faults in place.
    pub fn update_faults(&self, change: impl FnOnce(&mut Faults)) {
        self.shared.faults.send_modify(|f| change(Arc::make_mut(f)));
    }

    /// Waits until every connected client subscribed to the resource has
    /// ACKed or NACKed `version` (the stored version when `None`), or
    /// `timeout` passes. The report names who NACKed, with what error, and
    /// who is still pending.
    ///
    /// A policy-stream server tracks answers per snapshot, not per resource:
    /// for it this is the all-ACKed barrier of the current version, for any
    /// name and version (see [`PolicyPlane::wait_acked`]).
    pub async fn wait_acked(
        &self,
        type_url: &str,
        name: &str,
        version: Option<&str>,
        timeout: Duration,
    ) -> Result<AckReport, ServerError> {
        if let Protocol::PolicyStream { .. } = self.spec.protocol {
            return Ok(self.shared.policies.wait_acked(timeout).await.1);
        }
        let version = match version {
            Some(v) => v.to_owned(),
            None => self
                .shared
                .store
                .get(type_url, name)
                .map(|s| s.version.clone())
                .ok_or_else(|| ServerError::NoSuchResource {
                    server: self.spec.name.clone(),
                    type_url: type_url.to_owned(),
                    name: name.to_owned(),
                })?,
        };
        Ok(self
            .shared
            .tracker
            .wait(type_url, &key_of(name), &version, timeout)
            .await)
    }

    /// Stops serving: new connections are refused by the OS and every open
    /// stream ends with `UNAVAILABLE`. Idempotent. A restart in its down
    /// period ends at once with [`ServerError::Stopped`].
    pub async fn stop(&self) {
        self.stops.send_modify(|n| *n = n.wrapping_add(1));
        let Some(run) = self.run.lock().await.take() else {
            return;
        };
        stop_run(run).await;
    }

    /// Stops, drops the resources unless `keep_state`, waits `down_for`, and
    /// listens again on the same port. A [`Server::stop`] meanwhile ends
    /// the down period: the server stays stopped.
    pub async fn restart(&self, keep_state: bool, down_for: Duration) -> Result<(), ServerError> {
        let mut stops = self.stops.subscribe();
        let mut run = self.run.lock().await;
        if let Some(old) = run.take() {
            stop_run(old).await;
        }
        if !keep_state {
            self.shared.store.clear();
        }
        // A restarted control plane has a new nonce and no clients.
        self.shared.policies.restart(keep_state);
        tokio::select! {
            () = tokio::time::sleep(down_for) => {}
            _ = stops.changed() => {
                return Err(ServerError::Stopped {
                    server: self.spec.name.clone(),
                });
            }
        }
        let (_, new) = serve(&self.spec, self.addr, self.shared.clone()).await?;
        *run = Some(new);
        Ok(())
    }
}

async fn stop_run(run: Run) {
    run.stop.send_replace(true);
    let mut task = run.task;
    if tokio::time::timeout(DRAIN, &mut task).await.is_err() {
        task.abort();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(mut run) = self.run.try_lock()
            && let Some(run) = run.take()
        {
            run.stop.send_replace(true);
            run.task.abort();
        }
    }
}

async fn serve(
    spec: &ServerSpec,
    addr: SocketAddr,
    shared: Arc<Shared>,
) -> Result<(SocketAddr, Run), ServerError> {
    if spec.protocol == Protocol::Rest {
        return serve_rest(spec, addr, shared).await;
    }
    let name = spec.name.as_str();
    let bind_error = |source| ServerError::Bind {
        server: name.to_owned(),
        addr,
        source,
    };
    if let Protocol::HttpCdn = spec.protocol {
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let tls = spec
            .tls
            .as_ref()
            .map(crate::cdn::tls_acceptor)
            .transpose()
            .map_err(|why| ServerError::CdnTls {
                server: name.to_owned(),
                why,
            })?;
        let (stop, stopped) = watch::channel(false);
        let task = crate::cdn::serve(listener, shared, tls, stopped);
        return Ok((addr, Run { stop, task }));
    }
    let tls = spec.tls.as_ref();
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        let mut config = tonic::transport::ServerTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(&tls.cert_pem, &tls.key_pem),
        );
        if let Some(ca) = &tls.client_ca_pem {
            config = config.client_ca_root(tonic::transport::Certificate::from_pem(ca));
        }
        builder = builder
            .tls_config(config)
            .map_err(|source| ServerError::Tls {
                server: name.to_owned(),
                source,
            })?;
    }
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let (stop, mut stopped) = watch::channel(false);
    let router = add_protocol(&mut builder, &spec.protocol, &shared, &stop);
    let refusing = shared.clone();
    // Refusing a connection means closing it right after accept: the client
    // sees the connection fail before any HTTP/2 exchange.
    let incoming = TcpListenerStream::new(listener).filter_map(move |conn| match conn {
        Ok(stream) if refusing.faults().refuse_connections => {
            drop(stream);
            None
        }
        Ok(stream) => {
            // Small xDS messages must not wait for Nagle's algorithm.
            let _ = stream.set_nodelay(true);
            Some(Ok::<_, std::io::Error>(stream))
        }
        Err(e) => Some(Err(e)),
    });
    let server_name = name.to_owned();
    let task = tokio::spawn(async move {
        let result = router
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(server = %server_name, error = %e, "management server stopped with an error");
        }
    });
    Ok((addr, Run { stop, task }))
}

/// Serves REST-JSON on `addr` (see [`crate::rest`]): HTTP/1.1, over TLS
/// when the spec has a [`ServerTls`].
async fn serve_rest(
    spec: &ServerSpec,
    addr: SocketAddr,
    shared: Arc<Shared>,
) -> Result<(SocketAddr, Run), ServerError> {
    let tls = spec
        .tls
        .as_ref()
        .map(crate::cdn::tls_acceptor)
        .transpose()
        .map_err(|why| ServerError::CdnTls {
            server: spec.name.clone(),
            why,
        })?;
    let bind_error = |source| ServerError::Bind {
        server: spec.name.clone(),
        addr,
        source,
    };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let (stop, stopped) = watch::channel(false);
    let task = crate::rest::spawn(listener, shared, tls, stopped);
    Ok((addr, Run { stop, task }))
}

/// The service `protocol` speaks, on `builder`.
fn add_protocol(
    builder: &mut tonic::transport::Server,
    protocol: &Protocol,
    shared: &Arc<Shared>,
    stop: &watch::Sender<bool>,
) -> tonic::transport::server::Router {
    match protocol {
        // REST and HTTP CDN servers are served by `serve_rest` and
        // `crate::cdn`, never here; the arm only keeps the match whole.
        Protocol::Ads | Protocol::Rest | Protocol::HttpCdn => builder.add_service(
            // The client's limit both ways: tonic's own default (4 MiB
            // decoded) would refuse a client subscribing to 100 000 names in
            // one request.
            AggregatedDiscoveryServiceServer::new(Ads {
                shared: shared.clone(),
                shutdown: stop.subscribe(),
            })
            .max_decoding_message_size(DEFAULT_MAX_MESSAGE_SIZE)
            .max_encoding_message_size(DEFAULT_MAX_MESSAGE_SIZE),
        ),
        Protocol::PolicyStream {
            max_client_inactive,
        } => {
            flush_inactive(shared, stop.subscribe(), *max_client_inactive);
            builder.add_service(ValidatingPolicyServiceServer::new(PolicyService {
                shared: shared.clone(),
                shutdown: stop.subscribe(),
                streams: AtomicU64::new(0),
            }))
        }
    }
}

/// Flushes the policy clients silent for longer than `max_inactive`, every
/// half of it, until the run stops (§Health Checks).
fn flush_inactive(shared: &Arc<Shared>, mut stop: watch::Receiver<bool>, max_inactive: Duration) {
    let shared = Arc::clone(shared);
    let every = (max_inactive / 2).max(Duration::from_millis(10));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let flushed = shared
                .policies
                .flush_inactive(std::time::SystemTime::now(), max_inactive);
            if !flushed.is_empty() {
                tracing::info!(?flushed, "flushed inactive policy clients");
            }
        }
    });
}
