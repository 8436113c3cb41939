//! A channel before and without configuration: the first call waits for
//! the first snapshot, bounded by the ready timeout; targets the bootstrap
//! cannot resolve are refused when the channel is built (gRFC A47).

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use tonic::Code;
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed_core::authority::AuthorityError;
use xdsfed_graph::GraphOptions;
use xdsfed_testbed::resources::{LDS, api_listener, cluster};
use xdsfed_testbed::{Faults, ServerSpec, Tarpit, Testbed};
use xdsfed_tonic::{ChannelBuilder, ChannelError};

use common::*;

/// gRPC holds calls while the channel is CONNECTING: a call made before
/// any resource exists completes once the configuration arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_before_the_first_snapshot_waits_for_it() {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let b = backends(&["late"]).await;
    // Listeners are held back until the test releases them.
    server.set_faults(Faults {
        silent_types: [LDS.to_owned()].into(),
        ..Faults::default()
    });
    let all = route("all", PathSpecifier::Prefix("/".into()), to_cluster("late"));
    server
        .set_message("greeter-routes", &routes("greeter-routes", vec![all]))
        .unwrap();
    server
        .set_message("late", &cluster("late", "late-endpoints"))
        .unwrap();
    server
        .set_message("late-endpoints", &assignment("late-endpoints", &[&b[0]]))
        .unwrap();
    // The default does-not-exist timer (longer than the test), so that the
    // held listener stays cold rather than absent.
    let client = xdsfed_client::client::XdsClient::builder(bootstrap(&server.uri(), &[]))
        .build()
        .unwrap();
    let channel = ChannelBuilder::with_client("xds:///greeter", client)
        .ready_timeout(PATIENCE)
        .build()
        .unwrap();
    let mut greeter = GreeterClient::new(channel.clone());
    let call = tokio::spawn(async move { hello(&mut greeter).await });

    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!call.is_finished(), "the call waits for configuration");
    assert!(channel.snapshot().is_none());
    // Stored while still held, then released: the release pushes it.
    server
        .set_message("greeter", &api_listener("greeter", "greeter-routes"))
        .unwrap();
    server.set_faults(Faults::default());
    assert_eq!(call.await.unwrap().unwrap(), "late");
}

/// The wait is bounded: with a control plane that never answers, a call
/// fails with UNAVAILABLE once the ready timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_fails_with_unavailable_when_no_configuration_arrives_in_time() {
    let tarpit = Tarpit::bind().await.unwrap();
    let channel =
        ChannelBuilder::with_client("xds:///greeter", client(bootstrap(&tarpit.uri(), &[])))
            .graph_options(GraphOptions::default().with_warming_timeout(Duration::from_secs(60)))
            .ready_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
    let status = hello(&mut GreeterClient::new(channel.clone()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status
            .message()
            .contains("no xDS configuration for listener \"greeter\""),
        "{status:?}"
    );
    assert_eq!(channel.ready().await.unwrap_err().code(), Code::Unavailable);
}

/// gRFC A74: a listener that does not exist makes the channel fail calls,
/// naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_that_does_not_exist_fails_calls_naming_it() {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let channel = channel("xds:///absent", client(bootstrap(&server.uri(), &[])));
    let status = hello(&mut GreeterClient::new(channel)).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains(r#""absent""#), "{status:?}");
}

/// gRFC A47: `xds://authority/svc` with an authority the bootstrap lacks is
/// an invalid target.
#[tokio::test]
async fn an_unknown_target_authority_is_refused_when_building() {
    let bootstrap = bootstrap(
        "http://127.0.0.1:1",
        &[("cloud.example", "http://127.0.0.1:1")],
    );
    let error = ChannelBuilder::new("xds://elsewhere.example/svc", bootstrap)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            error,
            ChannelError::Target(AuthorityError::UnknownTargetAuthority { .. })
        ),
        "{error}"
    );
}
