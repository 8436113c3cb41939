//! Envoy-style bootstraps: `default_config_source` and `config_sources`,
//! mapped onto the same model as gRPC's `xds_servers` and `authorities`.
//!
//! ```text
//! default_config_source ─────────────────────────────► Bootstrap.xds_servers
//! config_sources[i].authorities[j].name ─┐
//! config_sources[i].api_config_source ───┴──► authorities[name].xds_servers
//! config_sources[i].authorities[j]
//!   .fallback_on_reachability_only ─────────► authorities[name].fallback_on_reachability_only
//! api_config_source.grpc_services[k] ───────► one ServerConfig each, in order
//! api_config_source.api_type ───────────────► ServerConfig.api (pinned)
//!   "POLICY_STREAM_GRPC" ────────────────────► ServerConfig.protocol: the policy stream,
//!   api_config_source.refresh_delay ─────────►   polled every refresh_delay
//!   "REST" ──────────────────────────────────► ServerConfig.protocol: REST-JSON polling,
//!   api_config_source.refresh_delay ─────────►   every refresh_delay, each request
//!   api_config_source.request_timeout ───────►   bounded by request_timeout
//!   api_config_source.cluster_names[k] ──────►   one ServerConfig each (or grpc_services'
//!                                                google_grpc.target_uri, for a direct URI)
//!   "HTTP_CDN" ──────────────────────────────► ServerConfig.protocol: HTTP CDN delivery,
//!   google_grpc.target_uri ──────────────────►   the base URL (http[s]://host[:port][/path]),
//!   refresh_delay, request_timeout ──────────►   its timers
//! config_sources[i].path_config_source ─────► one ServerConfig: a filesystem source
//!   path, watched_directory.path ────────────►   (ServerProtocol::File)
//! ```
//!
//! A `grpc_service` is either `google_grpc` (a target URI, TLS through
//! `channel_credentials.ssl_credentials`) or `envoy_grpc`, which names a
//! cluster: it is resolved against `static_resources.clusters`, which must
//! hold that cluster with exactly one endpoint (TLS through an
//! `UpstreamTlsContext` transport socket).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::AuthorityConfig;
use super::call_creds::{CallCreds, JWT_TOKEN_FILE};
use super::certs::parse_duration;
use super::grpc::{REACHABILITY_ONLY, default_authority_template, insert_authority};
use super::server::{
    ApiVariant, ChannelCreds, FileSource, HTTP_CDN_API_TYPE, PolicyStreamTiming, REST_API_TYPE,
    ServerConfig, ServerProtocol, cdn_timing, check_cdn_uri, parse_rest_timing,
};
use super::target::check_server_uri;
use super::walk::{At, Result};

/// Reads `default_config_source` (the top-level servers; may be absent) and
/// `config_sources` (the authorities).
pub(crate) fn parse_config_sources(
    root: &At<'_>,
) -> Result<(Vec<ServerConfig>, BTreeMap<String, AuthorityConfig>)> {
    let default = match root.get("default_config_source")? {
        Some(source) => parse_config_source(&source, root)?,
        None => Vec::new(),
    };
    let mut authorities = BTreeMap::new();
    if let Some(list) = root.get("config_sources")? {
        for source in list.array()? {
            let servers = parse_config_source(&source, root)?;
            let names = source.require(
                "authorities",
                "a non-empty array of {\"name\": ...} objects",
            )?;
            let items = names.array()?;
            if items.is_empty() {
                return Err(names.error("expected at least one authority"));
            }
            for item in items {
                let name = item.require("name", "a string")?.str()?;
                let config = AuthorityConfig {
                    client_listener_resource_name_template: default_authority_template(name),
                    xds_servers: servers.clone(),
                    // Envoy's Authority has only a name: the knob sits
                    // beside it, per authority as gRFC A95 asks.
                    fallback_on_reachability_only: item.opt_bool(REACHABILITY_ONLY)?,
                };
                insert_authority(&mut authorities, name, &item, config)?;
            }
        }
    }
    Ok((default, authorities))
}

