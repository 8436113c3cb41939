//! The four pictures of one snapshot that has a bit of everything (two
//! authorities, weights, an aggregate, inline and EDS endpoints with and
//! without a locality, errors, an ambient error, collections, a hostile
//! name), compared byte for byte with the files in `golden/`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, CustomClusterType, DiscoveryType,
};
use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LocalityLbEndpoints};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, WeightedCluster,
};
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use prost::{Message, Name};
use xdsfed::core::error::{ErrorKind, XdsError};
use xdsfed::core::types::{ClusterView, LoadAssignment, RouteConfigView};
use xdsfed::graph::{
    CollectionUpdate, GraphEngine, GraphOptions, Provenance, Roots, Snapshot, Update,
};
use xdsfed::testbed::resources::{api_listener, cluster, endpoints, lb_endpoint, route_config};

use super::Model;

const FRONT: &str = "xdstp://cloud.example/envoy.config.listener.v3.Listener/front";
const ROUTES: &str = "xdstp://cloud.example/envoy.config.route.v3.RouteConfiguration/front";
const WEB: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/web";
const WEB_ENDPOINTS: &str =
    "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/web";
const API: &str = "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/api";
const API_ENDPOINTS: &str =
    "xdstp://onprem.example/envoy.config.endpoint.v3.ClusterLoadAssignment/api";
const EDGE: &str = "xdstp://cloud.example/envoy.config.listener.v3.Listener/edge/*";
const EDGE_ONE: &str = "xdstp://cloud.example/envoy.config.listener.v3.Listener/edge/one";
const POOL: &str = "xdstp://cloud.example/envoy.config.cluster.v3.ClusterCollection/pool";
const EXTRA: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/extra";
const HOSTILE: &str = "evil\n\x1b[31mred";

fn provenance(name: &str, version: &str) -> Provenance {
    Provenance::new(
        xdsfed::core::name::authority_of(name),
        "server.test:443",
        version,
    )
}

fn changed<T>(name: &str, value: T, version: &str) -> Update<T> {
    Update::Changed(Arc::new(value), provenance(name, version))
}

fn held(c: &Cluster) -> ClusterView {
    ClusterView::new(c).unwrap()
}

fn weighted(clusters: &[(&str, u32)]) -> Route {
    let clusters = clusters
        .iter()
        .map(|(name, weight)| ClusterWeight {
            name: (*name).into(),
            weight: Some(UInt32Value { value: *weight }),
            ..Default::default()
        })
        .collect();
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/split".into())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters,
                ..Default::default()
            })),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Weighted first, then each cluster by name: `web` again (the first
/// weight wins), the aggregate, the static cluster, one that does not
/// exist and one with a hostile name.
fn front_routes() -> RouteConfiguration {
    let mut rc = route_config(
        ROUTES,
        &[
            ("/web", WEB),
            ("/agg", "agg"),
            ("/static", "static"),
            ("/gone", "gone"),
            ("/evil", HOSTILE),
        ],
    );
    rc.virtual_hosts[0]
        .routes
        .insert(0, weighted(&[(WEB, 70), (API, 30)]));
    rc
}

fn aggregate(name: &str, leaves: &[&str]) -> Cluster {
    let config = ClusterConfig {
        clusters: leaves.iter().map(|c| (*c).to_owned()).collect(),
    };
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: "envoy.clusters.aggregate".into(),
            typed_config: Some(Any {
                type_url: ClusterConfig::type_url(),
                value: config.encode_to_vec(),
            }),
        })),
        ..Default::default()
    }
}

fn static_cluster(name: &str) -> Cluster {
    let mut cla = endpoints(name, &[("10.0.0.1", 80), ("10.0.0.2", 80)]);
    cla.endpoints[0].locality = Some(Locality {
        region: "eu".into(),
        zone: String::new(),
        sub_zone: "rack-1".into(),
    });
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        load_assignment: Some(cla),
        ..Default::default()
    }
}

/// `web`'s endpoints: a locality with a region and zone, then one without.
fn web_endpoints() -> LoadAssignment {
    let located = LocalityLbEndpoints {
        locality: Some(Locality {
            region: "cloud".into(),
            zone: "cloud-a".into(),
            sub_zone: String::new(),
        }),
        lb_endpoints: vec![
            lb_endpoint("127.0.0.1", 8080),
            lb_endpoint("127.0.0.2", 8080),
        ],
        ..Default::default()
    };
    let unplaced = LocalityLbEndpoints {
        lb_endpoints: vec![lb_endpoint("web.internal", 443)],
        ..Default::default()
    };
    LoadAssignment::new(&ClusterLoadAssignment {
        cluster_name: WEB_ENDPOINTS.into(),
        endpoints: vec![located, unplaced],
        ..Default::default()
    })
    .unwrap()
}

fn inline_listener(name: &str, routes: RouteConfiguration) -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::RouteConfig(routes)),
        ..Default::default()
    };
    let mut listener = api_listener(name, "");
    listener.api_listener = Some(ApiListener {
        api_listener: Some(Any {
            type_url: HttpConnectionManager::type_url(),
            value: hcm.encode_to_vec(),
        }),
    });
    listener
}

