//! The messages of `kyverno.http.v1alpha1` (`ValidatingPolicyService`).
//!
//! Generated from `proto/kyverno/http/v1alpha1/validatingpolicy.proto` by the
//! root crate's `build.rs`; the copy in `crates/xdsfed-core/generated/` (kept
//! out of `src/`: it is generated, not written) is what that build writes,
//! checked by `tests/policy_stream_proto.rs` (which rewrites it with
//! `XDSFED_BLESS=1`). Messages only: the client stub is generated into
//! xdsfed-client and the server trait into xdsfed-testbed, so that this
//! crate needs no tonic.

#![allow(missing_docs, unreachable_pub, clippy::all)]

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/generated/kyverno.http.v1alpha1.rs"
));
