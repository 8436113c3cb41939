//! The common shape read from the bytes decides as the full decode does.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::{
    Address, Metadata, Pipe, SocketAddress, address, socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::endpoint::v3::{Endpoint, LbEndpoint, endpoint, lb_endpoint};
use envoy_types::pb::google::protobuf::UInt32Value;
use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::types::endpoint::decode_lb_endpoint_fully;
use crate::types::{LbEndpointType, LedsEndpoint, ResourceType, ValidationError};

/// What a decode decided, as the client sees it.
type Outcome = Result<(String, u16, u32, i32, Bytes), String>;

fn outcome(decoded: &Result<LedsEndpoint, ValidationError>) -> Outcome {
    match decoded {
        Ok(held) => {
            let view = held.view();
            Ok((
                view.address.to_owned(),
                view.port,
                view.weight,
                view.health_status,
                held.raw().clone(),
            ))
        }
        Err(e) => Err(e.0.clone()),
    }
}

/// Decodes `bytes` as the client does and as it did before the common
/// shape was read from the bytes; asserts both decide alike, and that an
/// accepted endpoint's address lies in its bytes.
fn decide(bytes: &[u8]) -> Outcome {
    let bytes = Bytes::copy_from_slice(bytes);
    let ours = LbEndpointType::decode_owned(bytes.clone());
    let full = decode_lb_endpoint_fully(bytes.clone());
    assert_eq!(outcome(&ours), outcome(&full), "{bytes:02x?}");
    assert_eq!(ours, full, "{bytes:02x?}");
    if let Ok(held) = &ours {
        let address = held.view().address;
        assert!(
            held.raw().as_ptr_range().contains(&address.as_ptr()),
            "{bytes:02x?}"
        );
    }
    outcome(&ours)
}

/// `bytes` with each of `edits` applied in turn: a byte changed (0),
/// inserted (1) or the bytes cut there (2), at an index into them.
pub(super) fn damage(bytes: &mut Vec<u8>, edits: Vec<(prop::sample::Index, u8, u8)>) {
    for (at, byte, how) in edits {
        let at = at.index(bytes.len() + 1);
        match how {
            0 if at < bytes.len() => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ => bytes.truncate(at),
        }
    }
}

/// Asserts only that both paths decide `bytes` alike.
fn agrees(bytes: &[u8]) {
    let _ = decide(bytes);
}

/// The message's decision, and whether the common shape was read.
fn decide_message(message: &LbEndpoint) -> (Outcome, bool) {
    let bytes = message.encode_to_vec();
    (decide(&bytes), lb_endpoint(&bytes).is_some())
}

/// Something beside the common shape, or a change of it.
#[derive(Debug, Clone)]
pub(super) enum Extra {
    None,
    Hostname(String),
    Metadata,
    HealthCheckConfig,
    AdditionalAddress,
    ObservabilityName(String),
    ResolverName(String),
    Ipv4Compat,
    NamedPort(String),
    EndpointName(String),
    NoEndpoint,
    NoAddress,
    Pipe(String),
}

const EXTRAS: usize = 13;

fn extra(i: usize, text: &str) -> Extra {
    match i {
        0 => Extra::None,
        1 => Extra::Hostname(text.into()),
        2 => Extra::Metadata,
        3 => Extra::HealthCheckConfig,
        4 => Extra::AdditionalAddress,
        5 => Extra::ObservabilityName(text.into()),
        6 => Extra::ResolverName(text.into()),
        7 => Extra::Ipv4Compat,
        8 => Extra::NamedPort(text.into()),
        9 => Extra::EndpointName(text.into()),
        10 => Extra::NoEndpoint,
        11 => Extra::NoAddress,
        _ => Extra::Pipe(text.into()),
    }
}

#[derive(Debug, Clone)]
pub(super) struct Shape {
    pub(super) address: String,
    pub(super) port: Option<u32>,
    pub(super) protocol: i32,
    pub(super) weight: Option<u32>,
    pub(super) health_status: i32,
    pub(super) extra: Extra,
}

