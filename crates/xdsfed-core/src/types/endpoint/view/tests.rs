use envoy_types::pb::envoy::config::core::v3::{HealthStatus, Locality};
use envoy_types::pb::envoy::config::endpoint::v3::LedsClusterLocalityConfig;
use envoy_types::pb::google::protobuf::UInt32Value;

use super::*;
use crate::types::tests_support::{ads, load_assignment};
use crate::types::{EndpointType, LbEndpointType, ResourceType};

/// Two localities in two priorities, with every field the view covers set
/// in one of them and left unset in the other.
fn two_localities() -> ClusterLoadAssignment {
    let mut cla = load_assignment("c1", &[("10.0.0.1", 80), ("10.0.0.2", 81)]);
    let mut second = load_assignment("c1", &[("host.example", 8080)]).endpoints[0].clone();
    second.priority = 1;
    second.locality = Some(Locality {
        region: "eu".into(),
        zone: "eu-1".into(),
        sub_zone: "rack-7".into(),
    });
    second.load_balancing_weight = None;
    second.lb_endpoints[0].load_balancing_weight = Some(UInt32Value { value: 5 });
    second.lb_endpoints[0].health_status = HealthStatus::Draining as i32;
    cla.endpoints.push(second);
    cla
}

/// Rule: the view shows what the message says, field for field, of what
/// it covers, in the message's order.
#[test]
fn view_shows_each_locality_and_endpoint_as_the_message_says() {
    let cla = two_localities();
    let held = LoadAssignment::new(&cla).expect("valid");
    assert_eq!(held.cluster_name(), "c1");
    assert_eq!(held.endpoint_count(), 3);
    let localities: Vec<_> = held.localities().collect();
    assert_eq!(localities.len(), 2);
    let first = localities[0];
    assert_eq!(
        first.weight(),
        cla.endpoints[0]
            .load_balancing_weight
            .as_ref()
            .map_or(0, |w| w.value)
    );
    assert_eq!(first.priority(), 0);
    let addresses: Vec<_> = first.endpoints().map(|e| (e.address, e.port)).collect();
    assert_eq!(addresses, [("10.0.0.1", 80), ("10.0.0.2", 81)]);
    assert!(first.endpoints().all(|e| e.weight == 1 && e.is_usable()));

    let second = localities[1];
    assert_eq!(
        (second.region(), second.zone(), second.sub_zone()),
        ("eu", "eu-1", "rack-7")
    );
    assert_eq!((second.weight(), second.priority()), (0, 1));
    let endpoint = second.endpoints().next().expect("one endpoint");
    assert_eq!(
        (endpoint.address, endpoint.port, endpoint.weight),
        ("host.example", 8080, 5)
    );
    assert_eq!(endpoint.health(), Some(HealthStatus::Draining));
    assert!(!endpoint.is_usable());
    assert!(second.leds().is_none());
    assert_eq!(held.endpoints().count(), 3);
}

/// Rule: the full message is decoded on demand from the bytes the server
/// sent, which the view shares rather than copies.
#[test]
fn decode_gives_back_the_message_from_the_shared_bytes() {
    let cla = two_localities();
    let bytes = Bytes::from(cla.encode_to_vec());
    let held = EndpointType::decode_shared(&bytes).expect("valid");
    assert_eq!(held.raw().as_ptr(), bytes.as_ptr(), "the bytes are shared");
    assert_eq!(held.decode().expect("decodes"), cla);
}

