//! What `watch`, `dump` and `graph` subscribe to, and the client they do it
//! with: the `--bootstrap` flag, the `--listener | --resource | --wildcard`
//! group (and `watch`'s `--collection`), resource type names, and one-line
//! summaries of resources.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use prost::Message;
use xdsfed::core::bootstrap::{Bootstrap, BootstrapErrorKind};
use xdsfed::client::client::{BuildError, WatchError, XdsClient};
use xdsfed::client::transport::TransportOptions;
use xdsfed::core::types::{
    AGGREGATE_CLUSTER_TYPE, ClusterDiscovery, ClusterType, ClusterView, RouteConfigView, RouteTarget, EndpointType, ListenerType, LoadAssignment, ResourceType, RouteConfigurationType, ValidatingPolicyType,
};
use xdsfed::core::policy_stream::wire::ValidatingPolicy;
use xdsfed::policy::{Policy, PolicyType};

use super::CliError;
pub(crate) use xdsfed::terminal::names::{id_of, short_name, short_version};

/// Where to look when a bootstrap is wrong.
pub(crate) const BOOTSTRAP_HINT: &str =
    "docs/bootstrap.md describes the format; `xdsfed bootstrap check FILE` validates a file";

/// The `--bootstrap FILE` flag.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BootstrapArg {
    /// The client's bootstrap: gRPC's JSON (gRFC A47), the same in YAML, or
    /// Envoy-style `config_sources` (YAML when the name ends in .yaml/.yml).
    /// Without it, gRPC's environment: the file GRPC_XDS_BOOTSTRAP names,
    /// else the JSON in GRPC_XDS_BOOTSTRAP_CONFIG.
    #[arg(long, value_name = "FILE")]
    pub(crate) bootstrap: Option<PathBuf>,
}

impl BootstrapArg {
    /// The bootstrap the flag or gRPC's environment variables give, with
    /// its credential files checked (see [`load_bootstrap`]).
    pub(crate) fn load(&self) -> Result<Bootstrap, CliError> {
        if let Some(path) = &self.bootstrap {
            return load_bootstrap(path);
        }
        // gRPC's order: a non-empty GRPC_XDS_BOOTSTRAP, then a non-empty
        // GRPC_XDS_BOOTSTRAP_CONFIG (an empty variable counts as unset).
        let bootstrap = Bootstrap::from_env().map_err(|e| {
            let hint = match e.kind() {
                BootstrapErrorKind::NotConfigured => {
                    "give --bootstrap FILE, or set GRPC_XDS_BOOTSTRAP (a file) or GRPC_XDS_BOOTSTRAP_CONFIG (its JSON)"
                }
                BootstrapErrorKind::Read { .. } => {
                    "GRPC_XDS_BOOTSTRAP must name a regular file"
                }
                _ => BOOTSTRAP_HINT,
            };
            CliError::bad_input(format!("invalid bootstrap: {e}")).hint(hint)
        })?;
        check_files(bootstrap)
    }
}

/// The `--state-dir DIR` flag.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StateDirArg {
    /// Keep the last accepted copy of every resource in DIR (created 0700
    /// if missing), and start from the copies found there: they serve at
    /// once, marked FROM_DISK, until a server confirms or replaces them.
    /// DIR must be yours and writable by nobody else. One client per
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
}

/// What to subscribe to: exactly one of these (`watch` adds its
/// `--collection` to the group, clap's `TargetArgs`).
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct TargetArgs {
    /// Follow a listener's whole graph (routes, clusters, endpoints) by its
    /// full name, e.g. xdstp://cloud.example/envoy.config.listener.v3.Listener/greeter,
    /// or by the gRPC channel target that reaches it: xds:///greeter, or
    /// xds://AUTHORITY/greeter (resolved through the bootstrap, gRFC A47).
    #[arg(long, value_name = "NAME|TARGET")]
    pub(crate) listener: Option<String>,
    /// One resource: its TYPE (listener, route, cluster, endpoint, policy, or
    /// a type URL) and its full NAME.
    #[arg(long, num_args = 2, value_names = ["TYPE", "NAME"])]
    pub(crate) resource: Option<Vec<String>>,
    /// Every resource of TYPE on the default servers (wildcard subscription).
    #[arg(long, value_name = "TYPE")]
    pub(crate) wildcard: Option<TypeArg>,
}

