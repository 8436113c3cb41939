//! Collection roots (xDS TP1): glob and list collections of listeners and
//! clusters whose members the graph follows.

use super::*;
use crate::{CollectionUpdate, GraphError};

const LISTENERS: &str = "xdstp://a/envoy.config.listener.v3.Listener/edge/*";
const CLUSTERS: &str = "xdstp://a/envoy.config.cluster.v3.ClusterCollection/pool";

fn member(kind: &str, id: &str) -> String {
    format!("xdstp://a/envoy.config.{kind}/{id}")
}

impl Harness {
    fn listener_member(&mut self, collection: &str, l: Listener, version: &str) {
        let name: Arc<str> = Arc::from(l.name.as_str());
        let p = Self::provenance(&name, version);
        let update = CollectionUpdate::Member(name, Update::Changed(Arc::new(l), p));
        self.engine
            .on_listener_collection(self.now, collection, update);
    }

    fn cluster_member(&mut self, collection: &str, c: Cluster, version: &str) {
        let name: Arc<str> = Arc::from(c.name.as_str());
        let p = Self::provenance(&name, version);
        let update = CollectionUpdate::Member(name, Update::Changed(Arc::new(held(&c)), p));
        self.engine
            .on_cluster_collection(self.now, collection, update);
    }

    fn listener_collection(&mut self, collection: &str, update: CollectionUpdate<Listener>) {
        self.engine
            .on_listener_collection(self.now, collection, update);
    }

    fn cluster_collection(&mut self, collection: &str, update: CollectionUpdate<ClusterView>) {
        self.engine
            .on_cluster_collection(self.now, collection, update);
    }
}

fn listed(names: &[&str]) -> Arc<[Arc<str>]> {
    names.iter().map(|n| Arc::from(*n)).collect()
}

fn members(s: &Snapshot, collection: &str) -> Vec<String> {
    s.collection(collection)
        .map(|c| c.members().map(|m| m.to_string()).collect())
        .unwrap_or_default()
}

/// A glob of listeners: the collection is watched (its members are not,
/// the collection delivers them), a member's routes and clusters are
/// followed and warmed, and the snapshot lists the member.
#[test]
fn glob_members_are_roots_whose_graph_is_followed_and_warmed() {
    let mut h = Harness::new(Roots::new().listener_collection(LISTENERS));
    let log = h.watch_changes();
    assert_eq!(
        log.collections,
        [key(ResourceKind::Listener, LISTENERS)],
        "the collection is asked for"
    );
    assert!(log.watched.is_empty());
    assert!(h.snapshot().is_none(), "waits for the collection's answer");

    let edge1 = member("listener.v3.Listener", "edge/one");
    h.listener_member(LISTENERS, listener_rds(&edge1, "r"), "1");
    let log = h.watch_changes();
    assert_eq!(
        log.watched,
        [key(ResourceKind::RouteConfiguration, "r")],
        "the member's route is followed; the member itself is not watched"
    );
    assert!(h.snapshot().is_none(), "the member's route is cold");
    h.route(route_config("r", &["c"]), "1");
    h.cluster(eds_cluster("c", None), "1");
    h.endpoints(cla("c", 1), "1");

    let s = h.ready();
    assert!(s.listener(&edge1).is_some_and(|l| l.error.is_none()));
    assert!(s.cluster("c").is_some_and(|c| c.is_ok()));
    assert_eq!(members(&s, LISTENERS), std::slice::from_ref(&edge1));
    let entry = s.collection(LISTENERS).map(|c| (c.kind, c.error.is_none()));
    assert_eq!(entry, Some((ResourceKind::Listener, true)));
}

