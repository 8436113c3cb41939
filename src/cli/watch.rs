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
//! snapshot's tree each time the graph publishes a new one. `--collection`
//! prints a line per member change of a glob or list collection:
//!
//! ```text
//! 12:29:46.090 LISTED         listener cloud.example/edge  3 members: cloud.example/web, cloud.example/edge#entry=admin, onprem.example/api
//! 12:43:13.337 UPSERT         cluster  cloud.example/pool/one  v fde111c6  EDS endpoints payments-onprem  via 127.0.0.1:43107 (redirected to onprem.example/payments-onprem)
//! ```
//!
//! A copy that did not come from its own authority's first server says
//! where it came from (`via SERVER (…)`: a fallback server, an `#alt`, a
//! redirect), as the status dump does. `--admin ADDR` serves CSDS and
//! `/metrics` for the running client (see the `admin` module) and prints
//! the address it bound first.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{CollectionEvent, WatchEvent};
use xdsfed::core::status::{ResourceStatusEntry, SourceStatus};
use xdsfed::core::types::ValidatingPolicyType;
use xdsfed::core::types::{ClusterType, EndpointType, ListenerType, RouteConfigurationType};
use xdsfed::graph::{ConfigGraph, Snapshot};
use xdsfed::policy::PolicyType;

use super::progress::Progress;
use super::render::{Json, Model};
use super::table::origin;
use super::target::{
    BootstrapArg, CollectionShape, CollectionTarget, Describe, StateDirArg, Target, TargetArgs,
    TypeArg, build_client, listener_name, short_name, short_version, watch_error,
};
use super::text::{message, shown};
use super::{CliError, emit, emit_with, single_thread_runtime};

/// Flags of `xdsfed watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    bootstrap: BootstrapArg,
    #[command(flatten)]
    target: TargetArgs,
    /// A collection of TYPE (xDS TP1), every member as it changes: a glob
    /// collection, NAME ending in /* (e.g.
    /// xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/*), or a
    /// list collection, NAME of type …Collection (listener and cluster, e.g.
    /// xdstp://cloud.example/envoy.config.cluster.v3.ClusterCollection/foo).
    #[arg(long, num_args = 2, value_names = ["TYPE", "NAME"], group = "TargetArgs")]
    collection: Option<Vec<String>>,
    /// With --collection listener|cluster: follow the collection's members
    /// as roots of the resource graph (as Envoy's lds_resources_locator and
    /// cds_resources_locator do) and print the snapshot's tree each time it
    /// changes, instead of one line per member event.
    #[arg(long)]
    graph: bool,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
    /// Serve CSDS (gRPC envoy.service.status.v3.ClientStatusDiscoveryService)
    /// and Prometheus metrics (HTTP GET /metrics) on this address; port 0
    /// picks a free port. The bound address is printed first.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    #[command(flatten)]
    state_dir: StateDirArg,
}

/// What `watch` follows: a target it shares with `dump`, or a collection.
#[derive(Debug)]
enum Watched {
    Target(Target),
    Collection(CollectionTarget),
}

impl Watched {
    fn of(args: &Args) -> Result<Self, CliError> {
        if args.graph && args.collection.is_none() {
            return Err(
                CliError::bad_input("--graph goes with --collection TYPE NAME")
                    .hint("--listener NAME follows one listener's graph without it"),
            );
        }
        match &args.collection {
            Some(pair) => CollectionTarget::from_flag(pair).map(Self::Collection),
            None => args.target.target().map(Self::Target),
        }
    }

    /// The target the admin endpoint names the client by (CSDS
    /// `client_scope`, the metrics' `grpc_target`): for a listener, the gRPC
    /// channel target that reaches it, `xds:///NAME`, or `xds://AUTHORITY/ID`
    /// for an xdstp name `xdstp://AUTHORITY/envoy.config.listener.v3.Listener/ID`.
    /// Other watches are no channel's; they keep the name as given (`*/KIND`
    /// for a wildcard).
    fn label(&self) -> String {
        match self {
            Self::Target(Target::Listener(name) | Target::Resource(TypeArg::Listener, name)) => {
                channel_target(name)
            }
            Self::Target(Target::Resource(_, name)) => name.clone(),
            Self::Target(Target::Wildcard(kind)) => format!("*/{kind}"),
            Self::Collection(collection) => collection.name.clone(),
        }
    }
}

