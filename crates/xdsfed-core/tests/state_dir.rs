//! The state directory end to end: a client against the testbed over
//! loopback delta ADS persists what it accepts; a client started later
//! with the same directory serves those copies before any server answers.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::cache::ResourceStatus;
use xdsfed_core::client::XdsClient;
use xdsfed_core::state_dir::{RECORDS_DIR, read_records, record::file_name};
use xdsfed_core::transport::{BackoffConfig, TransportOptions};
use xdsfed_core::types::{ClusterType, ListenerType};
use xdsfed_core::watch::Watch;
use xdsfed_graph::{ClusterEndpoints, ConfigGraph, GraphOptions, Snapshot};
use xdsfed_testbed::resources::{api_listener, cluster, endpoints, route_config};
use xdsfed_testbed::{Server, ServerSpec, Testbed};

const A: &str = "a.example";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const PATIENCE: Duration = Duration::from_secs(10);

fn listener() -> String {
    format!("xdstp://{A}/envoy.config.listener.v3.Listener/front")
}
fn route() -> String {
    format!("xdstp://{A}/envoy.config.route.v3.RouteConfiguration/front")
}
fn cluster_name(id: &str) -> String {
    format!("xdstp://{A}/envoy.config.cluster.v3.Cluster/{id}")
}
fn endpoints_name(id: &str) -> String {
    format!("xdstp://{A}/envoy.config.endpoint.v3.ClusterLoadAssignment/{id}")
}

fn transport() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        does_not_exist_timeout: Duration::from_millis(500),
        idle_grace: Duration::from_millis(200),
        backoff: BackoffConfig {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            ..defaults.backoff
        },
        ..defaults
    }
}

/// A client of `uri` for authority A, persisting to `dir`.
fn client(uri: &str, dir: &Path) -> XdsClient {
    let server = format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#);
    let json = format!(
        r#"{{"xds_servers": [{server}], "node": {{"id": "state-dir"}}, "authorities": {{"{A}": {{"xds_servers": [{server}]}}}}}}"#
    );
    XdsClient::builder(Bootstrap::from_json_str(&json).unwrap())
        .transport_options(transport())
        .state_dir(dir)
        .build()
        .unwrap()
}