impl Shape {
    pub(super) fn message(&self) -> LbEndpoint {
        let mut socket = SocketAddress {
            protocol: self.protocol,
            address: self.address.clone(),
            port_specifier: self.port.map(PortSpecifier::PortValue),
            ..Default::default()
        };
        let mut endpoint = Endpoint::default();
        match &self.extra {
            Extra::Hostname(h) => endpoint.hostname = h.clone(),
            Extra::HealthCheckConfig => {
                endpoint.health_check_config = Some(endpoint::HealthCheckConfig::default());
            }
            Extra::AdditionalAddress => {
                endpoint.additional_addresses = vec![endpoint::AdditionalAddress::default()];
            }
            Extra::ObservabilityName(n) => endpoint.observability_name = n.clone(),
            Extra::ResolverName(n) => socket.resolver_name = n.clone(),
            Extra::Ipv4Compat => socket.ipv4_compat = true,
            Extra::NamedPort(n) => {
                socket.port_specifier = Some(PortSpecifier::NamedPort(n.clone()))
            }
            _ => {}
        }
        endpoint.address = Some(Address {
            address: Some(match &self.extra {
                Extra::Pipe(path) => address::Address::Pipe(Pipe {
                    path: path.clone(),
                    mode: 0,
                }),
                _ => address::Address::SocketAddress(socket),
            }),
        });
        if matches!(self.extra, Extra::NoAddress) {
            endpoint.address = None;
        }
        let host_identifier = match &self.extra {
            Extra::NoEndpoint => None,
            Extra::EndpointName(n) => Some(lb_endpoint::HostIdentifier::EndpointName(n.clone())),
            _ => Some(lb_endpoint::HostIdentifier::Endpoint(endpoint)),
        };
        LbEndpoint {
            health_status: self.health_status,
            metadata: matches!(self.extra, Extra::Metadata).then(Metadata::default),
            load_balancing_weight: self.weight.map(|value| UInt32Value { value }),
            host_identifier,
        }
    }

    /// Whether the message is valid and of the common shape, so that it
    /// must be read from its bytes.
    pub(super) fn is_common_and_valid(&self) -> bool {
        let extra_encoded = match &self.extra {
            Extra::None => false,
            // An empty string is not encoded at all (proto3).
            Extra::Hostname(s) | Extra::ObservabilityName(s) | Extra::ResolverName(s) => {
                !s.is_empty()
            }
            _ => true,
        };
        !extra_encoded
            && !self.address.is_empty()
            && self.port.is_some_and(|p| p <= 65535)
            && self.weight != Some(0)
    }
}

fn check(shape: &Shape) {
    let (decided, read) = decide_message(&shape.message());
    assert_eq!(read, shape.is_common_and_valid(), "{shape:?}");
    if read {
        assert!(decided.is_ok(), "{shape:?}");
    }
}

/// Rule: a valid endpoint of the common shape is read from its bytes, its
/// address pointing into them.
#[test]
fn the_common_shape_is_read_from_the_bytes_it_points_into() {
    let message = Shape {
        address: "10.0.0.1".into(),
        port: Some(8080),
        protocol: 0,
        weight: Some(3),
        health_status: 2,
        extra: Extra::None,
    }
    .message();
    let raw = Bytes::from(message.encode_to_vec());
    let read = lb_endpoint(&raw).expect("the common shape");
    assert_eq!(read.address, "10.0.0.1");
    assert_eq!(&raw[read.address_at.clone()], b"10.0.0.1");
    assert_eq!((read.port, read.weight, read.health_status), (8080, 3, 2));

    let held = LbEndpointType::decode_owned(raw.clone()).expect("valid");
    assert_eq!(held.raw().as_ptr(), raw.as_ptr(), "the bytes are shared");
    let address = held.view().address;
    assert_eq!(address, "10.0.0.1");
    assert!(raw.as_ptr_range().contains(&address.as_ptr()));
    assert_eq!(held, LedsEndpoint::new(&message).expect("valid"));
    assert_eq!(held.decode().expect("decodes"), message);
}

