//! Scenario 4: ingest in process. One delta response of `n` clusters goes
//! through the protocol session (decode, validate), the cache (one watcher
//! each) and out as an ACK; no network, no server. The cost must grow
//! linearly with `n`.
//!
//! Each round runs in a process of its own (the bench re-runs itself with
//! [`ONCE`]), as a client's cold start does: in one process, a round
//! reuses the memory the rounds before it freed, and a single sample of
//! 100 000 ranged from 210 to 330 ms depending on what ran before it, which
//! swung the ratio of two sizes between 9.5× and 14×. A size's cost is the
//! median of its rounds; the fastest and slowest are printed beside it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use xdsfed::client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed::core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed::core::types::{ClusterType, ResourceType, TypeRegistry};

use crate::fleet::{self, Mode, Shape};

/// The argument that makes the bench run one round and print its figures.
pub const ONCE: &str = "--ingest-once";

/// How many rounds measure `count` clusters: fewer for a million, whose
/// round takes some ten seconds with its setup.
pub fn rounds(count: usize) -> usize {
    if count >= 1_000_000 { 3 } else { 5 }
}

/// What the rounds of one size measured.
#[derive(Debug, Clone, Copy)]
pub struct Ingest {
    /// The median round.
    pub time: Duration,
    pub fastest: Duration,
    pub slowest: Duration,
    /// The median round's decode floor.
    pub floor: Duration,
}

/// [`rounds`] rounds of `count` clusters, each in a fresh process.
pub fn run(count: usize) -> Ingest {
    let mut samples: Vec<(Duration, Duration)> =
        (0..rounds(count)).map(|_| round_in_child(count)).collect();
    samples.sort();
    let (time, floor) = samples[samples.len() / 2];
    Ingest {
        time,
        fastest: samples[0].0,
        slowest: samples[samples.len() - 1].0,
        floor,
    }
}

/// Runs [`once`] in a child process: (time, floor).
fn round_in_child(count: usize) -> (Duration, Duration) {
    let exe = std::env::current_exe().expect("the bench knows its executable");
    let out = std::process::Command::new(exe)
        .args([ONCE, &count.to_string()])
        .output()
        .expect("the bench runs itself");
    assert!(out.status.success(), "ingest round failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("figures are text");
    let mut nanos = text
        .split_whitespace()
        .map(|n| n.parse::<u64>().expect("nanoseconds"));
    let mut next = || Duration::from_nanos(nanos.next().expect("two figures"));
    (next(), next())
}

/// The child's side of [`round_in_child`]: one round, its figures printed
/// as nanoseconds.
pub fn serve_once(args: &[String]) {
    let count: usize = args
        .first()
        .and_then(|n| n.parse().ok())
        .expect("a count of clusters");
    let i = once(count);
    println!("{} {}", i.time.as_nanos(), i.floor.as_nanos());
}

/// One ingest of `count` clusters, from a fresh session and cache.
fn once(count: usize) -> Ingest {
    let shape = Shape {
        clusters: count,
        authorities: 1,
        servers: 1,
        mode: Mode::Eds,
    };
    let mut types = TypeRegistry::new();
    types.register::<ClusterType>();
    let config = SessionConfig::new(Node {
        id: "scale".into(),
        ..Default::default()
    })
    .with_authorities(AuthorityFilter::any());
    let mut session = Session::new(config, Arc::new(types));
    let cache = Cache::new();
    let server: Arc<str> = "scale".into();
    let policy = DataErrorPolicy::default();
    let provenance = Provenance {
        authority: Some(Arc::from(fleet::authority(0))),
        server: Arc::clone(&server),
    };
    let mut receivers = Vec::with_capacity(count);
    let now = Instant::now();
    let mut resources = Vec::with_capacity(count);
    for i in 0..count {
        let name = fleet::cluster_name(&shape, i);
        let key = ResourceKey::new(ClusterType::TYPE_URL, name.clone());
        receivers.push(cache.add_watcher(&key, provenance.clone(), policy).0);
        session.subscribe(key);
        resources.push(Resource {
            version: "1".into(),
            resource: Some(Any {
                type_url: Cluster::type_url(),
                value: fleet::cluster(&shape, i).encode_to_vec(),
            }),
            name,
            ..Default::default()
        });
    }
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}
    let floor = {
        let start = Instant::now();
        let n: usize = resources
            .iter()
            .filter_map(|r| r.resource.as_ref())
            .map(|a| Cluster::decode(a.value.as_slice()).map_or(0, |c| c.name.len()))
            .sum();
        std::hint::black_box(n);
        start.elapsed()
    };
    let response = DeltaDiscoveryResponse {
        type_url: ClusterType::TYPE_URL.into(),
        nonce: "1".into(),
        resources,
        ..Default::default()
    };
    let start = Instant::now();
    session.handle_delta_response(now, response);
    let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
    cache.apply(&server, policy, events);
    let acked = session.poll_transmit(now).is_some();
    let time = start.elapsed();
    assert!(acked, "the response is ACKed");
    Ingest {
        time,
        fastest: time,
        slowest: time,
        floor,
    }
}
