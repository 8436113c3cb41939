//! Scenario files: a whole testbed in YAML.
//!
//! ```yaml
//! servers:                      # management servers, each on 127.0.0.1
//!   - name: cloud
//!     authorities: [cloud.example]
//!     port: 0                   # optional; 0 (the default) picks a free port
//!   - name: policies
//!     authorities: [policies.example]
//!     protocol: policy_stream   # optional; `ads` by default
//! backends:                     # optional gRPC health servers on 127.0.0.1:0
//!   - name: greeter
//! resources:                    # Envoy resources through the protobuf JSON mapping
//!   - name: xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments
//!     server: cloud             # optional when one server serves the authority
//!     resource:
//!       "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
//!       name: xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments
//!       type: EDS
//!       eds_cluster_config: {eds_config: {ads: {}}}
//!   - name: rate-limits         # any type, as bytes
//!     server: cloud
//!     encoded: {type_url: type.googleapis.com/xdsfed.policy.v1.Policy, hex: "0a0b726174652d6c696d697473"}
//!   - name: require-auth        # a ValidatingPolicy, for a policy-stream server
//!     server: policies
//!     policy: {validations: [{expression: "true"}]}
//! generators:
//!   - server: cloud
//!     clusters: {count: 1000, endpoints_per_cluster: 10}
//! recording: {events_per_stream: 1000, streams: 1000}   # optional; these are the defaults
//! schedule_clock: start         # or first_request: offsets count from the first xDS request
//! schedule:                     # one action per step, at an offset from the start
//!   - at: 0s                    # steps at 0s are applied before `start` returns
//!     faults: {server: cloud, refuse_connections: true}
//!   - at: 2s
//!     set: {name: …, resource: {…}}
//!   - at: 3s
//!     delete: {type_url: …, name: …}
//!   - at: 4s
//!     faults: {server: cloud, response_delay: 200ms}
//!   - at: 6s
//!     restart: {server: cloud, keep_state: true, down_for: 500ms}
//! ```
//!
//! Strings may refer to backends: `${backend.greeter.port}` (a number when
//! it is the whole string), `${backend.greeter.host}`,
//! `${backend.greeter.address}`. See `docs/testbed.md` for every field.
//!
//! [`Scenario::from_yaml`] checks everything it can before anything starts,
//! including the JSON mapping of every resource, and names the offending
//! field by its path (`resources[2].resource: unknown field "nmae"`). A
//! resource must carry its scenario name inside (`Listener.name`,
//! `RouteConfiguration.name`, `Cluster.name`,
//! `ClusterLoadAssignment.cluster_name`): clients know it by that name.

mod duration;
mod generate;
mod json;
mod model;
mod own_name;
mod policy;
mod read;
mod run;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    time::Duration,
};

use envoy_types::pb::google::protobuf::Any;
use prost_reflect::DescriptorPool;
use serde_norway::Value;
use xdsfed_core::name::{XdstpName, authority_of, canonical_key};
use xdsfed_core::text_limits::check_yaml_nesting;

pub use duration::MAX_DURATION;
pub use generate::{MAX_CLUSTERS, MAX_ENDPOINTS};
pub use json::envoy_pool;
pub use read::MAX_SCENARIO_BYTES;
pub use run::RunningScenario;

use crate::{RecordingLimits, ServerError, ServerSpec, TestbedError, faults::Faults, store::Store};

/// The deepest nesting a scenario may have: the YAML deserializer's own
/// recursion limit, so the scan refuses nothing it would have read.
const MAX_NESTING: usize = 128;

/// Why a scenario cannot be read or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read scenario {file}: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The YAML does not fit the scenario format.
    #[error("{path}: {message}")]
    Syntax {
        /// The field path, e.g. `servers[1].port`.
        path: String,
        /// What serde said, with line and column.
        message: String,
    },
    /// A value fits the format but not the rules.
    #[error("{path}: {why}")]
    Invalid {
        /// The field path.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The testbed did not start.
    #[error("starting the testbed: {0}")]
    Start(#[source] Box<TestbedError>),
    /// A resource or step failed against a running server.
    #[error("{path}: {source}")]
    Apply {
        /// The field path of the resource or step.
        path: String,
        /// What the server said.
        source: Box<ServerError>,
    },
}

impl ScenarioError {
    /// Whether the scenario itself is wrong (as opposed to the machine).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Self::Read { .. } | Self::Syntax { .. } | Self::Invalid { .. }
        )
    }
}

