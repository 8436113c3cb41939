//! What the cache holds for accepted route configurations, clusters and
//! ClusterLoadAssignments:
//! the bytes the server sent and a compact view, not the decoded prost
//! message. dhat's heap statistics give the bytes live after ingest.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use xdsfed_client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed_core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed_core::types::{
    ClusterType, EndpointType, ResourceType, RouteConfigurationType, TypeRegistry,
};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const ENDPOINTS: u32 = 10;
const ROUTES: usize = 100;

/// A resource type of the test, with the messages it ingests as the scale
/// benchmark serves them.
trait Served: ResourceType {
    /// How many the test ingests.
    const COUNT: usize = 1_000;
    type Message: Message + Default;
    fn resource_name(i: usize) -> String;
    fn message(i: usize) -> Self::Message;
}

impl Served for EndpointType {
    type Message = ClusterLoadAssignment;

    fn resource_name(i: usize) -> String {
        format!("xdstp://a.test/envoy.config.endpoint.v3.ClusterLoadAssignment/svc-{i}")
    }

    /// 10 endpoints.
    fn message(i: usize) -> ClusterLoadAssignment {
        let hosts: Vec<String> = (0..ENDPOINTS)
            .map(|e| format!("10.{}.{}.{e}", i / 250, i % 250))
            .collect();
        let addrs: Vec<(&str, u32)> = hosts.iter().map(|h| (h.as_str(), 8080)).collect();
        xdsfed_testbed::resources::endpoints(&Self::resource_name(i), &addrs)
    }
}

impl Served for RouteConfigurationType {
    const COUNT: usize = 100;
    type Message = RouteConfiguration;

    fn resource_name(i: usize) -> String {
        format!("xdstp://a.test/envoy.config.route.v3.RouteConfiguration/front-{i}")
    }

    /// 100 routes, each to a cluster of its own.
    fn message(i: usize) -> RouteConfiguration {
        let routes: Vec<(String, String)> = (0..ROUTES)
            .map(|r| {
                (
                    format!("/svc-{r}/"),
                    ClusterType::resource_name(i * ROUTES + r),
                )
            })
            .collect();
        let pairs: Vec<(&str, &str)> = routes
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        xdsfed_testbed::resources::route_config(&Self::resource_name(i), &pairs)
    }
}

impl Served for ClusterType {
    type Message = Cluster;

    fn resource_name(i: usize) -> String {
        format!("xdstp://a.test/envoy.config.cluster.v3.Cluster/svc-{i}")
    }

    /// EDS over ADS, its endpoints under their own xdstp name.
    fn message(i: usize) -> Cluster {
        xdsfed_testbed::resources::cluster(&Self::resource_name(i), &EndpointType::resource_name(i))
    }
}

/// Bytes live after ingesting `T::COUNT` watched resources of `T`, per
/// resource, over what was live before the response arrived; and the
/// resources' wire size, per resource.
fn held_bytes_per_resource<T: Served>() -> (f64, f64) {
    let mut types = TypeRegistry::new();
    types.register::<T>();
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
    let mut receivers = Vec::with_capacity(T::COUNT);
    for i in 0..T::COUNT {
        let key = ResourceKey::new(T::TYPE_URL, T::resource_name(i));
        receivers.push(cache.add_watcher(&key, provenance.clone(), policy).0);
        session.subscribe(key);
    }
    let now = Instant::now();
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}

    let before = dhat::HeapStats::get().curr_bytes;
    let mut wire = 0;
    let resources: Vec<Resource> = (0..T::COUNT)
        .map(|i| {
            let value = T::message(i).encode_to_vec();
            wire += value.len();
            Resource {
                version: "1".into(),
                resource: Some(Any {
                    type_url: T::TYPE_URL.into(),
                    value,
                }),
                name: T::resource_name(i),
                ..Default::default()
            }
        })
        .collect();
    let response = DeltaDiscoveryResponse {
        type_url: T::TYPE_URL.into(),
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
    assert_eq!(held, T::COUNT, "every resource is held");
    (
        (after - before) as f64 / T::COUNT as f64,
        wire as f64 / T::COUNT as f64,
    )
}

/// Bytes live while the same resources are held as decoded prost
/// messages, per resource: what the cache held before the compact views.
fn prost_bytes_per_resource<T: Served>() -> f64 {
    let bytes: Vec<Vec<u8>> = (0..T::COUNT)
        .map(|i| T::message(i).encode_to_vec())
        .collect();
    let before = dhat::HeapStats::get().curr_bytes;
    let decoded: Vec<Arc<T::Message>> = bytes
        .iter()
        .map(|b| Arc::new(T::Message::decode(b.as_slice()).unwrap()))
        .collect();
    let after = dhat::HeapStats::get().curr_bytes;
    drop(decoded);
    (after - before) as f64 / T::COUNT as f64
}

/// Ingests `T`'s resources and checks that what is held of each, with the
/// cache's and the session's bookkeeping, stays within `bound` bytes,
/// which its prost message alone exceeds.
fn held_within<T: Served>(what: &str, bound: f64) {
    let (held, wire) = held_bytes_per_resource::<T>();
    let prost = prost_bytes_per_resource::<T>();
    println!(
        "{what}: {held:.0} bytes held per resource of {wire:.0} bytes on the wire; \
         its prost message alone is {prost:.0}"
    );
    assert!(prost > bound, "{what}: the bound tells the two forms apart");
    assert!(
        held <= bound,
        "{what}: {held:.0} bytes held per resource of {wire:.0} wire bytes"
    );
}

/// Rule: an accepted route configuration, cluster or assignment is held as
/// its bytes and a compact view. For 10 endpoints, an assignment's decoded
/// prost message alone is 4.7 KB (lists presized) to 8.9 KB (as prost
/// decodes it), an EDS cluster's 3.5 KB, a route configuration's some
/// 3 KB a route; the bytes plus the view, with the cache's and the
/// session's bookkeeping of the resource, stay under 2 KB, 1 KB and 300 B
/// a route. (One test: dhat profiles one test at a time.)
#[test]
fn accepted_resources_are_held_as_their_bytes_and_a_compact_view() {
    let _profiler = dhat::Profiler::builder().testing().build();
    held_within::<EndpointType>("ClusterLoadAssignment", 2_048.0);
    held_within::<ClusterType>("Cluster", 1_024.0);
    held_within::<RouteConfigurationType>("RouteConfiguration of 100 routes", 30_000.0);
}
