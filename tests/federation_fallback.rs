//! Server fallback within an authority (gRFC A71), against the testbed over
//! loopback gRPC: the three scenarios of gRPC's fallback interop tests, each
//! with the switch back to the primary, and isolation between authorities.
//!
//! The authority `cloud.example` lists two servers, `primary` then
//! `secondary`; each serves its own copy of every resource, told apart by
//! the cluster's EDS service name.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;
use xdsfed::core::types::ClusterView;

use common::resources::cluster;
use common::{PATIENCE, bootstrap_json, changed_until, client, eventually};
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::CollectionEvent;
use xdsfed::core::types::ClusterType;
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const OTHER: &str = "other.example";

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// Serves `name` on `server`, its EDS service name saying which server.
fn serve(server: &Server, name: &str) {
    server
        .set_message(name, &cluster(name, server.name()))
        .unwrap();
}

struct Setup {
    testbed: Testbed,
    client: XdsClient,
}

impl Setup {
    /// `primary` serves cloud.example and other.example; `secondary` is
    /// cloud.example's fallback.
    async fn start() -> Setup {
        let testbed = Testbed::start([
            ServerSpec::new("primary", [CLOUD, OTHER]),
            ServerSpec::new("secondary", [CLOUD]),
        ])
        .await
        .unwrap();
        let (p, s) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
        let client = client(&bootstrap_json(
            &p,
            &[(CLOUD, &[p.as_str(), s.as_str()]), (OTHER, &[p.as_str()])],
            "",
        ));
        Setup { testbed, client }
    }

    fn primary(&self) -> &Server {
        &self.testbed.servers()[0]
    }

    fn secondary(&self) -> &Server {
        &self.testbed.servers()[1]
    }

    async fn primary_down(&self) {
        common::take_down(self.primary()).await;
    }

    fn primary_up(&self) {
        common::bring_up(self.primary());
    }

    /// Whether the client still subscribes `name` on the secondary.
    fn secondary_subscribes(&self, name: &str) -> bool {
        common::subscribes_on(self.secondary(), name)
    }

    fn source_of(&self, name: &str) -> Option<(String, bool)> {
        let status = self.client.status();
        let r = status.resources.iter().find(|r| r.name == name)?;
        let source = r.source.as_ref()?;
        Some((source.server.clone(), source.fallback))
    }
}

