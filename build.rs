//! Compiles the project's own protos in `proto/` with protox, so that no
//! machine needs `protoc`. Envoy and xds API types come from `envoy-types`.
//!
//! The policy-distribution stream's proto (`kyverno.http.v1alpha1`) is
//! compiled here too, but used by `xdsfed-core`, which has no build script
//! of its own (an embedder of the core compiles neither protox nor
//! tonic-build). The core therefore holds a copy of what this script
//! generates; `tests/policy_stream_proto.rs` fails when the copy differs
//! from this output and, with `XDSFED_BLESS=1`, writes it again.

use std::path::Path;

const PROTOS: &[&str] = &[
    "xdsfed/greeter/v1/greeter.proto",
    "xdsfed/policy/v1/policy.proto",
    "xdsfed/testbed/v1/control.proto",
];

const POLICY_STREAM_PROTO: &str = "kyverno/http/v1alpha1/validatingpolicy.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new("proto");
    for proto in PROTOS.iter().chain([&POLICY_STREAM_PROTO]) {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    // protox ships the google.protobuf well-known types itself.
    let descriptors = protox::compile(PROTOS, [root])?;
    let mut config = prost_build::Config::new();
    // `prost::Name::type_url()` then yields `type.googleapis.com/<full name>`,
    // the form every xDS server and client expects inside an `Any`.
    config
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");
    tonic_prost_build::configure().compile_fds_with_config(descriptors, config)?;
    compile_policy_stream(root)
}

/// `kyverno.http.v1alpha1`, with the well-known types the core already has
/// (from `envoy-types`), so that the generated code needs no `prost-types`.
fn compile_policy_stream(root: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let descriptors = protox::compile([POLICY_STREAM_PROTO], [root])?;
    let mut config = prost_build::Config::new();
    config
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com")
        .extern_path(
            ".google.protobuf.Timestamp",
            "::envoy_types::pb::google::protobuf::Timestamp",
        );
    tonic_prost_build::configure()
        .emit_rerun_if_changed(false)
        .compile_fds_with_config(descriptors, config)?;
    Ok(())
}
