//! xDS TP1 in the core: glob collection subscriptions and redirects.

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::{ResourceLocator, resource_locator};
use prost::Message as _;

use super::support::*;
use crate::bootstrap::ApiVariant;
use crate::protocol::{RESOURCE_LOCATOR_TYPE_URL, StreamEnd};

const GLOB: &str = "xdstp://a/envoy.config.cluster.v3.Cluster/pool/*";
const MEMBER: &str = "xdstp://a/envoy.config.cluster.v3.Cluster/pool/one";

fn locator(authority: &str, id: &str) -> Any {
    let locator = ResourceLocator {
        scheme: resource_locator::Scheme::Xdstp as i32,
        authority: authority.into(),
        resource_type: "envoy.config.cluster.v3.Cluster".into(),
        id: id.into(),
        ..Default::default()
    };
    Any {
        type_url: RESOURCE_LOCATOR_TYPE_URL.into(),
        value: locator.encode_to_vec(),
    }
}

/// TP1 §Glob: resources under a subscribed glob are its members and are
/// accepted; others are not.
#[test]
fn glob_members_are_accepted_and_others_ignored() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &[GLOB]);
    let outsider = "xdstp://a/envoy.config.cluster.v3.Cluster/other/one";
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![
                dres(MEMBER, "1", Some(cluster(MEMBER))),
                dres(outsider, "1", Some(cluster(outsider))),
            ],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", &format!("upsert {MEMBER} 1")]);
}

/// TP1 §Glob: the first member answers the glob, so its does-not-exist
/// timer stops.
#[test]
fn glob_does_not_exist_timer_stops_with_the_first_member() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &[GLOB]);
    assert!(s.poll_timeout().is_some());
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![dres(MEMBER, "1", Some(cluster(MEMBER)))],
            &[],
        ),
    );
    assert_eq!(s.poll_timeout(), None);
}

/// TP1 §Glob: "the server should reply with [...] the glob collection URL
/// [...] in removed_resources" when it is empty.
#[test]
fn glob_named_in_removed_resources_is_reported_removed() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &[GLOB]);
    s.handle_delta_response(now, dresp(CDS, "n1", vec![], &[GLOB]));
    assert_eq!(events(&mut s), ["healthy", &format!("removed {GLOB}")]);
}

/// TP1 "Server redirects": a ResourceLocator in the Any is reported as a
/// redirect to its canonical target, held (no does-not-exist) and ACKed.
#[test]
fn resource_locator_is_reported_as_a_redirect_and_acked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &[MEMBER]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![dres(MEMBER, "7", Some(locator("b", "x")))],
            &[],
        ),
    );
    assert_eq!(
        events(&mut s),
        [
            "healthy",
            &format!("redirect {MEMBER} xdstp://b/envoy.config.cluster.v3.Cluster/x")
        ]
    );
    assert_eq!(
        s.held_version(&key(CDS, MEMBER))
            .map(String::from)
            .as_deref(),
        Some("7")
    );
    assert_eq!(s.poll_timeout(), None);
}

/// A locator that names nothing usable is an invalid resource (NACK).
#[test]
fn resource_locator_without_an_id_is_nacked() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &[MEMBER]);
    s.handle_delta_response(
        now,
        dresp(
            CDS,
            "n1",
            vec![dres(MEMBER, "7", Some(locator("b", "")))],
            &[],
        ),
    );
    assert_eq!(events(&mut s), ["healthy", &format!("invalid {MEMBER}")]);
}

/// TP1 §Glob needs delta: after the transport's delta→SotW fallback, a glob
/// is left out of the SotW request (a SotW server would take it for a
/// name), no does-not-exist timer runs for it, and it is reported as not
/// requested; the other names are asked for as usual.
#[test]
fn glob_is_not_requested_over_a_stream_that_fell_back_to_sotw() {
    let now = t0();
    let mut s = session(ApiVariant::Delta);
    s.subscribe(key(CDS, GLOB));
    s.subscribe(key(CDS, "plain"));
    open(&mut s, now);
    let _ = drain(&mut s, now);
    s.handle_stream_end(now, StreamEnd::new(12, "unimplemented"));
    let _ = events(&mut s);
    s.set_variant(ApiVariant::Sotw);

    let first = connect_sotw(&mut s, now);
    assert_eq!(first[0].resource_names, strs(&["plain"]));
    assert_eq!(events(&mut s), [format!("not requested {GLOB}")]);
    s.handle_timeout(now + secs(60));
    assert_eq!(
        events(&mut s),
        ["dne plain"],
        "only the name that was asked for times out"
    );
}
