//! `xdsfed bootstrap check`: the authority table, shared streams, and
//! exit code 2 naming the field of a bad bootstrap.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use std::path::{Path, PathBuf};

use cli_fixture::{CLOUD, Fixture, ONPREM, cluster_name, refused, xdsfed};

#[test]
fn check_prints_authorities_servers_and_shared_streams() {
    let fx = Fixture::start();
    let cloud = fx.testbed.server("cloud").unwrap().addr().to_string();
    let onprem = fx.testbed.server("onprem").unwrap().addr().to_string();
    let output = xdsfed(&["bootstrap", "check", fx.bootstrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains(": valid"), "{stdout}");
    let row = |authority: &str, server: &str| {
        stdout
            .lines()
            .any(|l| l.starts_with(authority) && l.ends_with(&format!("  {server} (insecure)")))
    };
    assert!(row(CLOUD, &cloud), "{stdout}");
    assert!(row(ONPREM, &onprem), "{stdout}");
    // The default servers are the cloud server: one stream carries both.
    assert!(stdout.contains("ADS STREAMS (2"), "{stdout}");
    assert!(
        stdout.contains(&format!("carries old-style names, {CLOUD}  (shared)")),
        "{stdout}"
    );
}

#[test]
fn check_json_lists_streams() {
    let fx = Fixture::start();
    let output = xdsfed(&["bootstrap", "check", "--json", fx.bootstrap()])
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["valid"], true);
    assert_eq!(json["streams"].as_array().map(Vec::len), Some(2));
}

#[test]
fn bad_bootstrap_names_the_field_and_exits_2() {
    let fx = Fixture::start();
    let bad = fx.write(
        "bad.json",
        r#"{"xds_servers": [{"server_uri": "127.0.0.1:1"}], "node": {"id": "n"}}"#,
    );
    let stderr = refused(&["bootstrap", "check", bad.to_str().unwrap()]);
    assert!(stderr.contains("xds_servers[0].channel_creds"), "{stderr}");
    assert!(stderr.contains("hint:"), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("BootstrapError {"),
        "{stderr}"
    );
}

#[test]
fn missing_bootstrap_file_exits_2_with_its_path() {
    let stderr = refused(&["bootstrap", "check", "/nonexistent/bootstrap.yaml"]);
    assert!(stderr.contains("/nonexistent/bootstrap.yaml"), "{stderr}");
}

