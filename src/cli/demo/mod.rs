//! `xdsfed demo`: the whole story in a few seconds, with nothing to set up.
//!
//! An embedded testbed (`bootstrap-examples/testbed-federated.yaml`) runs
//! two management servers in this process, `cloud` for `cloud.example` and
//! `onprem` for `onprem.example`. A client reads
//! `bootstrap-examples/demo.yaml` with its server addresses replaced by the
//! testbed's, keeps its state directory (`--state-dir`, else one the demo
//! creates in the temporary directory and removes at the end), and follows
//! the listener `greeter` through a [`ConfigGraph`]. The acts:
//!
//! 1. **Warming.** The servers answer slowly on purpose (a short
//!    `response_delay`), so each step shows: listener → route configuration
//!    → a cluster on each authority → their endpoints, then the first
//!    complete snapshot.
//! 2. **An update.** The cloud server shifts the route's weights; the
//!    client ACKs, and the graph publishes a new snapshot.
//! 3. **A restart.** The onprem server goes down and comes back. The cached
//!    copies keep serving while it is down (ambient errors), and the stream
//!    reconnects.
//! 4. **Federation.** A policy watched with `#alt` is served by the
//!    alternative while the cloud stays silent, and by the cloud once it
//!    answers; a glob collection's member is a redirect to on-prem.
//! 5. **The final snapshot**, as a tree.
//! 6. **A hybrid restart** ([`hybrid`]). On-prem writes its resources to a
//!    file; both servers refuse connections and the proxy restarts: a new
//!    client on the same state directory is ready at once from disk, and
//!    onprem.example falls back to the file (gRFC A71). The cloud comes
//!    back and the client converges.
//!
//! Lines fit 80 columns; every step is narrated from what the client
//! reports (`XdsClient::status`) and what the graph publishes, never from a
//! script of expected output.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::google::protobuf::UInt32Value;
use tokio::time::Instant;
use xdsfed::client::cache::ResourceStatus;
use xdsfed::client::client::XdsClient;
use xdsfed::client::transport::{BackoffConfig, TransportOptions};
use xdsfed::client::watch::CollectionEvent;
use xdsfed::core::bootstrap::{Bootstrap, FILE_SCHEME};
use xdsfed::core::status::ClientStatus;
use xdsfed::core::types::RouteConfigView;
use xdsfed::graph::{ClusterEndpoints, ConfigGraph, Snapshot};
use xdsfed::policy::{Policy, PolicyType};
use xdsfed::testbed::faults::Faults;
use xdsfed::testbed::scenario::{RunningScenario, Scenario};
use xdsfed::testbed::{Server, Testbed};

use super::render::Model;
use super::target::StateDirArg;
use super::target::{build_error, endpoint_addresses, id_of, route_clusters, short_version};
use super::{CliError, emit, runtime};

mod hybrid;

use hybrid::Scratch;

/// The testbed: two servers, two authorities, a listener whose route
/// splits traffic across both.
const SCENARIO: &str = include_str!("../../../bootstrap-examples/testbed-federated.yaml");
/// The client's bootstrap, with placeholder server addresses.
const BOOTSTRAP: &str = include_str!("../../../bootstrap-examples/demo.yaml");
const LISTENER: &str = "xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter";
const ROUTE: &str = "xdstp://cloud.example/envoy.config.route.v3.RouteConfiguration/greeter";
const ROUTE_TYPE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const CLOUD_POLICY: &str = "xdstp://cloud.example/xdsfed.policy.v1.Policy/rate-limits";
const ONPREM_POLICY: &str = "xdstp://onprem.example/xdsfed.policy.v1.Policy/rate-limits";
const TENANTS_GLOB: &str = "xdstp://cloud.example/xdsfed.policy.v1.Policy/tenants/*";
const ACME_MEMBER: &str = "xdstp://cloud.example/xdsfed.policy.v1.Policy/tenants/acme";
const ACME_ONPREM: &str = "xdstp://onprem.example/xdsfed.policy.v1.Policy/acme";
const ONPREM_ENDPOINTS: &str =
    "xdstp://onprem.example/envoy.config.endpoint.v3.ClusterLoadAssignment/greeter-onprem";
