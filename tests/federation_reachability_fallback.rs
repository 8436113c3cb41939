//! gRFC A95's `fallback_on_reachability_only` against the testbed over
//! loopback gRPC: an authority with the knob leaves its primary for its
//! secondary as soon as the primary is unreachable, even with everything
//! cached, and returns when the primary answers again; without the knob
//! (gRFC A71) a cached authority stays on its primary.
//!
//! The authority `eds.example` lists two servers, `primary` then
//! `secondary`; each serves its own copy of every resource, told apart by
//! the cluster's EDS service name. What the client asks of the secondary
//! is read off the secondary's recorded streams.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::cluster;
use common::{bootstrap_json, changed_until, client, eventually};
use xdsfed::client::client::XdsClient;
use xdsfed::core::types::ClusterType;
use xdsfed::core::types::ClusterView;
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const EDS: &str = "eds.example";
const LDS: &str = "lds.example";

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
    /// `eds.example` and `lds.example` each on `primary` then `secondary`;
    /// those named in `flagged` have `fallback_on_reachability_only`.
    async fn start(flagged: &[&str]) -> Setup {
        let testbed = Testbed::start([
            ServerSpec::new("primary", [EDS, LDS]),
            ServerSpec::new("secondary", [EDS, LDS]),
        ])
        .await
        .unwrap();
        let (p, s) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
        let both = [p.as_str(), s.as_str()];
        let json = bootstrap_json(&p, &[(EDS, &both), (LDS, &both)], "");
        let mut bootstrap: serde_json::Value = serde_json::from_str(&json).unwrap();
        for authority in flagged {
            bootstrap["authorities"][authority]["fallback_on_reachability_only"] = true.into();
        }
        let client = client(&bootstrap.to_string());
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

    /// Whether the client subscribes `name` on an open stream to the
    /// secondary, by the secondary's recording.
    fn secondary_subscribes(&self, name: &str) -> bool {
        common::subscribes_on(self.secondary(), name)
    }

    /// Whether any request to the secondary ever named a resource of
    /// `authority`.
    fn secondary_ever_asked_for(&self, authority: &str) -> bool {
        self.secondary().recording().streams().iter().any(|s| {
            s.delta_requests().any(|r| {
                r.resource_names_subscribe
                    .iter()
                    .any(|n| n.contains(authority))
            })
        })
    }

    /// Waits until the client has seen the primary fail.
    async fn primary_failure_seen(&self) {
        let primary = self.primary().uri();
        eventually("the client notices the primary is down", || {
            self.client
                .status()
                .servers
                .iter()
                .any(|s| s.server.contains(&primary) && s.server_failure > 0)
        })
        .await;
    }
}

/// gRFC A95: "If set to true, then we will fallback when the primary
/// server is unreachable, even if we do not have any uncached resources";
/// gRFC A71: "Once such a resource is received [from the primary], the
/// XdsClient will close connections to the lower-priority server(s)".
#[tokio::test]
async fn reachability_only_authority_falls_back_with_everything_cached_and_returns() {
    let setup = Setup::start(&[EDS]).await;
    let c = cluster_name(EDS, "payments");
    serve(setup.primary(), &c);
    serve(setup.secondary(), &c);
    let mut watch = setup.client.watch::<ClusterType>(&c).unwrap();
    changed_until(&mut watch, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;
    assert_eq!(setup.secondary().recording().stream_count(), 0);

    setup.primary_down().await;
    eventually("the client subscribes on the secondary", || {
        setup.secondary_subscribes(&c)
    })
    .await;
    changed_until(&mut watch, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;

    setup.primary_up();
    changed_until(&mut watch, "the primary's copy again", |r| {
        service_of(r) == "primary"
    })
    .await;
    eventually("the client leaves the secondary", || {
        !setup.secondary_subscribes(&c)
    })
    .await;
}

/// gRFC A71, which A95 leaves in place where the knob is not set: with
/// every watched resource cached, an unreachable primary is no reason to
/// open a stream to the secondary.
#[tokio::test]
async fn authority_without_the_knob_opens_no_stream_to_the_secondary_when_cached() {
    let setup = Setup::start(&[]).await;
    let c = cluster_name(LDS, "frontend");
    serve(setup.primary(), &c);
    serve(setup.secondary(), &c);
    let mut watch = setup.client.watch::<ClusterType>(&c).unwrap();
    changed_until(&mut watch, "the primary's copy", |r| {
        service_of(r) == "primary"
    })
    .await;

    setup.primary_down().await;
    setup.primary_failure_seen().await;
    assert_eq!(
        setup.secondary().recording().stream_count(),
        0,
        "no fallback while every watched resource is cached"
    );
    assert_eq!(
        watch
            .current()
            .map(|c| service_of(&c).to_owned())
            .as_deref(),
        Some("primary"),
        "the cached copy keeps serving"
    );
}

/// gRFC A95: the knob is "per-authority": on one pair of servers, only
/// the authority with it moves to the secondary; the other's cached
/// resources are never asked of it.
#[tokio::test]
async fn reachability_only_moves_only_its_own_authority_to_the_secondary() {
    let setup = Setup::start(&[EDS]).await;
    let eds = cluster_name(EDS, "payments");
    let lds = cluster_name(LDS, "frontend");
    for name in [&eds, &lds] {
        serve(setup.primary(), name);
        serve(setup.secondary(), name);
    }
    let mut w_eds = setup.client.watch::<ClusterType>(&eds).unwrap();
    let mut w_lds = setup.client.watch::<ClusterType>(&lds).unwrap();
    for w in [&mut w_eds, &mut w_lds] {
        changed_until(w, "the primary's copy", |r| service_of(r) == "primary").await;
    }

    setup.primary_down().await;
    changed_until(&mut w_eds, "the secondary's copy", |r| {
        service_of(r) == "secondary"
    })
    .await;
    assert!(
        !setup.secondary_ever_asked_for(LDS),
        "lds.example is cached and has no knob: it stays with the primary"
    );
    assert_eq!(
        w_lds
            .current()
            .map(|c| service_of(&c).to_owned())
            .as_deref(),
        Some("primary")
    );
}
