//! What the benchmark reads about the process: CPU time per thread group,
//! resident memory, and live heap bytes.
//!
//! CPU: the client runs on a tokio runtime whose threads are named
//! `client`, and the testbed, in the fleet's process, on one named
//! `testbed`, so `/proc/<pid>/task/*/stat` (utime + stime of each thread)
//! gives each its own CPU time; the bench's own thread (setup, snapshot
//! reading) is neither. Heap: a counting global allocator (`cap`) gives the
//! bytes live at any moment in the client's process (the testbed's are in
//! the other); the scenarios take differences.

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use cap::Cap;

#[global_allocator]
static ALLOCATOR: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// Heap bytes live now, whole process.
pub fn heap() -> usize {
    ALLOCATOR.allocated()
}

/// Clock ticks per second of `/proc` CPU times (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU time so far of the client's threads: the runtime's workers the
/// bench names `client`, and the client's own thread when it has one
/// (`XDSFED_SCALE_OWN_THREAD`).
pub fn client_cpu() -> Duration {
    cpu(None, "client") + cpu(None, xdsfed::client::client::OWN_THREAD_NAME)
}

/// CPU time so far of every thread whose name starts with `prefix`, in
/// process `pid` (this one when `None`).
pub fn cpu(pid: Option<u32>, prefix: &str) -> Duration {
    let process = pid.map_or_else(|| "self".to_owned(), |p| p.to_string());
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{process}/task")) else {
        return Duration::ZERO;
    };
    let mut ticks = 0u64;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        ticks += field(14).unwrap_or(0) + field(15).unwrap_or(0);
    }
    Duration::from_secs_f64(ticks as f64 / TICKS)
}

/// Waits until the client's threads are idle (under 4 % of a core over
/// half a second), for at most 30 s; returns how long that took. A
/// scenario can end with work still queued (LEDS churn at the design load
/// runs seconds behind its updates), which would otherwise count in the
/// heap read after it and in the next scenario's CPU.
pub fn settle_client(rt_client: &Runtime) -> Duration {
    const WINDOW: Duration = Duration::from_millis(500);
    const LIMIT: Duration = Duration::from_secs(30);
    let start = Instant::now();
    loop {
        let before = client_cpu();
        rt_client.block_on(async { tokio::time::sleep(WINDOW).await });
        let busy = client_cpu().saturating_sub(before);
        if busy < WINDOW / 25 || start.elapsed() > LIMIT {
            return start.elapsed();
        }
    }
}

/// A `/proc/self/status` figure in bytes (`VmRSS`, `VmHWM`).
fn status_kb(key: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resident memory now, bytes.
pub fn rss() -> usize {
    status_kb("VmRSS:")
}

/// Peak resident memory so far, bytes.
pub fn peak_rss() -> usize {
    status_kb("VmHWM:")
}

/// The 1-minute load average, recorded next to every figure.
pub fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU of the client's threads and of the testbed's (in the fleet's
/// process) between two moments.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    fleet: u32,
    client: Duration,
    testbed: Duration,
}

impl CpuMark {
    pub fn now(fleet: u32) -> Self {
        Self {
            fleet,
            client: client_cpu(),
            testbed: cpu(Some(fleet), "testbed"),
        }
    }

    /// (client, testbed) CPU since `self`.
    pub fn since(self) -> (Duration, Duration) {
        let now = Self::now(self.fleet);
        (
            now.client.saturating_sub(self.client),
            now.testbed.saturating_sub(self.testbed),
        )
    }
}
