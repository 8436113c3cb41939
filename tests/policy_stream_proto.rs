//! The policy stream's generated code in `xdsfed-core` (messages),
//! `xdsfed-client` (the client stub) and `xdsfed-testbed` (the server
//! trait) is what `build.rs` generates from
//! `proto/kyverno/http/v1alpha1/validatingpolicy.proto`.
//! `XDSFED_BLESS=1 cargo test --test policy_stream_proto` writes it again
//! after the proto changes.
// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

const PARTS: [(&str, &str); 3] = [
    (
        include_str!(concat!(
            env!("OUT_DIR"),
            "/messages/kyverno.http.v1alpha1.rs"
        )),
        "crates/xdsfed-core/generated/kyverno.http.v1alpha1.rs",
    ),
    (
        include_str!(concat!(env!("OUT_DIR"), "/client/kyverno.http.v1alpha1.rs")),
        "crates/xdsfed-client/generated/kyverno.http.v1alpha1.client.rs",
    ),
    (
        include_str!(concat!(env!("OUT_DIR"), "/server/kyverno.http.v1alpha1.rs")),
        "crates/xdsfed-testbed/generated/kyverno.http.v1alpha1.server.rs",
    ),
];

#[test]
fn crate_copies_of_the_policy_stream_code_are_what_build_rs_generates() {
    let bless = std::env::var_os("XDSFED_BLESS").is_some();
    for (generated, copy) in PARTS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(copy);
        let held = std::fs::read_to_string(&path).unwrap_or_default();
        if held == generated {
            continue;
        }
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, generated).unwrap();
            continue;
        }
        panic!(
            "{copy} differs from what build.rs generates; run XDSFED_BLESS=1 cargo test --test policy_stream_proto"
        );
    }
}