/// One `ConfigSource`: `api_config_source` with gRPC services, or
/// `path_config_source` (a filesystem source).
fn parse_config_source(source: &At<'_>, root: &At<'_>) -> Result<Vec<ServerConfig>> {
    source.object()?;
    if let Some(path) = source.get("path_config_source")? {
        return Ok(vec![parse_path_config_source(&path)?]);
    }
    let Some(api) = source.get("api_config_source")? else {
        return Err(source.missing(
            "api_config_source",
            "an object with api_type and grpc_services, or path_config_source with a path (ads and path are not supported)",
        ));
    };
    api.object()?;
    if let Some(t) = api.get("api_type")?
        && t.str()? == REST_API_TYPE
    {
        return parse_rest_source(&api, root);
    }
    let (variant, pinned, protocol) = match api.get("api_type")? {
        Some(t) if t.str()? == POLICY_STREAM_API_TYPE => {
            (ApiVariant::Sotw, true, policy_stream(&api)?)
        }
        Some(t) if t.str()? == HTTP_CDN_API_TYPE => (
            ApiVariant::Sotw,
            true,
            ServerProtocol::HttpCdn(cdn_timing(&api)?),
        ),
        Some(t) => (ApiVariant::from_api_type(&t)?, true, ServerProtocol::Ads),
        None => (ApiVariant::Delta, false, ServerProtocol::Ads),
    };
    if let Some(version) = api.get("transport_api_version")?
        && version.str()? != "V3"
    {
        return Err(version.error("expected \"V3\""));
    }
    let services = api.require("grpc_services", "a non-empty array of gRPC services")?;
    let items = services.array()?;
    if items.is_empty() {
        return Err(services.error("expected at least one gRPC service"));
    }
    items
        .iter()
        .map(|service| {
            let cdn = matches!(protocol, ServerProtocol::HttpCdn(_));
            let (server_uri, channel_creds) = parse_grpc_service(service, root, cdn)?;
            let call_creds = google_call_creds(service, &channel_creds)?;
            Ok(ServerConfig {
                server_uri,
                channel_creds,
                call_creds,
                server_features: Vec::new(),
                api: variant,
                api_pinned: pinned,
                protocol: protocol.clone(),
            })
        })
        .collect()
}

/// A REST `api_config_source`: its timers, and its servers from
/// `cluster_names` (Envoy's field for REST, each resolved against
/// `static_resources.clusters`) or, for a direct URI, `grpc_services`'
/// `google_grpc.target_uri` (`http://` or `https://`).
fn parse_rest_source(api: &At<'_>, root: &At<'_>) -> Result<Vec<ServerConfig>> {
    let protocol = ServerProtocol::Rest(parse_rest_timing(api)?);
    let mut targets = Vec::new();
    if let Some(names) = api.get("cluster_names")? {
        for name in names.array()? {
            let (uri, creds) = resolve_static_cluster(root, &name)?;
            targets.push((uri, creds, Vec::new()));
        }
    }
    if let Some(services) = api.get("grpc_services")? {
        for service in services.array()? {
            let (uri, creds) = parse_grpc_service(&service, root, false)?;
            let call_creds = google_call_creds(&service, &creds)?;
            targets.push((uri, creds, call_creds));
        }
    }
    if targets.is_empty() {
        return Err(api.missing(
            "cluster_names",
            "a non-empty array of static cluster names (or grpc_services with google_grpc.target_uri)",
        ));
    }
    Ok(targets
        .into_iter()
        .map(|(server_uri, channel_creds, call_creds)| ServerConfig {
            server_uri,
            channel_creds,
            call_creds,
            server_features: Vec::new(),
            api: ApiVariant::Sotw,
            api_pinned: true,
            protocol: protocol.clone(),
        })
        .collect())
}

/// `PathConfigSource`: `{path, watched_directory: {path}}`.
fn parse_path_config_source(at: &At<'_>) -> Result<ServerConfig> {
    at.object()?;
    let path_at = at.require("path", "a file path")?;
    let mut source = FileSource::new(path_at.non_empty_str()?).map_err(|p| path_at.error(p))?;
    if let Some(dir) = at.get("watched_directory")? {
        let dir_path = dir.require("path", "a directory path")?.non_empty_str()?;
        source.watched_directory = Some(PathBuf::from(dir_path));
    }
    Ok(source.server())
}

/// The `api_type` of a policy-distribution stream (an xdsfed extension).
const POLICY_STREAM_API_TYPE: &str = "POLICY_STREAM_GRPC";

/// A policy stream's timers: `refresh_delay` is the poll interval (Envoy's
/// field for how often a REST source polls).
fn policy_stream(api: &At<'_>) -> Result<ServerProtocol> {
    let mut timing = PolicyStreamTiming::default();
    if let Some(delay) = api.get("refresh_delay")? {
        timing.poll_interval = parse_duration(&delay)?;
    }
    Ok(ServerProtocol::PolicyStream(timing))
}

