//! Routing end to end: weighted clusters, path and header routes to
//! clusters on two authorities served by two servers, and routes whose
//! cluster cannot be used, over loopback against the testbed.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, RouteAction, WeightedCluster};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::UInt32Value;
use tonic::Code;
use xdsfed::proto::greeter::v1::HelloRequest;
use xdsfed::proto::greeter::v1::greeter_client::GreeterClient;
use xdsfed_testbed::resources::{api_listener, cluster};
use xdsfed_testbed::{ServerSpec, Testbed};
use xdsfed_tonic::XdsChannel;

use common::*;

/// xdstp names on `authority`, as gRFC A47's templates produce them.
fn xdstp(authority: &str, kind: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.{kind}/{id}")
}

/// gRFC A28: weighted clusters split traffic by weight. Over 2 000
/// requests an 80/20 split lands within ±5 points. The target names an
/// authority, so the listener name comes from its template (gRFC A47).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_clusters_split_requests_by_weight() {
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])])
        .await
        .unwrap();
    let server = testbed.server("cloud").unwrap();
    let b = backends(&["heavy", "light"]).await;
    let name = |kind: &str, id: &str| xdstp("cloud.example", kind, id);
    let listener = name("listener.v3.Listener", "greeter");
    let rds = name("route.v3.RouteConfiguration", "greeter");
    server
        .set_message(&listener, &api_listener(&listener, &rds))
        .unwrap();
    let weighted = Action::Route(RouteAction {
        cluster_specifier: Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: [("heavy", 80), ("light", 20)]
                .iter()
                .map(|(id, weight)| ClusterWeight {
                    name: name("cluster.v3.Cluster", id),
                    weight: Some(UInt32Value { value: *weight }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })),
        ..Default::default()
    });
    let all = route("split", PathSpecifier::Prefix("/".into()), weighted);
    server.set_message(&rds, &routes(&rds, vec![all])).unwrap();
    for backend in &b {
        let cluster_name = name("cluster.v3.Cluster", &backend.name);
        let eds_name = name("endpoint.v3.ClusterLoadAssignment", &backend.name);
        server
            .set_message(&cluster_name, &cluster(&cluster_name, &eds_name))
            .unwrap();
        server
            .set_message(&eds_name, &assignment(&eds_name, &[backend]))
            .unwrap();
    }
    let bootstrap = bootstrap(&server.uri(), &[("cloud.example", &server.uri())]);
    let channel = channel("xds://cloud.example/greeter", client(bootstrap));
    assert_eq!(channel.listener(), listener);

    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let mut greeter = GreeterClient::new(channel.clone());
            tokio::spawn(async move {
                let mut heavy = 0;
                for _ in 0..250 {
                    if hello(&mut greeter).await.unwrap() == "heavy" {
                        heavy += 1;
                    }
                }
                heavy
            })
        })
        .collect();
    let mut heavy = 0;
    for task in tasks {
        heavy += task.await.unwrap();
    }
    let percent = heavy as f64 * 100.0 / 2000.0;
    assert!(
        (75.0..=85.0).contains(&percent),
        "{heavy} of 2000 requests ({percent:.1}%) went to the 80% cluster"
    );
}

fn exact_header(name: &str, value: &str) -> HeaderMatcher {
    HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(value.into())),
            ignore_case: false,
        })),
        ..Default::default()
    }
}

async fn call(
    client: &mut GreeterClient<XdsChannel>,
    goodbye: bool,
    tier: Option<&str>,
) -> Result<String, tonic::Status> {
    let mut request = tonic::Request::new(HelloRequest {
        name: "test".into(),
    });
    if let Some(tier) = tier {
        request
            .metadata_mut()
            .insert("x-tier", tier.parse().unwrap());
    }
    let reply = if goodbye {
        client.say_goodbye(request).await
    } else {
        client.say_hello(request).await
    };
    reply.map(|r| r.into_inner().backend)
}

