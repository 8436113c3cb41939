//! Filesystem sources end to end: the real client over files in a
//! temporary directory (and, for fallback, the testbed over loopback gRPC),
//! with short timers. The session's rules have unit tests of their own
//! (`src/source/file/tests.rs`); these check that a change on disk reaches
//! a watcher, however it is made.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;
use xdsfed_core::types::ClusterView;

use xdsfed_client::client::XdsClient;
use xdsfed_client::transport::{BackoffConfig, TransportOptions};
use xdsfed_client::watch::{CollectionEvent, Watch, WatchEvent};
use xdsfed_core::bootstrap::{Bootstrap, ServerProtocol};
use xdsfed_core::types::{ClusterType, ListenerType, ResourceType};
use xdsfed_testbed::{ServerSpec, Testbed};

/// Bounds how long a failure takes to show; nothing asserts a timing.
const PATIENCE: Duration = Duration::from_secs(10);
const AUTHORITY: &str = "file.example";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

fn cluster_name(id: &str) -> String {
    format!("xdstp://{AUTHORITY}/envoy.config.cluster.v3.Cluster/{id}")
}

/// A file holding valid EDS clusters `(id, service)`.
fn clusters_yaml(version: &str, clusters: &[(&str, &str)]) -> String {
    let mut text = format!("version_info: '{version}'\nresources:\n");
    for (id, service) in clusters {
        text.push_str(&format!(
            "  - {{'@type': '{CDS}', name: '{}', type: EDS, eds_cluster_config: {{eds_config: {{ads: {{}}}}, service_name: '{service}'}}}}\n",
            cluster_name(id)
        ));
    }
    text
}

fn service_of(c: &ClusterView) -> &str {
    c.eds_service_name().unwrap_or_default()
}

/// Writes `text` to `path` the way configuration tools do: a temporary
/// file beside it, renamed over it.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
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

/// A client of `bootstrap`, its file sources settling changes quickly.
fn client(mut bootstrap: Bootstrap) -> XdsClient {
    let servers = bootstrap.xds_servers.iter_mut().chain(
        bootstrap
            .authorities
            .values_mut()
            .flat_map(|a| a.xds_servers.iter_mut()),
    );
    for server in servers {
        if let ServerProtocol::File(source) = &mut server.protocol {
            source.debounce = Duration::from_millis(20);
        }
    }
    XdsClient::builder(bootstrap)
        .transport_options(transport())
        .build()
        .unwrap()
}

/// A client whose authority `file.example` is served by the file `path`.
fn file_client(path: &Path) -> XdsClient {
    let uri = format!("file://{}", path.display());
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}"}}], "node": {{"id": "file-test"}},
            "authorities": {{"{AUTHORITY}": {{}}}}}}"#
    );
    client(Bootstrap::from_json_str(&json).unwrap())
}

/// Waits for a change that satisfies `want`, skipping other events.
async fn changed_until<T: ResourceType>(
    watch: &mut Watch<T>,
    what: &str,
    mut want: impl FnMut(&T::Resource) -> bool,
) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(WatchEvent::Changed(r))) if want(&r) => return,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch ended waiting for {what}"),
            Err(_) => panic!("no {what} within {PATIENCE:?}: {:?}", watch.state()),
        }
    }
}

/// Waits for an ambient error (a copy is held) whose text has `says`.
async fn ambient_error<T: ResourceType>(watch: &mut Watch<T>, says: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(WatchEvent::AmbientError(e))) if e.to_string().contains(says) => return,
            Ok(Some(WatchEvent::Changed(_))) => panic!("the copy changed; expected an error"),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the watch ended"),
            Err(_) => panic!("no ambient error saying {says:?} within {PATIENCE:?}"),
        }
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

/// A file source delivers what its file holds, a cluster and a listener
/// side by side (each `Any` names its type).
#[tokio::test]
async fn file_source_delivers_resources_of_several_types() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    let listener = format!("xdstp://{AUTHORITY}/envoy.config.listener.v3.Listener/front");
    let mut text = clusters_yaml("1", &[("payments", "payments-v1")]);
    text.push_str(&listener_yaml(&listener));
    write_atomic(&path, &text);
    let client = file_client(&path);
    let mut clusters = client
        .watch::<ClusterType>(&cluster_name("payments"))
        .unwrap();
    changed_until(&mut clusters, "the file's cluster", |c| {
        service_of(c) == "payments-v1"
    })
    .await;
    let mut listeners = client.watch::<ListenerType>(&listener).unwrap();
    changed_until(&mut listeners, "the file's listener", |l| {
        l.name == listener
    })
    .await;
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.type_url == LDS).unwrap();
    assert_eq!(entry.version.as_deref(), Some("1"));
    assert!(entry.server.starts_with("file://"), "{}", entry.server);
}

