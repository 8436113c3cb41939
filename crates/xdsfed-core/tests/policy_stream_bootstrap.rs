//! A server entry names the policy-distribution stream in both bootstrap
//! formats, and the protocol keeps two servers at one URI apart.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use xdsfed_core::authority::{AuthorityRegistry, ServerKey};
use xdsfed_core::bootstrap::{Bootstrap, PolicyStreamTiming, ServerProtocol};

#[test]
fn grpc_style_entry_names_the_policy_stream_and_its_timers() {
    let bootstrap = Bootstrap::from_yaml_str(
        r#"
xds_servers: [{server_uri: "127.0.0.1:18000", channel_creds: [{type: insecure}]}]
authorities:
  policies.onprem:
    xds_servers:
      - server_uri: "127.0.0.1:18000"
        channel_creds: [{type: insecure}]
        protocol: policy_stream
        policy_stream: {poll_interval: 2s, health_check_interval: 0.5s}
  policies.edge:
    xds_servers:
      - {server_uri: "127.0.0.1:18001", channel_creds: [{type: insecure}], protocol: policy_stream}
"#,
    )
    .unwrap();
    assert_eq!(bootstrap.xds_servers[0].protocol, ServerProtocol::Ads);
    let onprem = &bootstrap.authorities["policies.onprem"].xds_servers[0];
    assert_eq!(
        onprem.protocol,
        ServerProtocol::PolicyStream(PolicyStreamTiming {
            poll_interval: Duration::from_secs(2),
            health_check_interval: Duration::from_millis(500),
        })
    );
    let edge = &bootstrap.authorities["policies.edge"].xds_servers[0];
    assert_eq!(
        edge.protocol,
        ServerProtocol::PolicyStream(PolicyStreamTiming::default())
    );

    // Same URI, other protocol: another connection.
    let ads = ServerKey::new(&bootstrap.xds_servers[0]);
    let policies = ServerKey::new(onprem);
    assert_ne!(ads, policies);
    assert!(
        policies.to_string().ends_with(", policy stream)"),
        "{policies}"
    );
    let registry = AuthorityRegistry::new(&bootstrap);
    let policies = registry
        .id_of(&policies)
        .expect("the policy stream's server is interned");
    let served: Vec<&str> = registry.authorities_for(policies).collect();
    assert_eq!(served, ["policies.onprem"]);
}

#[test]
fn envoy_style_api_type_names_the_policy_stream_and_refresh_delay_its_poll() {
    let bootstrap = Bootstrap::from_yaml_str(
        r#"
config_sources:
  - authorities: [{name: policies.onprem}]
    api_config_source:
      api_type: POLICY_STREAM_GRPC
      refresh_delay: 3s
      grpc_services: [{google_grpc: {target_uri: "127.0.0.1:9081"}}]
"#,
    )
    .unwrap();
    let server = &bootstrap.authorities["policies.onprem"].xds_servers[0];
    let ServerProtocol::PolicyStream(timing) = server.protocol else {
        panic!("{server:?}");
    };
    assert_eq!(timing.poll_interval, Duration::from_secs(3));
}

#[test]
fn bad_protocol_entries_are_refused_naming_the_field() {
    let server = |extra: &str| {
        format!(
            r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:1", "channel_creds": [{{"type": "insecure"}}]{extra}}}]}}"#
        )
    };
    let cases = [
        (r#", "protocol": "rest""#, "unsupported protocol \"rest\""),
        (
            r#", "policy_stream": {"poll_interval": "1s"}"#,
            "only for a server with \"protocol\": \"policy_stream\"",
        ),
        (
            r#", "protocol": "policy_stream", "policy_stream": {"poll_interval": "soon"}"#,
            "poll_interval",
        ),
    ];
    for (extra, expected) in cases {
        let error = Bootstrap::from_json_str(&server(extra))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{extra}: {error}");
    }
}
