//! One management server: [`ServerConfig`], its credentials and transport
//! variant, and how a gRPC `xds_servers` entry is read.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::call_creds::{CallCreds, parse_call_creds};
use super::certs::parse_duration;
use super::target::check_server_uri;
use super::walk::{At, Result};

/// How the client speaks ADS with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum ApiVariant {
    /// `AGGREGATED_DELTA_GRPC`: incremental ADS. The default; the transport
    /// falls back to SotW when the server answers UNIMPLEMENTED, unless pinned.
    #[default]
    Delta,
    /// `AGGREGATED_GRPC`: state-of-the-world ADS.
    Sotw,
}

impl ApiVariant {
    /// Reads an Envoy `ApiConfigSource.api_type` name; only the aggregated
    /// (ADS) variants make sense for a federated client.
    pub(crate) fn from_api_type(at: &At<'_>) -> Result<Self> {
        match at.str()? {
            "AGGREGATED_DELTA_GRPC" => Ok(ApiVariant::Delta),
            "AGGREGATED_GRPC" => Ok(ApiVariant::Sotw),
            other => Err(at.error(format!(
                "unsupported api_type {other:?}: expected \"AGGREGATED_DELTA_GRPC\", \"AGGREGATED_GRPC\" or \"REST\""
            ))),
        }
    }
}

/// Which protocol the client speaks with a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ServerProtocol {
    /// xDS over ADS (delta or SotW, see [`ApiVariant`]). The default.
    #[default]
    Ads,
    /// The policy-distribution stream (`kyverno.http.v1alpha1`): full
    /// snapshots of `ValidatingPolicy` resources (see
    /// [`crate::policy_stream`]).
    PolicyStream(PolicyStreamTiming),
    /// HTTP CDN delivery (xDS TP1 "Use cases"): each resource is a file
    /// fetched with a plain `GET` from a static file host, polled every
    /// `refresh_delay` (see [`crate::source::cdn`]).
    HttpCdn(CdnTiming),
    /// REST-JSON polling (`"api_type": "REST"`): state-of-the-world
    /// `DiscoveryRequest`s POSTed as JSON to `/v3/discovery:{type}`, one
    /// per type every `refresh_delay` (see [`crate::source::rest`]).
    Rest(RestTiming),
    /// A file holding one `DiscoveryResponse`, re-read when it changes
    /// (see [`crate::source::file`]).
    File(FileSource),
}

impl ServerProtocol {
    /// `ads`, `policy_stream`, `rest` or `file`, as the bootstrap spells it.
    pub fn name(&self) -> &'static str {
        match self {
            ServerProtocol::Ads => "ads",
            ServerProtocol::PolicyStream(_) => "policy_stream",
            ServerProtocol::HttpCdn(_) => "http_cdn",
            ServerProtocol::Rest(_) => "rest",
            ServerProtocol::File(_) => "file",
        }
    }
}

/// The timers of a REST-JSON source (Envoy's `ApiConfigSource` fields of
/// the same names, with Envoy's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RestTiming {
    /// How long after an answer the next poll of its type leaves (default
    /// 1 s).
    pub refresh_delay: Duration,
    /// How long one request may take, connecting included, before it
    /// counts as the server failing (default 1 s).
    pub request_timeout: Duration,
}

impl Default for RestTiming {
    fn default() -> Self {
        RestTiming {
            refresh_delay: Duration::from_secs(1),
            request_timeout: Duration::from_secs(1),
        }
    }
}

/// How a source file is written, told by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileFormat {
    /// Binary protobuf (`.pb`, `.bin`).
    Protobuf,
    /// The protobuf JSON mapping (`.json`).
    Json,
    /// The protobuf JSON mapping written as YAML (`.yaml`, `.yml`).
    Yaml,
}

impl FileFormat {
    /// The format `path`'s extension announces; the problem in words for
    /// any other extension.
    pub fn of(path: &Path) -> std::result::Result<Self, String> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("pb" | "bin") => Ok(FileFormat::Protobuf),
            Some("json") => Ok(FileFormat::Json),
            Some("yaml" | "yml") => Ok(FileFormat::Yaml),
            _ => Err(format!(
                "{} has no known extension: expected .pb or .bin (binary protobuf), .json or .yaml/.yml (the protobuf JSON mapping)",
                path.display()
            )),
        }
    }
}

/// The `api_type` that names a REST-JSON source, in both bootstrap formats.
pub(crate) const REST_API_TYPE: &str = "REST";

