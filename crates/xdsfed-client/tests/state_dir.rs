//! The state directory end to end: a client against the testbed over
//! loopback delta ADS persists what it accepts; a client started later
//! with the same directory serves those copies before any server answers.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use xdsfed_client::cache::ResourceStatus;
use xdsfed_client::client::XdsClient;
use xdsfed_client::state_dir::{RECORDS_DIR, read_records, record::file_name};
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_client::watch::Watch;
use xdsfed_core::bootstrap::Bootstrap;
use xdsfed_core::types::{ClusterType, ListenerType};
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
    assert_eq!(
        c2.current().unwrap().decode().unwrap().alt_stat_name,
        "changed"
    );
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
            .any(|r| {
                r.file == c2_file && c2.state().version.is_some_and(|v| v == *r.record.version)
            })
    })
    .await;
}

/// A truncated record, a corrupted one and a foreign file are reported
/// (counted and listed, naming the file) and ignored; the other records
/// serve; leftover temporary files (of both naming schemes) are deleted.
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
    let random_temp = records_dir.join(format!(
        "{}.0123456789abcdef.tmp",
        file_name(CDS, &cluster_name("web"))
    ));
    std::fs::write(&random_temp, "half a write").unwrap();

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
    assert!(!temp.exists(), "the older temporary file is cleaned up");
    assert!(!random_temp.exists(), "the temporary file is cleaned up");

    let web = client.watch::<ClusterType>(&cluster_name("web")).unwrap();
    assert_eq!(web.state().status, ResourceStatus::FromDisk);
    let listener = client.watch::<ListenerType>(&listener()).unwrap();
    assert!(listener.current().is_some());
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    assert!(c1.current().is_none(), "a truncated record serves nothing");
}

/// How long a start-up or a drop may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(10);

/// Builds a client of `uri` over `dir` like [`client`], returning the
/// builder's error instead of panicking.
fn try_client(uri: &str, dir: &Path) -> Result<XdsClient, xdsfed_client::client::BuildError> {
    let server = format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#);
    let json = format!(
        r#"{{"xds_servers": [{server}], "node": {{"id": "state-dir"}}, "authorities": {{"{A}": {{"xds_servers": [{server}]}}}}}}"#
    );
    XdsClient::builder(Bootstrap::from_json_str(&json).unwrap())
        .transport_options(transport())
        .state_dir(dir)
        .build()
}

/// Builds a client of a dead server over `dir` on a thread of its own, so
/// a start-up that hangs fails the test instead of hanging it.
fn build_within_deadline(dir: &Path) -> XdsClient {
    let (done, built) = std::sync::mpsc::channel();
    let runtime = tokio::runtime::Handle::current();
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        let _entered = runtime.enter();
        let _ = done.send(try_client(&dead_uri(), &dir));
    });
    built
        .recv_timeout(HANG)
        .expect("the client is built without hanging")
        .expect("the client is built")
}

/// Drops `client` on a thread of its own and fails if that does not
/// return.
fn drop_within_deadline(client: XdsClient) {
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(client);
        let _ = done.send(());
    });
    dropped
        .recv_timeout(HANG)
        .expect("dropping the client returns without waiting on retries");
}

/// The permission bits of `path` (not following a symlink).
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// The builder's refusal of `dir`, which must name it and say `why`.
fn assert_refused(dir: &Path, why: &str) {
    match try_client(&dead_uri(), dir) {
        Ok(client) => {
            // A writer that cannot write may never let go (the defect this
            // checks against): do not wait for it.
            std::mem::forget(client);
            panic!("a client was built over {}", dir.display());
        }
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(&dir.display().to_string()) && text.contains(why),
                "the error names {} and says {why}: {text}",
                dir.display()
            );
        }
    }
}

/// The state directory's files: a temporary file is created exclusively
/// under an unpredictable name, never through a symlink planted at the
/// name a record's temporary file used to have.
#[tokio::test]
async fn temporary_file_is_never_opened_through_a_planted_symlink() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let client = client(&server.uri(), &state);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "not the client's to overwrite").unwrap();
    let records_dir = state.join(RECORDS_DIR);
    let record = records_dir.join(file_name(CDS, &cluster_name("c1")));
    let mut old_temp = record.clone().into_os_string();
    old_temp.push(".tmp");
    std::os::unix::fs::symlink(&victim, &old_temp).unwrap();

    let _c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    eventually("c1's record is written", || {
        read_records(&state, 1 << 20)
            .unwrap()
            .records
            .iter()
            .any(|r| r.file == record)
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not the client's to overwrite"
    );
    assert!(
        std::fs::symlink_metadata(&record).unwrap().is_file(),
        "the record is a regular file, not the planted link"
    );
}