/// Rule: both paths decide alike, field for field, over every combination
/// of edge values and of fields beside the common shape.
#[test]
fn every_combination_of_edge_values_decides_as_the_full_decode() {
    let addresses = ["", "10.0.0.1", "[::1]", "hôte.例え.jp"];
    let ports = [
        None,
        Some(0),
        Some(1),
        Some(65535),
        Some(65536),
        Some(70000),
        Some(u32::MAX),
    ];
    let weights = [None, Some(0), Some(1), Some(7), Some(u32::MAX)];
    let healths = [0, 1, 2, 3, 5, 6, 7, -1, i32::MAX, i32::MIN];
    let mut read = 0;
    for address in addresses {
        for port in ports {
            for weight in weights {
                for health_status in healths {
                    for text in ["", "x"] {
                        for (e, protocol) in (0..EXTRAS).zip([0, 1, 5].into_iter().cycle()) {
                            let shape = Shape {
                                address: address.into(),
                                port,
                                protocol,
                                weight,
                                health_status,
                                extra: extra(e, text),
                            };
                            check(&shape);
                            read += usize::from(shape.is_common_and_valid());
                        }
                    }
                }
            }
        }
    }
    // Three addresses, three ports and four weights that are valid, ten
    // health statuses, and five ways to add nothing: none, and three empty
    // strings that are not encoded (both texts).
    assert_eq!(read, 3 * 3 * 4 * 10 * 5);
}

pub(super) fn shape() -> impl Strategy<Value = Shape> {
    (
        prop_oneof![Just(String::new()), "[0-9.:a-z-]{1,20}", any::<String>()],
        prop_oneof![
            Just(None),
            (0..=70000u32).prop_map(Some),
            any::<u32>().prop_map(Some)
        ],
        prop_oneof![Just(0), any::<i32>()],
        prop_oneof![Just(None), Just(Some(0)), any::<u32>().prop_map(Some)],
        prop_oneof![0..8i32, any::<i32>()],
        (0..EXTRAS, prop_oneof![Just(String::new()), any::<String>()]),
    )
        .prop_map(
            |(address, port, protocol, weight, health_status, (e, text))| Shape {
                address,
                port,
                protocol,
                weight,
                health_status,
                extra: extra(e, &text),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Rule: both paths decide alike on generated endpoints.
    #[test]
    fn generated_endpoints_decide_as_the_full_decode(shape in shape()) {
        check(&shape);
    }

    /// Rule: both paths decide alike on any bytes.
    #[test]
    fn arbitrary_bytes_decide_as_the_full_decode(
        bytes in prop::collection::vec(any::<u8>(), 0..48)
    ) {
        agrees(&bytes);
    }

    /// Rule: both paths decide alike on generated endpoints with bytes
    /// changed, inserted or cut.
    #[test]
    fn damaged_endpoints_decide_as_the_full_decode(
        shape in shape(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4)
    ) {
        let mut bytes = shape.message().encode_to_vec();
        damage(&mut bytes, edits);
        agrees(&bytes);
    }

    /// Varints are read as prost reads them.
    #[test]
    fn varints_are_read_as_prost_reads_them(
        bytes in prop::collection::vec(any::<u8>(), 0..14)
    ) {
        assert_eq!(ours(&bytes), prosts(&bytes));
    }
}

/// The varint at the start of `bytes` and how many bytes it took.
fn ours(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut cursor = Cursor::new(bytes);
    let value = cursor.varint()?;
    Some((value, cursor.at))
}

fn prosts(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut rest = bytes;
    let value = prost::encoding::decode_varint(&mut rest).ok()?;
    Some((value, bytes.len() - rest.len()))
}

#[test]
fn varint_edges_are_read_as_prost_reads_them() {
    let mut cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![0x80],
        vec![0xff; 9],
        vec![0xff; 10],
        vec![0xff; 11],
        // Ten bytes whose tenth holds bit 63 alone, or more.
        [vec![0xff; 9], vec![0x01]].concat(),
        [vec![0x80; 9], vec![0x01]].concat(),
        [vec![0xff; 9], vec![0x02]].concat(),
        [vec![0x80; 9], vec![0x7f]].concat(),
        // Zero written long.
        [vec![0x80; 9], vec![0x00]].concat(),
        // Eleven bytes.
        [vec![0x80; 10], vec![0x00]].concat(),
    ];
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            cases.push(vec![a, b]);
        }
    }
    for case in cases {
        assert_eq!(ours(&case), prosts(&case), "{case:02x?}");
    }
}

