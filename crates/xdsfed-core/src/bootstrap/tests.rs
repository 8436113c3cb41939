//! Unit tests of the bootstrap rules; each test names the rule it checks.

use std::ffi::OsString;

use super::*;

const MINIMAL: &str =
    r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}]}"#;

fn ok(result: Result<Bootstrap, BootstrapError>) -> Bootstrap {
    result.unwrap_or_else(|e| panic!("should load: {e}"))
}

#[test]
fn grpc_server_without_api_type_is_delta_and_not_pinned() {
    let b = ok(Bootstrap::from_json_str(MINIMAL));
    assert_eq!(b.xds_servers, vec![ServerConfig::insecure("s:1")]);
}

#[test]
fn explicit_api_type_pins_the_variant() {
    for (api_type, variant) in [
        ("AGGREGATED_GRPC", ApiVariant::Sotw),
        ("AGGREGATED_DELTA_GRPC", ApiVariant::Delta),
    ] {
        let b = ok(Bootstrap::from_json_str(&format!(
            r#"{{"xds_servers": [{{"server_uri": "s:1", "channel_creds": [{{"type": "insecure"}}], "api_type": "{api_type}"}}]}}"#
        )));
        assert_eq!(
            (b.xds_servers[0].api, b.xds_servers[0].api_pinned),
            (variant, true)
        );
    }
}

#[test]
fn first_supported_channel_creds_win() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [
            {"type": "google_default"}, {"type": "insecure"},
            {"type": "tls", "config": {"ca_certificate_file": "ca.pem"}}]}]}"#,
    ));
    assert_eq!(b.xds_servers[0].channel_creds, ChannelCreds::Insecure);
}

#[test]
fn non_string_server_features_are_ignored() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
            "server_features": ["ignore_resource_deletion", 3, {"x": 1}, "custom"]}]}"#,
    ));
    assert_eq!(
        b.xds_servers[0].server_features,
        ["ignore_resource_deletion", "custom"]
    );
    assert_eq!(
        b.xds_servers[0].behaviour_features(),
        ["ignore_resource_deletion"]
    );
}

#[test]
fn unknown_fields_are_ignored() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure", "extra": 1}], "future": true}],
            "node": {"id": "n", "user_agent_name": "x", "unknown": []},
            "authorities": {"a": {"future": {}}},
            "some_future_field": {"nested": [1, 2]}}"#,
    ));
    assert_eq!(b.node.id, "n");
    assert!(b.authorities.contains_key("a"));
}

#[test]
fn authority_defaults_follow_grfc_a47() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
            "authorities": {"a.example": {"xds_servers": []}}}"#,
    ));
    let a = &b.authorities["a.example"];
    assert_eq!(
        a.client_listener_resource_name_template,
        "xdstp://a.example/envoy.config.listener.v3.Listener/%s"
    );
    assert!(a.xds_servers.is_empty());
    assert_eq!(
        b.servers_for_authority("a.example"),
        Some(&b.xds_servers[..])
    );
    assert_eq!(b.servers_for_authority("b.example"), None);
    assert_eq!(
        b.client_default_listener_resource_name_template,
        DEFAULT_LISTENER_TEMPLATE
    );
}

#[test]
fn authority_keys_are_normalised() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
            "authorities": {"a%2dz.example": {}}}"#,
    ));
    assert!(b.authorities.contains_key("a-z.example"));
}

#[test]
fn yaml_and_json_give_the_same_bootstrap() {
    let json = ok(Bootstrap::from_json_str(
        r#"{"node": {"id": "n", "metadata": {"k": [1, "v"]}},
            "xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
            "authorities": {"a": {}}}"#,
    ));
    let yaml = ok(Bootstrap::from_yaml_str(
        "node:\n  id: n\n  metadata: {k: [1, v]}\nxds_servers:\n  - server_uri: s:1\n    channel_creds: [{type: insecure}]\nauthorities:\n  a: {}\n",
    ));
    assert_eq!(json, yaml);
}