/// A glob member the server deletes leaves the graph, and what only it
/// reached is unwatched at publication. `Empty` takes every member out.
#[test]
fn glob_member_deleted_leaves_and_empty_glob_clears_the_collection() {
    let mut h = Harness::new(Roots::new().listener_collection(LISTENERS));
    let (one, two) = (
        member("listener.v3.Listener", "edge/one"),
        member("listener.v3.Listener", "edge/two"),
    );
    h.listener_member(LISTENERS, listener_rds(&one, "r1"), "1");
    h.listener_member(LISTENERS, listener_rds(&two, "r2"), "1");
    h.route(route_config("r1", &[]), "1");
    h.route(route_config("r2", &[]), "1");
    h.ready();
    h.watch_changes();

    h.listener_collection(
        LISTENERS,
        CollectionUpdate::Member(Arc::from(one.as_str()), Update::DoesNotExist),
    );
    let s = h.ready();
    assert!(s.listener(&one).is_none());
    assert_eq!(members(&s, LISTENERS), std::slice::from_ref(&two));
    assert_eq!(
        h.watch_changes().unwatched,
        [key(ResourceKind::RouteConfiguration, "r1")],
        "the member itself was never watched on its own"
    );

    h.listener_collection(LISTENERS, CollectionUpdate::Empty);
    let s = h.ready();
    assert_eq!(s.listeners().count(), 0);
    assert!(members(&s, LISTENERS).is_empty());
    assert_eq!(
        h.watch_changes().unwatched,
        [key(ResourceKind::RouteConfiguration, "r2")]
    );
}

/// A list collection names its members: the first snapshot waits until
/// every listed member has arrived; a member no longer listed leaves.
#[test]
fn list_collection_waits_for_every_listed_member() {
    let mut h = Harness::new(Roots::new().cluster_collection(CLUSTERS));
    let (bar, baz) = (
        member("cluster.v3.Cluster", "bar"),
        member("cluster.v3.Cluster", "baz"),
    );
    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[&bar, &baz])));
    assert!(h.snapshot().is_none(), "both members are cold");
    h.cluster_member(CLUSTERS, static_cluster(&bar), "1");
    assert!(h.snapshot().is_none(), "baz is still cold");
    h.cluster_member(CLUSTERS, static_cluster(&baz), "1");
    let s = h.ready();
    assert_eq!(members(&s, CLUSTERS), [bar.clone(), baz.clone()]);
    assert!(s.cluster(&baz).is_some_and(|c| c.is_ok()));

    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[&bar])));
    let s = h.ready();
    assert_eq!(members(&s, CLUSTERS), std::slice::from_ref(&bar));
    assert!(s.cluster(&baz).is_none(), "no longer listed");
    assert!(h.watch_changes().watched.is_empty(), "nothing to watch");
}

/// A listed member that does not exist stays listed and shows as absent; a
/// listed member that never arrives fails at the warming timeout.
#[test]
fn listed_member_that_does_not_exist_or_never_arrives_is_marked_failed() {
    let mut h = Harness::new(Roots::new().cluster_collection(CLUSTERS));
    let (gone, late) = (
        member("cluster.v3.Cluster", "gone"),
        member("cluster.v3.Cluster", "late"),
    );
    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[&gone, &late])));
    h.cluster_collection(
        CLUSTERS,
        CollectionUpdate::Member(Arc::from(gone.as_str()), Update::DoesNotExist),
    );
    assert!(h.snapshot().is_none(), "late is still cold");
    h.advance(TIMEOUT);
    let s = h.ready();
    assert_eq!(members(&s, CLUSTERS), [gone.clone(), late.clone()]);
    assert!(matches!(
        s.cluster(&gone).and_then(|c| c.error.clone()),
        Some(GraphError::DoesNotExist { .. })
    ));
    assert!(matches!(
        s.cluster(&late).and_then(|c| c.error.clone()),
        Some(GraphError::WarmingTimeout { .. })
    ));
}

/// A collection that never answers holds the first snapshot back only
/// until the warming timeout.
#[test]
fn silent_collection_is_published_empty_at_the_warming_timeout() {
    let mut h = Harness::new(Roots::new().listener_collection(LISTENERS));
    assert!(h.snapshot().is_none());
    assert_eq!(h.engine.poll_timeout(), Some(h.now + TIMEOUT));
    h.advance(TIMEOUT);
    let s = h.ready();
    assert!(members(&s, LISTENERS).is_empty());
}

/// The collection's own error is shown on it while its members keep
/// serving; its next good news clears it.
#[test]
fn collection_error_keeps_the_members_and_clears_on_the_next_update() {
    let mut h = Harness::new(Roots::new().cluster_collection(CLUSTERS));
    let bar = member("cluster.v3.Cluster", "bar");
    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[&bar])));
    h.cluster_member(CLUSTERS, static_cluster(&bar), "1");
    h.ready();

    h.cluster_collection(
        CLUSTERS,
        CollectionUpdate::Error(rejected("NACKed: bad entry")),
    );
    let s = h.ready();
    let entry = s.collection(CLUSTERS).map(|c| c.error.clone());
    assert!(
        matches!(entry, Some(Some(GraphError::Resource { ref error, .. })) if error.message().contains("bad entry")),
        "{entry:?}"
    );
    assert!(s.cluster(&bar).is_some_and(|c| c.is_ok()), "still serving");

    h.cluster_member(CLUSTERS, static_cluster(&bar), "2");
    let s = h.ready();
    assert!(s.collection(CLUSTERS).is_some_and(|c| c.error.is_none()));
}