/// Where the onprem endpoints move while their server is down.
const MOVED_ZONE: &str = "rack-2";

/// How slowly the servers answer while warming, so each step is visible.
const WARMING_DELAY: Duration = Duration::from_millis(250);
/// How long the onprem server stays down.
const DOWN_FOR: Duration = Duration::from_millis(1500);
/// How often the narrator looks at the client.
const TICK: Duration = Duration::from_millis(10);
/// The most any act may take before the demo gives up on it.
const ACT_LIMIT: Duration = Duration::from_secs(10);
/// The widest line printed.
const WIDTH: usize = 80;

/// Flags of `xdsfed demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    state_dir: StateDirArg,
}

pub(crate) fn run(args: Args) -> Result<(), CliError> {
    // Dropped last, after the runtime and every client: nothing writes to
    // it any more when it is removed.
    let scratch = Scratch::create()?;
    let state_dir = match args.state_dir.state_dir {
        Some(dir) => dir,
        None => scratch.path().join("state"),
    };
    runtime()?.block_on(async {
        let mut demo = Demo::start(&state_dir).await?;
        demo.warm().await?;
        demo.update().await?;
        demo.restart().await?;
        demo.federation().await?;
        demo.final_tree().await?;
        let demo = demo.hybrid(&state_dir, &scratch).await?;
        demo.finish().await
    })
}

/// The running demo: testbed, client, graph, and what was said so far.
struct Demo {
    started: Instant,
    // Keeps the testbed's servers and backends running.
    _scenario: RunningScenario,
    testbed: Arc<Testbed>,
    client: XdsClient,
    graph: ConfigGraph,
    narrator: Narrator,
}

impl Demo {
    /// Starts the testbed and the client, and prints who is who.
    async fn start(state_dir: &Path) -> Result<Self, CliError> {
        let started = Instant::now();
        let scenario = Scenario::from_yaml(SCENARIO)
            .map_err(|e| CliError::runtime("the embedded scenario is invalid").caused_by(&e))?;
        let running = scenario.start().await.map_err(|e| {
            CliError::runtime("cannot start the embedded testbed")
                .caused_by(&e)
                .hint("the demo needs to listen on free ports of 127.0.0.1")
        })?;
        let testbed = running.testbed().clone();
        for server in testbed.servers() {
            server.update_faults(|f| f.response_delay = Some(WARMING_DELAY));
        }
        let bootstrap = demo_bootstrap(&testbed)?;
        let client = build_client(bootstrap, state_dir)?;

        emit("xdsfed demo: one xDS client, two control planes\n")?;
        for server in testbed.servers() {
            emit(&format!(
                "  server {:<7} {:<16} serves {}",
                server.name(),
                server.addr(),
                server.authorities().join(", ")
            ))?;
        }
        let registry = client.registry();
        emit(&format!(
            "  client {:?}, bootstrap-examples/demo.yaml, {} ADS streams:",
            client.node().id,
            registry.server_keys().count()
        ))?;
        for id in registry.server_keys().filter_map(|key| registry.id_of(key)) {
            let mut carries: Vec<String> =
                registry.authorities_for(id).map(str::to_owned).collect();
            if registry.serves_old_style(id) {
                carries.push("old-style names".to_owned());
            }
            emit(&format!(
                "    {:<16} carries {}",
                registry.uri(id),
                carries.join(", ")
            ))?;
        }

        let graph = ConfigGraph::builder(client.clone())
            .listener(LISTENER)
            .start();
        let mut narrator = Narrator::new(started);
        for server in testbed.servers() {
            narrator.name_server(&server.addr().to_string(), server.name());
        }
        Ok(Self {
            started,
            _scenario: running,
            testbed,
            client,
            graph,
            narrator,
        })
    }

