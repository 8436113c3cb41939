//! What the cache holds for an accepted ClusterLoadAssignment: the bytes
//! the server sent and a compact view, not the decoded prost message.
//! dhat's heap statistics give the bytes live after ingest.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message as _, Name as _};
use xdsfed_client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed_core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed_core::types::{EndpointType, ResourceType, TypeRegistry};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const RESOURCES: usize = 1_000;
const ENDPOINTS: u32 = 10;

fn name(i: usize) -> String {
    format!("xdstp://a.test/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}")
}

/// An assignment as the scale benchmark serves them: 10 endpoints.
fn assignment(i: usize) -> ClusterLoadAssignment {
    let hosts: Vec<String> = (0..ENDPOINTS)
        .map(|e| format!("10.{}.{}.{e}", i / 250, i % 250))
        .collect();
    let addrs: Vec<(&str, u32)> = hosts.iter().map(|h| (h.as_str(), 8080)).collect();
    xdsfed_testbed::resources::endpoints(&name(i), &addrs)
}

/// Bytes live after ingesting [`RESOURCES`] watched assignments, per
/// assignment, over what was live before the response arrived; and the
/// assignments' wire size, per assignment.
fn held_bytes_per_assignment() -> (f64, f64) {
    let mut types = TypeRegistry::new();
    types.register::<EndpointType>();
    let config = SessionConfig::new(Node {
        id: "held".into(),
        ..Default::default()
    })
    .with_authorities(AuthorityFilter::any());
    let mut session = Session::new(config, Arc::new(types));
    let cache = Cache::new();
    let server: Arc<str> = "held".into();
    let policy = DataErrorPolicy::default();
    let provenance = Provenance {
        authority: Some(Arc::from("a.test")),
        server: Arc::clone(&server),
    };
    let mut receivers = Vec::with_capacity(RESOURCES);
    for i in 0..RESOURCES {
        let key = ResourceKey::new(EndpointType::TYPE_URL, name(i));
        receivers.push(cache.add_watcher(&key, provenance.clone(), policy).0);
        session.subscribe(key);
    }
    let now = Instant::now();
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}

    let before = dhat::HeapStats::get().curr_bytes;
    let mut wire = 0;
    let resources: Vec<Resource> = (0..RESOURCES)
        .map(|i| {
            let value = assignment(i).encode_to_vec();
            wire += value.len();
            Resource {
                version: "1".into(),
                resource: Some(Any {
                    type_url: ClusterLoadAssignment::type_url(),
                    value,
                }),
                name: name(i),
                ..Default::default()
            }
        })
        .collect();
    let response = DeltaDiscoveryResponse {
        type_url: EndpointType::TYPE_URL.into(),
        nonce: "1".into(),
        resources,
        ..Default::default()
    };
    session.handle_delta_response(now, response);
    let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
    cache.apply(&server, policy, events);
    while session.poll_transmit(now).is_some() {}
    let after = dhat::HeapStats::get().curr_bytes;
    let held = receivers
        .iter()
        .filter(|rx| rx.borrow().resource.is_some())
        .count();
    assert_eq!(held, RESOURCES, "every assignment is held");
    (
        (after - before) as f64 / RESOURCES as f64,
        wire as f64 / RESOURCES as f64,
    )
}

/// Bytes live while the same assignments are held as decoded prost
/// messages, per assignment: what the cache held before the compact view.
fn prost_bytes_per_assignment() -> f64 {
    let bytes: Vec<Vec<u8>> = (0..RESOURCES)
        .map(|i| assignment(i).encode_to_vec())
        .collect();
    let before = dhat::HeapStats::get().curr_bytes;
    let decoded: Vec<ClusterLoadAssignment> = bytes
        .iter()
        .map(|b| ClusterLoadAssignment::decode(b.as_slice()).unwrap())
        .collect();
    let after = dhat::HeapStats::get().curr_bytes;
    drop(decoded);
    (after - before) as f64 / RESOURCES as f64
}

/// Rule: an accepted assignment is held as its bytes and a compact view.
/// Its decoded prost message alone is 4.7 KB (lists presized) to 8.9 KB
/// (as prost decodes it) for 10 endpoints; the
/// bytes plus the view, with the cache's and the session's bookkeeping of
/// the resource, stay under 2 KB.
#[test]
fn an_accepted_assignment_is_held_as_its_bytes_and_a_compact_view() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let (held, wire) = held_bytes_per_assignment();
    let prost = prost_bytes_per_assignment();
    println!(
        "{held:.0} bytes held per assignment of {wire:.0} bytes on the wire; \
         its prost message alone is {prost:.0}"
    );
    assert!(prost > 2_048.0, "the bound tells the two forms apart");
    assert!(
        held <= 2_048.0,
        "{held:.0} bytes held per assignment of {wire:.0} wire bytes"
    );
}
