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
        version: xdsfed_core::version::Version::from("1"),
        ttl: None,
    };
    let nack = |why: &str| CoreEvent::Invalid {
        key: key.clone(),
        error: xdsfed_core::types::ValidationError(why.into()),
        version: xdsfed_core::version::Version::from("2"),
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
        version: xdsfed_core::version::Version::from("1"),
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
        version: xdsfed_core::version::Version::from("1"),
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

/// The type of the LEDS tests' members.
const LEDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";

/// Member `id` of the LEDS tests' glob (`member("*")` is the glob).
fn member(id: &str) -> String {
    format!("xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/{id}")
}

/// The server the LEDS tests' members come from, and its provenance.
fn leds_server() -> (Arc<str>, Provenance) {
    let server: Arc<str> = Arc::from("s");
    let provenance = Provenance {
        authority: None,
        server: Arc::clone(&server),
    };
    (server, provenance)
}

/// A copy of LEDS member `name`.
fn upsert(name: &str) -> CoreEvent {
    CoreEvent::Upsert {
        key: ResourceKey::new(LEDS, name),
        resource: cluster_copy(name, "x"),
        version: xdsfed_core::version::Version::from("1"),
        ttl: None,
    }
}

/// Entries are indexed by glob only once a glob of their type is watched:
/// a glob watched later still finds the members cached before it (the
/// index is built then), and members that arrive after it.
#[test]
fn a_glob_watched_late_finds_the_members_cached_before_it() {
    let cache = Cache::new();
    let (server, provenance) = leds_server();
    let early = ResourceKey::new(LEDS, member("early"));
    let _held = cache.add_watcher(&early, provenance, DataErrorPolicy::default());
    cache.apply(
        &server,
        DataErrorPolicy::default(),
        vec![upsert(&member("early"))],
    );
    assert!(
        cache.lock().entries.by_glob().is_empty(),
        "no glob watched: no index"
    );

    let glob = ResourceKey::new(LEDS, member("*"));
    let queue = cache.add_collection(&glob, None);
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

/// A watched glob's index is keyed by the glob's own entry's copy of its
/// name: one copy a collection, not one more in the index.
#[test]
fn a_watched_globs_index_shares_its_entrys_name() {
    let cache = Cache::new();
    let glob = ResourceKey::new(LEDS, Members::name("*"));
    let provenance = Provenance {
        authority: None,
        server: Arc::from("s"),
    };
    let _queue = cache.add_collection(&glob, None);
    let _watched = cache.add_watcher(&glob, provenance, DataErrorPolicy::default());
    let members = Members {
        cache,
        server: Arc::from("s"),
    };
    members.upsert("e1", "a");
    members.upsert("e2", "a");
    let inner = members.cache.lock();
    let (indexed, names) = inner
        .entries
        .by_glob()
        .get_key_value(&glob)
        .expect("the glob is indexed");
    assert_eq!(names.len(), 2);
    assert!(
        Arc::ptr_eq(&indexed.name, &glob.name),
        "the entry's copy, shared"
    );
}

/// What a glob collection's members look like to the cache's tests: one
/// server, a watched glob, and an upsert or NACK of a member by id.
struct Members {
    cache: Cache,
    server: Arc<str>,
}

impl Members {
    fn new() -> Self {
        let cache = Cache::new();
        let glob = ResourceKey::new(LEDS, Self::name("*"));
        let _queue = cache.add_collection(&glob, None);
        Members {
            cache,
            server: Arc::from("s"),
        }
    }

    fn name(id: &str) -> String {
        format!("xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/{id}")
    }

    fn key(id: &str) -> ResourceKey {
        ResourceKey::new(LEDS, Self::name(id))
    }

    fn send(&self, event: CoreEvent) {
        self.cache
            .apply(&self.server, DataErrorPolicy::default(), vec![event]);
    }

    fn upsert(&self, id: &str, body: &str) {
        self.send(CoreEvent::Upsert {
            key: Self::key(id),
            resource: cluster_copy(&Self::name(id), body),
            version: xdsfed_core::version::Version::from(body),
            ttl: None,
        });
    }

    fn plain(&self) -> usize {
        self.cache.lock().entries.plain_len()
    }

    /// A watcher of `key`, whose entry is then full.
    fn watch(&self, key: &ResourceKey) -> watch::Receiver<ResourceState> {
        let provenance = Provenance {
            authority: Some(Arc::from("a")),
            server: Arc::clone(&self.server),
        };
        let (rx, _) = self
            .cache
            .add_watcher(key, provenance, DataErrorPolicy::default());
        rx
    }
}

/// A member held for a collection alone is held plain, and reads as the
/// state a full entry holds after the same events: the same copy,
/// version, status, source and provenance, and a time of arrival kept to
/// the nanosecond.
#[test]
fn a_plain_entry_reads_as_the_state_it_holds() {
    let members = Members::new();
    let before = SystemTime::now();
    members.upsert("e1", "a");
    assert_eq!(members.plain(), 1, "a collection's member is held plain");

    // The same events on an entry a watcher keeps full.
    let full = Cache::new();
    let key = Members::key("e1");
    let provenance = Provenance {
        authority: Some(Arc::from("a")),
        server: Arc::clone(&members.server),
    };
    let _rx = full.add_watcher(&key, provenance.clone(), DataErrorPolicy::default());
    full.apply(
        &members.server,
        DataErrorPolicy::default(),
        vec![CoreEvent::Upsert {
            key: key.clone(),
            resource: cluster_copy(&key.name, "a"),
            version: xdsfed_core::version::Version::from("a"),
            ttl: None,
        }],
    );

    let plain = members.cache.state(&key).unwrap();
    let expected = full.state(&key).unwrap();
    assert_eq!(plain.status, expected.status);
    assert_eq!(plain.version, expected.version);
    assert_eq!(plain.source, expected.source);
    assert_eq!(plain.error, expected.error);
    assert_eq!(plain.failed_update, expected.failed_update);
    assert_eq!(
        plain.resource.as_ref().map(|r| r.raw().clone()),
        expected.resource.as_ref().map(|r| r.raw().clone())
    );
    let arrived = plain.last_updated.unwrap();
    assert!(arrived >= before && arrived <= SystemTime::now());
    assert_eq!(
        members.cache.state(&key).unwrap().last_updated,
        Some(arrived),
        "read again, the same instant"
    );
    let mut seen = Vec::new();
    members
        .cache
        .for_each(|k, p, s| seen.push((k.clone(), p.clone(), s.status)));
    assert!(seen.contains(&(key, provenance, ResourceStatus::Acked)));
}

/// A plain member stays plain through its server's next copies and reads
/// as a full entry after the same events: new bytes wake the collection
/// and stamp the arrival; the same bytes at a new version change the
/// version alone and wake no one.
#[test]
fn a_plain_member_reads_as_a_full_one_after_its_servers_next_copies() {
    let cache = Cache::new();
    let glob = ResourceKey::new(LEDS, Members::name("*"));
    let queue = cache.add_collection(&glob, None);
    let members = Members {
        cache,
        server: Arc::from("s"),
    };
    let twin = Members::new();
    let key = Members::key("e1");
    let _rx = twin.watch(&key);
    let dirty = || {
        let mut names = Vec::new();
        while let Some(name) = queue.dirty.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            names.push(name.to_string());
        }
        names
    };
    let send = |id: &str, body: &str, version: &str| {
        for m in [&members, &twin] {
            m.send(CoreEvent::Upsert {
                key: Members::key(id),
                resource: cluster_copy(&Members::name(id), body),
                version: xdsfed_core::version::Version::from(version),
                ttl: None,
            });
        }
    };
    let same = |what: &str| {
        let (plain, full) = (
            members.cache.state(&key).unwrap(),
            twin.cache.state(&key).unwrap(),
        );
        assert_eq!(plain.status, full.status, "{what}");
        assert_eq!(plain.version, full.version, "{what}");
        assert_eq!(plain.source, full.source, "{what}");
        assert_eq!(plain.error, full.error, "{what}");
        assert_eq!(
            plain.resource.as_ref().map(|r| r.raw().clone()),
            full.resource.as_ref().map(|r| r.raw().clone()),
            "{what}"
        );
        plain.last_updated.unwrap()
    };

    send("e1", "a", "1");
    assert_eq!(dirty(), [Members::name("e1")]);
    let first = same("first copy");
    send("e1", "b", "2");
    assert_eq!(members.plain(), 1, "still plain");
    assert_eq!(dirty(), [Members::name("e1")], "new bytes wake the set");
    let second = same("new bytes");
    assert!(second >= first);
    send("e1", "b", "3");
    assert!(dirty().is_empty(), "the same bytes wake no one");
    assert_eq!(same("same bytes, new version"), second, "arrival kept");
    assert_eq!(members.plain(), 1);
}

/// A plain member takes every transition a full one does: an ambient
/// error keeps it plain, a NACK makes it full (with the failed update and
/// the NACK reported), the next good copy plain again, a deletion full;
/// a watcher of it gets a full entry and sees its state at once.
#[test]
fn a_plain_entry_turns_full_for_what_a_plain_one_cannot_hold_and_back() {
    let members = Members::new();
    let key = Members::key("e1");
    members.upsert("e1", "a");
    assert_eq!(members.plain(), 1);

    let down = XdsError::new(xdsfed_core::error::ErrorKind::Transient, "down");
    members
        .cache
        .stream_failed_unwatched(&members.server, &down);
    assert_eq!(members.plain(), 1, "an ambient error is held plain");
    assert_eq!(members.cache.state(&key).unwrap().error, Some(down));
    members.cache.stream_healthy(&members.server);
    assert_eq!(members.cache.state(&key).unwrap().error, None);
    assert_eq!(members.plain(), 1);

    members.send(CoreEvent::Invalid {
        key: key.clone(),
        error: xdsfed_core::types::ValidationError("bad".into()),
        version: xdsfed_core::version::Version::from("b"),
    });
    assert_eq!(members.plain(), 0, "a NACK is held full");
    let nacked = members.cache.state(&key).unwrap();
    assert_eq!(nacked.status, ResourceStatus::Nacked);
    assert!(nacked.resource.is_some(), "the last good copy serves");
    assert!(nacked.failed_update.is_some());

    members.upsert("e1", "c");
    assert_eq!(members.plain(), 1, "the next good copy is plain again");
    assert_eq!(
        members
            .cache
            .state(&key)
            .unwrap()
            .version
            .as_ref()
            .map(String::from)
            .as_deref(),
        Some("c")
    );

    let rx = members.watch(&key);
    assert_eq!(members.plain(), 0, "a watcher's entry is full");
    assert!(rx.has_changed().unwrap_or(false), "and it sees the copy");
    assert_eq!(
        rx.borrow().version.as_ref().map(String::from).as_deref(),
        Some("c")
    );
    drop(rx);
    members.cache.remove_watcher(&key);
    assert_eq!(members.plain(), 1, "held for the collection alone again");

    members.send(CoreEvent::Removed {
        key: key.clone(),
        reason: xdsfed_core::protocol::RemovedReason::Deleted,
    });
    assert_eq!(members.plain(), 0);
    let deleted = members.cache.state(&key).unwrap();
    assert_eq!(deleted.status, ResourceStatus::DoesNotExist);
    assert!(deleted.resource.is_none());
}

/// Rule of the entries' module: a member of an indexed glob held plain is
/// held in its glob's index and nowhere else; held full, it is named there
/// and held with the full entries. Either way it is counted once.
#[test]
fn a_plain_member_is_held_in_its_globs_index_only() {
    let members = Members::new();
    members.upsert("e1", "a");
    members.upsert("e2", "a");
    let glob = Members::key("*");
    let slots = |cache: &Cache| -> Vec<(String, bool)> {
        let inner = cache.lock();
        let mut slots: Vec<(String, bool)> = inner
            .entries
            .by_glob()
            .get(&glob)
            .into_iter()
            .flat_map(|m| m.iter().map(|(n, p)| (n.to_string(), p.is_some())))
            .collect();
        slots.sort();
        slots
    };
    let (e1, e2) = (Members::name("e1"), Members::name("e2"));
    assert_eq!(
        slots(&members.cache),
        [(e1.clone(), true), (e2.clone(), true)]
    );
    assert_eq!(members.plain(), 2);
    assert_eq!(members.cache.len(), 2);

    let key = Members::key("e1");
    let rx = members.watch(&key);
    assert_eq!(
        slots(&members.cache),
        [(e1.clone(), false), (e2.clone(), true)]
    );
    assert_eq!(members.plain(), 1);
    assert_eq!(members.cache.len(), 2, "counted once, full");
    assert_eq!(members.cache.lock().under_glob(&glob).count(), 2);

    drop(rx);
    members.cache.remove_watcher(&key);
    assert_eq!(
        slots(&members.cache),
        [(e1.clone(), true), (e2.clone(), true)]
    );
    members.send(CoreEvent::Removed {
        key,
        reason: xdsfed_core::protocol::RemovedReason::Deleted,
    });
    // A deletion is held full, as a does-not-exist state.
    assert_eq!(slots(&members.cache), [(e1, false), (e2, true)]);
    assert_eq!(members.cache.len(), 2);
}

/// A member let go with its glob's last watcher leaves its glob's index,
/// full or plain: the index names nothing the cache no longer holds.
#[test]
fn members_let_go_with_their_glob_leave_its_index() {
    let cache = Cache::new();
    let glob = Members::key("*");
    let queue = cache.add_collection(&glob, None);
    let members = Members {
        cache,
        server: Arc::from("s"),
    };
    members.upsert("e1", "a");
    members.upsert("e2", "a");
    members.send(CoreEvent::Invalid {
        key: Members::key("e2"),
        error: xdsfed_core::types::ValidationError("bad".into()),
        version: xdsfed_core::version::Version::from("b"),
    });
    assert_eq!(members.plain(), 1, "the NACKed member is full");
    assert_eq!(members.cache.len(), 2);

    members.cache.remove_collection(&glob, &queue);
    assert_eq!(members.cache.len(), 0);
    assert!(
        members.cache.lock().entries.by_glob().is_empty(),
        "no name is left in the index"
    );
}

/// A glob waiting for its first answer is answered by its first member
/// (`Acked`, as CSDS shows it); later members leave its state as it is.
#[test]
fn a_glob_is_answered_by_its_first_member_once() {
    let cache = Cache::new();
    let (server, provenance) = leds_server();
    let glob = ResourceKey::new(LEDS, member("*"));
    let _held = cache.add_watcher(&glob, provenance, DataErrorPolicy::default());
    let _queue = cache.add_collection(&glob, None);
    let status = || cache.state(&glob).map(|s| (s.status, s.last_updated));
    assert_eq!(status().map(|s| s.0), Some(ResourceStatus::Requested));

    let policy = DataErrorPolicy::default();
    cache.apply(&server, policy, vec![upsert(&member("e1"))]);
    let answered = status();
    assert_eq!(answered.map(|s| s.0), Some(ResourceStatus::Acked));
    assert!(answered.is_some_and(|s| s.1.is_some()));

    cache.apply(&server, policy, vec![upsert(&member("e2"))]);
    assert_eq!(status(), answered, "a later member leaves the glob be");
}
