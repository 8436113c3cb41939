//! Engine tests: resource builders and a harness with a virtual clock.
//!
//! Every test drives the engine the way a driver would (feed updates, then
//! poll) and moves time only by advancing `now` by hand.

mod aggregate;
mod ahead;
mod authority;
mod collections;
mod errors;
mod gc;
mod leds;
mod leds_list;
mod routes;
mod sharing;
mod warming;

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, CustomClusterType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, ConfigSource};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, WeightedCluster,
};
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use envoy_types::pb::xds::core::v3::Authority;
use prost::Message;
use xdsfed_core::error::{Cause, ErrorKind, XdsError};
use xdsfed_core::types::LoadAssignment;
use xdsfed_core::types::{ClusterView, RouteConfigView};

use crate::{
    GraphEngine, GraphOptions, Provenance, ResourceKind, Roots, Snapshot, Update, WatchChange,
};

pub(super) const TIMEOUT: Duration = Duration::from_secs(15);

// ---- the client's errors ----

/// An error as the client reports a rejected resource.
pub(super) fn rejected(message: &str) -> XdsError {
    XdsError::new(ErrorKind::Nacked, message)
}

/// An error as the client reports a server it lost.
pub(super) fn transient(message: &str) -> XdsError {
    XdsError::new(ErrorKind::Transient, message).with_cause(Cause::StreamFailed)
}

// ---- resource builders ----

fn any<M: Message>(type_name: &str, m: &M) -> Any {
    Any {
        type_url: format!("type.googleapis.com/{type_name}"),
        value: m.encode_to_vec(),
    }
}

fn api_listener(name: &str, spec: RouteSpecifier) -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(spec),
        ..Default::default()
    };
    Listener {
        name: name.into(),
        api_listener: Some(ApiListener {
            api_listener: Some(any(
                "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                &hcm,
            )),
        }),
        ..Default::default()
    }
}

/// A client-side listener whose routes come from RDS.
pub(super) fn listener_rds(name: &str, route: &str) -> Listener {
    listener_rds_with_source(name, route, None)
}

/// As [`listener_rds`], with a `ConfigSource` beside the route name.
pub(super) fn listener_rds_with_source(
    name: &str,
    route: &str,
    source: Option<ConfigSource>,
) -> Listener {
    api_listener(
        name,
        RouteSpecifier::Rds(Rds {
            route_config_name: route.into(),
            config_source: source,
        }),
    )
}

/// A client-side listener with its route configuration inline.
pub(super) fn listener_inline(name: &str, rc: RouteConfiguration) -> Listener {
    api_listener(name, RouteSpecifier::RouteConfig(rc))
}

fn route_to(specifier: ClusterSpecifier) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(specifier),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A route configuration with one route per cluster.
pub(super) fn route_config(name: &str, clusters: &[&str]) -> RouteConfiguration {
    let routes = clusters
        .iter()
        .map(|c| route_to(ClusterSpecifier::Cluster((*c).into())))
        .collect();
    route_config_with(name, routes)
}

pub(super) fn route_config_with(name: &str, routes: Vec<Route>) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "default".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A route splitting traffic over `clusters`.
pub(super) fn weighted_route(clusters: &[&str]) -> Route {
    route_to(ClusterSpecifier::WeightedClusters(WeightedCluster {
        clusters: clusters
            .iter()
            .map(|c| ClusterWeight {
                name: (*c).into(),
                weight: Some(UInt32Value { value: 1 }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }))
}

/// A route choosing its cluster from a request header.
pub(super) fn header_route(header: &str) -> Route {
    route_to(ClusterSpecifier::ClusterHeader(header.into()))
}

/// `c` as the client holds it once validated.
pub(super) fn held(c: &Cluster) -> ClusterView {
    ClusterView::new(c).expect("a valid cluster")
}

/// An EDS cluster; `service` `None` leaves `service_name` empty.
pub(super) fn eds_cluster(name: &str, service: Option<&str>) -> Cluster {
    eds_cluster_with_source(name, service, None)
}

pub(super) fn eds_cluster_with_source(
    name: &str,
    service: Option<&str>,
    source: Option<ConfigSource>,
) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(source.unwrap_or_else(ads)),
            service_name: service.unwrap_or_default().into(),
        }),
        ..Default::default()
    }
}

/// A STATIC cluster with one endpoint inline: a leaf.
pub(super) fn static_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        load_assignment: Some(cla(name, 1)),
        ..Default::default()
    }
}

/// An aggregate cluster over `children`, in priority order.
pub(super) fn aggregate_cluster(name: &str, children: &[&str]) -> Cluster {
    let config = ClusterConfig {
        clusters: children.iter().map(|c| (*c).to_owned()).collect(),
    };
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: "envoy.clusters.aggregate".into(),
            typed_config: Some(any(
                "envoy.extensions.clusters.aggregate.v3.ClusterConfig",
                &config,
            )),
        })),
        ..Default::default()
    }
}

/// A ClusterLoadAssignment with `n` endpoints in one locality.
pub(super) fn cla(name: &str, n: usize) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: (0..n)
                .map(|i| endpoint(&format!("10.0.0.{i}"), 1))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An endpoint at `address`, port 80, with `weight`.
