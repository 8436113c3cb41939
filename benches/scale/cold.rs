//! Scenarios 1, 2, 5 and 6: cold start to the first ready snapshot, and
//! what the client holds once there.

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use xdsfed::graph::ConfigGraph;

use crate::fleet::{self, Encoded, Shape};
use crate::probe::{self, CpuMark};
use crate::remote::Fleet;

/// What one cold start measured.
#[derive(Debug, Clone)]
pub struct Cold {
    pub shape: Shape,
    pub ready: Duration,
    pub floor: Duration,
    pub client_cpu: Duration,
    pub testbed_cpu: Duration,
    /// The client process's peak RSS (the testbed is in another).
    pub peak_rss: usize,
    /// Heap the client and graph hold once the servers are gone.
    pub client_heap: usize,
    pub load: f64,
    pub wire_bytes: usize,
}

/// A warm client and graph, and the servers, for the churn scenario.
pub struct Warm {
    pub fleet: Fleet,
    pub graph: ConfigGraph,
    pub client: xdsfed::client::client::XdsClient,
}

/// Loads the servers (in the fleet's process), starts a client and its
/// graph, and waits for the first snapshot holding every cluster with all
/// its endpoints.
pub fn start(rt_client: &Runtime, shape: Shape) -> (Cold, Warm) {
    let encoded = Encoded::of(&shape);
    let floor = encoded.decode_floor();
    let wire_bytes = encoded.bytes();
    drop(encoded);
    let fleet = Fleet::start(&shape);
    let mark = CpuMark::now(fleet.pid());
    let start = Instant::now();
    let (client, graph, ready) = rt_client.block_on(async {
        let client = fleet::client(&fleet.uris, &shape);
        let mut graph = fleet::graph(&client, &shape);
        let mut snapshot = graph.ready().await.expect("graph runs");
        // Ready can come before the last endpoints of a large glob are fed:
        // the figure is the first snapshot that holds everything.
        while !fleet::complete(&snapshot, &shape) {
            snapshot = graph.changed().await.expect("graph runs");
        }
        (client, graph, start.elapsed())
    });
    let (client_cpu, testbed_cpu) = mark.since();
    let cold = Cold {
        shape,
        ready,
        floor,
        client_cpu,
        testbed_cpu,
        peak_rss: probe::peak_rss(),
        client_heap: 0,
        load: probe::load(),
        wire_bytes,
    };
    let warm = Warm {
        fleet,
        graph,
        client,
    };
    (cold, warm)
}

/// Scenario 5: the heap the client and graph hold. The servers are shut
/// down (the streams end, so nothing is in flight) and the client's
/// threads finish what they had queued; what is left above the
/// baseline taken before anything was loaded is the client's cache, its
/// watch channels and the graph's engine and snapshot. It includes the
/// ambient error each resource then carries (the servers are gone).
///
/// The graph and client are then dropped, and the client's threads left to
/// finish the unsubscriptions that follow, so that the next scenario runs
/// alone. Returns the heap and how long the drop took to idle threads.
pub fn client_heap(rt_client: &Runtime, warm: Warm, baseline: usize) -> (usize, Duration) {
    let Warm {
        fleet,
        graph,
        client,
    } = warm;
    fleet.stop();
    rt_client.block_on(async { tokio::time::sleep(Duration::from_secs(2)).await });
    probe::settle_client(rt_client);
    let heap = probe::heap().saturating_sub(baseline);
    // The heap census (docs/performance.md, "LEDS members held plain"):
    // with `SCALE_EXIT_HELD=n` the process ends at its n-th reading, so
    // that a heap profiler lists everything held then as never freed.
    {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if std::env::var("SCALE_EXIT_HELD")
            .ok()
            .and_then(|v| v.parse().ok())
            == Some(call)
        {
            std::process::exit(0);
        }
    }
    let start = Instant::now();
    rt_client.block_on(async move {
        drop(graph);
        drop(client);
    });
    probe::settle_client(rt_client);
    (heap, start.elapsed())
}

/// One cold start measured end to end, memory included; servers gone after.
pub fn measure(rt_client: &Runtime, shape: Shape) -> Cold {
    let baseline = probe::heap();
    let (mut cold, warm) = start(rt_client, shape);
    cold.client_heap = client_heap(rt_client, warm, baseline).0;
    cold
}