/// Rule: a LEDS locality keeps its collection and ConfigSource; its own
/// endpoints are ignored, as Envoy ignores them, until the graph fills it.
#[test]
fn leds_locality_keeps_its_collection_and_is_filled_only_by_its_members() {
    let mut cla = two_localities();
    let collection = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*";
    cla.endpoints[1].lb_config = Some(LbConfig::LedsClusterLocalityConfig(
        LedsClusterLocalityConfig {
            leds_config: Some(ads()),
            leds_collection_name: collection.into(),
        },
    ));
    let held = Arc::new(LoadAssignment::new(&cla).expect("valid"));
    let leds: Vec<_> = held.leds_localities().collect();
    assert_eq!(leds.len(), 1);
    assert_eq!(leds[0].0, 1);
    assert_eq!(&*leds[0].1.collection_name, collection);
    assert_eq!(leds[0].1.config(), Some(ads()));
    assert_eq!(
        held.endpoint_count(),
        2,
        "the LEDS locality's own endpoint is ignored"
    );

    let member = load_assignment("m", &[("10.9.9.9", 9)]).endpoints[0].lb_endpoints[0].clone();
    let member = Arc::new(LbEndpointType::decode(&member.encode_to_vec()).expect("valid"));
    let mut members = LedsMembers::default();
    members.insert("b".into(), Arc::clone(&member));
    members.insert("a".into(), member);
    let filled = held.with_leds_members(vec![members.clone()]);
    let second = filled.localities().nth(1).expect("two localities");
    let addresses: Vec<_> = second.endpoints().map(|e| e.address).collect();
    assert_eq!(addresses, ["10.9.9.9", "10.9.9.9"]);
    assert_eq!(second.endpoints().len(), 2);
    assert_eq!(filled.endpoint_count(), 4);
    assert_eq!(filled.endpoints().len(), 4);
    let all: Vec<_> = filled.endpoints().map(|e| e.address).collect();
    assert_eq!(all, ["10.0.0.1", "10.0.0.2", "10.9.9.9", "10.9.9.9"]);
    // The copy shares the assignment's text rather than copying it, and
    // so does a copy filled again from it.
    assert!(std::ptr::eq(filled.cluster_name(), held.cluster_name()));
    let refilled = Arc::new(filled.clone()).with_leds_members(vec![members.clone()]);
    assert!(std::ptr::eq(refilled.cluster_name(), held.cluster_name()));
    assert!(refilled == filled, "equal: the same message and members");
    // A member's change shows in a copy filled again, not in this one.
    members.remove("a");
    assert_eq!(filled.endpoint_count(), 4);
    let changed = held.with_leds_members(vec![members]);
    assert_eq!(changed.endpoint_count(), 3);
    assert!(changed != filled);
    assert_eq!((second.region(), second.priority()), ("eu", 1));
    assert!(second.leds().is_some());
    let first: Vec<_> = filled
        .localities()
        .next()
        .map_or(Vec::new(), |l| l.endpoints().map(|e| e.address).collect());
    assert_eq!(first, ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(filled.raw(), held.raw(), "the bytes stay the server's");
}

/// A copy filled in from LEDS, which a graph makes per cluster and per
/// snapshot a member changes in, is a pointer to what the server sent and
/// its members: three words, what the server sent being boxed.
#[test]
fn a_filled_copy_is_three_words() {
    assert_eq!(
        std::mem::size_of::<LoadAssignment>(),
        3 * std::mem::size_of::<usize>()
    );
}

/// What an assignment costs beyond its strings: a record per locality and
/// per endpoint, of these sizes (docs/architecture.md quotes them).
#[test]
fn records_are_44_bytes_a_locality_and_20_an_endpoint() {
    assert_eq!(std::mem::size_of::<LocalityRecord>(), 44);
    assert_eq!(std::mem::size_of::<EndpointRecord>(), 20);
}

/// Rule: a held LEDS endpoint is its bytes and a few integers: its address
/// is read where it lies in them, also when decoding merged the endpoint
/// from pieces.
#[test]
fn leds_endpoint_reads_its_address_where_it_lies_in_its_bytes() {
    // A `Bytes`, the address's start and length, the weight, the health
    // status and the port; 64 with the address in an allocation of its own.
    assert_eq!(std::mem::size_of::<LedsEndpoint>(), 48);
    let lies_in_raw = |held: &LedsEndpoint| {
        let address = held.view().address;
        held.raw().as_ptr_range().contains(&address.as_ptr())
    };
    let member = load_assignment("m", &[("10.9.9.9", 9)]).endpoints[0].lb_endpoints[0].clone();
    let held = LedsEndpoint::new(&member).expect("valid");
    assert_eq!((held.view().address, held.view().port), ("10.9.9.9", 9));
    assert!(lies_in_raw(&held));

    // Sent in two pieces, the host in the first, the port in both (the
    // last wins); decoding merges them.
    let pieces = load_assignment("m", &[("10.1.2.3", 1), ("", 443)]);
    let mut bytes = Vec::new();
    for piece in &pieces.endpoints[0].lb_endpoints {
        bytes.extend(piece.encode_to_vec());
    }
    // An unknown field 31 after them.
    bytes.extend([0xf8, 0x01, 0x01]);
    let held = LbEndpointType::decode(&bytes).expect("valid");
    assert_eq!((held.view().address, held.view().port), ("10.1.2.3", 443));
    assert!(lies_in_raw(&held));
    assert_eq!(
        held.view(),
        LedsEndpoint::new(&held.decode().expect("decodes"))
            .expect("valid")
            .view()
    );
}

/// An address longer than any host name or IP address (65 535 bytes) is
/// refused, naming the field, from the bytes as from the message: a held
/// LEDS endpoint keeps its length in two bytes.
#[test]
fn a_leds_address_longer_than_65535_bytes_is_refused_naming_the_field() {
    let long = "a".repeat(LONGEST_ADDRESS + 1);
    let member = load_assignment("m", &[(long.as_str(), 9)]).endpoints[0].lb_endpoints[0].clone();
    for refused in [
        LedsEndpoint::new(&member).map(|_| ()),
        LbEndpointType::decode(&member.encode_to_vec()).map(|_| ()),
    ] {
        let error = refused.expect_err("too long").to_string();
        assert!(
            error.contains("endpoint.address.socket_address.address"),
            "{error}"
        );
        assert!(error.contains("65535"), "{error}");
    }
    let longest = "a".repeat(LONGEST_ADDRESS);
    let member =
        load_assignment("m", &[(longest.as_str(), 9)]).endpoints[0].lb_endpoints[0].clone();
    let held = LbEndpointType::decode(&member.encode_to_vec()).expect("the longest is held");
    assert_eq!(held.view().address.len(), LONGEST_ADDRESS);
}