/// gRFC A28: routes are tried in order; one matches a header and sends to
/// a cluster on a second authority served by a second server, one matches
/// a path, the last takes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_and_header_routes_reach_clusters_on_two_authorities() {
    let testbed = Testbed::start([
        ServerSpec::new("cloud", ["cloud.example"]),
        ServerSpec::new("onprem", ["onprem.example"]),
    ])
    .await
    .unwrap();
    let (cloud, onprem) = (
        testbed.server("cloud").unwrap(),
        testbed.server("onprem").unwrap(),
    );
    let b = backends(&["gold", "farewell", "main"]).await;
    let gold = xdstp("onprem.example", "cluster.v3.Cluster", "gold");
    let gold_eds = xdstp(
        "onprem.example",
        "endpoint.v3.ClusterLoadAssignment",
        "gold",
    );
    onprem
        .set_message(&gold, &cluster(&gold, &gold_eds))
        .unwrap();
    onprem
        .set_message(&gold_eds, &assignment(&gold_eds, &[&b[0]]))
        .unwrap();
    for backend in &b[1..] {
        let eds = format!("{}-endpoints", backend.name);
        cloud
            .set_message(&backend.name, &cluster(&backend.name, &eds))
            .unwrap();
        cloud
            .set_message(&eds, &assignment(&eds, &[backend]))
            .unwrap();
    }
    let mut by_header = route("gold", PathSpecifier::Prefix("/".into()), to_cluster(&gold));
    if let Some(m) = by_header.r#match.as_mut() {
        m.headers.push(exact_header("x-tier", "gold"));
    }
    let by_path = route(
        "goodbye",
        PathSpecifier::Path(SAY_GOODBYE.into()),
        to_cluster("farewell"),
    );
    let rest = route(
        "rest",
        PathSpecifier::Prefix("/".into()),
        to_cluster("main"),
    );
    cloud
        .set_message("greeter", &api_listener("greeter", "greeter-routes"))
        .unwrap();
    cloud
        .set_message(
            "greeter-routes",
            &routes("greeter-routes", vec![by_header, by_path, rest]),
        )
        .unwrap();
    let bootstrap = bootstrap(
        &cloud.uri(),
        &[
            ("cloud.example", &cloud.uri()),
            ("onprem.example", &onprem.uri()),
        ],
    );
    let mut greeter = GreeterClient::new(channel("xds:///greeter", client(bootstrap)));

    assert_eq!(call(&mut greeter, false, None).await.unwrap(), "main");
    assert_eq!(call(&mut greeter, true, None).await.unwrap(), "farewell");
    assert_eq!(
        call(&mut greeter, false, Some("gold")).await.unwrap(),
        "gold"
    );
    // The header route comes first, so it wins over the path route.
    assert_eq!(
        call(&mut greeter, true, Some("gold")).await.unwrap(),
        "gold"
    );
    assert_eq!(
        call(&mut greeter, true, Some("silver")).await.unwrap(),
        "farewell"
    );
}

/// gRPC's xDS resolver: a route whose cluster does not exist fails the
/// requests it takes with UNAVAILABLE, naming the cluster, while the other
/// routes keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_to_a_missing_cluster_fails_with_unavailable_naming_it() {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let b = backends(&["main"]).await;
    server
        .set_message("main", &cluster("main", "main-endpoints"))
        .unwrap();
    server
        .set_message("main-endpoints", &assignment("main-endpoints", &[&b[0]]))
        .unwrap();
    let broken = route(
        "goodbye",
        PathSpecifier::Path(SAY_GOODBYE.into()),
        to_cluster("nowhere"),
    );
    let rest = route(
        "rest",
        PathSpecifier::Prefix("/".into()),
        to_cluster("main"),
    );
    server
        .set_message("greeter", &api_listener("greeter", "greeter-routes"))
        .unwrap();
    server
        .set_message(
            "greeter-routes",
            &routes("greeter-routes", vec![broken, rest]),
        )
        .unwrap();
    let mut greeter = GreeterClient::new(channel(
        "xds:///greeter",
        client(bootstrap(&server.uri(), &[])),
    ));

    for _ in 0..3 {
        let status = call(&mut greeter, true, None).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(status.message().contains(r#""nowhere""#), "{status:?}");
        assert_eq!(call(&mut greeter, false, None).await.unwrap(), "main");
    }
}

/// gRFC A48 and the crate's contract: LEAST_REQUEST is served; a policy
/// the crate does not implement fails its routes, naming the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_request_is_served_and_maglev_is_refused_by_name() {
    let testbed = Testbed::start([ServerSpec::new("main", ["main.example"])])
        .await
        .unwrap();
    let server = testbed.server("main").unwrap();
    let b = backends(&["least", "maglev"]).await;
    for (backend, policy) in b.iter().zip([LbPolicy::LeastRequest, LbPolicy::Maglev]) {
        let eds = format!("{}-endpoints", backend.name);
        let mut c = cluster(&backend.name, &eds);
        c.lb_policy = policy as i32;
        server.set_message(&backend.name, &c).unwrap();
        server
            .set_message(&eds, &assignment(&eds, &[backend]))
            .unwrap();
    }
    let maglev = route(
        "maglev",
        PathSpecifier::Path(SAY_GOODBYE.into()),
        to_cluster("maglev"),
    );
    let least = route(
        "least",
        PathSpecifier::Prefix("/".into()),
        to_cluster("least"),
    );
    server
        .set_message("greeter", &api_listener("greeter", "greeter-routes"))
        .unwrap();
    server
        .set_message(
            "greeter-routes",
            &routes("greeter-routes", vec![maglev, least]),
        )
        .unwrap();
    let mut greeter = GreeterClient::new(channel(
        "xds:///greeter",
        client(bootstrap(&server.uri(), &[])),
    ));

    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..10 {
        *counts
            .entry(call(&mut greeter, false, None).await.unwrap())
            .or_default() += 1;
    }
    assert_eq!(counts.get("least"), Some(&10));
    let status = call(&mut greeter, true, None).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(status.message().contains("MAGLEV"), "{status:?}");
    assert!(
        status.message().contains(r#"cluster "maglev""#),
        "{status:?}"
    );
}