/// The parsed [`TargetArgs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Listener(String),
    Resource(TypeArg, String),
    Wildcard(TypeArg),
}

impl TargetArgs {
    /// The one target given; clap has already checked there is exactly one.
    pub(crate) fn target(&self) -> Result<Target, CliError> {
        if let Some(name) = &self.listener {
            return Ok(Target::Listener(name.clone()));
        }
        if let Some(pair) = &self.resource {
            let [kind, name] = pair.as_slice() else {
                return Err(CliError::bad_input("--resource takes a TYPE and a NAME"));
            };
            let kind = TypeArg::from_str(kind).map_err(|e| {
                CliError::bad_input(format!("--resource: {e}"))
                    .hint("for example: --resource cluster xdstp://cloud.example/envoy.config.cluster.v3.Cluster/payments")
            })?;
            return Ok(Target::Resource(kind, name.clone()));
        }
        match self.wildcard {
            Some(kind) => Ok(Target::Wildcard(kind)),
            None => Err(CliError::bad_input(
                "give one of --listener NAME, --resource TYPE NAME or --wildcard TYPE",
            )),
        }
    }
}

/// A resource type the command line can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TypeArg {
    Listener,
    Route,
    Cluster,
    Endpoint,
    Policy,
    /// `kyverno.http.v1alpha1.ValidatingPolicy`, from policy-stream servers.
    ValidatingPolicy,
}

impl TypeArg {
    const ALL: [TypeArg; 6] = [
        Self::Listener,
        Self::Route,
        Self::Cluster,
        Self::Endpoint,
        Self::Policy,
        Self::ValidatingPolicy,
    ];

    /// The type URL.
    pub(crate) fn type_url(self) -> &'static str {
        match self {
            Self::Listener => ListenerType::TYPE_URL,
            Self::Route => RouteConfigurationType::TYPE_URL,
            Self::Cluster => ClusterType::TYPE_URL,
            Self::Endpoint => EndpointType::TYPE_URL,
            Self::Policy => PolicyType::TYPE_URL,
            Self::ValidatingPolicy => ValidatingPolicyType::TYPE_URL,
        }
    }

    /// The message name: `envoy.config.cluster.v3.Cluster`, ….
    pub(crate) fn message(self) -> &'static str {
        let url = self.type_url();
        url.rsplit('/').next().unwrap_or(url)
    }

    /// Whether the client knows this type's list collection
    /// (`<message>Collection`): it registers the listener's and the
    /// cluster's.
    pub(crate) fn has_list_collection(self) -> bool {
        matches!(self, Self::Listener | Self::Cluster)
    }

    fn short(self) -> &'static str {
        match self {
            Self::Listener => "listener",
            Self::Route => "route",
            Self::Cluster => "cluster",
            Self::Endpoint => "endpoint",
            Self::Policy => "policy",
            Self::ValidatingPolicy => "validatingpolicy",
        }
    }
}

impl FromStr for TypeArg {
    type Err = String;

    /// Short names (`cluster`, `cds`), message names
    /// (`envoy.config.cluster.v3.Cluster`) and type URLs.
    fn from_str(text: &str) -> Result<Self, String> {
        let lower = text.trim().to_ascii_lowercase();
        let by_alias = match lower.as_str() {
            "listener" | "listeners" | "lds" => Some(Self::Listener),
            "route" | "routes" | "rds" | "routeconfiguration" => Some(Self::Route),
            "cluster" | "clusters" | "cds" => Some(Self::Cluster),
            "endpoint" | "endpoints" | "eds" | "clusterloadassignment" => Some(Self::Endpoint),
            "policy" | "policies" => Some(Self::Policy),
            "validatingpolicy" | "validatingpolicies" | "vpol" => Some(Self::ValidatingPolicy),
            _ => None,
        };
        let message = text.trim().rsplit('/').next().unwrap_or_default();
        by_alias
            .or_else(|| {
                Self::ALL
                    .into_iter()
                    .find(|t| t.type_url().rsplit('/').next() == Some(message))
            })
            .ok_or_else(|| {
                format!(
                    "unknown resource type {text:?}: use listener, route, cluster, endpoint, policy, validatingpolicy or a type URL such as {}",
                    ClusterType::TYPE_URL
                )
            })
    }
}