/// Reads `refresh_delay` and `request_timeout` of `at` (a server entry or
/// an Envoy `api_config_source`); each has a default.
pub(crate) fn parse_rest_timing(at: &At<'_>) -> Result<RestTiming> {
    let mut timing = RestTiming::default();
    if let Some(d) = at.get("refresh_delay")? {
        timing.refresh_delay = parse_duration(&d)?;
    }
    if let Some(d) = at.get("request_timeout")? {
        timing.request_timeout = parse_duration(&d)?;
    }
    Ok(timing)
}

/// A filesystem source: the file, and the directory whose changes reload
/// it (Envoy's `watched_directory`: an atomic rename or a symlink swap
/// there is seen even when the file itself is replaced).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileSource {
    /// The file, as the bootstrap names it (a relative path is taken
    /// relative to the working directory, like every file a bootstrap names).
    pub path: PathBuf,
    /// The directory watched for changes; `None` watches the file's parent.
    pub watched_directory: Option<PathBuf>,
    /// How the file is written, from its extension.
    pub format: FileFormat,
    /// How long a burst of changes is let settle before the file is read
    /// again (default 100 ms).
    pub debounce: Duration,
    /// How often the file is checked when the directory cannot be watched
    /// (default 5 s).
    pub poll_interval: Duration,
}

impl FileSource {
    /// A source reading `path` (its format from its extension), watching
    /// its parent directory.
    pub fn new(path: impl Into<PathBuf>) -> std::result::Result<Self, String> {
        let path = path.into();
        let format = FileFormat::of(&path)?;
        Ok(FileSource {
            path,
            watched_directory: None,
            format,
            debounce: Duration::from_millis(100),
            poll_interval: Duration::from_secs(5),
        })
    }

    /// The directory to watch: `watched_directory`, else the file's parent
    /// (`.` for a bare file name).
    pub fn directory(&self) -> PathBuf {
        if let Some(dir) = &self.watched_directory {
            return dir.clone();
        }
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// `file://` and the path: the `server_uri` of the source.
    pub fn uri(&self) -> String {
        format!("{FILE_SCHEME}{}", self.path.display())
    }

    /// A server entry for this source.
    pub fn server(self) -> ServerConfig {
        ServerConfig {
            server_uri: self.uri(),
            protocol: ServerProtocol::File(self),
            ..ServerConfig::insecure("")
        }
    }
}

/// The prefix of a filesystem source's `server_uri`.
pub const FILE_SCHEME: &str = "file://";

/// The timers of a policy stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyStreamTiming {
    /// How often the client asks again by re-sending its last ACK or NACK
    /// (the protocol's server answers only requests; default 10 s).
    pub poll_interval: Duration,
    /// How often the client calls `HealthCheck` (default 30 s).
    pub health_check_interval: Duration,
}

impl Default for PolicyStreamTiming {
    fn default() -> Self {
        PolicyStreamTiming {
            poll_interval: Duration::from_secs(10),
            health_check_interval: Duration::from_secs(30),
        }
    }
}

/// The timers of an HTTP CDN source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CdnTiming {
    /// How often each subscribed resource is fetched again (default 30 s).
    pub refresh_delay: Duration,
    /// How long one fetch may take, from connecting to the last byte of
    /// the body (default 5 s).
    pub request_timeout: Duration,
}

impl Default for CdnTiming {
    fn default() -> Self {
        CdnTiming {
            refresh_delay: Duration::from_secs(30),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// The `api_type` of an HTTP CDN server (an xdsfed extension, in both
/// bootstrap formats).
pub(crate) const HTTP_CDN_API_TYPE: &str = "HTTP_CDN";

/// Credentials for the channel to a management server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChannelCreds {
    /// Plaintext HTTP/2.
    Insecure,
    /// TLS with rustls (gRFC A65 `tls` credentials).
    Tls {
        /// PEM file of the CAs that sign the server's certificate; the
        /// platform's roots are not used, so this is required.
        ca_certificate_file: Option<PathBuf>,
        /// PEM certificate chain for mTLS.
        certificate_file: Option<PathBuf>,
        /// PEM private key for mTLS.
        private_key_file: Option<PathBuf>,
    },
}

impl ChannelCreds {
    /// The gRPC bootstrap name of this credential type.
    pub fn type_name(&self) -> &'static str {
        match self {
            ChannelCreds::Insecure => "insecure",
            ChannelCreds::Tls { .. } => "tls",
        }
    }
}

/// Server features that change how the client behaves with a server. Two
/// bootstrap entries for one server that differ in these need different
/// streams; any other feature string is ignored for that purpose (gRFC A47:
/// "all known server features -- unknown features can be removed").
pub mod features {
    /// gRFC A53: keep using LDS/CDS resources the server deletes.
    pub const IGNORE_RESOURCE_DELETION: &str = "ignore_resource_deletion";
    /// gRFC A88: fail watchers on data errors even with a cached copy.
    pub const FAIL_ON_DATA_ERRORS: &str = "fail_on_data_errors";
    /// gRFC A88: a does-not-exist timer firing is a transient error.
    pub const RESOURCE_TIMER_IS_TRANSIENT_ERROR: &str = "resource_timer_is_transient_error";
    /// gRFC A81: the server is trusted to configure security-sensitive fields.
    pub const TRUSTED_XDS_SERVER: &str = "trusted_xds_server";