#[test]
fn envoy_style_without_api_type_is_delta_not_pinned() {
    let b = ok(Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    grpc_services: [{google_grpc: {target_uri: 'd:1'}}]\n",
    ));
    assert_eq!(b.xds_servers, vec![ServerConfig::insecure("d:1")]);
    assert!(b.authorities.is_empty());
}

#[test]
fn envoy_style_keeps_grpc_services_in_order() {
    let b = ok(Bootstrap::from_yaml_str(
        "config_sources:\n- authorities: [{name: a}]\n  api_config_source:\n    api_type: AGGREGATED_GRPC\n    grpc_services:\n    - google_grpc: {target_uri: 'p:1'}\n    - google_grpc: {target_uri: 'f:1', channel_credentials: {ssl_credentials: {root_certs: {filename: ca.pem}}}}\n",
    ));
    let servers = &b.authorities["a"].xds_servers;
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].server_uri, "p:1");
    assert_eq!(
        servers[1].channel_creds,
        ChannelCreds::Tls {
            ca_certificate_file: Some("ca.pem".into()),
            certificate_file: None,
            private_key_file: None
        }
    );
    assert!(
        servers
            .iter()
            .all(|s| s.api == ApiVariant::Sotw && s.api_pinned)
    );
    assert!(b.xds_servers.is_empty());
}

#[test]
fn envoy_grpc_resolves_ipv6_static_cluster() {
    let b = ok(Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    grpc_services: [{envoy_grpc: {cluster_name: x}}]\nstatic_resources:\n  clusters:\n  - name: x\n    load_assignment:\n      endpoints:\n      - lb_endpoints:\n        - endpoint: {address: {socket_address: {address: '::1', port_value: '18000'}}}\n",
    ));
    assert_eq!(b.xds_servers[0].server_uri, "[::1]:18000");
}

#[test]
fn envoy_grpc_refuses_a_cluster_with_several_endpoints() {
    let err = Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    grpc_services: [{envoy_grpc: {cluster_name: x}}]\nstatic_resources:\n  clusters:\n  - name: x\n    load_assignment:\n      endpoints:\n      - lb_endpoints:\n        - endpoint: {address: {socket_address: {address: a, port_value: 1}}}\n        - endpoint: {address: {socket_address: {address: b, port_value: 1}}}\n",
    );
    assert_eq!(
        err.err().map(|e| e.to_string()),
        Some(
            "static_resources.clusters[0].load_assignment: expected exactly one endpoint for the management server, found 2"
                .to_owned()
        )
    );
}

/// REST-JSON sources: `"api_type": "REST"` with Envoy's timers and
/// defaults, SotW pinned; the timers belong to REST servers only.
#[test]
fn grpc_style_rest_server_reads_its_timers_and_defaults() {
    let b = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [
            {"server_uri": "http://s:1", "channel_creds": [{"type": "insecure"}], "api_type": "REST", "refresh_delay": "0.5s", "request_timeout": "2s"},
            {"server_uri": "http://s:2", "channel_creds": [{"type": "insecure"}], "api_type": "REST"}]}"#,
    ));
    assert_eq!(
        b.xds_servers[0].protocol,
        ServerProtocol::Rest(RestTiming {
            refresh_delay: std::time::Duration::from_millis(500),
            request_timeout: std::time::Duration::from_secs(2),
        })
    );
    assert_eq!(b.xds_servers[0].protocol.name(), "rest");
    assert_eq!(
        (b.xds_servers[0].api, b.xds_servers[0].api_pinned),
        (ApiVariant::Sotw, true)
    );
    assert_eq!(
        b.xds_servers[1].protocol,
        ServerProtocol::Rest(RestTiming::default())
    );
}

#[test]
fn rest_timers_are_refused_on_other_servers_and_bad_durations_name_the_field() {
    let err = Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "refresh_delay": "1s"}]}"#,
    )
    .err()
    .map(|e| e.field_path().map(str::to_owned));
    assert_eq!(err, Some(Some("xds_servers[0].refresh_delay".to_owned())));
    let err = Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "api_type": "REST", "request_timeout": "soon"}]}"#,
    )
    .err()
    .map(|e| e.field_path().map(str::to_owned));
    assert_eq!(err, Some(Some("xds_servers[0].request_timeout".to_owned())));
}