impl std::fmt::Display for TypeArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.short())
    }
}

/// The two kinds of collection of xDS TP1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectionShape {
    /// `xdstp://a/<type>/path/*?params`: every resource of the type directly
    /// under `path/` with those context parameters (delta xDS only).
    Glob,
    /// `xdstp://a/<type>Collection/id`: a resource that lists its members.
    List,
}

/// `watch --collection TYPE NAME`, checked: the type, whether NAME is a glob
/// or a list collection, and that the two agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CollectionTarget {
    pub(crate) kind: TypeArg,
    pub(crate) shape: CollectionShape,
    pub(crate) name: String,
}

impl CollectionTarget {
    /// From the flag's two values.
    pub(crate) fn from_flag(pair: &[String]) -> Result<Self, CliError> {
        let [kind, name] = pair else {
            return Err(CliError::bad_input("--collection takes a TYPE and a NAME"));
        };
        let kind = TypeArg::from_str(kind).map_err(|e| {
            CliError::bad_input(format!("--collection: {e}"))
                .hint(collection_forms(TypeArg::Cluster))
        })?;
        Self::parse(kind, name)
    }

    /// Tells a glob from a list collection by its name, and refuses
    /// anything else before a client is built.
    pub(crate) fn parse(kind: TypeArg, name: &str) -> Result<Self, CliError> {
        let Some((shape, type_segment)) = collection_shape(name) else {
            return Err(CliError::bad_input(format!(
                "--collection {kind}: {name:?} is neither a glob collection nor a list collection"
            ))
            .hint(collection_forms(kind)));
        };
        if shape == CollectionShape::List && !kind.has_list_collection() {
            return Err(CliError::bad_input(format!(
                "--collection {kind}: list collections exist for listener and cluster only"
            ))
            .hint(format!(
                "a glob collection of {kind} works: xdstp://AUTHORITY/{}/PATH/*",
                kind.message()
            )));
        }
        let expected = match shape {
            CollectionShape::Glob => kind.message().to_owned(),
            CollectionShape::List => format!("{}Collection", kind.message()),
        };
        if type_segment != expected {
            return Err(CliError::bad_input(format!(
                "--collection {kind}: {name} names type {type_segment}, not {expected}"
            ))
            .hint(collection_forms(kind)));
        }
        Ok(Self {
            kind,
            shape,
            name: name.to_owned(),
        })
    }
}

/// The collection kind of an `xdstp://` name and its type segment: a glob
/// when its path (before `?` and `#`) ends in `/*`, a list collection when
/// its type ends in `Collection`.
fn collection_shape(name: &str) -> Option<(CollectionShape, &str)> {
    let rest = name.strip_prefix("xdstp://")?;
    let path = rest.split(['?', '#']).next().unwrap_or(rest);
    let (_authority, typed) = path.split_once('/')?;
    let (type_segment, id) = typed.split_once('/')?;
    if id == "*" || id.ends_with("/*") {
        Some((CollectionShape::Glob, type_segment))
    } else if type_segment.ends_with("Collection") && !id.is_empty() {
        Some((CollectionShape::List, type_segment))
    } else {
        None
    }
}

/// Both forms of collection name for `kind`, as a hint.
fn collection_forms(kind: TypeArg) -> String {
    let glob = format!(
        "a glob collection ends in /*, e.g. xdstp://cloud.example/{}/pool/*",
        kind.message()
    );
    if kind.has_list_collection() {
        format!(
            "{glob}; a list collection names a …Collection type, e.g. xdstp://cloud.example/{}Collection/foo",
            kind.message()
        )
    } else {
        glob
    }
}

/// Reads and validates a bootstrap, and reads the TLS files its servers
/// name; every problem is bad input (exit 2) naming the file and, for a
/// wrong field, its path. A server whose CA is missing would otherwise be
/// retried forever.
pub(crate) fn load_bootstrap(path: &Path) -> Result<Bootstrap, CliError> {
    let bootstrap = Bootstrap::from_file(path).map_err(|e| {
        let hint = match e.kind() {
            BootstrapErrorKind::Read { .. } => {
                "give the path of a regular file to --bootstrap (or GRPC_XDS_BOOTSTRAP)"
            }
            _ => BOOTSTRAP_HINT,
        };
        CliError::bad_input(format!("invalid bootstrap: {e}")).hint(hint)
    })?;
    check_files(bootstrap).map_err(|e| e.with_cause(format!("in {}", path.display())))
}

