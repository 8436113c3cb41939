//! The resource graph end to end: the real client and `ConfigGraph` against
//! the testbed over loopback delta ADS.
//!
//! The graph: 1 listener, 1 route configuration with 10 000 routes, 10 000
//! EDS clusters with 10 endpoints each (100 000 endpoints). Half of the
//! clusters and their endpoints live on a second authority, served by a
//! second server, so the client runs two ADS streams.
//!
//! Measures:
//! - cold start: from `ConfigGraph::builder(..).start()` on a new client
//!   (no connection open yet) to `ready()` returning the first complete
//!   snapshot; with, per round, when the servers sent their last response
//!   of each type (from the testbed's recording), to show where the time
//!   goes;
//! - one endpoint change: from `set_message` of one ClusterLoadAssignment
//!   on the testbed to the graph publishing the snapshot that has it,
//!   repeated over different clusters.
//!
//! Run: `cargo bench --bench graph_e2e`. Figures go to docs/performance.md.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use xdsfed::client::client::XdsClient;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, GraphOptions, Snapshot};
use xdsfed::testbed::{Message, Server, ServerSpec, Testbed, resources};

const CLUSTERS: usize = 10_000;
const ENDPOINTS: usize = 10;
const COLD_ROUNDS: usize = 3;
const CHANGES: usize = 200;
const PATIENT: Duration = Duration::from_secs(600);

const LISTENER: &str = "xdstp://a.test/envoy.config.listener.v3.Listener/front";
const ROUTE: &str = "xdstp://a.test/envoy.config.route.v3.RouteConfiguration/front";

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Half the clusters and their endpoints live on the second authority.
fn authority(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "a.test"
    } else {
        "b.test"
    }
}

fn cluster_name(i: usize) -> String {
    let authority = authority(i);
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/svc-{i}")
}

fn endpoints_name(i: usize) -> String {
    let authority = authority(i);
    format!("xdstp://{authority}/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}")
}

fn listener() -> Listener {
    resources::api_listener(LISTENER, ROUTE)
}

fn route_config() -> RouteConfiguration {
    let routes: Vec<(String, String)> = (0..CLUSTERS)
        .map(|i| (format!("/svc-{i}/"), cluster_name(i)))
        .collect();
    let routes: Vec<(&str, &str)> = routes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    resources::route_config(ROUTE, &routes)
}

fn cluster(i: usize) -> Cluster {
    resources::cluster(&cluster_name(i), &endpoints_name(i))
}

/// Cluster `i`'s endpoints: `ENDPOINTS` hosts, all on `port`.
fn assignment(i: usize, port: u32) -> ClusterLoadAssignment {
    let hosts: Vec<String> = (0..ENDPOINTS)
        .map(|e| format!("10.{}.{}.{}", i / 256 % 256, i % 256, e))
        .collect();
    let addrs: Vec<(&str, u32)> = hosts.iter().map(|h| (h.as_str(), port)).collect();
    resources::endpoints(&endpoints_name(i), &addrs)
}

/// The port of cluster `i`'s first endpoint in `snapshot`.
fn port_of(snapshot: &Snapshot, i: usize) -> Option<u32> {
    let cluster = snapshot.cluster(&cluster_name(i))?;
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &cluster.endpoints
    else {
        return None;
    };
    assignment
        .value
        .endpoints()
        .next()
        .map(|e| u32::from(e.port))
}

fn server_of(testbed: &Testbed, i: usize) -> BenchResult<&Arc<Server>> {
    testbed
        .server_for_authority(authority(i))
        .ok_or_else(|| format!("no server for {}", authority(i)).into())
}

fn populate(testbed: &Testbed) -> BenchResult<()> {
    let a = server_of(testbed, 0)?;
    a.set_message(LISTENER, &listener())?;
    a.set_message(ROUTE, &route_config())?;
    for i in 0..CLUSTERS {
        let server = server_of(testbed, i)?;
        server.set_message(&cluster_name(i), &cluster(i))?;
        server.set_message(&endpoints_name(i), &assignment(i, 8000))?;
    }
    Ok(())
}

fn client(testbed: &Testbed) -> BenchResult<XdsClient> {
    let (a, b) = (server_of(testbed, 0)?.uri(), server_of(testbed, 1)?.uri());
    let bootstrap = format!(
        r#"{{"xds_servers": [{{"server_uri": "{a}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "bench"}},
            "authorities": {{
              "a.test": {{"xds_servers": [{{"server_uri": "{a}", "channel_creds": [{{"type": "insecure"}}]}}]}},
              "b.test": {{"xds_servers": [{{"server_uri": "{b}", "channel_creds": [{{"type": "insecure"}}]}}]}}
            }}}}"#
    );
    // Timers far past any round's length: a figure is the time until every
    // resource really arrived, never a timer's verdict.
    Ok(XdsClient::builder(Bootstrap::from_json_str(&bootstrap)?)
        .does_not_exist_timeout(PATIENT)
        .build()?)
}