#[test]
fn envoy_style_rest_source_resolves_cluster_names() {
    let b = ok(Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    api_type: REST\n    refresh_delay: 3s\n    cluster_names: [x]\nstatic_resources:\n  clusters:\n  - name: x\n    load_assignment:\n      endpoints:\n      - lb_endpoints:\n        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 8080}}}\n",
    ));
    let server = &b.xds_servers[0];
    assert_eq!(server.server_uri, "127.0.0.1:8080");
    assert_eq!(
        server.protocol,
        ServerProtocol::Rest(RestTiming {
            refresh_delay: std::time::Duration::from_secs(3),
            ..RestTiming::default()
        })
    );
    let direct = ok(Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    api_type: REST\n    grpc_services: [{google_grpc: {target_uri: 'http://r:1'}}]\n",
    ));
    assert_eq!(direct.xds_servers[0].server_uri, "http://r:1");
    let err = Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    api_type: REST\n",
    )
    .err()
    .map(|e| e.field_path().map(str::to_owned));
    assert_eq!(
        err,
        Some(Some(
            "default_config_source.api_config_source.cluster_names".to_owned()
        ))
    );
}

fn env(vars: &[(&str, &str)]) -> impl FnMut(&str) -> Option<OsString> {
    let vars: Vec<(String, OsString)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

#[test]
fn env_config_is_used_when_no_file_is_named() {
    let b = Bootstrap::from_env_with(env(&[
        (ENV_BOOTSTRAP_FILE, ""),
        (ENV_BOOTSTRAP_CONFIG, MINIMAL),
    ]));
    assert_eq!(ok(b).xds_servers[0].server_uri, "s:1");
}

#[test]
fn env_file_takes_precedence_over_env_config() {
    let err = Bootstrap::from_env_with(env(&[
        (ENV_BOOTSTRAP_FILE, "/nonexistent/xdsfed/bootstrap.json"),
        (ENV_BOOTSTRAP_CONFIG, MINIMAL),
    ]));
    let err = err.err();
    assert_eq!(
        err.as_ref().and_then(|e| e.origin()),
        Some(&Origin::File("/nonexistent/xdsfed/bootstrap.json".into()))
    );
    assert!(matches!(
        err.map(|e| e.kind().clone()),
        Some(BootstrapErrorKind::Read { .. })
    ));
}

#[test]
fn env_config_errors_name_the_variable() {
    let err = Bootstrap::from_env_with(env(&[(ENV_BOOTSTRAP_CONFIG, "{}")]));
    assert_eq!(
        err.err().map(|e| e.to_string()),
        Some("$GRPC_XDS_BOOTSTRAP_CONFIG: xds_servers: required: expected a non-empty array of servers".to_owned())
    );
}

#[test]
fn env_without_either_variable_is_not_configured() {
    let err = Bootstrap::from_env_with(env(&[]));
    assert_eq!(
        err.err().map(|e| e.kind().clone()),
        Some(BootstrapErrorKind::NotConfigured)
    );
}

#[test]
fn file_format_follows_the_extension() {
    use std::path::Path;
    assert_eq!(format_of(Path::new("a.yaml")), Format::Yaml);
    assert_eq!(format_of(Path::new("a.YML")), Format::Yaml);
    assert_eq!(format_of(Path::new("a.json")), Format::Json);
    assert_eq!(format_of(Path::new("bootstrap")), Format::Json);
}

/// A bootstrap error's message, for the HTTP CDN entries below.
fn error_of(result: Result<Bootstrap, BootstrapError>) -> String {
    match result {
        Ok(b) => panic!("should fail: {b:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn http_cdn_entry_takes_a_base_url_and_its_timers() {
    let b = ok(Bootstrap::from_yaml_str(
        r#"
xds_servers: [{server_uri: "s:1", channel_creds: [{type: insecure}]}]
authorities:
  cdn.example:
    xds_servers:
      - server_uri: "http://127.0.0.1:8080/xds/v1"
        channel_creds: [{type: insecure}]
        api_type: HTTP_CDN
        refresh_delay: 2s
        request_timeout: 0.5s
  edge.example:
    xds_servers:
      - {server_uri: "https://cdn.example.com", channel_creds: [{type: insecure}], api_type: HTTP_CDN}
"#,
    ));
    let cdn = &b.authorities["cdn.example"].xds_servers[0];
    assert_eq!(cdn.server_uri, "http://127.0.0.1:8080/xds/v1");
    assert_eq!(
        cdn.protocol,
        ServerProtocol::HttpCdn(CdnTiming {
            refresh_delay: std::time::Duration::from_secs(2),
            request_timeout: std::time::Duration::from_millis(500),
        })
    );
    assert_eq!(cdn.protocol.name(), "http_cdn");
    let edge = &b.authorities["edge.example"].xds_servers[0];
    assert_eq!(edge.protocol, ServerProtocol::HttpCdn(CdnTiming::default()));
}

#[test]
fn http_cdn_entry_errors_name_the_field() {
    let server = |fields: &str| {
        Bootstrap::from_json_str(&format!(
            r#"{{"xds_servers": [{{"channel_creds": [{{"type": "insecure"}}], {fields}}}]}}"#
        ))
    };
    let cases = [
        (
            r#""server_uri": "s:1", "refresh_delay": "1s""#,
            "xds_servers[0].refresh_delay",
        ),
        (
            r#""server_uri": "127.0.0.1:80", "api_type": "HTTP_CDN""#,
            "xds_servers[0].server_uri",
        ),
        (
            r#""server_uri": "http://h:1/x?y=1", "api_type": "HTTP_CDN""#,
            "xds_servers[0].server_uri",
        ),
        (
            r#""server_uri": "http://h:1", "api_type": "HTTP_CDN", "request_timeout": "0s""#,
            "xds_servers[0].request_timeout",
        ),
        (
            r#""server_uri": "http://h:1", "api_type": "HTTP_CDN", "protocol": "ads""#,
            "xds_servers[0].protocol",
        ),
    ];
    for (fields, path) in cases {
        let message = error_of(server(fields));
        assert!(message.starts_with(path), "{fields}: {message}");
    }
    // A base path is only for a CDN.
    let message = error_of(server(r#""server_uri": "http://h:1/x""#));
    assert!(message.contains("has a path"), "{message}");
}

#[test]
fn envoy_style_http_cdn_source_reads_the_target_uri_as_the_base_url() {
    let b = ok(Bootstrap::from_yaml_str(
        r#"
config_sources:
  - authorities: [{name: cdn.example}]
    api_config_source:
      api_type: HTTP_CDN
      refresh_delay: 3s
      grpc_services: [{google_grpc: {target_uri: "http://127.0.0.1:9000/base"}}]
"#,
    ));
    let server = &b.authorities["cdn.example"].xds_servers[0];
    assert_eq!(server.server_uri, "http://127.0.0.1:9000/base");
    let ServerProtocol::HttpCdn(timing) = server.protocol else {
        panic!("{server:?}");
    };
    assert_eq!(timing.refresh_delay, std::time::Duration::from_secs(3));
    assert_eq!(timing.request_timeout, CdnTiming::default().request_timeout);
    let message = error_of(Bootstrap::from_yaml_str(
        r#"
config_sources:
  - authorities: [{name: cdn.example}]
    api_config_source:
      api_type: HTTP_CDN
      grpc_services: [{envoy_grpc: {cluster_name: cdn}}]
"#,
    ));
    assert!(
        message.contains("envoy_grpc") && message.contains("target_uri"),
        "{message}"
    );
}

#[test]
fn file_server_uri_is_a_filesystem_source_in_both_formats() {
    let grpc = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "file:///etc/xds/config.yaml", "watched_directory": "/etc/xds"}]}"#,
    ));
    let envoy = ok(Bootstrap::from_yaml_str(
        "default_config_source:
  path_config_source:
    path: /etc/xds/config.yaml
    watched_directory: { path: /etc/xds }
",
    ));
    assert_eq!(grpc.xds_servers, envoy.xds_servers, "one model");
    let server = &grpc.xds_servers[0];
    assert_eq!(server.server_uri, "file:///etc/xds/config.yaml");
    assert_eq!(server.protocol.name(), "file");
    let ServerProtocol::File(source) = &server.protocol else {
        panic!("{:?}", server.protocol)
    };
    assert_eq!(source.path, std::path::Path::new("/etc/xds/config.yaml"));
    assert_eq!(source.format, FileFormat::Yaml);
    assert_eq!(source.directory(), std::path::Path::new("/etc/xds"));
    // Relative paths stay relative (to the working directory), like every
    // other file a bootstrap names; the parent is watched by default.
    let relative = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "file://config.pb"}]}"#,
    ));
    let ServerProtocol::File(source) = &relative.xds_servers[0].protocol else {
        panic!()
    };
    assert_eq!(source.format, FileFormat::Protobuf);
    assert_eq!(source.directory(), std::path::Path::new("."));
}