/// A member a route also names stays when it leaves the collection, and is
/// watched by name from then on (the collection no longer delivers it).
#[test]
fn member_that_leaves_but_is_still_referenced_is_watched_by_name() {
    let mut h = Harness::new(Roots::new().listener("l").cluster_collection(CLUSTERS));
    let bar = member("cluster.v3.Cluster", "bar");
    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[&bar])));
    h.cluster_member(CLUSTERS, static_cluster(&bar), "1");
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &[&bar]), "1");
    h.ready();
    let log = h.watch_changes();
    assert!(
        !log.watched.contains(&key(ResourceKind::Cluster, &bar)),
        "a member is delivered by its collection"
    );

    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&[])));
    let s = h.ready();
    assert!(
        s.cluster(&bar).is_some_and(|c| c.is_ok()),
        "the route keeps it"
    );
    assert_eq!(
        h.watch_changes().watched,
        [key(ResourceKind::Cluster, &bar)]
    );
}

/// A member's ambient error keeps its value; a member error without a copy
/// makes it a member that has failed.
#[test]
fn member_errors_are_ambient_with_a_copy_and_definite_without() {
    let mut h = Harness::new(Roots::new().cluster_collection(CLUSTERS));
    let (bar, bad) = (
        member("cluster.v3.Cluster", "bar"),
        member("cluster.v3.Cluster", "bad"),
    );
    h.cluster_member(CLUSTERS, static_cluster(&bar), "1");
    h.cluster_collection(
        CLUSTERS,
        CollectionUpdate::Member(
            Arc::from(bar.as_str()),
            Update::AmbientError(transient("server down")),
        ),
    );
    h.cluster_collection(
        CLUSTERS,
        CollectionUpdate::Member(
            Arc::from(bad.as_str()),
            Update::Error(rejected("redirect loop")),
        ),
    );
    let s = h.ready();
    let kept = s
        .cluster(&bar)
        .and_then(|c| c.cluster.as_ref().map(|v| v.ambient_error.clone()));
    assert_eq!(kept, Some(Some(Arc::new(transient("server down")))));
    assert!(matches!(
        s.cluster(&bad).and_then(|c| c.error.clone()),
        Some(GraphError::Resource { .. })
    ));
    assert_eq!(members(&s, CLUSTERS), [bad.clone(), bar.clone()]);
}

/// Work in proportion to change: one member's update rebuilds that member
/// only; the other members and the collection entry are shared.
#[test]
fn member_update_shares_everything_else_with_the_previous_snapshot() {
    let mut h = Harness::new(Roots::new().cluster_collection(CLUSTERS));
    let names: Vec<String> = (0..100)
        .map(|i| member("cluster.v3.Cluster", &format!("c{i}")))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    h.cluster_collection(CLUSTERS, CollectionUpdate::Listed(listed(&refs)));
    for n in &names {
        h.cluster_member(CLUSTERS, static_cluster(n), "1");
    }
    let before = h.ready();
    h.cluster_member(CLUSTERS, static_cluster(&names[7]), "2");
    let after = h.ready();
    for n in &names {
        let (a, b) = (before.cluster(n), after.cluster(n));
        let shared = matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
        assert_eq!(shared, n != &names[7], "{n}");
    }
    let shared = matches!(
        (before.collection(CLUSTERS), after.collection(CLUSTERS)),
        (Some(a), Some(b)) if Arc::ptr_eq(a, b)
    );
    assert!(shared, "membership did not change");
}

/// A collection of the wrong kind, or one not in the roots, changes nothing.
#[test]
fn updates_for_collections_not_in_the_roots_are_ignored() {
    let mut h = Harness::new(Roots::new().listener_collection(LISTENERS));
    h.cluster_collection(LISTENERS, CollectionUpdate::Empty);
    h.cluster_collection(CLUSTERS, CollectionUpdate::Empty);
    assert!(
        h.snapshot().is_none(),
        "the listener collection has not answered"
    );
}
