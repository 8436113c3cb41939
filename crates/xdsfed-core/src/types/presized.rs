//! Decoding a `ClusterLoadAssignment` with its endpoint lists sized before
//! they are filled.
//!
//! prost grows a repeated field by doubling as it meets each element, so a
//! locality of ten endpoints costs four allocations and three copies of
//! every endpoint decoded so far, and the copy the cache holds keeps room
//! for sixteen. Under EDS churn that growth was a sixth of the client's CPU.
//! The lists' lengths are in the bytes: a walk over the field tags, which
//! skips every value, counts them first, and each list is allocated once at
//! its exact length.
//!
//! Rule: the result is the message prost decodes from the same bytes, field
//! for field; only the capacities differ. Anything the walk does not follow
//! (a malformed tag or length) is left to prost's own decoder, so an
//! invalid message fails with prost's error, path included. (prost's
//! nesting limit of 100 counts from each locality rather than from the
//! assignment, two levels up: a limit against runaway recursion, still one.)
//!
//! The same walk finds where a field's value lies in the bytes
//! ([`field_range`]), so that a view can point into the bytes it keeps
//! rather than copy strings out of the decoded message.

use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LocalityLbEndpoints};
use prost::Message;

use super::wire::Fields;

/// `ClusterLoadAssignment.endpoints`.
const ASSIGNMENT_ENDPOINTS: u32 = 2;
/// `LocalityLbEndpoints.lb_endpoints`.
const LOCALITY_LB_ENDPOINTS: u32 = 2;

/// Decodes `bytes` as prost would, with every endpoint list exactly sized.
pub(crate) fn load_assignment(bytes: &[u8]) -> Result<ClusterLoadAssignment, prost::DecodeError> {
    match presized(bytes) {
        Some(cla) => Ok(cla),
        // prost's own decoder, for its error (or for the rare message the
        // walk does not follow); the slack goes as prost leaves some.
        None => ClusterLoadAssignment::decode(bytes).map(|mut cla| {
            cla.endpoints.shrink_to_fit();
            for locality in &mut cla.endpoints {
                locality.lb_endpoints.shrink_to_fit();
            }
            cla
        }),
    }
}

fn presized(bytes: &[u8]) -> Option<ClusterLoadAssignment> {
    let mut cla = ClusterLoadAssignment {
        endpoints: Vec::with_capacity(count(bytes, ASSIGNMENT_ENDPOINTS)?),
        ..Default::default()
    };
    for field in Fields::new(bytes) {
        let field = field.ok()?;
        match field.message(ASSIGNMENT_ENDPOINTS) {
            Some(locality_bytes) => {
                cla.endpoints.push(locality(locality_bytes)?);
            }
            // Merging one field at a time is merging them all: a message's
            // encoding is the concatenation of its fields'.
            None => cla.merge(field.whole).ok()?,
        }
    }
    Some(cla)
}

fn locality(bytes: &[u8]) -> Option<LocalityLbEndpoints> {
    let mut locality = LocalityLbEndpoints {
        lb_endpoints: Vec::with_capacity(count(bytes, LOCALITY_LB_ENDPOINTS)?),
        ..Default::default()
    };
    locality.merge(bytes).ok()?;
    Some(locality)
}

/// How many length-delimited fields numbered `number` `bytes` holds; `None`
/// when the walk cannot follow the bytes.
fn count(bytes: &[u8], number: u32) -> Option<usize> {
    let mut n = 0;
    for field in Fields::new(bytes) {
        let field = field.ok()?;
        n += usize::from(field.message(number).is_some());
    }
    Some(n)
}

