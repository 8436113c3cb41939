use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy as LbPolicyEnum;
use envoy_types::pb::envoy::config::core::v3::HealthStatus::Healthy;
use http::HeaderMap;
use xdsfed_graph::Roots;
use xdsfed_testbed::resources::{api_listener, route_config};

use super::*;
use crate::endpoint::EndpointService;
use crate::error::BoxError;
use crate::routing::RequestView;
use crate::test_support::{Resources, assignment, eds_cluster, locality};

fn resources(routes: &[(&str, &str)], ports: &[u32]) -> Resources {
    let endpoints: Vec<_> = ports.iter().map(|p| ("10.0.0.1", *p, Healthy, 0)).collect();
    let mut res = Resources::default()
        .listener(api_listener("front", "front-routes"))
        .route_config(route_config("front-routes", routes));
    for (_, cluster) in routes {
        res = res
            .cluster(eds_cluster(cluster))
            .assignment(assignment(cluster, vec![locality(0, 1, &endpoints)]));
    }
    res
}

fn follower() -> Follower {
    let connector = |_: &crate::ConnectTarget<'_>| -> Result<crate::Connecting, BoxError> {
        Ok(Box::pin(async {
            Ok(EndpointService::new(tower::service_fn(|_| async {
                Ok::<_, BoxError>(http::Response::new(tonic::body::Body::empty()))
            })))
        }))
    };
    Follower::new(
        "front".into(),
        "svc".into(),
        Arc::new(connector),
        Arc::new(ArcSwapOption::empty()),
        watch::channel(0).0,
    )
}

/// The target the published routing gives `path`.
fn target(f: &Follower, path: &str) -> Arc<Target> {
    let routing = f.routing.load_full().expect("published");
    let table = routing.table.as_ref().expect("the listener is usable");
    let headers = HeaderMap::new();
    let request = RequestView {
        authority: "svc",
        path,
        method: "POST",
        headers: &headers,
    };
    Arc::clone(table.route(&request, || 0).expect("a route matches"))
}

fn balancer(target: &Target) -> &Arc<ClusterBalancer> {
    match target {
        Target::Cluster(b) => b,
        Target::Unavailable(why) => panic!("unavailable: {why}"),
    }
}

#[tokio::test]
async fn a_cluster_that_stays_keeps_its_balancer_across_snapshots() {
    let mut f = follower();
    let roots = || Roots::new().listener("front");
    f.apply(resources(&[("/", "a")], &[1, 2]).snapshot(roots()));
    let first = Arc::clone(balancer(&target(&f, "/x")));
    f.apply(resources(&[("/", "a")], &[2, 3]).snapshot(roots()));
    let second = Arc::clone(balancer(&target(&f, "/x")));
    assert!(
        Arc::ptr_eq(&first, &second),
        "same cluster, same policy: same balancer"
    );
    assert_eq!(*f.generation.borrow(), 2);
}

#[tokio::test]
async fn a_policy_change_builds_a_new_balancer_and_unused_clusters_are_dropped() {
    let mut f = follower();
    let roots = || Roots::new().listener("front");
    f.apply(resources(&[("/a/", "a"), ("/b/", "b")], &[1]).snapshot(roots()));
    let first = Arc::clone(balancer(&target(&f, "/a/x")));

    let mut least_request = crate::test_support::eds_cluster("a");
    least_request.lb_policy = LbPolicyEnum::LeastRequest as i32;
    let res = resources(&[("/a/", "a")], &[1]).cluster(least_request);
    f.apply(res.snapshot(roots()));
    let second = Arc::clone(balancer(&target(&f, "/a/x")));
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(f.clusters.contains_key("a"));
    assert!(!f.clusters.contains_key("b"), "no route reaches b any more");
}

#[tokio::test]
async fn a_listener_that_does_not_exist_makes_every_request_fail_naming_it() {
    let mut f = follower();
    f.apply(Resources::default().snapshot(Roots::new().listener("front")));
    let routing = f.routing.load_full().expect("published");
    let error = routing.table.as_ref().map(drop).unwrap_err();
    assert!(error.to_string().contains(r#""front""#), "{error}");
}