    /// Every feature above.
    pub const BEHAVIOUR_CHANGING: &[&str] = &[
        IGNORE_RESOURCE_DELETION,
        FAIL_ON_DATA_ERRORS,
        RESOURCE_TIMER_IS_TRANSIENT_ERROR,
        TRUSTED_XDS_SERVER,
    ];
}

/// One management server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    /// The target, e.g. `127.0.0.1:18000`, `http://host:port` or `https://host:port`.
    pub server_uri: String,
    /// The first supported entry of `channel_creds`.
    pub channel_creds: ChannelCreds,
    /// Every supported entry of `call_creds` (gRFC A97), in order.
    pub call_creds: Vec<CallCreds>,
    /// `server_features`, e.g. `ignore_resource_deletion`, `trusted_xds_server`.
    pub server_features: Vec<String>,
    /// Delta or SotW.
    pub api: ApiVariant,
    /// Whether `api` was given explicitly (no automatic fall back to SotW).
    pub api_pinned: bool,
    /// ADS, or another protocol.
    pub protocol: ServerProtocol,
}

impl ServerConfig {
    /// An insecure delta ADS server at `server_uri`, with nothing pinned.
    pub fn insecure(server_uri: impl Into<String>) -> Self {
        ServerConfig {
            server_uri: server_uri.into(),
            channel_creds: ChannelCreds::Insecure,
            call_creds: Vec::new(),
            server_features: Vec::new(),
            api: ApiVariant::Delta,
            api_pinned: false,
            protocol: ServerProtocol::Ads,
        }
    }

    /// Whether `server_features` holds `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.server_features.iter().any(|f| f == feature)
    }

    /// The [`features::BEHAVIOUR_CHANGING`] features this server has, sorted
    /// and without repeats.
    pub fn behaviour_features(&self) -> Vec<&'static str> {
        features::BEHAVIOUR_CHANGING
            .iter()
            .copied()
            .filter(|f| self.has_feature(f))
            .collect()
    }
}

/// The credential types this client supports, in the words of the bootstrap.
const SUPPORTED_CREDS: &str = "\"insecure\" or \"tls\"";

/// Reads one gRPC `xds_servers` entry:
/// `{"server_uri", "channel_creds": [{"type", "config"}], "call_creds", "server_features", "api_type",
/// "protocol", "policy_stream", "refresh_delay", "request_timeout"}`.
/// `api_type`, `protocol`, `policy_stream` and the REST and CDN timers are xdsfed
/// extensions (gRPC ignores them as unknown fields).
pub(crate) fn parse_server(at: &At<'_>) -> Result<ServerConfig> {
    at.object()?;
    let cdn = match at.get("api_type")? {
        Some(t) => t.str()? == HTTP_CDN_API_TYPE,
        None => false,
    };
    let uri_at = at.require("server_uri", "a non-empty string")?;
    let server_uri = uri_at.non_empty_str()?.to_owned();
    if server_uri.starts_with("file:") {
        return parse_file_server(at, &uri_at, &server_uri);
    }
    if let Some(dir) = at.get("watched_directory")? {
        return Err(dir.error("only for a filesystem source (a file:// server_uri)"));
    }
    let checked = if cdn {
        check_cdn_uri(&server_uri)
    } else {
        check_server_uri(&server_uri)
    };
    checked.map_err(|problem| uri_at.error(problem))?;
    let creds = at.require("channel_creds", "an array of {\"type\": ...} objects")?;
    let channel_creds = parse_channel_creds(&creds)?;
    let call_creds = parse_call_creds(at, &channel_creds)?;
    let server_features = parse_features(at)?;
    let api_type = at.get("api_type")?;
    if let Some(api_type) = &api_type
        && api_type.str()? == REST_API_TYPE
    {
        return Ok(ServerConfig {
            server_uri,
            channel_creds,
            call_creds,
            server_features,
            // REST-JSON polling is state of the world (no delta over REST).
            api: ApiVariant::Sotw,
            api_pinned: true,
            protocol: parse_rest_protocol(at)?,
        });
    }
    if cdn {
        return Ok(ServerConfig {
            server_uri,
            channel_creds,
            call_creds,
            server_features,
            // Each file holds a whole `DiscoveryResponse`: the nearest of
            // the two ADS variants is state-of-the-world.
            api: ApiVariant::Sotw,
            api_pinned: true,
            protocol: parse_cdn(at)?,
        });
    }
    for field in ["refresh_delay", "request_timeout"] {
        if let Some(t) = at.get(field)? {
            return Err(t.error(format!(
                "only for a server with \"api_type\": \"REST\" or \"{HTTP_CDN_API_TYPE}\""
            )));
        }
    }
    let (api, api_pinned) = match api_type {
        Some(api_type) => (ApiVariant::from_api_type(&api_type)?, true),
        None => (ApiVariant::Delta, false),
    };
    let protocol = parse_protocol(at)?;
    Ok(ServerConfig {
        server_uri,
        channel_creds,
        call_creds,
        server_features,
        api,
        api_pinned,
        protocol,
    })
}