/// An API listener with an inline route configuration, as a YAML flow map.
fn listener_flow(name: &str) -> String {
    let hcm = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
    let router = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
    format!(
        "{{'@type': '{LDS}', name: '{name}', api_listener: {{api_listener: {{'@type': '{hcm}', \
         route_config: {{name: r, virtual_hosts: [{{name: v, domains: ['*'], routes: [{{match: {{prefix: ''}}, route: {{cluster: c}}}}]}}]}}, \
         http_filters: [{{name: router, typed_config: {{'@type': '{router}'}}}}]}}}}}}"
    )
}

fn listener_yaml(name: &str) -> String {
    format!("  - {}\n", listener_flow(name))
}

/// A rewrite (a temporary file renamed over the file) reaches the watcher.
#[tokio::test]
async fn rewrite_by_rename_reaches_the_watcher() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    write_atomic(&path, &clusters_yaml("1", &[("payments", "v1")]));
    let client = file_client(&path);
    let mut watch = client
        .watch::<ClusterType>(&cluster_name("payments"))
        .unwrap();
    changed_until(&mut watch, "version 1", |c| service_of(c) == "v1").await;
    write_atomic(&path, &clusters_yaml("2", &[("payments", "v2")]));
    changed_until(&mut watch, "version 2", |c| service_of(c) == "v2").await;
}

/// Kubernetes ConfigMap style: `config.yaml -> ..data/config.yaml`,
/// `..data -> v1/`; the update swaps `..data` to `v2/` with a new symlink
/// renamed over the old one. The watched directory sees the rename.
#[cfg(unix)]
#[tokio::test]
async fn atomic_symlink_swap_reaches_the_watcher() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (version, service) in [("v1", "one"), ("v2", "two")] {
        std::fs::create_dir(root.join(version)).unwrap();
        let text = clusters_yaml(version, &[("payments", service)]);
        std::fs::write(root.join(version).join("config.yaml"), text).unwrap();
    }
    symlink("v1", root.join("..data")).unwrap();
    symlink("..data/config.yaml", root.join("config.yaml")).unwrap();
    let uri = format!("file://{}", root.join("config.yaml").display());
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{uri}", "watched_directory": "{}"}}],
            "authorities": {{"{AUTHORITY}": {{}}}}}}"#,
        root.display()
    );
    let client = client(Bootstrap::from_json_str(&json).unwrap());
    let mut watch = client
        .watch::<ClusterType>(&cluster_name("payments"))
        .unwrap();
    changed_until(&mut watch, "v1's copy", |c| service_of(c) == "one").await;
    symlink("v2", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    changed_until(&mut watch, "v2's copy", |c| service_of(c) == "two").await;
}

/// A broken file, then a resource that fails validation: the last good
/// copy keeps serving, the watcher sees each error as ambient, and the
/// status shows it.
#[tokio::test]
async fn bad_file_keeps_the_last_good_copy_and_reports_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    write_atomic(&path, &clusters_yaml("1", &[("payments", "good")]));
    let client = file_client(&path);
    let name = cluster_name("payments");
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    changed_until(&mut watch, "the good copy", |c| service_of(c) == "good").await;

    write_atomic(&path, "resources: [ {{{ broken");
    ambient_error(&mut watch, "config.yaml").await;
    assert_eq!(service_of(&watch.current().unwrap()), "good");
    let server = |client: &XdsClient| {
        let status = client.status();
        status
            .servers
            .into_iter()
            .find(|s| s.server.starts_with("file://"))
            .unwrap()
    };
    eventually("the status shows the failed file", || {
        let s = server(&client);
        !s.connected && s.server_failure == 1
    })
    .await;

    let invalid = format!(
        "version_info: '2'\nresources:\n  - {{'@type': '{CDS}', name: '{name}', type: EDS}}\n"
    );
    write_atomic(&path, &invalid);
    ambient_error(&mut watch, "eds_cluster_config").await;
    assert_eq!(service_of(&watch.current().unwrap()), "good");
    let status = client.status();
    let entry = status.resources.iter().find(|r| r.name == name).unwrap();
    assert_eq!(
        entry.version.as_deref(),
        Some("1"),
        "the good copy's version"
    );
    assert_eq!(entry.failed_version.as_deref(), Some("2"));
    assert!(
        entry
            .error
            .as_deref()
            .unwrap_or("")
            .contains("eds_cluster_config"),
        "{entry:?}"
    );
    assert!(server(&client).connected, "the file decodes again");
}

