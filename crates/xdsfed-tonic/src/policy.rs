//! The cluster's load-balancing policy: ROUND_ROBIN or LEAST_REQUEST (gRFC
//! A48), read from `load_balancing_policy` when it is set (the first entry
//! this crate supports wins, as the field's contract says) and from the
//! `lb_policy` enum otherwise. Every other policy is refused with a message
//! naming it, and the routes that reach the cluster fail with it.
//!
//! Both policies pick the least loaded of a few random ready endpoints
//! (two, or LEAST_REQUEST's `choice_count`); they differ in what the
//! candidates are compared by (see [`Endpoint`](crate::Endpoint)).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::LoadBalancingPolicy;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{LbConfig, LbPolicy as LbPolicyEnum};
use envoy_types::pb::envoy::extensions::load_balancing_policies::least_request::v3::LeastRequest;
use envoy_types::pb::envoy::extensions::load_balancing_policies::wrr_locality::v3::WrrLocality;
use prost::Message;

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
}

const ROUND_ROBIN_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
const LEAST_REQUEST_TYPE: &str =
    "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";
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
    /// use xdsfed_tonic::LbPolicy;
    /// assert_eq!(LbPolicy::of(&Cluster::default()), Ok(LbPolicy::RoundRobin));
    /// let ring = Cluster { lb_policy: 2, ..Default::default() };
    /// assert!(LbPolicy::of(&ring).unwrap_err().contains("RING_HASH"));
    /// ```
    pub fn of(cluster: &Cluster) -> Result<Self, String> {
        if let Some(policy) = cluster
            .load_balancing_policy
            .as_ref()
            .filter(|p| !p.policies.is_empty())
        {
            return from_policy_list(policy, 0);
        }
        match LbPolicyEnum::try_from(cluster.lb_policy) {
            Ok(LbPolicyEnum::RoundRobin) => Ok(Self::RoundRobin),
            Ok(LbPolicyEnum::LeastRequest) => {
                let choice_count = match &cluster.lb_config {
                    Some(LbConfig::LeastRequestLbConfig(c)) => c.choice_count.map(|v| v.value),
                    _ => None,
                };
                least_request(choice_count)
            }
            Ok(other) => Err(refused(other.as_str_name())),
            Err(_) => Err(refused(&format!("value {}", cluster.lb_policy))),
        }
    }
}

fn refused(what: &str) -> String {
    format!(
        "lb_policy {what} is not supported (xdsfed-tonic balances with ROUND_ROBIN or LEAST_REQUEST)"
    )
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
        "none of load_balancing_policy's entries is supported (found {}; xdsfed-tonic balances with round_robin or least_request)",
        seen.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::cluster::LeastRequestLbConfig;
    use envoy_types::pb::envoy::config::cluster::v3::load_balancing_policy::Policy;
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::google::protobuf::{Any, UInt32Value};

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
        assert_eq!(
            LbPolicy::of(&cluster),
            Ok(LbPolicy::LeastRequest { choice_count: 3 })
        );
    }

    #[test]
    fn other_lb_policies_are_refused_by_name() {
        let cluster = Cluster {
            lb_policy: LbPolicyEnum::Maglev as i32,
            ..Default::default()
        };
        let error = LbPolicy::of(&cluster).unwrap_err();
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
        assert_eq!(
            LbPolicy::of(&cluster),
            Ok(LbPolicy::LeastRequest { choice_count: 2 })
        );
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
        assert_eq!(LbPolicy::of(&cluster), Ok(LbPolicy::RoundRobin));
    }

    #[test]
    fn a_policy_list_with_nothing_supported_is_refused_naming_its_entries() {
        let cluster = Cluster {
            load_balancing_policy: Some(LoadBalancingPolicy {
                policies: vec![entry(
                    "type.googleapis.com/envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash",
                    vec![],
                )],
            }),
            ..Default::default()
        };
        let error = LbPolicy::of(&cluster).unwrap_err();
        assert!(error.contains("ring_hash.v3.RingHash"), "{error}");
    }
}
