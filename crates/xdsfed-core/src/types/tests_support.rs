//! Builders of valid Envoy resources, for tests.

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster,
    cluster::{ClusterDiscoveryType, CustomClusterType, DiscoveryType, EdsClusterConfig},
};
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ConfigSource, SocketAddress, address, config_source, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route, route_action,
    route_match,
};
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

pub(crate) fn ads() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource::default(),
        )),
        ..Default::default()
    }
}

pub(crate) fn pack<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

pub(crate) fn api_listener_with(hcm: HttpConnectionManager) -> Listener {
    Listener {
        name: "l".into(),
        api_listener: Some(ApiListener {
            api_listener: Some(pack(&hcm)),
        }),
        ..Default::default()
    }
}

pub(crate) fn api_listener_rds(name: &str, route_config_name: &str) -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: route_config_name.into(),
        })),
        ..Default::default()
    };
    Listener {
        name: name.into(),
        ..api_listener_with(hcm)
    }
}

pub(crate) fn route_config(name: &str, clusters: &[&str]) -> RouteConfiguration {
    let routes = clusters
        .iter()
        .map(|c| Route {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix(format!("/{c}"))),
                ..Default::default()
            }),
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster((*c).into())),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "vh".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub(crate) fn route_action_mut(rc: &mut RouteConfiguration) -> &mut RouteAction {
    match rc.virtual_hosts[0].routes[0].action.as_mut() {
        Some(route::Action::Route(a)) => a,
        _ => unreachable!("route_config builds route actions"),
    }
}

pub(crate) fn eds_cluster(name: &str, service_name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: service_name.into(),
        }),
        ..Default::default()
    }
}

pub(crate) fn aggregate_cluster(name: &str, children: &[&str]) -> Cluster {
    let config = ClusterConfig {
        clusters: children.iter().map(|c| (*c).into()).collect(),
    };
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: super::cluster::AGGREGATE_CLUSTER_TYPE.into(),
            typed_config: Some(pack(&config)),
        })),
        ..Default::default()
    }
}

pub(crate) fn load_assignment(cluster: &str, endpoints: &[(&str, u32)]) -> ClusterLoadAssignment {
    let lb_endpoints = endpoints
        .iter()
        .map(|(host, port)| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(envoy_types::pb::envoy::config::core::v3::Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: (*host).into(),
                        port_specifier: Some(socket_address::PortSpecifier::PortValue(*port)),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        })
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