/// gRFC A71: an authority lists a gRPC server that refuses connections,
/// then a file. The watcher gets the file's copy; once the server answers,
/// the client switches back to it.
#[tokio::test]
async fn fallback_from_a_dead_server_to_a_file_and_back() {
    let testbed = Testbed::start([ServerSpec::new("primary", [AUTHORITY])])
        .await
        .unwrap();
    let primary = &testbed.servers()[0];
    let name = cluster_name("payments");
    primary
        .set_message(&name, &xdsfed_testbed::resources::cluster(&name, "primary"))
        .unwrap();
    primary.update_faults(|f| f.refuse_connections = true);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fallback.yaml");
    write_atomic(&path, &clusters_yaml("1", &[("payments", "from-file")]));
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": "{p}", "channel_creds": [{{"type": "insecure"}}]}}],
            "authorities": {{"{AUTHORITY}": {{"xds_servers": [
                {{"server_uri": "{p}", "channel_creds": [{{"type": "insecure"}}]}},
                {{"server_uri": "file://{f}"}}]}}}}}}"#,
        p = primary.uri(),
        f = path.display()
    );
    let client = client(Bootstrap::from_json_str(&json).unwrap());
    let mut watch = client.watch::<ClusterType>(&name).unwrap();
    changed_until(&mut watch, "the file's copy", |c| {
        service_of(c) == "from-file"
    })
    .await;
    let source = |client: &XdsClient| {
        let status = client.status();
        let entry = status
            .resources
            .into_iter()
            .find(|r| r.name == name)
            .unwrap();
        let source = entry.source.unwrap();
        (source.server, source.fallback)
    };
    let (server, fallback) = source(&client);
    assert!(fallback && server.starts_with("file://"), "{server}");

    primary.update_faults(|f| f.refuse_connections = false);
    changed_until(&mut watch, "the primary's copy", |c| {
        service_of(c) == "primary"
    })
    .await;
    let (server, fallback) = source(&client);
    assert!(!fallback && server.contains(&primary.uri()), "{server}");
}

/// xDS TP1's handcrafted configuration: a list collection with inline
/// entries, served from a file.
#[tokio::test]
async fn list_collection_with_inline_entries_is_served_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("listeners.yaml");
    let collection =
        format!("xdstp://{AUTHORITY}/envoy.config.listener.v3.ListenerCollection/edge");
    let entry = |id: &str| {
        format!(
            "        - inline_entry: {{name: {id}, version: '1', resource: {}}}\n",
            listener_flow(&format!("{id}-listener"))
        )
    };
    let text = format!(
        "resources:
  - '@type': type.googleapis.com/envoy.service.discovery.v3.Resource
    name: '{collection}'
    resource:
      '@type': type.googleapis.com/envoy.config.listener.v3.ListenerCollection
      entries:
{}{}",
        entry("one"),
        entry("two")
    );
    write_atomic(&path, &text);
    let client = file_client(&path);
    let mut watch = client
        .watch_list_collection::<ListenerType>(&collection)
        .unwrap();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while seen.len() < 2 {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(CollectionEvent::Upsert { resource, .. })) => seen.push(resource.name.clone()),
            Ok(Some(CollectionEvent::Error { error, .. })) => panic!("{error}"),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the collection watch ended"),
            Err(_) => panic!("members {seen:?} after {PATIENCE:?}: {:?}", watch.state()),
        }
    }
    seen.sort();
    assert_eq!(seen, ["one-listener", "two-listener"]);
}

/// `bootstrap-examples/file-source/`: the example bootstrap loads, and a
/// resource of its file reaches a watcher. Its path is relative to the
/// workspace root (where the docs run it); the test anchors it there,
/// since tests run in the crate's directory.
#[tokio::test]
async fn example_file_source_bootstrap_serves_its_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut bootstrap =
        Bootstrap::from_file(root.join("bootstrap-examples/file-source/bootstrap.yaml")).unwrap();
    let mut anchored = 0;
    for server in &mut bootstrap.xds_servers {
        if let ServerProtocol::File(source) = &mut server.protocol {
            source.path = root.join(&source.path);
            source.watched_directory = None;
            anchored += 1;
        }
    }
    assert_eq!(anchored, 1, "the example has one file source");
    let client = client(bootstrap);
    let name = "xdstp://config.example/envoy.config.cluster.v3.Cluster/payments";
    let mut watch = client.watch::<ClusterType>(name).unwrap();
    changed_until(&mut watch, "the example's cluster", |c| c.name() == name).await;
}
