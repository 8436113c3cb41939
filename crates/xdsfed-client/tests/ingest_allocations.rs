//! How many heap allocations one accepted delta resource costs between
//! the response and the cache: the protocol session's ingest (decode,
//! validate, its own bookkeeping) and the cache's store. dhat's heap
//! statistics count every block allocated.
//!
//! A response also costs a few allocations of its own, whatever it
//! carries (its counts, the ACK); so the cost of a resource is the
//! difference between two responses of different sizes, divided by the
//! difference in resources.

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
use xdsfed_core::protocol::{
    AuthorityFilter, ResourceKey, Session, SessionConfig, WireDeltaResponse,
};
use xdsfed_core::types::{ClusterType, ResourceType, TypeRegistry};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// dhat counts for one profiler at a time: the tests take turns.
static ONE_PROFILER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A profiler, and the turn it holds. The profiler comes first: a tuple
/// drops its fields in order, so the profiler is gone before the turn is
/// handed on (the other way round, the next test could start its profiler
/// while this one's still ran, which dhat refuses).
fn profiler() -> (dhat::Profiler, std::sync::MutexGuard<'static, ()>) {
    let turn = ONE_PROFILER.lock().unwrap_or_else(|e| e.into_inner());
    (dhat::Profiler::builder().testing().build(), turn)
}

const RESOURCES: usize = 1_000;
/// The larger response of the two the cost of a resource is taken from.
const MORE_RESOURCES: usize = 3_000;

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

/// How the response reaches the session.
#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// Already decoded into envoy's message (not counted).
    Decoded,
    /// From its encoded bytes, counted: decoded into envoy's message.
    FromBytes,
    /// From its encoded bytes, counted: read in place, as the transport
    /// reads delta responses.
    InPlace,
}

/// The allocations per resource of ingesting one delta response of
/// `count` subscribed clusters, each watched, into the cache.
fn allocations_of_one_response(count: usize) -> u64 {
    allocations_of_one_response_read(count, Reading::Decoded)
}

fn allocations_of_one_response_read(count: usize, reading: Reading) -> u64 {
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
    let mut receivers = Vec::with_capacity(count);
    let mut resources = Vec::with_capacity(count);
    for i in 0..count {
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
    // The server's headers, as the driver reports them before any response:
    // the subscriptions' does-not-exist timers start here, not in the count.
    session.handle_stream_accepted(now);
    while session.poll_event().is_some() {}
    let response = DeltaDiscoveryResponse {
        type_url: ClusterType::TYPE_URL.into(),
        nonce: "1".into(),
        resources,
        ..Default::default()
    };
    let encoded = bytes::Bytes::from(response.encode_to_vec());
    let before = dhat::HeapStats::get().total_blocks;
    match reading {
        Reading::Decoded => session.handle_delta_response(now, response),
        Reading::FromBytes => {
            let decoded = DeltaDiscoveryResponse::decode(encoded).unwrap();
            session.handle_delta_response(now, decoded);
        }
        Reading::InPlace => {
            let read = WireDeltaResponse::decode(encoded).unwrap();
            read.check_text().unwrap();
            session.handle_delta_wire(now, read);
        }
    }
    // Room made first: the test's own list must not count its doublings.
    let mut events = Vec::with_capacity(count + 16);
    events.extend(std::iter::from_fn(|| session.poll_event()));
    cache.apply(&server, policy, events);
    let after = dhat::HeapStats::get().total_blocks;
    assert!(
        session.poll_transmit(now).is_some(),
        "the response is ACKed"
    );
    assert!(
        receivers
            .iter_mut()
            .all(|r| r.has_changed().unwrap_or(false)),
        "every watcher sees its cluster"
    );
    after - before
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

/// At most 2 allocations per accepted resource (23 once): the shared
/// pointer to its view, and the one string of the validated message that
/// decoding into a reused message cannot keep (the EDS service name, inside
/// an optional sub-message). The bytes move into the view unshared, a name
/// the server echoes is the session's own copy (and so is the name inside
/// the resource, when it is the same), a response's version is shared by
/// its resources, no glob is worked out unless one is watched, where a
/// copy came from is recorded without allocating, and the session's table
/// of held versions grows once per response, not by doubling.
#[test]
fn an_accepted_resource_costs_at_most_two_allocations() {
    let _profiler = profiler();
    let small = allocations_of_one_response(RESOURCES);
    let large = allocations_of_one_response(MORE_RESOURCES);
    let per_resource = (large - small) as f64 / (MORE_RESOURCES - RESOURCES) as f64;
    let per_response = small as f64 - per_resource * RESOURCES as f64;
    let decode = decode_allocations_per_resource();
    println!(
        "{per_resource:.3} allocations per accepted resource, {per_response:.0} per response; \
         prost alone decoding the message: {decode:.1}"
    );
    assert!(
        per_resource <= 2.0,
        "{per_resource:.3} allocations per accepted resource"
    );
}

/// From the bytes received: read in place, a response's resource costs
/// three allocations fewer than decoded into envoy's message (its name,
/// its version and its `Any`'s type URL are read where they lie), and at
/// most three in all (its bytes, copied out of the message, and the two
/// above).
#[test]
fn a_resource_read_in_place_costs_three_allocations_fewer() {
    let _profiler = profiler();
    let per_resource = |reading| {
        let small = allocations_of_one_response_read(RESOURCES, reading);
        let large = allocations_of_one_response_read(MORE_RESOURCES, reading);
        (large - small) as f64 / (MORE_RESOURCES - RESOURCES) as f64
    };
    let decoded = per_resource(Reading::FromBytes);
    let in_place = per_resource(Reading::InPlace);
    println!(
        "from the bytes received: {decoded:.3} allocations per resource decoded, \
         {in_place:.3} read in place"
    );
    // A twentieth of slack: tables that grow once per response spread a
    // block or two over the resources.
    assert!(
        in_place <= decoded - 3.0 + 0.05,
        "{in_place:.3} against {decoded:.3}"
    );
    assert!(in_place <= 3.05, "{in_place:.3} allocations per resource");
}

/// Where the allocations are: `cargo test -p xdsfed-client --test
/// ingest_allocations -- --ignored where_the_allocations_are` writes
/// dhat's profile to `dhat-heap.json` (view it with dhat's viewer).
#[test]
#[ignore = "a profile to read, not a check"]
fn where_the_allocations_are() {
    let _turn = ONE_PROFILER.lock().unwrap_or_else(|e| e.into_inner());
    let _profiler = dhat::Profiler::builder().trim_backtraces(None).build();
    allocations_of_one_response(RESOURCES);
}