fn feed_front(engine: &mut GraphEngine, now: Instant) {
    engine.on_listener(
        now,
        FRONT,
        changed(FRONT, api_listener(FRONT, ROUTES), "l1"),
    );
    let routes = RouteConfigView::new(&front_routes()).unwrap();
    engine.on_route_config(now, ROUTES, changed(ROUTES, routes, "0123456789abcdef"));
    let web = held(&cluster(WEB, WEB_ENDPOINTS));
    engine.on_cluster(now, WEB, changed(WEB, web, "c7"));
    let rejected = XdsError::new(ErrorKind::Nacked, "version c8 rejected:\nbad\x1b[2J");
    engine.on_cluster(now, WEB, Update::AmbientError(rejected));
    engine.on_endpoints(
        now,
        WEB_ENDPOINTS,
        changed(WEB_ENDPOINTS, web_endpoints(), "e1"),
    );
    let api = held(&cluster(API, API_ENDPOINTS));
    engine.on_cluster(now, API, changed(API, api, "c1"));
    engine.on_endpoints(now, API_ENDPOINTS, Update::DoesNotExist);
    let agg = held(&aggregate("agg", &[API, "static"]));
    engine.on_cluster(now, "agg", changed("agg", agg, "a1"));
    let fixed = held(&static_cluster("static"));
    engine.on_cluster(now, "static", changed("static", fixed, "s1"));
    engine.on_cluster(now, "gone", Update::DoesNotExist);
    let hostile = LoadAssignment::new(&endpoints(HOSTILE, &[("10.9.9.9", 9)])).unwrap();
    let evil = held(&cluster(HOSTILE, ""));
    engine.on_cluster(now, HOSTILE, changed(HOSTILE, evil, "v\n2"));
    engine.on_endpoints(now, HOSTILE, changed(HOSTILE, hostile, "v3"));
}

fn feed_collections(engine: &mut GraphEngine, now: Instant) {
    let one = inline_listener(EDGE_ONE, route_config("one", &[("/", "static")]));
    let update = CollectionUpdate::Member(Arc::from(EDGE_ONE), changed(EDGE_ONE, one, "m1"));
    engine.on_listener_collection(now, EDGE, update);
    let listed = [WEB, EXTRA].iter().map(|n| Arc::from(*n)).collect();
    engine.on_cluster_collection(now, POOL, CollectionUpdate::Listed(listed));
    let extra = held(&static_cluster(EXTRA));
    let update = CollectionUpdate::Member(Arc::from(EXTRA), changed(EXTRA, extra, "x1"));
    engine.on_cluster_collection(now, POOL, update);
    let lost = XdsError::new(ErrorKind::Transient, "server lost");
    engine.on_cluster_collection(now, POOL, CollectionUpdate::Error(lost));
}

fn snapshot() -> Arc<Snapshot> {
    let now = Instant::now();
    let roots = Roots::new()
        .listener(FRONT)
        .listener_collection(EDGE)
        .cluster_collection(POOL);
    let options = GraphOptions::default().with_warming_timeout(Duration::from_secs(15));
    let mut engine = GraphEngine::new(roots, options, now);
    while engine.poll_watch().is_some() {}
    feed_front(&mut engine, now);
    feed_collections(&mut engine, now);
    while engine.poll_watch().is_some() {}
    match engine.poll_snapshot() {
        Some(snapshot) => snapshot,
        None => panic!("{} resources are still cold", engine.cold_count()),
    }
}

/// Where a golden file is, to rewrite it with `XDSFED_BLESS=1`.
fn golden(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/cli/render/golden")
        .join(name)
}

fn assert_golden(name: &str, drawn: &str) {
    let path = golden(name);
    if std::env::var_os("XDSFED_BLESS").is_some() {
        std::fs::write(&path, drawn).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert!(
        drawn == expected,
        "{name} differs from {}:\n{drawn}",
        path.display()
    );
}

/// What `draw` writes, as text.
fn drawn(draw: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    draw(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn tree_is_unchanged() {
    let snapshot = snapshot();
    let model = Model::of(&snapshot);
    assert_golden("tree.txt", &drawn(|out| model.tree(out)));
}

#[test]
fn dot_is_unchanged() {
    let snapshot = snapshot();
    let model = Model::of(&snapshot);
    assert_golden("dot.txt", &drawn(|out| model.dot(out)));
}

#[test]
fn mermaid_is_unchanged() {
    let snapshot = snapshot();
    let model = Model::of(&snapshot);
    assert_golden("mermaid.txt", &drawn(|out| model.mermaid(out)));
}

#[test]
fn json_is_unchanged() {
    let snapshot = snapshot();
    let model = Model::of(&snapshot);
    let json = serde_json::to_string(&model.json()).unwrap();
    assert_golden("json.txt", &json);
}
