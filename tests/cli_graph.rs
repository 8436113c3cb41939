//! `xdsfed graph`: the dependency graph as a tree, Graphviz dot and
//! Mermaid, grouped by authority.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_fixture;
mod common;

use cli_fixture::{
    CLOUD, Fixture, ONPREM, closed_port, listener_name, refused, write_bootstrap, xdsfed,
};

fn graph(fx: &Fixture, format: &str) -> String {
    let output = xdsfed(&[
        "graph",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        &listener_name(),
        "--format",
        format,
    ])
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn tree_shows_every_resource_with_its_authority() {
    let fx = Fixture::start();
    let tree = graph(&fx, "tree");
    assert!(tree.starts_with("snapshot "), "{tree}");
    assert!(
        tree.contains(&format!("Listener front · {CLOUD} · ")),
        "{tree}"
    );
    assert!(
        tree.contains(&format!("└─ RouteConfiguration front · {CLOUD} · ")),
        "{tree}"
    );
    assert!(tree.contains(&format!("Cluster web · {CLOUD}")), "{tree}");
    assert!(tree.contains(&format!("Cluster api · {ONPREM}")), "{tree}");
    assert!(
        tree.contains(&format!("Endpoints api · {ONPREM}")),
        "{tree}"
    );
    assert!(tree.contains("127.0.0.1:9090"), "{tree}");
}

#[test]
fn dot_has_a_cluster_per_authority() {
    let fx = Fixture::start();
    let dot = graph(&fx, "dot");
    assert!(dot.starts_with("digraph xdsfed {"), "{dot}");
    assert!(dot.contains(&format!("label=\"{CLOUD}\"")), "{dot}");
    assert!(dot.contains(&format!("label=\"{ONPREM}\"")), "{dot}");
    assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
    assert_eq!(dot.matches(" -> ").count(), 5, "{dot}");
}

#[test]
fn mermaid_has_a_subgraph_per_authority() {
    let fx = Fixture::start();
    let mermaid = graph(&fx, "mermaid");
    assert!(mermaid.starts_with("flowchart LR\n"), "{mermaid}");
    assert!(mermaid.contains(&format!("[\"{ONPREM}\"]")), "{mermaid}");
    assert_eq!(mermaid.matches("  subgraph ").count(), 2, "{mermaid}");
    assert_eq!(mermaid.matches(" --> ").count(), 5, "{mermaid}");
}

#[test]
fn graph_of_an_unreachable_server_fails_after_the_timeout() {
    let nowhere = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = write_bootstrap(dir.path(), &nowhere, &[(CLOUD, &nowhere)]);
    let output = xdsfed(&[
        "graph",
        "--bootstrap",
        bootstrap.to_str().unwrap(),
        "--listener",
        &listener_name(),
        "--timeout",
        "500ms",
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("timed out"), "{stderr}");
}

#[test]
fn graph_with_an_unknown_format_exits_2() {
    let fx = Fixture::start();
    refused(&[
        "graph",
        "--bootstrap",
        fx.bootstrap(),
        "--listener",
        &listener_name(),
        "--format",
        "svg",
    ]);
}
