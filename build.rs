//! Compiles the project's own protos in `proto/` with protox, so that no
//! machine needs `protoc`. Envoy and xds API types come from `envoy-types`.
//!
//! The policy-distribution stream's proto (`kyverno.http.v1alpha1`) is
//! compiled here too, in three parts for the crates that use it, none of
//! which has a build script of its own (an embedder compiles neither
//! protox nor tonic-build): the messages for `xdsfed-core` (no tonic), the
//! client stub for `xdsfed-client` and the server trait for
//! `xdsfed-testbed`, both naming the core's messages. Each crate holds a
//! copy of its part; `tests/policy_stream_proto.rs` fails when a copy
//! differs from this output and, with `XDSFED_BLESS=1`, writes it again.
//!
//! On Linux it also hands the `xdsfed` binary's link `link/hot-text.ld`,
//! which places the functions the command runs together (see there).

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
    compile_policy_stream(root)?;
    place_hot_text();
    Ok(())
}

/// Links the `xdsfed` binary with `link/hot-text.ld`: the functions the
/// command runs first in its code, so that the 64 KB the kernel maps around
/// each page it executes are mostly code it executes too. The script only
/// adds an output section before `.text` (`INSERT BEFORE`), which GNU ld
/// and lld both read, and moves nothing a symbol or relocation depends on.
/// A linker chosen by the user (gold and mold do not read `INSERT`) and
/// other targets link as they are.
fn place_hot_text() {
    let Some(manifest_dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let script = Path::new(&manifest_dir).join("link/hot-text.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let elf_linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let linker_chosen = std::env::var_os("RUSTC_LINKER").is_some()
        || std::env::var("CARGO_ENCODED_RUSTFLAGS")
            .is_ok_and(|flags| flags.contains("fuse-ld") || flags.contains("linker"));
    let path = script.to_string_lossy();
    // The path goes inside one comma-separated `-Wl` argument.
    if elf_linux && !linker_chosen && script.is_file() && !path.contains([',', ' ']) {
        println!("cargo:rustc-link-arg-bin=xdsfed=-Wl,-T,{path}");
        // tests/hot_text.rs then checks that the link placed them.
        println!("cargo:rustc-env=XDSFED_HOT_TEXT=linked");
    }
}

/// The three parts of `kyverno.http.v1alpha1`, each in a directory of
/// `OUT_DIR` named after it: `messages/` (with the well-known types the
/// core already has from `envoy-types`, so that it needs no
/// `prost-types`), `client/` and `server/` (with the messages taken from
/// `xdsfed_core::policy_stream::wire`).
fn compile_policy_stream(root: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    for (part, client, server) in [
        ("messages", false, false),
        ("client", true, false),
        ("server", false, true),
    ] {
        let dir = out.join(part);
        std::fs::create_dir_all(&dir)?;
        let descriptors = protox::compile([POLICY_STREAM_PROTO], [root])?;
        let mut config = prost_build::Config::new();
        config
            .enable_type_names()
            .type_name_domain(["."], "type.googleapis.com")
            .extern_path(
                ".google.protobuf.Timestamp",
                "::envoy_types::pb::google::protobuf::Timestamp",
            );
        if part != "messages" {
            config.extern_path(
                ".kyverno.http.v1alpha1",
                "::xdsfed_core::policy_stream::wire",
            );
        }
        tonic_prost_build::configure()
            .build_client(client)
            .build_server(server)
            .out_dir(&dir)
            .emit_rerun_if_changed(false)
            .compile_fds_with_config(descriptors, config)?;
    }
    Ok(())
}
