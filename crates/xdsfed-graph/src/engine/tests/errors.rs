//! Where errors go (A74): listener and route problems on the snapshot,
//! cluster and endpoint problems on their cluster.

use super::*;
use crate::{ClusterEndpoints, GraphError};

/// A root listener that does not exist makes the snapshot unusable.
#[test]
fn missing_listener_is_a_snapshot_error() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.engine.on_listener(h.now, "l", Update::DoesNotExist);
    let s = h.ready();
    assert_eq!(
        s.errors().cloned().collect::<Vec<_>>(),
        [GraphError::DoesNotExist {
            kind: ResourceKind::Listener,
            name: Arc::from("l")
        }]
    );
}

/// A route configuration error is the listener's error.
#[test]
fn route_config_error_is_a_snapshot_error_on_its_listener() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.engine.on_route_config(
        h.now,
        "r",
        Update::Error(rejected("every version was NACKed")),
    );
    let s = h.ready();
    assert!(!s.is_ok());
    assert_eq!(
        s.listener("l").and_then(|l| l.error.clone()),
        Some(GraphError::Resource {
            kind: ResourceKind::RouteConfiguration,
            name: Arc::from("r"),
            error: Arc::new(rejected("every version was NACKed")),
        })
    );
    assert!(s.route_config("r").is_some_and(|r| r.error.is_some()));
}

/// A missing cluster and a missing endpoints resource fail their own
/// clusters only; the snapshot and the other clusters are fine.
#[test]
fn cluster_and_endpoint_errors_stay_on_their_cluster() {
    let mut h = Harness::new(Roots::new().listener("l"));
    h.listener(listener_rds("l", "r"), "1");
    h.route(route_config("r", &["ok", "gone", "empty"]), "1");
    h.cluster(static_cluster("ok"), "1");
    h.engine.on_cluster(h.now, "gone", Update::DoesNotExist);
    h.cluster(eds_cluster("empty", None), "1");
    h.engine.on_endpoints(h.now, "empty", Update::DoesNotExist);

    let s = h.ready();
    assert!(s.is_ok(), "no listener-level error");
    assert!(s.cluster("ok").is_some_and(|c| c.is_ok()));
    assert_eq!(
        s.cluster("gone").and_then(|c| c.error.clone()),
        Some(GraphError::DoesNotExist {
            kind: ResourceKind::Cluster,
            name: Arc::from("gone")
        })
    );
    let empty = s.cluster("empty").expect("empty");
    assert!(empty.cluster.is_some(), "the cluster itself is fine");
    assert_eq!(
        empty.error,
        Some(GraphError::DoesNotExist {
            kind: ResourceKind::ClusterLoadAssignment,
            name: Arc::from("empty")
        })
    );
}

/// An Error after a good version replaces it: the cluster is now failed.
#[test]
fn error_without_cached_copy_fails_the_cluster() {
    let mut h = warm_graph(&["a", "b"]);
    h.ready();
    h.engine
        .on_cluster(h.now, "a", Update::Error(rejected("rejected")));
    let s = h.ready();
    assert!(
        s.cluster("a")
            .is_some_and(|c| c.cluster.is_none() && !c.is_ok())
    );
    assert!(s.cluster("b").is_some_and(|c| c.is_ok()));
    assert!(s.is_ok());
}

/// Updates for names the graph does not reach (late deliveries after an
/// unwatch) change nothing.
#[test]
fn update_for_an_unreached_resource_is_ignored() {
    let mut h = warm_graph(&["a"]);
    h.ready();
    h.watch_changes();
    h.cluster(static_cluster("stranger"), "1");
    assert!(h.snapshot().is_none());
    assert!(h.watch_changes().watched.is_empty());
}

/// "The graph hands out the client's typed `XdsError`": a data plane reads
/// the kind, cause and server of a failed resource, of a kept copy's ambient
/// error and of the error a warming timeout quotes, not only their text.
#[test]
fn snapshot_errors_carry_the_clients_typed_error() {
    let nack = rejected("cluster a: every version was rejected")
        .with_cause(Cause::Rejected {
            version: Arc::from("7"),
        })
        .with_server("xds.example:443");
    let lost = transient("server xds.example:443 unreachable").with_server("xds.example:443");
    let mut h = warm_graph(&["a", "b"]);
    h.ready();
    h.engine.on_cluster(h.now, "a", Update::Error(nack.clone()));
    h.engine
        .on_endpoints(h.now, "b", Update::AmbientError(lost.clone()));
    let s = h.ready();

    let failed = s.cluster("a").and_then(|c| c.error.clone());
    assert_eq!(
        failed.as_ref().and_then(GraphError::source_error),
        Some(&nack)
    );
    assert_eq!(
        failed.map(|e| e.to_string()).as_deref(),
        Some("Cluster \"a\": cluster a: every version was rejected"),
        "the text is the client's message after the resource"
    );
    let kept = s.cluster("b").and_then(|c| match &c.endpoints {
        ClusterEndpoints::Eds {
            assignment: Some(assignment),
            ..
        } => assignment.ambient_error.clone(),
        _ => None,
    });
    assert_eq!(
        kept.as_deref().map(XdsError::kind),
        Some(ErrorKind::Transient)
    );
    assert_eq!(
        kept.as_deref().and_then(XdsError::server),
        Some("xds.example:443")
    );

    let mut h = Harness::new(Roots::new().cluster("c"));
    h.engine
        .on_cluster(h.now, "c", Update::AmbientError(lost.clone()));
    h.advance(TIMEOUT);
    let timed_out = h.ready().cluster("c").and_then(|c| c.error.clone());
    assert_eq!(
        timed_out.as_ref().and_then(GraphError::source_error),
        Some(&lost)
    );
}
