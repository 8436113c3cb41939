//! Scenario 3: from the ready state, every ClusterLoadAssignment (EDS:
//! 10 000 a second) or every endpoint resource (LEDS: 100 000 a second)
//! changes once every 10 s, spread evenly, for 60 s. The load generator
//! (it builds each resource and stores it in the testbed) runs in the
//! fleet's process on a thread of its own named `updater`, whose CPU is
//! reported apart from the testbed's servers'; the bench's thread reads
//! snapshots and times sampled updates from `set_message` to the first
//! snapshot that has them.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::runtime::Runtime;
use xdsfed::graph::{ClusterEndpoints, Snapshot};

use crate::cold::Warm;
use crate::fleet::{self, Mode, Shape};
use crate::probe::{self, CpuMark};
use crate::remote::{self, Pending};

pub const PERIOD: Duration = Duration::from_secs(10);
pub const LENGTH: Duration = Duration::from_secs(60);
const TICK: Duration = Duration::from_millis(10);
/// One update in this many is timed.
const SAMPLE_EVERY: usize = 100;

#[derive(Debug, Clone)]
pub struct Churn {
    pub mode: Mode,
    /// Resources to set per second: each once every `PERIOD`.
    pub target_rate: f64,
    /// Resources set per second, as achieved.
    pub rate: f64,
    pub client_share: f64,
    pub testbed_share: f64,
    /// The load generator's, which sets the resources in the testbed.
    pub updater_share: f64,
    pub latencies: Vec<Duration>,
    pub rss: Vec<usize>,
    /// Live heap of the client's process, sampled with `rss`: tells a
    /// growing heap from a fragmenting allocator.
    pub heap: Vec<usize>,
    pub load: f64,
}

/// Resources that change per cluster: its assignment (EDS), or each of
/// its endpoints (LEDS: 100 000 endpoint resources a second).
fn per_cluster(mode: Mode) -> usize {
    match mode {
        Mode::Eds | Mode::Listener => 1,
        Mode::Leds => fleet::ENDPOINTS,
    }
}

pub fn run(rt_client: &Runtime, warm: &mut Warm, shape: Shape) -> Churn {
    let mark = CpuMark::now(warm.fleet.pid());
    let start = Instant::now();
    warm.fleet.begin_churn();
    let pending = Arc::clone(&warm.fleet.pending);
    let (latencies, (rss, heap)) = rt_client.block_on(watch(warm, shape, pending, start));
    let (sent, updater_cpu) = warm.fleet.end_churn();
    let elapsed = start.elapsed().as_secs_f64();
    let (client, testbed) = mark.since();
    Churn {
        mode: shape.mode,
        target_rate: (shape.clusters * per_cluster(shape.mode)) as f64 / PERIOD.as_secs_f64(),
        rate: sent as f64 / elapsed,
        client_share: client.as_secs_f64() / elapsed,
        testbed_share: testbed.as_secs_f64() / elapsed,
        updater_share: updater_cpu.as_secs_f64() / elapsed,
        latencies,
        rss,
        heap,
        load: probe::load(),
    }
}

/// The fleet's side: runs the load generator on its own `updater` thread
/// until `LENGTH` is over; returns how many resources it set and its CPU.
pub fn generate(servers: Vec<Arc<xdsfed::testbed::Server>>, shape: Shape) -> (usize, Duration) {
    let per_tick = shape.clusters * per_cluster(shape.mode) * TICK.as_millis() as usize
        / PERIOD.as_millis() as usize;
    let updater = std::thread::Builder::new()
        .name("updater".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            let sent = rt.block_on(update(servers, shape, per_tick));
            // Read before the thread ends and leaves /proc.
            (sent, probe::cpu(None, "updater"))
        })
        .expect("the updater thread starts");
    updater.join().unwrap_or_default()
}

/// Sets `per_tick` resources every tick, round robin over the clusters,
/// until `LENGTH` is over; returns how many it set.
async fn update(
    servers: Vec<Arc<xdsfed::testbed::Server>>,
    shape: Shape,
    per_tick: usize,
) -> usize {
    let start = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut next = 0usize;
    let mut sent = 0usize;
    while start.elapsed() < LENGTH {
        tick.tick().await;
        for _ in 0..per_tick {
            // A cluster's resources change one after the other.
            let k = per_cluster(shape.mode);
            let (unit, e) = (next / k, next % k);
            let i = unit % shape.clusters;
            let round = unit / shape.clusters;
            let port = 10_000 + (round % 50_000) as u32 + 1;
            let server = &servers[(i % shape.authorities) % shape.servers];
            if e == 0 && unit % SAMPLE_EVERY == 0 {
                remote::report_sample(i, port);
            }
            let stored = match shape.mode {
                Mode::Eds | Mode::Listener => {
                    let cla = fleet::assignment(&shape, i, port);
                    server.set_message(&cla.cluster_name, &cla)
                }
                Mode::Leds => server.set_message(
                    &fleet::member_name(&shape, i, e),
                    &fleet::endpoint(i, e, port),
                ),
            };
            sent += usize::from(stored.is_ok());
            next += 1;
        }
    }
    sent
}

/// Reads snapshots until the churn is over (and a little after), timing
/// the sampled updates and sampling RSS every second.
async fn watch(
    warm: &mut Warm,
    shape: Shape,
    pending: Pending,
    start: Instant,
) -> (Vec<Duration>, (Vec<usize>, Vec<usize>)) {
    let mut latencies = Vec::new();
    let mut rss = Vec::new();
    let mut heap = Vec::new();
    let mut next_rss = start;
    let end = start + LENGTH + Duration::from_secs(2);
    while Instant::now() < end {
        let changed = tokio::time::timeout(Duration::from_millis(200), warm.graph.changed()).await;
        let seen_at = SystemTime::now();
        if let Ok(Ok(snapshot)) = changed {
            let mut p = pending.lock().expect("not poisoned");
            p.retain(|i, (port, set)| {
                if port_of(&snapshot, &shape, *i) == Some(*port) {
                    latencies.push(seen_at.duration_since(*set).unwrap_or_default());
                    false
                } else {
                    true
                }
            });
        }
        if Instant::now() >= next_rss {
            rss.push(probe::rss());
            heap.push(probe::heap());
            next_rss += Duration::from_secs(1);
        }
    }
    (latencies, (rss, heap))
}

/// The port of cluster `i`'s first endpoint.
fn port_of(snapshot: &Snapshot, shape: &Shape, i: usize) -> Option<u32> {
    let cluster = snapshot.cluster(&fleet::cluster_name(shape, i))?;
    let ClusterEndpoints::Eds {
        assignment: Some(a),
        ..
    } = &cluster.endpoints
    else {
        return None;
    };
    a.value.endpoints().next().map(|e| u32::from(e.port))
}