    /// Act 1: the graph warms, one dependency after the other.
    async fn warm(&mut self) -> Result<(), CliError> {
        emit(&format!(
            "\n1. Warming: the client follows listener {:?} across both\n   authorities. Servers answer after {} ms so each step shows.",
            id_of(LISTENER),
            WARMING_DELAY.as_millis()
        ))?;
        let deadline = Instant::now() + ACT_LIMIT;
        let snapshot = loop {
            self.narrator.look(&self.client.status())?;
            if let Some(snapshot) = self.graph.load() {
                break snapshot;
            }
            self.tick(deadline, "the graph to warm").await?;
        };
        // Whatever arrived together with the last resource is said too.
        self.narrator.look(&self.client.status())?;
        for server in self.testbed.servers() {
            server.set_faults(Faults::default());
        }
        let clusters: Vec<String> = snapshot
            .clusters()
            .map(|c| id_of(&c.name).to_owned())
            .collect();
        self.say(&format!(
            "snapshot {} ready: 1 listener, 1 route table, {} clusters",
            snapshot.generation(),
            clusters.len(),
        ))
    }

    /// Act 2: the cloud server changes the route's weights.
    async fn update(&mut self) -> Result<(), CliError> {
        let current = self.graph.load();
        let Some(held) = current
            .as_ref()
            .and_then(|s| s.route_config(ROUTE))
            .and_then(|rc| rc.route_config.as_ref())
        else {
            return Err(CliError::runtime(
                "the route configuration is not in the snapshot",
            ));
        };
        let before = weights(&held.value);
        // The full message, to change and serve again.
        let route = held
            .value
            .decode()
            .map_err(|e| CliError::runtime(format!("the held route configuration: {e}")))?;
        const EACH: u32 = 50;
        let shifted = shift_weights(route, EACH);
        let after: Vec<(String, u32)> = before.iter().map(|(n, _)| (n.clone(), EACH)).collect();
        let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
        emit(&format!(
            "\n2. An update: the cloud server changes the route's weights\n   ({}) from {} to {}.",
            names.join(" / "),
            weights_text(&before),
            weights_text(&after)
        ))?;
        let cloud = self.server("cloud")?.clone();
        let stored = cloud
            .set_message(ROUTE, &shifted)
            .map_err(|e| CliError::runtime("the testbed refused the update").caused_by(&e))?;
        let generation = current.map_or(0, |s| s.generation());
        let deadline = Instant::now() + ACT_LIMIT;
        let snapshot = self
            .until_snapshot(deadline, "a new snapshot", |s| s.generation() > generation)
            .await?;
        let acked = cloud
            .wait_acked(ROUTE_TYPE, ROUTE, Some(&stored.version), ACT_LIMIT)
            .await
            .map_err(|e| CliError::runtime("cannot read the testbed's ACKs").caused_by(&e))?;
        self.narrator.look(&self.client.status())?;
        if !acked.acked_by.is_empty() {
            self.say(&format!(
                "server cloud: version {} ACKed by {}",
                short_version(&stored.version),
                acked.acked_by.join(", ")
            ))?;
        }
        let now = snapshot
            .route_config(ROUTE)
            .and_then(|rc| rc.route_config.as_ref())
            .map(|v| weights(&v.value))
            .unwrap_or_default();
        self.say(&format!(
            "snapshot {} published: weights {}",
            snapshot.generation(),
            weights_text(&now)
        ))
    }