impl From<TestbedError> for ScenarioError {
    fn from(e: TestbedError) -> Self {
        Self::Start(Box::new(e))
    }
}

fn invalid(path: impl Into<String>, why: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        path: path.into(),
        why: why.into(),
    }
}

/// Where a resource's content comes from.
#[derive(Debug, Clone)]
enum Source {
    /// YAML through the JSON mapping; converted once backends have ports.
    Yaml(Value),
    /// Bytes given in the file.
    Encoded(Any),
}

/// A resource to put on a server.
#[derive(Debug, Clone)]
struct Planned {
    path: String,
    server: String,
    name: String,
    source: Source,
}

/// A scheduled action.
#[derive(Debug, Clone)]
enum Action {
    Set(Planned),
    Delete {
        server: String,
        type_url: String,
        name: String,
    },
    Faults {
        server: String,
        faults: Faults,
        inject: Vec<(String, Value)>,
    },
    Restart {
        server: String,
        keep_state: bool,
        down_for: Duration,
    },
}

#[derive(Debug, Clone)]
struct Step {
    at: Duration,
    path: String,
    action: Action,
}

#[derive(Debug, Clone)]
struct Generator {
    path: String,
    server: String,
    spec: generate::Clusters,
    backend: Option<String>,
}

/// A checked scenario, ready to [start](Scenario::start).
#[derive(Clone)]
pub struct Scenario {
    servers: Vec<ServerSpec>,
    backends: Vec<String>,
    resources: Vec<Planned>,
    generators: Vec<Generator>,
    schedule: Vec<Step>,
    schedule_clock: model::ScheduleClock,
    recording: RecordingLimits,
    pool: DescriptorPool,
}