/// The `xds:` channel target of a listener name (gRFC A27 for `xds:///`,
/// A47 for `xds://AUTHORITY/`).
fn channel_target(listener: &str) -> String {
    if listener.starts_with("xds:") {
        return listener.to_owned();
    }
    const XDSTP_LISTENER: &str = "/envoy.config.listener.v3.Listener/";
    if let Some(rest) = listener.strip_prefix("xdstp://")
        && let Some((authority, id)) = rest.split_once(XDSTP_LISTENER)
        && !authority.contains('/')
    {
        return format!("xds://{authority}/{id}");
    }
    format!("xds:///{listener}")
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    let target = Watched::of(&args)?;
    let bootstrap = args.bootstrap.load()?;
    let json = args.json;
    single_thread_runtime()?.block_on(async move {
        // Before the first line is printed, so a Ctrl-C after it is heard.
        let interrupted = super::ctrl_c();
        let client = build_client(bootstrap, None, args.state_dir.state_dir.as_deref())?;
        let _admin = match args.admin {
            Some(addr) => Some(start_admin(&client, addr, &target, json).await?),
            None => None,
        };
        let watching = async {
            match &target {
                Watched::Collection(collection) if args.graph => {
                    follow_collection_graph(&client, collection, json).await
                }
                _ => follow(&client, &target, json).await,
            }
        };
        tokio::select! {
            result = watching => result,
            () = interrupted => Ok(()),
        }
    })
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
    target: &Watched,
    json: bool,
) -> Result<AdminTask, CliError> {
    let (bound, task) = xdsfed::admin::serve(client.clone(), addr, target.label())
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

async fn follow(client: &XdsClient, watched: &Watched, json: bool) -> Result<(), CliError> {
    match watched {
        Watched::Target(target) => follow_target(client, target, json).await,
        Watched::Collection(collection) => match collection.kind {
            TypeArg::Listener => follow_collection::<ListenerType>(client, collection, json).await,
            TypeArg::Route => {
                follow_collection::<RouteConfigurationType>(client, collection, json).await
            }
            TypeArg::Cluster => follow_collection::<ClusterType>(client, collection, json).await,
            TypeArg::Endpoint => follow_collection::<EndpointType>(client, collection, json).await,
            TypeArg::Policy => follow_collection::<PolicyType>(client, collection, json).await,
            TypeArg::ValidatingPolicy => {
                follow_collection::<ValidatingPolicyType>(client, collection, json).await
            }
        },
    }
}

async fn follow_target(client: &XdsClient, target: &Target, json: bool) -> Result<(), CliError> {
    match target {
        Target::Listener(name) => follow_graph(client, name, json).await,
        Target::Resource(kind, name) => match kind {
            TypeArg::Listener => follow_one::<ListenerType>(client, name, json).await,
            TypeArg::Route => follow_one::<RouteConfigurationType>(client, name, json).await,
            TypeArg::Cluster => follow_one::<ClusterType>(client, name, json).await,
            TypeArg::Endpoint => follow_one::<EndpointType>(client, name, json).await,
            TypeArg::Policy => follow_one::<PolicyType>(client, name, json).await,
            TypeArg::ValidatingPolicy => {
                follow_one::<ValidatingPolicyType>(client, name, json).await
            }
        },
        Target::Wildcard(kind) => match kind {
            TypeArg::Listener => follow_all::<ListenerType>(client, json).await,
            TypeArg::Route => follow_all::<RouteConfigurationType>(client, json).await,
            TypeArg::Cluster => follow_all::<ClusterType>(client, json).await,
            TypeArg::Endpoint => follow_all::<EndpointType>(client, json).await,
            TypeArg::Policy => follow_all::<PolicyType>(client, json).await,
            TypeArg::ValidatingPolicy => follow_all::<ValidatingPolicyType>(client, json).await,
        },
    }
}

async fn follow_graph(client: &XdsClient, given: &str, json: bool) -> Result<(), CliError> {
    let name = listener_name(client, given)?;
    // Checks the name and its authority up front (bad input, exit 2).
    let _root = client
        .watch::<ListenerType>(&name)
        .map_err(|e| watch_error(&name, &e))?;
    let graph = ConfigGraph::builder(client.clone()).listener(name).start();
    follow_snapshots(client, graph, json).await
}

/// `--collection TYPE NAME --graph`: the collection's members are the
/// graph's roots.
async fn follow_collection_graph(
    client: &XdsClient,
    collection: &CollectionTarget,
    json: bool,
) -> Result<(), CliError> {
    let name = collection.name.as_str();
    let builder = ConfigGraph::builder(client.clone());
    // Opening the collection once refuses a bad name or authority up front
    // (exit 2) rather than as a failed root in the snapshot. The watch is
    // kept while the graph runs: dropped at once, it would end the
    // subscription the graph then opens again, and a source would fetch the
    // collection twice at start (an HTTP CDN pays for each fetch).
    let (builder, check) = match (collection.kind, collection.shape) {
        (TypeArg::Listener, shape) => (
            builder.listener_collection(name),
            open_collection::<ListenerType>(client, name, shape).map(kept),
        ),
        (TypeArg::Cluster, shape) => (
            builder.cluster_collection(name),
            open_collection::<ClusterType>(client, name, shape).map(kept),
        ),
        (kind, _) => {
            return Err(CliError::bad_input(format!(
                "--graph follows listener and cluster collections, not {kind}"
            ))
            .hint("drop --graph to see the collection's members one event at a time"));
        }
    };
    let _check = check.map_err(|e| watch_error(name, &e))?;
    follow_snapshots(client, builder.start(), json).await
}

/// A watch held only for its subscription.
fn kept<W: Send + 'static>(watch: W) -> Box<dyn std::any::Any + Send> {
    Box::new(watch)
}