/// The state directory's files: the directories the client creates are
/// 0700 and every record it writes is 0600 (they hold what servers sent,
/// private keys included).
#[tokio::test]
async fn records_and_their_directories_are_private_to_the_user() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    fill(server, &state).await;

    assert_eq!(mode_of(&state), 0o700, "the state directory");
    assert_eq!(mode_of(&state.join(RECORDS_DIR)), 0o700, "its records");
    for stored in read_records(&state, 1 << 20).unwrap().records {
        assert_eq!(mode_of(&stored.file), 0o600, "{}", stored.file.display());
    }
}

/// The state directory's files: an existing state directory writable by
/// its group or by others (a sticky /tmp included) is refused at build
/// time with an error naming it.
#[tokio::test]
async fn state_dir_writable_by_others_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    for mode in [0o777, 0o775, 0o1777] {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("shared");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_refused(&state, "writable");
    }
}

/// The state directory's files: a state directory that is a regular file
/// is refused at build time with an error naming it.
#[tokio::test]
async fn state_dir_that_is_a_regular_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state");
    std::fs::write(&file, "a file").unwrap();
    assert_refused(&file, "not a directory");
}

/// The state directory's files: a write that keeps failing (the records
/// directory replaced by a regular file, which fails for root too) is
/// retried a bounded number of times with backoff, and dropping the
/// client does not wait on the retries.
#[tokio::test]
async fn failing_writes_are_bounded_and_drop_does_not_wait_on_them() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    let client = client(&server.uri(), dir.path());
    let records_dir = dir.path().join(RECORDS_DIR);
    std::fs::remove_dir(&records_dir).unwrap();
    std::fs::write(&records_dir, "not a directory").unwrap();

    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    eventually("c1 is received", || c1.current().is_some()).await;
    let state_dir = || client.status().state_dir.unwrap();
    eventually("the write fails", || state_dir().write_errors > 0).await;
    let errors = state_dir().write_errors;
    drop(c1);
    drop_within_deadline(client);
    assert!(
        errors <= 8,
        "one resource's failing write was attempted {errors} times"
    );
}

/// The state directory's files: only regular files are read. A FIFO does
/// not hang start-up and a symlink to a valid record elsewhere is not
/// followed; both are reported, naming the file, and skipped.
#[tokio::test]
async fn fifo_and_symlink_in_the_records_dir_are_skipped_and_reported() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    fill(server, &state).await;

    let records_dir = state.join(RECORDS_DIR);
    let c1 = records_dir.join(file_name(CDS, &cluster_name("c1")));
    let elsewhere = dir.path().join("elsewhere.rec");
    std::fs::rename(&c1, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &c1).unwrap();
    let fifo = records_dir.join(file_name(CDS, &cluster_name("c2")));
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());

    let client = build_within_deadline(&state);
    let status = client.status().state_dir.unwrap();
    assert_eq!(status.records_loaded, 4, "{:?}", status.problems);
    for (file, why) in [(&c1, "symbolic link"), (&fifo, "FIFO")] {
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
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    assert!(c1.current().is_none(), "a symlinked record serves nothing");
}

/// The version of `name`'s record in `dir`.
fn persisted_version(dir: &Path, type_url: &str, name: &str) -> String {
    let scan = read_records(dir, 1 << 20).unwrap();
    let record = scan
        .records
        .iter()
        .find(|r| &*r.record.type_url == type_url && &*r.record.name == name)
        .unwrap_or_else(|| panic!("no record of {name}"));
    record.record.version.to_string()
}

/// The stream the testbed recorded first after `before` streams, once
/// one exists.
async fn stream_after(server: &Server, before: usize) -> xdsfed_testbed::recording::StreamRecord {
    eventually("the new client opens a stream", || {
        server.recording().stream_count() > before
    })
    .await;
    server.recording().streams()[before].clone()
}

/// Watches a cluster no record holds and waits until the server has sent
/// it: the server answers a stream's requests in order, so whatever it
/// sent for the earlier requests is recorded by then.
async fn fence(client: &XdsClient, server: &Server) -> Watch<ClusterType> {
    let id = "fence";
    let service = endpoints_name(id);
    server
        .set_message(&cluster_name(id), &cluster(&cluster_name(id), &service))
        .unwrap();
    let watch = client.watch::<ClusterType>(&cluster_name(id)).unwrap();
    eventually("the fence cluster arrives", || watch.current().is_some()).await;
    watch
}