    /// Act 3: the onprem server restarts. While it is down its endpoints
    /// change; the client keeps serving its cached copies, reconnects, and
    /// is sent only what changed.
    async fn restart(&mut self) -> Result<(), CliError> {
        emit(&format!(
            "\n3. A restart: the onprem server goes down for {:.1} s. While it is down,\n   its endpoints move to another zone.",
            DOWN_FOR.as_secs_f64()
        ))?;
        let onprem = self.server("onprem")?.clone();
        let onprem_uri = onprem.addr().to_string();
        let moved = self.moved_endpoints()?;
        let restarting = {
            let onprem = onprem.clone();
            tokio::spawn(async move { onprem.restart(true, DOWN_FOR).await })
        };
        let deadline = Instant::now() + ACT_LIMIT;
        let mut new_version: Option<String> = None;
        let mut said_serving = false;
        loop {
            let status = self.client.status();
            self.narrator.look(&status)?;
            let connected = status
                .servers
                .iter()
                .find(|s| s.server_uri.as_str() == onprem_uri)
                .is_some_and(|s| s.connected);
            if !connected && new_version.is_none() {
                // The old stream is gone: this change can only reach the
                // client through the next one.
                let stored = onprem.set_message(ONPREM_ENDPOINTS, &moved).map_err(|e| {
                    CliError::runtime("the testbed refused the update").caused_by(&e)
                })?;
                self.say(&format!(
                    "server onprem (down): endpoints moved to zone {MOVED_ZONE}, v {}",
                    short_version(&stored.version)
                ))?;
                new_version = Some(stored.version.clone());
            }
            if new_version.is_some() && !said_serving && has_errors_on(&status, &onprem_uri) {
                said_serving = true;
                self.say_serving(&onprem_uri)?;
            }
            let arrived = new_version.as_deref().is_some_and(|v| {
                status
                    .resources
                    .iter()
                    .any(|r| r.name == ONPREM_ENDPOINTS && r.version.as_deref() == Some(v))
            });
            if connected && arrived {
                break;
            }
            self.tick(deadline, "the onprem server to come back")
                .await?;
        }
        match restarting.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(CliError::runtime("the onprem server did not restart").caused_by(&e));
            }
            Err(e) => return Err(CliError::runtime("the restart task failed").caused_by(&e)),
        }
        let deadline = Instant::now() + ACT_LIMIT;
        let version = new_version.unwrap_or_default();
        let snapshot = self
            .until_snapshot(deadline, "the moved endpoints", |s| {
                s.clusters().any(|c| {
                    matches!(&c.endpoints, ClusterEndpoints::Eds { assignment: Some(a), .. }
                        if a.provenance.version == *version.as_str())
                })
            })
            .await?;
        self.say(&format!(
            "recovered: snapshot {} has the moved endpoints",
            snapshot.generation()
        ))
    }

    /// The onprem endpoints of the current snapshot, moved to another zone.
    fn moved_endpoints(&self) -> Result<ClusterLoadAssignment, CliError> {
        let snapshot = self
            .graph
            .load()
            .ok_or_else(|| CliError::runtime("no snapshot yet"))?;
        let mut cla = snapshot
            .clusters()
            .find_map(|c| match &c.endpoints {
                ClusterEndpoints::Eds {
                    service_name,
                    assignment: Some(a),
                } if service_name.as_ref() == ONPREM_ENDPOINTS => a.value.decode().ok(),
                _ => None,
            })
            .ok_or_else(|| CliError::runtime("the onprem endpoints are not in the snapshot"))?;
        for locality in &mut cla.endpoints {
            if let Some(l) = &mut locality.locality {
                l.zone = MOVED_ZONE.to_owned();
            }
        }
        Ok(cla)
    }

    /// Tells that the snapshot still routes to the onprem endpoints while
    /// their server is down.
    fn say_serving(&mut self, onprem_uri: &str) -> Result<(), CliError> {
        let Some(snapshot) = self.graph.load() else {
            return Ok(());
        };
        // The graph names servers as messages do; the status says which
        // of those names are the onprem server's.
        let onprem: Vec<String> = self
            .client
            .status()
            .servers
            .into_iter()
            .filter(|s| s.server_uri == onprem_uri)
            .map(|s| s.server)
            .collect();
        for serving in endpoints_served_by(&snapshot, &onprem) {
            self.say(&format!("the snapshot still routes to {serving}"))?;
        }
        Ok(())
    }

    /// Federation in action, with the project's own policy type (any type
    /// federates): `#alt` fallback to on-prem when the cloud cannot deliver,
    /// and back once it can; then a `ResourceLocator` redirect from a cloud
    /// glob collection to an on-prem resource.
    async fn federation(&mut self) -> Result<(), CliError> {
        emit(&format!(
            "\n4. Federation. The client watches policy {:?} of cloud.example\n   with #alt to the same name on onprem.example. The cloud server\n   stays silent about it.",
            id_of(CLOUD_POLICY),
        ))?;
        let cloud = self.server("cloud")?.clone();
        let onprem = self.server("onprem")?.clone();
        cloud.update_faults(|f| {
            f.silent_names.insert(CLOUD_POLICY.to_owned());
        });
        onprem
            .set_message(ONPREM_POLICY, &policy(ONPREM_POLICY, "on-prem limits"))
            .map_err(|e| CliError::runtime("the testbed refused the policy").caused_by(&e))?;
        let watched = format!("{CLOUD_POLICY}#alt={ONPREM_POLICY}");
        let watch = self
            .client
            .watch::<PolicyType>(&watched)
            .map_err(|e| CliError::runtime("cannot watch the policy").caused_by(&e))?;
        let deadline = Instant::now() + ACT_LIMIT;
        loop {
            let (from, alt) = self.policy_source();
            if alt {
                let labels = watch
                    .current()
                    .map(|p| p.labels.get("what").cloned().unwrap_or_default());
                self.say("cloud silent past the does-not-exist timer: #alt in use")?;
                self.say(&format!(
                    "served by {from}: {:?}",
                    labels.unwrap_or_default()
                ))?;
                break;
            }
            self.tick(deadline, "the #alt fallback").await?;
        }
        cloud.update_faults(|f| {
            f.silent_names.remove(CLOUD_POLICY);
        });
        cloud
            .set_message(CLOUD_POLICY, &policy(CLOUD_POLICY, "cloud limits"))
            .map_err(|e| CliError::runtime("the testbed refused the policy").caused_by(&e))?;
        self.say("server cloud publishes the policy")?;
        let deadline = Instant::now() + ACT_LIMIT;
        loop {
            let (from, alt) = self.policy_source();
            if !alt && !from.is_empty() {
                self.say(&format!(
                    "back to the primary: served by {from}, #alt unsubscribed"
                ))?;
                break;
            }
            self.tick(deadline, "the switch back to the primary")
                .await?;
        }
        drop(watch);
        self.redirect(&cloud, &onprem).await
    }

    /// Act 4, continued: a member of a glob collection is a
    /// `ResourceLocator` redirect to on-prem, and is followed.
    async fn redirect(&mut self, cloud: &Server, onprem: &Server) -> Result<(), CliError> {
        emit(&format!(
            "\n   The client watches the glob collection {:?}.\n   Its member \"acme\" is a ResourceLocator redirect to on-prem.",
            id_of(TENANTS_GLOB)
        ))?;
        cloud
            .set_message(ACME_MEMBER, &policy(ACME_MEMBER, "placeholder"))
            .map_err(|e| CliError::runtime("the testbed refused the policy").caused_by(&e))?;
        onprem
            .set_message(ACME_ONPREM, &policy(ACME_ONPREM, "acme's on-prem limits"))
            .map_err(|e| CliError::runtime("the testbed refused the policy").caused_by(&e))?;
        cloud.update_faults(|f| {
            f.redirects
                .insert(ACME_MEMBER.to_owned(), ACME_ONPREM.to_owned());
        });
        let mut tenants = self
            .client
            .watch_collection::<PolicyType>(TENANTS_GLOB)
            .map_err(|e| CliError::runtime("cannot watch the collection").caused_by(&e))?;
        let event = tokio::time::timeout(ACT_LIMIT, next_member_upsert(&mut tenants))
            .await
            .map_err(|_| CliError::runtime("gave up waiting for the redirected member"))?;
        match event {
            Some(CollectionEvent::Upsert { name, resource }) => {
                let from = self
                    .client
                    .status()
                    .resources
                    .iter()
                    .find(|r| *r.name == *name)
                    .and_then(|r| r.source.as_ref())
                    .map(|s| {
                        format!(
                            "{} from {}",
                            id_of(s.fetched_as.as_deref().unwrap_or(&name)),
                            self.narrator.server_name(&s.server_uri)
                        )
                    })
                    .unwrap_or_default();
                self.say(&format!("member {:?} redirected to {from}", id_of(&name)))?;
                self.say(&format!(
                    "delivered as {:?}: {:?}",
                    id_of(&name),
                    resource.labels.get("what").cloned().unwrap_or_default()
                ))?;
            }
            Some(other) => {
                return Err(CliError::runtime(format!(
                    "unexpected collection event {other:?}"
                )));
            }
            None => return Err(CliError::runtime("the client stopped")),
        }
        Ok(())
    }

    /// Which server serves the watched policy now, and whether it is the
    /// `#alt` alternative.
    fn policy_source(&self) -> (String, bool) {
        let status = self.client.status();
        status
            .resources
            .iter()
            .find(|r| r.name == CLOUD_POLICY && r.cached)
            .and_then(|r| r.source.as_ref())
            .map(|s| (self.narrator.server_name(&s.server_uri), s.alt))
            .unwrap_or_default()
    }

    /// Act 5: the final snapshot as a tree.
    async fn final_tree(&mut self) -> Result<(), CliError> {
        let snapshot = self
            .graph
            .ready()
            .await
            .map_err(|e| CliError::runtime("the resource graph stopped").caused_by(&e))?;
        emit("\n5. The final snapshot, with each resource's authority and version:\n")?;
        // A handful of resources: drawn into memory, then fitted line by line.
        let mut tree = Vec::new();
        Model::of(&snapshot)
            .tree(&mut tree)
            .map_err(|e| CliError::runtime("cannot draw the final snapshot").caused_by(&e))?;
        for line in String::from_utf8_lossy(&tree).lines() {
            emit(&fit(line))?;
        }
        let errors: Vec<String> = snapshot.errors().map(ToString::to_string).collect();
        if !errors.is_empty() {
            return Err(
                CliError::runtime("the final snapshot has errors").with_cause(errors.join("; "))
            );
        }
        Ok(())
    }

    /// Stops the graph and the testbed, and says how long it all took.
    async fn finish(self) -> Result<(), CliError> {
        self.graph.shutdown().await;
        self.testbed.shutdown().await;
        emit(&format!(
            "done in {:.1} s. Next: docs/cli.md (watch, dump, graph, testbed).",
            self.started.elapsed().as_secs_f64()
        ))
    }

    fn server(&self, name: &str) -> Result<&Arc<xdsfed::testbed::Server>, CliError> {
        self.testbed
            .server(name)
            .ok_or_else(|| CliError::runtime(format!("the testbed has no server {name:?}")))
    }

    /// Narrates until the graph publishes a snapshot for which `wanted`
    /// holds.
    async fn until_snapshot(
        &mut self,
        deadline: Instant,
        what: &str,
        wanted: impl Fn(&Snapshot) -> bool,
    ) -> Result<Arc<Snapshot>, CliError> {
        loop {
            self.narrator.look(&self.client.status())?;
            if let Some(s) = self.graph.load().filter(|s| wanted(s)) {
                return Ok(s);
            }
            self.tick(deadline, what).await?;
        }
    }

    async fn tick(&self, deadline: Instant, what: &str) -> Result<(), CliError> {
        if Instant::now() >= deadline {
            return Err(CliError::runtime(format!(
                "gave up waiting for {what} after {ACT_LIMIT:?}"
            ))
            .hint("run with -v to see the client's logs"));
        }
        tokio::time::sleep(TICK).await;
        Ok(())
    }

    fn say(&mut self, text: &str) -> Result<(), CliError> {
        self.narrator.say(text)
    }
}