/// One `grpc_service`; for an `HTTP_CDN` source (`cdn`), only a
/// `google_grpc` whose `target_uri` is the CDN's base URL.
fn parse_grpc_service(
    service: &At<'_>,
    root: &At<'_>,
    cdn: bool,
) -> Result<(String, ChannelCreds)> {
    service.object()?;
    if let Some(google) = service.get("google_grpc")? {
        let uri_at = google.require("target_uri", "a non-empty string")?;
        let uri = uri_at.non_empty_str()?;
        let checked = if cdn {
            check_cdn_uri(uri)
        } else {
            check_server_uri(uri)
        };
        checked.map_err(|problem| uri_at.error(problem))?;
        let creds = match google.get("channel_credentials")? {
            Some(c) => parse_google_creds(&c)?,
            None => ChannelCreds::Insecure,
        };
        return Ok((uri.to_owned(), creds));
    }
    if let Some(envoy) = service.get("envoy_grpc")? {
        if cdn {
            return Err(envoy.error(format!(
                "an {HTTP_CDN_API_TYPE} source is a URL: use google_grpc.target_uri"
            )));
        }
        let name_at = envoy.require("cluster_name", "a non-empty string")?;
        return resolve_static_cluster(root, &name_at);
    }
    Err(service.error("expected envoy_grpc or google_grpc"))
}

/// `google_grpc.call_credentials` of a `grpc_service` (Envoy's
/// `GoogleGrpc.CallCredentials`, a oneof per entry): `{"jwt_token_file":
/// PATH}` (an xdsfed extension, gRFC A97's credential) is supported; the
/// other kinds are skipped, as gRFC A97 skips the types a client does not
/// support. Only over TLS, as in the gRPC bootstrap.
fn google_call_creds(service: &At<'_>, channel: &ChannelCreds) -> Result<Vec<CallCreds>> {
    let Some(google) = service.get("google_grpc")? else {
        return Ok(Vec::new());
    };
    let Some(list) = google.get("call_credentials")? else {
        return Ok(Vec::new());
    };
    let mut creds = Vec::new();
    for entry in list.array()? {
        entry.object()?;
        let Some(path) = entry.get(JWT_TOKEN_FILE)? else {
            continue;
        };
        if *channel == ChannelCreds::Insecure {
            return Err(path.error(
                "jwt_token_file call credentials need TLS (channel_credentials.ssl_credentials):                  a bearer token is never sent over an insecure channel",
            ));
        }
        creds.push(CallCreds::JwtTokenFile {
            path: PathBuf::from(path.non_empty_str()?),
        });
    }
    Ok(creds)
}

/// `GoogleGrpc.ChannelCredentials`: only `ssl_credentials` maps onto this
/// client's credentials.
fn parse_google_creds(at: &At<'_>) -> Result<ChannelCreds> {
    let Some(ssl) = at.get("ssl_credentials")? else {
        return Err(at.error(
            "unsupported channel credentials: expected ssl_credentials (or none, for plaintext)",
        ));
    };
    let ca = ssl.require(
        "root_certs",
        "a data source with a filename (the platform's roots are not used)",
    )?;
    let chain = ssl.get("cert_chain")?;
    let key = ssl.get("private_key")?;
    tls_creds(
        &ssl,
        data_source_file(&ca)?,
        chain,
        key,
        ("cert_chain", "private_key"),
    )
}

/// A TLS credential from its parts; a certificate needs its key and back.
fn tls_creds(
    parent: &At<'_>,
    ca: PathBuf,
    chain: Option<At<'_>>,
    key: Option<At<'_>>,
    (chain_name, key_name): (&str, &str),
) -> Result<ChannelCreds> {
    let (certificate_file, private_key_file) = match (chain, key) {
        (Some(c), Some(k)) => (Some(data_source_file(&c)?), Some(data_source_file(&k)?)),
        (Some(_), None) => {
            return Err(parent.missing(
                key_name,
                &format!("a data source, since {chain_name} is set"),
            ));
        }
        (None, Some(_)) => {
            return Err(parent.missing(
                chain_name,
                &format!("a data source, since {key_name} is set"),
            ));
        }
        (None, None) => (None, None),
    };
    Ok(ChannelCreds::Tls {
        ca_certificate_file: Some(ca),
        certificate_file,
        private_key_file,
    })
}

