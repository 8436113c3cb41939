//! `xdsfed bootstrap check`: the authority table, shared streams, and
//! exit code 2 naming the field of a bad bootstrap.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use cli_fixture::{CLOUD, Fixture, ONPREM, refused, xdsfed};

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
