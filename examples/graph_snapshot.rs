//! Follows a listener across two authorities and prints the complete,
//! warmed snapshot: the testbed scenario `bootstrap-examples/testbed-federated.yaml`
//! serves `cloud.example` and `onprem.example` from two servers on 127.0.0.1.
//!
//! Run: `cargo run --example graph_snapshot`

use std::time::Duration;

use xdsfed::client::client::XdsClient;
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph};
use xdsfed::testbed::scenario::Scenario;

const LISTENER: &str = "xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scenario = Scenario::from_file("bootstrap-examples/testbed-federated.yaml".as_ref())?;
    let running = scenario.start().await?;
    let testbed = running.testbed();

    // One authority per server, as bootstrap-examples/demo.yaml says.
    let server_of = |authority: &str| {
        testbed
            .server_for_authority(authority)
            .map(|s| s.uri())
            .ok_or_else(|| format!("the scenario has no server for {authority}"))
    };
    let (cloud, onprem) = (server_of("cloud.example")?, server_of("onprem.example")?);
    let bootstrap = Bootstrap::from_json_str(&format!(
        r#"{{
            "xds_servers": [{{"server_uri": "{cloud}", "channel_creds": [{{"type": "insecure"}}]}}],
            "node": {{"id": "graph-example"}},
            "authorities": {{
                "cloud.example": {{}},
                "onprem.example": {{"xds_servers": [{{"server_uri": "{onprem}", "channel_creds": [{{"type": "insecure"}}]}}]}}
            }}
        }}"#
    ))?;
    let client = XdsClient::builder(bootstrap).build()?;

    let mut graph = ConfigGraph::builder(client.clone())
        .listener(LISTENER)
        .start();
    let snapshot = tokio::time::timeout(Duration::from_secs(10), graph.ready()).await??;

    println!("snapshot {} of {LISTENER}", snapshot.generation());
    for cluster in snapshot.clusters() {
        let authority = cluster
            .cluster
            .as_ref()
            .and_then(|c| c.provenance.authority.as_deref())
            .unwrap_or("(old-style)");
        print!("  cluster {} on {authority}", cluster.name);
        match &cluster.endpoints {
            ClusterEndpoints::Eds {
                assignment: Some(a),
                ..
            } => {
                let count = a.value.endpoint_count();
                println!(": {count} endpoints, version {}", a.provenance.version);
            }
            _ => println!(": {:?}", cluster.error),
        }
    }
    for error in snapshot.errors() {
        println!("  error: {error}");
    }
    graph.shutdown().await;
    Ok(())
}
