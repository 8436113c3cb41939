//! `xdsfed publish` end to end over loopback: a testbed ADS server → the
//! publisher (the built binary) → a directory served by a minimal static
//! file server → an XdsClient whose authorities are that HTTP CDN.
//! Updates and deletions on the ADS server reach the CDN client.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{CollectionEvent, CollectionWatch};
use xdsfed::core::bootstrap::Bootstrap;
use xdsfed::core::types::ClusterType;
use xdsfed::core::types::{ClusterDiscovery, ClusterView};
use xdsfed::testbed::resources::{cluster, cluster_collection, locator};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

use common::{PATIENCE, fast_transport};

const CDN: &str = "cdn.example";
const MESH: &str = "a.example";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn cluster_name(id: &str) -> String {
    format!("xdstp://{MESH}/envoy.config.cluster.v3.Cluster/{id}")
}

fn collection_name() -> String {
    format!("xdstp://{CDN}/envoy.config.cluster.v3.ClusterCollection/mesh/all")
}

/// The collection listing `members` (ids of clusters of the mesh).
fn set_collection(origin: &Server, members: &[&str]) {
    let entries = members
        .iter()
        .map(|id| locator(&cluster_name(id)))
        .collect();
    origin
        .set_resource(&collection_name(), cluster_collection(entries))
        .unwrap();
}

fn set_cluster(origin: &Server, id: &str, service: &str) {
    let name = cluster_name(id);
    origin.set_message(&name, &cluster(&name, service)).unwrap();
}

/// The publisher, its stdout lines forwarded to a channel; killed on drop.
struct Publisher {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Publisher {
    fn start(bootstrap: &Path, dir: &Path, names: &[String]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
            .arg("publish")
            .arg("--bootstrap")
            .arg(bootstrap)
            .arg("--dir")
            .arg(dir)
            .args(names)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // Shown with the test's output when it fails.
                println!("publisher: {line}");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Publisher { child, lines }
    }

    /// Waits for a line containing `text`, returning the lines before it.
    fn wait_for(&self, text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|_| panic!("no line with {text:?} after {seen:?}"));
            if line.contains(text) {
                return seen;
            }
            seen.push(line);
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal static file host: `GET /PATH` answers the file at `root`'s
/// PATH, percent-decoded as nginx decodes it (the query ignored), with an
/// nginx-style ETag (mtime and size) and `304` to a matching
/// `If-None-Match`; `404` for anything else. One request per connection.
async fn serve_directory(root: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let root = root.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16_384 {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = answer(&root, &String::from_utf8_lossy(&request));
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

fn answer(root: &Path, request: &str) -> Vec<u8> {
    let target = request.split(' ').nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/");
    let decoded = percent_decode(path);
    let file = decoded
        .split('/')
        .filter(|s| !s.is_empty())
        .all(|s| s != "." && s != "..")
        .then(|| root.join(decoded.trim_start_matches('/')))
        .filter(|p| p.is_file());
    let Some(file) = file else {
        return b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            .to_vec();
    };
    let meta = std::fs::metadata(&file).unwrap();
    let mtime = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let etag = format!("\"{:x}-{:x}\"", mtime.as_secs(), meta.len());
    let matches = request
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("if-none-match:") && l.contains(&etag));
    if matches {
        return format!(
            "HTTP/1.1 304 Not Modified\r\netag: {etag}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        .into_bytes();
    }
    let body = std::fs::read(&file).unwrap();
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\netag: {etag}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[i + 1..i + 3]).ok())
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON bootstrap mapping both authorities to `server_json`.
fn bootstrap_json(server_json: &str) -> String {
    format!(
        r#"{{"node": {{"id": "publish-e2e"}}, "xds_servers": [{server_json}],
            "authorities": {{"{CDN}": {{"xds_servers": [{server_json}]}}, "{MESH}": {{"xds_servers": [{server_json}]}}}}}}"#
    )
}

async fn next_event(watch: &mut CollectionWatch<ClusterType>) -> CollectionEvent<ClusterView> {
    match tokio::time::timeout(PATIENCE, watch.next()).await {
        Ok(Some(event)) => event,
        other => panic!("no collection event within {PATIENCE:?}: {other:?}"),
    }
}

/// What a collection event says about member `id`: `Some(service)` for
/// an upsert (its EDS service), `None` for a removal.
fn about(event: &CollectionEvent<ClusterView>, id: &str) -> Option<Option<String>> {
    let name = cluster_name(id);
    match event {
        CollectionEvent::Upsert { name: n, resource } if **n == *name => {
            Some(Some(match resource.discovery() {
                ClusterDiscovery::Eds { service_name, .. } => service_name.to_owned(),
                _ => String::new(),
            }))
        }
        CollectionEvent::Removed { name: n } if **n == *name => Some(None),
        _ => None,
    }
}

/// Waits until the CDN client has seen every one of `expected`: member
/// `id` with EDS service `Some(service)`, or removed (`None`), in any order.
async fn members_become(
    watch: &mut CollectionWatch<ClusterType>,
    expected: &[(&str, Option<&str>)],
) {
    let mut pending: Vec<(&str, Option<&str>)> = expected.to_vec();
    while !pending.is_empty() {
        let event = next_event(watch).await;
        pending.retain(|(id, want)| about(&event, id).is_none_or(|got| got.as_deref() != *want));
    }
}

/// Publishing: what the ADS server serves reaches a CDN client through
/// the published directory and a static host, updates and deletions too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_directory_serves_updates_and_deletions_to_a_cdn_client() {
    let testbed = Testbed::start([ServerSpec::new("origin", [CDN, MESH])])
        .await
        .unwrap();
    let origin = &testbed.servers()[0];
    set_cluster(origin, "pay", "pay-v1");
    set_cluster(origin, "ledger", "ledger-v1");
    set_collection(origin, &["pay", "ledger"]);