/// A REST server entry's protocol: its timers; `protocol` and
/// `policy_stream` name other protocols, so they are refused here.
fn parse_rest_protocol(at: &At<'_>) -> Result<ServerProtocol> {
    for field in ["protocol", "policy_stream"] {
        if let Some(t) = at.get(field)? {
            return Err(t.error("not for a server with \"api_type\": \"REST\" (REST-JSON polling)"));
        }
    }
    Ok(ServerProtocol::Rest(parse_rest_timing(at)?))
}

/// `"protocol": "ads" | "policy_stream"`, with the policy stream's timers
/// in `"policy_stream": {"poll_interval", "health_check_interval"}`.
fn parse_protocol(at: &At<'_>) -> Result<ServerProtocol> {
    let timing = at.get("policy_stream")?;
    let Some(protocol) = at.get("protocol")? else {
        return match timing {
            Some(t) => Err(t.error("only for a server with \"protocol\": \"policy_stream\"")),
            None => Ok(ServerProtocol::Ads),
        };
    };
    match protocol.str()? {
        "ads" => match timing {
            Some(t) => Err(t.error("only for a server with \"protocol\": \"policy_stream\"")),
            None => Ok(ServerProtocol::Ads),
        },
        "policy_stream" => Ok(ServerProtocol::PolicyStream(match timing {
            Some(t) => parse_timing(&t)?,
            None => PolicyStreamTiming::default(),
        })),
        other => Err(protocol.error(format!(
            "unsupported protocol {other:?}: expected \"ads\" or \"policy_stream\""
        ))),
    }
}

/// A filesystem source, `{"server_uri": "file://PATH", "watched_directory":
/// "DIR"}`: everything after `file://` is the path. `channel_creds` is not
/// needed (and not read); `protocol`, if given, must say `file`.
fn parse_file_server(at: &At<'_>, uri_at: &At<'_>, uri: &str) -> Result<ServerConfig> {
    let Some(path) = uri.strip_prefix(FILE_SCHEME).filter(|p| !p.is_empty()) else {
        return Err(uri_at.error(
            "expected file://PATH (file:///etc/xds/config.yaml, or file://config.yaml relative to the working directory)",
        ));
    };
    if let Some(protocol) = at.get("protocol")?
        && protocol.str()? != "file"
    {
        return Err(
            protocol.error("a file:// server is a filesystem source: expected \"file\" or nothing")
        );
    }
    if let Some(timing) = at.get("policy_stream")? {
        return Err(timing.error("only for a server with \"protocol\": \"policy_stream\""));
    }
    let mut source = FileSource::new(path).map_err(|problem| uri_at.error(problem))?;
    if let Some(dir) = at.get("watched_directory")? {
        source.watched_directory = Some(PathBuf::from(dir.non_empty_str()?));
    }
    let mut server = source.server();
    server.server_features = parse_features(at)?;
    Ok(server)
}

/// `server_features`. gRFC A47 types these as google.protobuf.Value:
/// entries that are not strings are ignored, as gRPC does.
fn parse_features(at: &At<'_>) -> Result<Vec<String>> {
    Ok(match at.get("server_features")? {
        Some(list) => list
            .array()?
            .iter()
            .filter_map(|f| f.value.as_str().map(str::to_owned))
            .collect(),
        None => Vec::new(),
    })
}

