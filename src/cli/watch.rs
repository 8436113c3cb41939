//! `xdsfed watch`: print every update as it arrives, until Ctrl-C.
//!
//! One line per event by default:
//!
//! ```text
//! 10:51:53.123 CHANGED         cluster  cloud.example/greeter-cloud  v 7e8f9a0b  EDS endpoints cloud.example/greeter-cloud
//! 10:51:58.402 AMBIENT_ERROR   cluster  cloud.example/greeter-cloud  stream to 127.0.0.1:40115 failed …
//! ```
//!
//! one JSON object per line with `--json`, and with `--listener` the
//! snapshot's tree each time the graph publishes a new one. `--admin ADDR`
//! serves CSDS and `/metrics` for the running client (see the `admin`
//! module) and prints the address it bound first.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use xdsfed::core::client::XdsClient;
use xdsfed::core::types::{ClusterType, EndpointType, ListenerType, RouteConfigurationType};
use xdsfed::core::watch::WatchEvent;
use xdsfed::graph::ConfigGraph;
use xdsfed::policy::PolicyType;

use super::progress::Progress;
use super::render::Model;
use super::target::{
    BootstrapArg, Describe, Target, TargetArgs, TypeArg, build_client, load_bootstrap, short_name,
    short_version, watch_error,
};
use super::{CliError, emit, runtime};

/// Flags of `xdsfed watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    bootstrap: BootstrapArg,
    #[command(flatten)]
    target: TargetArgs,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
    /// Serve CSDS (gRPC envoy.service.status.v3.ClientStatusDiscoveryService)
    /// and Prometheus metrics (HTTP GET /metrics) on this address; port 0
    /// picks a free port. The bound address is printed first.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let target = args.target.target()?;
    let bootstrap = load_bootstrap(&args.bootstrap.bootstrap)?;
    let json = args.json;
    runtime()?.block_on(async move {
        let client = build_client(bootstrap)?;
        let _admin = match args.admin {
            Some(addr) => Some(start_admin(&client, addr, &target, json).await?),
            None => None,
        };
        let watching = follow(&client, &target, json);
        tokio::select! {
            result = watching => result,
            // Without a signal handler, run until killed.
            () = ctrl_c() => Ok(()),
        }
    })
}

async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Aborts the admin server when the command ends.
struct AdminTask(tokio::task::JoinHandle<()>);

impl Drop for AdminTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn start_admin(
    client: &XdsClient,
    addr: SocketAddr,
    target: &Target,
    json: bool,
) -> Result<AdminTask, CliError> {
    let label = match target {
        Target::Listener(name) | Target::Resource(_, name) => name.clone(),
        Target::Wildcard(kind) => format!("*/{kind}"),
    };
    let (bound, task) = crate::admin::serve(client.clone(), addr, label)
        .await
        .map_err(|e| {
            CliError::runtime(format!("cannot listen on {addr} for --admin"))
                .caused_by(&e)
                .hint("pick another address, or port 0 for a free one (e.g. 127.0.0.1:0)")
        })?;
    if json {
        emit(&json!({"event": "admin", "address": bound.to_string()}).to_string())?;
    } else {
        emit(&format!("admin {bound} (CSDS gRPC, and HTTP GET /metrics)"))?;
    }
    Ok(AdminTask(task))
}

async fn follow(client: &XdsClient, target: &Target, json: bool) -> Result<(), CliError> {
    match target {
        Target::Listener(name) => follow_graph(client, name, json).await,
        Target::Resource(kind, name) => match kind {
            TypeArg::Listener => follow_one::<ListenerType>(client, name, json).await,
            TypeArg::Route => follow_one::<RouteConfigurationType>(client, name, json).await,
            TypeArg::Cluster => follow_one::<ClusterType>(client, name, json).await,
            TypeArg::Endpoint => follow_one::<EndpointType>(client, name, json).await,
            TypeArg::Policy => follow_one::<PolicyType>(client, name, json).await,
        },
        Target::Wildcard(kind) => match kind {
            TypeArg::Listener => follow_all::<ListenerType>(client, json).await,
            TypeArg::Route => follow_all::<RouteConfigurationType>(client, json).await,
            TypeArg::Cluster => follow_all::<ClusterType>(client, json).await,
            TypeArg::Endpoint => follow_all::<EndpointType>(client, json).await,
            TypeArg::Policy => follow_all::<PolicyType>(client, json).await,
        },
    }
}

