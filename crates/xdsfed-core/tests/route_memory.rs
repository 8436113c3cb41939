//! How much heap a route configuration takes while it is decoded: dhat's
//! heap statistics give the peak of live bytes, set against what the
//! decoded prost message alone takes.
//!
//! A configuration from a server is validated and viewed one route at a
//! time (`types::route::stream`), so its transient memory is one route and
//! the view being built, not the table.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route, route_action,
    route_match,
};
use prost::Message;
use xdsfed_core::types::{ResourceType, RouteConfigurationType};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const VIRTUAL_HOSTS: usize = 10;
const ROUTES_PER_HOST: usize = 1_000;

/// A route to a cluster of its own.
fn route(i: usize) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix(format!("/svc-{i}/"))),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(format!(
                "xdstp://mesh.example/envoy.config.cluster.v3.Cluster/svc-{i}"
            ))),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The encoding of a configuration of [`VIRTUAL_HOSTS`] ×
/// [`ROUTES_PER_HOST`] routes, written route by route so that the whole
/// message is never built here either.
fn encoded_configuration() -> Vec<u8> {
    let mut out = RouteConfiguration {
        name: "big".into(),
        ..Default::default()
    }
    .encode_to_vec();
    for v in 0..VIRTUAL_HOSTS {
        let mut host = VirtualHost {
            name: format!("host-{v}"),
            domains: vec![format!("host-{v}.example")],
            ..Default::default()
        }
        .encode_to_vec();
        for r in 0..ROUTES_PER_HOST {
            host.push(0x1a); // VirtualHost.routes, length-delimited
            route(v * ROUTES_PER_HOST + r)
                .encode_length_delimited(&mut host)
                .unwrap();
        }
        out.push(0x12); // RouteConfiguration.virtual_hosts, length-delimited
        prost::encode_length_delimiter(host.len(), &mut out).unwrap();
        out.extend_from_slice(&host);
    }
    out
}

/// The peak of live heap bytes while `f` runs, above what was live
/// before, and what `f` returns.
fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = dhat::HeapStats::get();
    assert_eq!(
        before.max_bytes, before.curr_bytes,
        "no earlier peak hides this one"
    );
    let out = f();
    (dhat::HeapStats::get().max_bytes - before.curr_bytes, out)
}

/// Rule: decoding a configuration of 10 000 routes takes, at its peak,
/// under a tenth of what its decoded message alone takes.
#[test]
fn a_route_configuration_is_decoded_one_route_at_a_time() {
    let bytes = Bytes::from(encoded_configuration());
    let _profiler = dhat::Profiler::builder().testing().build();
    let (peak, held) = peak_of(|| RouteConfigurationType::decode_shared(&bytes).unwrap());
    let held_bytes = dhat::HeapStats::get().curr_bytes;
    assert_eq!(held.targets().len(), VIRTUAL_HOSTS * ROUTES_PER_HOST);
    drop(held);
    let before = dhat::HeapStats::get().curr_bytes;
    let message = RouteConfiguration::decode(&bytes[..]).unwrap();
    let message_bytes = dhat::HeapStats::get().curr_bytes - before;
    assert_eq!(
        message
            .virtual_hosts
            .iter()
            .map(|h| h.routes.len())
            .sum::<usize>(),
        VIRTUAL_HOSTS * ROUTES_PER_HOST
    );
    println!(
        "{} wire bytes: peak {peak} B while decoded, {held_bytes} B held; \
         the decoded message alone {message_bytes} B",
        bytes.len()
    );
    assert!(
        peak < message_bytes / 10,
        "peak {peak} B against {message_bytes} B for the decoded message"
    );
}
