//! A generated tonic client calling through `xds:///greeter`: the testbed
//! serves the listener, routes, clusters and endpoints, three greeter
//! backends answer, and the channel routes and balances each call.
//!
//! ```text
//! xds:///greeter ─► Listener xdstp://cloud.example/…/greeter ─► routes:
//!     /xdsfed.greeter.v1.Greeter/SayGoodbye ─► cluster farewell ─► backend farewell
//!     everything else                       ─► cluster greeter  ─► backends greeter-1, greeter-2
//! ```
//!
//! Run: `cargo run --example tonic_xds`

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
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::ClusterEndpoints;
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed::proto::greeter::v1::greeter_server::{Greeter, GreeterServer};
use xdsfed::proto::greeter::v1::{HelloReply, HelloRequest};
use xdsfed::testbed::resources::{api_listener, cluster, endpoints};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

type Error = Box<dyn std::error::Error>;

const AUTHORITY: &str = "cloud.example";

fn name(kind: &str, id: &str) -> String {
    format!("xdstp://{AUTHORITY}/envoy.config.{kind}/{id}")
}

/// A greeter that signs every reply with its name.
struct Backend(String);

#[tonic::async_trait]
impl Greeter for Backend {
    async fn say_hello(&self, r: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let message = format!("hello {}", r.into_inner().name);
        Ok(Response::new(HelloReply {
            message,
            backend: self.0.clone(),
        }))
    }

    async fn say_goodbye(&self, r: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let message = format!("goodbye {}", r.into_inner().name);
        Ok(Response::new(HelloReply {
            message,
            backend: self.0.clone(),
        }))
    }
}

/// Starts a greeter backend on loopback and returns its port.
async fn start_backend(backend_name: &str) -> Result<u32, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = u32::from(listener.local_addr()?.port());
    let service = GreeterServer::new(Backend(backend_name.to_owned()));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    Ok(port)
}

/// Endpoints on 127.0.0.1 in one locality. gRPC (and this channel) ignore
/// a locality without a weight.
fn assignment(cluster_name: &str, ports: &[u32]) -> ClusterLoadAssignment {
    let addrs: Vec<(&str, u32)> = ports.iter().map(|p| ("127.0.0.1", *p)).collect();
    let mut cla = endpoints(cluster_name, &addrs);
    for locality in &mut cla.endpoints {
        locality.load_balancing_weight = Some(UInt32Value { value: 1 });
        locality.locality = Some(Locality {
            zone: "zone-a".into(),
            ..Default::default()
        });
    }
    cla
}

fn route(path: PathSpecifier, cluster_name: String) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(path),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster_name)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The listener, its routes and the two clusters, on `server`.
fn serve(server: &Server, greeter_ports: &[u32], farewell_port: u32) -> Result<(), Error> {
    let listener = name("listener.v3.Listener", "greeter");
    let routes = name("route.v3.RouteConfiguration", "greeter");
    server.set_message(&listener, &api_listener(&listener, &routes))?;
    let config = RouteConfiguration {
        name: routes.clone(),
        virtual_hosts: vec![VirtualHost {
            name: "greeter".into(),
            domains: vec!["*".into()],
            routes: vec![
                route(
                    PathSpecifier::Path("/xdsfed.greeter.v1.Greeter/SayGoodbye".into()),
                    name("cluster.v3.Cluster", "farewell"),
                ),
                route(
                    PathSpecifier::Prefix("/".into()),
                    name("cluster.v3.Cluster", "greeter"),
                ),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    server.set_message(&routes, &config)?;
    for (id, ports) in [
        ("greeter", greeter_ports),
        ("farewell", &[farewell_port][..]),
    ] {
        let cluster_name = name("cluster.v3.Cluster", id);
        let eds_name = name("endpoint.v3.ClusterLoadAssignment", id);
        server.set_message(&cluster_name, &cluster(&cluster_name, &eds_name))?;
        server.set_message(&eds_name, &assignment(&eds_name, ports))?;
    }
    Ok(())
}

async fn calls(
    client: &mut GreeterClient<xdsfed_tonic::XdsChannel>,
    n: usize,
) -> Result<(), Error> {
    for i in 0..n {
        let request = HelloRequest {
            name: format!("call {i}"),
        };
        let reply = if i % 3 == 2 {
            client.say_goodbye(request).await?.into_inner()
        } else {
            client.say_hello(request).await?.into_inner()
        };
        println!("  {:<10} ← {}", reply.backend, reply.message);
    }
    Ok(())
}

/// How many endpoints the cluster `greeter` has in the snapshot the channel
/// routes by.
fn greeter_endpoints(channel: &xdsfed_tonic::XdsChannel) -> Option<usize> {
    let snapshot = channel.snapshot()?;
    match &snapshot
        .cluster(&name("cluster.v3.Cluster", "greeter"))?
        .endpoints
    {
        ClusterEndpoints::Eds {
            assignment: Some(a),
            ..
        } => Some(a.value.endpoint_count()),
        _ => None,
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let testbed = Testbed::start([ServerSpec::new("cloud", [AUTHORITY])]).await?;
    let server = testbed
        .server("cloud")
        .ok_or("the testbed has no server \"cloud\"")?;
    let greeter_ports = [
        start_backend("greeter-1").await?,
        start_backend("greeter-2").await?,
    ];
    let farewell_port = start_backend("farewell").await?;
    serve(server, &greeter_ports, farewell_port)?;

    // xds:///greeter resolves through the default listener template (gRFC A47).
    let bootstrap = Bootstrap::from_json_str(&format!(
        r#"{{
            "xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "tonic-example"}},
            "authorities": {{"{AUTHORITY}": {{}}}},
            "client_default_listener_resource_name_template": "xdstp://{AUTHORITY}/envoy.config.listener.v3.Listener/%s"
        }}"#,
        uri = server.uri()
    ))?;
    let channel = xdsfed_tonic::channel("xds:///greeter", bootstrap)?;
    println!("xds:///greeter → listener {}", channel.listener());
    let mut client = GreeterClient::new(channel.clone());
    calls(&mut client, 6).await?;

    // An EDS update: greeter-2 leaves. Once the channel routes by the
    // snapshot that has it, no call reaches greeter-2.
    let eds_name = name("endpoint.v3.ClusterLoadAssignment", "greeter");
    server.set_message(&eds_name, &assignment(&eds_name, &greeter_ports[..1]))?;
    tokio::time::timeout(Duration::from_secs(10), async {
        while greeter_endpoints(&channel) != Some(1) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await?;
    println!("after the EDS update that removes greeter-2:");
    calls(&mut client, 3).await?;
    testbed.shutdown().await;
    Ok(())
}
