//! Every bootstrap in `bootstrap-examples/` loads, and every malformed
//! bootstrap in the table below is refused with an error naming the field.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use xdsfed_core::authority::AuthorityRegistry;
use xdsfed_core::bootstrap::{ApiVariant, Bootstrap, ChannelCreds, Format};
use xdsfed_core::name::ResourceName;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bootstrap-examples")
}

fn load(file: &str) -> Bootstrap {
    let path = examples_dir().join(file);
    Bootstrap::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_example_file_loads() {
    let mut loaded = 0;
    let entries = std::fs::read_dir(examples_dir()).unwrap_or_else(|e| panic!("{e}"));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        // `testbed-*` files and the directories (`federation/`) hold testbed
        // scenarios (servers and the resources they serve), not client
        // bootstraps; the testbed's tests load them.
        if file.starts_with("testbed-")
            || path.is_dir()
            || !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            )
        {
            continue;
        }
        let bootstrap = Bootstrap::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        // Every name each example can route must resolve without error.
        let registry = AuthorityRegistry::new(&bootstrap);
        for authority in bootstrap.authorities.keys() {
            let name = format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/c");
            let parsed = ResourceName::parse_user_supplied(&name).unwrap_or_else(|e| panic!("{e}"));
            assert!(registry.resolve(&parsed).is_ok(), "{file}: {name}");
        }
        loaded += 1;
    }
    assert!(loaded >= 6, "only {loaded} example bootstraps found");
}

#[test]
fn single_server_example_has_one_server_and_a_node() {
    let b = load("single-server.json");
    assert_eq!(b.xds_servers.len(), 1);
    assert!(b.authorities.is_empty());
    assert_eq!(b.node.id, "xdsfed-client-1");
    assert_eq!(b.node_proto().cluster, "checkout");
    assert!(b.xds_servers[0].has_feature("ignore_resource_deletion"));
    assert_eq!(b.client_default_listener_resource_name_template, "%s");
}

#[test]
fn federated_example_puts_two_authorities_on_two_servers() {
    for file in ["federated.yaml", "federated.json", "demo.yaml"] {
        let b = load(file);
        let registry = AuthorityRegistry::new(&b);
        let servers = |n: &str| {
            let name = ResourceName::parse_user_supplied(n).unwrap_or_else(|e| panic!("{e}"));
            registry
                .resolve(&name)
                .map(|s| s.iter().map(|s| s.server_uri.clone()).collect::<Vec<_>>())
        };
        assert_eq!(
            servers("xdstp://cloud.example/T/x"),
            Ok(vec!["127.0.0.1:18001".to_owned()]),
            "{file}"
        );
        assert_eq!(
            servers("xdstp://onprem.example/T/x"),
            Ok(vec!["127.0.0.1:18002".to_owned()]),
            "{file}"
        );
        assert_eq!(
            servers("listener-a"),
            Ok(vec!["127.0.0.1:18000".to_owned()]),
            "{file}"
        );
        assert!(servers("xdstp://other.example/T/x").is_err(), "{file}");
    }
}

#[test]
fn fallback_example_orders_the_servers() {
    let b = load("fallback.yaml");
    let uris: Vec<_> = b.authorities["cloud.example"]
        .xds_servers
        .iter()
        .map(|s| s.server_uri.as_str())
        .collect();
    assert_eq!(uris, ["127.0.0.1:18001", "127.0.0.1:18011"]);
}

#[test]
fn tls_example_skips_unsupported_creds_and_reads_tls() {
    let b = load("tls.yaml");
    assert_eq!(
        b.xds_servers[0].channel_creds,
        ChannelCreds::Tls {
            ca_certificate_file: Some("/etc/xdsfed/ca.pem".into()),
            certificate_file: Some("/etc/xdsfed/client.pem".into()),
            private_key_file: Some("/etc/xdsfed/client.key".into()),
        }
    );
    assert_eq!(b.certificate_providers.len(), 1);
}

