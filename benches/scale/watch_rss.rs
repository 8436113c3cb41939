//! Peak RSS of `xdsfed watch --listener`, a process of its own, following
//! 1 listener → 1 route configuration of N routes → N EDS clusters × 10
//! endpoints served by the fleet (another process): the memory an operator
//! sees, binary, runtime and output included.
//!
//! The command prints the snapshot's tree when the graph is complete; its
//! first line names the number of resources, so the bench reads lines
//! until a snapshot holds all 2 + 2N of them, then reads the process's
//! high-water mark (`VmHWM`) from /proc and stops it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fleet::{self, Mode, Shape};
use crate::remote::Fleet;

/// How long the command may take to show the whole graph.
const READY_WAIT: Duration = Duration::from_secs(600);

/// What one run of the command showed.
pub struct WatchRss {
    /// From the command's start to its complete snapshot on stdout.
    pub ready: Duration,
    /// Its peak resident set size, in bytes.
    pub peak_rss: usize,
}

/// Runs `xdsfed watch --listener` against a fleet of `clusters` clusters.
pub fn measure(clusters: usize) -> WatchRss {
    let shape = Shape {
        clusters,
        authorities: 1,
        servers: 1,
        mode: Mode::Listener,
    };
    let fleet = Fleet::start(&shape);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bootstrap = dir.path().join("bootstrap.json");
    let json = format!(
        r#"{{"node": {{"id": "watch-rss"}},
            "xds_servers": [{{"server_uri": "{uri}", "channel_creds": [{{"type": "insecure"}}]}}],
            "authorities": {{"{auth}": {{}}}}}}"#,
        uri = fleet.uris[0],
        auth = fleet::authority(0),
    );
    std::fs::File::create(&bootstrap)
        .and_then(|mut f| f.write_all(json.as_bytes()))
        .expect("the bootstrap is written");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xdsfed"))
        .args(["watch", "--bootstrap"])
        .arg(&bootstrap)
        .args(["--listener", &fleet::listener_name()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("xdsfed watch starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let pid = child.id();
    let want = 2 + 2 * clusters;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if resources_in(&line).is_some_and(|n| n >= want) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(READY_WAIT)
        .expect("xdsfed watch shows the whole graph in time");
    let ready = start.elapsed();
    let peak_rss = vm_hwm(pid).expect("the command's /proc status");
    child.kill().ok();
    child.wait().ok();
    fleet.stop();
    WatchRss { ready, peak_rss }
}

/// The resource count of a snapshot's first line
/// (`HH:MM:SS.mmm snapshot G · N resources · ok`).
fn resources_in(line: &str) -> Option<usize> {
    let (_, after) = line.split_once(" snapshot ")?;
    let mut parts = after.split(" · ");
    parts.next()?;
    parts.next()?.strip_suffix(" resources")?.parse().ok()
}

/// `VmHWM` of process `pid`, in bytes.
fn vm_hwm(pid: u32) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