/// `bootstrap` once its credential files are known to be readable PEM.
fn check_files(bootstrap: Bootstrap) -> Result<Bootstrap, CliError> {
    bootstrap.check_credential_files().map_err(|e| {
        CliError::bad_input(format!("invalid bootstrap: {e}"))
            .hint("the TLS files of channel_creds must be regular PEM files of at most 1 MiB")
    })?;
    Ok(bootstrap)
}

/// A client for `bootstrap` with every type the command line can name
/// registered. Must run inside the tokio runtime.
///
/// `gives_up_after` is the time a one-shot command (`dump`, `graph`) waits
/// in all. The handshake deadline is then at most half of it, so that a
/// server that accepts connections and never answers is found out, counted
/// as a failure and fallen back from before the command ends, rather than
/// reported as a server without the resource.
///
/// `state_dir` is the `--state-dir` flag's directory, if given.
pub(crate) fn build_client(
    bootstrap: Bootstrap,
    gives_up_after: Option<Duration>,
    state_dir: Option<&Path>,
) -> Result<XdsClient, CliError> {
    let mut options = TransportOptions::default();
    if let Some(total) = gives_up_after {
        options.connect_timeout = options.connect_timeout.min(total / 2);
    }
    let mut builder = XdsClient::builder(bootstrap)
        .register::<PolicyType>()
        .transport_options(options);
    if let Some(dir) = state_dir {
        builder = builder.state_dir(dir);
    }
    builder.build().map_err(|e| build_error(&e))
}

/// A client the builder refused: a state directory that cannot be used is
/// bad input (`--state-dir`, exit code 2); anything else a failed run.
pub(crate) fn build_error(e: &BuildError) -> CliError {
    match e {
        BuildError::StateDir(_) => CliError::bad_input("cannot use the --state-dir directory")
            .caused_by(e)
            .hint(STATE_DIR_HINT),
        _ => CliError::runtime("cannot start the xDS client").caused_by(e),
    }
}

/// Where a state directory belongs: the records hold what servers sent.
const STATE_DIR_HINT: &str = "give a directory of your own that only you may write, e.g. \
    $XDG_STATE_HOME/xdsfed or /var/lib/SERVICE/xds (created 0700 if missing)";

/// A watch the client refused: the name or its authority is bad input.
pub(crate) fn watch_error(name: &str, e: &WatchError) -> CliError {
    CliError::bad_input(format!("cannot watch {name}"))
        .caused_by(e)
        .hint(match e {
            WatchError::Authority(_) => {
                "the name's authority must be listed under `authorities` in the bootstrap"
            }
            _ => "names look like xdstp://AUTHORITY/envoy.config.cluster.v3.Cluster/ID, or an old-style name",
        })
}

/// The listener `--listener` names: a full resource name as given, or the
/// one an `xds:` channel target resolves to through the bootstrap (gRFC A47:
/// `xds:///svc` by `client_default_listener_resource_name_template`,
/// `xds://authority/svc` by that authority's template).
pub(crate) fn listener_name(client: &XdsClient, given: &str) -> Result<String, CliError> {
    if !given.starts_with("xds:") {
        return Ok(given.to_owned());
    }
    client
        .registry()
        .listener_resource_name(given)
        .map(|name| name.to_string())
        .map_err(|e| {
            CliError::bad_input(format!("--listener {given}: the target does not resolve"))
                .caused_by(&e)
                .hint("an xds: target's authority must be listed under `authorities` in the bootstrap")
        })
}

/// The resource types with a one-line description of their resources.
pub(crate) trait Describe: ResourceType {
    /// The short name printed in event lines.
    const SHORT: &'static str;
    /// What matters in `resource`, in one short line.
    fn summary(resource: &Self::Resource) -> String;
}

