//! Shared pieces of the channel tests: greeter backends that report their
//! names, a testbed with a client bootstrapped against it, and builders of
//! the listener, routes, clusters and endpoints the tests serve.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed::proto::greeter::v1::greeter_server::{Greeter, GreeterServer};
use xdsfed::proto::greeter::v1::{HelloReply, HelloRequest};
use xdsfed_client::client::XdsClient;
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_graph::{ClusterEndpoints, GraphOptions, Snapshot};
use xdsfed_testbed::resources;
use xdsfed_tonic::{ChannelBuilder, XdsChannel};

/// Long enough for loopback on a loaded 2-core machine; tests never assert
/// on timings, they only bound how long a failure takes to show.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A `SayHello` for this name is held by the backend, unanswered, for
/// longer than any test waits: a request in flight for as long as the
/// test needs.
pub const HOLD: &str = "hold";

/// The method the greeter's `SayHello` is called by, for path routes.
pub const SAY_HELLO: &str = "/xdsfed.greeter.v1.Greeter/SayHello";
/// The method of `SayGoodbye`.
pub const SAY_GOODBYE: &str = "/xdsfed.greeter.v1.Greeter/SayGoodbye";

/// A greeter server on loopback that puts its name in every reply.
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// How a scripted backend answers `SayHello`: after `delay`, the first
/// `failures` calls fail with `code`; every call is counted in `calls`.
#[derive(Clone)]
pub struct Script {
    pub delay: Duration,
    pub failures: usize,
    pub code: tonic::Code,
    pub calls: Arc<AtomicUsize>,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            failures: 0,
            code: tonic::Code::Ok,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Script {
    /// How many `SayHello` calls the backend received.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

struct NamedGreeter(String, Script);

#[tonic::async_trait]
impl Greeter for NamedGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let script = &self.1;
        let call = script.calls.fetch_add(1, Ordering::SeqCst);
        if request.get_ref().name == HOLD {
            tokio::time::sleep(PATIENCE * 3).await;
        }
        if !script.delay.is_zero() {
            tokio::time::sleep(script.delay).await;
        }
        if call < script.failures {
            return Err(Status::new(script.code, format!("scripted failure {call}")));
        }
        Ok(Response::new(HelloReply {
            message: format!("hello {}", request.into_inner().name),
            backend: self.0.clone(),
        }))
    }

    async fn say_goodbye(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            message: format!("goodbye {}", request.into_inner().name),
            backend: self.0.clone(),
        }))
    }
}

impl Backend {
    pub async fn start(name: &str) -> Self {
        Self::scripted(name, Script::default()).await
    }

    /// A backend that answers `SayHello` as `script` says.
    pub async fn scripted(name: &str, script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let service = GreeterServer::new(NamedGreeter(name.to_owned(), script));
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            name: name.to_owned(),
            addr,
            stop: Some(stop),
            task,
        }
    }

    pub fn host_port(&self) -> (String, u32) {
        (self.addr.ip().to_string(), u32::from(self.addr.port()))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

pub async fn backends(names: &[&str]) -> Vec<Backend> {
    let mut out = Vec::new();
    for name in names {
        out.push(Backend::start(name).await);
    }
    out
}

/// Transport options with timers short enough for tests.
pub fn fast_transport() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        does_not_exist_timeout: Duration::from_millis(500),
        idle_grace: Duration::from_millis(200),
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            ..defaults.backoff
        },
        ..defaults
    }
}

/// A bootstrap whose default server is `default_uri`, with `authorities`
/// each served by its own server URI.
pub fn bootstrap(default_uri: &str, authorities: &[(&str, &str)]) -> Bootstrap {
    let server = |uri: &str| {
        format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#)
    };
    let authorities: Vec<String> = authorities
        .iter()
        .map(|(name, uri)| format!(r#""{name}": {{"xds_servers": [{}]}}"#, server(uri)))
        .collect();
    Bootstrap::from_json_str(&format!(
        r#"{{"xds_servers": [{}], "node": {{"id": "tonic-test"}}, "authorities": {{{}}}}}"#,
        server(default_uri),
        authorities.join(",")
    ))
    .unwrap()
}

/// A client for `bootstrap` with fast timers.
pub fn client(bootstrap: Bootstrap) -> XdsClient {
    XdsClient::builder(bootstrap)
        .transport_options(fast_transport())
        .build()
        .unwrap()
}

/// A channel for `target` through `client`, with a short warming timeout.
pub fn channel(target: &str, client: XdsClient) -> XdsChannel {
    ChannelBuilder::with_client(target, client)
        .graph_options(GraphOptions::default().with_warming_timeout(Duration::from_secs(2)))
        .ready_timeout(PATIENCE)
        .build()
        .unwrap()
}

/// Endpoints for `cluster` in one weighted locality (gRPC ignores a
/// locality without weight).
pub fn assignment(cluster: &str, backends: &[&Backend]) -> ClusterLoadAssignment {
    let hosts: Vec<(String, u32)> = backends.iter().map(|b| b.host_port()).collect();
    let addrs: Vec<(&str, u32)> = hosts.iter().map(|(h, p)| (h.as_str(), *p)).collect();
    let mut cla = resources::endpoints(cluster, &addrs);
    for locality in &mut cla.endpoints {
        locality.load_balancing_weight = Some(UInt32Value { value: 1 });
        locality.locality = Some(Locality {
            zone: "test-zone".into(),
            ..Default::default()
        });
    }
    cla
}

/// A route matching `path` with `action`.
pub fn route(name: &str, path: PathSpecifier, action: Action) -> Route {
    Route {
        name: name.into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(path),
            ..Default::default()
        }),
        action: Some(action),
        ..Default::default()
    }
}

/// An action forwarding to one cluster.
pub fn to_cluster(cluster: &str) -> Action {
    Action::Route(RouteAction {
        cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
        ..Default::default()
    })
}

/// A route configuration with one virtual host for every domain.
pub fn routes(name: &str, routes: Vec<Route>) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Calls `SayHello` and returns the name of the backend that answered.
pub async fn hello(client: &mut GreeterClient<XdsChannel>) -> Result<String, Status> {
    let request = HelloRequest {
        name: "test".into(),
    };
    let reply = tokio::time::timeout(PATIENCE, client.say_hello(request))
        .await
        .expect("the call finishes")?;
    Ok(reply.into_inner().backend)
}

/// The number of endpoints of `cluster` in the snapshot the channel uses.
pub fn endpoint_count(snapshot: &Snapshot, cluster: &str) -> Option<usize> {
    match &snapshot.cluster(cluster)?.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => Some(a.value.endpoint_count()),
        _ => None,
    }
}

/// Waits until the channel routes by a snapshot for which `f` holds.
pub async fn until_snapshot(channel: &XdsChannel, what: &str, f: impl Fn(&Snapshot) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !channel.snapshot().is_some_and(|s| f(&s)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
