//! Watches a cluster on an embedded testbed and prints what happens, with the
//! client's CSDS-style status as JSON before the cluster is deleted.
//!
//! Run: `cargo run --example client_watch`

use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster,
    cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
};
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ConfigSource, config_source::ConfigSourceSpecifier,
};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{ServerSpec, Testbed};

const PAYMENTS: &str = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments";

fn payments(stat_name: &str) -> Cluster {
    Cluster {
        name: PAYMENTS.into(),
        alt_stat_name: stat_name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ConfigSource {
                config_source_specifier: Some(ConfigSourceSpecifier::Ads(
                    AggregatedConfigSource::default(),
                )),
                ..Default::default()
            }),
            service_name:
                "xdstp://cloud.example/envoy.config.endpoint.v3.ClusterLoadAssignment/payments"
                    .into(),
        }),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A management server for cloud.example on 127.0.0.1, port chosen by the OS.
    let testbed = Testbed::start([ServerSpec::new("cloud", ["cloud.example"])]).await?;
    let server = &testbed.servers()[0];
    server.set_message(PAYMENTS, &payments("payments-v1"))?;

    let bootstrap = Bootstrap::from_json_str(&format!(
        r#"{{
            "xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "example-node", "cluster": "examples"}},
            "authorities": {{"cloud.example": {{}}}}
        }}"#,
        uri = server.uri()
    ))?;
    let client = XdsClient::builder(bootstrap).build()?;

    let mut watch = client.watch::<ClusterType>(PAYMENTS)?;
    for step in 0..3 {
        match tokio::time::timeout(Duration::from_secs(5), watch.next()).await? {
            Some(WatchEvent::Changed(cluster)) => {
                // The view covers what a data plane reads; the rest is
                // decoded from the bytes on demand.
                let full = cluster.decode()?;
                println!("changed: {} ({})", cluster.name(), full.alt_stat_name)
            }
            Some(WatchEvent::DoesNotExist) => println!("does not exist"),
            Some(WatchEvent::Error(e)) => println!("error: {e}"),
            Some(WatchEvent::AmbientError(e)) => println!("ambient error: {e}"),
            None => break,
        }
        match step {
            0 => drop(server.set_message(PAYMENTS, &payments("payments-v2"))?),
            1 => {
                println!("{}", client.status().to_json());
                server.delete_resource(
                    "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                    PAYMENTS,
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}