impl Describe for ListenerType {
    const SHORT: &'static str = "listener";
    fn summary(listener: &Listener) -> String {
        let hcm = listener
            .api_listener
            .as_ref()
            .and_then(|a| a.api_listener.as_ref())
            .and_then(|any| HttpConnectionManager::decode(any.value.as_slice()).ok());
        match hcm.and_then(|h| h.route_specifier) {
            Some(RouteSpecifier::Rds(rds)) => {
                format!("routes {}", short_name(&rds.route_config_name))
            }
            Some(RouteSpecifier::RouteConfig(rc)) => {
                format!("inline routes, {} virtual hosts", rc.virtual_hosts.len())
            }
            Some(RouteSpecifier::ScopedRoutes(_)) => "scoped routes".to_owned(),
            None => format!("{} filter chains", listener.filter_chains.len()),
        }
    }
}

impl Describe for RouteConfigurationType {
    const SHORT: &'static str = "route";
    fn summary(rc: &RouteConfigView) -> String {
        let names: Vec<String> = route_clusters(rc)
            .map(|(name, weight)| match weight {
                Some(w) => format!("{} {w}", short_name(name)),
                None => short_name(name),
            })
            .collect();
        format!(
            "{} virtual hosts → {}",
            rc.virtual_host_count(),
            if names.is_empty() {
                "no clusters".to_owned()
            } else {
                names.join(", ")
            }
        )
    }
}

impl Describe for ClusterType {
    const SHORT: &'static str = "cluster";
    fn summary(cluster: &ClusterView) -> String {
        match cluster.discovery() {
            ClusterDiscovery::Eds { service_name, .. } if !service_name.is_empty() => {
                format!("EDS endpoints {}", short_name(service_name))
            }
            ClusterDiscovery::Eds { .. } => "EDS".to_owned(),
            ClusterDiscovery::Aggregate { .. } => AGGREGATE_CLUSTER_TYPE.to_owned(),
            ClusterDiscovery::Static { .. } => "STATIC".to_owned(),
            ClusterDiscovery::LogicalDns { .. } => "LOGICAL_DNS".to_owned(),
        }
    }
}

impl Describe for EndpointType {
    const SHORT: &'static str = "endpoint";
    fn summary(cla: &LoadAssignment) -> String {
        let addresses = endpoint_addresses(cla);
        let shown: Vec<&str> = addresses.iter().take(3).map(|(_, a)| a.as_str()).collect();
        let more = addresses.len().saturating_sub(shown.len());
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{} in {}{}{}",
            plural(addresses.len(), "endpoint", "endpoints"),
            plural(cla.localities().len(), "locality", "localities"),
            if shown.is_empty() { "" } else { ": " },
            shown.join(", ")
        ) + &if more > 0 {
            format!(" (+{more})")
        } else {
            String::new()
        }
    }
}

impl Describe for PolicyType {
    const SHORT: &'static str = "policy";
    fn summary(policy: &Policy) -> String {
        format!("{} policy {}", policy.kind, policy.name)
    }
}

impl Describe for ValidatingPolicyType {
    const SHORT: &'static str = "validatingpolicy";
    fn summary(policy: &ValidatingPolicy) -> String {
        let Some(spec) = &policy.spec else {
            return "no spec".to_owned();
        };
        let count = spec.validations.len();
        let messages: Vec<&str> = spec
            .validations
            .iter()
            .filter_map(|v| v.message.as_deref())
            .take(2)
            .collect();
        format!(
            "{} {count} validation{}{}{}",
            spec.evaluation_mode,
            if count == 1 { "" } else { "s" },
            if messages.is_empty() { "" } else { ": " },
            messages.join("; ")
        )
    }
}

/// Every cluster a route configuration's routes send to, with its weight
/// when the route splits traffic, each once, in order of first appearance
/// (a later weight for the same cluster is ignored). The names borrow from
/// `rc`: a configuration may route to 100 000 clusters.
pub(crate) fn route_clusters(
    rc: &RouteConfigView,
) -> impl Iterator<Item = (&str, Option<u32>)> + '_ {
    // A set beside the iteration, not a scan of what came before.
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    rc.targets()
        .filter_map(|target| match target {
            RouteTarget::Cluster(name) => Some((name, None)),
            RouteTarget::Weighted(name, weight) => Some((name, Some(weight))),
            RouteTarget::Mirror(_) | RouteTarget::Header(_) => None,
        })
        .filter(move |&(name, _)| seen.insert(name))
}