/// Resume from the state directory (xds-protocol-v3 "Incremental xDS":
/// "the Incremental xDS client may tell the server of its known resources
/// to avoid resending them [...] in initial_resource_versions"): a client
/// restarted with its state directory claims, in its first delta request,
/// the versions the same server sent; the server does not send the
/// unchanged resource again, and the copy, served all along, is confirmed.
#[tokio::test]
async fn restarted_client_claims_persisted_versions_and_unchanged_copies_are_not_resent() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    fill(server, dir.path()).await;
    let c1_name = cluster_name("c1");
    let version = persisted_version(dir.path(), CDS, &c1_name);
    let before = server.recording().stream_count();

    let client = client(&server.uri(), dir.path());
    let c1 = client.watch::<ClusterType>(&c1_name).unwrap();
    assert!(c1.current().is_some(), "the persisted copy serves at once");
    eventually("c1 is confirmed", || {
        c1.state().status == ResourceStatus::Acked && c1.state().error.is_none()
    })
    .await;
    assert!(c1.current().is_some());
    let _fence = fence(&client, server).await;

    let stream = server.recording().streams()[before].clone();
    let first = stream
        .delta_requests()
        .find(|r| r.type_url == CDS)
        .expect("a CDS request");
    assert_eq!(
        first.initial_resource_versions.get(&c1_name),
        Some(&version),
        "the first request claims the persisted version: {first:?}"
    );
    assert_eq!(
        first.initial_resource_versions.len(),
        1,
        "only what the client subscribes to is claimed: {first:?}"
    );
    let resent = stream
        .delta_responses()
        .any(|r| r.resources.iter().any(|res| res.name == c1_name));
    assert!(!resent, "the server sent the unchanged c1 again");
    assert_eq!(c1.state().version.map(String::from), Some(version));
}

/// A copy the server confirmed as it was persisted (same bytes, version
/// and server) is not written again: "a copy whose bytes and version are
/// those already written is not written again" (docs/client.md), so a
/// restart that resumes costs no writes either.
#[tokio::test]
async fn persisted_copy_confirmed_unchanged_is_not_written_again() {
    let testbed = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let server = &testbed.servers()[0];
    populate(server);
    let dir = tempfile::tempdir().unwrap();
    fill(server, dir.path()).await;

    let c1_file = dir
        .path()
        .join(RECORDS_DIR)
        .join(file_name(CDS, &cluster_name("c1")));
    let inode = || {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(&c1_file).unwrap().ino()
    };
    let persisted = inode();

    let client = client(&server.uri(), dir.path());
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    eventually("c1 is confirmed", || {
        c1.state().status == ResourceStatus::Acked
    })
    .await;
    // The writer runs the writes in order: once the fence's record (a new
    // resource) is in place, a write of c1 queued before it is done too
    // (a write renames a new file over the record: a new inode).
    let _fence = fence(&client, server).await;
    eventually("the fence's record is written", || records(dir.path()) == 7).await;
    assert_eq!(inode(), persisted, "c1's record was written again");
}

/// Versions another server sent are never claimed: a client restarted
/// with the same state directory against another server asks afresh, and
/// that server's copy replaces the persisted one.
#[tokio::test]
async fn persisted_versions_from_another_server_are_not_claimed() {
    let first = Testbed::start([ServerSpec::new("a", [A])]).await.unwrap();
    let a = &first.servers()[0];
    populate(a);
    let dir = tempfile::tempdir().unwrap();
    fill(a, dir.path()).await;
    let second = Testbed::start([ServerSpec::new("b", [A])]).await.unwrap();
    let b = &second.servers()[0];
    populate(b);

    let client = client(&b.uri(), dir.path());
    let c1 = client.watch::<ClusterType>(&cluster_name("c1")).unwrap();
    eventually("c1 is confirmed by b", || {
        c1.state().status == ResourceStatus::Acked && c1.state().error.is_none()
    })
    .await;
    let stream = stream_after(b, 0).await;
    let first_cds = stream
        .delta_requests()
        .find(|r| r.type_url == CDS)
        .expect("a CDS request");
    assert!(
        first_cds.initial_resource_versions.is_empty(),
        "a version from server a was claimed to server b: {first_cds:?}"
    );
    assert!(
        stream
            .delta_responses()
            .any(|r| r.resources.iter().any(|res| res.name == cluster_name("c1"))),
        "b sends c1, which the client never had from it"
    );
}
