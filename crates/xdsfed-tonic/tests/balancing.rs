//! Endpoints end to end: the testbed serves LDS/RDS/CDS/EDS over loopback,
//! real greeter backends answer, and a generated tonic client calls
//! through `xds:///greeter`.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed_testbed::resources::{api_listener, cluster};
use xdsfed_testbed::{Server, ServerSpec, Testbed};

use common::*;

const LISTENER: &str = "greeter";
const ROUTES: &str = "greeter-routes";
const CLUSTER: &str = "greeter-cluster";
const ENDPOINTS: &str = "greeter-endpoints";

/// One listener → one route → one EDS cluster over `backends`.
fn serve_greeter(server: &Server, backends: &[&Backend]) {
    server
        .set_message(LISTENER, &api_listener(LISTENER, ROUTES))
        .unwrap();
    let all = route(
        "all",
        PathSpecifier::Prefix("/".into()),
        to_cluster(CLUSTER),
    );
    server
        .set_message(ROUTES, &routes(ROUTES, vec![all]))
        .unwrap();
    server
        .set_message(CLUSTER, &cluster(CLUSTER, ENDPOINTS))
        .unwrap();
    server
        .set_message(ENDPOINTS, &assignment(ENDPOINTS, backends))
        .unwrap();
}

async fn start() -> (Testbed, Arc<Server>) {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = Arc::clone(testbed.server("main").unwrap());
    (testbed, server)
}

/// What one request saw: whether it started after the channel published
/// the snapshot without the removed endpoint, and its result.
type Outcome = (bool, Result<String, tonic::Status>);

/// Calls in a loop until `stop`, recording each call as an [`Outcome`].
async fn call_until(
    mut client: GreeterClient<xdsfed_tonic::XdsChannel>,
    published: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    after: Arc<AtomicUsize>,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let started_after = published.load(Ordering::SeqCst);
        let result = hello(&mut client).await;
        if started_after {
            after.fetch_add(1, Ordering::SeqCst);
        }
        outcomes.push((started_after, result));
    }
    outcomes
}