/// A length-delimited field of key `key` holding `payload`.
pub(super) fn delimited(key: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(key, &mut out);
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

/// A varint field of key `key`.
pub(super) fn varint(key: u64, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_varint(key, &mut out);
    prost::encoding::encode_varint(value, &mut out);
    out
}

/// An endpoint whose socket address has the fields `socket`, the rest
/// being `after` it (top-level fields).
pub(super) fn wrapped(socket: &[u8], after: &[u8]) -> Vec<u8> {
    let address = delimited(0x0a, socket);
    let endpoint = delimited(0x0a, &address);
    [delimited(0x0a, &endpoint), after.to_vec()].concat()
}

pub(super) fn socket(host: &[u8], port: u64) -> Vec<u8> {
    [delimited(0x12, host), varint(0x18, port)].concat()
}

fn accepted(address: &str, port: u16, weight: u32, health_status: i32, bytes: &[u8]) -> Outcome {
    Ok((
        address.into(),
        port,
        weight,
        health_status,
        Bytes::copy_from_slice(bytes),
    ))
}

/// Rule: the fields of the common shape are read in any order, values
/// written long or wider than their field read as prost reads them.
#[test]
fn fields_in_any_order_and_long_varints_are_read_as_prost_reads_them() {
    let weight = delimited(0x22, &varint(0x08, 9));
    let bytes = [
        varint(0x10, 3),
        weight.clone(),
        wrapped(&[varint(0x18, 80), delimited(0x12, b"a")].concat(), &[]),
    ]
    .concat();
    assert!(lb_endpoint(&bytes).is_some());
    assert_eq!(decide(&bytes), accepted("a", 80, 9, 3, &bytes));

    // A port of 2^32 + 80 keeps its low 32 bits; so does a health status.
    let bytes = wrapped(&socket(b"h", (1 << 32) + 80), &varint(0x10, u64::MAX));
    assert!(lb_endpoint(&bytes).is_some());
    assert_eq!(decide(&bytes), accepted("h", 80, 1, -1, &bytes));

    // A key and a length written long (0x8a 0x00 is key 0x0a).
    let mut bytes = wrapped(&socket(b"h", 80), &[]);
    bytes.splice(0..1, [0x8a, 0x00]);
    assert_eq!(bytes[2] as usize, bytes.len() - 3);
    let len = bytes[2];
    bytes.splice(2..3, [len | 0x80, 0x00]);
    assert!(lb_endpoint(&bytes).is_some());
    assert_eq!(decide(&bytes), accepted("h", 80, 1, 0, &bytes));

    // A weight of 2^32 is 0, refused.
    let bytes = wrapped(&socket(b"h", 80), &delimited(0x22, &varint(0x08, 1 << 32)));
    assert!(lb_endpoint(&bytes).is_none());
    assert_eq!(
        decide(&bytes),
        Err("load_balancing_weight: must be at least 1".into())
    );
}

/// Rule: a sub-message sent twice is merged by the full decode, which the
/// walk leaves to it; the address is still found in the bytes.
#[test]
fn a_repeated_endpoint_is_merged_by_the_full_decode() {
    // The host in the first endpoint, the port in the second.
    let first = wrapped(&delimited(0x12, b"10.1.2.3"), &[]);
    let second = wrapped(&varint(0x18, 443), &[]);
    let bytes = [first, second].concat();
    assert!(lb_endpoint(&bytes).is_none());
    assert_eq!(decide(&bytes), accepted("10.1.2.3", 443, 1, 0, &bytes));

    // The same endpoint twice, and one whose host the second replaces.
    let once = wrapped(&socket(b"h1", 80), &[]);
    let bytes = [once.clone(), once].concat();
    assert_eq!(decide(&bytes), accepted("h1", 80, 1, 0, &bytes));
    let bytes = [
        wrapped(&socket(b"h1", 80), &[]),
        wrapped(&delimited(0x12, b"h2"), &[]),
    ]
    .concat();
    assert_eq!(decide(&bytes), accepted("h2", 80, 1, 0, &bytes));

    // A field repeated within the socket address or at the top: the last
    // value wins.
    let bytes = wrapped(
        &[socket(b"h1", 80), delimited(0x12, b"h2")].concat(),
        &[varint(0x10, 1), varint(0x10, 2)].concat(),
    );
    assert!(lb_endpoint(&bytes).is_none());
    assert_eq!(decide(&bytes), accepted("h2", 80, 1, 2, &bytes));
    let weights = [
        delimited(0x22, &varint(0x08, 0)),
        delimited(0x22, &varint(0x08, 4)),
    ]
    .concat();
    let bytes = wrapped(&socket(b"h", 80), &weights);
    assert_eq!(decide(&bytes), accepted("h", 80, 4, 0, &bytes));
}

/// Rule: bytes that do not parse, cut anywhere or changed in any byte,
/// are refused (or accepted) as the full decode decides.
#[test]
fn truncated_or_changed_bytes_decide_as_the_full_decode() {
    let bytes = wrapped(
        &[varint(0x08, 1), socket("hôte".as_bytes(), 8080)].concat(),
        &[varint(0x10, 2), delimited(0x22, &varint(0x08, 300))].concat(),
    );
    assert!(decide(&bytes).is_ok());
    for cut in 0..bytes.len() {
        agrees(&bytes[..cut]);
    }
    for at in 0..bytes.len() {
        for value in [0x00, 0x01, 0x02, 0x08, 0x0a, 0x12, 0x7f, 0x80, 0xc3, 0xff] {
            let mut changed = bytes.clone();
            changed[at] = value;
            agrees(&changed);
        }
    }
}

/// Rule: malformed varints and lengths, strings that are not UTF-8,
/// unknown fields and known fields of another wire type are left to the
/// full decode.
#[test]
fn malformed_unknown_or_mistyped_fields_decide_as_the_full_decode() {
    let good = socket(b"h", 80);
    let cases: Vec<Vec<u8>> = vec![
        // A port varint of eleven bytes, and of ten overflowing 64 bits.
        wrapped(
            &[
                delimited(0x12, b"h"),
                vec![0x18],
                vec![0x80; 10],
                vec![0x00],
            ]
            .concat(),
            &[],
        ),
        wrapped(
            &[delimited(0x12, b"h"), vec![0x18], vec![0xd0; 9], vec![0x02]].concat(),
            &[],
        ),
        // A length past the end of the socket address, and of the message.
        wrapped(&[vec![0x12, 0x09, b'h'], varint(0x18, 80)].concat(), &[]),
        [vec![0x0a, 0x7f], good.clone()].concat(),
        [vec![0x0a], vec![0xff; 9], vec![0x01]].concat(),
        // An address that is not UTF-8.
        wrapped(&socket(&[0x68, 0xc3, 0x28], 80), &[]),
        wrapped(&socket(&[0xff], 80), &[]),
        // Unknown fields: at the top, in the endpoint, in the socket
        // address, in the weight; a group; field 0.
        wrapped(&good, &varint(0xf8, 1)),
        wrapped(&good, &[0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]),
        wrapped(&good, &[0x9b, 0x06, 0x08, 0x01, 0x9c, 0x06]),
        wrapped(&good, &[0x00, 0x01]),
        wrapped(&[good.clone(), varint(0x40, 1)].concat(), &[]),
        wrapped(
            &good,
            &delimited(0x22, &[varint(0x08, 2), varint(0x10, 1)].concat()),
        ),
        delimited(
            0x0a,
            &[delimited(0x0a, &delimited(0x0a, &good)), varint(0x30, 1)].concat(),
        ),
        // Known fields with another wire type.
        wrapped(&good, &delimited(0x12, &[2])),
        wrapped(&good, &varint(0x20, 5)),
        wrapped(
            &[delimited(0x12, b"h"), delimited(0x1a, &[80])].concat(),
            &[],
        ),
        wrapped(
            &[delimited(0x12, b"h"), vec![0x1d, 80, 0, 0, 0]].concat(),
            &[],
        ),
        wrapped(&[varint(0x10, 5), varint(0x18, 80)].concat(), &[]),
        wrapped(&good, &delimited(0x22, &delimited(0x0a, &[9]))),
        [varint(0x08, 1), good.clone()].concat(),
        // A packed health status.
        wrapped(&good, &delimited(0x12, &[1, 2])),
    ];
    for bytes in cases {
        assert!(lb_endpoint(&bytes).is_none(), "{bytes:02x?}");
        agrees(&bytes);
    }
    let not_utf8 = decide(&wrapped(&socket(&[0xff], 80), &[]));
    assert!(
        not_utf8.is_err_and(|e| e.starts_with("not a valid LbEndpoint")),
        "refused by the full decode, with its error"
    );
}