impl std::fmt::Debug for Scenario {
    // The descriptor pool is left out: its own `Debug` recurses through
    // every Envoy type, deeper than a thread's stack.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("servers", &self.servers)
            .field("backends", &self.backends)
            .field("resources", &self.resources)
            .field("generators", &self.generators)
            .field("schedule", &self.schedule)
            .field("schedule_clock", &self.schedule_clock)
            .field("recording", &self.recording)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// Reads and checks a scenario file: a regular file of at most
    /// [`MAX_SCENARIO_BYTES`].
    pub fn from_file(file: &Path) -> Result<Self, ScenarioError> {
        let text = read::read_bounded(file).map_err(|source| ScenarioError::Read {
            file: file.to_owned(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Checks a scenario, with Envoy's types for the JSON mapping.
    pub fn from_yaml(text: &str) -> Result<Self, ScenarioError> {
        let pool = envoy_pool().map_err(|why| invalid("resources", why))?;
        Self::from_yaml_with_pool(text, pool)
    }

    /// Checks a scenario, with the types of `pool` for the JSON mapping (for
    /// your own resource types: add them to [`envoy_pool`]).
    pub fn from_yaml_with_pool(text: &str, pool: DescriptorPool) -> Result<Self, ScenarioError> {
        check_text(text)?;
        let file: model::File = serde_path_to_error::deserialize(
            serde_norway::Deserializer::from_str(text),
        )
        .map_err(|e| {
            let path = e.path().to_string();
            let message = without_path_prefix(&e.inner().to_string(), &path).to_owned();
            ScenarioError::Syntax { path, message }
        })?;
        check(file, pool)
    }

    /// The servers the scenario starts.
    pub fn servers(&self) -> &[ServerSpec] {
        &self.servers
    }

    /// The backend names the scenario starts.
    pub fn backends(&self) -> &[String] {
        &self.backends
    }

    /// How much each server's recording keeps.
    pub fn recording_limits(&self) -> RecordingLimits {
        self.recording
    }

    /// How many scheduled steps it has.
    pub fn schedule_len(&self) -> usize {
        self.schedule.len()
    }

    /// Starts servers and backends, loads the resources and generators,
    /// applies the steps at `0s`, and runs the rest of the schedule in the
    /// background: a client that connects once this returns never sees the
    /// state before the `0s` steps.
    pub async fn start(&self) -> Result<RunningScenario, ScenarioError> {
        run::start(self).await
    }
}

/// What must hold before the YAML parser sees the text: its size, and how
/// deeply it nests collections (the parser is quadratic in that).
fn check_text(text: &str) -> Result<(), ScenarioError> {
    if text.len() > MAX_SCENARIO_BYTES {
        return Err(invalid(
            ".",
            format!("the scenario is larger than {MAX_SCENARIO_BYTES} bytes (16 MiB)"),
        ));
    }
    check_yaml_nesting(text, MAX_NESTING).map_err(|too_deep| ScenarioError::Syntax {
        path: ".".to_owned(),
        message: format!(
            "{too_deep} at line {} column {}",
            too_deep.line, too_deep.column
        ),
    })
}

/// `message` without the path serde_norway puts before it (`servers[0]: `,
/// the mapping around the failing key): the error prints the full path
/// already.
fn without_path_prefix<'a>(message: &'a str, path: &str) -> &'a str {
    match message.split_once(": ") {
        Some((prefix, rest)) if !prefix.is_empty() && path.starts_with(prefix) => rest,
        _ => message,
    }
}

/// Checks that `authority` can be the authority of an `xdstp:` name as it
/// is written, so that names of it find this server.
fn check_authority(path: &str, authority: &str) -> Result<(), ScenarioError> {
    let probe = format!("xdstp://{authority}/envoy.config.cluster.v3.Cluster/probe");
    match XdstpName::parse(&probe) {
        Ok(name) if name.authority() == authority => Ok(()),
        Ok(name) => Err(invalid(
            path,
            format!(
                "{authority:?} is not an authority as xdstp names write it (it reads as {:?})",
                name.authority()
            ),
        )),
        Err(e) => Err(invalid(
            path,
            format!("{authority:?} is not a URI authority: {e}"),
        )),
    }
}

fn check(file: model::File, pool: DescriptorPool) -> Result<Scenario, ScenarioError> {
    let servers = check_servers(file.servers)?;
    let backends = check_backends(file.backends)?;
    let cx = Context {
        servers: &servers,
        backends: &backends,
        pool: &pool,
    };
    let resources = file
        .resources
        .into_iter()
        .enumerate()
        .map(|(i, entry)| cx.resource(format!("resources[{i}]"), entry))
        .collect::<Result<Vec<_>, _>>()?;
    let mut totals = generate::Totals::default();
    let generators = file
        .generators
        .into_iter()
        .enumerate()
        .map(|(i, entry)| cx.generator(format!("generators[{i}]"), entry, &mut totals))
        .collect::<Result<Vec<_>, _>>()?;
    let mut schedule = file
        .schedule
        .into_iter()
        .enumerate()
        .map(|(i, entry)| cx.step(format!("schedule[{i}]"), entry))
        .collect::<Result<Vec<_>, _>>()?;
    // Stable: steps at the same offset keep the file's order.
    schedule.sort_by_key(|s| s.at);
    let recording = recording_limits(file.recording)?;
    Ok(Scenario {
        servers,
        backends,
        resources,
        generators,
        schedule,
        schedule_clock: file.schedule_clock,
        recording,
        pool,
    })
}

/// The servers of a scenario: named once each, with valid authorities.
fn check_servers(entries: Vec<model::ServerEntry>) -> Result<Vec<ServerSpec>, ScenarioError> {
    if entries.is_empty() {
        return Err(invalid("servers", "a scenario needs at least one server"));
    }
    let mut servers = Vec::with_capacity(entries.len());
    let mut names = BTreeSet::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let path = format!("servers[{i}]");
        if entry.name.is_empty() {
            return Err(invalid(format!("{path}.name"), "must not be empty"));
        }
        if !names.insert(entry.name.clone()) {
            return Err(invalid(
                format!("{path}.name"),
                format!("a server named {:?} already exists", entry.name),
            ));
        }
        if entry.authorities.is_empty() {
            return Err(invalid(
                format!("{path}.authorities"),
                "a server serves at least one authority",
            ));
        }
        for (j, authority) in entry.authorities.iter().enumerate() {
            check_authority(&format!("{path}.authorities[{j}]"), authority)?;
        }
        servers.push(ServerSpec {
            name: entry.name,
            authorities: entry.authorities,
            port: entry.port,
            tls: None,
            protocol: match entry.protocol {
                model::ProtocolEntry::Ads => crate::Protocol::Ads,
                model::ProtocolEntry::PolicyStream => crate::Protocol::policy_stream(),
                model::ProtocolEntry::Rest => crate::Protocol::Rest,
            },
        });
    }
    Ok(servers)
}

/// The backends' names: unique and non-empty.
fn check_backends(entries: Vec<model::BackendEntry>) -> Result<Vec<String>, ScenarioError> {
    let mut backends = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        if entry.name.is_empty() || backends.contains(&entry.name) {
            return Err(invalid(
                format!("backends[{i}].name"),
                format!(
                    "backend names must be unique and non-empty, got {:?}",
                    entry.name
                ),
            ));
        }
        backends.push(entry.name);
    }
    Ok(backends)
}

