//! Builders of valid Envoy resources, for scenarios written in Rust, tests
//! and benchmarks: an API listener fetching its routes through RDS, a route
//! configuration, an EDS cluster, its endpoints (inline or through LEDS, a
//! glob or an `LbEndpointCollection`), and TP1 list collections.
//!
//! ```
//! use xdsfed_testbed::resources::{api_listener, cluster, endpoints, route_config};
//!
//! let listener = api_listener("front", "front-routes");
//! let routes = route_config("front-routes", &[("/", "backend")]);
//! let backend = cluster("backend", "backend-endpoints");
//! let assignment = endpoints("backend-endpoints", &[("127.0.0.1", 8080)]);
//! assert_eq!(routes.virtual_hosts[0].routes.len(), 1);
//! # let _ = (listener, backend, assignment);
//! ```

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, ClusterCollection,
    cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, SelfConfigSource, SocketAddress,
    address, config_source, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LbEndpointCollection, LedsClusterLocalityConfig,
    LocalityLbEndpoints, lb_endpoint, locality_lb_endpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener, ListenerCollection};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::collection_entry::{InlineEntry, ResourceSpecifier};
use envoy_types::pb::xds::core::v3::{CollectionEntry, ResourceLocator, resource_locator};
use prost::{Message, Name};

/// The Cluster type URL (CDS).
pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// The ClusterLoadAssignment type URL (EDS).
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// The Listener type URL (LDS).
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// The RouteConfiguration type URL (RDS).
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// The LbEndpoint type URL (LEDS, delta xDS only).
pub const LEDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";

/// `m` packed in an `Any` with its type URL.
pub fn pack<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

/// A v3 `ConfigSource` that says "over the ADS stream".
pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource::default(),
        )),
        ..Default::default()
    }
}

/// An EDS cluster; `service` names its endpoints (empty: the cluster's name).
pub fn cluster(name: &str, service: &str) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: service.into(),
        }),
        ..Default::default()
    }
}

/// One endpoint, `host:port`: an entry of a locality's `lb_endpoints`, and
/// on its own a LEDS resource (`envoy.config.endpoint.v3.LbEndpoint`).
pub fn lb_endpoint(host: &str, port: u32) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: host.into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A ClusterLoadAssignment named `cluster` whose one locality takes its
/// endpoints from the LEDS glob collection `collection`
/// (`xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*`, xDS TP1), over
/// ADS. Serve the members as `LbEndpoint`s named under the glob; clients
/// fetch them with delta xDS only.
pub fn leds_endpoints(cluster: &str, collection: &str) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_config: Some(locality_lb_endpoints::LbConfig::LedsClusterLocalityConfig(
                LedsClusterLocalityConfig {
                    leds_config: Some(ads()),
                    leds_collection_name: collection.into(),
                },
            )),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A ClusterLoadAssignment named `cluster` whose one locality takes its
/// endpoints from the LEDS list collection `collection`
/// (`xdstp://a/envoy.config.endpoint.v3.LbEndpointCollection/pool`,
/// gRFC A95), through `self`. Serve it with [`lb_endpoint_collection`];
/// clients fetch it over SotW or delta.
pub fn leds_list_endpoints(cluster: &str, collection: &str) -> ClusterLoadAssignment {
    let mut cla = leds_endpoints(cluster, collection);
    for locality in &mut cla.endpoints {
        if let Some(locality_lb_endpoints::LbConfig::LedsClusterLocalityConfig(leds)) =
            locality.lb_config.as_mut()
        {
            leds.leds_config = Some(ConfigSource {
                config_source_specifier: Some(config_source::ConfigSourceSpecifier::Self_(
                    SelfConfigSource::default(),
                )),
                resource_api_version: ApiVersion::V3 as i32,
                ..Default::default()
            });
        }
    }
    cla
}

/// An LEDS list collection (gRFC A95): each `(entry name, host, port)` an
/// inline `LbEndpoint` ("" for an anonymous entry).
pub fn lb_endpoint_collection(endpoints: &[(&str, &str, u32)]) -> LbEndpointCollection {
    let entries = endpoints
        .iter()
        .map(|(name, host, port)| CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::InlineEntry(InlineEntry {
                name: (*name).into(),
                version: port.to_string(),
                resource: Some(pack(&lb_endpoint(host, *port))),
            })),
        })
        .collect();
    LbEndpointCollection { entries }
}

/// A ClusterLoadAssignment named `cluster` with one locality holding the
/// endpoints `addrs` (host, port).
pub fn endpoints(cluster: &str, addrs: &[(&str, u32)]) -> ClusterLoadAssignment {
    let lb_endpoints = addrs
        .iter()
        .map(|(host, port)| lb_endpoint(host, *port))
        .collect();
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// An API listener (as gRPC clients use) whose HttpConnectionManager fetches
/// `route_config` through RDS over ADS.
pub fn api_listener(name: &str, route_config: &str) -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            route_config_name: route_config.into(),
            config_source: Some(ads()),
        })),
        ..Default::default()
    };
    Listener {
        name: name.into(),
        api_listener: Some(ApiListener {
            api_listener: Some(pack(&hcm)),
        }),
        ..Default::default()
    }
}

/// A route configuration with one virtual host for every domain; each
/// `(prefix, cluster)` pair is a route.
pub fn route_config(name: &str, routes: &[(&str, &str)]) -> RouteConfiguration {
    let routes = routes
        .iter()
        .map(|(prefix, cluster)| Route {
            name: (*prefix).into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix((*prefix).into())),
                ..Default::default()
            }),
            action: Some(Action::Route(RouteAction {
                cluster_specifier: Some(ClusterSpecifier::Cluster((*cluster).into())),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A locator entry for `xdstp://authority/type/id` (no context parameters).
pub fn locator(name: &str) -> CollectionEntry {
    let rest = name.strip_prefix("xdstp://").unwrap_or(name);
    let mut parts = rest.splitn(3, '/');
    let (authority, resource_type, id) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    CollectionEntry {
        resource_specifier: Some(ResourceSpecifier::Locator(ResourceLocator {
            scheme: resource_locator::Scheme::Xdstp as i32,
            authority: authority.into(),
            resource_type: resource_type.into(),
            id: id.into(),
            ..Default::default()
        })),
    }
}

/// An inline cluster entry named `name` ("" for an anonymous one).
pub fn inline(name: &str, service: &str) -> CollectionEntry {
    CollectionEntry {
        resource_specifier: Some(ResourceSpecifier::InlineEntry(InlineEntry {
            name: name.into(),
            version: service.into(),
            resource: Some(pack(&cluster(name, service))),
        })),
    }
}

/// A cluster list collection. TP1 defines `<T>Collection` as `repeated
/// CollectionEntry resources = 1`; envoy-types declares `ClusterCollection`'s
/// field singular, so the body is encoded with the listener collection's
/// (same wire shape) and typed as a cluster collection.
pub fn cluster_collection(entries: Vec<CollectionEntry>) -> Any {
    Any {
        type_url: ClusterCollection::type_url(),
        value: ListenerCollection { entries }.encode_to_vec(),
    }
}
