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
use common::resources::invalid_cluster;

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
