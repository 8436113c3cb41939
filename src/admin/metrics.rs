//! The client's counters in the Prometheus text format, named after gRFC
//! A78 (`grpc.xds_client.*`, dots as underscores):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `grpc_xds_client_connected` | gauge | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_server_failure` | counter | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_resource_updates_valid` | counter | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_resource_updates_invalid` | counter | `grpc_target`, `grpc_xds_server` |
//! | `grpc_xds_client_resources` | gauge | `grpc_target`, `grpc_xds_authority`, `grpc_xds_resource_type`, `grpc_xds_cache_state` |
//!
//! The update counters are per server, without A78's `grpc_xds_resource_type`
//! label: the client counts them per connection.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::core::cache::ResourceStatus;
use crate::core::status::{ClientStatus, ServerStatus};

/// A per-server metric: name, type, help, and how to read it.
type PerServer = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ServerStatus) -> u64,
);

/// The Content-Type of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition of `status`, with `target` as `grpc_target`.
pub(crate) fn render(status: &ClientStatus, target: &str) -> String {
    let mut out = String::new();
    let per_server: [PerServer; 4] = [
        (
            "grpc_xds_client_connected",
            "gauge",
            "Whether the ADS stream to the server is up and has received a response.",
            |s| u64::from(s.connected),
        ),
        (
            "grpc_xds_client_server_failure",
            "counter",
            "Times the server became unhealthy: the stream failed before any response.",
            |s| s.server_failure,
        ),
        (
            "grpc_xds_client_resource_updates_valid",
            "counter",
            "Resources received that were valid.",
            |s| s.resource_updates_valid,
        ),
        (
            "grpc_xds_client_resource_updates_invalid",
            "counter",
            "Resources received that were rejected.",
            |s| s.resource_updates_invalid,
        ),
    ];
    for (name, kind, help, value) in per_server {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for s in &status.servers {
            let _ = writeln!(
                out,
                "{name}{{grpc_target=\"{}\",grpc_xds_server=\"{}\"}} {}",
                escape(target),
                escape(server_uri(&s.server)),
                value(s)
            );
        }
    }
    let mut counts: BTreeMap<(String, &str, &str), u64> = BTreeMap::new();
    for r in &status.resources {
        let authority = r.authority.clone().unwrap_or_else(|| "#old".to_owned());
        *counts
            .entry((
                authority,
                r.type_url.as_str(),
                cache_state(r.status, r.cached),
            ))
            .or_insert(0) += 1;
    }
    let name = "grpc_xds_client_resources";
    let _ = writeln!(
        out,
        "# HELP {name} Resources in the cache by authority, type and state.\n# TYPE {name} gauge"
    );
    for ((authority, type_url, state), count) in counts {
        let _ = writeln!(
            out,
            "{name}{{grpc_target=\"{}\",grpc_xds_authority=\"{}\",grpc_xds_resource_type=\"{}\",grpc_xds_cache_state=\"{state}\"}} {count}",
            escape(target),
            escape(&authority),
            escape(type_url)
        );
    }
    out
}

/// A78's `grpc.xds.cache_state` values (and two of this client's own).
fn cache_state(status: ResourceStatus, cached: bool) -> &'static str {
    match status {
        ResourceStatus::Requested => "requested",
        ResourceStatus::DoesNotExist => "does_not_exist",
        ResourceStatus::Acked => "acked",
        ResourceStatus::Nacked if cached => "nacked_but_cached",
        ResourceStatus::Nacked => "nacked",
        ResourceStatus::ReceivedError => "received_error",
        ResourceStatus::Timeout => "timeout",
    }
}

fn server_uri(server: &str) -> &str {
    server.split(" (").next().unwrap_or(server)
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

    #[test]
    fn exposition_has_a78_names_and_labels() {
        let status = ClientStatus {
            node_id: "n".into(),
            resources: vec![ResourceStatusEntry {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                name: "xdstp://a.example/envoy.config.cluster.v3.Cluster/c".into(),
                authority: Some("a.example".into()),
                server: "127.0.0.1:5 (insecure)".into(),
                version: Some("1".into()),
                status: ResourceStatus::Nacked,
                last_updated_unix_ms: None,
                error: Some("bad".into()),
                failed_version: Some("2".into()),
                failed_at_unix_ms: None,
                raw: None,
                cached: true,
                source: None,
            }],
            servers: vec![ServerStatus {
                server: "127.0.0.1:5 (insecure)".into(),
                connected: true,
                server_failure: 2,
                resource_updates_valid: 3,
                resource_updates_invalid: 1,
                resource_updates_by_type: Default::default(),
                foreign_resources_ignored: 0,
                variant: "delta".into(),
                answered_types: Vec::new(),
            }],
            authorities: Vec::new(),
        };
        let text = render(&status, "t\"1");
        assert!(text.contains(
            "grpc_xds_client_connected{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\"} 1"
        ));
        assert!(text.contains("grpc_xds_client_server_failure{grpc_target=\"t\\\"1\",grpc_xds_server=\"127.0.0.1:5\"} 2"));
        assert!(text.contains("grpc_xds_client_resource_updates_invalid{"));
        assert!(text.contains("grpc_xds_cache_state=\"nacked_but_cached\"} 1"));
        assert!(text.contains("# TYPE grpc_xds_client_resources gauge"));
    }
}
