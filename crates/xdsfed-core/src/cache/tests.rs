use super::*;
use crate::types::testing::cluster_copy;

const LIST: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// A list collection's body can be cached before its members are set;
/// until they are, the member list is unknown, not empty (a watcher
/// would otherwise report an empty list first). An empty list, once
/// set, is a list; a collection let go is unknown again.
#[test]
fn list_members_are_unknown_until_set_and_after_the_list_is_forgotten() {
    let cache = Cache::new();
    let list = ResourceKey::new(
        LIST,
        "xdstp://a/envoy.config.cluster.v3.ClusterCollection/c",
    );
    assert_eq!(cache.list_members(&list), None);

    cache.set_list_members(&list, HashSet::new());
    assert_eq!(cache.list_members(&list), Some(Vec::new()));

    let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/m");
    cache.set_list_members(&list, HashSet::from([member.clone()]));
    assert_eq!(
        cache.list_members(&list),
        Some(vec![Arc::clone(&member.name)])
    );
    assert!(cache.is_list_member(&list, &member));

    cache.forget_list(&list);
    assert_eq!(cache.list_members(&list), None);
    assert!(!cache.is_list_member(&list, &member));
}

/// A server that sends the copy the watchers hold again, and the same
/// bad update again, as a server does on every reconnect, is heard once:
/// one change, one ambient error, then nothing until something differs.
#[test]
fn the_same_copy_and_the_same_nack_again_do_not_wake_watchers() {
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let key = ResourceKey::new(CDS, "c1");
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let (mut rx, _) = cache.add_watcher(&key, provenance, DataErrorPolicy::default());
    let upsert = |alt: &str| CoreEvent::Upsert {
        key: key.clone(),
        resource: cluster_copy("c1", alt),
        version: Arc::from("1"),
        ttl: None,
    };
    let nack = |why: &str| CoreEvent::Invalid {
        key: key.clone(),
        error: crate::types::ValidationError(why.into()),
        version: Arc::from("2"),
    };
    let mut woken = || {
        let woke = rx.has_changed().unwrap_or(false);
        rx.mark_unchanged();
        woke
    };

    cache.apply(&server, DataErrorPolicy::default(), vec![upsert("a")]);
    assert!(woken(), "the first copy is news");
    cache.apply(&server, DataErrorPolicy::default(), vec![nack("bad")]);
    assert!(woken(), "the first NACK is news");
    for _ in 0..3 {
        cache.apply(&server, DataErrorPolicy::default(), vec![upsert("a")]);
        assert!(!woken(), "the same copy again is no news");
        assert_eq!(
            cache.state(&key).map(|s| s.status),
            Some(ResourceStatus::Acked)
        );
        cache.apply(&server, DataErrorPolicy::default(), vec![nack("bad")]);
        assert!(!woken(), "the same NACK again is no news");
        assert_eq!(
            cache.state(&key).map(|s| s.status),
            Some(ResourceStatus::Nacked)
        );
    }
    cache.apply(&server, DataErrorPolicy::default(), vec![nack("worse")]);
    assert!(woken(), "another NACK is news");
    cache.apply(&server, DataErrorPolicy::default(), vec![upsert("b")]);
    assert!(woken(), "another copy is news");
    cache.apply(&server, DataErrorPolicy::default(), vec![nack("worse")]);
    assert!(woken(), "after another copy, the old NACK is news again");
}
