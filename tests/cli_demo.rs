//! `xdsfed demo`: runs with no arguments, narrates warming across both
//! authorities, the update, the restart and recovery, `#alt` fallback and a
//! redirect, prints the final tree, restarts the proxy from its state
//! directory and on-prem's file while the cloud is unreachable and
//! converges when it returns, and exits 0, on 80 columns.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use assert_cmd::Command;

#[test]
fn demo_narrates_warming_update_restart_recovery_the_final_tree_and_a_hybrid_restart() {
    let output = Command::cargo_bin("xdsfed")
        .unwrap()
        .arg("demo")
        .env_remove("RUST_LOG")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "{stderr}");

    // Warming, in dependency order, across both authorities.
    let position = |what: &str| {
        stdout
            .lines()
            .position(|l| l.contains(what) && l.contains("received"))
            .unwrap_or_else(|| panic!("{what} received:\n{stdout}"))
    };
    let listener = position("Listener  cloud.example   greeter");
    let routes = position("Routes    cloud.example   greeter");
    let cloud_cluster = position("Cluster   cloud.example   greeter-cloud");
    let onprem_cluster = position("Cluster   onprem.example  greeter-onprem");
    let onprem_endpoints = position("Endpoints onprem.example  greeter-onprem");
    assert!(listener < routes && routes < cloud_cluster && routes < onprem_cluster);
    assert!(onprem_cluster < onprem_endpoints);
    assert!(stdout.contains("snapshot 1 ready"), "{stdout}");

    // The update.
    assert!(stdout.contains("ACKed by xdsfed-demo"), "{stdout}");
    assert!(stdout.contains("published: weights 50/50"), "{stdout}");

    // The restart and recovery.
    assert!(stdout.contains("stream to onprem lost"), "{stdout}");
    assert!(
        stdout.contains("the snapshot still routes to greeter-onprem"),
        "{stdout}"
    );
    assert!(stdout.contains("recovered: snapshot"), "{stdout}");

    // Federation: #alt to on-prem and back, and a redirected glob member.
    assert!(stdout.contains("#alt in use"), "{stdout}");
    assert!(
        stdout.contains("served by onprem: \"on-prem limits\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("back to the primary: served by cloud"),
        "{stdout}"
    );
    assert!(
        stdout.contains("member \"tenants/acme\" redirected to acme from onprem"),
        "{stdout}"
    );

    // The final tree, with nothing left over from the outage.
    assert!(stdout.contains("5. The final snapshot"), "{stdout}");
    assert!(!stdout.contains("still serving, but"), "{stdout}");
    assert!(
        stdout.contains("Listener greeter · cloud.example"),
        "{stdout}"
    );
    assert!(
        stdout.contains("└─ RouteConfiguration greeter · cloud.example"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Cluster greeter-onprem (50) · onprem.example"),
        "{stdout}"
    );
    assert!(stdout.contains("onprem/rack-2"), "{stdout}");

    // The hybrid restart: ready from disk and from on-prem's file while
    // neither server answers, then converged once the cloud returns.
    let hybrid = stdout
        .split("\n6. A hybrid restart")
        .nth(1)
        .unwrap_or_else(|| panic!("no hybrid act:\n{stdout}"));
    let line = |what: &str| {
        hybrid
            .lines()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}:\n{stdout}"))
    };
    let loaded = line("copies loaded from the state directory");
    let cloud_from_disk = line("Cluster   cloud.example   greeter-cloud   from disk, v");
    line("Endpoints cloud.example   greeter-cloud   from disk, v");
    let fallback = line("onprem.example falls back to onprem.pb (gRFC A71)");
    let onprem_from_file = line("Endpoints onprem.example  greeter-onprem  from onprem.pb, v");
    line("Cluster   onprem.example  greeter-onprem  from onprem.pb, v");
    // The graph is ready before any server answers: whether its first
    // snapshot already has the file's copies depends on which came first.
    let ready = hybrid
        .lines()
        .position(|l| l.contains(" ready: ") && l.contains(" from disk"))
        .unwrap_or_else(|| panic!("ready from disk:\n{stdout}"));
    let from_file = line("4 from disk, 2 from onprem.pb; 4 ambient errors");
    let unreachable = line("the client cannot reach server cloud");
    let back = line("the interconnect is back");
    let confirmed = line("Cluster   cloud.example   greeter-cloud   confirmed, v");
    let converged = line("4 from cloud, 2 from onprem.pb; no ambient error");
    let said_converged = line("converged");
    assert!(
        loaded < cloud_from_disk && cloud_from_disk < ready,
        "{hybrid}"
    );
    assert!(fallback < onprem_from_file && onprem_from_file <= from_file);
    assert!(ready <= from_file && from_file < back && back < confirmed);
    assert!(loaded < unreachable && unreachable < back);
    assert!(confirmed < converged && converged < said_converged);
    assert!(
        stdout
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with("done in")
    );

    for line in stdout.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
}

/// A second run over the first run's state directory starts from its
/// copies: every act still completes, `#alt` and the redirect included
/// (copies from disk do not stand in for a server's answer).
#[test]
fn demo_runs_again_over_its_own_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    for run in 1..=2 {
        let output = Command::cargo_bin("xdsfed")
            .unwrap()
            .arg("demo")
            .arg("--state-dir")
            .arg(dir.path())
            .env_remove("RUST_LOG")
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "run {run}:\n{stdout}\n{stderr}");
        assert!(stdout.contains("converged"), "run {run}:\n{stdout}");
        if run == 2 {
            // The second client of the first act loaded the first run's copies.
            assert!(stdout.contains("from disk"), "{stdout}");
        }
    }
}
