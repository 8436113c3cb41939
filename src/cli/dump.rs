//! `xdsfed dump`: subscribe, wait until everything has arrived (or
//! `--timeout`), print the CSDS-style status, and fail when anything is
//! missing, rejected or late.
//!
//! "Everything has arrived" means, for `--listener`, the graph's first
//! complete snapshot (gRPC A74's "ready"); for `--resource`, the resource
//! is received, known not to exist, or failed; for `--wildcard`, the
//! server's first response is in the cache (see [`wait_wildcard`]). Each
//! is read from the client's own state as its events arrive, so waiting
//! costs O(changes), not a walk over every resource per event.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use xdsfed::client::client::XdsClient;
use xdsfed::core::status::ClientStatus;
use xdsfed::core::types::ValidatingPolicyType;
use xdsfed::core::types::{ClusterType, EndpointType, ListenerType, RouteConfigurationType};
use xdsfed::graph::{ConfigGraph, Snapshot};
use xdsfed::policy::PolicyType;

use super::progress::Progress;
use super::table::{problems, status_table};
use super::target::{
    BootstrapArg, Describe, Target, TargetArgs, TypeArg, build_client, listener_name, watch_error,
};
use super::{CliError, emit, parse_duration, runtime};

/// How often a wildcard wait looks at whether the server has answered
/// while no resource arrives.
const WILDCARD_POLL: Duration = Duration::from_millis(50);

/// Flags of `xdsfed dump`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    bootstrap: BootstrapArg,
    #[command(flatten)]
    target: TargetArgs,
    /// How long to wait for everything to arrive (e.g. 500ms, 5s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Print the status as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let target = args.target.target()?;
    let bootstrap = args.bootstrap.load()?;
    runtime()?.block_on(async move {
        let client = build_client(bootstrap, Some(args.timeout), None)?;
        let mut progress = Progress::start(&client, "waiting for resources");
        let waited = subscribe_and_wait(&client, &target, args.timeout).await?;
        progress.finish();
        let status = client.status();
        if args.json {
            emit(&status.to_json())?;
        } else {
            emit(&status_table(&status))?;
        }
        verdict(&status, &waited, args.timeout)
    })
}

/// What waiting produced; holds the subscriptions open until dropped.
pub(crate) struct Waited {
    /// Whether the timeout passed first.
    pub(crate) timed_out: bool,
    /// The graph's snapshot, for `--listener`.
    pub(crate) snapshot: Option<Arc<Snapshot>>,
    /// The graph, for `--listener`, kept running until the dump is printed.
    _graph: Option<ConfigGraph>,
    _held: Box<dyn std::any::Any + Send>,
}

/// Subscribes to `target` and waits until it is complete or `timeout`.
pub(crate) async fn subscribe_and_wait(
    client: &XdsClient,
    target: &Target,
    timeout: Duration,
) -> Result<Waited, CliError> {
    let deadline = deadline_after(timeout)?;
    match target {
        Target::Listener(given) => {
            let name = listener_name(client, given)?;
            // Checks the name and its authority up front, so a typo is bad
            // input rather than a graph with a failed root.
            let root = client
                .watch::<ListenerType>(&name)
                .map_err(|e| watch_error(&name, &e))?;
            let mut graph = ConfigGraph::builder(client.clone()).listener(name).start();
            let mut next = tokio::time::timeout_at(deadline, graph.ready()).await;
            let (timed_out, snapshot) = loop {
                match next {
                    Ok(Ok(snapshot)) => {
                        // The graph counts a failed stream as an answer; a
                        // dump waits for the server's own, while it can.
                        if !any_requested(client) {
                            break (false, Some(snapshot));
                        }
                    }
                    Ok(Err(e)) => {
                        return Err(CliError::runtime("the resource graph stopped").caused_by(&e));
                    }
                    Err(_) => break (true, graph.load()),
                }
                next = tokio::time::timeout_at(deadline, graph.changed()).await;
            };
            Ok(Waited {
                timed_out,
                snapshot,
                _graph: Some(graph),
                _held: Box::new(root),
            })
        }
        Target::Resource(kind, name) => match kind {
            TypeArg::Listener => wait_one::<ListenerType>(client, name, deadline).await,
            TypeArg::Route => wait_one::<RouteConfigurationType>(client, name, deadline).await,
            TypeArg::Cluster => wait_one::<ClusterType>(client, name, deadline).await,
            TypeArg::Endpoint => wait_one::<EndpointType>(client, name, deadline).await,
            TypeArg::Policy => wait_one::<PolicyType>(client, name, deadline).await,
            TypeArg::ValidatingPolicy => {
                wait_one::<ValidatingPolicyType>(client, name, deadline).await
            }
        },
        Target::Wildcard(kind) => match kind {
            TypeArg::Listener => wait_wildcard::<ListenerType>(client, deadline).await,
            TypeArg::Route => wait_wildcard::<RouteConfigurationType>(client, deadline).await,
            TypeArg::Cluster => wait_wildcard::<ClusterType>(client, deadline).await,
            TypeArg::Endpoint => wait_wildcard::<EndpointType>(client, deadline).await,
            TypeArg::Policy => wait_wildcard::<PolicyType>(client, deadline).await,
            TypeArg::ValidatingPolicy => {
                wait_wildcard::<ValidatingPolicyType>(client, deadline).await
            }
        },
    }
}

