//! The policy stream's generated code in `xdsfed-core` is what `build.rs`
//! generates from `proto/kyverno/http/v1alpha1/validatingpolicy.proto`.
//! `XDSFED_BLESS=1 cargo test --test policy_stream_proto` writes it again
//! after the proto changes.
// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/kyverno.http.v1alpha1.rs"));
const COPY: &str = "crates/xdsfed-core/generated/kyverno.http.v1alpha1.rs";

#[test]
fn core_copy_of_the_policy_stream_code_is_what_build_rs_generates() {
    let copy = Path::new(env!("CARGO_MANIFEST_DIR")).join(COPY);
    let held = std::fs::read_to_string(&copy).unwrap();
    if held == GENERATED {
        return;
    }
    if std::env::var_os("XDSFED_BLESS").is_some() {
        std::fs::write(&copy, GENERATED).unwrap();
        return;
    }
    panic!(
        "{COPY} differs from what build.rs generates; run XDSFED_BLESS=1 cargo test --test policy_stream_proto"
    );
}
