//! Server identities on the hot path: deliveries name their server by the
//! registry's one shared name, never by a name built per resource.

use std::sync::Arc;

use super::support::{Harness, cluster};

/// The server name of `key`'s copy.
fn server_of(h: &Harness, key: &crate::protocol::ResourceKey) -> Arc<str> {
    let source = h.state(key).source.as_ref().expect("a delivered copy");
    Arc::clone(&source.server)
}

/// Delivering a resource allocates no server name: every copy a server
/// sends names it by the registry's shared `Arc<str>`.
#[test]
fn deliveries_share_the_registrys_server_name() {
    let mut h = Harness::new();
    let c1 = h.watch(&cluster("a", "c1").name);
    let c2 = h.watch(&cluster("a", "c2").name);
    h.upsert("a1", &c1, "1");
    h.upsert("a1", &c2, "2");
    let (first, second) = (server_of(&h, &c1), server_of(&h, &c2));
    assert_eq!(&*first, "a1:1 (insecure)");
    assert!(
        Arc::ptr_eq(&first, &second),
        "two deliveries from one server allocated two names"
    );
}
