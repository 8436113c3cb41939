//! The descriptor set the scenario JSON mapping reads is the one of the
//! `envoy-types` version in use, and it describes the types this project
//! sends exactly as `envoy-types` encodes them.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::DynamicMessage;
use prost_types::FileDescriptorSet;
use xdsfed_testbed::resources;

const DESCRIPTORS: &[u8] = include_bytes!("../../xdsfed-core/descriptors/envoy-types.bin");
const VERSION_FILE: &str = include_str!("../../xdsfed-core/descriptors/envoy-types.version");

/// The version of `package` in the workspace's lock file.
fn locked_version(package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock"))
        .expect("the workspace has a Cargo.lock");
    let mut lines = lock.lines();
    let wanted = format!("name = \"{package}\"");
    while let Some(line) = lines.next() {
        if line == wanted {
            let version = lines.next()?;
            return Some(
                version
                    .strip_prefix("version = ")?
                    .trim_matches('"')
                    .to_owned(),
            );
        }
    }
    None
}

#[test]
fn descriptor_set_matches_the_locked_envoy_types_version() {
    let locked = locked_version("envoy-types").expect("envoy-types is in Cargo.lock");
    assert_eq!(
        VERSION_FILE.trim(),
        format!("envoy-types {locked}"),
        "descriptors/envoy-types.bin is of another envoy-types than Cargo.lock's; run \
         `cargo run -p xdsfed-core --example update_envoy_descriptors`"
    );
}

#[test]
fn descriptor_set_is_in_the_form_the_update_tool_writes() {
    let set = FileDescriptorSet::decode(DESCRIPTORS).expect("the descriptor set decodes");
    assert!(set.file.len() > 500, "only {} files", set.file.len());
    assert!(set.file.iter().all(|f| f.source_code_info.is_none()));
    assert_eq!(
        set.encode_to_vec(),
        DESCRIPTORS,
        "not prost's canonical encoding"
    );
}

/// Decodes `any` through the pool and encodes it again: the same bytes, no
/// unknown field.
fn assert_round_trips(any: &Any) {
    let pool = xdsfed_core::json::envoy_pool().expect("the pool loads");
    let name = any.type_url.trim_start_matches("type.googleapis.com/");
    let descriptor = pool
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} is not in the descriptor set"));
    let message = DynamicMessage::decode(descriptor, any.value.as_slice()).expect("decodes");
    assert_eq!(
        message.unknown_fields().count(),
        0,
        "{name} has unknown fields"
    );
    let encoded = message.encode_to_vec();
    assert!(
        encoded == any.value,
        "{name} does not round-trip: {message:?}"
    );
}

#[test]
fn every_resource_type_round_trips_through_the_descriptor_set() {
    let listener =
        resources::api_listener("xdstp://a.example/envoy.config.listener.v3.Listener/l", "r");
    let route = resources::route_config("r", &[("example.com", "c")]);
    let cluster = resources::cluster("c", "c-eds");
    let endpoints = resources::endpoints("c-eds", &[("10.0.0.1", 8080), ("10.0.0.2", 8081)]);
    for any in [
        resources::pack(&listener),
        resources::pack(&route),
        resources::pack(&cluster),
        resources::pack(&endpoints),
    ] {
        assert_round_trips(&any);
    }
}