/// The demo's bootstrap with each authority's servers replaced by the
/// testbed server of that authority, and the default servers by the first
/// testbed server.
fn demo_bootstrap(testbed: &Testbed) -> Result<Bootstrap, CliError> {
    let mut bootstrap = Bootstrap::from_yaml_str(BOOTSTRAP)
        .map_err(|e| CliError::runtime("the embedded bootstrap is invalid").caused_by(&e))?;
    let first = testbed
        .servers()
        .first()
        .ok_or_else(|| CliError::runtime("the embedded testbed has no servers"))?;
    for server in &mut bootstrap.xds_servers {
        server.server_uri = first.addr().to_string();
    }
    for (authority, config) in &mut bootstrap.authorities {
        let Some(server) = testbed.server_for_authority(authority) else {
            return Err(CliError::runtime(format!(
                "the embedded testbed does not serve {authority}"
            )));
        };
        for s in &mut config.xds_servers {
            s.server_uri = server.addr().to_string();
        }
    }
    Ok(bootstrap)
}

/// The demo's client of `bootstrap`: the policy type registered, quick
/// timers, and a state directory (every copy it accepts is written there,
/// and the copies found there serve at start).
fn build_client(bootstrap: Bootstrap, state_dir: &Path) -> Result<XdsClient, CliError> {
    XdsClient::builder(bootstrap)
        .register::<PolicyType>()
        .transport_options(fast_transport())
        .state_dir(state_dir)
        .build()
        .map_err(|e| build_error(&e))
}

