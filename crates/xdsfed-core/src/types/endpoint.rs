//! `envoy.config.endpoint.v3.ClusterLoadAssignment`, validated as gRPC
//! validates it (gRFC A27).

use crate::hash::HashSet;
use envoy_types::pb::envoy::config::core::v3::{address::Address, socket_address::PortSpecifier};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LbEndpoint, lb_endpoint::HostIdentifier, locality_lb_endpoints::LbConfig,
};

use bytes::Bytes;

use super::{ResourceType, ValidationError, decode_message};

mod leds;
mod members;
mod view;
mod wire;

pub use members::{Iter as LedsMembersIter, LedsMembers};
pub use view::{EndpointView, LedsEndpoint, LedsLocality, LoadAssignment, LocalityView};

/// The EDS resource type. A resource is held as its bytes and a compact
/// view ([`LoadAssignment`]); the full message is decoded on demand.
#[derive(Debug, Clone, Copy, Default)]
pub struct EndpointType;

impl ResourceType for EndpointType {
    const TYPE_URL: &'static str =
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
    const SOTW_FULL_STATE: bool = false;
    type Resource = LoadAssignment;

    fn decode(bytes: &[u8]) -> Result<LoadAssignment, ValidationError> {
        Self::decode_shared(&Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: &Bytes) -> Result<LoadAssignment, ValidationError> {
        Self::decode_owned(bytes.clone())
    }

    const KEEPS_BYTES: bool = true;

    fn decode_owned(bytes: Bytes) -> Result<LoadAssignment, ValidationError> {
        // Nearly every assignment has the common shape, read from its
        // bytes without building prost's structs; every other one, and
        // every invalid one, takes the full decode, which decides alike.
        LoadAssignment::of_common_shape(bytes).or_else(decode_assignment_fully)
    }

    fn held_bytes(resource: &LoadAssignment) -> Option<&Bytes> {
        Some(resource.raw())
    }

    fn name(resource: &LoadAssignment) -> Option<&str> {
        Some(resource.cluster_name()).filter(|n| !n.is_empty())
    }

    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        super::name_of_message::<ClusterLoadAssignment>(bytes, |m| &m.cluster_name)
    }
}

/// An assignment decoded into prost's structs, validated and viewed: the
/// path for every message, before the common shape was read from its
/// bytes, and still the path for every other one.
fn decode_assignment_fully(bytes: Bytes) -> Result<LoadAssignment, ValidationError> {
    // Endpoint lists sized before they are filled: prost's doubling
    // was a sixth of the client's CPU under EDS churn. The message
    // lives only until its view is built.
    let cla = super::presized::load_assignment(&bytes)
        .map_err(|e| ValidationError(format!("not a valid ClusterLoadAssignment: {e}")))?;
    validate_load_assignment(&cla)?;
    LoadAssignment::of_validated(&cla, bytes)
}

