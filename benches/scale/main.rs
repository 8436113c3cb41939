//! The scale benchmark: xDS TP1's design load (a million endpoints,
//! churning) on the real client, graph and testbed over loopback delta ADS.
//!
//! Six scenarios, each figure printed beside its target and the decode
//! floor (prost decode of the same bytes, measured in the same run):
//! 1. cold start, 100 000 clusters × 10 endpoints over two authorities on
//!    two servers (EDS);
//! 2. the same through LEDS (1 000 000 `LbEndpoint` resources);
//! 3. churn from the ready state, EDS and LEDS, 60 s each (and LEDS at a
//!    tenth of the load, where the client keeps up);
//! 4. ingest in process of 1 000 … 1 000 000 clusters (each round in a
//!    fresh process, module `ingest`);
//! 5. heap held by cache + graph per cluster and per endpoint (counting
//!    allocator);
//! 6. 100 authorities over 10 servers;
//! 7. peak RSS of `xdsfed watch --listener`, a process of its own, on 1
//!    listener → N routes → N clusters × 10 endpoints (module `watch_rss`).
//!
//! It also writes docs/scale.svg: cold start, client CPU and heap from
//! 1 000 to 1 000 000 endpoints.
//!
//! Run: `cargo bench --bench scale` (all seven; `-- curve|eds|leds|leds-tenth|ingest|authorities|watch`
//! runs only those groups, for profiling; `SCALE_EXIT_HELD=n` ends the process
//! where it reads the heap for the n-th time, for a heap profiler's census,
//! docs/performance.md; `XDSFED_SCALE_OWN_THREAD=1` runs the client on a
//! thread of its own, `XdsClientBuilder::own_thread`, not on the bench's
//! runtime). The testbed and its load generator
//! run in a child process (module `remote`), so this process's memory and CPU
//! are the client's and the graph's; the client runs on a runtime whose
//! threads are named `client` (or on its own thread), and CPU time is read
//! per thread from /proc (module `probe`). `benches/scale/cold-only.sh`
//! runs a group's cold start alone; `benches/scale/instructions.sh`
//! counts the client's instructions per endpoint update at a tenth under
//! callgrind, for machines without hardware counters.

// Helpers of tests and benchmarks state their expectations with unwrap,
// expect and panic, like the tests themselves (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod chart;
mod churn;
mod cold;
mod fleet;
mod ingest;
mod probe;
mod remote;
mod watch_rss;

use std::time::Duration;

use tokio::runtime::{Builder, Runtime};

use cold::Cold;
use fleet::{ENDPOINTS, Mode, Shape};

pub(crate) fn runtime(name: &str) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn mb(bytes: usize) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

/// One line of the table: measure, result, target, floor, load.
fn row(measure: &str, result: &str, target: &str, floor: &str, load: f64) {
    println!("| {measure} | {result} | {target} | {floor} | {load:.1} |");
}

fn two_servers(clusters: usize, mode: Mode) -> Shape {
    Shape {
        clusters,
        authorities: 2,
        servers: 2,
        mode,
    }
}

fn print_cold(label: &str, c: &Cold) {
    let ratio = c.ready.as_secs_f64() / c.floor.as_secs_f64();
    row(
        &format!("{label}: time to the first complete snapshot"),
        &format!("{} ({ratio:.1}× floor)", ms(c.ready)),
        "≤ 2 s, ≤ 10× floor",
        &format!("{} ({})", ms(c.floor), mb(c.wire_bytes)),
        c.load,
    );
    row(
        &format!("{label}: CPU, client / testbed"),
        &format!("{} / {}", ms(c.client_cpu), ms(c.testbed_cpu)),
        "",
        "",
        c.load,
    );
    row(
        &format!("{label}: client process peak RSS (testbed in another)"),
        &mb(c.peak_rss),
        "",
        "",
        c.load,
    );
}