/// An Envoy `DataSource`; only `filename` can name a file for rustls to read.
fn data_source_file(at: &At<'_>) -> Result<PathBuf> {
    match at.get("filename")? {
        Some(f) => Ok(PathBuf::from(f.non_empty_str()?)),
        None => Err(at.missing(
            "filename",
            "a path (inline_string, inline_bytes and environment_variable are not supported)",
        )),
    }
}

/// Finds `static_resources.clusters[name == cluster_name]` and reads its one
/// endpoint and its TLS transport socket.
fn resolve_static_cluster(root: &At<'_>, name_at: &At<'_>) -> Result<(String, ChannelCreds)> {
    let name = name_at.non_empty_str()?;
    let clusters = match root.get("static_resources")? {
        Some(sr) => match sr.get("clusters")? {
            Some(c) => c.array()?,
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    let mut found = None;
    for cluster in clusters {
        if cluster.get("name")?.map(|n| n.str()).transpose()? == Some(name) {
            found = Some(cluster);
            break;
        }
    }
    let Some(cluster) = found else {
        return Err(name_at.error(format!(
            "no cluster named {name:?} in static_resources.clusters"
        )));
    };
    let endpoint = single_endpoint(&cluster)?;
    let creds = match cluster.get("transport_socket")? {
        Some(socket) => transport_socket_creds(&socket)?,
        None => ChannelCreds::Insecure,
    };
    Ok((endpoint, creds))
}

/// `load_assignment.endpoints[*].lb_endpoints[*].endpoint.address.socket_address`,
/// which must be exactly one: a management server is one target, and
/// several endpoints would be load-balanced, not tried in order.
fn single_endpoint(cluster: &At<'_>) -> Result<String> {
    let assignment = cluster.require("load_assignment", "an object with one endpoint")?;
    let mut addresses = Vec::new();
    for locality in assignment.require("endpoints", "an array")?.array()? {
        if let Some(lbs) = locality.get("lb_endpoints")? {
            for lb in lbs.array()? {
                addresses.push(socket_address(&lb)?);
            }
        }
    }
    match <[String; 1]>::try_from(addresses) {
        Ok([one]) => Ok(one),
        Err(all) => Err(assignment.error(format!(
            "expected exactly one endpoint for the management server, found {}",
            all.len()
        ))),
    }
}

fn socket_address(lb: &At<'_>) -> Result<String> {
    let sa = lb
        .require("endpoint", "an object")?
        .require("address", "an object")?
        .require("socket_address", "an object with address and port_value")?;
    let address = sa
        .require("address", "a host name or IP")?
        .non_empty_str()?;
    let port_at = sa.require("port_value", "a port number")?;
    // Protobuf JSON may write integers as numbers or as strings.
    let port = match port_at.value {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse::<u64>().ok(),
        _ => None,
    }
    .and_then(|p| u16::try_from(p).ok())
    .filter(|p| *p != 0)
    .ok_or_else(|| port_at.error("expected a port number from 1 to 65535"))?;
    Ok(if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    })
}

/// A cluster's `transport_socket`: an `UpstreamTlsContext` means TLS, a raw
/// buffer plaintext; anything else is refused rather than ignored, since
/// ignoring it could send credentials in the clear.
fn transport_socket_creds(socket: &At<'_>) -> Result<ChannelCreds> {
    let Some(typed) = socket.get("typed_config")? else {
        return Err(socket.missing("typed_config", "an UpstreamTlsContext or RawBuffer"));
    };
    let type_url = typed.require("@type", "a type URL")?.str()?;
    if type_url.ends_with("/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer") {
        return Ok(ChannelCreds::Insecure);
    }
    if !type_url.ends_with("/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext") {
        return Err(typed.error(format!(
            "unsupported transport socket {type_url:?}: expected an UpstreamTlsContext or RawBuffer"
        )));
    }
    let common = typed.require("common_tls_context", "an object")?;
    let ca = common
        .require("validation_context", "an object with trusted_ca")?
        .require(
            "trusted_ca",
            "a data source with a filename (the platform's roots are not used)",
        )?;
    let ca = data_source_file(&ca)?;
    let cert = match common.get("tls_certificates")? {
        Some(list) => list.array()?.into_iter().next(),
        None => None,
    };
    match cert {
        Some(cert) => {
            let chain = cert.get("certificate_chain")?;
            let key = cert.get("private_key")?;
            tls_creds(&cert, ca, chain, key, ("certificate_chain", "private_key"))
        }
        None => tls_creds(&common, ca, None, None, ("", "")),
    }
}
