//! The routing service's own cost per request, without a network: route
//! match, cluster pick and the two-choice pick among ready endpoints (the
//! ready-endpoint check included), with endpoints that answer at once in
//! process. A second run gives every route a call policy: a retry policy
//! (no retry is needed: the request body is still kept for one) and a
//! `max_stream_duration` (the call's deadline timer and its guarded
//! response body).
//!
//! A route configuration of 10 or 1 000 routes (`/svc-<i>.Service/`
//! prefixes) over 10 clusters of 3 endpoints each, in
//! a snapshot cut by a real `GraphEngine`. Requests cycle over every route,
//! so the route match walks half the list on average. The baseline is the
//! same request sent straight to one in-process endpoint; the overhead is
//! the difference.
//!
//! Run: `cargo bench -p xdsfed-tonic --bench routing`. Figures go to
//! docs/performance.md.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::MaxStreamDuration;
use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, RouteConfiguration};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use tower::Service;
use xdsfed_core::types::{ClusterView, RouteConfigView};
use xdsfed_graph::{
    GraphEngine, GraphOptions, Provenance, ResourceKind, Roots, Snapshot, SnapshotCell, Update,
    WatchChange,
};
use xdsfed_testbed::resources;
use xdsfed_tonic::{
    BoxError, ChannelBuilder, ConnectTarget, Connecting, EndpointService, XdsChannel,
};

const CLUSTERS: usize = 10;
const ENDPOINTS: usize = 3;
const REQUESTS: usize = 100_000;
const ROUNDS: usize = 7;

fn cluster_name(i: usize) -> String {
    format!("cluster-{i}")
}

fn assignment(i: usize) -> ClusterLoadAssignment {
    let hosts: Vec<String> = (0..ENDPOINTS).map(|e| format!("10.0.{i}.{e}")).collect();
    let addrs: Vec<(&str, u32)> = hosts.iter().map(|h| (h.as_str(), 8080)).collect();
    let mut cla = resources::endpoints(&cluster_name(i), &addrs);
    for locality in &mut cla.endpoints {
        locality.load_balancing_weight = Some(UInt32Value { value: 1 });
        locality.locality = Some(Locality::default());
    }
    cla
}

fn path(route: usize) -> String {
    format!("/svc-{route}.Service/Call")
}

/// A retry policy and a deadline on every route of `config`'s virtual host.
fn with_call_policy(config: &mut RouteConfiguration) {
    let host = &mut config.virtual_hosts[0];
    host.retry_policy = Some(RetryPolicy {
        retry_on: "unavailable".into(),
        num_retries: Some(UInt32Value { value: 2 }),
        ..Default::default()
    });
    for route in &mut host.routes {
        if let Some(Action::Route(action)) = route.action.as_mut() {
            action.max_stream_duration = Some(MaxStreamDuration {
                max_stream_duration: Some(PbDuration {
                    seconds: 30,
                    nanos: 0,
                }),
                ..Default::default()
            });
        }
    }
}

/// The first snapshot of a listener whose route configuration has
/// `routes` routes (with a call policy when `policy`), every watch
/// answered.
fn snapshot(routes: usize, policy: bool) -> Arc<Snapshot> {
    let prefixes: Vec<(String, String)> = (0..routes)
        .map(|r| (format!("/svc-{r}.Service/"), cluster_name(r % CLUSTERS)))
        .collect();
    let pairs: Vec<(&str, &str)> = prefixes
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let mut route_config = resources::route_config("front-routes", &pairs);
    if policy {
        with_call_policy(&mut route_config);
    }
    let held_routes = RouteConfigView::new(&route_config).expect("a valid route configuration");
    let provenance = || Provenance::new(None, "bench", "1");
    let now = std::time::Instant::now();
    let mut engine = GraphEngine::new(Roots::new().listener("front"), GraphOptions::default(), now);
    while let Some(change) = engine.poll_watch() {
        let WatchChange::Watch { kind, name, .. } = change else {
            continue;
        };
        match kind {
            ResourceKind::Listener => {
                let l = resources::api_listener("front", "front-routes");
                engine.on_listener(now, &name, Update::Changed(Arc::new(l), provenance()));
            }
            ResourceKind::RouteConfiguration => engine.on_route_config(
                now,
                &name,
                Update::Changed(Arc::new(held_routes.clone()), provenance()),
            ),
            ResourceKind::Cluster => {
                let c = ClusterView::new(&resources::cluster(&name, "")).expect("a valid cluster");
                engine.on_cluster(now, &name, Update::Changed(Arc::new(c), provenance()));
            }
            ResourceKind::ClusterLoadAssignment => {
                let i: usize = name.trim_start_matches("cluster-").parse().unwrap();
                engine.on_endpoints(
                    now,
                    &name,
                    Update::Changed(Arc::new(held(assignment(i))), provenance()),
                );
            }
            // The benchmark's assignments carry their endpoints inline.
            ResourceKind::LbEndpoint => {}
        }
    }
    engine.poll_snapshot().expect("every watch answered")
}

/// An endpoint that answers every request at once.
fn immediate() -> EndpointService {
    EndpointService::new(tower::service_fn(|_| async {
        Ok::<_, BoxError>(http::Response::new(tonic::body::Body::empty()))
    }))
}

fn request(path: &str) -> http::Request<tonic::body::Body> {
    http::Request::builder()
        .method("POST")
        .uri(path)
        .body(tonic::body::Body::empty())
        .unwrap()
}

/// Mean time per request over `REQUESTS` requests cycling over `paths`.
async fn mean<S>(service: &mut S, paths: &[String]) -> Duration
where
    S: Service<http::Request<tonic::body::Body>>,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    for i in 0..REQUESTS {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .unwrap();
        service
            .call(request(&paths[i % paths.len()]))
            .await
            .unwrap();
    }
    start.elapsed() / REQUESTS as u32
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn channel(routes: usize, policy: bool) -> XdsChannel {
    let cell = SnapshotCell::new();
    cell.publish(snapshot(routes, policy));
    let connector = |_: &ConnectTarget<'_>| -> Result<Connecting, BoxError> {
        Ok(Box::pin(async { Ok(immediate()) }))
    };
    let channel = ChannelBuilder::with_graph(cell.reader(), "front", "svc")
        .connector(connector)
        .build()
        .unwrap();
    channel.ready().await.unwrap();
    // The follower task holds its own reader; the cell may go.
    drop(cell);
    channel
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let one = vec![path(0)];
        let mut baseline = immediate();
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            rounds.push(mean(&mut baseline, &one).await);
        }
        let base = median(rounds);
        println!("baseline (one in-process endpoint, no routing): {base:?} per request");
        for (routes, policy) in [(10, false), (1_000, false), (10, true), (1_000, true)] {
            let mut channel = channel(routes, policy).await;
            let paths: Vec<String> = (0..routes).map(path).collect();
            let (mut all, mut first) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                all.push(mean(&mut channel, &paths).await);
                first.push(mean(&mut channel, &one).await);
            }
            let (all, first) = (median(all), median(first));
            let policy = if policy { "with call policy" } else { "plain" };
            println!(
                "{routes:>5} routes, {policy}: {all:?} per request cycling over every route (overhead {:?}); \
                 {first:?} always the first route (overhead {:?})",
                all.saturating_sub(base),
                first.saturating_sub(base),
            );
        }
    });
}

/// `cla` as the client holds it.
fn held(cla: ClusterLoadAssignment) -> xdsfed_core::types::LoadAssignment {
    xdsfed_core::types::LoadAssignment::new(&cla).expect("a valid assignment")
}
