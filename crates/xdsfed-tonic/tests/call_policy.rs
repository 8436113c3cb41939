//! A route's call policy end to end: its `max_stream_duration` as the
//! call's deadline (gRFC A31) and its retry policy with the channel's
//! throttling (gRFC A44, A6), against scripted greeter backends over
//! loopback.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use envoy_types::pb::envoy::config::route::v3::RetryPolicy;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::MaxStreamDuration;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use tonic::Code;
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed_testbed::resources::{api_listener, cluster};
use xdsfed_testbed::{ServerSpec, Testbed};
use xdsfed_tonic::{ChannelBuilder, RetryThrottling, XdsChannel};

use common::*;

const LISTENER: &str = "greeter";
const ROUTES: &str = "greeter-routes";
const CLUSTER: &str = "greeter-cluster";
const ENDPOINTS: &str = "greeter-endpoints";

fn millis(n: i32) -> Option<PbDuration> {
    Some(PbDuration {
        seconds: 0,
        nanos: n * 1_000_000,
    })
}

/// One route to one cluster over `backend`; `edit` shapes the route
/// configuration (its action, its virtual host).
async fn serve(
    backend: &Backend,
    edit: impl FnOnce(&mut RouteConfiguration),
    throttling: Option<RetryThrottling>,
) -> (Testbed, XdsChannel) {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    server
        .set_message(LISTENER, &api_listener(LISTENER, ROUTES))
        .unwrap();
    let all = route(
        "all",
        PathSpecifier::Prefix("/".into()),
        to_cluster(CLUSTER),
    );
    let mut config = routes(ROUTES, vec![all]);
    edit(&mut config);
    server.set_message(ROUTES, &config).unwrap();
    server
        .set_message(CLUSTER, &cluster(CLUSTER, ENDPOINTS))
        .unwrap();
    server
        .set_message(ENDPOINTS, &assignment(ENDPOINTS, &[backend]))
        .unwrap();
    let mut builder =
        ChannelBuilder::with_client("xds:///greeter", client(bootstrap(&server.uri(), &[])))
            .ready_timeout(PATIENCE);
    if let Some(throttling) = throttling {
        builder = builder.retry_throttling(throttling);
    }
    (testbed, builder.build().unwrap())
}

fn route_action(
    config: &mut RouteConfiguration,
) -> &mut envoy_types::pb::envoy::config::route::v3::RouteAction {
    match config.virtual_hosts[0].routes[0].action.as_mut() {
        Some(Action::Route(action)) => action,
        _ => unreachable!("the test routes forward"),
    }
}

fn retry_on(codes: &str, retries: u32) -> RetryPolicy {
    RetryPolicy {
        retry_on: codes.into(),
        num_retries: Some(UInt32Value { value: retries }),
        retry_back_off: Some(RetryBackOff {
            base_interval: millis(5),
            max_interval: millis(20),
        }),
        ..Default::default()
    }
}

/// gRFC A31: the route's `max_stream_duration` bounds the call: a backend
/// slower than it fails the call with DEADLINE_EXCEEDED, though the
/// application set no deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_max_stream_duration_fails_a_slow_call_with_deadline_exceeded() {
    let backend = Backend::scripted(
        "slow",
        Script {
            delay: PATIENCE * 3,
            ..Script::default()
        },
    )
    .await;
    let (_testbed, channel) = serve(
        &backend,
        |config| {
            route_action(config).max_stream_duration = Some(MaxStreamDuration {
                max_stream_duration: millis(300),
                ..Default::default()
            });
        },
        None,
    )
    .await;
    let mut greeter = GreeterClient::new(channel);
    let status = hello(&mut greeter).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        status.message().contains("max_stream_duration"),
        "{status:?}"
    );
}

/// gRFC A44: the virtual host's retry policy applies to a route without
/// one: an attempt that fails with UNAVAILABLE is retried and the call
/// succeeds on the second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_failing_once_with_unavailable_succeeds_on_retry() {
    let script = Script {
        failures: 1,
        code: Code::Unavailable,
        ..Script::default()
    };
    let backend = Backend::scripted("flaky", script.clone()).await;
    let (_testbed, channel) = serve(
        &backend,
        |config| config.virtual_hosts[0].retry_policy = Some(retry_on("unavailable", 1)),
        None,
    )
    .await;
    let mut greeter = GreeterClient::new(channel);
    assert_eq!(hello(&mut greeter).await.unwrap(), "flaky");
    assert_eq!(script.calls(), 2, "one failed attempt, one retry");
}

/// gRFC A44: only the codes in `retry_on` are retried: PERMISSION_DENIED
/// reaches the application after one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_failing_with_a_code_not_in_retry_on_is_not_retried() {
    let script = Script {
        failures: 1,
        code: Code::PermissionDenied,
        ..Script::default()
    };
    let backend = Backend::scripted("strict", script.clone()).await;
    let (_testbed, channel) = serve(
        &backend,
        |config| route_action(config).retry_policy = Some(retry_on("unavailable,internal", 3)),
        None,
    )
    .await;
    let mut greeter = GreeterClient::new(channel);
    let status = hello(&mut greeter).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(script.calls(), 1);
}

/// gRFC A6 throttling: with `max_tokens` 4, the first failure leaves 3
/// tokens (above half: retried), the second 2 (not above half: the call
/// fails), and a second call fails after its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_throttling_stops_retries_once_the_bucket_drains() {
    let script = Script {
        failures: usize::MAX,
        code: Code::Unavailable,
        ..Script::default()
    };
    let backend = Backend::scripted("down", script.clone()).await;
    let (_testbed, channel) = serve(
        &backend,
        |config| route_action(config).retry_policy = Some(retry_on("unavailable", 4)),
        Some(RetryThrottling::new(4, 0.1).unwrap()),
    )
    .await;
    let mut greeter = GreeterClient::new(channel);
    for _ in 0..2 {
        let status = hello(&mut greeter).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    }
    assert_eq!(
        script.calls(),
        3,
        "two attempts, then one: the bucket is drained"
    );
}

/// gRFC A44: `num_retries` bounds the attempts: with 2 retries, a backend
/// that always fails is tried three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_stop_after_num_retries() {
    let script = Script {
        failures: usize::MAX,
        code: Code::Internal,
        ..Script::default()
    };
    let backend = Backend::scripted("broken", script.clone()).await;
    let (_testbed, channel) = serve(
        &backend,
        |config| route_action(config).retry_policy = Some(retry_on("internal", 2)),
        None,
    )
    .await;
    let mut greeter = GreeterClient::new(channel);
    let status = hello(&mut greeter).await.unwrap_err();
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(script.calls(), 3);
}
