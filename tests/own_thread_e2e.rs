//! A client on a thread of its own (`XdsClientBuilder::own_thread`),
//! against the testbed over loopback delta ADS: built where no tokio
//! runtime is, it serves a watch and a resource graph to readers on
//! another runtime, runs their work on its own thread, and that thread
//! ends with the client's last handle.
//!
//! One test in this file: it counts the process's threads by name.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::resources::{cluster, endpoints};
use common::{PATIENCE, bootstrap_json, changed, fast_transport};
use xdsfed::client::client::{OWN_THREAD_NAME, XdsClient};
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph};
use xdsfed::testbed::{ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";

/// Threads of this process named as the client's own, and whether the
/// count can be read here at all.
fn own_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim_end() == OWN_THREAD_NAME)
            })
            .count(),
    )
}

/// What ran the task that asked: the thread's name.
async fn thread_of_client(client: &XdsClient) -> Option<String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    drop(client.runtime().spawn(async move {
        let _ = tx.send(std::thread::current().name().map(str::to_owned));
    }));
    tokio::time::timeout(PATIENCE, rx).await.ok()?.ok()?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_its_own_thread_serves_readers_elsewhere_and_ends_with_its_last_handle() {
    let testbed = Testbed::start([ServerSpec::new("cloud", [CLOUD])])
        .await
        .expect("testbed starts");
    let server = &testbed.servers()[0];
    let name = format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/payments");
    let service =
        format!("xdstp://{CLOUD}/envoy.config.endpoint.v3.ClusterLoadAssignment/payments");
    server
        .set_message(&name, &cluster(&name, &service))
        .unwrap();
    server
        .set_message(&service, &endpoints(&service, &[("127.0.0.1", 8080)]))
        .unwrap();
    let uri = server.uri();
    let bootstrap = bootstrap_json(&uri, &[(CLOUD, &[uri.as_str()])], "");

    // Built and its graph started on a thread with no tokio runtime.
    let threads_before = own_threads();
    let root = name.clone();
    let (client, graph) = std::thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let client = XdsClient::builder(Bootstrap::from_json_str(&bootstrap).unwrap())
            .transport_options(fast_transport())
            .own_thread()
            .build()
            .expect("no runtime is needed");
        let graph = ConfigGraph::builder(client.clone()).cluster(root).start();
        (client, graph)
    })
    .join()
    .unwrap();
    assert_eq!(
        thread_of_client(&client).await.as_deref(),
        Some(OWN_THREAD_NAME),
        "what is spawned on the client's runtime runs on its own thread"
    );

    // A watch read on this runtime.
    let cluster_name = name;
    let mut watch = client.watch::<ClusterType>(&cluster_name).unwrap();
    let first = changed(&mut watch).await;
    assert_eq!(first.name(), cluster_name);

    // The graph's snapshot, with the cluster's endpoints, read here too.
    let mut graph = graph;
    let snapshot = tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .expect("a snapshot in time")
        .expect("the graph runs");
    let held = snapshot.cluster(&cluster_name).expect("the root cluster");
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &held.endpoints
    else {
        panic!("the cluster's endpoints are in the snapshot");
    };
    let ports: Vec<u16> = assignment.value.endpoints().map(|e| e.port).collect();
    assert_eq!(ports, [8080]);

    // A change reaches the reader through the client's thread.
    server
        .set_message(&service, &endpoints(&service, &[("127.0.0.1", 8081)]))
        .unwrap();
    let changed_snapshot = tokio::time::timeout(PATIENCE, async {
        loop {
            let s = graph.changed().await.expect("the graph runs");
            let port = s.cluster(&cluster_name).and_then(|c| match &c.endpoints {
                ClusterEndpoints::Eds {
                    assignment: Some(a),
                    ..
                } => a.value.endpoints().next().map(|e| e.port),
                _ => None,
            });
            if port == Some(8081) {
                return s;
            }
        }
    })
    .await;
    assert!(changed_snapshot.is_ok(), "the change reached the snapshot");

    // The last handles go: the thread ends.
    drop(watch);
    drop(graph);
    drop(client);
    let Some(before) = threads_before else {
        eprintln!("skipped the thread count: no /proc/self/task here");
        return;
    };
    let deadline = Instant::now() + PATIENCE;
    while own_threads() != Some(before) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(own_threads(), Some(before), "the client's thread ended");
}