#[test]
fn envoy_style_example_maps_config_sources() {
    let b = load("envoy-style.yaml");
    assert_eq!(b.xds_servers.len(), 1);
    assert_eq!(b.xds_servers[0].server_uri, "127.0.0.1:18000");
    assert!(b.xds_servers[0].api_pinned);
    let cloud = &b.authorities["cloud.example"].xds_servers[0];
    assert_eq!(
        (cloud.server_uri.as_str(), cloud.api, cloud.api_pinned),
        ("127.0.0.1:18001", ApiVariant::Delta, true)
    );
    for authority in ["onprem.example", "lab.example"] {
        let s = &b.authorities[authority].xds_servers[0];
        assert_eq!(s.server_uri, "127.0.0.1:18002");
        assert_eq!(s.api, ApiVariant::Sotw);
        assert!(matches!(s.channel_creds, ChannelCreds::Tls { .. }));
    }
}

/// Malformed bootstraps: (format, text, the field path the error must name,
/// a fragment of what was expected).
const MALFORMED: &[(Format, &str, &str, &str)] = &[
    (Format::Json, "[]", "(top level)", "expected an object"),
    (Format::Json, "{}", "xds_servers", "required"),
    (
        Format::Json,
        r#"{"xds_servers": []}"#,
        "xds_servers",
        "at least one server",
    ),
    (
        Format::Json,
        r#"{"xds_servers": {}}"#,
        "xds_servers",
        "expected an array",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"channel_creds": [{"type": "insecure"}]}]}"#,
        "xds_servers[0].server_uri",
        "required",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "", "channel_creds": [{"type": "insecure"}]}]}"#,
        "xds_servers[0].server_uri",
        "non-empty",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1"}]}"#,
        "xds_servers[0].channel_creds",
        "required",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": []}]}"#,
        "xds_servers[0].channel_creds",
        "no channel credentials",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "google_default"}]}]}"#,
        "xds_servers[0].channel_creds",
        "no supported channel credentials (found \"google_default\")",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{}]}]}"#,
        "xds_servers[0].channel_creds[0].type",
        "required",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls"}]}]}"#,
        "xds_servers[0].channel_creds[0].config",
        "ca_certificate_file",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls", "config": {}}]}]}"#,
        "xds_servers[0].channel_creds[0].config.ca_certificate_file",
        "required",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "ca", "certificate_file": "c"}}]}]}"#,
        "xds_servers[0].channel_creds[0].config.private_key_file",
        "since certificate_file is set",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": "GRPC"}]}"#,
        "xds_servers[0].api_type",
        "AGGREGATED_DELTA_GRPC",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nnode: {id: 5}\n",
        "node.id",
        "expected a string, found a number",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nauthorities: {cloud.example: {client_listener_resource_name_template: 'xdstp://other.example/envoy.config.listener.v3.Listener/%s'}}\n",
        "authorities.\"cloud.example\".client_listener_resource_name_template",
        "must start with \"xdstp://cloud.example/\"",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nauthorities: {a: {client_listener_resource_name_template: 'xdstp://a/envoy.config.cluster.v3.Cluster/%s'}}\n",
        "authorities.a.client_listener_resource_name_template",
        "must name a Listener",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nauthorities: {a: {client_listener_resource_name_template: 'xdstp://a/envoy.config.listener.v3.Listener/%s?xds.k=1'}}\n",
        "authorities.a.client_listener_resource_name_template",
        "reserved",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nauthorities: {a: {xds_servers: [{server_uri: 't:1'}]}}\n",
        "authorities.a.xds_servers[0].channel_creds",
        "required",
    ),
    (
        Format::Yaml,
        "xds_servers: [{server_uri: 's:1', channel_creds: [{type: insecure}]}]\nauthorities: {a: {}, a: {}}\n",
        "authorities.a",
        "duplicate key",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], "authorities": {"a.b": {}, "a%2Eb": {}}}"#,
        "authorities.\"a.b\"",
        "duplicate authority",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], "authorities": {"a b": {}}}"#,
        "authorities.\"a b\"",
        "invalid authority name",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], "client_default_listener_resource_name_template": "xdstp://a/envoy.config.listener.v3.Listener/%s#bad=1"}"#,
        "client_default_listener_resource_name_template",
        "unknown directive",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], "certificate_providers": {"p": {"plugin_name": "file_watcher", "config": {}}}}"#,
        "certificate_providers.p.config",
        "expected certificate_file",
    ),
    (
        Format::Json,
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}], "certificate_providers": {"p": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "ca", "refresh_interval": "10m"}}}}"#,
        "certificate_providers.p.config.refresh_interval",
        "positive duration",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: [{google_grpc: {target_uri: 'a:1'}}]}\nxds_servers: []\n",
        "xds_servers",
        "cannot be combined",
    ),
    (
        Format::Yaml,
        "config_sources:\n- api_config_source: {grpc_services: [{google_grpc: {target_uri: 'a:1'}}]}\n",
        "config_sources[0].authorities",
        "required",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: []\n  api_config_source: {grpc_services: [{google_grpc: {target_uri: 'a:1'}}]}\n",
        "config_sources[0].authorities",
        "at least one authority",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  ads: {}\n",
        "config_sources[0].api_config_source",
        "or path_config_source with a path (ads and path are not supported)",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {api_type: DELTA_GRPC, grpc_services: [{google_grpc: {target_uri: 'a:1'}}]}\n",
        "config_sources[0].api_config_source.api_type",
        "AGGREGATED_DELTA_GRPC",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: []}\n",
        "config_sources[0].api_config_source.grpc_services",
        "at least one gRPC service",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: [{envoy_grpc: {cluster_name: missing}}]}\n",
        "config_sources[0].api_config_source.grpc_services[0].envoy_grpc.cluster_name",
        "no cluster named \"missing\"",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: [{google_grpc: {target_uri: 'a:1', channel_credentials: {google_default: {}}}}]}\n",
        "config_sources[0].api_config_source.grpc_services[0].google_grpc.channel_credentials",
        "unsupported channel credentials",
    ),
    (
        Format::Yaml,
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: [{google_grpc: {target_uri: 'a:1'}}]}\n- authorities: [{name: a}]\n  api_config_source: {grpc_services: [{google_grpc: {target_uri: 'b:1'}}]}\n",
        "config_sources[1].authorities[0]",
        "duplicate authority",
    ),
    (
        Format::Yaml,
        "default_config_source:\n  api_config_source: {grpc_services: [{envoy_grpc: {cluster_name: x}}]}\nstatic_resources:\n  clusters:\n  - name: x\n    load_assignment:\n      endpoints:\n      - lb_endpoints:\n        - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 70000}}}\n",
        "static_resources.clusters[0].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value",
        "port number",
    ),
];