#[test]
fn file_source_errors_name_the_field() {
    for (json, field, says) in [
        (
            r#"{"xds_servers": [{"server_uri": "file:///x.txt"}]}"#,
            "xds_servers[0].server_uri",
            "extension",
        ),
        (
            r#"{"xds_servers": [{"server_uri": "file:"}]}"#,
            "xds_servers[0].server_uri",
            "file://PATH",
        ),
        (
            r#"{"xds_servers": [{"server_uri": "file:///x.json", "protocol": "ads"}]}"#,
            "xds_servers[0].protocol",
            "file",
        ),
        (
            r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}], "watched_directory": "/d"}]}"#,
            "xds_servers[0].watched_directory",
            "file://",
        ),
        (
            r#"{"default_config_source": {"path_config_source": {"path": "/x.conf"}}}"#,
            "default_config_source.path_config_source.path",
            "extension",
        ),
        (
            r#"{"default_config_source": {"path_config_source": {"watched_directory": {"path": "/d"}}}}"#,
            "default_config_source.path_config_source",
            "path",
        ),
    ] {
        let error = Bootstrap::from_json_str(json).expect_err(json).to_string();
        assert!(
            error.contains(field) && error.contains(says),
            "{json}: {error}"
        );
    }
}

/// gRFC A95: "a field in the authority called
/// `fallback_on_reachability_only`, whose value will be a boolean";
/// absent, it is false (gRFC A71's fallback).
#[test]
fn authority_reads_fallback_on_reachability_only_in_every_schema() {
    let json = ok(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
            "authorities": {"eds.example": {"fallback_on_reachability_only": true},
                            "lds.example": {}}}"#,
    ));
    assert!(json.authorities["eds.example"].fallback_on_reachability_only);
    assert!(!json.authorities["lds.example"].fallback_on_reachability_only);
    let yaml = ok(Bootstrap::from_yaml_str(
        "xds_servers:\n  - server_uri: s:1\n    channel_creds: [{type: insecure}]\nauthorities:\n  eds.example: {fallback_on_reachability_only: true}\n  lds.example: {}\n",
    ));
    assert_eq!(json, yaml);
    let envoy = ok(Bootstrap::from_yaml_str(
        "config_sources:\n- authorities: [{name: eds.example, fallback_on_reachability_only: true}, {name: lds.example}]\n  api_config_source:\n    grpc_services:\n    - google_grpc: {target_uri: 'p:1'}\n    - google_grpc: {target_uri: 'f:1'}\n",
    ));
    assert!(envoy.authorities["eds.example"].fallback_on_reachability_only);
    assert!(!envoy.authorities["lds.example"].fallback_on_reachability_only);
}

