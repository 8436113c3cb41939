//! An assignment of the common shape read from its bytes decides as the
//! full decode does.

use std::collections::HashMap;

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::{Locality as Place, Metadata};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LedsClusterLocalityConfig, LocalityLbEndpoints,
    cluster_load_assignment::Policy, locality_lb_endpoints::LbConfig,
    locality_lb_endpoints::LbEndpointList,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use proptest::prelude::*;
use prost::Message;

use super::super::tests::{Extra, Shape, delimited, shape, socket, varint, wrapped};
use super::*;
use crate::types::endpoint::decode_assignment_fully;
use crate::types::tests_support::load_assignment;
use crate::types::{EndpointType, LoadAssignment, ResourceType, ValidationError};

/// Decodes `bytes` as the client does and as it did before the common
/// shape was read from the bytes; asserts both decide alike, view for view
/// and error for error.
fn decide(bytes: &[u8]) -> Result<LoadAssignment, ValidationError> {
    let bytes = Bytes::copy_from_slice(bytes);
    let ours = EndpointType::decode_owned(bytes.clone());
    let full = decode_assignment_fully(bytes.clone());
    assert_eq!(ours, full, "{bytes:02x?}");
    ours
}

/// Asserts only that both paths decide `bytes` alike.
fn agrees(bytes: &[u8]) {
    let _ = decide(bytes);
}

/// The decision on `message`, and whether the common shape was read.
fn decide_message(
    message: &ClusterLoadAssignment,
) -> (Result<LoadAssignment, ValidationError>, bool) {
    let bytes = message.encode_to_vec();
    (decide(&bytes), is_read(&bytes))
}

/// Whether `bytes` are read as an assignment of the common shape.
fn is_read(bytes: &[u8]) -> bool {
    LoadAssignment::of_common_shape(Bytes::copy_from_slice(bytes)).is_ok()
}

/// What a locality's endpoints are, in the generated assignments.
#[derive(Debug, Clone)]
struct LocalityShape {
    place: Option<[&'static str; 3]>,
    weight: Option<u32>,
    priority: u32,
    endpoints: Vec<Shape>,
    /// 0: nothing beside the common shape; else one of `locality_extra`.
    extra: usize,
}

#[derive(Debug, Clone)]
struct AssignmentShape {
    name: String,
    localities: Vec<LocalityShape>,
    /// 0: nothing beside the common shape; 1: a policy; 2: a named
    /// endpoint.
    extra: usize,
}

const LOCALITY_EXTRAS: usize = 5;

impl LocalityShape {
    fn message(&self) -> LocalityLbEndpoints {
        let mut locality = LocalityLbEndpoints {
            locality: self.place.map(|[region, zone, sub_zone]| Place {
                region: region.into(),
                zone: zone.into(),
                sub_zone: sub_zone.into(),
            }),
            lb_endpoints: self.endpoints.iter().map(Shape::message).collect(),
            load_balancing_weight: self.weight.map(|value| UInt32Value { value }),
            priority: self.priority,
            ..Default::default()
        };
        match self.extra {
            1 => locality.metadata = Some(Metadata::default()),
            2 => locality.proximity = Some(UInt32Value { value: 1 }),
            3 => {
                locality.lb_config = Some(LbConfig::LedsClusterLocalityConfig(
                    LedsClusterLocalityConfig {
                        leds_config: Some(crate::types::tests_support::ads()),
                        leds_collection_name:
                            "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*".into(),
                    },
                ));
            }
            // Deprecated in the API, still a field servers may send.
            #[allow(deprecated)]
            4 => {
                locality.lb_config = Some(LbConfig::LoadBalancerEndpoints(LbEndpointList {
                    lb_endpoints: locality.lb_endpoints.clone(),
                }));
            }
            _ => {}
        }
        locality
    }
}

impl AssignmentShape {
    fn message(&self) -> ClusterLoadAssignment {
        let mut cla = ClusterLoadAssignment {
            cluster_name: self.name.clone(),
            endpoints: self.localities.iter().map(LocalityShape::message).collect(),
            ..Default::default()
        };
        match self.extra {
            1 => cla.policy = Some(Policy::default()),
            2 => {
                cla.named_endpoints = HashMap::from([("e".to_owned(), Endpoint::default())]);
            }
            _ => {}
        }
        cla
    }