async fn wait_one<T: Describe>(
    client: &XdsClient,
    name: &str,
    deadline: Instant,
) -> Result<Waited, CliError> {
    use xdsfed::client::cache::ResourceStatus;
    let mut watch = client.watch::<T>(name).map_err(|e| watch_error(name, &e))?;
    let mut timed_out = false;
    // A stream error without a cached copy leaves the resource REQUESTED:
    // the client retries, so keep waiting for a definite answer.
    while watch.state().status == ResourceStatus::Requested {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(CliError::runtime("the xDS client stopped")),
            Err(_) => {
                timed_out = true;
                break;
            }
        }
    }
    Ok(Waited {
        timed_out,
        snapshot: None,
        _graph: None,
        _held: Box::new(watch),
    })
}

/// `--timeout` from now; a timeout past what the clock can count is bad
/// input, not a panic.
pub(crate) fn deadline_after(timeout: Duration) -> Result<Instant, CliError> {
    Instant::now().checked_add(timeout).ok_or_else(|| {
        CliError::bad_input(format!("--timeout: {timeout:?} is too long"))
            .hint("give a duration such as 500ms, 5s or 10m")
    })
}

/// Waits for the server's first answer to the wildcard subscription.
///
/// The client applies one response in one step and the watch yields a
/// name only once that step is done, so the first event means the whole
/// first response is in the cache: the wait drains what is queued and is
/// complete. Each event costs O(1); nothing walks the cache. A server that
/// answered without sending anything yields no event at all: the client
/// counts the type as answered once a response's events are in the cache,
/// so while nothing has arrived the wait asks the client's status each poll
/// (an empty cache, a short walk) and ends with the empty answer at once.
async fn wait_wildcard<T: Describe>(
    client: &XdsClient,
    deadline: Instant,
) -> Result<Waited, CliError> {
    let mut watch = client
        .watch_wildcard::<T>()
        .map_err(|e| watch_error(&format!("every {}", T::SHORT), &e))?;
    let mut arrived = 0usize;
    let timed_out = loop {
        let step = Instant::now()
            .checked_add(WILDCARD_POLL)
            .map_or(deadline, |s| s.min(deadline));
        match tokio::time::timeout_at(step, watch.next()).await {
            Ok(Some(_)) => arrived += 1,
            Ok(None) => return Err(CliError::runtime("the xDS client stopped")),
            Err(_) if answered(client, T::TYPE_URL) => break false,
            Err(_) if Instant::now() >= deadline => break true,
            Err(_) => continue,
        }
        // The rest of the response is queued already: drain it without
        // waiting.
        loop {
            match tokio::time::timeout(Duration::ZERO, watch.next()).await {
                Ok(Some(_)) => arrived += 1,
                Ok(None) => return Err(CliError::runtime("the xDS client stopped")),
                Err(_) => break,
            }
        }
        break false;
    };
    tracing::debug!(arrived, timed_out, "wildcard wait over");
    Ok(Waited {
        timed_out,
        snapshot: None,
        _graph: None,
        _held: Box::new(watch),
    })
}

/// Whether some server has answered `type_url` and the answer is in the
/// cache; asked only while nothing has arrived, so the cache is empty and
/// the walk is short.
fn answered(client: &XdsClient, type_url: &str) -> bool {
    client
        .status()
        .servers
        .iter()
        .any(|s| s.answered_types.iter().any(|t| t == type_url))
}

/// Success, or why not: a timeout (naming the servers that are down),
/// resources that are not ACKED, or graph errors. `status` is the one
/// status dump taken once the wait is over.
pub(crate) fn verdict(
    status: &ClientStatus,
    waited: &Waited,
    timeout: Duration,
) -> Result<(), CliError> {
    let problems = problems(status);
    if waited.timed_out {
        let mut error = CliError::runtime(if problems.is_empty() {
            format!("timed out after {timeout:?} before the server answered")
        } else {
            format!(
                "timed out after {timeout:?}: {} of {} resources are incomplete",
                problems.len(),
                status.resources.len()
            )
        });
        let down: Vec<String> = status
            .servers
            .iter()
            .filter(|s| !s.connected)
            .map(|s| {
                format!(
                    "server {} is not connected ({} failed attempts)",
                    s.server_uri, s.server_failure
                )
            })
            .collect();
        for line in down.iter().chain(&problems) {
            error = error.with_cause(line);
        }
        let hint = if down.is_empty() {
            "the servers answered but not with everything; raise --timeout or check the names"
        } else {
            "is the management server running at the address in the bootstrap?"
        };
        return Err(error.hint(hint));
    }
    // Graph errors mostly restate the resources' own problems; they matter
    // alone when every resource is fine (an edge to an unknown authority).
    let mut graph_errors: Vec<String> = Vec::new();
    if problems.is_empty()
        && let Some(snapshot) = &waited.snapshot
    {
        graph_errors.extend(snapshot.errors().map(ToString::to_string));
        graph_errors.extend(
            snapshot
                .clusters()
                .filter_map(|c| c.error.as_ref().map(ToString::to_string)),
        );
    }
    if problems.is_empty() && graph_errors.is_empty() {
        return Ok(());
    }
    let count = problems.len() + graph_errors.len();
    let mut error = CliError::runtime(format!(
        "{count} problem{} found",
        if count == 1 { "" } else { "s" }
    ));
    for line in problems.iter().chain(&graph_errors) {
        error = error.with_cause(line);
    }
    Err(error.hint("NACKED means the client rejected what the server sent; DOES_NOT_EXIST means the server has no such resource"))
}

/// Whether some resource is still waiting for the server's first answer.
fn any_requested(client: &XdsClient) -> bool {
    client
        .status()
        .resources
        .iter()
        .any(|r| r.status == xdsfed::client::cache::ResourceStatus::Requested)
}
