//! The cluster's load-balancing policy: ROUND_ROBIN or LEAST_REQUEST (gRFC
//! A48), read from `load_balancing_policy` when it is set (the first entry
//! this crate supports wins, as the field's contract says) and from the
//! `lb_policy` enum otherwise. Every other policy is refused with a message
//! naming it, and the routes that reach the cluster fail with it.
//!
//! Both policies pick the least loaded of a few random ready endpoints
//! (two, or LEAST_REQUEST's `choice_count`); they differ in what the
//! candidates are compared by (see [`Endpoint`](crate::Endpoint)).

use envoy_types::pb::envoy::config::cluster::v3::LoadBalancingPolicy;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{LbConfig, LbPolicy as LbPolicyEnum};
use envoy_types::pb::envoy::extensions::load_balancing_policies::least_request::v3::LeastRequest;
use envoy_types::pb::envoy::extensions::load_balancing_policies::ring_hash::v3::RingHash;
use envoy_types::pb::envoy::extensions::load_balancing_policies::wrr_locality::v3::WrrLocality;
use prost::Message;
use xdsfed_core::types::ClusterView;

/// How a cluster's balancer picks among its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbPolicy {
    /// ROUND_ROBIN: every endpoint gets its weighted share of requests in
    /// turn. The two candidates are compared by requests sent so far,
    /// divided by the endpoint's weight.
    RoundRobin,
    /// LEAST_REQUEST (gRFC A48): the candidate with fewer requests in
    /// flight wins. Endpoint weights are not used, as in A48.
    LeastRequest {
        /// The configured `choice_count` (default 2): how many random
        /// ready endpoints each pick compares.
        choice_count: u32,
    },
    /// RING_HASH (gRFC A42): a request goes to the first ready endpoint
    /// walking a consistent-hash ring from the request's hash (the route's
    /// `hash_policy`).
    RingHash {
        /// The ring's least size (default 1024).
        min_ring_size: u64,
        /// The ring's greatest size (default and cap 8 Mi).
        max_ring_size: u64,
    },
}

const ROUND_ROBIN_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
const LEAST_REQUEST_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";
const RING_HASH_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash";
const WRR_LOCALITY_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.wrr_locality.v3.WrrLocality";

/// gRFC A48's default `choice_count`.
const DEFAULT_CHOICE_COUNT: u32 = 2;

/// How deep `WrrLocality` may nest another policy list (gRPC bounds the
/// recursion of `load_balancing_policy` at 16).
const MAX_POLICY_DEPTH: usize = 16;

impl LbPolicy {
    /// The policy of `cluster`, or why it is not supported.
    ///
    /// ```
    /// use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    /// use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    /// use xdsfed_core::types::ClusterView;
    /// use xdsfed_tonic::LbPolicy;
    /// let plain = Cluster { load_assignment: Some(ClusterLoadAssignment::default()), ..Default::default() };
    /// assert_eq!(LbPolicy::of(&ClusterView::new(&plain)?), Ok(LbPolicy::RoundRobin));
    /// let maglev = ClusterView::new(&Cluster { lb_policy: 5, ..plain })?;
    /// assert!(LbPolicy::of(&maglev).unwrap_err().contains("MAGLEV"));
    /// # Ok::<(), xdsfed_core::types::ValidationError>(())
    /// ```
    pub fn of(cluster: &ClusterView) -> Result<Self, String> {
        if let Some(policy) = cluster.load_balancing_policy() {
            return from_policy_list(policy, 0);
        }
        match LbPolicyEnum::try_from(cluster.lb_policy()) {
            Ok(LbPolicyEnum::RoundRobin) => Ok(Self::RoundRobin),
            Ok(LbPolicyEnum::LeastRequest) => {
                let choice_count = match cluster.lb_config() {
                    Some(LbConfig::LeastRequestLbConfig(c)) => c.choice_count.map(|v| v.value),
                    _ => None,
                };
                least_request(choice_count)
            }
            Ok(LbPolicyEnum::RingHash) => match cluster.lb_config() {
                Some(LbConfig::RingHashLbConfig(c)) => ring_hash(
                    // The cluster's enum: 0 is XX_HASH.
                    c.hash_function == 0,
                    c.minimum_ring_size.as_ref().map(|v| v.value),
                    c.maximum_ring_size.as_ref().map(|v| v.value),
                ),
                _ => ring_hash(true, None, None),
            },
            Ok(other) => Err(refused(other.as_str_name())),
            Err(_) => Err(refused(&format!("value {}", cluster.lb_policy()))),
        }
    }
}