/// gRFC A95: the knob's "value will be a boolean": any other type is a
/// bootstrap error naming the field, in every schema.
#[test]
fn authority_refuses_a_fallback_on_reachability_only_that_is_no_boolean() {
    let json = error_of(Bootstrap::from_json_str(
        r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}]}],
            "authorities": {"a.test": {"fallback_on_reachability_only": "true"}}}"#,
    ));
    assert_eq!(
        json,
        r#"authorities."a.test".fallback_on_reachability_only: expected a boolean, found a string"#
    );
    let yaml = error_of(Bootstrap::from_yaml_str(
        "xds_servers:\n  - server_uri: s:1\n    channel_creds: [{type: insecure}]\nauthorities:\n  a.test: {fallback_on_reachability_only: 1}\n",
    ));
    assert!(
        yaml.ends_with(
            r#"authorities."a.test".fallback_on_reachability_only: expected a boolean, found a number"#
        ),
        "{yaml}"
    );
    let envoy = error_of(Bootstrap::from_yaml_str(
        "config_sources:\n- authorities: [{name: a.test, fallback_on_reachability_only: [true]}]\n  api_config_source:\n    grpc_services: [{google_grpc: {target_uri: 'p:1'}}]\n",
    ));
    assert!(
        envoy.ends_with(
            "config_sources[0].authorities[0].fallback_on_reachability_only: expected a boolean, found an array"
        ),
        "{envoy}"
    );
}