/// Timers short enough for a demo: quick reconnects, a short
/// does-not-exist timer.
fn fast_transport() -> TransportOptions {
    let defaults = TransportOptions::default();
    TransportOptions {
        does_not_exist_timeout: Duration::from_secs(3),
        backoff: BackoffConfig {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
            ..defaults.backoff
        },
        connect_timeout: Duration::from_secs(2),
        ..defaults
    }
}

/// A policy saying `what` it is, so the narration can show which copy serves.
fn policy(name: &str, what: &str) -> Policy {
    Policy {
        name: name.to_owned(),
        kind: "ratelimit".to_owned(),
        labels: [("what".to_owned(), what.to_owned())].into(),
        ..Default::default()
    }
}

/// `(cluster id, weight)` of the route's weighted clusters.
fn weights(route: &RouteConfigView) -> Vec<(String, u32)> {
    route_clusters(route)
        .filter_map(|(name, weight)| weight.map(|w| (id_of(name).to_owned(), w)))
        .collect()
}

fn weights_text(weights: &[(String, u32)]) -> String {
    weights
        .iter()
        .map(|(_, w)| w.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// The route with every weighted cluster at `each`.
fn shift_weights(mut route: RouteConfiguration, each: u32) -> RouteConfiguration {
    for vhost in &mut route.virtual_hosts {
        for r in &mut vhost.routes {
            if let Some(Action::Route(action)) = &mut r.action
                && let Some(ClusterSpecifier::WeightedClusters(weighted)) =
                    &mut action.cluster_specifier
            {
                for c in &mut weighted.clusters {
                    c.weight = Some(UInt32Value { value: each });
                }
            }
        }
    }
    route
}

fn has_errors_on(status: &ClientStatus, uri: &str) -> bool {
    status
        .resources
        .iter()
        .any(|r| r.server_uri == uri && r.error.is_some())
}

/// What the narrator last saw of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    status: ResourceStatus,
    version: Option<String>,
    error: Option<String>,
    /// The name of the server the copy came from.
    from: Option<String>,
}

/// Turns successive status dumps into lines: a resource requested,
/// received, updated, in error, recovered; a stream lost or up.
struct Narrator {
    started: Instant,
    resources: HashMap<(String, String), Seen>,
    servers: HashMap<String, bool>,
    server_names: HashMap<String, String>,
}

impl Narrator {
    fn new(started: Instant) -> Self {
        Self {
            started,
            resources: HashMap::new(),
            servers: HashMap::new(),
            server_names: HashMap::new(),
        }
    }

    fn name_server(&mut self, uri: &str, name: &str) {
        self.server_names.insert(uri.to_owned(), name.to_owned());
    }

    /// Forgets what it saw (the servers' names stay), for a new client.
    fn forget(&mut self) {
        self.resources.clear();
        self.servers.clear();
    }

    /// The testbed name of the server at `uri`.
    fn server_name(&self, uri: &str) -> String {
        self.server_names
            .get(uri)
            .cloned()
            .unwrap_or_else(|| uri.to_owned())
    }

    /// Says what changed since the last look.
    fn look(&mut self, status: &ClientStatus) -> Result<(), CliError> {
        for s in &status.servers {
            let uri = s.server_uri.as_str().to_owned();
            let before = self.servers.insert(uri.clone(), s.connected);
            let file = uri.starts_with(FILE_SCHEME);
            let name = self.server_names.get(&uri).cloned().unwrap_or(uri);
            match (before, s.connected, file) {
                (None | Some(false), true, false) => {
                    self.say(&format!("stream to {name} is up"))?;
                }
                (Some(true), false, false) => self.say(&format!("stream to {name} lost"))?,
                (None | Some(false), true, true) => self.say(&format!("file {name} read"))?,
                (Some(true), false, true) => self.say(&format!("file {name} unreadable"))?,
                _ => {}
            }
        }
        for r in &status.resources {
            let key = (r.type_url.clone(), r.name.clone());
            let now = Seen {
                status: r.status,
                version: r.version.clone(),
                error: r.error.clone(),
                from: r.source.as_ref().map(|s| self.server_name(&s.server_uri)),
            };
            let before = self.resources.insert(key, now.clone());
            if let Some(what) = change(before.as_ref(), &now) {
                let line = format!(
                    "{:<9} {:<15} {:<15} {what}",
                    kind_label(&r.type_url),
                    r.authority.as_deref().unwrap_or("(old-style)"),
                    id_of(&r.name)
                );
                self.say(&line)?;
            }
        }
        Ok(())
    }

    fn say(&mut self, text: &str) -> Result<(), CliError> {
        let line = format!("  +{:>5.2}s  {text}", self.started.elapsed().as_secs_f64());
        emit(&fit(&line))
    }
}

/// What a change of state means, in a few words; `None` when nothing
/// worth saying happened.
fn change(before: Option<&Seen>, now: &Seen) -> Option<String> {
    let version = now.version.as_deref().map(short_version).unwrap_or("-");
    match before {
        None => Some(match now.status {
            ResourceStatus::Requested => "requested".to_owned(),
            ResourceStatus::Acked => format!("received, v {version}"),
            ResourceStatus::FromDisk => format!("from disk, v {version}"),
            other => format!("{other:?}"),
        }),
        Some(before) => {
            if before.status == ResourceStatus::FromDisk
                && now.status != ResourceStatus::FromDisk
                && now.version.is_some()
            {
                // The first answer since the restart: the copy from disk
                // is confirmed, or replaced by another server's.
                let from = now.from.as_deref().unwrap_or("a server");
                return Some(if before.version == now.version {
                    format!("confirmed, v {version}")
                } else {
                    format!("from {from}, v {version}")
                });
            }
            if now.error.is_some() && before.error.is_none() {
                let error = now.error.as_deref().unwrap_or_default();
                // The end of the message is the cause (`…: tcp connect
                // error`); the whole of it would not fit the line.
                let cause = error.rsplit(": ").next().unwrap_or(error);
                return Some(if now.version.is_some() {
                    format!("kept ({cause})")
                } else {
                    format!("error: {cause}")
                });
            }
            if before.version != now.version && now.version.is_some() {
                return Some(if before.version.is_none() {
                    format!("received, v {version}")
                } else {
                    format!("updated, v {version}")
                });
            }
            if before.error.is_some() && now.error.is_none() {
                return Some(format!("recovered, v {version}"));
            }
            if before.status != now.status && now.status == ResourceStatus::DoesNotExist {
                return Some("does not exist".to_owned());
            }
            None
        }
    }
}

fn kind_label(type_url: &str) -> &'static str {
    match type_url.rsplit('.').next() {
        Some("Listener") => "Listener",
        Some("RouteConfiguration") => "Routes",
        Some("Cluster") => "Cluster",
        Some("ClusterLoadAssignment") => "Endpoints",
        Some("Policy") => "Policy",
        _ => "Resource",
    }
}

