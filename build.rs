//! Compiles the project's own protos in `proto/` with protox, so that no
//! machine needs `protoc`. Envoy and xds API types come from `envoy-types`.

use std::path::Path;

const PROTOS: &[&str] = &[
    "xdsfed/greeter/v1/greeter.proto",
    "xdsfed/policy/v1/policy.proto",
    "xdsfed/testbed/v1/control.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new("proto");
    for proto in PROTOS {
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
    Ok(())
}
