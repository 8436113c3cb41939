//! The client's counters in the Prometheus text format, as gRFC A78
//! ("XdsClient") defines them and as the OpenTelemetry Prometheus exporter
//! that gRPC's metrics go through writes them: dots become underscores and
//! counters end in `_total`.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `grpc_xds_client_connected` | gauge | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_server_failure_total` | counter | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_resource_updates_valid_total` | counter | `grpc_target`, `grpc_xds_server`, `grpc_xds_resource_type` |
//! | `grpc_xds_client_resource_updates_invalid_total` | counter | `grpc_target`, `grpc_xds_server`, `grpc_xds_resource_type` |
//! | `grpc_xds_client_resources` | gauge | `grpc_target`, `grpc_xds_authority`, `grpc_xds_cache_state`, `grpc_xds_resource_type` |
//! | `xdsfed_xds_client_resources_by_client_status` | gauge | `grpc_target`, `grpc_xds_authority`, `grpc_xds_resource_type`, `xdsfed_client_status` |
//!
//! Label values follow A78: `grpc_xds_resource_type` is the type's name
//! without `type.googleapis.com/` (`envoy.config.cluster.v3.Cluster`),
//! `grpc_xds_authority` is `#old` for old-style names, `grpc_xds_server` is
//! the server URI, and `grpc_xds_cache_state` takes only A78's five values.
//! This client has two statuses A78 does not name; in that metric they count
//! as the nearest A78 state (see [`cache_state`]), and the last metric,
//! under this crate's own prefix, counts every resource by its exact CSDS
//! status so nothing is lost.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::client::cache::ResourceStatus;
use crate::core::protocol::TypeUpdates;
use crate::core::status::{ClientStatus, ServerStatus};

/// A per-server metric: name, type, help, and how to read it.
type PerServer = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ServerStatus) -> u64,
);

/// A per-server, per-type counter: name, help, and which count it is.
type PerType = (&'static str, &'static str, fn(&TypeUpdates) -> u64);

/// The Content-Type of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition of `status`, with `target` as `grpc_target`.
pub(crate) fn render(status: &ClientStatus, target: &str) -> String {
    let mut out = String::new();
    let target = escape(target);
    render_per_server(&mut out, status, &target);
    render_updates(&mut out, status, &target);
    render_resources(&mut out, status, &target);
    out
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// `connected` and `server_failure`: one series per server.
fn render_per_server(out: &mut String, status: &ClientStatus, target: &str) {
    let per_server: [PerServer; 2] = [
        (
            "grpc_xds_client_connected",
            "gauge",
            "Whether the xDS client currently has a working ADS stream to the xDS server.",
            |s| u64::from(s.connected),
        ),
        (
            "grpc_xds_client_server_failure_total",
            "counter",
            "A counter of xDS servers going from healthy to unhealthy.",
            |s| s.server_failure,
        ),
    ];
    for (name, kind, help, value) in per_server {
        header(out, name, kind, help);
        for s in &status.servers {
            let _ = writeln!(
                out,
                "{name}{{grpc_target=\"{target}\",grpc_xds_server=\"{}\"}} {}",
                escape(&s.server_uri),
                value(s)
            );
        }
    }
}

/// `resource_updates_valid` and `_invalid`: one series per server and type.
fn render_updates(out: &mut String, status: &ClientStatus, target: &str) {
    let counters: [PerType; 2] = [
        (
            "grpc_xds_client_resource_updates_valid_total",
            "A counter of resources received that were considered valid.",
            |c| c.valid,
        ),
        (
            "grpc_xds_client_resource_updates_invalid_total",
            "A counter of resources received that were considered invalid.",
            |c| c.invalid,
        ),
    ];
    for (name, help, value) in counters {
        header(out, name, "counter", help);
        for s in &status.servers {
            for (type_url, counts) in &s.resource_updates_by_type {
                let _ = writeln!(
                    out,
                    "{name}{{grpc_target=\"{target}\",grpc_xds_server=\"{}\",grpc_xds_resource_type=\"{}\"}} {}",
                    escape(&s.server_uri),
                    escape(resource_type(type_url)),
                    value(counts)
                );
            }
        }
    }
}

/// `resources` by A78 cache state, and this crate's gauge by CSDS status.
fn render_resources(out: &mut String, status: &ClientStatus, target: &str) {
    let mut by_state: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    let mut by_status: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
    for r in &status.resources {
        let authority = r.authority.as_deref().unwrap_or("#old");
        let kind = resource_type(&r.type_url);
        *by_state
            .entry((authority, kind, cache_state(r.status, r.cached)))
            .or_insert(0) += 1;
        *by_status
            .entry((authority, kind, client_status(r.status)))
            .or_insert(0) += 1;
    }
    let name = "grpc_xds_client_resources";
    header(out, name, "gauge", "Number of xDS resources.");
    for ((authority, kind, state), count) in by_state {
        let _ = writeln!(
            out,
            "{name}{{grpc_target=\"{target}\",grpc_xds_authority=\"{}\",grpc_xds_cache_state=\"{state}\",grpc_xds_resource_type=\"{}\"}} {count}",
            escape(authority),
            escape(kind)
        );
    }
    let name = "xdsfed_xds_client_resources_by_client_status";
    header(
        out,
        name,
        "gauge",
        "Number of xDS resources by CSDS ClientResourceStatus, including the statuses gRFC A78 does not name.",
    );
    for ((authority, kind, status), count) in by_status {
        let _ = writeln!(
            out,
            "{name}{{grpc_target=\"{target}\",grpc_xds_authority=\"{}\",grpc_xds_resource_type=\"{}\",xdsfed_client_status=\"{status}\"}} {count}",
            escape(authority),
            escape(kind)
        );
    }
}

/// A78's `grpc.xds.cache_state`. The two statuses A78 does not name count
/// as the state closest in meaning:
/// - `Timeout` (the does-not-exist timer fired while the server was known to
///   be slow, so the resource is not known to be absent) as `requested`:
///   asked for and not received;
/// - `ReceivedError` (the server sent an error instead of the resource) as
///   `nacked`, or `nacked_but_cached` when a previous copy still serves:
///   an update came and could not be used;
/// - `FromDisk` (a copy from the state directory no server has confirmed
///   yet) as `requested`: asked for and not yet received.
pub(crate) fn cache_state(status: ResourceStatus, cached: bool) -> &'static str {
    match status {
        ResourceStatus::Requested | ResourceStatus::Timeout | ResourceStatus::FromDisk => {
            "requested"
        }
        ResourceStatus::DoesNotExist => "does_not_exist",
        ResourceStatus::Acked => "acked",
        ResourceStatus::Nacked | ResourceStatus::ReceivedError if cached => "nacked_but_cached",
        ResourceStatus::Nacked | ResourceStatus::ReceivedError => "nacked",
    }
}

