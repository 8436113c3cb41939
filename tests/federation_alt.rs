//! `#alt=` alternatives (xDS TP1), against the testbed over loopback gRPC.
//!
//! The rules (docs/federation.md): the alternative is fetched and delivered
//! under the watched name when the primary's authority cannot deliver it
//! and nothing is cached — every server of the authority failed (gRFC A57),
//! or the does-not-exist timer fired — and left when the primary delivers.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::cluster;
use common::{bootstrap_json, changed_until, client, describe, eventually, next};
use xdsfed::client::client::{WatchError, XdsClient};
use xdsfed::client::watch::WatchEvent;
use xdsfed::core::types::ClusterType;
use xdsfed::core::types::ClusterView;
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const ONPREM: &str = "onprem.example";

fn cluster_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/{id}")
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

struct Setup {
    testbed: Testbed,
    client: XdsClient,
    primary: String,
    alt: String,
}

impl Setup {
    /// cloud serves `…/payments`, onprem its alternative `…/payments-onprem`.
    async fn start() -> Setup {
        let testbed = Testbed::start([
            ServerSpec::new("cloud", [CLOUD]),
            ServerSpec::new("onprem", [ONPREM]),
        ])
        .await
        .unwrap();
        let (c, o) = (testbed.servers()[0].uri(), testbed.servers()[1].uri());
        let client = client(&bootstrap_json(
            &c,
            &[(CLOUD, &[c.as_str()]), (ONPREM, &[o.as_str()])],
            "",
        ));
        let primary = cluster_name(CLOUD, "payments");
        let alt = cluster_name(ONPREM, "payments-onprem");
        testbed.servers()[0]
            .set_message(&primary, &cluster(&primary, "cloud"))
            .unwrap();
        testbed.servers()[1]
            .set_message(&alt, &cluster(&alt, "onprem"))
            .unwrap();
        Setup {
            testbed,
            client,
            primary,
            alt,
        }
    }

    fn cloud(&self) -> &Server {
        &self.testbed.servers()[0]
    }

    fn onprem(&self) -> &Server {
        &self.testbed.servers()[1]
    }

    fn watched_name(&self) -> String {
        format!("{}#alt={}", self.primary, self.alt)
    }

    fn onprem_subscribes(&self) -> bool {
        let mut subscribed = false;
        for stream in self.onprem().recording().streams() {
            if stream.closed.is_some() {
                continue;
            }
            for r in stream.delta_requests() {
                if r.resource_names_subscribe.contains(&self.alt) {
                    subscribed = true;
                }
                if r.resource_names_unsubscribe.contains(&self.alt) {
                    subscribed = false;
                }
            }
        }
        subscribed
    }
}

/// TP1 #alt: the cloud authority's only server refuses connections, so the
/// alternative serves under the watched name; when the cloud server comes
/// back and delivers, the client returns to it and leaves the alternative.
#[tokio::test]
async fn alt_serves_while_the_primary_authority_refuses_connections_and_is_left_when_it_returns() {
    let setup = Setup::start().await;
    setup.cloud().update_faults(|f| f.refuse_connections = true);

    let mut watch = setup
        .client
        .watch::<ClusterType>(&setup.watched_name())
        .unwrap();
    assert_eq!(&*watch.key().name, setup.primary.as_str());
    let copy = changed_until(&mut watch, "the alternative", |r| service_of(r) == "onprem").await;
    assert_eq!(copy.name(), setup.alt, "the alternative's own resource");
    let status = setup.client.status();
    let entry = status
        .resources
        .iter()
        .find(|r| r.name == setup.primary)
        .expect("delivered under the watched name");
    let source = entry
        .source
        .as_ref()
        .expect("status says where it came from");
    assert!(source.alt, "{status:?}");
    assert_eq!(source.fetched_as.as_deref(), Some(setup.alt.as_str()));
    assert_eq!(source.authority.as_deref(), Some(ONPREM));
    assert!(source.server.contains(&setup.onprem().uri()));

    setup
        .cloud()
        .update_faults(|f| f.refuse_connections = false);
    changed_until(&mut watch, "the primary", |r| service_of(r) == "cloud").await;
    let status = setup.client.status();
    let entry = status
        .resources
        .iter()
        .find(|r| r.name == setup.primary)
        .unwrap();
    assert!(!entry.source.as_ref().unwrap().alt);
    eventually("the alternative is unsubscribed", || {
        !setup.onprem_subscribes()
    })
    .await;
}

/// TP1 #alt: a primary that no server answers before the does-not-exist
/// timer fires is replaced by the alternative.
#[tokio::test]
async fn alt_serves_when_the_does_not_exist_timer_fires_for_the_primary() {
    let setup = Setup::start().await;
    setup.cloud().update_faults(|f| {
        f.silent_names.insert(setup.primary.clone());
    });
    let mut watch = setup
        .client
        .watch::<ClusterType>(&setup.watched_name())
        .unwrap();
    changed_until(&mut watch, "the alternative", |r| service_of(r) == "onprem").await;

    setup.cloud().update_faults(|f| f.silent_names.clear());
    changed_until(&mut watch, "the primary", |r| service_of(r) == "cloud").await;
}

/// An explicit "does not exist" from the primary's server is an answer: the
/// alternative is not used.
#[tokio::test]
async fn alt_is_not_used_when_the_primary_says_the_resource_does_not_exist() {
    let setup = Setup::start().await;
    setup
        .cloud()
        .delete_resource(common::resources::CDS, &setup.primary)
        .unwrap();
    let mut watch = setup
        .client
        .watch::<ClusterType>(&setup.watched_name())
        .unwrap();
    let event = next(&mut watch).await;
    if let WatchEvent::Changed(c) = &event {
        panic!("changed to {c:?}");
    }
    assert!(
        matches!(event, WatchEvent::DoesNotExist),
        "{}",
        describe(&event)
    );
    assert_eq!(setup.onprem().recording().stream_count(), 0);
}

/// An alternative must be of the watched type and of a known authority.
#[tokio::test]
async fn alt_of_another_type_or_an_unknown_authority_is_refused_at_watch_time() {
    let setup = Setup::start().await;
    let wrong_type = format!(
        "{}#alt=xdstp://{ONPREM}/envoy.config.endpoint.v3.ClusterLoadAssignment/x",
        setup.primary
    );
    let err = setup.client.watch::<ClusterType>(&wrong_type).unwrap_err();
    assert!(matches!(err, WatchError::Name(_)), "{err:?}");
    let unknown = format!(
        "{}#alt=xdstp://elsewhere.example/envoy.config.cluster.v3.Cluster/x",
        setup.primary
    );
    let err = setup.client.watch::<ClusterType>(&unknown).unwrap_err();
    assert!(err.to_string().contains("elsewhere.example"), "{err}");
}