fn open_collection<T: Describe>(
    client: &XdsClient,
    name: &str,
    shape: CollectionShape,
) -> Result<xdsfed::client::watch::CollectionWatch<T>, xdsfed::client::client::WatchError> {
    match shape {
        CollectionShape::Glob => client.watch_collection::<T>(name),
        CollectionShape::List => client.watch_list_collection::<T>(name),
    }
}

/// A snapshot as one `--json` line. Its keys are in alphabetical order,
/// the order serde_json gave the `json!` object this line used to be built
/// as (see [`Json`]).
#[derive(serde::Serialize)]
struct SnapshotEvent<'m, 'a> {
    event: &'static str,
    snapshot: Json<'m, 'a>,
    time_unix_ms: u64,
}

/// Prints the graph's first snapshot and every later one, as trees (or
/// JSON), until the graph stops.
async fn follow_snapshots(
    client: &XdsClient,
    mut graph: ConfigGraph,
    json: bool,
) -> Result<(), CliError> {
    let mut progress = Some(Progress::start(client, "waiting for the graph"));
    let mut next = graph.ready().await;
    loop {
        let snapshot =
            next.map_err(|e| CliError::runtime("the resource graph stopped").caused_by(&e))?;
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        print_snapshot(&snapshot, json)?;
        next = graph.changed().await;
    }
}

/// One snapshot as a tree after the time of day, or as a JSON line. The
/// model lives only while it is written, not while the next change is
/// awaited.
fn print_snapshot(snapshot: &Snapshot, json: bool) -> Result<(), CliError> {
    let model = Model::of(snapshot);
    if json {
        let event = SnapshotEvent {
            event: "snapshot",
            snapshot: model.json(),
            time_unix_ms: unix_ms(),
        };
        emit_with(|out| serde_json::to_writer(out, &event).map_err(std::io::Error::from))
    } else {
        emit_with(|out| {
            write!(out, "{} ", clock())?;
            model.tree(out)
        })
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
        // The key, not the name given: without `#alt=` and with its context
        // parameters sorted, as the status dump names it.
        let key = &watch.key().name;
        let entry = matches!(event, WatchEvent::Changed(_))
            .then(|| status_entry(client, T::TYPE_URL, key))
            .flatten();
        let source = entry.as_ref().and_then(|e| e.source.as_ref());
        let version = version.map(String::from);
        emit(&line::<T>(key, version.as_deref(), &event, source, json))?;
    }
    Err(CliError::runtime("the xDS client stopped"))
}