    /// Whether nothing beside the common shape is encoded.
    fn is_common(&self) -> bool {
        self.extra == 0
            && self
                .localities
                .iter()
                .all(|l| l.extra == 0 && l.endpoints.iter().all(Shape::is_common_and_valid))
    }
}

/// A valid endpoint of the common shape, its weight up to 2^32 - 1 so that
/// some localities' weights add up to more.
fn common_endpoint() -> impl Strategy<Value = Shape> {
    (
        "[a-z0-9.]{1,12}",
        0..=65535u32,
        prop_oneof![
            4 => Just(None),
            4 => (1..100u32).prop_map(Some),
            1 => Just(Some(u32::MAX)),
            1 => (1..=u32::MAX).prop_map(Some),
        ],
        0..8i32,
    )
        .prop_map(|(address, port, weight, health_status)| Shape {
            address,
            port: Some(port),
            protocol: 0,
            weight,
            health_status,
            extra: Extra::None,
        })
}

fn locality_shape() -> impl Strategy<Value = LocalityShape> {
    let text = || prop::sample::select(vec!["", "a", "é"]);
    (
        prop::option::of([text(), text(), text()]),
        prop_oneof![
            Just(None),
            Just(Some(0)),
            Just(Some(1)),
            any::<u32>().prop_map(Some)
        ],
        prop_oneof![8 => 0..2u32, 1 => 2..4u32, 1 => any::<u32>()],
        prop::collection::vec(prop_oneof![8 => common_endpoint(), 1 => shape()], 0..4),
        prop_oneof![8 => Just(0), 1 => 1..LOCALITY_EXTRAS],
    )
        .prop_map(
            |(place, weight, priority, endpoints, extra)| LocalityShape {
                place,
                weight,
                priority,
                endpoints,
                extra,
            },
        )
}

fn assignment_shape() -> impl Strategy<Value = AssignmentShape> {
    (
        prop_oneof![Just(String::new()), Just("c1".to_owned()), any::<String>()],
        prop::collection::vec(locality_shape(), 0..5),
        prop_oneof![8 => Just(0), 1 => 1..3usize],
    )
        .prop_map(|(name, localities, extra)| AssignmentShape {
            name,
            localities,
            extra,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Rule: both paths decide alike on generated assignments, and the
    /// common shape is read from the bytes exactly when it is valid.
    #[test]
    fn generated_assignments_decide_as_the_full_decode(shape in assignment_shape()) {
        let (decided, read) = decide_message(&shape.message());
        assert_eq!(read, shape.is_common() && decided.is_ok(), "{shape:?} {decided:?}");
    }

    /// Rule: both paths decide alike on generated assignments with bytes
    /// changed, inserted or cut.
    #[test]
    fn damaged_assignments_decide_as_the_full_decode(
        shape in assignment_shape(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4)
    ) {
        let mut bytes = shape.message().encode_to_vec();
        super::super::tests::damage(&mut bytes, edits);
        agrees(&bytes);
    }

    /// Rule: both paths decide alike on any bytes.
    #[test]
    fn arbitrary_bytes_decide_as_the_full_decode(
        bytes in prop::collection::vec(any::<u8>(), 0..64)
    ) {
        agrees(&bytes);
    }
}

/// Two localities in two priorities, with every field the view covers set
/// in one of them and left unset in the other.
fn two_localities() -> ClusterLoadAssignment {
    let mut cla = load_assignment("c1", &[("10.0.0.1", 80), ("10.0.0.2", 81)]);
    let mut second = load_assignment("c1", &[("host.example", 8080)]).endpoints[0].clone();
    second.priority = 1;
    second.locality = Some(Place {
        region: "eu".into(),
        zone: "eu-1".into(),
        sub_zone: "rack-7".into(),
    });
    second.load_balancing_weight = Some(UInt32Value { value: 3 });
    second.lb_endpoints[0].load_balancing_weight = Some(UInt32Value { value: 5 });
    second.lb_endpoints[0].health_status = 3;
    cla.endpoints.push(second);
    cla
}

/// Rule: a valid assignment of the common shape is read from its bytes,
/// its view that of the full decode.
#[test]
fn the_common_shape_is_read_from_the_bytes() {
    let cla = two_localities();
    let bytes = cla.encode_to_vec();
    let found = size(&bytes).expect("the common shape");
    assert_eq!(
        found,
        Size {
            name: "c1",
            localities: 2,
            endpoints: 3,
        }
    );
    assert!(is_read(&bytes));
    let held = decide(&bytes).expect("valid");
    assert_eq!(held, LoadAssignment::new(&cla).expect("valid"));
    let second = held.localities().nth(1).expect("two localities");
    assert_eq!(
        (second.zone(), second.weight(), second.priority()),
        ("eu-1", 3, 1)
    );
    let endpoint = second.endpoints().next().expect("one endpoint");
    assert_eq!(
        (
            endpoint.address,
            endpoint.port,
            endpoint.weight,
            endpoint.health_status
        ),
        ("host.example", 8080, 5, 3)
    );
    assert_eq!(held.decode().expect("decodes"), cla);
    // The empty assignment too.
    assert!(is_read(&[]));
    assert!(decide(&[]).is_ok());
}

/// Rule: both paths decide alike on every rule validation applies to the
/// fields of the common shape.
#[test]
fn every_validation_rule_decides_as_the_full_decode() {
    let place = |zone: &str| {
        Some(Place {
            zone: zone.into(),
            ..Default::default()
        })
    };
    let locality = |place: Option<Place>, priority: u32, weights: &[u32]| LocalityLbEndpoints {
        locality: place,
        priority,
        lb_endpoints: weights
            .iter()
            .map(|&w| {
                let mut lb =
                    load_assignment("c", &[("h", 80)]).endpoints[0].lb_endpoints[0].clone();
                lb.load_balancing_weight = Some(UInt32Value { value: w });
                lb
            })
            .collect(),
        ..Default::default()
    };
    let assignment = |localities: Vec<LocalityLbEndpoints>| ClusterLoadAssignment {
        cluster_name: "c".into(),
        endpoints: localities,
        ..Default::default()
    };
    let max = u32::MAX;
    let cases = [
        // Valid: the same locality in two priorities; an unset locality
        // beside an empty one; weights adding up to exactly 2^32 - 1.
        (
            vec![locality(place("a"), 0, &[1]), locality(place("a"), 1, &[1])],
            true,
        ),
        (
            vec![
                locality(None, 0, &[]),
                locality(Some(Place::default()), 0, &[]),
            ],
            true,
        ),
        (vec![locality(None, 0, &[max - 1, 1])], true),
        (
            vec![
                locality(place("b"), 1, &[]),
                locality(place("a"), 0, &[2]),
                locality(None, 1, &[]),
            ],
            true,
        ),
        // Invalid: a locality twice in one priority (set or unset);
        // priorities with a hole or not from 0; weights adding up to more.
        (
            vec![locality(place("a"), 0, &[1]), locality(place("a"), 0, &[1])],
            false,
        ),
        (vec![locality(None, 0, &[]), locality(None, 0, &[])], false),
        (vec![locality(place("a"), 1, &[1])], false),
        (
            vec![locality(place("a"), 0, &[1]), locality(place("b"), 2, &[1])],
            false,
        ),
        (vec![locality(None, max, &[1])], false),
        (vec![locality(None, 0, &[max, 1])], false),
        (
            vec![locality(None, 0, &[max]), locality(place("a"), 0, &[max])],
            true,
        ),
        (vec![locality(None, 0, &[1, 0])], false),
    ];
    for (localities, valid) in cases {
        let cla = assignment(localities);
        let (decided, read) = decide_message(&cla);
        assert_eq!(decided.is_ok(), valid, "{cla:?}: {decided:?}");
        assert_eq!(read, valid, "{cla:?}");
    }
}

/// A locality of the common shape holding `fields`.
fn locality(fields: &[Vec<u8>]) -> Vec<u8> {
    delimited(0x12, &fields.concat())
}

fn endpoint(host: &[u8], port: u64) -> Vec<u8> {
    delimited(0x12, &wrapped(&socket(host, port), &[]))
}

fn place(fields: &[Vec<u8>]) -> Vec<u8> {
    delimited(0x0a, &fields.concat())
}

/// Rule: fields in any order are read as the full decode reads them, and
/// the view holds its strings in the same order whatever the order of the
/// bytes; a singular field sent twice is left to the full decode, which
/// keeps the last or merges.
#[test]
fn fields_in_any_order_or_repeated_decide_as_the_full_decode() {
    let name = delimited(0x0a, b"c");
    let zone = place(&[delimited(0x12, b"z")]);
    let weight = delimited(0x1a, &varint(0x08, 4));
    // The name last, the locality's endpoints around its other fields.
    let bytes = [
        locality(&[
            endpoint(b"h1", 1),
            varint(0x28, 0),
            zone.clone(),
            weight.clone(),
            endpoint(b"h2", 2),
        ]),
        name.clone(),
    ]
    .concat();
    assert!(is_read(&bytes));
    let held = decide(&bytes).expect("valid");
    assert_eq!(held.cluster_name(), "c");
    assert_eq!(
        held.endpoints().map(|e| e.address).collect::<Vec<_>>(),
        ["h1", "h2"]
    );

    // Repeated: the name, a locality's place (merged), weight, priority.
    let region = place(&[delimited(0x0a, b"r")]);
    let repeated = [
        [
            name.clone(),
            delimited(0x0a, b"d"),
            locality(&[endpoint(b"h", 1)]),
        ]
        .concat(),
        locality(&[region.clone(), zone.clone(), endpoint(b"h", 1)]),
        locality(&[weight.clone(), weight.clone(), endpoint(b"h", 1)]),
        locality(&[varint(0x28, 1), varint(0x28, 0), endpoint(b"h", 1)]),
        locality(&[place(&[delimited(0x12, b"z"), delimited(0x12, b"y")])]),
    ];
    for bytes in repeated {
        assert!(!is_read(&bytes), "{bytes:02x?}");
        assert!(decide(&bytes).is_ok(), "{bytes:02x?}");
    }
    // A priority of 2^32 keeps its low 32 bits: 0.
    let bytes = locality(&[varint(0x28, 1 << 32), endpoint(b"h", 1)]);
    assert!(is_read(&bytes));
    assert!(decide(&bytes).is_ok());
}

/// Rule: unknown fields and known fields of another wire type, at every
/// level, are left to the full decode.
#[test]
fn unknown_or_mistyped_fields_decide_as_the_full_decode() {
    let good = endpoint(b"h", 80);
    let cases = [
        [locality(std::slice::from_ref(&good)), varint(0xf8, 1)].concat(),
        locality(&[good.clone(), varint(0xf8, 1)]),
        locality(&[good.clone(), place(&[varint(0x20, 1)])]),
        locality(&[good.clone(), delimited(0x1a, &varint(0x10, 1))]),
        locality(&[good.clone(), delimited(0x22, &[])]),
        [varint(0x08, 1), locality(std::slice::from_ref(&good))].concat(),
        varint(0x10, 1),
        locality(&[good.clone(), delimited(0x28, &[0])]),
        locality(&[varint(0x10, 1)]),
        locality(&[good.clone(), place(&[varint(0x08, 1)])]),
        locality(&[good.clone(), varint(0x18, 1)]),
        locality(&[delimited(
            0x12,
            &wrapped(&socket(b"h", 80), &varint(0xf8, 1)),
        )]),
        // A cluster name that is not UTF-8, and a zone.
        delimited(0x0a, &[0xff]),
        locality(&[place(&[delimited(0x12, &[0xc3, 0x28])])]),
    ];
    for bytes in cases {
        assert!(!is_read(&bytes), "{bytes:02x?}");
        agrees(&bytes);
    }
}

/// Rule: bytes cut anywhere or changed in any byte are refused (or
/// accepted) as the full decode decides.
#[test]
fn truncated_or_changed_bytes_decide_as_the_full_decode() {
    let bytes = two_localities().encode_to_vec();
    assert!(is_read(&bytes));
    for cut in 0..bytes.len() {
        agrees(&bytes[..cut]);
    }
    for at in 0..bytes.len() {
        for value in [0x00, 0x01, 0x02, 0x0a, 0x12, 0x28, 0x7f, 0x80, 0xc3, 0xff] {
            let mut changed = bytes.clone();
            changed[at] = value;
            agrees(&changed);
        }
    }
}