/// When each server last sent a response of each type, on the streams it
/// opened after `since`, as offsets from `start`.
fn phases(testbed: &Testbed, since: SystemTime, start: SystemTime) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for server in testbed.servers() {
        let mut last: Vec<(String, SystemTime)> = Vec::new();
        for stream in server.recording().streams() {
            if stream.opened_at < since {
                continue;
            }
            for event in &stream.events {
                let Message::DeltaResponse(response) = &event.message else {
                    continue;
                };
                let short = response
                    .type_url
                    .rsplit('.')
                    .next()
                    .unwrap_or(&response.type_url)
                    .to_owned();
                match last.iter_mut().find(|(t, _)| *t == short) {
                    Some((_, at)) => *at = (*at).max(event.at),
                    None => last.push((short, event.at)),
                }
            }
        }
        for (kind, at) in last {
            let offset = at.duration_since(start).unwrap_or_default();
            out.push((format!("{}:{kind}", server.name()), offset));
        }
    }
    out.sort_by_key(|(_, at)| *at);
    out
}

fn summary(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label}: min {:.3?}, median {:.3?}, p90 {:.3?}, p99 {:.3?}, max {:.3?} ({} samples)",
        at(0.0),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        samples.len()
    );
}

async fn run() -> BenchResult<()> {
    let testbed = Testbed::start([
        ServerSpec::new("a", ["a.test"]),
        ServerSpec::new("b", ["b.test"]),
    ])
    .await?;
    let populating = Instant::now();
    populate(&testbed)?;
    println!(
        "graph: 1 listener, 1 route configuration with {CLUSTERS} routes, {CLUSTERS} EDS clusters x {ENDPOINTS} endpoints ({} endpoints); testbed loaded in {:.3?}",
        CLUSTERS * ENDPOINTS,
        populating.elapsed()
    );

    let mut cold = Vec::new();
    let mut kept = None;
    for round in 0..COLD_ROUNDS {
        let client = client(&testbed)?;
        let since = SystemTime::now();
        let start = Instant::now();
        let mut graph = ConfigGraph::builder(client.clone())
            .listener(LISTENER)
            .options(GraphOptions::default().with_warming_timeout(PATIENT))
            .start();
        let snapshot = graph.ready().await?;
        let elapsed = start.elapsed();
        let healthy = snapshot.clusters().filter(|c| c.is_ok()).count();
        if snapshot.cluster_count() != CLUSTERS || healthy != CLUSTERS || !snapshot.is_ok() {
            return Err(format!(
                "incomplete snapshot: {} clusters, {healthy} healthy, errors {:?}, first cluster error {:?}",
                snapshot.cluster_count(),
                snapshot.errors().collect::<Vec<_>>(),
                snapshot.clusters().find_map(|c| c.error.as_ref())
            )
            .into());
        }
        let phases = phases(&testbed, since, since);
        let phases: Vec<String> = phases
            .iter()
            .map(|(what, at)| format!("{what} {at:.0?}"))
            .collect();
        let wire: Vec<String> = testbed
            .servers()
            .iter()
            .map(|server| {
                let streams = server.recording().streams();
                let fresh = streams.iter().filter(|s| s.opened_at >= since);
                let (requests, responses) = fresh.fold((0, 0), |(q, r), s| {
                    (
                        q + s.delta_requests().count(),
                        r + s.delta_responses().count(),
                    )
                });
                format!(
                    "{}: {requests} requests, {responses} responses",
                    server.name()
                )
            })
            .collect();
        println!(
            "cold start round {round}: ready in {elapsed:.3?}; last response per server and type: {}; {}",
            phases.join(", "),
            wire.join("; ")
        );
        cold.push(elapsed);
        if round + 1 == COLD_ROUNDS {
            kept = Some((client, graph));
        } else {
            graph.shutdown().await;
            // Let the old connections go idle and close before the next round.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    summary("cold start to ready (delta ADS, loopback)", cold);

    let Some((_client, mut graph)) = kept else {
        return Err("no graph kept".into());
    };
    let mut changes = Vec::new();
    for k in 0..CHANGES {
        let i = (k * 7919) % CLUSTERS;
        let port = 9000 + u32::try_from(k)?;
        let message = assignment(i, port);
        let server = server_of(&testbed, i)?;
        let start = Instant::now();
        server.set_message(&endpoints_name(i), &message)?;
        loop {
            let snapshot = tokio::time::timeout(Duration::from_secs(10), graph.changed()).await??;
            if port_of(&snapshot, i) == Some(port) {
                break;
            }
        }
        changes.push(start.elapsed());
    }
    summary("one endpoint change to the new snapshot", changes);
    graph.shutdown().await;
    testbed.shutdown().await;
    Ok(())
}

fn main() -> BenchResult<()> {
    // The bench harness passes flags such as `--bench`; nothing to parse.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run())
}