/// Validates endpoints, from EDS or inline in a cluster. Errors start with the
/// path of the bad field below the load assignment.
pub(crate) fn validate_load_assignment(cla: &ClusterLoadAssignment) -> Result<(), ValidationError> {
    let mut priorities = Vec::new();
    let mut seen_localities = HashSet::default();
    for (l, locality) in cla.endpoints.iter().enumerate() {
        // A locality with weight 0 is ignored by gRPC, not rejected; but the
        // same locality twice in one priority is ambiguous.
        let id = locality.locality.as_ref().map(|loc| {
            (
                loc.region.as_str(),
                loc.zone.as_str(),
                loc.sub_zone.as_str(),
            )
        });
        if !seen_localities.insert((locality.priority, id)) {
            return Err(ValidationError::field(
                format_args!("endpoints[{l}].locality"),
                format_args!(
                    "duplicate locality {id:?} in priority {}",
                    locality.priority
                ),
            ));
        }
        priorities.push(locality.priority);
        if let Some(LbConfig::LedsClusterLocalityConfig(config)) = &locality.lb_config
            && leds::check_leds_locality(l, config)?
        {
            continue;
        }
        let mut weight_sum: u64 = 0;
        for (e, lb) in locality.lb_endpoints.iter().enumerate() {
            // Paths are written only for an error: this loop runs for every
            // endpoint of every update.
            let at = EndpointAt::Listed {
                locality: l,
                endpoint: e,
            };
            let weight = lb.load_balancing_weight.as_ref().map_or(1, |w| w.value);
            if weight == 0 {
                return Err(ValidationError::field(
                    format_args!("{at}load_balancing_weight"),
                    "must be at least 1",
                ));
            }
            weight_sum += u64::from(weight);
            validate_host(lb.host_identifier.as_ref(), at)?;
        }
        if weight_sum > u64::from(u32::MAX) {
            return Err(ValidationError::field(
                format_args!("endpoints[{l}].lb_endpoints"),
                "endpoint weights add up to more than 4294967295",
            ));
        }
    }
    // Priorities must be 0..=N without holes.
    priorities.sort_unstable();
    priorities.dedup();
    if let Some((i, p)) = priorities
        .iter()
        .enumerate()
        .find(|(i, p)| **p as usize != *i)
    {
        return Err(ValidationError::field(
            "endpoints",
            format_args!(
                "priorities are not contiguous: priority {p} found where {i} was expected"
            ),
        ));
    }
    Ok(())
}

/// The LEDS resource type (xDS TP1): one `envoy.config.endpoint.v3.LbEndpoint`,
/// a member of the glob collection a ClusterLoadAssignment's locality names
/// in `leds_cluster_locality_config`. Delta xDS only: glob collections are
/// not part of the state-of-the-world variant. An `LbEndpoint` carries no
/// name of its own; its name is the one on the delta `Resource`.
///
/// Validated as an endpoint inside a ClusterLoadAssignment is: a socket
/// address with a host and a port, and a weight of at least 1 if one is
/// given.
#[derive(Debug, Clone, Copy, Default)]
pub struct LbEndpointType;

impl ResourceType for LbEndpointType {
    const TYPE_URL: &'static str = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";
    const SOTW_FULL_STATE: bool = false;
    type Resource = LedsEndpoint;

    fn decode(bytes: &[u8]) -> Result<LedsEndpoint, ValidationError> {
        Self::decode_shared(&Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: &Bytes) -> Result<LedsEndpoint, ValidationError> {
        Self::decode_owned(bytes.clone())
    }

    const KEEPS_BYTES: bool = true;

    fn decode_owned(bytes: Bytes) -> Result<LedsEndpoint, ValidationError> {
        // Nearly every endpoint has the common shape, read from its bytes
        // without building prost's structs; every other one, and every
        // invalid one, takes the full decode, which decides alike.
        LedsEndpoint::of_common_shape(bytes).or_else(decode_lb_endpoint_fully)
    }

    fn held_bytes(resource: &LedsEndpoint) -> Option<&Bytes> {
        Some(resource.raw())
    }

    fn name(_: &LedsEndpoint) -> Option<&str> {
        None
    }
}

/// An LEDS endpoint decoded into prost's structs, validated and viewed:
/// the path for every message, before the common shape was read from its
/// bytes, and still the path for every other one.
fn decode_lb_endpoint_fully(bytes: Bytes) -> Result<LedsEndpoint, ValidationError> {
    let lb: LbEndpoint = decode_message(&bytes, "LbEndpoint")?;
    validate_lb_endpoint(&lb)?;
    LedsEndpoint::of_validated(&lb, bytes)
}

/// Validates a bare LEDS endpoint: a socket address with a host and a
/// port, and a weight of at least 1 if one is given.
pub(crate) fn validate_lb_endpoint(lb: &LbEndpoint) -> Result<(), ValidationError> {
    if lb
        .load_balancing_weight
        .as_ref()
        .is_some_and(|w| w.value == 0)
    {
        return Err(ValidationError::field(
            "load_balancing_weight",
            "must be at least 1",
        ));
    }
    validate_host(lb.host_identifier.as_ref(), EndpointAt::Bare)
}

/// Where an endpoint sits, as the start of a field path (with its trailing
/// dot): inside a load assignment, or a bare LEDS `LbEndpoint` with nothing
/// above it.
#[derive(Debug, Clone, Copy)]
enum EndpointAt {
    Bare,
    Listed { locality: usize, endpoint: usize },
}

impl std::fmt::Display for EndpointAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointAt::Bare => Ok(()),
            EndpointAt::Listed { locality, endpoint } => {
                write!(f, "endpoints[{locality}].lb_endpoints[{endpoint}].")
            }
        }
    }
}

