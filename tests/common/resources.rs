//! Builders of Envoy resources: the testbed's, and one that fails validation.

pub use xdsfed::testbed::resources::*;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::ConfigSource;

/// An EDS cluster that fails validation: its EDS config source names no source at all.
pub fn invalid_cluster(name: &str) -> Cluster {
    let mut c = cluster(name, "");
    if let Some(eds) = c.eds_cluster_config.as_mut() {
        eds.eds_config = Some(ConfigSource::default());
    }
    c
}