/// gRFC A27 / the issue: requests spread over every endpoint; after an EDS
/// update removes one, no request that starts once the channel has the new
/// snapshot reaches it, and no request fails during the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_spread_over_endpoints_and_none_reach_a_removed_one() {
    let (_testbed, server) = start().await;
    let b = backends(&["a", "b", "c"]).await;
    serve_greeter(&server, &[&b[0], &b[1], &b[2]]);
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel.clone());

    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..300 {
        *counts
            .entry(hello(&mut greeter).await.unwrap())
            .or_default() += 1;
    }
    for name in ["a", "b", "c"] {
        let n = counts.get(name).copied().unwrap_or_default();
        assert!(
            n >= 60,
            "backend {name} got {n} of 300 requests: {counts:?}"
        );
    }

    let published = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let after = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(call_until(
                GreeterClient::new(channel.clone()),
                Arc::clone(&published),
                Arc::clone(&stop),
                Arc::clone(&after),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    server
        .set_message(ENDPOINTS, &assignment(ENDPOINTS, &[&b[0], &b[1]]))
        .unwrap();
    until_snapshot(&channel, "the channel has the update", |s| {
        endpoint_count(s, CLUSTER) == Some(2)
    })
    .await;
    published.store(true, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while after.load(Ordering::SeqCst) < 400 {
        assert!(tokio::time::Instant::now() < deadline, "callers stalled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::SeqCst);

    let mut outcomes = Vec::new();
    for caller in callers {
        outcomes.extend(caller.await.unwrap());
    }
    let failed: Vec<_> = outcomes.iter().filter(|(_, r)| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "requests failed during the change: {failed:?}"
    );
    let reached_c_after = outcomes
        .iter()
        .filter(|(after, r)| *after && matches!(r.as_deref(), Ok("c")))
        .count();
    assert_eq!(reached_c_after, 0, "requests reached the removed endpoint");
    let after_by: HashMap<&str, usize> =
        outcomes
            .iter()
            .filter(|(after, _)| *after)
            .fold(HashMap::new(), |mut m, (_, r)| {
                *m.entry(r.as_deref().unwrap()).or_default() += 1;
                m
            });
    assert!(
        after_by.contains_key("a") && after_by.contains_key("b"),
        "both remaining endpoints serve: {after_by:?}"
    );
}

/// The issue: when the control plane goes away, the channel keeps serving
/// from the last snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_channel_keeps_serving_when_the_control_plane_goes_away() {
    let (testbed, server) = start().await;
    let b = backends(&["a", "b"]).await;
    serve_greeter(&server, &[&b[0], &b[1]]);
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel.clone());
    hello(&mut greeter).await.unwrap();

    testbed.shutdown().await;
    // The client reports the lost server as an ambient error on what it
    // delivered; the snapshot carrying it proves the outage was seen.
    until_snapshot(&channel, "the outage shows in the snapshot", |s| {
        s.listener(LISTENER)
            .and_then(|l| l.listener.as_ref())
            .is_some_and(|l| l.ambient_error.is_some())
    })
    .await;

    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..100 {
        *counts
            .entry(hello(&mut greeter).await.unwrap())
            .or_default() += 1;
    }
    assert_eq!(counts.len(), 2, "both endpoints still serve: {counts:?}");
}

/// gRPC subchannels: an endpoint is picked only once its connection is up,
/// so one backend of three refusing connections fails no request; the two
/// that accept share all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_refusing_connections_fails_no_request() {
    let (_testbed, server) = start().await;
    let mut b = backends(&["a", "b", "dead"]).await;
    serve_greeter(&server, &[&b[0], &b[1], &b[2]]);
    // Its port now refuses connections.
    drop(b.pop());
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel);

    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut failures = Vec::new();
    for _ in 0..400 {
        match hello(&mut greeter).await {
            Ok(backend) => *counts.entry(backend).or_default() += 1,
            Err(status) => failures.push(status),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    for name in ["a", "b"] {
        let n = counts.get(name).copied().unwrap_or_default();
        assert!(
            n >= 100,
            "backend {name} got {n} of 400 requests: {counts:?}"
        );
    }
}

/// gRPC fails a call at once when every subchannel is in transient failure:
/// a cluster none of whose endpoints accepts a connection fails requests
/// with UNAVAILABLE naming the cluster, instead of holding them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_no_endpoint_of_which_connects_fails_requests_naming_it() {
    let (_testbed, server) = start().await;
    let dead = backends(&["x", "y"]).await;
    serve_greeter(&server, &[&dead[0], &dead[1]]);
    drop(dead);
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel);

    let status = hello(&mut greeter).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains(CLUSTER)
            && status
                .message()
                .contains("none of its 2 endpoints accepts a connection"),
        "{status:?}"
    );
}

