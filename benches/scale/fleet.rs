//! The workload: clusters × endpoints spread over authorities and servers,
//! served by the testbed (in the fleet's process, module `remote`), and the
//! client with its graph.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LbEndpoint};
use prost::Message;
use xdsfed::client::client::XdsClient;
use xdsfed::client::transport::{BackoffConfig, TransportOptions};
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{ConfigGraph, GraphOptions, Snapshot};
use xdsfed::testbed::{RecordingLimits, Server, ServerSpec, Testbed, resources};

/// Endpoints per cluster, as in the issue's workload.
pub const ENDPOINTS: usize = 10;

/// How a cluster's endpoints travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Inline in its ClusterLoadAssignment (EDS).
    Eds,
    /// One `LbEndpoint` resource each, in a glob the assignment names.
    Leds,
    /// EDS, and one listener whose route configuration has a route to
    /// every cluster: what `xdsfed watch --listener` follows.
    Listener,
}

/// `clusters` clusters over `authorities` authorities over `servers`
/// servers (authority k on server k % servers).
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub clusters: usize,
    pub authorities: usize,
    pub servers: usize,
    pub mode: Mode,
}

pub fn authority(k: usize) -> String {
    format!("a{k}.test")
}

fn auth_of(shape: &Shape, i: usize) -> String {
    authority(i % shape.authorities)
}

pub fn cluster_glob(k: usize) -> String {
    format!(
        "xdstp://{}/envoy.config.cluster.v3.Cluster/svc/*",
        authority(k)
    )
}

pub fn cluster_name(shape: &Shape, i: usize) -> String {
    format!(
        "xdstp://{}/envoy.config.cluster.v3.Cluster/svc/{i}",
        auth_of(shape, i)
    )
}

pub fn cla_name(shape: &Shape, i: usize) -> String {
    let a = auth_of(shape, i);
    format!("xdstp://{a}/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}")
}

pub fn leds_glob(shape: &Shape, i: usize) -> String {
    let a = auth_of(shape, i);
    format!("xdstp://{a}/envoy.config.endpoint.v3.LbEndpoint/svc-{i}/*")
}

pub fn member_name(shape: &Shape, i: usize, e: usize) -> String {
    leds_glob(shape, i).replace('*', &format!("e{e}"))
}

pub fn host(i: usize, e: usize) -> String {
    format!(
        "10.{}.{}.{}",
        i / 65536 % 256,
        i / 256 % 256,
        (i % 256 + e) % 256
    )
}

pub fn cluster(shape: &Shape, i: usize) -> Cluster {
    resources::cluster(&cluster_name(shape, i), &cla_name(shape, i))
}

/// Cluster `i`'s assignment, its endpoints on `port` (EDS) or named by
/// its glob (LEDS).
pub fn assignment(shape: &Shape, i: usize, port: u32) -> ClusterLoadAssignment {
    match shape.mode {
        Mode::Eds | Mode::Listener => {
            let hosts: Vec<String> = (0..ENDPOINTS).map(|e| host(i, e)).collect();
            let addrs: Vec<(&str, u32)> = hosts.iter().map(|h| (h.as_str(), port)).collect();
            resources::endpoints(&cla_name(shape, i), &addrs)
        }
        Mode::Leds => resources::leds_endpoints(&cla_name(shape, i), &leds_glob(shape, i)),
    }
}

pub fn endpoint(i: usize, e: usize, port: u32) -> LbEndpoint {
    resources::lb_endpoint(&host(i, e), port)
}

/// Every resource's encoded bytes, for the decode floor.
pub struct Encoded {
    pub clusters: Vec<Vec<u8>>,
    pub assignments: Vec<Vec<u8>>,
    pub endpoints: Vec<Vec<u8>>,
}

impl Encoded {
    pub fn of(shape: &Shape) -> Self {
        let clusters = (0..shape.clusters)
            .map(|i| cluster(shape, i).encode_to_vec())
            .collect();
        let assignments = (0..shape.clusters)
            .map(|i| assignment(shape, i, 8080).encode_to_vec())
            .collect();
        let endpoints = match shape.mode {
            Mode::Eds | Mode::Listener => Vec::new(),
            Mode::Leds => (0..shape.clusters)
                .flat_map(|i| (0..ENDPOINTS).map(move |e| endpoint(i, e, 8080).encode_to_vec()))
                .collect(),
        };
        Self {
            clusters,
            assignments,
            endpoints,
        }
    }

    /// prost decode of every byte string, nothing else: the floor.
    pub fn decode_floor(&self) -> Duration {
        let start = Instant::now();
        let mut n = 0usize;
        for b in &self.clusters {
            n += Cluster::decode(b.as_slice()).map_or(0, |c| c.name.len());
        }
        for b in &self.assignments {
            n += ClusterLoadAssignment::decode(b.as_slice()).map_or(0, |c| c.endpoints.len());
        }
        for b in &self.endpoints {
            n += LbEndpoint::decode(b.as_slice()).map_or(0, |e| e.encoded_len());
        }
        std::hint::black_box(n);
        start.elapsed()
    }