fn refused(what: &str) -> String {
    format!(
        "lb_policy {what} is not supported (xdsfed-tonic balances with ROUND_ROBIN, LEAST_REQUEST or RING_HASH)"
    )
}

/// gRFC A42: XX_HASH only; ring sizes default to 1024 and 8 Mi, at most
/// 8 Mi, the least not above the greatest.
fn ring_hash(xx_hash: bool, min: Option<u64>, max: Option<u64>) -> Result<LbPolicy, String> {
    use crate::ring::{DEFAULT_MAX_RING_SIZE, DEFAULT_MIN_RING_SIZE};
    if !xx_hash {
        return Err("RING_HASH hash_function must be XX_HASH".to_owned());
    }
    let (min, max) = (
        min.unwrap_or(DEFAULT_MIN_RING_SIZE),
        max.unwrap_or(DEFAULT_MAX_RING_SIZE),
    );
    if min == 0 || min > max || max > DEFAULT_MAX_RING_SIZE {
        return Err(format!(
            "RING_HASH ring sizes {min}..{max} are not within 1..=8388608 in order"
        ));
    }
    Ok(LbPolicy::RingHash {
        min_ring_size: min,
        max_ring_size: max,
    })
}

/// gRFC A48: `choice_count` must be at least 2.
fn least_request(choice_count: Option<u32>) -> Result<LbPolicy, String> {
    match choice_count.unwrap_or(DEFAULT_CHOICE_COUNT) {
        n if n < 2 => Err(format!("LEAST_REQUEST choice_count {n} is below 2")),
        n => Ok(LbPolicy::LeastRequest { choice_count: n }),
    }
}