/// Waits until `f` holds, at most [`PATIENCE`].
async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// gRFC A48: LEAST_REQUEST compares `choice_count` random endpoints. With
/// `choice_count` 3 over 3 endpoints every pick sees them all, so three
/// requests held in flight one after the other land on three different
/// endpoints, round after round (comparing only two, the third request
/// lands on a busy endpoint one round in three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_request_with_choice_count_three_compares_every_endpoint() {
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        LbConfig, LbPolicy, LeastRequestLbConfig,
    };
    use envoy_types::pb::google::protobuf::UInt32Value;
    use xdsfed::proto::greeter::v1::HelloRequest;

    let (_testbed, server) = start().await;
    let scripts: Vec<Script> = (0..3).map(|_| Script::default()).collect();
    let mut b = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        b.push(Backend::scripted(&format!("b{i}"), script.clone()).await);
    }
    serve_greeter(&server, &b.iter().collect::<Vec<_>>());
    let mut least = cluster(CLUSTER, ENDPOINTS);
    least.lb_policy = LbPolicy::LeastRequest as i32;
    least.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
        choice_count: Some(UInt32Value { value: 3 }),
        ..Default::default()
    }));
    server.set_message(CLUSTER, &least).unwrap();
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel.clone());
    // Every endpoint answers once: all three are connected.
    for _ in 0..1000 {
        if scripts.iter().all(|s| s.calls() > 0) {
            break;
        }
        hello(&mut greeter).await.unwrap();
    }
    assert!(
        scripts.iter().all(|s| s.calls() > 0),
        "every backend answered"
    );
    let calls = |s: &[Script]| s.iter().map(Script::calls).collect::<Vec<_>>();
    for round in 0..20 {
        let before = calls(&scripts);
        let mut held = Vec::new();
        for n in 1..=3 {
            let mut greeter = GreeterClient::new(channel.clone());
            held.push(tokio::spawn(async move {
                let _ = greeter.say_hello(HelloRequest { name: HOLD.into() }).await;
            }));
            let total: usize = before.iter().sum::<usize>() + n;
            until("the held request reached a backend", || {
                calls(&scripts).iter().sum::<usize>() == total
            })
            .await;
        }
        let after = calls(&scripts);
        let landed: Vec<usize> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert_eq!(
            landed,
            [1, 1, 1],
            "round {round}: held requests per endpoint"
        );
        for task in held {
            task.abort();
            let _ = task.await;
        }
    }
}

/// gRFC A50: one backend of three answers every call with UNAVAILABLE;
/// failure-percentage detection ejects it after an interval, and from then
/// on calls succeed and none reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outlier_detection_ejects_the_failing_backend() {
    use envoy_types::pb::envoy::config::cluster::v3::OutlierDetection;
    use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

    let (_testbed, server) = start().await;
    let failing = Script {
        failures: usize::MAX,
        code: tonic::Code::Unavailable,
        ..Script::default()
    };
    let b = [
        Backend::start("good-1").await,
        Backend::scripted("bad", failing.clone()).await,
        Backend::start("good-2").await,
    ];
    serve_greeter(&server, &b.iter().collect::<Vec<_>>());
    let value = |v| Some(UInt32Value { value: v });
    let mut detected = cluster(CLUSTER, ENDPOINTS);
    detected.outlier_detection = Some(OutlierDetection {
        interval: Some(PbDuration {
            seconds: 0,
            nanos: 100_000_000,
        }),
        base_ejection_time: Some(PbDuration {
            seconds: 60,
            nanos: 0,
        }),
        max_ejection_percent: value(50),
        enforcing_success_rate: value(0),
        enforcing_failure_percentage: value(100),
        failure_percentage_threshold: value(50),
        failure_percentage_minimum_hosts: value(3),
        failure_percentage_request_volume: value(2),
        ..Default::default()
    });
    server.set_message(CLUSTER, &detected).unwrap();
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel);
    // Calls until 30 in a row succeed: the failing backend is out.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut in_a_row = 0;
    while in_a_row < 30 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failing backend was not ejected ({} calls reached it)",
            failing.calls()
        );
        match hello(&mut greeter).await {
            Ok(_) => in_a_row += 1,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                in_a_row = 0;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    let reached = failing.calls();
    for _ in 0..30 {
        hello(&mut greeter).await.unwrap();
    }
    assert_eq!(failing.calls(), reached, "an ejected backend is not picked");
}

