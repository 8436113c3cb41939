//! Builders of valid Envoy resources.

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster,
    cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ConfigSource, SocketAddress, address, config_source,
    socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

pub fn pack<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

pub fn ads() -> ConfigSource {
    ConfigSource {
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

/// An EDS cluster that fails validation: its EDS config source is neither ADS nor self.
pub fn invalid_cluster(name: &str) -> Cluster {
    let mut c = cluster(name, "");
    if let Some(eds) = c.eds_cluster_config.as_mut() {
        eds.eds_config = Some(ConfigSource::default());
    }
    c
}

pub fn endpoints(cluster: &str, addrs: &[(&str, u32)]) -> ClusterLoadAssignment {
    let lb_endpoints = addrs
        .iter()
        .map(|(host, port)| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
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