#[test]
fn malformed_bootstraps_name_the_bad_field() {
    for (i, &(format, text, path, expected)) in MALFORMED.iter().enumerate() {
        match Bootstrap::from_str_as(text, format) {
            Ok(_) => panic!("case {i} ({path}) loaded"),
            Err(e) => {
                assert_eq!(e.field_path(), Some(path), "case {i}: {e}");
                let message = e.to_string();
                assert!(message.starts_with(path), "case {i}: {message}");
                assert!(
                    message.contains(expected),
                    "case {i}: {message:?} lacks {expected:?}"
                );
            }
        }
    }
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("xdsfed-bootstrap-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("bad.yaml");
    std::fs::write(&path, "xds_servers: [{server_uri: 's:1'}]\n").unwrap_or_else(|e| panic!("{e}"));
    let err = Bootstrap::from_file(&path)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        err,
        format!(
            "{}: xds_servers[0].channel_creds: required: expected an array of {{\"type\": ...}} objects",
            path.display()
        )
    );
    let missing = dir.join("absent.json");
    let err = Bootstrap::from_file(&missing)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.starts_with(&format!("{}: cannot read the bootstrap", missing.display())),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn file_with_byte_order_mark_loads() {
    let dir = std::env::temp_dir().join(format!("xdsfed-bootstrap-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("bom.json");
    let text = "\u{feff}{\"xds_servers\": [{\"server_uri\": \"s:1\", \"channel_creds\": [{\"type\": \"insecure\"}]}]}";
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let loaded = Bootstrap::from_file(&path).map(|b| b.xds_servers.len());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(loaded, Ok(1));
}