    let work = tempfile::tempdir().unwrap();
    let www = work.path().join("www");
    let ads = format!(
        r#"{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}]}}"#,
        origin.uri()
    );
    let publisher_bootstrap = work.path().join("publisher.json");
    std::fs::write(&publisher_bootstrap, bootstrap_json(&ads)).unwrap();
    let publisher = Publisher::start(&publisher_bootstrap, &www, &[collection_name()]);
    publisher.wait_for("publishing into");
    let base = serve_directory(www.clone()).await;

    let cdn = format!(
        r#"{{"server_uri": "{base}", "channel_creds": [{{"type": "insecure"}}], "api_type": "HTTP_CDN",
            "refresh_delay": "0.05s", "request_timeout": "1s"}}"#
    );
    let consumer = XdsClient::builder(Bootstrap::from_json_str(&bootstrap_json(&cdn)).unwrap())
        .transport_options(fast_transport())
        .build()
        .unwrap();
    let mut watch = consumer
        .watch_list_collection::<ClusterType>(&collection_name())
        .unwrap();
    members_become(&mut watch, &[("pay", Some("pay-v1"))]).await;

    // An update on the ADS server reaches the CDN client.
    set_cluster(origin, "pay", "pay-v2");
    members_become(&mut watch, &[("pay", Some("pay-v2"))]).await;

    // A resource deleted on the ADS server: its file goes, the CDN answers
    // 404, and the CDN client drops it.
    origin
        .delete_resource(CDS, &cluster_name("ledger"))
        .unwrap();
    members_become(&mut watch, &[("ledger", None)]).await;
    let ledger_file = www.join(format!("{MESH}/envoy.config.cluster.v3.Cluster/ledger"));
    assert!(!ledger_file.exists());

    // A member no longer listed: the collection's file changes, and the
    // member's file goes.
    set_cluster(origin, "audit", "audit-v1");
    set_collection(origin, &["audit"]);
    members_become(&mut watch, &[("audit", Some("audit-v1")), ("pay", None)]).await;
    publisher.wait_for("removed a.example/envoy.config.cluster.v3.Cluster/pay");
    drop(publisher);
}