/// `(locality, "host:port")` for every endpoint of an assignment.
pub(crate) fn endpoint_addresses(cla: &LoadAssignment) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(cla.endpoint_count());
    for locality in cla.localities() {
        let where_ = [locality.region(), locality.zone(), locality.sub_zone()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        for endpoint in locality.endpoints() {
            out.push((
                where_.clone(),
                format!("{}:{}", endpoint.address, endpoint.port),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_accept_short_names_message_names_and_type_urls() {
        assert_eq!("cluster".parse(), Ok(TypeArg::Cluster));
        assert_eq!("EDS".parse(), Ok(TypeArg::Endpoint));
        assert_eq!(
            "envoy.config.route.v3.RouteConfiguration".parse(),
            Ok(TypeArg::Route)
        );
        assert_eq!(
            "type.googleapis.com/xdsfed.policy.v1.Policy".parse(),
            Ok(TypeArg::Policy)
        );
        assert_eq!(
            "kyverno.http.v1alpha1.ValidatingPolicy".parse(),
            Ok(TypeArg::ValidatingPolicy)
        );
        assert!("secret".parse::<TypeArg>().is_err());
    }

    fn collection(kind: TypeArg, name: &str) -> Result<CollectionTarget, String> {
        CollectionTarget::parse(kind, name).map_err(|e| e.to_string())
    }

    #[test]
    fn collection_names_ending_in_a_star_are_globs() {
        for name in [
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/*",
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/*?zone=a",
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/*",
        ] {
            let target = collection(TypeArg::Cluster, name).unwrap();
            assert_eq!(target.shape, CollectionShape::Glob, "{name}");
            assert_eq!(target.name, name);
        }
        // Any type has globs, list collections or not.
        let route = "xdstp://a/envoy.config.route.v3.RouteConfiguration/r/*";
        assert_eq!(
            collection(TypeArg::Route, route).unwrap().shape,
            CollectionShape::Glob
        );
    }

    #[test]
    fn collection_names_of_a_collection_type_are_lists() {
        for (kind, name) in [
            (
                TypeArg::Cluster,
                "xdstp://cloud.example/envoy.config.cluster.v3.ClusterCollection/foo",
            ),
            (
                TypeArg::Listener,
                "xdstp://cloud.example/envoy.config.listener.v3.ListenerCollection/foo?env=prod",
            ),
        ] {
            let target = collection(kind, name).unwrap();
            assert_eq!(target.shape, CollectionShape::List, "{name}");
        }
    }

    #[test]
    fn other_collection_names_are_refused_with_both_forms() {
        for name in [
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/one",
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/pool/one#alt=x/*",
            "pool/*",
            "xdstp://cloud.example/envoy.config.cluster.v3.ClusterCollection/",
        ] {
            let error = collection(TypeArg::Cluster, name).unwrap_err();
            assert!(
                error.contains("neither a glob collection nor a list collection"),
                "{name}: {error}"
            );
            assert!(
                error.contains("pool/*") && error.contains("ClusterCollection/foo"),
                "{error}"
            );
        }
    }

    #[test]
    fn list_collections_of_other_types_are_refused() {
        let error = collection(
            TypeArg::Route,
            "xdstp://a/envoy.config.route.v3.RouteConfigurationCollection/foo",
        )
        .unwrap_err();
        assert!(error.contains("listener and cluster only"), "{error}");
    }

    #[test]
    fn collection_of_another_type_is_refused() {
        let error = collection(
            TypeArg::Cluster,
            "xdstp://a/envoy.config.listener.v3.ListenerCollection/foo",
        )
        .unwrap_err();
        assert!(
            error.contains("not envoy.config.cluster.v3.ClusterCollection"),
            "{error}"
        );
        let error = collection(
            TypeArg::Listener,
            "xdstp://a/envoy.config.cluster.v3.Cluster/pool/*",
        )
        .unwrap_err();
        assert!(
            error.contains("not envoy.config.listener.v3.Listener"),
            "{error}"
        );
    }

    #[test]
    fn collection_flag_needs_a_known_type() {
        let pair = ["secret".to_owned(), "xdstp://a/T/p/*".to_owned()];
        let error = CollectionTarget::from_flag(&pair).unwrap_err();
        assert_eq!(error.exit_code(), std::process::ExitCode::from(2));
        assert!(
            error.to_string().contains("unknown resource type"),
            "{error}"
        );
    }
}
