use super::*;
use xdsfed_core::types::testing::cluster_copy;

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

    cache.set_list_members(&list, HashSet::default());
    assert_eq!(cache.list_members(&list), Some(Vec::new()));

    let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/m");
    cache.set_list_members(&list, HashSet::from_iter([member.clone()]));
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
        error: xdsfed_core::types::ValidationError(why.into()),
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

fn from_disk(cache: &Cache, key: &ResourceKey, server: &Arc<str>) {
    let copy = cluster_copy(&key.name, "disk");
    let record = crate::state_dir::Record {
        type_url: Arc::clone(&key.type_url),
        name: Arc::clone(&key.name),
        version: Arc::from("1"),
        server: Arc::clone(server),
        resource: copy.raw().clone(),
    };
    cache.insert_from_disk(&record, copy);
}

/// The does-not-exist timer drops a copy from the state directory only
/// once its server's current stream has answered; a failure of the stream
/// makes it wait again; transient errors leave its ambient error.
#[test]
fn does_not_exist_drops_a_disk_copy_only_after_its_server_answered() {
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let key = ResourceKey::new(CDS, "c1");
    from_disk(&cache, &key, &server);
    let state = cache.state(&key).unwrap();
    assert_eq!(state.status, ResourceStatus::FromDisk);
    assert!(state.resource.is_some());
    let ambient = state.error.clone().unwrap();
    let dne = || vec![CoreEvent::DoesNotExist { key: key.clone() }];

    cache.apply(&server, DataErrorPolicy::default(), dne());
    let state = cache.state(&key).unwrap();
    assert_eq!(state.status, ResourceStatus::FromDisk, "no answer yet");
    assert!(state.resource.is_some());

    let down = XdsError::new(xdsfed_core::error::ErrorKind::Transient, "down");
    cache.transient_error(&key, &down);
    assert_eq!(cache.state(&key).unwrap().error, Some(ambient));

    cache.set_answered(&server, true);
    cache.set_answered(&server, false);
    cache.apply(&server, DataErrorPolicy::default(), dne());
    assert!(
        cache.state(&key).unwrap().resource.is_some(),
        "answered, then failed"
    );

    cache.set_answered(&server, true);
    cache.apply(&server, DataErrorPolicy::default(), dne());
    let state = cache.state(&key).unwrap();
    assert_eq!(state.status, ResourceStatus::DoesNotExist);
    assert!(state.resource.is_none());
}

/// The server's first copy replaces a copy from disk, and wakes watchers
/// even with the same bytes: the ambient error is gone.
#[test]
fn first_copy_from_a_server_confirms_a_disk_copy_and_clears_its_error() {
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let key = ResourceKey::new(CDS, "c1");
    from_disk(&cache, &key, &server);
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let (mut rx, _) = cache.add_watcher(&key, provenance, DataErrorPolicy::default());
    assert!(
        rx.has_changed().unwrap(),
        "a watcher sees the disk copy at once"
    );
    rx.mark_unchanged();
    let upsert = CoreEvent::Upsert {
        key: key.clone(),
        resource: cluster_copy("c1", "disk"),
        version: Arc::from("1"),
        ttl: None,
    };
    cache.apply(&server, DataErrorPolicy::default(), vec![upsert]);
    assert!(rx.has_changed().unwrap());
    let state = cache.state(&key).unwrap();
    assert_eq!(state.status, ResourceStatus::Acked);
    assert_eq!(state.error, None);
}

/// A copy from disk answers nothing for fallback (gRFC A71), nor stands in
/// for a server's copy for `#alt`: a reachable source is still asked.
#[test]
fn disk_copy_does_not_count_as_answered() {
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let key = ResourceKey::new(CDS, "c1");
    from_disk(&cache, &key, &server);
    assert!(!cache.is_answered(&key));
    assert!(!cache.has_copy(&key));
    assert!(cache.state(&key).is_some_and(|s| s.resource.is_some()));
}