async fn follow_all<T: Describe>(client: &XdsClient, json: bool) -> Result<(), CliError> {
    let mut watch = client
        .watch_wildcard::<T>()
        .map_err(|e| watch_error(&format!("every {}", T::SHORT), &e))?;
    let mut progress = Some(Progress::start(client, "waiting for resources"));
    while let Some(batch) = next_batch(&mut watch).await {
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        let entries = status_entries(client, T::TYPE_URL, &batch);
        for (name, event) in &batch {
            let entry = entries.get(name);
            let version = entry.and_then(|e| e.version.as_deref());
            let source = entry
                .filter(|_| matches!(event, WatchEvent::Changed(_)))
                .and_then(|e| e.source.as_ref());
            emit(&line::<T>(name, version, event, source, json))?;
        }
    }
    Err(CliError::runtime("the xDS client stopped"))
}

/// The next event and every event already queued behind it; `None` when
/// the client stops. A response's resources arrive as one batch, so the
/// status dump that names their versions is taken once per response, not
/// once per resource.
async fn next_batch<T: Describe>(
    watch: &mut xdsfed::client::watch::WildcardWatch<T>,
) -> Option<Vec<(Arc<str>, WatchEvent<T::Resource>)>> {
    let mut batch = vec![watch.next().await?];
    while let Ok(Some(event)) = tokio::time::timeout(Duration::ZERO, watch.next()).await {
        batch.push(event);
    }
    Some(batch)
}

/// The status entries of the batch's resources (version, source), from
/// one status dump taken after the batch was popped: at least as new as
/// each event.
fn status_entries<R>(
    client: &XdsClient,
    type_url: &str,
    batch: &[(Arc<str>, R)],
) -> HashMap<Arc<str>, ResourceStatusEntry> {
    let names: HashMap<&str, &Arc<str>> = batch.iter().map(|(n, _)| (&**n, n)).collect();
    client
        .status()
        .resources
        .into_iter()
        .filter(|r| r.type_url == type_url)
        .filter_map(|r| names.get(r.name.as_str()).map(|n| (Arc::clone(n), r)))
        .collect()
}

/// One event as a line of text or JSON.
fn line<T: Describe>(
    name: &str,
    version: Option<&str>,
    event: &WatchEvent<T::Resource>,
    source: Option<&SourceStatus>,
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
            "source": source,
        })
        .to_string();
    }
    let version = version.filter(|_| matches!(event, WatchEvent::Changed(_)));
    let details = version
        .map(|v| format!("v {}", shown(short_version(v))))
        .into_iter()
        .chain(summary.map(|s| message(&s)))
        .chain(error.map(|e| message(&compact_names(&e, T::TYPE_URL))))
        .chain(source.and_then(origin));
    text_line(kind, T::SHORT, name, details)
}

/// `TIME EVENT TYPE NAME  DETAIL  DETAIL…`, the shape of every event line.
/// The name is escaped here; the details come escaped (see [`super::text`]):
/// a name holding a newline or an escape sequence stays on its line and
/// shows as text.
fn text_line(
    kind: &str,
    type_short: &str,
    name: &str,
    details: impl IntoIterator<Item = String>,
) -> String {
    let mut text = format!(
        "{} {kind:<14} {type_short:<8} {}",
        clock(),
        shown(&short_name(name))
    );
    for detail in details {
        text.push_str("  ");
        text.push_str(&detail);
    }
    text
}