/// The `xdsfed …` commands of an example's header comment, `\`
/// continuations joined, split at spaces (the example quotes nothing).
fn header_commands(file: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut commands = Vec::new();
    let mut pending: Option<String> = None;
    for line in text.lines().map_while(|l| l.strip_prefix('#')) {
        let line = line.trim();
        let joined = match pending.take() {
            Some(start) => format!("{start} {line}"),
            None if line.starts_with("xdsfed ") => line.to_owned(),
            None => continue,
        };
        match joined.strip_suffix('\\') {
            Some(open) => pending = Some(open.trim_end().to_owned()),
            None => commands.push(joined.split_whitespace().map(str::to_owned).collect()),
        }
    }
    commands
}

/// `bootstrap-examples/publish/origin.yaml` runs as its header says: the
/// testbed serves the scenario, and `xdsfed publish` writes the collection
/// and both clusters it names.
#[test]
fn publish_example_writes_its_collection_and_members() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commands = header_commands(&root.join("bootstrap-examples/publish/origin.yaml"));
    let work = tempfile::tempdir().unwrap();
    let localise = |command: &Vec<String>| -> Vec<String> {
        command[1..]
            .iter()
            .map(|arg| match arg.as_str() {
                "/tmp/origin.json" => work.path().join("origin.json").display().to_string(),
                "/tmp/www" => work.path().join("www").display().to_string(),
                a if a.starts_with("bootstrap-examples/") => root.join(a).display().to_string(),
                a => a.to_owned(),
            })
            .collect()
    };
    let [testbed, publish] = [0, 1].map(|i| localise(&commands[i]));
    assert_eq!(
        (testbed[0].as_str(), publish[0].as_str()),
        ("testbed", "publish")
    );
    let mut testbed = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
        .args(&testbed)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let ready = BufReader::new(testbed.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "ready");
    assert!(ready, "the testbed prints ready");
    let args = &publish[1..];
    let bootstrap = PathBuf::from(&args[1]);
    let dir = PathBuf::from(&args[3]);
    let publisher = Publisher::start(&bootstrap, &dir, &args[4..]);
    let mut wrote: Vec<String> = Vec::new();
    while wrote.len() < 3 {
        let line = publisher.lines.recv_timeout(PATIENCE).unwrap();
        if let Some(path) = line.strip_prefix("wrote   ") {
            wrote.push(path.to_owned());
        }
    }
    wrote.sort();
    assert_eq!(
        wrote,
        [
            "a.example/envoy.config.cluster.v3.Cluster/ledger",
            "a.example/envoy.config.cluster.v3.Cluster/pay",
            "cdn.example/envoy.config.cluster.v3.ClusterCollection/mesh/all",
        ]
    );
    drop(publisher);
    let _ = testbed.kill();
    let _ = testbed.wait();
}

/// `publish` refuses an output directory others may write, and a NAME
/// without a type, as bad input (exit 2) naming the flag or the name.
#[test]
fn publish_refuses_a_shared_dir_and_an_untyped_name_with_exit_2() {
    use std::os::unix::fs::PermissionsExt as _;
    let work = tempfile::tempdir().unwrap();
    let bootstrap = work.path().join("b.json");
    let ads = r#"{"server_uri": "127.0.0.1:1", "channel_creds": [{"type": "insecure"}]}"#;
    std::fs::write(&bootstrap, bootstrap_json(ads)).unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = |dir: &Path, name: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
            .arg("publish")
            .arg("--bootstrap")
            .arg(&bootstrap)
            .arg("--dir")
            .arg(dir)
            .arg(name)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&shared, &collection_name());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--dir") && stderr.contains("writable by its group or others"),
        "{stderr}"
    );
    let (code, stderr) = run(&work.path().join("www"), "pay-v2");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("pay-v2") && stderr.contains("--resource TYPE NAME"),
        "{stderr}"
    );
}