/// The CSDS status in lower case, e.g. `received_error`.
fn client_status(status: ResourceStatus) -> &'static str {
    match status {
        ResourceStatus::Requested => "requested",
        ResourceStatus::DoesNotExist => "does_not_exist",
        ResourceStatus::Acked => "acked",
        ResourceStatus::Nacked => "nacked",
        ResourceStatus::ReceivedError => "received_error",
        ResourceStatus::Timeout => "timeout",
        ResourceStatus::FromDisk => "from_disk",
    }
}

/// A78's `grpc.xds.resource_type`: the type's full name, without the type
/// URL's prefix (`type.googleapis.com/`).
fn resource_type(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// Label values escape backslash, quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::status::ResourceStatusEntry;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn entry(status: ResourceStatus, cached: bool) -> ResourceStatusEntry {
        ResourceStatusEntry {
            type_url: CDS.into(),
            name: "xdstp://a.example/envoy.config.cluster.v3.Cluster/c".into(),
            authority: Some("a.example".into()),
            server: "127.0.0.1:5 (insecure)".into(),
            server_uri: "127.0.0.1:5".into(),
            version: Some("1".into()),
            status,
            last_updated_unix_ms: None,
            error: Some("bad".into()),
            failed_version: Some("2".into()),
            failed_at_unix_ms: None,
            raw: None,
            cached,
            source: None,
        }
    }

    fn status() -> ClientStatus {
        ClientStatus {
            state_dir: None,
            node_id: "n".into(),
            resources: vec![
                entry(ResourceStatus::Nacked, true),
                entry(ResourceStatus::Timeout, false),
                entry(ResourceStatus::ReceivedError, false),
            ],
            servers: vec![ServerStatus {
                server: "127.0.0.1:5 (insecure)".into(),
                server_uri: "127.0.0.1:5".into(),
                connected: true,
                server_failure: 2,
                resource_updates_valid: 3,
                resource_updates_invalid: 1,
                resource_updates_by_type: [(
                    CDS.to_owned(),
                    TypeUpdates {
                        valid: 3,
                        invalid: 1,
                    },
                )]
                .into(),
                foreign_resources_ignored: 0,
                variant: "delta".into(),
                answered_types: Vec::new(),
            }],
            authorities: Vec::new(),
        }
    }

    #[test]
    fn exposition_has_a78_names_labels_and_values() {
        let text = render(&status(), "t\"1");
        for line in [
            "grpc_xds_client_connected{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\"} 1",
            "grpc_xds_client_server_failure_total{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\"} 2",
            "grpc_xds_client_resource_updates_valid_total{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\",grpc_xds_resource_type=\"envoy.config.cluster.v3.Cluster\"} 3",
            "grpc_xds_client_resource_updates_invalid_total{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\",grpc_xds_resource_type=\"envoy.config.cluster.v3.Cluster\"} 1",
            "grpc_xds_client_resources{grpc_target=\"t\\\"1\",grpc_xds_authority=\"a.example\",grpc_xds_cache_state=\"nacked_but_cached\",grpc_xds_resource_type=\"envoy.config.cluster.v3.Cluster\"} 1",
            "# TYPE grpc_xds_client_server_failure_total counter",
            "# TYPE grpc_xds_client_resources gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }

    /// Only A78's five values appear in `grpc_xds_cache_state`; this
    /// client's other statuses show in the separate gauge.
    #[test]
    fn cache_state_takes_only_a78_values() {
        let text = render(&status(), "t");
        let states: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("grpc_xds_client_resources{"))
            .filter_map(|l| l.split("grpc_xds_cache_state=\"").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(states, ["nacked", "nacked_but_cached", "requested"]);
        for status in ["nacked", "received_error", "timeout"] {
            assert!(
                text.contains(&format!("xdsfed_client_status=\"{status}\"}} 1")),
                "{status} in\n{text}"
            );
        }
    }
}