    pub fn bytes(&self) -> usize {
        [&self.clusters, &self.assignments, &self.endpoints]
            .iter()
            .flat_map(|v| v.iter())
            .map(Vec::len)
            .sum()
    }
}

/// Starts the servers (on the current runtime) and stores the workload.
pub async fn serve(shape: &Shape) -> Testbed {
    let specs = (0..shape.servers).map(|s| {
        let auths: Vec<String> = (0..shape.authorities)
            .filter(|k| k % shape.servers == s)
            .map(authority)
            .collect();
        ServerSpec::new(format!("s{s}"), auths)
    });
    let testbed = Testbed::start(specs).await.expect("testbed starts");
    // A load server: its streams are listed, their messages not copied.
    for server in testbed.servers() {
        server
            .recording()
            .set_limits(RecordingLimits::streams_only());
    }
    if shape.mode == Mode::Listener {
        store_listener(&testbed, shape);
    }
    for i in 0..shape.clusters {
        let server = server_of(&testbed, shape, i);
        let c = cluster(shape, i);
        server.set_message(&c.name, &c).expect("stored");
        let cla = assignment(shape, i, 8080);
        server.set_message(&cla.cluster_name, &cla).expect("stored");
        if shape.mode == Mode::Leds {
            for e in 0..ENDPOINTS {
                let name = member_name(shape, i, e);
                server
                    .set_message(&name, &endpoint(i, e, 8080))
                    .expect("stored");
            }
        }
    }
    testbed
}

/// The listener of [`Mode::Listener`], on authority 0.
pub fn listener_name() -> String {
    format!(
        "xdstp://{}/envoy.config.listener.v3.Listener/edge",
        authority(0)
    )
}

/// Its route configuration: a route `/svc/i` to cluster `i`, for every
/// cluster.
fn store_listener(testbed: &Testbed, shape: &Shape) {
    let rc_name = format!(
        "xdstp://{}/envoy.config.route.v3.RouteConfiguration/edge",
        authority(0)
    );
    let listener = resources::api_listener(&listener_name(), &rc_name);
    let prefixes: Vec<(String, String)> = (0..shape.clusters)
        .map(|i| (format!("/svc/{i}"), cluster_name(shape, i)))
        .collect();
    let routes: Vec<(&str, &str)> = prefixes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let rc = resources::route_config(&rc_name, &routes);
    let server = &testbed.servers()[0];
    server
        .set_message(&listener.name, &listener)
        .expect("stored");
    server.set_message(&rc.name, &rc).expect("stored");
}

pub fn server_of<'t>(testbed: &'t Testbed, shape: &Shape, i: usize) -> &'t Arc<Server> {
    let k = i % shape.authorities;
    &testbed.servers()[k % shape.servers]
}

/// A client whose bootstrap maps each authority to its server. A long
/// backoff: when the servers stop (the memory probe) nothing reconnects.
pub fn client(uris: &[String], shape: &Shape) -> XdsClient {
    let server = |uri: &str| {
        format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#)
    };
    let auths: Vec<String> = (0..shape.authorities)
        .map(|k| {
            let uri = &uris[k % shape.servers];
            format!(
                r#""{}": {{"xds_servers": [{}]}}"#,
                authority(k),
                server(uri)
            )
        })
        .collect();
    let json = format!(
        r#"{{"xds_servers": [{}], "node": {{"id": "scale"}}, "authorities": {{{}}}}}"#,
        server(&uris[0]),
        auths.join(",")
    );
    let bootstrap = Bootstrap::from_json_str(&json).expect("bench bootstrap is valid");
    let options = TransportOptions {
        backoff: BackoffConfig {
            initial: Duration::from_secs(600),
            max: Duration::from_secs(600),
            ..BackoffConfig::default()
        },
        ..TransportOptions::default()
    };
    let builder = XdsClient::builder(bootstrap).transport_options(options);
    let builder = if own_thread() {
        builder.own_thread()
    } else {
        builder
    };
    builder.build().expect("inside a tokio runtime")
}

/// Whether the client runs on a thread of its own
/// (`XDSFED_SCALE_OWN_THREAD=1`), not on the bench's two-worker runtime.
pub fn own_thread() -> bool {
    std::env::var_os("XDSFED_SCALE_OWN_THREAD").is_some_and(|v| v == "1")
}

/// The graph: one cluster glob collection per authority.
pub fn graph(client: &XdsClient, shape: &Shape) -> ConfigGraph {
    let mut builder = ConfigGraph::builder(client.clone())
        .options(GraphOptions::default().with_warming_timeout(Duration::from_secs(600)));
    for k in 0..shape.authorities {
        builder = builder.cluster_collection(cluster_glob(k));
    }
    builder.start()
}

/// Whether `s` holds every cluster, each with all its endpoints.
pub fn complete(s: &Snapshot, shape: &Shape) -> bool {
    use xdsfed::graph::ClusterEndpoints;
    s.cluster_count() == shape.clusters
        && s.clusters().all(|c| match &c.endpoints {
            ClusterEndpoints::Eds {
                assignment: Some(a),
                ..
            } => a.value.endpoint_count() == ENDPOINTS,
            _ => false,
        })
}