async fn follow_graph(client: &XdsClient, name: &str, json: bool) -> Result<(), CliError> {
    // Checks the name and its authority up front (bad input, exit 2).
    let _root = client
        .watch::<ListenerType>(name)
        .map_err(|e| watch_error(name, &e))?;
    let mut graph = ConfigGraph::builder(client.clone()).listener(name).start();
    let mut progress = Some(Progress::start(client, "waiting for the graph"));
    let mut next = graph.ready().await;
    loop {
        let snapshot =
            next.map_err(|e| CliError::runtime("the resource graph stopped").caused_by(&e))?;
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        let model = Model::of(&snapshot);
        if json {
            emit(
                &json!({
                    "time_unix_ms": unix_ms(),
                    "event": "snapshot",
                    "snapshot": model.json(),
                })
                .to_string(),
            )?;
        } else {
            emit(&format!("{} {}", clock(), model.tree()))?;
        }
        next = graph.changed().await;
    }
}

async fn follow_one<T: Describe>(
    client: &XdsClient,
    name: &str,
    json: bool,
) -> Result<(), CliError> {
    let mut watch = client.watch::<T>(name).map_err(|e| watch_error(name, &e))?;
    let mut progress = Some(Progress::start(client, "waiting for the resource"));
    while let Some(event) = watch.next().await {
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        let version = watch.state().version;
        emit(&line::<T>(name, version.as_deref(), &event, json))?;
    }
    Err(CliError::runtime("the xDS client stopped"))
}

async fn follow_all<T: Describe>(client: &XdsClient, json: bool) -> Result<(), CliError> {
    let mut watch = client
        .watch_wildcard::<T>()
        .map_err(|e| watch_error(&format!("every {}", T::SHORT), &e))?;
    let mut progress = Some(Progress::start(client, "waiting for resources"));
    while let Some((name, event)) = watch.next().await {
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        emit(&line::<T>(&name, None, &event, json))?;
    }
    Err(CliError::runtime("the xDS client stopped"))
}

/// One event as a line of text or JSON.
fn line<T: Describe>(
    name: &str,
    version: Option<&str>,
    event: &WatchEvent<T::Resource>,
    json: bool,
) -> String {
    let (kind, summary, error) = match event {
        WatchEvent::Changed(r) => ("CHANGED", Some(T::summary(r)), None),
        WatchEvent::DoesNotExist => ("DOES_NOT_EXIST", None, None),
        WatchEvent::Error(e) => ("ERROR", None, Some(e.to_string())),
        WatchEvent::AmbientError(e) => ("AMBIENT_ERROR", None, Some(e.to_string())),
    };
    if json {
        return json!({
            "time_unix_ms": unix_ms(),
            "event": kind.to_ascii_lowercase(),
            "type": T::SHORT,
            "type_url": T::TYPE_URL,
            "name": name,
            "version": version,
            "summary": summary,
            "error": error,
        })
        .to_string();
    }
    let mut text = format!(
        "{} {kind:<14} {:<8} {}",
        clock(),
        T::SHORT,
        short_name(name)
    );
    if let Some(v) = version.filter(|_| matches!(event, WatchEvent::Changed(_))) {
        text.push_str(&format!("  v {}", short_version(v)));
    }
    for extra in summary.iter().chain(&error) {
        text.push_str("  ");
        text.push_str(extra);
    }
    text
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `HH:MM:SS.mmm` in UTC.
fn clock() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let secs = now.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        now.subsec_millis()
    )
}