#[test]
fn every_example_bootstrap_checks() {
    for name in [
        "federated.yaml",
        "federated.json",
        "demo.yaml",
        "single-server.json",
    ] {
        let path = format!("{}/bootstrap-examples/{name}", env!("CARGO_MANIFEST_DIR"));
        let output = xdsfed(&["bootstrap", "check", &path]).output().unwrap();
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A bootstrap with one server, `uri`, and `creds` as its channel_creds.
fn one_server(fx: &Fixture, file: &str, uri: &str, creds: &str) -> PathBuf {
    fx.write(
        file,
        &format!(
            r#"{{"xds_servers": [{{"server_uri": {}, "channel_creds": [{creds}]}}], "node": {{"id": "n"}}}}"#,
            serde_json::Value::from(uri)
        ),
    )
}

fn tls_with_ca(ca: &Path) -> String {
    format!(
        r#"{{"type": "tls", "config": {{"ca_certificate_file": {}}}}}"#,
        serde_json::Value::from(ca.to_str().unwrap())
    )
}

/// An authority name of 70 000 characters is bad input naming the field,
/// not a panic of the table's width (issue 19, defect 5).
#[test]
fn check_refuses_an_authority_name_too_long_to_be_one() {
    let fx = Fixture::start();
    let long = "a".repeat(70_000);
    let file = fx.write(
        "long.json",
        &format!(
            r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:1", "channel_creds": [{{"type": "insecure"}}]}}], "authorities": {{"{long}": {{}}}}}}"#
        ),
    );
    let stderr = refused(&["bootstrap", "check", file.to_str().unwrap()]);
    assert!(stderr.contains("authorities.\"aaa"), "{stderr}");
    assert!(
        stderr.contains("at most 1024"),
        "{}",
        &stderr[..500.min(stderr.len())]
    );
    assert!(stderr.len() < 5_000, "{} bytes on stderr", stderr.len());
}

/// Servers that can never work are bad input naming the field, not
/// "valid" (issue 19, defect 8).
#[test]
fn check_refuses_server_uris_the_transport_cannot_dial() {
    let fx = Fixture::start();
    for (uri, says) in [
        ("not a uri!!", "xds_servers[0].server_uri"),
        ("127.0.0.1:99999", "port 99999"),
        ("unix:///tmp/xds.sock", "Unix domain sockets"),
        ("dns://8.8.8.8/xds.example.com:443", "\"dns\" scheme"),
    ] {
        let file = one_server(&fx, "uri.json", uri, r#"{"type": "insecure"}"#);
        let stderr = refused(&["bootstrap", "check", file.to_str().unwrap()]);
        assert!(
            stderr.contains("xds_servers[0].server_uri"),
            "{uri}: {stderr}"
        );
        assert!(stderr.contains(says), "{uri}: {stderr}");
    }
}

/// A CA file that is missing, a directory, a FIFO (which would block the
/// client, deaf to Ctrl-C) or /dev/zero (read until memory runs out) is bad
/// input naming the field, for `bootstrap check` and for `watch`
/// (issue 19, defects 6 and 8).
#[test]
fn check_and_watch_refuse_a_ca_file_that_is_not_a_regular_pem_file() {
    let fx = Fixture::start();
    let fifo = fx.dir.path().join("ca-fifo.pem");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let cases: [(&Path, &str); 5] = [
        (Path::new("/nonexistent/ca.pem"), "cannot be read"),
        (fx.dir.path(), "a directory"),
        (&fifo, "FIFO"),
        (Path::new("/dev/zero"), "character device"),
        (&fx.bootstrap, "holds no PEM certificate"),
    ];
    for (ca, says) in cases {
        let file = one_server(&fx, "tls.json", "127.0.0.1:1", &tls_with_ca(ca));
        let file = file.to_str().unwrap();
        let field = "xds_servers[0].channel_creds.config.ca_certificate_file";
        for args in [
            &["bootstrap", "check", file][..],
            &["watch", "--bootstrap", file, "--wildcard", "cluster"][..],
        ] {
            // xdsfed() bounds the run: a hang fails instead of blocking.
            let stderr = refused(args);
            assert!(stderr.contains(field), "{ca:?} {args:?}: {stderr}");
            assert!(stderr.contains(says), "{ca:?} {args:?}: {stderr}");
        }
    }
}

/// A FIFO or /dev/zero as the bootstrap is refused at once
/// (issue 19, defect 6).
#[test]
fn a_bootstrap_that_is_no_regular_file_is_refused_at_once() {
    let fx = Fixture::start();
    let fifo = fx.dir.path().join("bootstrap-fifo.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    for (file, says) in [
        (fifo.to_str().unwrap(), "FIFO"),
        ("/dev/zero", "character device"),
        (fx.dir.path().to_str().unwrap(), "a directory"),
    ] {
        let stderr = refused(&["bootstrap", "check", file]);
        assert!(stderr.contains(says), "{file}: {stderr}");
        let stderr = refused(&["dump", "--bootstrap", file, "--wildcard", "cluster"]);
        assert!(stderr.contains(says), "{file}: {stderr}");
    }
}

/// gRFC A27's GRPC_XDS_BOOTSTRAP_CONFIG (the bootstrap's JSON itself) works
/// where GRPC_XDS_BOOTSTRAP does; the file comes first (issue 19, defect 8).
#[test]
fn bootstrap_config_from_the_environment_is_accepted_after_the_file() {
    let fx = Fixture::start();
    let json = std::fs::read_to_string(&fx.bootstrap).unwrap();
    let dump = |env: &[(&str, &str)]| {
        let mut cmd = xdsfed(&["dump", "--wildcard", "cluster", "--timeout", "10s"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let output = dump(&[("GRPC_XDS_BOOTSTRAP_CONFIG", &json)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(&cluster_name(CLOUD, "web")), "{stdout}");

    // The file named by GRPC_XDS_BOOTSTRAP wins over the inline JSON.
    let output = dump(&[
        ("GRPC_XDS_BOOTSTRAP", fx.bootstrap()),
        ("GRPC_XDS_BOOTSTRAP_CONFIG", "not json"),
    ]);
    assert!(output.status.success());
    let bad = fx.write("bad.json", "not json");
    let output = dump(&[
        ("GRPC_XDS_BOOTSTRAP", bad.to_str().unwrap()),
        ("GRPC_XDS_BOOTSTRAP_CONFIG", &json),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad.json"));

    // An empty GRPC_XDS_BOOTSTRAP counts as unset, as in gRPC.
    let output = dump(&[
        ("GRPC_XDS_BOOTSTRAP", ""),
        ("GRPC_XDS_BOOTSTRAP_CONFIG", &json),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Neither: bad input saying both ways.
    let stderr = refused(&["dump", "--wildcard", "cluster"]);
    assert!(stderr.contains("GRPC_XDS_BOOTSTRAP_CONFIG"), "{stderr}");
}

/// A library user who skips `check_credential_files` is safe too: the
/// transport's own read refuses a FIFO CA at once instead of blocking the
/// runtime's thread (issue 19, defect 6).
#[test]
fn the_transport_refuses_a_fifo_ca_without_blocking() {
    use xdsfed::client::transport::{TransportError, TransportOptions, endpoint};
    use xdsfed::core::bootstrap::{ChannelCreds, ServerConfig};

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ca.pem");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let mut server = ServerConfig::insecure("127.0.0.1:1");
    server.channel_creds = ChannelCreds::Tls {
        ca_certificate_file: Some(fifo),
        certificate_file: None,
        private_key_file: None,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(endpoint(&server, &TransportOptions::default()).map(drop));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("reading the CA blocked");
    match result {
        Err(TransportError::ReadFile { why, .. }) => assert!(why.contains("FIFO"), "{why}"),
        other => panic!("expected a read error, got {other:?}"),
    }
}

/// gRFC A95: an authority's `fallback_on_reachability_only` "value will be
/// a boolean"; any other type is bad input naming the field, as other
/// authority fields are, and the boolean itself is accepted.
#[test]
fn check_refuses_a_fallback_on_reachability_only_that_is_no_boolean() {
    let fx = Fixture::start();
    let with = |value: &str| {
        format!(
            r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:1", "channel_creds": [{{"type": "insecure"}}]}}], "authorities": {{"a.test": {{"fallback_on_reachability_only": {value}}}}}}}"#
        )
    };
    let bad = fx.write("knob.json", &with(r#""true""#));
    let stderr = refused(&["bootstrap", "check", bad.to_str().unwrap()]);
    assert!(
        stderr.contains(r#"authorities."a.test".fallback_on_reachability_only"#),
        "{stderr}"
    );
    assert!(stderr.contains("expected a boolean"), "{stderr}");
    let good = fx.write("knob-ok.json", &with("true"));
    let output = xdsfed(&["bootstrap", "check", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// gRFC A97: a `jwt_token_file` call credential with a bad config makes
/// the bootstrap invalid, and one on an insecure channel is refused: the
/// check exits 2 naming the field.
#[test]
fn check_refuses_a_bad_jwt_call_credential_naming_the_field() {
    let fx = Fixture::start();
    let tls = tls_with_ca(Path::new("/etc/xds/ca.pem"));
    let cases = [
        (
            tls.as_str(),
            r#"[{"type": "jwt_token_file", "config": {}}]"#,
            "xds_servers[0].call_creds[0].config.jwt_token_file",
        ),
        (
            r#"{"type": "insecure"}"#,
            r#"[{"type": "jwt_token_file", "config": {"jwt_token_file": "/run/token"}}]"#,
            "xds_servers[0].call_creds[0]: jwt_token_file call credentials need TLS",
        ),
    ];
    for (creds, call_creds, says) in cases {
        let file = fx.write(
            "jwt.json",
            &format!(
                r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:1", "channel_creds": [{creds}],
                    "call_creds": {call_creds}}}], "node": {{"id": "n"}}}}"#
            ),
        );
        let stderr = refused(&["bootstrap", "check", file.to_str().unwrap()]);
        assert!(stderr.contains(says), "{call_creds}: {stderr}");
    }
}

/// A bootstrap with one insecure server and `allowed` as its
/// `allowed_grpc_services`.
fn with_allowed(fx: &Fixture, allowed: &str) -> PathBuf {
    fx.write(
        "allowed.json",
        &format!(
            r#"{{"xds_servers": [{{"server_uri": "127.0.0.1:1", "channel_creds": [{{"type": "insecure"}}]}}],
                "node": {{"id": "n"}}, "allowed_grpc_services": {allowed}}}"#
        ),
    )
}

/// gRFC A102: an `allowed_grpc_services` entry's `channel_creds` "is
/// required and must contain at least one channel creds type that the
/// client supports"; its key must be a target this client can dial, and
/// its TLS files readable PEM. Each is bad input naming the field.
#[test]
fn check_refuses_a_bad_allowed_grpc_service_naming_the_field() {
    let fx = Fixture::start();
    let entry = r#"allowed_grpc_services."127.0.0.1:9""#;
    let cases = [
        (
            r#"{"127.0.0.1:9": {}}"#.to_owned(),
            format!("{entry}.channel_creds"),
            "required",
        ),
        (
            r#"{"127.0.0.1:9": {"channel_creds": [{"type": "google_default"}]}}"#.to_owned(),
            format!("{entry}.channel_creds"),
            "google_default",
        ),
        (
            r#"{"unix:///run/eds.sock": {"channel_creds": [{"type": "insecure"}]}}"#.to_owned(),
            r#"allowed_grpc_services."unix:///run/eds.sock""#.to_owned(),
            "Unix domain sockets",
        ),
        (
            format!(
                r#"{{"127.0.0.1:9": {{"channel_creds": [{}]}}}}"#,
                tls_with_ca(Path::new("/nonexistent/ca.pem"))
            ),
            format!("{entry}.channel_creds.config.ca_certificate_file"),
            "cannot be read",
        ),
    ];
    for (allowed, field, says) in cases {
        let file = with_allowed(&fx, &allowed);
        let stderr = refused(&["bootstrap", "check", file.to_str().unwrap()]);
        assert!(stderr.contains(&field), "{allowed}: {stderr}");
        assert!(stderr.contains(says), "{allowed}: {stderr}");
    }
}

/// `bootstrap check` lists each allowed gRPC service (gRFC A102) with the
/// credentials it is dialled with, in text and in JSON.
#[test]
fn check_lists_allowed_grpc_services_with_their_credentials() {
    let fx = Fixture::start();
    let file = with_allowed(
        &fx,
        r#"{"127.0.0.1:9": {"channel_creds": [{"type": "insecure"}]}}"#,
    );
    let file = file.to_str().unwrap();
    let output = xdsfed(&["bootstrap", "check", file]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("ALLOWED gRPC SERVICES"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_end() == "127.0.0.1:9  insecure"),
        "{stdout}"
    );
    let output = xdsfed(&["bootstrap", "check", "--json", file])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        json["allowed_grpc_services"],
        serde_json::json!([{"target": "127.0.0.1:9", "channel_creds": "insecure", "call_creds": []}])
    );
}