fn print_churn(c: &churn::Churn) {
    let mut l = c.latencies.clone();
    l.sort();
    let at = |q: f64| {
        l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let label = match c.mode {
        Mode::Eds | Mode::Listener => "churn EDS (ClusterLoadAssignments/s)",
        Mode::Leds => "churn LEDS (LbEndpoints/s)",
    };
    let target = format!("{:.0}/s", c.target_rate);
    row(label, &format!("{:.0}/s set", c.rate), &target, "", c.load);
    row(
        &format!("{label}: CPU share of one core, client / testbed / load generator"),
        &format!(
            "{:.0} % / {:.0} % / {:.0} %",
            c.client_share * 100.0,
            c.testbed_share * 100.0,
            c.updater_share * 100.0
        ),
        "client ≤ 25 %",
        "",
        c.load,
    );
    row(
        &format!(
            "{label}: update → snapshot p50 / p99 / max ({} sampled)",
            l.len()
        ),
        &format!(
            "{} / {} / {}",
            ms(at(0.5)),
            ms(at(0.99)),
            ms(l.last().copied().unwrap_or_default())
        ),
        "p99 ≤ 50 ms",
        "",
        c.load,
    );
    let megabytes = |samples: &[usize]| -> String {
        let each: Vec<String> = samples
            .iter()
            .map(|r| format!("{:.0}", *r as f64 / 1e6))
            .collect();
        each.join(" ")
    };
    row(
        &format!("{label}: RSS each second (MB)"),
        &megabytes(&c.rss),
        "flat after warm-up",
        "",
        c.load,
    );
    row(
        &format!("{label}: live heap each second, client process (MB)"),
        &megabytes(&c.heap),
        "",
        "",
        c.load,
    );
}

/// Scenarios 1, 3 (EDS or LEDS) and the memory of 5, on one warm client.
fn design_load(client: &Runtime, mode: Mode) -> Cold {
    let shape = two_servers(100_000, mode);
    let baseline = probe::heap();
    let (mut cold, mut warm) = cold::start(client, shape);
    print_cold(&format!("{mode:?} 100 000 × 10"), &cold);
    let churn = churn::run(client, &mut warm, shape);
    print_churn(&churn);
    let (heap, released) = cold::client_heap(client, warm, baseline);
    cold.client_heap = heap;
    print_release(&format!("{mode:?} 100 000 × 10"), released);
    cold
}

/// Scenario 3 through LEDS at a tenth of the design load (100 000 endpoint
/// resources, 10 000 changes a second): the client's cost per endpoint
/// update, and its heap and RSS, when it keeps up.
fn tenth_of_leds(client: &Runtime) {
    let shape = two_servers(10_000, Mode::Leds);
    let (cold, mut warm) = cold::start(client, shape);
    print_cold("Leds 10 000 × 10 (a tenth)", &cold);
    let churn = churn::run(client, &mut warm, shape);
    print_churn(&churn);
    let per_update = churn.client_share / churn.rate;
    row(
        "churn LEDS at a tenth: client CPU per endpoint update",
        &format!("{:.1} µs", per_update * 1e6),
        "≤ 5 µs",
        "",
        churn.load,
    );
    let (_, released) = cold::client_heap(client, warm, 0);
    print_release("Leds 10 000 × 10 (a tenth)", released);
}

/// How long dropping a scenario's graph and client took, to idle threads:
/// the next scenario starts after it.
fn print_release(label: &str, released: Duration) {
    row(
        &format!("{label}: graph and client dropped, client threads idle after"),
        &ms(released),
        "",
        "",
        probe::load(),
    );
}

/// Scenario 5: the EDS rows, and the LEDS ones when that group ran too.
fn print_memory(eds: &Cold, leds: Option<&Cold>) {
    let per_cluster = eds.client_heap as f64 / eds.shape.clusters as f64;
    let endpoints = (eds.shape.clusters * ENDPOINTS) as f64;
    row(
        "heap of cache + graph, EDS, after churn",
        &mb(eds.client_heap),
        "",
        "",
        eds.load,
    );
    row(
        "  per cluster (with its assignment of 10 endpoints)",
        &format!("{per_cluster:.0} B"),
        "≤ 4 KB",
        "",
        eds.load,
    );
    let Some(leds) = leds else {
        return;
    };
    row(
        "heap of cache + graph, LEDS, after churn",
        &mb(leds.client_heap),
        "",
        "",
        leds.load,
    );
    let per_endpoint = leds.client_heap.saturating_sub(eds.client_heap) as f64 / endpoints;
    row(
        "  per endpoint as its own resource (LEDS − EDS) / 1 000 000",
        &format!("{per_endpoint:.0} B"),
        "≤ 400 B",
        "",
        leds.load,
    );
}

fn ingest_rows() {
    let mut last = None;
    for count in [1_000, 10_000, 100_000, 1_000_000] {
        let i = ingest::run(count);
        let growth = last.map_or(String::new(), |p: ingest::Ingest| {
            format!(
                ", {:.1}× the previous",
                i.time.as_secs_f64() / p.time.as_secs_f64()
            )
        });
        row(
            &format!("ingest in process, {count} clusters"),
            &format!(
                "{}{growth} ({:.1}× floor; median of {} processes, {}–{})",
                ms(i.time),
                i.time.as_secs_f64() / i.floor.as_secs_f64(),
                ingest::rounds(count),
                ms(i.fastest),
                ms(i.slowest),
            ),
            if count == 1_000_000 {
                "≤ 12× the 100 000 cost"
            } else {
                "linear"
            },
            &ms(i.floor),
            probe::load(),
        );
        last = Some(i);
    }
}

fn chart(points: &[Cold]) {
    let series = |f: &dyn Fn(&Cold) -> f64| -> Vec<(f64, f64)> {
        points
            .iter()
            .map(|c| ((c.shape.clusters * ENDPOINTS) as f64, f(c)))
            .collect()
    };
    let panels = [
        chart::Panel {
            title: "cold start",
            unit: "s",
            points: series(&|c| c.ready.as_secs_f64()),
        },
        chart::Panel {
            title: "client CPU",
            unit: "s",
            points: series(&|c| c.client_cpu.as_secs_f64().max(0.01)),
        },
        chart::Panel {
            title: "client heap",
            unit: "MB",
            points: series(&|c| c.client_heap as f64 / 1e6),
        },
    ];
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scale.svg");
    match std::fs::write(path, chart::svg(&panels)) {
        Ok(()) => println!("chart written to {path}"),
        Err(e) => println!("chart not written to {path}: {e}"),
    }
}

/// Scenario 7: `xdsfed watch --listener`'s peak RSS, beside its targets.
fn watch_rows() {
    for (clusters, target) in [
        (1_000, "≤ 16 MB"),
        (10_000, "≤ 90 MB"),
        (100_000, "≤ 600 MB"),
    ] {
        let w = watch_rss::measure(clusters);
        row(
            &format!(
                "`xdsfed watch --listener`, 1 listener → {clusters} routes → {clusters} clusters × 10: peak RSS; time to the whole graph on stdout"
            ),
            &format!("{}; {}", mb(w.peak_rss), ms(w.ready)),
            target,
            "",
            probe::load(),
        );
    }
}

/// Whether scenario group `name` runs: all of them without arguments, or
/// those named (`cargo bench --bench scale -- eds`, for profiling one).
fn wanted(name: &str) -> bool {
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    names.is_empty() || names.iter().any(|n| n == name)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == ingest::ONCE) {
        ingest::serve_once(&args[at + 1..]);
        return;
    }
    if let Some(at) = args.iter().position(|a| a == remote::SERVE) {
        remote::serve(&args[at + 1..]);
        return;
    }
    let client = runtime("client");
    if fleet::own_thread() {
        println!("The client runs on a thread of its own (XDSFED_SCALE_OWN_THREAD=1).\n");
    }
    println!("| measure | result | target | decode floor | load (1 min) |");
    println!("| --- | --- | --- | --- | --- |");
    let mut curve = Vec::new();
    if wanted("curve") {
        for clusters in [100, 1_000, 10_000] {
            let c = cold::measure(&client, two_servers(clusters, Mode::Eds));
            print_cold(&format!("EDS {clusters} × 10"), &c);
            curve.push(c);
        }
    }
    let eds = wanted("eds").then(|| design_load(&client, Mode::Eds));
    curve.extend(eds.clone());
    let leds = wanted("leds").then(|| design_load(&client, Mode::Leds));
    if wanted("leds-tenth") {
        tenth_of_leds(&client);
    }
    if let Some(eds) = &eds {
        print_memory(eds, leds.as_ref());
    }
    if wanted("ingest") {
        ingest_rows();
    }
    if wanted("authorities") {
        let many = Shape {
            clusters: 100_000,
            authorities: 100,
            servers: 10,
            mode: Mode::Eds,
        };
        let c = cold::measure(&client, many);
        print_cold("100 authorities on 10 servers, 100 000 × 10", &c);
    }
    if wanted("watch") {
        watch_rows();
    }
    if curve.len() == 4 {
        chart(&curve);
    }
}
