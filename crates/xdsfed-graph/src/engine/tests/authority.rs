//! Names across authorities (xDS TP1, gRFC A47).

use super::*;
use crate::{ClusterEndpoints, ConfigSourceTrust, GraphError, KnownAuthorities, Via};

const L: &str = "xdstp://a.test/envoy.config.listener.v3.Listener/front";
const R: &str = "xdstp://a.test/envoy.config.route.v3.RouteConfiguration/front";
const CA: &str = "xdstp://a.test/envoy.config.cluster.v3.Cluster/local";
const CB: &str = "xdstp://b.test/envoy.config.cluster.v3.Cluster/remote";
const EA: &str = "xdstp://a.test/envoy.config.endpoint.v3.ClusterLoadAssignment/local";
const EB: &str = "xdstp://b.test/envoy.config.endpoint.v3.ClusterLoadAssignment/remote";

fn known(names: &[&str]) -> GraphOptions {
    GraphOptions::default()
        .with_warming_timeout(TIMEOUT)
        .with_known_authorities(KnownAuthorities::only(names.iter().copied()))
}

/// A route on authority A reaches a cluster on authority B; each resource
/// keeps the provenance of its own authority.
#[test]
fn route_on_one_authority_reaches_cluster_on_another() {
    let mut h = Harness::with_options(Roots::new().listener(L), known(&["a.test", "b.test"]));
    h.listener(listener_rds(L, R), "1");
    h.route(route_config(R, &[CA, CB]), "1");
    h.cluster(eds_cluster(CA, Some(EA)), "1");
    h.cluster(eds_cluster(CB, Some(EB)), "7");
    let watched = h.watch_changes().watched;
    assert!(watched.contains(&key(ResourceKind::Cluster, CB)));
    assert!(watched.contains(&key(ResourceKind::ClusterLoadAssignment, EB)));
    h.endpoints(cla(EA, 1), "1");
    h.endpoints(cla(EB, 1), "9");

    let s = h.ready();
    assert!(s.is_ok());
    let remote = s.cluster(CB).expect("cluster on b");
    let provenance = &remote.cluster.as_ref().expect("present").provenance;
    assert_eq!(provenance.authority.as_deref(), Some("b.test"));
    assert_eq!(provenance.version, "7");
    let ClusterEndpoints::Eds {
        assignment: Some(assignment),
        ..
    } = &remote.endpoints
    else {
        panic!("remote endpoints missing");
    };
    assert_eq!(assignment.provenance.version, "9");
}

/// A ConfigSource beside the name that lists its authority and names its
/// own server is used, for an authority the bootstrap does not know, when the
/// resource carrying it came from a trusted server.
#[test]
fn config_source_listing_the_authority_is_used_for_that_edge() {
    let mut trust = ConfigSourceTrust::default();
    trust.trusted_servers.insert(SERVER.into());
    let opts = known(&["a.test"]).with_config_source_trust(trust);
    let mut h = Harness::with_options(Roots::new().cluster(CA), opts);
    h.watch_changes();
    let source = server_source(&["b.test"], "10.0.0.9:18000");
    h.cluster(
        eds_cluster_with_source(CA, Some(EB), Some(source.clone())),
        "1",
    );
    match h.engine.poll_watch() {
        Some(WatchChange::Watch { kind, name, via }) => {
            assert_eq!(kind, ResourceKind::ClusterLoadAssignment);
            assert_eq!(&*name, EB);
            assert_eq!(via, Via::ConfigSource(Arc::new(source)));
        }
        other => panic!("expected a watch of the endpoints, got {other:?}"),
    }
}

