//! Client benchmarks: ingest over loopback delta ADS, and the cost of a
//! one-resource update with many resources cached.
//!
//! Run: `cargo bench -p xdsfed-client --bench client`. Figures go to
//! docs/performance.md. Plain `std::time::Instant` timing, several rounds,
//! min and median reported; the machine's other load shows in the spread.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster,
    cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
};
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ConfigSource, Node, config_source::ConfigSourceSpecifier,
};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use xdsfed_client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed_client::client::XdsClient;
use xdsfed_client::transport::TransportOptions;
use xdsfed_client::watch::WatchEvent;
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed_core::types::{ClusterType, ResourceType, TypeRegistry};
use xdsfed_testbed::{ServerSpec, Testbed};

const CDS: &str = ClusterType::TYPE_URL;

fn cluster(name: &str, generation: u64) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ConfigSource {
                config_source_specifier: Some(ConfigSourceSpecifier::Ads(
                    AggregatedConfigSource::default(),
                )),
                ..Default::default()
            }),
            service_name: format!("generation-{generation}"),
        }),
        ..Default::default()
    }
}

fn name(i: usize) -> String {
    format!("cluster-{i:06}")
}

fn summary(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let min = samples[0];
    let median = samples[samples.len() / 2];
    let max = samples[samples.len() - 1];
    println!(
        "{label}: min {min:.3?}, median {median:.3?}, max {max:.3?} ({} rounds)",
        samples.len()
    );
}

fn bootstrap(uri: &str) -> Bootstrap {
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}], "node": {{"id": "bench"}}}}"#
    );
    Bootstrap::from_json_str(&json).expect("bench bootstrap is valid")
}

/// 100 000 clusters in one delta response are about 24 MB, above the 16 MiB
/// default limit (which then fails the stream with a clear error), so the
/// benchmark raises it.
fn transport() -> TransportOptions {
    TransportOptions {
        does_not_exist_timeout: Duration::from_secs(30),
        max_message_size: 64 * 1024 * 1024,
        ..TransportOptions::default()
    }
}

/// 10 000 clusters: from the wildcard subscription to every cluster cached
/// and the response ACKed on the server.
async fn ingest_over_loopback(count: usize, rounds: usize) -> Vec<Duration> {
    let testbed = Testbed::start([ServerSpec::new("bench", Vec::<String>::new())])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    for i in 0..count {
        server
            .set_message(&name(i), &cluster(&name(i), 0))
            .expect("stored");
    }
    let last = name(count - 1);
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let client = XdsClient::builder(bootstrap(&server.uri()))
            .transport_options(transport())
            .build()
            .expect("in a runtime");
        let start = Instant::now();
        let mut all = client.watch_wildcard::<ClusterType>().expect("registered");
        let mut seen = 0;
        while seen < count {
            match all.next().await {
                Some((_, WatchEvent::Changed(_))) => seen += 1,
                Some((n, other)) => panic!("{n}: unexpected {other:?}"),
                None => panic!("client gone"),
            }
        }
        let report = server
            .wait_acked(CDS, &last, None, Duration::from_secs(30))
            .await
            .expect("resource exists");
        assert!(
            report.nacked_by.is_empty() && !report.timed_out,
            "{report:?}"
        );
        samples.push(start.elapsed());
        drop(all);
        drop(client);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    testbed.shutdown().await;
    samples
}