/// A71 (interop "fallback before startup"): the primary is down when the
/// client starts, so the resource comes from the secondary; once the
/// primary answers, the client switches back and leaves the secondary.
#[tokio::test]
async fn fallback_at_startup_uses_the_next_server_and_switches_back() {
    let setup = Setup::start().await;
    let c = cluster_name(CLOUD, "payments");
    serve(setup.primary(), &c);
    serve(setup.secondary(), &c);
    setup
        .primary()
        .update_faults(|f| f.refuse_connections = true);

    let mut watch = setup.client.watch::<ClusterType>(&c).unwrap();
    changed_until(&mut watch, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;
    let (server, fallback) = setup.source_of(&c).unwrap();
    assert!(fallback, "status says the copy came from a fallback server");
    assert!(server.contains(&setup.secondary().uri()), "{server}");

    setup.primary_up();
    changed_until(&mut watch, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    let (server, fallback) = setup.source_of(&c).unwrap();
    assert!(!fallback);
    assert!(server.contains(&setup.primary().uri()), "{server}");
    eventually("the client unsubscribes from the secondary", || {
        !setup.secondary_subscribes(&c)
    })
    .await;
}

/// A71: "the client closes its connections to lower-priority servers" once
/// the primary answers again. With an idle grace period far longer than
/// the test's patience, the secondary still sees its stream end: the close
/// is the switch-back's, not the idle timer's.
#[tokio::test]
async fn switching_back_closes_the_fallback_stream_at_once() {
    let setup = Setup::start().await;
    let (p, s) = (setup.primary().uri(), setup.secondary().uri());
    let bootstrap = bootstrap_json(&p, &[(CLOUD, &[p.as_str(), s.as_str()])], "");
    let client =
        XdsClient::builder(xdsfed::core::bootstrap::Bootstrap::from_json_str(&bootstrap).unwrap())
            .transport_options(xdsfed::client::transport::TransportOptions {
                idle_grace: Duration::from_secs(3600),
                ..common::fast_transport()
            })
            .build()
            .unwrap();
    let c = cluster_name(CLOUD, "payments");
    serve(setup.primary(), &c);
    serve(setup.secondary(), &c);
    setup
        .primary()
        .update_faults(|f| f.refuse_connections = true);
    let mut watch = client.watch::<ClusterType>(&c).unwrap();
    changed_until(&mut watch, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;
    let open = || {
        setup
            .secondary()
            .recording()
            .streams()
            .iter()
            .filter(|s| s.closed.is_none())
            .count()
    };
    assert_eq!(open(), 1, "the client streams from the secondary");

    setup.primary_up();
    changed_until(&mut watch, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    eventually("the secondary sees the client's stream closed", || {
        open() == 0
    })
    .await;
}

/// A71 (interop "fallback mid-startup"): the primary delivers part of the
/// configuration and fails before the rest; the missing resource comes from
/// the secondary, the primary's copies keep serving, and the client switches
/// back when the primary returns.
#[tokio::test]
async fn fallback_mid_startup_fetches_what_is_missing_and_keeps_primary_data() {
    let setup = Setup::start().await;
    let first = cluster_name(CLOUD, "first");
    let second = cluster_name(CLOUD, "second");
    serve(setup.primary(), &first);
    serve(setup.primary(), &second);
    serve(setup.secondary(), &second);
    // The primary holds `second` back; the secondary has no `first` to
    // replace the primary's copy with.
    setup.primary().update_faults(|f| {
        f.silent_names.insert(second.clone());
    });
    setup.secondary().update_faults(|f| {
        f.silent_names.insert(first.clone());
    });

    let mut w1 = setup.client.watch::<ClusterType>(&first).unwrap();
    let mut w2 = setup.client.watch::<ClusterType>(&second).unwrap();
    changed_until(&mut w1, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;

    setup.primary_down().await;
    changed_until(&mut w2, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;
    let kept = w1.current().expect("the primary's copy keeps serving");
    assert_eq!(service_of(&kept), "primary");
    assert_eq!(setup.source_of(&first).map(|s| s.1), Some(false));

    setup.primary().update_faults(|f| {
        f.silent_names.clear();
        f.refuse_connections = false;
    });
    changed_until(&mut w2, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    eventually("the client unsubscribes from the secondary", || {
        !setup.secondary_subscribes(&second)
    })
    .await;
}

/// A71 (interop "fallback mid-update"): with everything cached, a failing
/// primary causes no fallback (cached data keeps serving); a new resource
/// the client then needs comes from the secondary; the primary's return
/// switches the client back.
#[tokio::test]
async fn fallback_mid_update_only_when_a_watched_resource_is_not_cached() {
    let setup = Setup::start().await;
    let old = cluster_name(CLOUD, "old");
    let new = cluster_name(CLOUD, "new");
    for name in [&old, &new] {
        serve(setup.primary(), name);
        serve(setup.secondary(), name);
    }
    let mut w_old = setup.client.watch::<ClusterType>(&old).unwrap();
    changed_until(&mut w_old, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;

    setup.primary_down().await;
    eventually("the client notices the primary is down", || {
        setup
            .client
            .status()
            .servers
            .iter()
            .any(|s| s.server.contains(&setup.primary().uri()) && s.server_failure > 0)
    })
    .await;
    assert_eq!(
        setup.secondary().recording().stream_count(),
        0,
        "no fallback while every watched resource is cached"
    );

    let mut w_new = setup.client.watch::<ClusterType>(&new).unwrap();
    changed_until(&mut w_new, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;

    setup.primary_up();
    changed_until(&mut w_new, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    eventually("the client unsubscribes from the secondary", || {
        !setup.secondary_subscribes(&new)
    })
    .await;
}

/// Isolation: while cloud.example is on its fallback server, other.example,
/// whose only server is the primary, stays as it was, and once the primary
/// is back its updates flow on the shared stream.
#[tokio::test]
async fn fallback_of_one_authority_leaves_another_on_the_same_stream_alone() {
    let setup = Setup::start().await;
    let cloud = cluster_name(CLOUD, "web");
    let other = cluster_name(OTHER, "db");
    serve(setup.primary(), &cloud);
    serve(setup.secondary(), &cloud);
    serve(setup.primary(), &other);
    setup.primary().update_faults(|f| {
        f.silent_names.insert(cloud.clone());
    });

    let mut w_other = setup.client.watch::<ClusterType>(&other).unwrap();
    let mut w_cloud = setup.client.watch::<ClusterType>(&cloud).unwrap();
    changed_until(&mut w_other, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;

    setup.primary_down().await;
    changed_until(&mut w_cloud, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;
    assert_eq!(
        w_other
            .current()
            .map(|c| service_of(&c).to_owned())
            .as_deref(),
        Some("primary"),
        "other.example keeps its copy"
    );
    assert!(
        setup
            .secondary()
            .recording()
            .streams()
            .iter()
            .flat_map(|s| s.delta_requests().cloned().collect::<Vec<_>>())
            .all(|r| r
                .resource_names_subscribe
                .iter()
                .all(|n| !n.contains(OTHER))),
        "other.example is never asked of cloud.example's fallback server"
    );

    setup.primary().update_faults(|f| {
        f.silent_names.clear();
        f.refuse_connections = false;
    });
    changed_until(&mut w_cloud, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    let mut updated = cluster(&other, "primary");
    updated.eds_cluster_config.as_mut().unwrap().service_name = "primary-v2".into();
    setup.primary().set_message(&other, &updated).unwrap();
    changed_until(&mut w_other, "the update", |r| {
        service_of(r) == "primary-v2"
    })
    .await;
}

/// A71 with a glob collection: members held from the primary count as
/// cached, so a failing primary causes no fallback; the status dump shows
/// the glob answered and each member's server. A glob with nothing held
/// falls back like any resource, and its members say so.
#[tokio::test]
async fn glob_members_count_as_cached_and_show_their_server() {
    let setup = Setup::start().await;
    let member = cluster_name(CLOUD, "pool/one");
    let glob = cluster_name(CLOUD, "pool/*");
    serve(setup.primary(), &member);
    serve(setup.secondary(), &member);
    let mut watch = setup.client.watch_collection::<ClusterType>(&glob).unwrap();
    let first = tokio::time::timeout(PATIENCE, watch.next()).await;
    assert!(
        matches!(first, Ok(Some(CollectionEvent::Upsert { ref name, .. })) if **name == *member),
        "{first:?}"
    );
    let status = setup.client.status();
    let of = |name: &str| status.resources.iter().find(|r| r.name == name);
    assert_eq!(
        of(&glob).map(|r| r.status),
        Some(ResourceStatus::Acked),
        "a member answers for its glob"
    );
    let primary = setup.primary().uri();
    assert!(
        setup
            .source_of(&member)
            .is_some_and(|(server, fallback)| server.contains(&primary) && !fallback),
        "{:?}",
        setup.source_of(&member)
    );

    setup.primary_down().await;
    eventually("the client notices the primary is down", || {
        setup
            .client
            .status()
            .servers
            .iter()
            .any(|s| s.server.contains(&primary) && s.server_failure > 0)
    })
    .await;
    assert_eq!(
        setup.secondary().recording().stream_count(),
        0,
        "no fallback while the glob's members are cached"
    );

    // A second glob with nothing cached needs the secondary.
    let other = cluster_name(CLOUD, "spare/one");
    serve(setup.secondary(), &other);
    let mut spare = setup
        .client
        .watch_collection::<ClusterType>(&cluster_name(CLOUD, "spare/*"))
        .unwrap();
    let got = tokio::time::timeout(PATIENCE, spare.next()).await;
    assert!(
        matches!(got, Ok(Some(CollectionEvent::Upsert { ref name, .. })) if **name == *other),
        "{got:?}"
    );
    let secondary = setup.secondary().uri();
    assert!(
        setup
            .source_of(&other)
            .is_some_and(|(server, fallback)| server.contains(&secondary) && fallback),
        "{:?}",
        setup.source_of(&other)
    );
}