/// gRFC A50 with `max_ejection_percent` 100: every backend answers every
/// call with UNAVAILABLE, detection ejects them all, and from then on a
/// call fails at once with UNAVAILABLE saying so, as gRPC's picker fails a
/// call when every subchannel is in TRANSIENT_FAILURE; it does not wait
/// for an ejection to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_every_endpoint_is_ejected_fails_calls_at_once() {
    use envoy_types::pb::envoy::config::cluster::v3::OutlierDetection;
    use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

    let (_testbed, server) = start().await;
    let failing = Script {
        failures: usize::MAX,
        code: tonic::Code::Unavailable,
        ..Script::default()
    };
    let b = [
        Backend::scripted("bad-1", failing.clone()).await,
        Backend::scripted("bad-2", failing.clone()).await,
        Backend::scripted("bad-3", failing.clone()).await,
    ];
    serve_greeter(&server, &b.iter().collect::<Vec<_>>());
    let value = |v| Some(UInt32Value { value: v });
    let mut detected = cluster(CLUSTER, ENDPOINTS);
    detected.outlier_detection = Some(OutlierDetection {
        interval: Some(PbDuration {
            seconds: 0,
            nanos: 100_000_000,
        }),
        base_ejection_time: Some(PbDuration {
            seconds: 600,
            nanos: 0,
        }),
        max_ejection_percent: value(100),
        enforcing_success_rate: value(0),
        enforcing_failure_percentage: value(100),
        failure_percentage_threshold: value(50),
        failure_percentage_minimum_hosts: value(3),
        failure_percentage_request_volume: value(2),
        ..Default::default()
    });
    server.set_message(CLUSTER, &detected).unwrap();
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no call failed for the ejection"
        );
        // A call held until an ejection ends (600 s) would never return.
        let status = tokio::time::timeout(PATIENCE, hello(&mut greeter))
            .await
            .expect("a call returns while every endpoint is ejected")
            .expect_err("every backend fails");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        if status
            .message()
            .contains("outlier detection has ejected all of its 3 endpoints")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// gRFC A42: a RING_HASH cluster with a route hashing the `x-user` header:
/// calls with the same value reach the same backend, and different values
/// spread over the backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_hash_sends_the_same_header_value_to_the_same_backend() {
    use std::collections::HashSet;

    use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
    use envoy_types::pb::envoy::config::route::v3::route::Action;
    use envoy_types::pb::envoy::config::route::v3::route_action::HashPolicy;
    use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::{
        Header, PolicySpecifier,
    };
    use xdsfed::proto::greeter::v1::HelloRequest;

    let (_testbed, server) = start().await;
    let scripts: Vec<Script> = (0..3).map(|_| Script::default()).collect();
    let mut b = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        b.push(Backend::scripted(&format!("b{i}"), script.clone()).await);
    }
    serve_greeter(&server, &b.iter().collect::<Vec<_>>());
    let mut ring = cluster(CLUSTER, ENDPOINTS);
    ring.lb_policy = LbPolicy::RingHash as i32;
    server.set_message(CLUSTER, &ring).unwrap();
    let mut all = route(
        "all",
        PathSpecifier::Prefix("/".into()),
        to_cluster(CLUSTER),
    );
    if let Some(Action::Route(action)) = all.action.as_mut() {
        action.hash_policy = vec![HashPolicy {
            policy_specifier: Some(PolicySpecifier::Header(Header {
                header_name: "x-user".into(),
                regex_rewrite: None,
            })),
            terminal: false,
        }];
    }
    server
        .set_message(ROUTES, &routes(ROUTES, vec![all]))
        .unwrap();
    let channel = channel("xds:///greeter", client(bootstrap(&server.uri(), &[])));
    let mut greeter = GreeterClient::new(channel);
    // Without the header the hash is random: every backend answers, so all
    // three are connected before the ring is put to the test.
    for _ in 0..1000 {
        if scripts.iter().all(|s| s.calls() > 0) {
            break;
        }
        hello(&mut greeter).await.unwrap();
    }
    assert!(
        scripts.iter().all(|s| s.calls() > 0),
        "every backend answered"
    );
    let mut as_user = async |user: &str| {
        let mut request = tonic::Request::new(HelloRequest {
            name: "test".into(),
        });
        request
            .metadata_mut()
            .insert("x-user", user.parse().unwrap());
        greeter
            .say_hello(request)
            .await
            .unwrap()
            .into_inner()
            .backend
    };
    let mut reached = HashSet::new();
    for user in 0..30 {
        let user = format!("user-{user}");
        let first = as_user(&user).await;
        for _ in 0..5 {
            assert_eq!(as_user(&user).await, first, "{user} moved");
        }
        reached.insert(first);
    }
    assert!(reached.len() >= 2, "30 users all on {reached:?}");
}
