//! Resources for the crate's unit tests.
// Test support: a builder that fails is a broken test, said loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::types::Decoded;

/// A valid cluster named `name`, told apart from other copies by
/// `alt_stat_name`.
pub fn cluster_copy(name: &str, alt_stat_name: &str) -> Decoded {
    use crate::types::{ClusterType, Erased, ErasedType};
    use prost::Message;
    Erased::<ClusterType>::new()
        .decode(cluster_message(name, alt_stat_name).encode_to_vec().into())
        .expect("a valid cluster")
}

/// The message of [`cluster_copy`], for a server to send: encoding it
/// needs no validation.
pub fn cluster_message(
    name: &str,
    alt_stat_name: &str,
) -> envoy_types::pb::envoy::config::cluster::v3::Cluster {
    use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
    use envoy_types::pb::envoy::config::core::v3::{
        Address, SocketAddress, address, socket_address,
    };
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
    };
    Cluster {
        name: name.into(),
        alt_stat_name: alt_stat_name.into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::LogicalDns as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(Address {
                            address: Some(address::Address::SocketAddress(SocketAddress {
                                address: "example.com".into(),
                                port_specifier: Some(socket_address::PortSpecifier::PortValue(443)),
                                ..Default::default()
                            })),
                        }),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A list collection body with `entries`, its bytes standing for a body
/// that differs from one with other `bytes`.
pub fn list_body(entries: Vec<crate::types::ListEntry>, bytes: &'static [u8]) -> Decoded {
    Decoded::beside(
        std::sync::Arc::new(crate::types::ListCollection { entries }),
        bytes::Bytes::from_static(bytes),
    )
}