/// One cluster changes on the server; time until its watcher has it, with
/// `cached` clusters in the client's cache.
async fn update_over_loopback(cached: usize, rounds: usize) -> Vec<Duration> {
    let testbed = Testbed::start([ServerSpec::new("bench", Vec::<String>::new())])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    for i in 0..cached {
        server
            .set_message(&name(i), &cluster(&name(i), 0))
            .expect("stored");
    }
    let client = XdsClient::builder(bootstrap(&server.uri()))
        .transport_options(transport())
        .build()
        .expect("in a runtime");
    let mut all = client.watch_wildcard::<ClusterType>().expect("registered");
    for _ in 0..cached {
        all.next().await.expect("client alive");
    }
    let target = name(cached / 2);
    let mut watch = client.watch::<ClusterType>(&target).expect("valid name");
    watch.next().await.expect("cached copy at once");
    let mut samples = Vec::new();
    for round in 1..=rounds as u64 {
        let start = Instant::now();
        server
            .set_message(&target, &cluster(&target, round))
            .expect("stored");
        loop {
            match watch.next().await {
                Some(WatchEvent::Changed(c))
                    if c.eds_service_name() == Some(&format!("generation-{round}")) =>
                {
                    break;
                }
                Some(_) => {}
                None => panic!("client gone"),
            }
        }
        samples.push(start.elapsed());
    }
    drop(all);
    testbed.shutdown().await;
    samples
}

/// The client's own share of a one-resource update: the protocol session
/// ingests the response, the cache applies it, the watcher's channel
/// changes. No network, no server.
fn update_in_process(cached: usize, rounds: usize) -> Vec<Duration> {
    let mut types = TypeRegistry::new();
    types.register::<ClusterType>();
    let config = SessionConfig::new(Node {
        id: "bench".into(),
        ..Default::default()
    })
    .with_authorities(AuthorityFilter::any());
    let mut session = Session::new(config, Arc::new(types));
    let cache = Cache::new();
    let server: Arc<str> = "bench".into();
    let policy = DataErrorPolicy::default();
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let mut receivers = Vec::with_capacity(cached);
    let now = Instant::now();
    for i in 0..cached {
        let key = ResourceKey::new(CDS, name(i));
        let (rx, _) = cache.add_watcher(&key, provenance.clone(), policy);
        receivers.push(rx);
        session.subscribe(key);
    }
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}
    let response =
        |names: &mut dyn Iterator<Item = (String, u64)>, nonce: u64| DeltaDiscoveryResponse {
            type_url: CDS.into(),
            nonce: nonce.to_string(),
            resources: names
                .map(|(n, generation)| Resource {
                    version: generation.to_string(),
                    resource: Some(Any {
                        type_url: Cluster::type_url(),
                        value: cluster(&n, generation).encode_to_vec(),
                    }),
                    name: n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
    let initial = response(&mut (0..cached).map(|i| (name(i), 0)), 0);
    let ingest_start = Instant::now();
    session.handle_delta_response(now, initial);
    let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
    cache.apply(&server, policy, events);
    let acked = session.poll_transmit(now).is_some();
    println!(
        "  ingest of those {cached} clusters in process (decode, validate, cache, ACK ready): {:.3?}",
        ingest_start.elapsed()
    );
    assert!(acked, "the response is ACKed");
    while session.poll_transmit(now).is_some() {}
    for rx in &mut receivers {
        rx.mark_unchanged();
    }
    let target = cached / 2;
    let mut samples = Vec::new();
    for round in 1..=rounds as u64 {
        let message = response(&mut std::iter::once((name(target), round)), round);
        let start = Instant::now();
        session.handle_delta_response(now, message);
        let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
        cache.apply(&server, policy, events);
        let changed = receivers[target].has_changed().unwrap_or(false);
        let ack = session.poll_transmit(now);
        samples.push(start.elapsed());
        assert!(
            changed && ack.is_some(),
            "the watcher woke and an ACK is ready"
        );
        receivers[target].mark_unchanged();
    }
    samples
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        summary(
            "ingest 10 000 clusters over loopback delta ADS (wildcard CDS, to ACKed)",
            ingest_over_loopback(10_000, 5).await,
        );
        for cached in [1_000, 100_000] {
            summary(
                &format!("one-cluster update to its watcher over loopback, {cached} cached"),
                update_over_loopback(cached, 50).await,
            );
        }
    });
    for cached in [1_000, 10_000, 100_000] {
        summary(
            &format!("one-cluster update in process (session + cache + watcher), {cached} cached"),
            update_in_process(cached, 200),
        );
    }
}