/// An `HTTP_CDN` entry's timers, `"refresh_delay"` and `"request_timeout"`
/// (protobuf JSON durations); it speaks no other protocol.
fn parse_cdn(at: &At<'_>) -> Result<ServerProtocol> {
    for field in ["protocol", "policy_stream"] {
        if let Some(t) = at.get(field)? {
            return Err(t.error(format!(
                "not for a server with \"api_type\": \"{HTTP_CDN_API_TYPE}\""
            )));
        }
    }
    cdn_timing(at).map(ServerProtocol::HttpCdn)
}

/// `refresh_delay` and `request_timeout` of `at`, each with its default.
pub(crate) fn cdn_timing(at: &At<'_>) -> Result<CdnTiming> {
    let mut timing = CdnTiming::default();
    if let Some(d) = at.get("refresh_delay")? {
        timing.refresh_delay = parse_duration(&d)?;
    }
    if let Some(d) = at.get("request_timeout")? {
        timing.request_timeout = parse_duration(&d)?;
    }
    Ok(timing)
}

/// An HTTP CDN's `server_uri`: `http://` or `https://`, a host and port as
/// for any server, then an optional base path; no query, fragment or user.
pub(crate) fn check_cdn_uri(uri: &str) -> std::result::Result<(), String> {
    const EXPECTED: &str = "expected http://host[:port][/base/path] or https://…";
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(format!("has no scheme: {EXPECTED}"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("the {scheme:?} scheme is not HTTP: {EXPECTED}"));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if path.contains(['?', '#']) {
        return Err(format!("has a query or fragment: {EXPECTED}"));
    }
    if let Some(c) = path.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("contains {c:?}: {EXPECTED}"));
    }
    check_server_uri(&format!("{scheme}://{authority}"))
}

/// The policy stream's timers; each has a default.
fn parse_timing(at: &At<'_>) -> Result<PolicyStreamTiming> {
    at.object()?;
    let mut timing = PolicyStreamTiming::default();
    if let Some(d) = at.get("poll_interval")? {
        timing.poll_interval = parse_duration(&d)?;
    }
    if let Some(d) = at.get("health_check_interval")? {
        timing.health_check_interval = parse_duration(&d)?;
    }
    Ok(timing)
}

/// The first supported entry wins; unsupported types before it are skipped,
/// as gRPC does, so that one bootstrap can serve clients with different
/// credential support.
pub(crate) fn parse_channel_creds(at: &At<'_>) -> Result<ChannelCreds> {
    let mut seen = Vec::new();
    for entry in at.array()? {
        let kind = entry.require("type", "a string")?.str()?;
        match kind {
            "insecure" => return Ok(ChannelCreds::Insecure),
            "tls" => return parse_tls_config(&entry),
            other => seen.push(format!("{other:?}")),
        }
    }
    Err(at.error(if seen.is_empty() {
        format!("no channel credentials: expected at least one of type {SUPPORTED_CREDS}")
    } else {
        format!(
            "no supported channel credentials (found {}): expected type {SUPPORTED_CREDS}",
            seen.join(", ")
        )
    }))
}

/// gRFC A65 `tls` config. `ca_certificate_file` is required because this
/// client does not read the platform's root store: a management server is
/// trusted only through CAs named in the bootstrap.
fn parse_tls_config(entry: &At<'_>) -> Result<ChannelCreds> {
    let Some(config) = entry.get("config")? else {
        return Err(entry.missing(
            "config",
            "an object with \"ca_certificate_file\" (the platform's roots are not used)",
        ));
    };
    let path = |key: &str| -> Result<Option<PathBuf>> {
        match config.get(key)? {
            Some(at) => Ok(Some(PathBuf::from(at.non_empty_str()?))),
            None => Ok(None),
        }
    };
    let ca_certificate_file = path("ca_certificate_file")?;
    if ca_certificate_file.is_none() {
        return Err(config.missing(
            "ca_certificate_file",
            "a PEM file path (the platform's roots are not used)",
        ));
    }
    let certificate_file = path("certificate_file")?;
    let private_key_file = path("private_key_file")?;
    match (&certificate_file, &private_key_file) {
        (Some(_), None) => Err(config.missing(
            "private_key_file",
            "a PEM file path, since certificate_file is set",
        )),
        (None, Some(_)) => Err(config.missing(
            "certificate_file",
            "a PEM file path, since private_key_file is set",
        )),
        _ => Ok(ChannelCreds::Tls {
            ca_certificate_file,
            certificate_file,
            private_key_file,
        }),
    }
}

/// Reads a non-empty `xds_servers` array.
pub(crate) fn parse_server_list(at: &At<'_>) -> Result<Vec<ServerConfig>> {
    let servers = at
        .array()?
        .iter()
        .map(parse_server)
        .collect::<Result<Vec<_>>>()?;
    Ok(servers)
}