/// A TLS server entry with `call_creds` (JSON members of the entry).
fn tls_server_with(call_creds: &str) -> String {
    format!(
        r#"{{"xds_servers": [{{"server_uri": "s:1",
            "channel_creds": [{{"type": "tls", "config": {{"ca_certificate_file": "ca.pem"}}}}],
            "call_creds": {call_creds}}}]}}"#
    )
}

fn field_path_of(result: Result<Bootstrap, BootstrapError>) -> Option<String> {
    result.err().and_then(|e| e.field_path().map(str::to_owned))
}

/// gRFC A97: "the client will look through the entire list and use all
/// types that it supports" and ignores the others; the same entries read
/// from YAML.
#[test]
fn call_creds_keep_every_supported_entry_and_skip_unknown_types() {
    let json = tls_server_with(
        r#"[{"type": "google_default"},
            {"type": "jwt_token_file", "config": {"jwt_token_file": "/run/a.jwt"}},
            {"type": "jwt_token_file", "config": {"jwt_token_file": "/run/b.jwt", "future": 1}}]"#,
    );
    let b = ok(Bootstrap::from_json_str(&json));
    let expected = vec![
        CallCreds::JwtTokenFile {
            path: "/run/a.jwt".into(),
        },
        CallCreds::JwtTokenFile {
            path: "/run/b.jwt".into(),
        },
    ];
    assert_eq!(b.xds_servers[0].call_creds, expected);
    let yaml = ok(Bootstrap::from_yaml_str(
        "xds_servers:\n- server_uri: s:1\n  channel_creds: [{type: tls, config: {ca_certificate_file: ca.pem}}]\n  call_creds:\n  - {type: jwt_token_file, config: {jwt_token_file: /run/a.jwt}}\n",
    ));
    assert_eq!(yaml.xds_servers[0].call_creds, expected[..1]);
    let none = ok(Bootstrap::from_json_str(MINIMAL));
    assert!(none.xds_servers[0].call_creds.is_empty());
}

