//! What a [`Decoded`] holds, and how it reads its bytes and its name.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use prost::Message;

use super::tests_support::load_assignment;
use super::*;

/// Rule: a decoded resource is three words, whatever its type: the
/// value's pointer, and how its bytes and name are read.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_decoded_resource_is_24_bytes() {
    assert_eq!(std::mem::size_of::<Decoded>(), 24);
}

/// Rule: a type that keeps its bytes is read through its value, the very
/// bytes given, and its name is the one inside it; a type that keeps none
/// has its bytes beside it, shared with every copy.
#[test]
fn bytes_and_name_are_read_where_they_are_kept() {
    let raw = Bytes::from(load_assignment("backend", &[("10.0.0.1", 80)]).encode_to_vec());
    let kept = Erased::<EndpointType>::new()
        .decode(raw.clone())
        .expect("a valid assignment");
    assert_eq!(kept.raw().as_ptr(), raw.as_ptr(), "the value keeps them");
    assert_eq!(kept.name(), Some("backend"));
    assert!(kept.downcast::<LoadAssignment>().is_some());

    let socket = SocketAddress {
        address: "0.0.0.0".into(),
        port_specifier: Some(socket_address::PortSpecifier::PortValue(8080)),
        ..Default::default()
    };
    let listener = Listener {
        name: "front".into(),
        address: Some(Address {
            address: Some(address::Address::SocketAddress(socket)),
        }),
        ..Default::default()
    };
    let raw = Bytes::from(listener.encode_to_vec());
    let beside = Erased::<ListenerType>::new()
        .decode(raw.clone())
        .expect("a valid listener");
    let copy = beside.clone();
    assert_eq!(copy.raw().as_ptr(), raw.as_ptr(), "held beside, shared");
    assert_eq!(copy.name(), Some("front"));
    assert_eq!(copy.downcast::<Listener>().as_deref(), Some(&listener));

    assert!(
        copy.value().downcast_ref::<Listener>().is_some(),
        "the resource, not its holder"
    );

    let body = Decoded::beside(Arc::new(7u8), Bytes::from_static(b"body"));
    assert_eq!(body.raw(), &Bytes::from_static(b"body"));
    assert_eq!(body.name(), None);
    assert_eq!(body.downcast::<u8>().as_deref(), Some(&7));
    assert!(
        body.downcast::<Beside>().is_none(),
        "its holder is not handed out"
    );
}
