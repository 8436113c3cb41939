//! The state directory survives SIGKILL: `xdsfed watch --state-dir D` is
//! killed a hundred times at seeded random moments while the testbed
//! changes its clusters every few milliseconds, and after each kill every
//! record in D is whole and holds a version the testbed sent and the
//! client ACKed, or sent in the response the kill left unanswered (the
//! client records what it accepts before its ACK is on the wire).

// Tests state their expectations with unwrap, expect and panic (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::resources::cluster;
use xdsfed::client::state_dir::read_records;
use xdsfed::testbed::recording::Message;
use xdsfed::testbed::{Server, ServerSpec, Testbed};

const CLOUD: &str = "cloud.example";
const CLUSTERS: usize = 20;
const KILLS: usize = 100;

fn cluster_name(i: usize) -> String {
    format!("xdstp://{CLOUD}/envoy.config.cluster.v3.Cluster/c{i}")
}

/// Sets cluster `i` to a copy that differs with `generation`: a new version.
fn set_cluster(server: &Server, i: usize, generation: u64) {
    let name = cluster_name(i);
    let service = format!("xdstp://{CLOUD}/envoy.config.endpoint.v3.ClusterLoadAssignment/c{i}");
    let mut copy = cluster(&name, &service);
    copy.alt_stat_name = format!("g{generation}");
    server.set_message(&name, &copy).unwrap();
}

/// (name, version) pairs the client may hold: a delta request echoing a
/// response's nonce without an error detail ACKs every resource in it; a
/// response no request answered was the stream's last, cut by the kill
/// between the client accepting it (and recording it) and its ACK leaving
/// the process, which no ordering on the client's side can close. A NACKed
/// response's resources are never allowed.
fn acked(server: &Server) -> HashSet<(String, String)> {
    let mut acked = HashSet::new();
    for stream in server.recording().streams() {
        let mut sent: HashMap<&str, Vec<(String, String)>> = HashMap::new();
        let mut answered: HashSet<&str> = HashSet::new();
        for event in &stream.events {
            match &event.message {
                Message::DeltaResponse(r) => {
                    let carried = r
                        .resources
                        .iter()
                        .map(|res| (res.name.clone(), res.version.clone()))
                        .collect();
                    sent.insert(r.nonce.as_str(), carried);
                }
                Message::DeltaRequest(r) => {
                    answered.insert(r.response_nonce.as_str());
                    if r.error_detail.is_none()
                        && let Some(carried) = sent.get(r.response_nonce.as_str())
                    {
                        acked.extend(carried.iter().cloned());
                    }
                }
                _ => {}
            }
        }
        if stream.closed.is_some() {
            for (nonce, carried) in &sent {
                if !answered.contains(nonce) {
                    acked.extend(carried.iter().cloned());
                }
            }
        }
    }
    acked
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

#[test]
fn records_stay_whole_and_acked_across_a_hundred_kills() {
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
        set_cluster(&server, i, 0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let updater = runtime.spawn({
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        async move {
            let mut generation = 1u64;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(3)).await;
                set_cluster(&server, generation as usize % CLUSTERS, generation);
                generation += 1;
            }
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let uri = server.addr().to_string();
    let server_json =
        format!(r#"{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}"#);
    let bootstrap = dir.path().join("bootstrap.json");
    std::fs::write(
        &bootstrap,
        format!(
            r#"{{"xds_servers": [{server_json}], "node": {{"id": "crash"}}, "authorities": {{"{CLOUD}": {{"xds_servers": [{server_json}]}}}}}}"#
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let mut rng = Seeded(0x5eed_0fc0_ffee);
    let mut most_records = 0;
    for kill in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
            .args(["watch", "--wildcard", "cluster", "--bootstrap"])
            .arg(&bootstrap)
            .arg("--state-dir")
            .arg(&state)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.next_in(20, 200)));
        child.kill().unwrap();
        child.wait().unwrap();

        let scan = read_records(&state, 1 << 20).unwrap();
        assert!(
            scan.problems.is_empty(),
            "after kill {kill}: {:?}",
            scan.problems
        );
        most_records = most_records.max(scan.records.len());
        // The client's last ACKs may still be on their way to the server's
        // recording when the process dies: wait for them, within bounds.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let acked = acked(&server);
            let missing: Vec<_> = scan
                .records
                .iter()
                .map(|r| (r.record.name.to_string(), r.record.version.to_string()))
                .filter(|pair| !acked.contains(pair))
                .collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "after kill {kill}: records at versions the client never ACKed: {missing:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for stored in &scan.records {
            assert!(
                stored.record.server.starts_with(&uri),
                "the record names its server: {}",
                stored.record.server
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(updater).unwrap();
    assert_eq!(
        most_records, CLUSTERS,
        "some runs lived long enough to persist every cluster"
    );
}
