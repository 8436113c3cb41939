//! How much memory the protobuf JSON mapping takes to read a body: a
//! counting global allocator (`cap`) caps the heap while a body is parsed,
//! so a parse that needs more than a bounded multiple of the body's size
//! aborts this test binary instead of passing.
//!
//! The figures in docs/performance.md ("Parsing JSON and YAML bodies") come
//! from the ignored `peak_of_one_body` under `/usr/bin/time -v`.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;
use std::sync::Mutex;

use cap::Cap;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use prost::{Message as _, Name as _};
use xdsfed_core::json::discovery_response_from_json;

#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, usize::MAX);

/// One measurement at a time: the cap is the whole process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The most a body may cost to parse, as a multiple of its size (the
/// result included), plus [`ONE_RESOURCE`].
const MAX_COST: usize = 16;

/// What one resource's tree may take while it is decoded, whatever the
/// body's size (`json::DECODING_BUDGET`: about 100 MiB), and the
/// descriptor pool's clone.
const ONE_RESOURCE: usize = 128 << 20;

/// Runs `f` with the heap allowed to grow by at most `budget` bytes; an
/// allocation past it fails, which aborts the process ("memory allocation
/// of N bytes failed").
fn within<T>(budget: usize, f: impl FnOnce() -> T) -> T {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    HEAP.set_limit(HEAP.allocated() + budget).unwrap();
    let result = f();
    HEAP.set_limit(usize::MAX).unwrap();
    result
}

fn cluster_name(i: usize) -> String {
    format!("xdstp://mesh.example/envoy.config.cluster.v3.Cluster/service-{i}")
}

/// A realistic cluster: EDS over ADS, a connect timeout, circuit
/// breakers, a little metadata.
fn cluster(i: usize) -> serde_json::Value {
    serde_json::json!({
        "@type": Cluster::type_url(),
        "name": cluster_name(i),
        "type": "EDS",
        "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}},
        "connect_timeout": "1s",
        "lb_policy": "ROUND_ROBIN",
        "circuit_breakers": {"thresholds": [{"max_connections": 1000, "max_requests": 1000}]},
        "metadata": {"filter_metadata": {"mesh": {"team": "payments", "tier": i % 3}}},
    })
}

/// A body of realistic clusters of about `size` bytes.
fn clusters(size: usize) -> Vec<u8> {
    let mut resources = Vec::new();
    let mut len = 0;
    while len < size {
        let one = serde_json::to_string(&cluster(resources.len())).unwrap();
        len += one.len() + 1;
        resources.push(one);
    }
    format!(
        r#"{{"version_info":"1","resources":[{}]}}"#,
        resources.join(",")
    )
    .into_bytes()
}

/// One cluster whose metadata holds `size` bytes of empty lists: each
/// `[]` three bytes of text, a message of its own when decoded.
fn empty_lists(size: usize, type_first: bool) -> Vec<u8> {
    let lists = vec!["[]"; size / 3].join(",");
    let metadata = format!(r#""metadata":{{"filter_metadata":{{"m":{{"l":[{lists}]}}}}}}"#);
    let type_url = format!(r#""@type":"{}""#, Cluster::type_url());
    let resource = if type_first {
        format!(r#"{{{type_url},"name":"c",{metadata}}}"#)
    } else {
        // Fields before `@type` are buffered in a generic tree first.
        format!(r#"{{"name":"c",{metadata},{type_url}}}"#)
    };
    format!(r#"{{"version_info":"1","resources":[{resource}]}}"#).into_bytes()
}

/// One cluster whose metadata holds `size` bytes of zeros: each `0,` two
/// bytes of text, a `google.protobuf.Value` message when decoded.
fn zeros(size: usize) -> Vec<u8> {
    let zeros = vec!["0"; size / 2].join(",");
    format!(
        r#"{{"resources":[{{"@type":"{}","name":"c","metadata":{{"filter_metadata":{{"m":{{"l":[{zeros}]}}}}}}}}]}}"#,
        Cluster::type_url()
    )
    .into_bytes()
}

/// `size` bytes of resources that are nothing but their type.
fn bare_resources(size: usize) -> Vec<u8> {
    let one = format!(r#"{{"@type":"{}"}}"#, Cluster::type_url());
    let all = vec![one.as_str(); size / (one.len() + 1)].join(",");
    format!(r#"{{"resources":[{all}]}}"#).into_bytes()
}

/// Writes a body of about the size given.
type MakeBody = fn(usize) -> Vec<u8>;

/// The bodies measured, each about `size` bytes.
const SHAPES: [(&str, MakeBody); 5] = [
    ("realistic clusters", clusters),
    ("empty lists in metadata", |size| empty_lists(size, true)),
    ("empty lists before @type", |size| empty_lists(size, false)),
    ("bare resources", bare_resources),
    ("zeros in metadata", zeros),
];

/// A body's cost to parse is bounded: it is parsed, or refused, within
/// `MAX_COST` times its length plus what one resource may take (bodies of
/// empty lists took 260 times their size, and a 114 MiB one 11 GiB,
/// before it was). Over the bound the process aborts: the test fails.
#[test]
fn json_body_is_parsed_or_refused_within_a_bounded_multiple_of_its_size() {
    // The descriptor pool is loaded once per process, not per body.
    xdsfed_core::json::envoy_pool().unwrap();
    for (shape, make) in SHAPES {
        let body = make(4 << 20);
        let result = within(MAX_COST * body.len() + ONE_RESOURCE, || {
            discovery_response_from_json(&body).map(|r| r.resources.len())
        });
        eprintln!("{shape}: {} bytes: {result:?}", body.len());
    }
}

/// The realistic body is read whole: every cluster, named as written.
#[test]
fn realistic_body_is_read_whole() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let body = clusters(64 << 10);
    let response = discovery_response_from_json(&body).unwrap();
    assert!(response.resources.len() > 100);
    for (i, any) in response.resources.iter().enumerate() {
        let cluster = Cluster::decode(any.value.as_slice()).unwrap();
        assert_eq!(cluster.name, cluster_name(i));
        assert_eq!(cluster.connect_timeout.map(|d| d.seconds), Some(1));
    }
}

/// `XDSFED_JSON_SHAPE=<index> XDSFED_JSON_SIZE=<bytes>`: parses one body,
/// for `/usr/bin/time -v` to report the peak resident size of.
#[test]
#[ignore = "a measurement, run by hand (docs/performance.md)"]
fn peak_of_one_body() {
    let index: usize = std::env::var("XDSFED_JSON_SHAPE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let size: usize = std::env::var("XDSFED_JSON_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20 << 20);
    xdsfed_core::json::envoy_pool().unwrap();
    let (shape, make) = SHAPES[index];
    let body = make(size);
    let started = std::time::Instant::now();
    let result = discovery_response_from_json(&body).map(|r| r.resources.len());
    eprintln!(
        "{shape}: {} bytes: {result:?} in {:?}",
        body.len(),
        started.elapsed()
    );
}
