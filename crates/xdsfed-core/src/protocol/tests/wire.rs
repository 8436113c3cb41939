//! A delta response read in place ([`WireDeltaResponse`]) has exactly the
//! effects of the same response decoded into envoy's message: the same
//! events, the same ACK or NACK, the same counts.

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryResponse, ResourceError, ResourceName,
};
use envoy_types::pb::google::rpc::Status;
use prost::Message;

use super::support::*;
use crate::protocol::{Session, WireDeltaResponse};

/// `response` as the transport reads it: encoded, then read in place.
fn in_place(response: &DeltaDiscoveryResponse) -> WireDeltaResponse {
    let wire = WireDeltaResponse::decode(Bytes::from(response.encode_to_vec()))
        .expect("an encoded response decodes");
    wire.check_text().expect("its text is UTF-8");
    wire
}

/// Two sessions in the same state, one fed decoded responses, the other
/// the same responses read in place; they must stay alike.
fn alike(responses: &[DeltaDiscoveryResponse]) {
    let now = t0();
    let names = ["a", "b", "c", "d", "e", "f"];
    let mut decoded = delta_subscribed(now, CDS, &names);
    let mut wire = delta_subscribed(now, CDS, &names);
    let _ = (events(&mut decoded), events(&mut wire));
    for response in responses {
        decoded.handle_delta_response(now, response.clone());
        wire.handle_delta_wire(now, in_place(response));
        let (seen, seen_wire) = (events(&mut decoded), events(&mut wire));
        assert!(!seen.is_empty());
        assert_eq!(seen, seen_wire);
        assert_eq!(drain_delta(&mut decoded, now), drain_delta(&mut wire, now));
        assert_eq!(stats(&decoded), stats(&wire));
    }
}

fn stats(s: &Session) -> String {
    format!("{:?}", s.stats())
}

#[test]
fn a_response_read_in_place_has_the_effects_of_the_decoded_one() {
    let mut first = dresp(
        CDS,
        "n1",
        vec![
            dres("a", "v1", Some(cluster("a"))),
            // Invalid: NACKed by name, the rest applied.
            dres("b", "v1", Some(bad_cluster("b"))),
            // Twice: NACKed once.
            dres("c", "v1", Some(cluster("c"))),
            dres("c", "v1", Some(cluster("c"))),
            // Not subscribed: ignored.
            dres("x", "v1", Some(cluster("x"))),
            // Named by `resource_name` only.
            envoy_types::pb::envoy::service::discovery::v3::Resource {
                resource_name: Some(ResourceName {
                    name: "f".into(),
                    ..Default::default()
                }),
                version: "v2".into(),
                resource: Some(cluster("f")),
                ..Default::default()
            },
            // Sent under one name, naming itself another: NACKed.
            dres("e", "v1", Some(cluster("not-e"))),
        ],
        &[],
    );
    first.system_version_info = "skipped when read in place".into();
    let mut second = dresp(
        CDS,
        "n2",
        vec![
            // A heartbeat: the held version, no body.
            dres("a", "v1", None),
        ],
        &["c"],
    );
    second.removed_resource_names = vec![ResourceName {
        name: "f".into(),
        ..Default::default()
    }];
    second.resource_errors = vec![ResourceError {
        resource_name: Some(ResourceName {
            name: "d".into(),
            ..Default::default()
        }),
        error_detail: Some(Status {
            code: 5,
            message: "no such cluster".into(),
            details: vec![],
        }),
    }];
    alike(&[first, second]);
}

/// A response of a type the stream never requested is ignored either way.
#[test]
fn a_response_of_a_type_never_requested_is_ignored_either_way() {
    let now = t0();
    let mut s = delta_subscribed(now, CDS, &["a"]);
    let _ = events(&mut s);
    s.handle_delta_wire(
        now,
        in_place(&dresp(
            LDS,
            "n1",
            vec![dres("l", "v1", Some(listener("l")))],
            &[],
        )),
    );
    assert_eq!(events(&mut s), ["healthy"], "only the stream's health");
    assert!(drain_delta(&mut s, now).is_empty());
    assert_eq!(s.stats().unknown_type_responses_ignored, 1);
}