/// A copy loaded before anyone watched it takes its first watcher's
/// server features: with `ignore_resource_deletion`, a deletion keeps it.
#[test]
fn disk_copy_takes_its_first_watchers_server_features() {
    let cache = Cache::new();
    let key = ResourceKey::new(CDS, "c1");
    from_disk(&cache, &key, &Arc::from("old"));
    let server: Arc<str> = Arc::from("new");
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let policy = DataErrorPolicy {
        ignore_resource_deletion: true,
        ..DataErrorPolicy::default()
    };
    let _rx = cache.add_watcher(&key, provenance, policy);
    let removed = CoreEvent::Removed {
        key: key.clone(),
        reason: xdsfed_core::protocol::RemovedReason::Deleted,
    };
    cache.apply(&server, DataErrorPolicy::default(), vec![removed]);
    assert!(cache.state(&key).unwrap().resource.is_some());
    let mut servers = Vec::new();
    cache.for_each(|_, p, _| servers.push(Arc::clone(&p.server)));
    assert_eq!(servers, vec![server]);
}

/// A removal of a name the client never held deletes nothing: the watcher
/// is told the resource is not found on the server, not that the server
/// deleted it; once a copy was held, the same removal is a deletion.
#[test]
fn removal_of_a_name_never_held_is_not_found_and_of_a_held_copy_is_deleted() {
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let key = ResourceKey::new(CDS, "c1");
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let _rx = cache.add_watcher(&key, provenance, DataErrorPolicy::default());
    let removed = || CoreEvent::Removed {
        key: key.clone(),
        reason: xdsfed_core::protocol::RemovedReason::Deleted,
    };
    let error = |cache: &Cache| cache.state(&key).unwrap().error.clone().unwrap();

    cache.apply(&server, DataErrorPolicy::default(), vec![removed()]);
    let never_held = error(&cache);
    assert_eq!(never_held.cause(), &xdsfed_core::error::Cause::NotOnServer);
    assert!(
        never_held.to_string().contains("not found on server s"),
        "{never_held}"
    );

    let upsert = CoreEvent::Upsert {
        key: key.clone(),
        resource: cluster_copy("c1", "a"),
        version: Arc::from("1"),
        ttl: None,
    };
    cache.apply(&server, DataErrorPolicy::default(), vec![upsert, removed()]);
    let deleted = error(&cache);
    assert_eq!(deleted.cause(), &xdsfed_core::error::Cause::Deleted);
    assert!(
        deleted.to_string().contains("deleted by server s"),
        "{deleted}"
    );
}

/// Entries are indexed by glob only once a glob of their type is watched:
/// a glob watched later still finds the members cached before it (the
/// index is built then), and members that arrive after it.
#[test]
fn a_glob_watched_late_finds_the_members_cached_before_it() {
    const LEDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";
    let member = |id: &str| format!("xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/{id}");
    let cache = Cache::new();
    let server: Arc<str> = Arc::from("s");
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    let upsert = |name: &str| CoreEvent::Upsert {
        key: ResourceKey::new(LEDS, name),
        resource: cluster_copy(name, "x"),
        version: Arc::from("1"),
        ttl: None,
    };
    let early = ResourceKey::new(LEDS, member("early"));
    let _held = cache.add_watcher(&early, provenance, DataErrorPolicy::default());
    cache.apply(
        &server,
        DataErrorPolicy::default(),
        vec![upsert(&member("early"))],
    );
    assert!(cache.lock().by_glob.is_empty(), "no glob watched: no index");

    let glob = ResourceKey::new(LEDS, member("*"));
    let queue = cache.add_collection(&glob);
    cache.apply(
        &server,
        DataErrorPolicy::default(),
        vec![upsert(&member("late"))],
    );
    let mut dirty = Vec::new();
    while let Some(name) = queue.dirty.lock().unwrap_or_else(|e| e.into_inner()).pop() {
        dirty.push(name.to_string());
    }
    assert_eq!(dirty, [member("early"), member("late")]);
    let inner = cache.lock();
    let indexed = inner.under_glob(&glob).count();
    assert_eq!(indexed, 2, "both members are in the glob's index");
}
