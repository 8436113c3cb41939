//! Policy streams federated with each other and with ADS, over loopback:
//! one client, two policy control planes under two authorities and an ADS
//! server; `#alt` from one policy authority to the other.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::resources::cluster;
use common::{changed_until, client, eventually};
use xdsfed::client::client::XdsClient;
use xdsfed::core::policy_stream::wire::{ValidatingPolicy, ValidatingPolicySpec, Validation};
use xdsfed::core::types::{ClusterType, ValidatingPolicyType};
use xdsfed::testbed::{Protocol, Server, ServerSpec, Testbed};

const ONPREM: &str = "policies.onprem";
const EDGE: &str = "policies.edge";
const CLOUD: &str = "cloud.example";

fn policy_name(authority: &str, policy: &str) -> String {
    format!("xdstp://{authority}/kyverno.http.v1alpha1.ValidatingPolicy/{policy}")
}

fn policy(name: &str, message: &str) -> ValidatingPolicy {
    ValidatingPolicy {
        name: name.into(),
        delete: false,
        spec: Some(ValidatingPolicySpec {
            validations: vec![Validation {
                expression: "true".into(),
                message: Some(message.into()),
                ..Default::default()
            }],
            evaluation_mode: "Envoy".into(),
            ..Default::default()
        }),
    }
}

fn message_of(p: &ValidatingPolicy) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.validations.first())
        .and_then(|v| v.message.as_deref())
        .unwrap_or("")
}

struct Setup {
    testbed: Testbed,
    client: XdsClient,
}

impl Setup {
    /// `onprem` and `edge` speak the policy stream, `cloud` ADS.
    async fn start() -> Setup {
        let policies = Protocol::policy_stream();
        let testbed = Testbed::start([
            ServerSpec::new("onprem", [ONPREM]).with_protocol(policies),
            ServerSpec::new("edge", [EDGE]).with_protocol(policies),
            ServerSpec::new("cloud", [CLOUD]),
        ])
        .await
        .unwrap();
        let uri = |i: usize| testbed.servers()[i].uri();
        let policy_server = |uri: String| {
            format!(
                r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}], "protocol": "policy_stream", "policy_stream": {{"poll_interval": "0.05s"}}}}"#
            )
        };
        let ads = format!(
            r#"{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}]}}"#,
            uri(2)
        );
        let bootstrap = format!(
            r#"{{"xds_servers": [{ads}], "node": {{"id": "e2e-node"}}, "authorities": {{
                "{ONPREM}": {{"xds_servers": [{}]}},
                "{EDGE}": {{"xds_servers": [{}]}},
                "{CLOUD}": {{"xds_servers": [{ads}]}}}}}}"#,
            policy_server(uri(0)),
            policy_server(uri(1)),
        );
        Setup {
            client: client(&bootstrap),
            testbed,
        }
    }

    fn server(&self, name: &str) -> &Server {
        self.testbed.server(name).unwrap()
    }

    fn set_policy(&self, server: &str, name: &str, message: &str) {
        self.server(server)
            .set_message(name, &policy(name, message))
            .unwrap();
    }
}

/// One client holds policies from two policy control planes, each under
/// its own authority, and a cluster from an ADS server.
#[tokio::test]
async fn one_client_gets_policies_from_two_control_planes_and_clusters_from_ads() {
    let s = Setup::start().await;
    s.set_policy("onprem", "require-auth", "from onprem");
    s.set_policy("edge", "require-auth", "from edge");
    s.set_policy("edge", "rate-limit", "edge only");
    let cluster_name = format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/payments");
    s.server("cloud")
        .set_message(&cluster_name, &cluster(&cluster_name, "payments"))
        .unwrap();

    let mut onprem = s
        .client
        .watch::<ValidatingPolicyType>(&policy_name(ONPREM, "require-auth"))
        .unwrap();
    let mut edge = s
        .client
        .watch::<ValidatingPolicyType>(&policy_name(EDGE, "require-auth"))
        .unwrap();
    let mut rate = s
        .client
        .watch::<ValidatingPolicyType>(&policy_name(EDGE, "rate-limit"))
        .unwrap();
    let mut payments = s.client.watch::<ClusterType>(&cluster_name).unwrap();

    changed_until(&mut onprem, "onprem's policy", |p| {
        message_of(p) == "from onprem"
    })
    .await;
    changed_until(&mut edge, "edge's policy", |p| message_of(p) == "from edge").await;
    changed_until(&mut rate, "edge's second policy", |p| {
        message_of(p) == "edge only"
    })
    .await;
    changed_until(&mut payments, "the ADS cluster", |c| {
        c.name() == cluster_name
    })
    .await;

    // One connection per server: the status lists three, two of them
    // policy streams that answered the policy type.
    let status = s.client.status();
    assert_eq!(status.servers.len(), 3, "{status:?}");
    let policy_servers = status
        .servers
        .iter()
        .filter(|server| server.server.contains("policy stream"))
        .count();
    assert_eq!(policy_servers, 2, "{status:?}");
}

/// TP1 `#alt` between policy authorities: while the edge control plane
/// refuses connections, the onprem copy serves under the watched name; when
/// edge returns, its own copy replaces it.
#[tokio::test]
async fn alt_falls_back_from_one_policy_authority_to_the_other() {
    let s = Setup::start().await;
    s.set_policy("onprem", "require-auth", "from onprem");
    s.set_policy("edge", "require-auth", "from edge");
    s.server("edge")
        .update_faults(|f| f.refuse_connections = true);

    let primary = policy_name(EDGE, "require-auth");
    let watched = format!("{primary}#alt={}", policy_name(ONPREM, "require-auth"));
    let mut watch = s.client.watch::<ValidatingPolicyType>(&watched).unwrap();
    changed_until(&mut watch, "the alternative", |p| {
        message_of(p) == "from onprem"
    })
    .await;
    let status = s.client.status();
    let entry = status
        .resources
        .iter()
        .find(|r| r.name == primary)
        .expect("delivered under the watched name");
    let source = entry.source.as_ref().unwrap();
    assert!(source.alt, "{status:?}");
    assert_eq!(source.authority.as_deref(), Some(ONPREM));

    s.server("edge")
        .update_faults(|f| f.refuse_connections = false);
    changed_until(&mut watch, "the primary", |p| message_of(p) == "from edge").await;
    eventually("the primary's copy is no longer the alternative", || {
        s.client
            .status()
            .resources
            .iter()
            .find(|r| r.name == primary)
            .and_then(|r| r.source.as_ref())
            .is_some_and(|source| !source.alt)
    })
    .await;
}
