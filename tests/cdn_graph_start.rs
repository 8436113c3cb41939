//! `xdsfed watch --graph` of a list collection on an HTTP CDN: start-up
//! fetches each file once.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use cli_fixture::{CLOUD, Fixture, ONPREM, Running, cluster_name};
use common::resources::{cluster_collection, locator};
use xdsfed::testbed::{Protocol, ServerSpec, Testbed};

const CDN: &str = "cdn.example";

/// Rule: the command opens the collection once to check its name before
/// the graph starts; that check shares the graph's subscription instead
/// of ending its own, so the collection's file is fetched once at start
/// (a CDN pays for every fetch, and a million clients multiply it).
#[test]
fn watch_graph_of_a_cdn_collection_fetches_it_once_at_start() {
    let fx = Fixture::start();
    let cdn = fx
        .runtime
        .block_on(Testbed::start([
            ServerSpec::new("cdn", [CDN]).with_protocol(Protocol::HttpCdn)
        ]))
        .unwrap();
    let pool = format!("xdstp://{CDN}/envoy.config.cluster.v3.ClusterCollection/pool");
    let members = [cluster_name(CLOUD, "web"), cluster_name(ONPREM, "api")];
    cdn.servers()[0]
        .set_resource(
            &pool,
            cluster_collection(members.iter().map(|m| locator(m)).collect()),
        )
        .unwrap();
    let ads = |name: &str| {
        let uri = fx.testbed.server(name).unwrap().uri();
        format!(
            r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}]}}"#
        )
    };
    let bootstrap = format!(
        r#"{{"node": {{"id": "cdn-graph"}},
            "xds_servers": {cloud_servers},
            "authorities": {{
              "{CLOUD}": {cloud},
              "{ONPREM}": {onprem},
              "{CDN}": {{"xds_servers": [{{"server_uri": "{cdn_uri}", "channel_creds": [{{"type": "insecure"}}],
                        "api_type": "HTTP_CDN", "refresh_delay": "600s", "request_timeout": "5s"}}]}}}}}}"#,
        cloud = ads("cloud"),
        cloud_servers =
            serde_json::from_str::<serde_json::Value>(&ads("cloud")).unwrap()["xds_servers"],
        onprem = ads("onprem"),
        cdn_uri = cdn.servers()[0].uri(),
    );
    let path = fx.write("cdn-bootstrap.json", &bootstrap);
    let mut watch = Running::spawn(&[
        "watch",
        "--bootstrap",
        path.to_str().unwrap(),
        "--graph",
        "--collection",
        "cluster",
        &pool,
    ]);
    watch.line_where("the collection", |l| {
        l == "Collection pool · cdn.example · 2 members"
    });
    watch.line_where("api's endpoint", |l| l.ends_with("127.0.0.1:9090"));
    let fetches: Vec<_> = cdn.servers()[0]
        .cdn_requests()
        .into_iter()
        .filter(|r| r.path.ends_with("v3.ClusterCollection/pool"))
        .collect();
    assert_eq!(fetches.len(), 1, "{fetches:?}");
}