/// The same source in a resource from a server without
/// `trusted_xds_server` is refused on the cluster, which names why.
#[test]
fn config_source_from_an_untrusted_server_is_refused_on_the_parent() {
    let opts = known(&["a.test"]).with_config_source_trust(ConfigSourceTrust::default());
    let mut h = Harness::with_options(Roots::new().cluster(CA), opts);
    let source = server_source(&["b.test"], "10.0.0.9:18000");
    h.cluster(eds_cluster_with_source(CA, Some(EB), Some(source)), "1");
    let watched = h.watch_changes().watched;
    assert!(!watched.contains(&key(ResourceKind::ClusterLoadAssignment, EB)));
    let s = h.ready();
    let error = s
        .cluster(CA)
        .and_then(|c| c.error.clone())
        .expect("cluster in error");
    assert!(
        matches!(&error, GraphError::ConfigSourceRefused { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("trusted_xds_server"), "{error}");
}

/// A source claiming an authority the bootstrap maps to another server is
/// refused, even from a trusted server.
#[test]
fn config_source_claiming_a_mapped_authority_for_another_server_is_refused() {
    let mut trust = ConfigSourceTrust::default();
    trust.trusted_servers.insert(SERVER.into());
    trust
        .mapped
        .insert("b.test".into(), ["10.0.0.2:18000".to_owned()].into());
    let opts = known(&["a.test", "b.test"]).with_config_source_trust(trust);
    let mut h = Harness::with_options(Roots::new().cluster(CA), opts);
    let source = server_source(&["b.test"], "10.6.6.6:18000");
    h.cluster(eds_cluster_with_source(CA, Some(EB), Some(source)), "1");
    let watched = h.watch_changes().watched;
    assert!(!watched.contains(&key(ResourceKind::ClusterLoadAssignment, EB)));
    let s = h.ready();
    let error = s
        .cluster(CA)
        .and_then(|c| c.error.clone())
        .expect("cluster in error");
    assert!(error.to_string().contains("10.0.0.2:18000"), "{error}");
}

/// An `ads` source listing an authority leaves it to the bootstrap, which
/// does not know it.
#[test]
fn ads_config_source_for_an_unknown_authority_is_an_unknown_authority() {
    let mut h = Harness::with_options(Roots::new().cluster(CA), known(&["a.test"]));
    h.cluster(
        eds_cluster_with_source(CA, Some(EB), Some(config_source(&["b.test"]))),
        "1",
    );
    let s = h.ready();
    let error = s
        .cluster(CA)
        .and_then(|c| c.error.clone())
        .expect("cluster in error");
    assert!(
        matches!(&error, GraphError::UnknownAuthority { .. }),
        "{error:?}"
    );
}

/// Without such a ConfigSource, the bootstrap decides.
#[test]
fn name_on_a_bootstrap_authority_resolves_via_the_bootstrap() {
    let mut h = Harness::with_options(Roots::new().cluster(CA), known(&["a.test"]));
    h.watch_changes();
    h.cluster(
        eds_cluster_with_source(CA, Some(EA), Some(config_source(&["other.test"]))),
        "1",
    );
    assert!(matches!(
        h.engine.poll_watch(),
        Some(WatchChange::Watch {
            via: Via::Bootstrap,
            ..
        })
    ));
}

/// An authority in neither the bootstrap nor the ConfigSource fails that
/// edge only: the cluster holding it, not its sibling nor the snapshot.
#[test]
fn unknown_authority_fails_only_its_edge() {
    let mut h = Harness::with_options(Roots::new().listener(L), known(&["a.test"]));
    h.listener(listener_rds(L, R), "1");
    h.route(route_config(R, &[CA, CB]), "1");
    let watched = h.watch_changes().watched;
    assert!(
        !watched.contains(&key(ResourceKind::Cluster, CB)),
        "a name no server can serve is not watched"
    );
    h.cluster(eds_cluster(CA, Some(EA)), "1");
    h.endpoints(cla(EA, 1), "1");

    let s = h.ready();
    assert!(s.is_ok());
    assert!(s.cluster(CA).is_some_and(|c| c.is_ok()));
    assert!(matches!(
        s.cluster(CB).and_then(|c| c.error.clone()),
        Some(GraphError::UnknownAuthority { authority, .. }) if &*authority == "b.test"
    ));
}
