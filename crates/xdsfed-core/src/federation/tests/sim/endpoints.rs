//! gRFC A95's LEDS list collections as the model servers hold them: an
//! `LbEndpointCollection` of inline `LbEndpoint`s, valid or not, encoded as
//! a server sends it, and the random changes a server makes to one.

use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address, socket_address};
use envoy_types::pb::envoy::config::endpoint::v3::{
    Endpoint, LbEndpoint, LbEndpointCollection, lb_endpoint,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use envoy_types::pb::xds::core::v3::collection_entry::{InlineEntry, ResourceSpecifier};
use envoy_types::pb::xds::core::v3::{CollectionEntry, ResourceLocator, resource_locator};
use prost::Message;

use super::rng::Rng;
use crate::types::{LB_ENDPOINT_COLLECTION_TYPE_URL, LbEndpointType, ResourceType};

/// The ids of the collections each authority may hold.
pub(crate) const LISTS: [&str; 3] = ["l0", "l1", "l2"];
/// The address of an endpoint that fails validation: a watcher that ever
/// holds it shows a bypassed NACK.
pub(crate) const POISON: &str = "poison";

/// The name of the collection `id` of `authority`.
pub(crate) fn list_name(authority: &str, id: &str) -> String {
    format!("xdstp://{authority}/envoy.config.endpoint.v3.LbEndpointCollection/{id}")
}

/// Whether `name` names a LEDS list collection (else a cluster).
pub(crate) fn is_list(name: &str) -> bool {
    name.strip_prefix("xdstp://")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_, path)| path.starts_with("envoy.config.endpoint.v3.LbEndpointCollection/"))
}

/// One inline entry: its entry name (`None`: anonymous) and its endpoint,
/// told apart from other copies by its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) name: Option<String>,
    pub(crate) address: String,
    pub(crate) port: u16,
}

/// What makes a collection invalid (NACKed as a whole).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flaw {
    /// A locator entry: gRFC A95 wants every entry inline.
    Locator,
    /// An endpoint whose port is no port.
    BadPort,
    /// An endpoint of weight 0.
    ZeroWeight,
}

/// A collection's entries, encoded; `flaw` appends an entry that makes it
/// invalid.
pub(crate) fn to_any(members: &[Member], flaw: Option<Flaw>) -> Any {
    let mut entries: Vec<CollectionEntry> = members
        .iter()
        .map(|m| inline(m.name.as_deref(), &m.address, u32::from(m.port), None))
        .collect();
    match flaw {
        None => {}
        Some(Flaw::Locator) => entries.push(CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::Locator(ResourceLocator {
                scheme: resource_locator::Scheme::Xdstp as i32,
                authority: "a".into(),
                resource_type: "envoy.config.endpoint.v3.LbEndpoint".into(),
                id: POISON.into(),
                ..Default::default()
            })),
        }),
        Some(Flaw::BadPort) => entries.push(inline(None, POISON, 70_000, None)),
        Some(Flaw::ZeroWeight) => entries.push(inline(None, POISON, 80, Some(0))),
    }
    Any {
        type_url: LB_ENDPOINT_COLLECTION_TYPE_URL.into(),
        value: LbEndpointCollection { entries }.encode_to_vec(),
    }
}

fn inline(name: Option<&str>, host: &str, port: u32, weight: Option<u32>) -> CollectionEntry {
    let endpoint = LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: host.into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        })),
        load_balancing_weight: weight.map(|value| UInt32Value { value }),
        ..Default::default()
    };
    CollectionEntry {
        resource_specifier: Some(ResourceSpecifier::InlineEntry(InlineEntry {
            name: name.unwrap_or_default().into(),
            version: host.into(),
            resource: Some(Any {
                type_url: LbEndpointType::TYPE_URL.into(),
                value: endpoint.encode_to_vec(),
            }),
        })),
    }
}

/// A new endpoint of `label`'s, named or anonymous, under a name none of
/// `members` has.
fn new_member(rng: &mut Rng, label: &str, members: &[Member]) -> Member {
    let name = format!("e{}", rng.below(4));
    let taken = members.iter().any(|m| m.name.as_deref() == Some(&name));
    Member {
        name: (!taken && rng.chance(80)).then_some(name),
        address: format!("{label}-{}", rng.below(1000)),
        port: 1_000 + rng.below(1_000) as u16,
    }
}

/// A fresh collection of up to three endpoints (none, sometimes).
pub(crate) fn fresh(rng: &mut Rng, label: &str) -> Vec<Member> {
    let mut members = Vec::new();
    for _ in 0..rng.below(4) {
        let member = new_member(rng, label, &members);
        members.push(member);
    }
    members
}

/// `members` with one random change: an endpoint added, removed or
/// changed, or all of them gone (an empty list).
pub(crate) fn changed(rng: &mut Rng, label: &str, mut members: Vec<Member>) -> Vec<Member> {
    match rng.below(5) {
        0 | 1 => {
            let member = new_member(rng, label, &members);
            members.push(member);
        }
        2 if !members.is_empty() => {
            let at = rng.below(members.len());
            members.remove(at);
        }
        3 if !members.is_empty() => {
            let at = rng.below(members.len());
            members[at].address = format!("{label}-{}", rng.below(1000));
        }
        _ => members.clear(),
    }
    members
}
