//! `xdsfed dump`: waits for the resources, prints the CSDS-style table or
//! JSON, and exits non-zero when something is NACKED, missing or late.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use cli_fixture::{
    CLOUD, Fixture, ONPREM, closed_port, cluster_name, endpoints_name, listener_name, refused,
    write_bootstrap, xdsfed,
};
use common::resources::{cluster, invalid_cluster};

#[test]
fn dump_of_a_listener_lists_its_whole_graph_acked() {
    let fx = Fixture::start();
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        &listener_name(),
        "--timeout",
        "10s",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("node cli-test\n"), "{stdout}");
    for (kind, name) in [
        ("Listener", listener_name()),
        ("Cluster", cluster_name(CLOUD, "web")),
        ("Cluster", cluster_name(ONPREM, "api")),
        ("ClusterLoadAssignment", endpoints_name(ONPREM, "api")),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("ACKED") && l.contains(kind) && l.contains(&name)),
            "{kind} {name}:\n{stdout}"
        );
    }
    assert!(stdout.contains("CONNECTED"), "{stdout}");
}

#[test]
fn dump_json_of_one_resource_is_the_client_status() {
    let fx = Fixture::start();
    let name = cluster_name(ONPREM, "api");
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "cluster",
        &name,
        "--json",
    ])
    .output()
    .unwrap();
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["node_id"], "cli-test");
    let resources = json["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0]["name"], name.as_str());
    assert_eq!(resources[0]["status"], "ACKED");
    assert_eq!(resources[0]["authority"], ONPREM);
}

#[test]
fn dump_exits_1_when_a_resource_is_nacked() {
    let fx = Fixture::start();
    let name = cluster_name(ONPREM, "api");
    fx.testbed
        .server("onprem")
        .unwrap()
        .set_message(&name, &invalid_cluster(&name))
        .unwrap();
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "cds",
        &name,
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("NACKED"), "{stdout}");
    assert!(
        stderr.contains(&name) && stderr.contains("NACKED"),
        "{stderr}"
    );
}

#[test]
fn dump_exits_1_when_a_resource_does_not_exist() {
    let fx = Fixture::start();
    let name = cluster_name(CLOUD, "nowhere");
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "cluster",
        &name,
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("DOES_NOT_EXIST"), "{stdout}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
}

#[test]
fn dump_of_an_unreachable_server_times_out_naming_it() {
    let fx = Fixture::start();
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = write_bootstrap(dir.path(), &nowhere, &[(CLOUD, &nowhere)]);
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        bootstrap.to_str().unwrap(),
        "--listener",
        &listener_name(),
        "--timeout",
        "1s",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("timed out after 1s"), "{stderr}");
    assert!(
        stderr.contains(&format!("server {nowhere} is not connected")),
        "{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");
    drop(fx);
}

/// A server that answers a wildcard with an empty response (state of the
/// world does, for a type it has none of): the dump is complete at once,
/// an empty table and exit 0, long before `--timeout`.
#[test]
fn dump_of_a_wildcard_answered_empty_ends_at_once_with_an_empty_table() {
    let fx = Fixture::start();
    let uri = fx.testbed.server("cloud").unwrap().uri();
    let bootstrap = fx.write(
        "sotw.json",
        &format!(
            r#"{{"xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}],
                "api_type": "AGGREGATED_GRPC"}}], "node": {{"id": "cli-test"}}}}"#
        ),
    );
    // Killed at 30 s, half the --timeout: only the empty answer can end it.
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        bootstrap.to_str().unwrap(),
        "--wildcard",
        "policy",
        "--timeout",
        "60s",
    ])
    .timeout(std::time::Duration::from_secs(30))
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stdout.contains("ACKED"), "no resource rows: {stdout}");
}

/// A server that accepts connections and never speaks HTTP/2: within the
/// command's timeout the handshake deadline passes, so the dump reports a
/// connection failure, not a resource the server lacks.
#[test]
fn dump_of_a_tarpit_reports_a_connection_failure_not_a_missing_resource() {
    let fx = Fixture::start();
    let tarpit = fx
        .runtime
        .block_on(xdsfed::testbed::Tarpit::bind())
        .unwrap();
    let address = tarpit.addr().to_string();
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = write_bootstrap(dir.path(), &address, &[(CLOUD, &address)]);
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        bootstrap.to_str().unwrap(),
        "--resource",
        "cluster",
        &cluster_name(CLOUD, "c1"),
        "--timeout",
        "3s",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("DOES_NOT_EXIST"), "{stdout}");
    assert!(!stderr.contains("no such resource"), "{stderr}");
    assert!(
        stderr.contains(&format!("server {address} is not connected")),
        "{stderr}"
    );
    assert!(!stderr.contains("(0 failed attempts)"), "{stderr}");
    assert!(tarpit.accepted() >= 1);
    drop(fx);
}

#[test]
fn dump_with_a_bad_bootstrap_names_the_field_and_exits_2() {
    let fx = Fixture::start();
    let bad = fx.write(
        "bad.yaml",
        "xds_servers:\n  - server_uri: 127.0.0.1:1\n    channel_creds: [{type: carrier-pigeon}]\n",
    );
    let stderr = refused(&[
        "dump",
        "--bootstrap",
        bad.to_str().unwrap(),
        "--wildcard",
        "cluster",
    ]);
    assert!(stderr.contains("xds_servers[0].channel_creds"), "{stderr}");
}