/// The recording limits of every server: the defaults, with what the file sets.
fn recording_limits(entry: model::RecordingEntry) -> Result<RecordingLimits, ScenarioError> {
    let at_least_one = |field: &str, value: Option<usize>, default: usize| match value {
        Some(0) => Err(invalid(format!("recording.{field}"), "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(default),
    };
    let defaults = RecordingLimits::default();
    Ok(RecordingLimits {
        events_per_stream: at_least_one(
            "events_per_stream",
            entry.events_per_stream,
            defaults.events_per_stream,
        )?,
        bytes_per_stream: at_least_one(
            "bytes_per_stream",
            entry.bytes_per_stream,
            defaults.bytes_per_stream,
        )?,
        streams: at_least_one("streams", entry.streams, defaults.streams)?,
    })
}

struct Context<'a> {
    servers: &'a [ServerSpec],
    backends: &'a [String],
    pool: &'a DescriptorPool,
}

impl Context<'_> {
    fn server(
        &self,
        path: &str,
        named: Option<String>,
        resource: &str,
    ) -> Result<String, ScenarioError> {
        if let Some(name) = named {
            return self
                .servers
                .iter()
                .any(|s| s.name == name)
                .then_some(name.clone())
                .ok_or_else(|| {
                    invalid(
                        format!("{path}.server"),
                        format!("no server is named {name:?}"),
                    )
                });
        }
        let authority = canonical_key(resource)
            .ok()
            .and_then(|k| authority_of(&k).map(str::to_owned))
            .ok_or_else(|| {
                invalid(
                    format!("{path}.server"),
                    "an old-style name needs `server` to say where it lives",
                )
            })?;
        let serving: Vec<&ServerSpec> = self
            .servers
            .iter()
            .filter(|s| s.authorities.contains(&authority))
            .collect();
        match serving.as_slice() {
            [one] => Ok(one.name.clone()),
            [] => Err(invalid(
                format!("{path}.name"),
                format!("no server serves authority {authority:?}"),
            )),
            _ => Err(invalid(
                format!("{path}.server"),
                format!("several servers serve {authority:?}; say which with `server`"),
            )),
        }
    }

    fn check_backends(&self, path: &str, value: &Value) -> Result<(), ScenarioError> {
        let mut found = Vec::new();
        json::backend_references(value, &mut found);
        match found.into_iter().find(|b| !self.backends.contains(b)) {
            Some(missing) => Err(invalid(
                path,
                format!("refers to backend {missing:?}, which the scenario does not start"),
            )),
            None => Ok(()),
        }
    }

    /// Converts with placeholder ports, to find mapping errors before starting.
    fn dry_any(&self, path: &str, value: &Value) -> Result<Any, ScenarioError> {
        self.check_backends(path, value)?;
        let placeholder = self.backends.iter().map(|b| (b.clone(), 1)).collect();
        json::to_any(self.pool, value, &placeholder).map_err(|e| {
            let (path, why) = e.located(path);
            invalid(path, why)
        })
    }

    fn resource(
        &self,
        path: String,
        entry: model::ResourceEntry,
    ) -> Result<Planned, ScenarioError> {
        let server = self.server(&path, entry.server, &entry.name)?;
        let (source, any, body) = match (entry.resource, entry.encoded, entry.policy) {
            (None, None, Some(policy)) => {
                let any = policy.to_any(&entry.name);
                (Source::Encoded(any.clone()), any, "policy")
            }
            (Some(value), None, None) => {
                let any = self.dry_any(&format!("{path}.resource"), &value)?;
                (Source::Yaml(value), any, "resource")
            }
            (None, Some(encoded), None) => {
                let value = hex::decode(&encoded.hex)
                    .map_err(|e| invalid(format!("{path}.encoded.hex"), e.to_string()))?;
                let any = Any {
                    type_url: encoded.type_url,
                    value,
                };
                (Source::Encoded(any.clone()), any, "encoded")
            }
            _ => {
                return Err(invalid(
                    path,
                    "give exactly one of `resource` (YAML), `encoded` (type_url + hex) and `policy`",
                ));
            }
        };
        own_name::check(&entry.name, body, &any)
            .map_err(|why| invalid(format!("{path}.name"), why))?;
        self.check_store(&path, &server, &entry.name, any)?;
        Ok(Planned {
            path,
            server,
            name: entry.name,
            source,
        })
    }

    /// The checks the server will make, made now.
    fn check_store(
        &self,
        path: &str,
        server: &str,
        name: &str,
        any: Any,
    ) -> Result<(), ScenarioError> {
        Store::new()
            .set(name, any)
            .map_err(|e| invalid(format!("{path}.name"), e.to_string()))?;
        let authority = canonical_key(name)
            .ok()
            .and_then(|k| authority_of(&k).map(str::to_owned));
        let spec = self.servers.iter().find(|s| s.name == server);
        if let (Some(authority), Some(spec)) = (authority, spec)
            && !spec.authorities.contains(&authority)
        {
            return Err(invalid(
                format!("{path}.name"),
                format!("server {server:?} does not serve authority {authority:?}"),
            ));
        }
        Ok(())
    }

    fn generator(
        &self,
        path: String,
        entry: model::GeneratorEntry,
        totals: &mut generate::Totals,
    ) -> Result<Generator, ScenarioError> {
        let spec = self
            .servers
            .iter()
            .find(|s| s.name == entry.server)
            .ok_or_else(|| {
                invalid(
                    format!("{path}.server"),
                    format!("no server is named {:?}", entry.server),
                )
            })?;
        let clusters = entry.clusters;
        let authority = match clusters.authority {
            Some(a) if spec.authorities.contains(&a) => a,
            Some(a) => {
                return Err(invalid(
                    format!("{path}.clusters.authority"),
                    format!("server {:?} does not serve {a:?}", spec.name),
                ));
            }
            None => spec.authorities.first().cloned().unwrap_or_default(),
        };
        if let Some(backend) = &clusters.backend
            && !self.backends.contains(backend)
        {
            return Err(invalid(
                format!("{path}.clusters.backend"),
                format!("no backend is named {backend:?}"),
            ));
        }
        if clusters.prefix.is_empty() || clusters.prefix.contains(['/', '?', '#']) {
            return Err(invalid(
                format!("{path}.clusters.prefix"),
                "must be a non-empty path segment",
            ));
        }
        // Every generated name carries both, up to a million times over.
        for (field, value) in [("prefix", &clusters.prefix), ("authority", &authority)] {
            if value.len() > generate::MAX_NAME_PART {
                return Err(invalid(
                    format!("{path}.clusters.{field}"),
                    format!(
                        "{} bytes is longer than the {} a generator allows",
                        value.len(),
                        generate::MAX_NAME_PART
                    ),
                ));
            }
        }
        totals
            .add(clusters.count, clusters.endpoints_per_cluster)
            .map_err(|(field, why)| invalid(format!("{path}.clusters.{field}"), why))?;
        Ok(Generator {
            path,
            server: spec.name.clone(),
            spec: generate::Clusters {
                count: clusters.count,
                endpoints_per_cluster: clusters.endpoints_per_cluster,
                authority,
                prefix: clusters.prefix,
                backend_port: None,
            },
            backend: clusters.backend,
        })
    }

    fn step(&self, path: String, entry: model::StepEntry) -> Result<Step, ScenarioError> {
        let at = duration::parse(&entry.at).map_err(|why| invalid(format!("{path}.at"), why))?;
        let mut actions = Vec::new();
        if let Some(set) = entry.set {
            actions.push(Action::Set(self.resource(format!("{path}.set"), set)?));
        }
        if let Some(delete) = entry.delete {
            let server = self.server(&format!("{path}.delete"), delete.server, &delete.name)?;
            actions.push(Action::Delete {
                server,
                type_url: delete.type_url,
                name: delete.name,
            });
        }
        if let Some(faults) = entry.faults {
            actions.push(self.faults(&format!("{path}.faults"), faults)?);
        }
        if let Some(restart) = entry.restart {
            let server = self.server(&format!("{path}.restart"), Some(restart.server), "")?;
            let down_for = match restart.down_for {
                Some(d) => duration::parse(&d)
                    .map_err(|why| invalid(format!("{path}.restart.down_for"), why))?,
                None => Duration::ZERO,
            };
            actions.push(Action::Restart {
                server,
                keep_state: restart.keep_state,
                down_for,
            });
        }
        let mut actions = actions.into_iter();
        match (actions.next(), actions.next()) {
            (Some(action), None) => Ok(Step { at, path, action }),
            _ => Err(invalid(
                path,
                "a step has exactly one of `set`, `delete`, `faults`, `restart`",
            )),
        }
    }

    fn faults(&self, path: &str, entry: model::FaultsEntry) -> Result<Action, ScenarioError> {
        let server = self.server(path, Some(entry.server), "")?;
        let response_delay = entry
            .response_delay
            .map(|d| {
                duration::parse(&d).map_err(|why| invalid(format!("{path}.response_delay"), why))
            })
            .transpose()?;
        for (name, target) in &entry.redirects {
            XdstpName::parse(target).map_err(|e| {
                invalid(
                    format!("{path}.redirects[{name:?}]"),
                    format!("the target {target:?} is not an xdstp name: {e}"),
                )
            })?;
        }
        let close_code = entry
            .close_code
            .map(|c| {
                crate::faults::parse_code(&c).ok_or_else(|| {
                    invalid(
                        format!("{path}.close_code"),
                        format!("{c:?} is not a gRPC status code (OK, UNAVAILABLE, … or 0–16)"),
                    )
                })
            })
            .transpose()?;
        let mut inject = Vec::new();
        for (i, injected) in entry.inject.into_iter().enumerate() {
            self.dry_any(&format!("{path}.inject[{i}].resource"), &injected.resource)?;
            inject.push((injected.name, injected.resource));
        }
        let faults = Faults {
            refuse_connections: entry.refuse_connections,
            close_immediately: entry.close_immediately,
            close_after_responses: entry.close_after_responses,
            close_code,
            response_delay,
            silent_names: entry.silent_names.into_iter().collect(),
            silent_types: entry.silent_types.into_iter().collect(),
            malformed_names: entry.malformed_names.into_iter().collect(),
            duplicate_names: entry.duplicate_names.into_iter().collect(),
            inject: Vec::new(),
            redirects: entry.redirects,
            delta_unimplemented: entry.delta_unimplemented,
            http_status: entry.http_status,
            malformed_body: entry.malformed_body,
            // Scenario files have no fields for the HTTP CDN faults: none.
            cdn_status: None,
            cdn_malformed_body: false,
        };
        Ok(Action::Faults {
            server,
            faults,
            inject,
        })
    }
}