pub(super) fn endpoint(address: &str, weight: u32) -> LbEndpoint {
    use envoy_types::pb::envoy::config::core::v3::{
        Address, SocketAddress, address, socket_address,
    };
    use envoy_types::pb::envoy::config::endpoint::v3::{Endpoint, lb_endpoint};
    let socket = SocketAddress {
        address: address.into(),
        port_specifier: Some(socket_address::PortSpecifier::PortValue(80)),
        ..Default::default()
    };
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(socket)),
            }),
            ..Default::default()
        })),
        load_balancing_weight: Some(envoy_types::pb::google::protobuf::UInt32Value {
            value: weight,
        }),
        ..Default::default()
    }
}

/// A ConfigSource (ADS) whose `authorities` list `names`.
pub(super) fn config_source(names: &[&str]) -> ConfigSource {
    ConfigSource {
        authorities: names
            .iter()
            .map(|n| Authority { name: (*n).into() })
            .collect(),
        ..ads()
    }
}

/// `ads`: the bootstrap's servers, which validation requires at least.
pub(super) fn ads() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// The server every resource of the harness comes from.
pub(super) const SERVER: &str = "server.test:443";

/// A ConfigSource whose `authorities` list `names` and that names its own
/// server (`AGGREGATED_DELTA_GRPC` to `target`).
pub(super) fn server_source(names: &[&str], target: &str) -> ConfigSource {
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    use envoy_types::pb::envoy::config::core::v3::grpc_service::{GoogleGrpc, TargetSpecifier};
    use envoy_types::pb::envoy::config::core::v3::{ApiConfigSource, GrpcService};
    ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
            api_type: 6, // AGGREGATED_DELTA_GRPC
            grpc_services: vec![GrpcService {
                target_specifier: Some(TargetSpecifier::GoogleGrpc(GoogleGrpc {
                    target_uri: target.into(),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..config_source(names)
    }
}

// ---- harness ----

/// An engine and a virtual clock.
pub(super) struct Harness {
    pub(super) engine: GraphEngine,
    pub(super) now: Instant,
}

impl Harness {
    pub(super) fn new(roots: Roots) -> Self {
        Self::with_options(roots, GraphOptions::default().with_warming_timeout(TIMEOUT))
    }

    pub(super) fn with_options(roots: Roots, opts: GraphOptions) -> Self {
        let now = Instant::now();
        Self {
            engine: GraphEngine::new(roots, opts, now),
            now,
        }
    }

    pub(super) fn advance(&mut self, by: Duration) {
        self.now += by;
        self.engine.handle_timeout(self.now);
    }

    pub(super) fn provenance(name: &str, version: &str) -> Provenance {
        Provenance::new(xdsfed_core::name::authority_of(name), SERVER, version)
    }

    pub(super) fn listener(&mut self, l: Listener, version: &str) {
        let name = l.name.clone();
        let p = Self::provenance(&name, version);
        self.engine
            .on_listener(self.now, &name, Update::Changed(Arc::new(l), p));
    }

    pub(super) fn route(&mut self, rc: RouteConfiguration, version: &str) {
        let name = rc.name.clone();
        let p = Self::provenance(&name, version);
        self.engine.on_route_config(
            self.now,
            &name,
            Update::Changed(
                Arc::new(RouteConfigView::new(&rc).expect("a valid route configuration")),
                p,
            ),
        );
    }

    pub(super) fn cluster(&mut self, c: Cluster, version: &str) {
        let name = c.name.clone();
        let p = Self::provenance(&name, version);
        self.engine
            .on_cluster(self.now, &name, Update::Changed(Arc::new(held(&c)), p));
    }

    pub(super) fn endpoints(&mut self, c: ClusterLoadAssignment, version: &str) {
        let name = c.cluster_name.clone();
        let p = Self::provenance(&name, version);
        let held = LoadAssignment::new(&c).expect("a valid test assignment");
        self.engine
            .on_endpoints(self.now, &name, Update::Changed(Arc::new(held), p));
    }

    /// Drains the watch changes, as `(kind, name)` for watches and
    /// unwatches separately.
    pub(super) fn watch_changes(&mut self) -> WatchLog {
        let mut log = WatchLog::default();
        while let Some(change) = self.engine.poll_watch() {
            match change {
                WatchChange::Watch { kind, name, .. } => log.watched.push((kind, name.to_string())),
                WatchChange::Unwatch { kind, name } => log.unwatched.push((kind, name.to_string())),
                WatchChange::WatchAll { kind } => log.wildcard.push(kind),
                WatchChange::WatchCollection { kind, name } => {
                    log.collections.push((kind, name.to_string()))
                }
            }
        }
        log
    }

    pub(super) fn snapshot(&mut self) -> Option<Arc<Snapshot>> {
        self.engine.poll_snapshot()
    }

    /// The snapshot that must be ready now.
    pub(super) fn ready(&mut self) -> Arc<Snapshot> {
        match self.engine.poll_snapshot() {
            Some(s) => s,
            None => panic!(
                "no snapshot: {} reachable resources still cold",
                self.engine.cold_count()
            ),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct WatchLog {
    pub(super) watched: Vec<(ResourceKind, String)>,
    pub(super) unwatched: Vec<(ResourceKind, String)>,
    pub(super) wildcard: Vec<ResourceKind>,
    pub(super) collections: Vec<(ResourceKind, String)>,
}

pub(super) fn key(kind: ResourceKind, name: &str) -> (ResourceKind, String) {
    (kind, name.to_owned())
}

/// A listener `l` → RDS `r` → EDS clusters `clusters` (service = cluster
/// name), all delivered and warm.
pub(super) fn warm_graph(clusters: &[&str]) -> Harness {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", clusters), "1");
    for c in clusters {
        h.cluster(eds_cluster(c, None), "1");
        h.endpoints(cla(c, 2), "1");
    }
    h
}