/// The first entry of the list this crate supports.
fn from_policy_list(list: &LoadBalancingPolicy, depth: usize) -> Result<LbPolicy, String> {
    if depth >= MAX_POLICY_DEPTH {
        return Err("load_balancing_policy nests deeper than 16 levels".to_owned());
    }
    let mut seen = Vec::new();
    for policy in &list.policies {
        let Some(any) = policy
            .typed_extension_config
            .as_ref()
            .and_then(|c| c.typed_config.as_ref())
        else {
            continue;
        };
        match any.type_url.as_str() {
            ROUND_ROBIN_TYPE => return Ok(LbPolicy::RoundRobin),
            LEAST_REQUEST_TYPE => {
                let config = LeastRequest::decode(any.value.as_slice())
                    .map_err(|e| format!("cannot decode LeastRequest: {e}"))?;
                return least_request(config.choice_count.map(|v| v.value));
            }
            RING_HASH_TYPE => {
                let config = RingHash::decode(any.value.as_slice())
                    .map_err(|e| format!("cannot decode RingHash: {e}"))?;
                // The extension's enum: 0 is DEFAULT_HASH (XX_HASH), 1 XX_HASH.
                return ring_hash(
                    config.hash_function <= 1,
                    config.minimum_ring_size.map(|v| v.value),
                    config.maximum_ring_size.map(|v| v.value),
                );
            }
            WRR_LOCALITY_TYPE => {
                // Locality weights are always applied; the child picks endpoints.
                let config = WrrLocality::decode(any.value.as_slice())
                    .map_err(|e| format!("cannot decode WrrLocality: {e}"))?;
                if let Some(child) = config.endpoint_picking_policy.as_ref() {
                    return from_policy_list(child, depth + 1);
                }
            }
            other => seen.push(crate::error::shown(other)),
        }
    }
    Err(format!(
        "none of load_balancing_policy's entries is supported (found {}; xdsfed-tonic balances with round_robin, least_request or ring_hash)",
        seen.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::LeastRequestLbConfig;
    use envoy_types::pb::envoy::config::cluster::v3::load_balancing_policy::Policy;
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::google::protobuf::{Any, UInt32Value};

    /// The policy of `cluster`, held as the client holds it (a STATIC
    /// cluster, so that it validates without a ConfigSource).
    fn of(cluster: &Cluster) -> Result<LbPolicy, String> {
        let cluster = Cluster {
            load_assignment: Some(ClusterLoadAssignment::default()),
            ..cluster.clone()
        };
        LbPolicy::of(&ClusterView::new(&cluster).expect("a valid cluster"))
    }

    fn entry(type_url: &str, value: Vec<u8>) -> Policy {
        Policy {
            typed_extension_config: Some(TypedExtensionConfig {
                name: "p".into(),
                typed_config: Some(Any {
                    type_url: type_url.into(),
                    value,
                }),
            }),
        }
    }

    #[test]
    fn least_request_reads_choice_count_from_lb_config() {
        let cluster = Cluster {
            lb_policy: LbPolicyEnum::LeastRequest as i32,
            lb_config: Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                choice_count: Some(UInt32Value { value: 3 }),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(of(&cluster), Ok(LbPolicy::LeastRequest { choice_count: 3 }));
    }

    /// gRFC A42: RING_HASH reads its ring sizes, from the enum's config or
    /// the policy list; sizes out of order or above 8 Mi are refused.
    #[test]
    fn ring_hash_reads_its_ring_sizes() {
        use envoy_types::pb::envoy::config::cluster::v3::cluster::RingHashLbConfig;
        use envoy_types::pb::google::protobuf::UInt64Value;
        let sized = |min, max| Cluster {
            lb_policy: LbPolicyEnum::RingHash as i32,
            lb_config: Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
                minimum_ring_size: Some(UInt64Value { value: min }),
                maximum_ring_size: Some(UInt64Value { value: max }),
                hash_function: 0,
            })),
            ..Default::default()
        };
        assert_eq!(
            of(&sized(10, 100)),
            Ok(LbPolicy::RingHash {
                min_ring_size: 10,
                max_ring_size: 100
            })
        );
        assert!(of(&sized(100, 10)).is_err());
        assert!(of(&sized(10, 1 << 24)).is_err());
        let listed = Cluster {
            load_balancing_policy: Some(LoadBalancingPolicy {
                policies: vec![entry(RING_HASH_TYPE, RingHash::default().encode_to_vec())],
            }),
            ..Default::default()
        };
        assert_eq!(
            of(&listed),
            Ok(LbPolicy::RingHash {
                min_ring_size: 1024,
                max_ring_size: 8 * 1024 * 1024
            })
        );
    }

    #[test]
    fn other_lb_policies_are_refused_by_name() {
        let cluster = Cluster {
            lb_policy: LbPolicyEnum::Maglev as i32,
            ..Default::default()
        };
        let error = of(&cluster).unwrap_err();
        assert!(error.contains("MAGLEV"), "{error}");
    }

    #[test]
    fn load_balancing_policy_takes_the_first_supported_entry() {
        let least = LeastRequest::default().encode_to_vec();
        let cluster = Cluster {
            lb_policy: LbPolicyEnum::RingHash as i32,
            load_balancing_policy: Some(LoadBalancingPolicy {
                policies: vec![
                    entry("type.googleapis.com/example.Unknown", vec![]),
                    entry(LEAST_REQUEST_TYPE, least),
                    entry(ROUND_ROBIN_TYPE, vec![]),
                ],
            }),
            ..Default::default()
        };
        assert_eq!(of(&cluster), Ok(LbPolicy::LeastRequest { choice_count: 2 }));
    }

    #[test]
    fn wrr_locality_uses_its_endpoint_picking_child() {
        let child = LoadBalancingPolicy {
            policies: vec![entry(ROUND_ROBIN_TYPE, vec![])],
        };
        let wrr = WrrLocality {
            endpoint_picking_policy: Some(child),
        }
        .encode_to_vec();
        let cluster = Cluster {
            load_balancing_policy: Some(LoadBalancingPolicy {
                policies: vec![entry(WRR_LOCALITY_TYPE, wrr)],
            }),
            ..Default::default()
        };
        assert_eq!(of(&cluster), Ok(LbPolicy::RoundRobin));
    }

    #[test]
    fn a_policy_list_with_nothing_supported_is_refused_naming_its_entries() {
        let cluster = Cluster {
            load_balancing_policy: Some(LoadBalancingPolicy {
                policies: vec![entry(
                    "type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev",
                    vec![],
                )],
            }),
            ..Default::default()
        };
        let error = of(&cluster).unwrap_err();
        assert!(error.contains("maglev.v3.Maglev"), "{error}");
    }
}