/// Cuts a line to [`WIDTH`] columns.
fn fit(line: &str) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(WIDTH - 1).collect();
    cut.push('…');
    cut
}

/// The snapshot's endpoint sets that came from one of `servers` (named as
/// messages name them), with their addresses.
fn endpoints_served_by(snapshot: &Snapshot, servers: &[String]) -> Vec<String> {
    snapshot
        .clusters()
        .filter_map(|c| match &c.endpoints {
            ClusterEndpoints::Eds {
                assignment: Some(a),
                ..
            } if servers.iter().any(|s| **s == *a.provenance.server) => {
                let addresses: Vec<String> = endpoint_addresses(&a.value)
                    .into_iter()
                    .map(|(_, address)| address)
                    .collect();
                Some(format!("{} at {}", id_of(&c.name), addresses.join(", ")))
            }
            _ => None,
        })
        .collect()
}

/// The collection's next member update. A member loaded from a state
/// directory (`--state-dir` of an earlier run) first reports the ambient
/// error that no server has confirmed it; the server's copy follows.
async fn next_member_upsert<T: xdsfed::core::types::ResourceType>(
    watch: &mut xdsfed::client::watch::CollectionWatch<T>,
) -> Option<CollectionEvent<T::Resource>> {
    loop {
        match watch.next().await? {
            CollectionEvent::Error { .. } => continue,
            other => return Some(other),
        }
    }
}