#[test]
fn dump_with_an_unknown_type_or_authority_exits_2() {
    let fx = Fixture::start();
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "secrets",
    ])
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown resource type"));

    let stderr = refused(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "cluster",
        "xdstp://elsewhere.example/envoy.config.cluster.v3.Cluster/x",
    ]);
    assert!(stderr.contains("elsewhere.example"), "{stderr}");
}

#[test]
fn dump_of_a_wildcard_lists_every_cluster_of_the_default_server() {
    let fx = Fixture::start();
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    // The default server is the cloud server.
    assert!(stdout.contains(&cluster_name(CLOUD, "web")), "{stdout}");
}

/// A server's 70 000-character cluster name and one with a newline and an
/// ANSI escape: the table shows both on one row each, escaped and cut,
/// and never panics on the width (issue 19, defect 2).
#[test]
fn dump_table_escapes_and_cuts_hostile_names_from_the_server() {
    let fx = Fixture::start();
    let cloud = fx.testbed.server("cloud").unwrap();
    let long = format!("long-{}", "x".repeat(70_000));
    let forged = "evil\nACKED    Cluster  forged\x1b[31m\u{202e}red";
    for name in [long.as_str(), forged] {
        cloud.set_message(name, &cluster(name, name)).unwrap();
    }
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--timeout",
        "10s",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !stdout.contains('\x1b') && !stdout.contains('\u{202e}'),
        "{stdout}"
    );
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("ACKED    Cluster  forged")),
        "a forged row:\n{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.contains("evil\\nACKED"))
        .unwrap_or_else(|| panic!("no escaped row:\n{stdout}"));
    assert!(row.contains("forged\\x1b[31m\\u{202e}red"), "{row}");
    let long_row = stdout
        .lines()
        .find(|l| l.contains("long-xxx"))
        .unwrap_or_else(|| panic!("no row for the long name:\n{stdout}"));
    assert!(long_row.contains("more bytes)"), "{long_row}");
    assert!(stdout.len() < 20_000, "{} bytes of output", stdout.len());
}

/// A 70 000-character name on the command line: printed cut, no panic.
#[test]
fn dump_of_a_long_name_from_the_command_line_does_not_panic() {
    let fx = Fixture::start();
    let name = "y".repeat(70_000);
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--resource",
        "cluster",
        &name,
        "--timeout",
        "1s",
    ])
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("more bytes)"), "{stdout}");
    assert!(stderr.len() < 10_000, "{} bytes on stderr", stderr.len());
}

/// A timeout past what the clock can count is bad input naming the flag,
/// not "overflow when adding duration to instant" (issue 19, defect 5).
#[test]
fn dump_and_graph_refuse_a_timeout_the_clock_cannot_count() {
    let fx = Fixture::start();
    for command in ["dump", "graph"] {
        let stderr = refused(&[
            command,
            "--bootstrap",
            fx.bootstrap(),
            "--listener",
            &listener_name(),
            "--timeout",
            "10000000000000000000s",
        ]);
        assert!(stderr.contains("--timeout"), "{command}: {stderr}");
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
    }
}

/// 40 000 clusters: every row ACKED and exit 0, without a walk over every
/// resource per event (issue 19, defect 4: 30 s of CPU, then a false
/// "1 of 40000 resources are incomplete").
#[test]
fn dump_of_a_wildcard_with_40000_clusters_is_complete_and_acked() {
    let rows = dump_many(40_000);
    assert_eq!(rows, 40_000);
}

/// 100 000 clusters in one response of about 10 MB: the dump waits for the
/// response to be processed rather than a quiet window, so the table is
/// full, not empty (issue 19, defect 4).
#[test]
fn dump_of_a_wildcard_with_100000_clusters_in_one_response_lists_them_all() {
    let rows = dump_many(100_000);
    assert_eq!(rows, 100_000);
}

/// Serves `count` clusters on the cloud server before the client starts
/// (so the first response carries them all), dumps the wildcard, and
/// returns the number of ACKED cluster rows.
fn dump_many(count: usize) -> usize {
    let fx = Fixture::start();
    let cloud = fx.testbed.server("cloud").unwrap();
    // Short names and no EDS service name: about 110 bytes a cluster on
    // the wire, 11 MB in all (the client's limit is 256 MiB).
    for i in 0..count {
        let name = format!("b{i:06}");
        cloud.set_message(&name, &cluster(&name, "")).unwrap();
    }
    let output = xdsfed(&[
        "dump",
        "--bootstrap",
        fx.bootstrap(),
        "--wildcard",
        "cluster",
        "--timeout",
        "60s",
    ])
    .timeout(std::time::Duration::from_secs(120))
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let acked = stdout
        .lines()
        .filter(|l| l.starts_with("ACKED") && l.contains("  b0"))
        .count();
    let other = stdout
        .lines()
        .filter(|l| l.contains("  b0") && !l.starts_with("ACKED"))
        .take(3)
        .collect::<Vec<_>>();
    assert!(other.is_empty(), "rows not ACKED: {other:?}");
    acked
}