/// `text` with every `xdstp://AUTHORITY/<type>/ID` of the line's own type
/// shortened to `AUTHORITY/ID`, as the name column prints them: redirect
/// chains stay readable. Names of other types keep their type, which may
/// be the point of the error.
fn compact_names(text: &str, type_url: &str) -> String {
    let message = type_url.rsplit('/').next().unwrap_or(type_url);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("xdstp://") {
        out.push_str(&rest[..start]);
        let name = &rest[start + "xdstp://".len()..];
        let shortened = name.split_once('/').and_then(|(authority, typed)| {
            typed
                .strip_prefix(message)
                .and_then(|id| id.strip_prefix('/'))
                .map(|id| (authority, id))
        });
        match shortened {
            Some((authority, id)) => {
                out.push_str(authority);
                out.push('/');
                rest = id;
            }
            None => {
                out.push_str("xdstp://");
                rest = name;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The status dump's entry for one resource: its version and where the
/// copy came from.
fn status_entry(client: &XdsClient, type_url: &str, name: &str) -> Option<ResourceStatusEntry> {
    client
        .status()
        .resources
        .into_iter()
        .find(|r| r.type_url == type_url && r.name == name)
}

async fn follow_collection<T: Describe>(
    client: &XdsClient,
    collection: &CollectionTarget,
    json: bool,
) -> Result<(), CliError> {
    let name = collection.name.as_str();
    let mut watch =
        open_collection::<T>(client, name, collection.shape).map_err(|e| watch_error(name, &e))?;
    let key = watch.key().name.clone();
    let mut progress = Some(Progress::start(client, "waiting for the collection"));
    while let Some(first) = watch.next().await {
        if let Some(mut p) = progress.take() {
            p.finish();
        }
        // Every event already queued joins the batch: one status dump for
        // a response's members, not one per member.
        let mut batch = vec![first];
        while let Ok(Some(event)) = tokio::time::timeout(Duration::ZERO, watch.next()).await {
            batch.push(event);
        }
        let upserted: Vec<(Arc<str>, ())> = batch
            .iter()
            .filter_map(|event| match event {
                CollectionEvent::Upsert { name, .. } => Some((Arc::clone(name), ())),
                _ => None,
            })
            .collect();
        let entries = if upserted.is_empty() {
            HashMap::new()
        } else {
            status_entries(client, T::TYPE_URL, &upserted)
        };
        for event in &batch {
            let entry = match event {
                CollectionEvent::Upsert { name, .. } => entries.get(name),
                _ => None,
            };
            emit(&collection_line::<T>(&key, event, entry, json))?;
        }
    }
    Err(CliError::runtime("the xDS client stopped"))
}

/// One collection event as a line of text or JSON; `entry` is the status
/// of an upserted member.
fn collection_line<T: Describe>(
    collection: &str,
    event: &CollectionEvent<T::Resource>,
    entry: Option<&ResourceStatusEntry>,
    json: bool,
) -> String {
    let version = entry.and_then(|e| e.version.as_deref());
    let source = entry.and_then(|e| e.source.as_ref());
    let (kind, name, summary, error, members) = match event {
        CollectionEvent::Upsert { name, resource } => {
            ("UPSERT", &**name, Some(T::summary(resource)), None, None)
        }
        CollectionEvent::Removed { name } => ("REMOVED", &**name, None, None, None),
        CollectionEvent::Empty => ("EMPTY", collection, None, None, None),
        CollectionEvent::Error { name, error } => {
            ("ERROR", &**name, None, Some(error.to_string()), None)
        }
        CollectionEvent::Listed { members } => ("LISTED", collection, None, None, Some(members)),
    };
    if json {
        return json!({
            "time_unix_ms": unix_ms(),
            "event": kind.to_ascii_lowercase(),
            "type": T::SHORT,
            "type_url": T::TYPE_URL,
            "collection": collection,
            "name": name,
            "version": version,
            "summary": summary,
            "error": error,
            "members": members,
            "source": source,
        })
        .to_string();
    }
    let listed = members.map(|m| member_list(m));
    let details = version
        .map(|v| format!("v {}", shown(short_version(v))))
        .into_iter()
        .chain(summary.map(|s| message(&s)))
        .chain(error.map(|e| message(&compact_names(&e, T::TYPE_URL))))
        .chain(listed)
        .chain(source.and_then(origin));
    text_line(kind, T::SHORT, name, details)
}

/// How many member names a `LISTED` line shows; `--json` has them all.
const LISTED_NAMES: usize = 10;

/// `2 members: cloud.example/web, onprem.example/api`, the names cut after
/// [`LISTED_NAMES`].
fn member_list(members: &[std::sync::Arc<str>]) -> String {
    let shown: Vec<String> = members
        .iter()
        .take(LISTED_NAMES)
        .map(|m| shown(&short_name(m)))
        .collect();
    let more = members.len() - shown.len();
    let names = shown.join(", ")
        + &if more > 0 {
            format!(" (+{more})")
        } else {
            String::new()
        };
    match members.len() {
        0 => "no members".to_owned(),
        1 => format!("1 member: {names}"),
        n => format!("{n} members: {names}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn source(fallback: bool, alt: bool, redirected: bool) -> SourceStatus {
        SourceStatus {
            server: "127.0.0.1:4000 (insecure)".to_owned(),
            server_uri: "127.0.0.1:4000".to_owned(),
            authority: Some("onprem.example".to_owned()),
            fetched_as: Some(
                "xdstp://onprem.example/envoy.config.cluster.v3.Cluster/payments".to_owned(),
            ),
            fallback,
            alt,
            redirected,
        }
    }

    #[test]
    fn admin_target_is_the_channel_target_of_a_listener() {
        assert_eq!(channel_target("svc"), "xds:///svc");
        assert_eq!(
            channel_target("xdstp://a.example/envoy.config.listener.v3.Listener/svc"),
            "xds://a.example/svc"
        );
        assert_eq!(
            channel_target("xdstp://a.example/envoy.config.cluster.v3.Cluster/c"),
            "xds:///xdstp://a.example/envoy.config.cluster.v3.Cluster/c"
        );
    }

    #[test]
    fn origin_says_how_a_copy_arrived_and_nothing_for_a_direct_one() {
        assert_eq!(origin(&source(false, false, false)), None);
        assert_eq!(
            origin(&source(true, false, false)).as_deref(),
            Some("via 127.0.0.1:4000 (fallback server)")
        );
        assert_eq!(
            origin(&source(false, true, false)).as_deref(),
            Some("via 127.0.0.1:4000 (#alt onprem.example/payments)")
        );
        assert_eq!(
            origin(&source(true, false, true)).as_deref(),
            Some("via 127.0.0.1:4000 (redirected to onprem.example/payments, fallback server)")
        );
    }

    #[test]
    fn compact_names_shortens_names_of_the_lines_type_only() {
        let text = "loop xdstp://a/envoy.config.cluster.v3.Cluster/x -> \
            xdstp://b/envoy.config.cluster.v3.Cluster/y?k=v (by xdstp://c/envoy.config.listener.v3.Listener/z)";
        assert_eq!(
            compact_names(text, CLUSTER),
            "loop a/x -> b/y?k=v (by xdstp://c/envoy.config.listener.v3.Listener/z)"
        );
        assert_eq!(compact_names("no names", CLUSTER), "no names");
        assert_eq!(compact_names("xdstp://", CLUSTER), "xdstp://");
    }

    #[test]
    fn member_lists_count_and_shorten() {
        let members: Vec<std::sync::Arc<str>> = vec![
            "xdstp://a/envoy.config.cluster.v3.Cluster/x".into(),
            "xdstp://a/envoy.config.cluster.v3.ClusterCollection/foo#entry=y".into(),
        ];
        assert_eq!(member_list(&members), "2 members: a/x, a/foo#entry=y");
        assert_eq!(member_list(&members[..1]), "1 member: a/x");
        assert_eq!(member_list(&[]), "no members");
        let many: Vec<std::sync::Arc<str>> = (0..12).map(|i| format!("m{i:02}").into()).collect();
        assert_eq!(
            member_list(&many),
            "12 members: m00, m01, m02, m03, m04, m05, m06, m07, m08, m09 (+2)"
        );
    }
}