/// Where, in `bytes`, the value of the length-delimited field reached by
/// `path` (field numbers, outermost first) lies: its last occurrence in
/// any occurrence of each enclosing field, in the order of the bytes.
/// Decoding merges the repeats of an enclosing message, and the last copy
/// of a string wins, so for a string this is the value decoded; callers
/// check what they find against the decoded message all the same. `None`
/// when it is absent or the walk cannot follow the bytes. Each byte is
/// walked once per level of `path`.
pub(crate) fn field_range(bytes: &[u8], path: &[u32]) -> Option<std::ops::Range<usize>> {
    let (&number, inner) = path.split_first()?;
    let mut found = None;
    for field in Fields::new(bytes) {
        let field = field.ok()?;
        let Some(payload) = field.message(number) else {
            continue;
        };
        let start = (payload.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
        let range = match inner {
            [] => Some(0..payload.len()),
            _ => field_range(payload, inner),
        };
        if let Some(range) = range {
            found = Some(start + range.start..start + range.end);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::Locality;
    use envoy_types::pb::envoy::config::endpoint::v3::{LbEndpoint, cluster_load_assignment};
    use envoy_types::pb::google::protobuf::UInt32Value;

    use super::*;
    use crate::types::tests_support;

    fn lb_endpoint(host: &str, port: u32) -> LbEndpoint {
        tests_support::load_assignment("x", &[(host, port)]).endpoints[0].lb_endpoints[0].clone()
    }

    fn assignment(localities: &[usize]) -> ClusterLoadAssignment {
        ClusterLoadAssignment {
            cluster_name: "c".into(),
            endpoints: localities
                .iter()
                .enumerate()
                .map(|(l, &n)| LocalityLbEndpoints {
                    locality: Some(Locality {
                        zone: format!("z{l}"),
                        ..Default::default()
                    }),
                    priority: l as u32,
                    lb_endpoints: (0..n)
                        .map(|e| lb_endpoint(&format!("10.0.{l}.{e}"), 80))
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            policy: Some(cluster_load_assignment::Policy {
                overprovisioning_factor: Some(UInt32Value { value: 140 }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn decodes_what_prost_decodes_with_exact_capacities() {
        for shape in [&[][..], &[0], &[1], &[10], &[3, 0, 17], &[5, 5, 5, 5]] {
            let bytes = assignment(shape).encode_to_vec();
            let ours = load_assignment(&bytes).unwrap();
            assert_eq!(
                ours,
                ClusterLoadAssignment::decode(bytes.as_slice()).unwrap()
            );
            assert_eq!(ours.endpoints.capacity(), shape.len(), "{shape:?}");
            for (locality, &n) in ours.endpoints.iter().zip(shape) {
                assert_eq!(locality.lb_endpoints.capacity(), n, "{shape:?}");
            }
        }
    }

    #[test]
    fn fields_split_across_the_message_merge_as_prost_merges_them() {
        // The name twice (the last wins) and the policy in two pieces, with
        // localities between them.
        let mut bytes = ClusterLoadAssignment {
            cluster_name: "first".into(),
            ..Default::default()
        }
        .encode_to_vec();
        bytes.extend(assignment(&[2]).encode_to_vec());
        bytes.extend(
            ClusterLoadAssignment {
                policy: Some(cluster_load_assignment::Policy {
                    weighted_priority_health: true,
                    ..Default::default()
                }),
                endpoints: assignment(&[1, 4]).endpoints,
                ..Default::default()
            }
            .encode_to_vec(),
        );
        let ours = load_assignment(&bytes).unwrap();
        assert_eq!(
            ours,
            ClusterLoadAssignment::decode(bytes.as_slice()).unwrap()
        );
        assert_eq!(ours.endpoints.len(), 3);
    }

    #[test]
    fn an_invalid_message_fails_with_prosts_error() {
        let bytes = assignment(&[3, 2]).encode_to_vec();
        for cut in 1..bytes.len() {
            let ours = load_assignment(&bytes[..cut]);
            let prost = ClusterLoadAssignment::decode(&bytes[..cut]);
            assert_eq!(ours.is_ok(), prost.is_ok(), "cut at {cut}");
            if let (Err(ours), Err(prost)) = (ours, prost) {
                assert_eq!(ours.to_string(), prost.to_string(), "cut at {cut}");
            }
        }
        // Endpoints with the wrong wire type: prost's error names the field.
        let bad = [0x10, 0x01];
        let error = load_assignment(&bad).unwrap_err().to_string();
        assert_eq!(
            error,
            ClusterLoadAssignment::decode(&bad[..])
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn every_single_byte_change_decodes_or_fails_as_prost_does() {
        let bytes = assignment(&[2, 1]).encode_to_vec();
        for at in 0..bytes.len() {
            for value in [0x00, 0x01, 0x02, 0x0a, 0x12, 0x7f, 0x80, 0xff] {
                let mut changed = bytes.clone();
                changed[at] = value;
                let ours = load_assignment(&changed).map_err(|e| e.to_string());
                let prost =
                    ClusterLoadAssignment::decode(changed.as_slice()).map_err(|e| e.to_string());
                assert_eq!(ours, prost, "byte {at} set to {value:#x}");
            }
        }
    }

    #[test]
    fn unknown_fields_and_groups_decode_as_prost_decodes_them() {
        let mut bytes = assignment(&[2]).encode_to_vec();
        // Unknown field 99: a fixed64, then a group holding a varint.
        bytes.extend([0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]);
        bytes.extend([0x9b, 0x06, 0x08, 0x01, 0x9c, 0x06]);
        let prost = ClusterLoadAssignment::decode(bytes.as_slice()).unwrap();
        assert_eq!(load_assignment(&bytes).unwrap(), prost);
        let lb: LbEndpoint = lb_endpoint("10.0.0.0", 80);
        assert_eq!(prost.endpoints[0].lb_endpoints[0], lb);
    }
}
