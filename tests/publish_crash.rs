//! The published directory survives SIGKILL: `xdsfed publish` is killed
//! at seeded random moments while the testbed changes its clusters and
//! their list collection every few milliseconds, and after each kill every
//! file under the directory is whole (a `DiscoveryResponse` holding the
//! one resource its path names, at the version its bytes give); the only
//! other files are `.…tmp` temporaries, which the next start deletes.

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::Message as _;
use xdsfed::core::publish::{content_version, is_temp_file_name, temp_file_name};
use xdsfed::testbed::resources::{cluster, cluster_collection, locator};
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const CLUSTERS: usize = 20;
const KILLS: usize = 60;
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const CDS_LIST: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";

fn cluster_name(i: usize) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/c{i}")
}

fn collection_name() -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.ClusterCollection/all")
}

/// Sets cluster `i` to a copy that differs with `generation`, and every
/// tenth generation lists one cluster fewer or more in the collection.
fn update(server: &Server, i: usize, generation: u64) {
    let name = cluster_name(i);
    let mut copy = cluster(&name, &format!("c{i}"));
    copy.alt_stat_name = format!("g{generation}").repeat(50);
    server.set_message(&name, &copy).unwrap();
    if generation.is_multiple_of(10) {
        let listed = CLUSTERS - (generation / 10 % 2) as usize;
        let entries = (0..listed).map(|i| locator(&cluster_name(i))).collect();
        server
            .set_resource(&collection_name(), cluster_collection(entries))
            .unwrap();
    }
}

/// A small deterministic generator (xorshift64*), so a failure can be
/// replayed with the same kill times.
struct Seeded(u64);

impl Seeded {
    fn next_in(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        low + self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % (high - low + 1)
    }
}

/// Every regular file under `dir`, recursively; anything else fails.
fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files_under(&entry.path(), found);
        } else {
            assert!(kind.is_file(), "{}: {kind:?}", entry.path().display());
            found.push(entry.path());
        }
    }
}

/// Checks that `file` is a whole published file: a DiscoveryResponse of
/// the type its path names, holding one resource, at its content version.
fn assert_whole(root: &Path, file: &Path) {
    let relative = file.strip_prefix(root).unwrap().to_str().unwrap();
    let bytes = std::fs::read(file).unwrap();
    let response = DiscoveryResponse::decode(bytes.as_slice())
        .unwrap_or_else(|e| panic!("{relative}: not a DiscoveryResponse: {e}"));
    let [resource] = response.resources.as_slice() else {
        panic!("{relative}: {} resources", response.resources.len());
    };
    let expected_type = if relative.contains("ClusterCollection") {
        CDS_LIST
    } else {
        let cluster = Cluster::decode(resource.value.as_slice())
            .unwrap_or_else(|e| panic!("{relative}: not a cluster: {e}"));
        assert!(relative.ends_with(cluster.name.rsplit('/').next().unwrap()));
        CDS
    };
    assert_eq!(response.type_url, expected_type, "{relative}");
    assert_eq!(
        response.version_info,
        content_version(expected_type, &resource.value),
        "{relative}"
    );
}

/// Runs the publisher until its first line, returns it and the child.
fn start(bootstrap: &Path, dir: &Path) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
        .arg("publish")
        .arg("--bootstrap")
        .arg(bootstrap)
        .arg("--dir")
        .arg(dir)
        .arg(collection_name())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    // The rest of stdout is drained, so the publisher never blocks on it.
    std::thread::spawn(move || for _ in stdout.lines().map_while(Result::ok) {});
    (child, first)
}

/// Publishing: after SIGKILL at any moment the directory holds only whole
/// files and recognisable temporaries, and the next start deletes those.
#[test]
fn published_files_stay_whole_across_kills_and_temporaries_are_cleaned() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let testbed = runtime
        .block_on(Testbed::start([ServerSpec::new("cloud", [CLOUD])]))
        .unwrap();
    let server = Arc::clone(testbed.server("cloud").unwrap());
    for i in 0..CLUSTERS {
        update(&server, i, 0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let updater = runtime.spawn({
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        async move {
            let mut generation = 1u64;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(3)).await;
                update(&server, generation as usize % CLUSTERS, generation);
                generation += 1;
            }
        }
    });

    let work = tempfile::tempdir().unwrap();
    let server_json = format!(
        r#"{{"server_uri": "{}", "channel_creds": [{{"type": "insecure"}}]}}"#,
        server.addr()
    );
    let bootstrap = work.path().join("bootstrap.json");
    std::fs::write(
        &bootstrap,
        format!(
            r#"{{"xds_servers": [{server_json}], "node": {{"id": "crash"}}, "authorities": {{"{CLOUD}": {{"xds_servers": [{server_json}]}}}}}}"#
        ),
    )
    .unwrap();
    let www = work.path().join("www");
    // A temporary an earlier run left, deep in the tree.
    let planted = www.join(format!("{CLOUD}/envoy.config.cluster.v3.Cluster"));
    std::fs::create_dir_all(&planted).unwrap();
    let planted = planted.join(temp_file_name("c3", 0x0123_4567_89ab_cdef));
    std::fs::write(&planted, b"partial").unwrap();
    let mut leftovers = vec![planted];

    let mut rng = Seeded(0x5eed_0fc0_ffee);
    let mut most_files = 0;
    for kill in 0..KILLS {
        let (mut child, first) = start(&bootstrap, &www);
        assert!(first.starts_with("publishing into"), "{first}");
        for temp in leftovers.drain(..) {
            assert!(
                !temp.exists(),
                "after kill {kill}: {} was not cleaned",
                temp.display()
            );
        }
        std::thread::sleep(Duration::from_millis(rng.next_in(10, 250)));
        child.kill().unwrap();
        child.wait().unwrap();

        let mut files = Vec::new();
        files_under(&www, &mut files);
        let (temps, published): (Vec<_>, Vec<_>) = files.into_iter().partition(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_temp_file_name)
        });
        for file in &published {
            assert_whole(&www, file);
        }
        most_files = most_files.max(published.len());
        leftovers = temps;
    }
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(updater).unwrap();
    assert_eq!(
        most_files,
        CLUSTERS + 1,
        "some runs lived long enough to publish every cluster and the collection"
    );
}
