//! How many heap allocations one accepted delta resource costs between
//! the response and the cache: the protocol session's ingest (decode,
//! validate, its own bookkeeping) and the cache's store. dhat's heap
//! statistics count every block allocated.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message as _, Name as _};
use xdsfed_client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed_core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed_core::types::{ClusterType, ResourceType, TypeRegistry};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const RESOURCES: usize = 1_000;

fn name(i: usize) -> String {
    format!("xdstp://a.test/envoy.config.cluster.v3.Cluster/svc/{i}")
}

/// An EDS cluster as the scale benchmark serves them.
fn cluster(i: usize) -> Cluster {
    xdsfed_testbed::resources::cluster(
        &name(i),
        &format!("xdstp://a.test/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}"),
    )
}

/// The allocations per resource of ingesting one delta response of
/// [`RESOURCES`] subscribed clusters, each watched, into the cache.
fn allocations_per_accepted_resource() -> f64 {
    let mut types = TypeRegistry::new();
    types.register::<ClusterType>();
    let config = SessionConfig::new(Node {
        id: "alloc".into(),
        ..Default::default()
    })
    .with_authorities(AuthorityFilter::any());
    let mut session = Session::new(config, Arc::new(types));
    let cache = Cache::new();
    let server: Arc<str> = "alloc".into();
    let policy = DataErrorPolicy::default();
    let provenance = Provenance {
        authority: Some(Arc::from("a.test")),
        server: Arc::clone(&server),
    };
    let mut receivers = Vec::with_capacity(RESOURCES);
    let mut resources = Vec::with_capacity(RESOURCES);
    for i in 0..RESOURCES {
        let key = ResourceKey::new(ClusterType::TYPE_URL, name(i));
        receivers.push(cache.add_watcher(&key, provenance.clone(), policy).0);
        session.subscribe(key);
        resources.push(Resource {
            version: "1".into(),
            resource: Some(Any {
                type_url: Cluster::type_url(),
                value: cluster(i).encode_to_vec(),
            }),
            name: name(i),
            ..Default::default()
        });
    }
    let now = Instant::now();
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}
    let response = DeltaDiscoveryResponse {
        type_url: ClusterType::TYPE_URL.into(),
        nonce: "1".into(),
        resources,
        ..Default::default()
    };
    let before = dhat::HeapStats::get().total_blocks;
    session.handle_delta_response(now, response);
    let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
    cache.apply(&server, policy, events);
    let after = dhat::HeapStats::get().total_blocks;
    assert!(
        session.poll_transmit(now).is_some(),
        "the response is ACKed"
    );
    (after - before) as f64 / RESOURCES as f64
}

/// The allocations of prost decoding the same clusters, per cluster: the
/// part of the count the decoded message itself costs.
fn decode_allocations_per_resource() -> f64 {
    let bytes: Vec<Vec<u8>> = (0..RESOURCES).map(|i| cluster(i).encode_to_vec()).collect();
    let before = dhat::HeapStats::get().total_blocks;
    let decoded: Vec<Cluster> = bytes
        .iter()
        .map(|b| Cluster::decode(b.as_slice()).unwrap())
        .collect();
    let after = dhat::HeapStats::get().total_blocks;
    drop(decoded);
    // The vector of results is one block.
    (after - before - 1) as f64 / RESOURCES as f64
}

/// Measured, not yet at its target of 2. A resource now costs about 4: its
/// prost decode (here 2: the `Cluster`'s strings), the shared pointer to
/// the decoded value, and the first clone of its bytes (which makes them
/// shareable). A name the server echoes is the session's own copy (and so
/// is the name inside the resource, when it is the same), a response's
/// version is shared by its resources, no glob is worked out unless one is
/// watched, and where a copy came from is recorded without allocating (23
/// before those). The
/// rest goes with the compact view that replaces the prost message; this
/// bound keeps the count from growing meanwhile.
#[test]
fn accepted_resource_allocations_stay_within_the_current_bound() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let per_resource = allocations_per_accepted_resource();
    let decode = decode_allocations_per_resource();
    println!("{per_resource:.1} allocations per accepted resource, {decode:.1} of them decoding");
    assert!(
        per_resource <= 6.0,
        "{per_resource:.1} allocations per accepted resource"
    );
}

/// Where the allocations are: `cargo test -p xdsfed-client --test
/// ingest_allocations -- --ignored where_the_allocations_are` writes
/// dhat's profile to `dhat-heap.json` (view it with dhat's viewer).
#[test]
#[ignore = "a profile to read, not a check"]
fn where_the_allocations_are() {
    let _profiler = dhat::Profiler::builder().trim_backtraces(None).build();
    allocations_per_accepted_resource();
}
