//! The REST-JSON polling source: state-of-the-world xDS over plain HTTP
//! (xds-protocol-v3, "REST-JSON polling subscriptions").
//!
//! ```text
//!  RestConnection (handle) ──commands──► driver task (one per server)
//!                                          │ protocol::Session (SotW): what to ask, ACK/NACK,
//!                                          │   validation, deletions, does-not-exist timers
//!                                          │ PollSchedule: when each type's poll leaves
//!                                          │ HttpClient: POST /v3/discovery:{type}, JSON both ways
//!                                          │ response::read: the body as a response, or rejected
//!                                          └─► EventSink::deliver(events)
//! ```
//!
//! Each type is polled on its own: the session's latest `DiscoveryRequest`
//! of the type is POSTed as JSON to `{server_uri}/v3/discovery:{path}`
//! (`clusters`, `listeners`, … from the type URL, Envoy's v3 paths), and
//! the `DiscoveryResponse` that comes back is handled exactly as one on a
//! SotW ADS stream. The ACK or NACK it earns rides on the type's next
//! poll, `refresh_delay` after the answer; `304 Not Modified` means no
//! change. The module `poll` states the schedule's rules.
//!
//! The JSON both ways is Envoy's (`http_subscription_impl.cc`), which
//! third-party servers are written against (sovereign is tested): requests
//! in the proto field names, defaults printed; a response's `type_url` is
//! optional (the polled type). A body that is not a `DiscoveryResponse` of
//! the polled type, or a resource of it that does not map, is a rejected
//! update (Envoy's `UpdateRejected`), NACKed on the type's next poll as on
//! ADS, not a failure of the server (module `response`).
//!
//! A poll that fails (no connection, no answer within `request_timeout`,
//! an HTTP status other than 200 and 304, a body over the text bound,
//! `max_text_message_size` or `max_message_size` whichever is lower) ends
//! the attempt as a stream end does: outstanding polls are dropped, and the
//! next attempt starts after the transport's backoff with every type asked
//! afresh. As on ADS, an attempt that fails before any answer is a server failure
//! ([`CoreEvent::StreamFailed`](crate::protocol::CoreEvent::StreamFailed): ambient errors, gRFC A71 fallback); one
//! that had answers is retried after the backoff's initial delay, and
//! reported if that retry fails too.
//!
//! Types without a REST path, and glob collections (which need delta
//! xDS), are answered [`CoreEvent::NotRequested`](crate::protocol::CoreEvent::NotRequested) at once.

mod poll;
mod response;

pub use poll::{Cause, PollSchedule};
pub use response::{Read, RejectedBody, read};

/// The REST path segment of `type_url`: `discovery:{segment}` (Envoy's v3
/// REST paths), or `None` for a type REST does not serve.
pub fn type_path(type_url: &str) -> Option<&'static str> {
    let name = type_url.rsplit('/').next()?;
    Some(match name {
        "envoy.config.listener.v3.Listener" => "listeners",
        "envoy.config.route.v3.RouteConfiguration" => "routes",
        "envoy.config.cluster.v3.Cluster" => "clusters",
        "envoy.config.endpoint.v3.ClusterLoadAssignment" => "endpoints",
        "envoy.extensions.transport_sockets.tls.v3.Secret" => "secrets",
        "envoy.service.runtime.v3.Runtime" => "runtime",
        "envoy.config.route.v3.ScopedRouteConfiguration" => "scoped-routes",
        "envoy.config.route.v3.VirtualHost" => "virtual_hosts",
        "envoy.config.core.v3.TypedExtensionConfig" => "extension_configs",
        _ => return None,
    })
}

/// The type URL a REST path segment names (the inverse of [`type_path`]).
pub fn type_url_of_path(segment: &str) -> Option<&'static str> {
    Some(match segment {
        "listeners" => "type.googleapis.com/envoy.config.listener.v3.Listener",
        "routes" => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        "clusters" => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
        "endpoints" => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
        "secrets" => "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
        "runtime" => "type.googleapis.com/envoy.service.runtime.v3.Runtime",
        "scoped-routes" => "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration",
        "virtual_hosts" => "type.googleapis.com/envoy.config.route.v3.VirtualHost",
        "extension_configs" => "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rest_path_names_its_type_and_back() {
        for path in [
            "listeners",
            "routes",
            "clusters",
            "endpoints",
            "secrets",
            "runtime",
            "scoped-routes",
            "virtual_hosts",
            "extension_configs",
        ] {
            let type_url = type_url_of_path(path).unwrap();
            assert_eq!(type_path(type_url), Some(path));
        }
        assert_eq!(type_path("type.googleapis.com/xds.type.v3.Unknown"), None);
        assert_eq!(type_url_of_path("aggregated"), None);
    }
}
