//! The scenario file as serde reads it. Checked and converted by the parent module.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_norway::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pub(crate) servers: Vec<ServerEntry>,
    #[serde(default)]
    pub(crate) backends: Vec<BackendEntry>,
    #[serde(default)]
    pub(crate) resources: Vec<ResourceEntry>,
    #[serde(default)]
    pub(crate) generators: Vec<GeneratorEntry>,
    #[serde(default)]
    pub(crate) schedule_clock: ScheduleClock,
    #[serde(default)]
    pub(crate) schedule: Vec<StepEntry>,
    #[serde(default)]
    pub(crate) recording: RecordingEntry,
}

/// How much each server's recording keeps; unset fields keep the defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordingEntry {
    #[serde(default)]
    pub(crate) events_per_stream: Option<usize>,
    #[serde(default)]
    pub(crate) bytes_per_stream: Option<usize>,
    #[serde(default)]
    pub(crate) streams: Option<usize>,
}

/// When the schedule's offsets start counting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ScheduleClock {
    /// When the testbed is ready.
    #[default]
    Start,
    /// When the first xDS request reaches any server, so that a scenario
    /// started by hand waits for the client it is meant for.
    FirstRequest,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerEntry {
    pub(crate) name: String,
    pub(crate) authorities: Vec<String>,
    #[serde(default)]
    pub(crate) port: u16,
    /// `ads` (the default), `policy_stream` or `rest`.
    #[serde(default)]
    pub(crate) protocol: ProtocolEntry,
}

/// What a scenario server speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProtocolEntry {
    #[default]
    Ads,
    PolicyStream,
    Rest,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackendEntry {
    pub(crate) name: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceEntry {
    #[serde(default)]
    pub(crate) server: Option<String>,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) resource: Option<Value>,
    #[serde(default)]
    pub(crate) encoded: Option<Encoded>,
    #[serde(default)]
    pub(crate) policy: Option<super::policy::PolicyEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Encoded {
    pub(crate) type_url: String,
    pub(crate) hex: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GeneratorEntry {
    pub(crate) server: String,
    pub(crate) clusters: ClustersGenerator,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClustersGenerator {
    pub(crate) count: u32,
    #[serde(default)]
    pub(crate) endpoints_per_cluster: u32,
    #[serde(default)]
    pub(crate) authority: Option<String>,
    #[serde(default = "default_prefix")]
    pub(crate) prefix: String,
    #[serde(default)]
    pub(crate) backend: Option<String>,
}

fn default_prefix() -> String {
    "generated".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepEntry {
    pub(crate) at: String,
    #[serde(default)]
    pub(crate) set: Option<ResourceEntry>,
    #[serde(default)]
    pub(crate) delete: Option<DeleteEntry>,
    #[serde(default)]
    pub(crate) faults: Option<FaultsEntry>,
    #[serde(default)]
    pub(crate) restart: Option<RestartEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteEntry {
    #[serde(default)]
    pub(crate) server: Option<String>,
    pub(crate) type_url: String,
    pub(crate) name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultsEntry {
    pub(crate) server: String,
    #[serde(default)]
    pub(crate) refuse_connections: bool,
    #[serde(default)]
    pub(crate) close_immediately: bool,
    #[serde(default)]
    pub(crate) close_after_responses: Option<u32>,
    #[serde(default)]
    pub(crate) close_code: Option<String>,
    #[serde(default)]
    pub(crate) response_delay: Option<String>,
    #[serde(default)]
    pub(crate) silent_names: Vec<String>,
    #[serde(default)]
    pub(crate) silent_types: Vec<String>,
    #[serde(default)]
    pub(crate) malformed_names: Vec<String>,
    #[serde(default)]
    pub(crate) duplicate_names: Vec<String>,
    #[serde(default)]
    pub(crate) inject: Vec<InjectEntry>,
    #[serde(default)]
    pub(crate) redirects: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) delta_unimplemented: bool,
    #[serde(default)]
    pub(crate) http_status: Option<u16>,
    #[serde(default)]
    pub(crate) malformed_body: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InjectEntry {
    pub(crate) name: String,
    pub(crate) resource: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestartEntry {
    pub(crate) server: String,
    #[serde(default)]
    pub(crate) keep_state: bool,
    #[serde(default)]
    pub(crate) down_for: Option<String>,
}