/// gRFC A97: "if present, the config must pass whatever validation is
/// appropriate for the call creds type; if it does not, the bootstrap
/// config will be considered invalid"; `jwt_token_file` is required.
#[test]
fn jwt_token_file_config_is_validated_naming_the_field() {
    for (call_creds, path) in [
        (
            r#"[{"type": "jwt_token_file", "config": {}}]"#,
            "xds_servers[0].call_creds[0].config.jwt_token_file",
        ),
        (
            r#"[{"type": "other"}, {"type": "jwt_token_file", "config": {"jwt_token_file": ""}}]"#,
            "xds_servers[0].call_creds[1].config.jwt_token_file",
        ),
        (
            r#"[{"type": "jwt_token_file", "config": {"jwt_token_file": 7}}]"#,
            "xds_servers[0].call_creds[0].config.jwt_token_file",
        ),
        (
            r#"[{"type": "jwt_token_file"}]"#,
            "xds_servers[0].call_creds[0].config",
        ),
        (r#"[{"config": {}}]"#, "xds_servers[0].call_creds[0].type"),
        (r#"{"type": "jwt_token_file"}"#, "xds_servers[0].call_creds"),
    ] {
        let got = field_path_of(Bootstrap::from_json_str(&tls_server_with(call_creds)));
        assert_eq!(got.as_deref(), Some(path), "{call_creds}");
    }
}

/// A bearer token is sent only over TLS (grpc-go's JWT credential
/// requires transport security; gRFC A97 is silent): a server with
/// insecure channel credentials and a supported call credential is an
/// error naming the entry, in the gRPC and the Envoy-style schemas. An
/// unsupported call credential on such a server is skipped, as ever.
#[test]
fn jwt_token_file_on_an_insecure_channel_is_refused_naming_the_entry() {
    let json = r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
        "call_creds": [{"type": "jwt_token_file", "config": {"jwt_token_file": "/run/a.jwt"}}]}]}"#;
    let err = Bootstrap::from_json_str(json).unwrap_err();
    assert_eq!(err.field_path(), Some("xds_servers[0].call_creds[0]"));
    assert!(err.to_string().contains("TLS"), "{err}");
    let skipped = r#"{"xds_servers": [{"server_uri": "s:1", "channel_creds": [{"type": "insecure"}],
        "call_creds": [{"type": "google_default"}]}]}"#;
    assert!(
        ok(Bootstrap::from_json_str(skipped)).xds_servers[0]
            .call_creds
            .is_empty()
    );
    let envoy = "default_config_source:\n  api_config_source:\n    api_type: AGGREGATED_GRPC\n    grpc_services:\n    - google_grpc:\n        target_uri: s:1\n        call_credentials: [{jwt_token_file: /run/a.jwt}]\n";
    assert_eq!(
        field_path_of(Bootstrap::from_yaml_str(envoy)).as_deref(),
        Some(
            "default_config_source.api_config_source.grpc_services[0].google_grpc.call_credentials[0].jwt_token_file"
        )
    );
}

/// Envoy-style: `google_grpc.call_credentials` entries of kind
/// `jwt_token_file` are read; Envoy's other kinds are skipped.
#[test]
fn envoy_style_google_grpc_call_credentials_read_jwt_token_file() {
    let b = ok(Bootstrap::from_yaml_str(
        "default_config_source:\n  api_config_source:\n    api_type: AGGREGATED_GRPC\n    grpc_services:\n    - google_grpc:\n        target_uri: s:1\n        channel_credentials: {ssl_credentials: {root_certs: {filename: ca.pem}}}\n        call_credentials: [{access_token: x}, {jwt_token_file: /run/a.jwt}]\n",
    ));
    assert_eq!(
        b.xds_servers[0].call_creds,
        vec![CallCreds::JwtTokenFile {
            path: "/run/a.jwt".into()
        }]
    );
}

/// Servers that differ only in their call credentials are two streams
/// (grpc-go keys servers by them too); the name shows the type only.
#[test]
fn call_creds_are_part_of_the_server_key() {
    let b = ok(Bootstrap::from_json_str(&tls_server_with(
        r#"[{"type": "jwt_token_file", "config": {"jwt_token_file": "/run/a.jwt"}}]"#,
    )));
    let with = crate::authority::ServerKey::new(&b.xds_servers[0]);
    let mut plain = b.xds_servers[0].clone();
    plain.call_creds.clear();
    assert_ne!(with, crate::authority::ServerKey::new(&plain));
    assert_eq!(with.to_string(), "s:1 (tls+jwt_token_file)");
}