/// The URI of a port nothing listens on.
fn dead_uri() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// Listener → route → cluster `web` → endpoints `web`, and clusters
/// `c1`, `c2` with no one routing to them.
fn populate(server: &Server) {
    server
        .set_message(&listener(), &api_listener(&listener(), &route()))
        .unwrap();
    server
        .set_message(
            &route(),
            &route_config(&route(), &[("/", cluster_name("web").as_str())]),
        )
        .unwrap();
    for id in ["web", "c1", "c2"] {
        let service = endpoints_name(id);
        server
            .set_message(&cluster_name(id), &cluster(&cluster_name(id), &service))
            .unwrap();
        server
            .set_message(&service, &endpoints(&service, &[("127.0.0.1", 8000)]))
            .unwrap();
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The number of whole records in `dir`.
fn records(dir: &Path) -> usize {
    read_records(dir, 1 << 20).unwrap().records.len()
}

fn graph(client: &XdsClient) -> ConfigGraph {
    ConfigGraph::builder(client.clone())
        .listener(listener())
        // Far past PATIENCE: readiness never comes from a warming timeout.
        .options(GraphOptions::default().with_warming_timeout(Duration::from_secs(60)))
        .start()
}

/// Whether the snapshot holds the whole chain, with endpoints.
fn whole(s: &Snapshot) -> bool {
    s.listener(&listener()).is_some()
        && s.cluster(&cluster_name("web")).is_some_and(|c| {
            c.cluster.is_some()
                && matches!(
                    &c.endpoints,
                    ClusterEndpoints::Eds {
                        assignment: Some(_),
                        ..
                    }
                )
        })
}

/// A first client fills `dir` from `server` through a graph and the
/// clusters `c1` and `c2`, and is dropped once the records are written.
async fn fill(server: &Server, dir: &Path) {
    let client = client(&server.uri(), dir);
    let mut graph = graph(&client);
    let snapshot = tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .unwrap()
        .unwrap();
    assert!(whole(&snapshot));
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    let c2 = client.watch::<ClusterType>(&cluster_name("c2")).unwrap();
    // Listener, route, three clusters, web's endpoints.
    eventually("six records are written", || records(dir) == 6).await;
    drop((c1, c2, graph, client));
}

fn status_of<T: xdsfed_core::ResourceType>(watch: &Watch<T>) -> ResourceStatus {
    watch.state().status
}

/// A client whose servers are down serves the persisted copies at once,
/// as FROM_DISK with an ambient error, and a graph over them is ready.
#[tokio::test]
async fn persisted_copies_serve_at_once_while_the_servers_are_down() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    fill(server, dir.path()).await;

    let client = client(&dead_uri(), dir.path());
    let watch = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    assert!(
        watch.current().is_some(),
        "no copy served before any server answered"
    );
    assert_eq!(status_of(&watch), ResourceStatus::FromDisk);
    let error = watch.state().error.expect("an ambient error");
    assert!(
        error.to_string().contains("state directory"),
        "the ambient error says where the copy is from: {error}"
    );
    let status = client.status().state_dir.expect("a state directory status");
    assert_eq!(status.records_loaded, 6);
    assert_eq!(status.records_rejected, 0);

    let mut graph = graph(&client);
    let snapshot = tokio::time::timeout(PATIENCE, graph.ready())
        .await
        .expect("the graph is ready from persisted copies")
        .unwrap();
    assert!(whole(&snapshot), "the graph holds the whole chain");
    // The servers never answered: the does-not-exist timer (500 ms) has
    // had time to fire, and dropped nothing.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(watch.current().is_some());
    assert_eq!(status_of(&watch), ResourceStatus::FromDisk);
}

/// The server comes back: its copies confirm (same bytes) or replace
/// (changed meanwhile) the persisted ones, the status is ACKED and the
/// ambient error is gone; a resource the server no longer has is dropped
/// once the server has answered, and its record deleted.
#[tokio::test]
async fn a_server_coming_back_confirms_or_replaces_persisted_copies() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    fill(server, dir.path()).await;

    server.update_faults(|f| f.refuse_connections = true);
    let mut changed = cluster(&cluster_name("c2"), &endpoints_name("c2"));
    changed.alt_stat_name = "changed".into();
    server.set_message(&cluster_name("c2"), &changed).unwrap();
    let client = client(&server.uri(), dir.path());
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    let c2 = client.watch::<ClusterType>(&cluster_name("c2")).unwrap();
    let web = client.watch::<ClusterType>(&cluster_name("web")).unwrap();
    for watch in [&c1, &c2, &web] {
        assert_eq!(watch.state().status, ResourceStatus::FromDisk);
    }
    assert!(server.delete_resource(CDS, &cluster_name("web")).unwrap());
    // Refused for a while: the copies keep serving, unconfirmed.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(c1.state().status, ResourceStatus::FromDisk);
    assert!(
        web.current().is_some(),
        "dropped before any server answered"
    );

    server.update_faults(|f| f.refuse_connections = false);
    eventually("c1 and c2 are confirmed", || {
        [&c1, &c2]
            .iter()
            .all(|w| w.state().status == ResourceStatus::Acked && w.state().error.is_none())
    })
    .await;
    assert_eq!(c2.current().unwrap().alt_stat_name, "changed");
    eventually("web, gone from the server, is dropped", || {
        web.state().status == ResourceStatus::DoesNotExist && web.current().is_none()
    })
    .await;
    let web_file = file_name(CDS, &cluster_name("web"));
    eventually("web's record is deleted", || {
        !dir.path().join(RECORDS_DIR).join(&web_file).exists()
    })
    .await;
    let c2_file = dir
        .path()
        .join(RECORDS_DIR)
        .join(file_name(CDS, &cluster_name("c2")));
    eventually("c2's record holds the new copy", || {
        read_records(dir.path(), 1 << 20)
            .unwrap()
            .records
            .iter()
            .any(|r| r.file == c2_file && Some(&r.record.version) == c2.state().version.as_ref())
    })
    .await;
}

/// A truncated record, a corrupted one and a foreign file are reported
/// (counted and listed, naming the file) and ignored; the other records
/// serve; a leftover temporary file is deleted.
#[tokio::test]
async fn corrupt_truncated_and_foreign_files_are_reported_and_ignored() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    fill(server, dir.path()).await;

    let records_dir = dir.path().join(RECORDS_DIR);
    let c1 = records_dir.join(file_name(CDS, &cluster_name("c1")));
    let c2 = records_dir.join(file_name(CDS, &cluster_name("c2")));
    let bytes = std::fs::read(&c1).unwrap();
    std::fs::write(&c1, &bytes[..bytes.len() / 2]).unwrap();
    let mut bytes = std::fs::read(&c2).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&c2, &bytes).unwrap();
    let foreign = records_dir.join("notes.txt");
    std::fs::write(&foreign, "not a record").unwrap();
    let temp = records_dir.join("0123.rec.tmp");
    std::fs::write(&temp, "half a write").unwrap();

    let client = client(&dead_uri(), dir.path());
    let status = client.status().state_dir.unwrap();
    assert_eq!(status.records_rejected, 3, "{:?}", status.problems);
    assert_eq!(status.records_loaded, 4);
    for (file, why) in [(&c1, "truncated"), (&c2, "checksum"), (&foreign, "not an")] {
        let name = file.display().to_string();
        assert!(
            status
                .problems
                .iter()
                .any(|p| p.starts_with(&name) && p.contains(why)),
            "{name} reported as {why}: {:?}",
            status.problems
        );
    }
    assert!(!temp.exists(), "the temporary file is cleaned up");

    let web = client.watch::<ClusterType>(&cluster_name("web")).unwrap();
    assert_eq!(web.state().status, ResourceStatus::FromDisk);
    let listener = client.watch::<ListenerType>(&listener()).unwrap();
    assert!(listener.current().is_some());
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    assert!(c1.current().is_none(), "a truncated record serves nothing");
}