fn validate_host(host: Option<&HostIdentifier>, at: EndpointAt) -> Result<(), ValidationError> {
    let Some(HostIdentifier::Endpoint(endpoint)) = host else {
        return Err(ValidationError::field(
            format_args!("{at}endpoint"),
            "missing",
        ));
    };
    let Some(Address::SocketAddress(sa)) =
        endpoint.address.as_ref().and_then(|a| a.address.as_ref())
    else {
        return Err(ValidationError::field(
            format_args!("{at}endpoint.address.socket_address"),
            "missing",
        ));
    };
    if sa.address.is_empty() {
        return Err(ValidationError::field(
            format_args!("{at}endpoint.address.socket_address.address"),
            "empty",
        ));
    }
    match sa.port_specifier {
        Some(PortSpecifier::PortValue(p)) if p <= 65535 => Ok(()),
        Some(PortSpecifier::PortValue(p)) => Err(ValidationError::field(
            format_args!("{at}endpoint.address.socket_address.port_value"),
            format_args!("{p} is not a port"),
        )),
        _ => Err(ValidationError::field(
            format_args!("{at}endpoint.address.socket_address.port_value"),
            "missing",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tests_support::*;
    use prost::Message;

    #[test]
    fn load_assignment_decodes() {
        let cla = load_assignment("c1", &[("10.0.0.1", 80), ("10.0.0.2", 80)]);
        let out = EndpointType::decode(&cla.encode_to_vec()).expect("valid");
        assert_eq!(EndpointType::name(&out), Some("c1"));
    }

    #[test]
    fn endpoint_port_above_65535_is_rejected_naming_the_endpoint() {
        let cla = load_assignment("c1", &[("10.0.0.1", 80), ("10.0.0.2", 70000)]);
        let err = EndpointType::decode(&cla.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "endpoints[0].lb_endpoints[1].endpoint.address.socket_address.port_value: 70000 is not a port"
        );
    }

    #[test]
    fn lb_endpoint_decodes_and_a_bad_port_is_named_from_its_root() {
        let cla = load_assignment("c1", &[("10.0.0.1", 80), ("10.0.0.2", 70000)]);
        let good = &cla.endpoints[0].lb_endpoints[0];
        let out = LbEndpointType::decode(&good.encode_to_vec()).expect("valid");
        assert_eq!(out.view().address, "10.0.0.1");
        assert_eq!(&out.decode().expect("held bytes decode"), good);
        let bad = &cla.endpoints[0].lb_endpoints[1];
        let err = LbEndpointType::decode(&bad.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "endpoint.address.socket_address.port_value: 70000 is not a port"
        );
    }

    #[test]
    fn non_contiguous_priorities_are_rejected() {
        let mut cla = load_assignment("c1", &[("10.0.0.1", 80)]);
        cla.endpoints[0].priority = 1;
        let err = EndpointType::decode(&cla.encode_to_vec()).unwrap_err();
        assert!(err.0.contains("priorities are not contiguous"), "{err}");
    }
}
