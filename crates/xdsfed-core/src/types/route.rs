//! `envoy.config.route.v3.RouteConfiguration`, validated as gRPC validates it
//! (gRFC A27, A28).
//!
//! A configuration from a server is validated and viewed route by route
//! from its bytes (`stream`), never decoded whole: a decoded route is some
//! 3 KB against about 100 bytes on the wire, so the whole message of a
//! large table cost hundreds of megabytes for the moment it took to keep
//! its compact view. The memory it takes in passing is now that of one
//! route, not of the table. A configuration inline in a listener arrives
//! decoded with it and is checked by the same rules, a virtual host's own
//! ([`validate_virtual_host`]) then each route's ([`validate_route`]).

use envoy_types::pb::envoy::config::route::v3::{
    RetryPolicy, Route, RouteAction, RouteConfiguration, VirtualHost, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};

use bytes::Bytes;

use super::{ResourceType, ValidationError};

mod stream;
mod view;

pub use view::{RouteConfigView, RouteTarget};

/// The RDS resource type. A resource is held as its bytes and a compact
/// view ([`RouteConfigView`]); the full message is decoded on demand.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteConfigurationType;

impl ResourceType for RouteConfigurationType {
    const TYPE_URL: &'static str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    const SOTW_FULL_STATE: bool = false;
    type Resource = RouteConfigView;

    fn decode(bytes: &[u8]) -> Result<RouteConfigView, ValidationError> {
        Self::decode_shared(&Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: &Bytes) -> Result<RouteConfigView, ValidationError> {
        Self::decode_owned(bytes.clone())
    }

    const KEEPS_BYTES: bool = true;

    fn decode_owned(bytes: Bytes) -> Result<RouteConfigView, ValidationError> {
        stream::view(bytes)
    }

    fn held_bytes(resource: &RouteConfigView) -> Option<&Bytes> {
        Some(resource.raw())
    }

    fn name(resource: &RouteConfigView) -> Option<&str> {
        Some(resource.name()).filter(|n| !n.is_empty())
    }

    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        super::name_of_message::<RouteConfiguration>(bytes, |m| &m.name)
    }
}

/// Validates a route configuration, inline or from RDS. Errors start with the
/// path of the bad field below the route configuration.
pub(crate) fn validate_route_configuration(rc: &RouteConfiguration) -> Result<(), ValidationError> {
    for (v, vhost) in rc.virtual_hosts.iter().enumerate() {
        validate_virtual_host(v, vhost)?;
        for (r, route) in vhost.routes.iter().enumerate() {
            validate_route(v, r, route)?;
        }
    }
    Ok(())
}

/// The rules of virtual host `v` itself; its routes are checked one by one
/// by [`validate_route`], after it.
fn validate_virtual_host(v: usize, vhost: &VirtualHost) -> Result<(), ValidationError> {
    if vhost.domains.is_empty() {
        return Err(ValidationError::field(
            format_args!("virtual_hosts[{v}] ({:?}).domains", vhost.name),
            "empty",
        ));
    }
    if let Some(retry) = &vhost.retry_policy {
        validate_retry_policy(retry, &format!("virtual_hosts[{v}].retry_policy"))?;
    }
    Ok(())
}

/// The rules of route `r` of virtual host `v`.
fn validate_route(v: usize, r: usize, route: &Route) -> Result<(), ValidationError> {
    let at = || format!("virtual_hosts[{v}].routes[{r}]");
    let Some(m) = route.r#match.as_ref() else {
        return Err(ValidationError::field(
            format_args!("{}.match", at()),
            "missing",
        ));
    };
    if let Some(PathSpecifier::SafeRegex(re)) = &m.path_specifier
        && re.regex.is_empty()
    {
        return Err(ValidationError::field(
            format_args!("{}.match.safe_regex.regex", at()),
            "empty",
        ));
    }
    if let Some(Action::Route(action)) = &route.action {
        validate_route_action(action, &format!("{}.route", at()))?;
    }
    Ok(())
}

/// gRFC A44, as gRPC reads a retry policy: `num_retries` at least 1, and
/// a `retry_back_off` whose `base_interval` (required there) and
/// `max_interval` are positive.
fn validate_retry_policy(retry: &RetryPolicy, at: &str) -> Result<(), ValidationError> {
    if let Some(n) = &retry.num_retries
        && n.value < 1
    {
        return Err(ValidationError::field(
            format_args!("{at}.num_retries"),
            format_args!("{} is below 1", n.value),
        ));
    }
    let Some(back_off) = &retry.retry_back_off else {
        return Ok(());
    };
    let positive = |d: Option<&envoy_types::pb::google::protobuf::Duration>| {
        d.and_then(super::std_duration)
            .is_some_and(|d| !d.is_zero())
    };
    if !positive(back_off.base_interval.as_ref()) {
        return Err(ValidationError::field(
            format_args!("{at}.retry_back_off.base_interval"),
            "missing or not above 0",
        ));
    }
    if back_off.max_interval.is_some() && !positive(back_off.max_interval.as_ref()) {
        return Err(ValidationError::field(
            format_args!("{at}.retry_back_off.max_interval"),
            "not above 0",
        ));
    }
    Ok(())
}

fn validate_route_action(action: &RouteAction, at: &str) -> Result<(), ValidationError> {
    if let Some(retry) = &action.retry_policy {
        validate_retry_policy(retry, &format!("{at}.retry_policy"))?;
    }
    match &action.cluster_specifier {
        Some(ClusterSpecifier::Cluster(name)) if name.is_empty() => Err(ValidationError::field(
            format_args!("{at}.cluster"),
            "empty",
        )),
        Some(ClusterSpecifier::ClusterHeader(header)) if header.is_empty() => Err(
            ValidationError::field(format_args!("{at}.cluster_header"), "empty"),
        ),
        Some(ClusterSpecifier::WeightedClusters(wc)) => {
            if wc.clusters.is_empty() {
                return Err(ValidationError::field(
                    format_args!("{at}.weighted_clusters.clusters"),
                    "empty",
                ));
            }
            // gRPC sums weights in 32 bits and refuses a zero or overflowing total.
            let mut total: u64 = 0;
            for (i, c) in wc.clusters.iter().enumerate() {
                if c.name.is_empty() && c.cluster_header.is_empty() {
                    return Err(ValidationError::field(
                        format_args!("{at}.weighted_clusters.clusters[{i}].name"),
                        "empty",
                    ));
                }
                total += u64::from(c.weight.as_ref().map_or(0, |w| w.value));
            }
            if total == 0 || total > u64::from(u32::MAX) {
                return Err(ValidationError::field(
                    format_args!("{at}.weighted_clusters"),
                    format_args!("total weight {total} is not in 1..=4294967295"),
                ));
            }
            Ok(())
        }
        None => Err(ValidationError::field(
            format_args!("{at}.cluster_specifier"),
            "missing",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tests_support::*;
    use envoy_types::pb::envoy::config::route::v3::{
        WeightedCluster, weighted_cluster::ClusterWeight,
    };
    use prost::Message;

    #[test]
    fn route_configuration_with_one_cluster_decodes() {
        let rc = route_config("r", &["c1"]);
        let out = RouteConfigurationType::decode(&rc.encode_to_vec()).expect("valid");
        assert_eq!(RouteConfigurationType::name(&out), Some("r"));
    }

    #[test]
    fn weighted_clusters_with_zero_total_are_rejected() {
        let mut rc = route_config("r", &["c1"]);
        let action = route_action_mut(&mut rc);
        action.cluster_specifier = Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: vec![ClusterWeight {
                name: "a".into(),
                weight: Some(envoy_types::pb::google::protobuf::UInt32Value { value: 0 }),
                ..Default::default()
            }],
            ..Default::default()
        }));
        let err = RouteConfigurationType::decode(&rc.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "virtual_hosts[0].routes[0].route.weighted_clusters: total weight 0 is not in 1..=4294967295"
        );
    }

    /// gRFC A44: a retry policy with `num_retries` 0 is NACKed, naming the
    /// field.
    #[test]
    fn retry_policy_with_zero_retries_is_rejected() {
        let mut rc = route_config("r", &["c1"]);
        route_action_mut(&mut rc).retry_policy = Some(RetryPolicy {
            retry_on: "unavailable".into(),
            num_retries: Some(envoy_types::pb::google::protobuf::UInt32Value { value: 0 }),
            ..Default::default()
        });
        let err = RouteConfigurationType::decode(&rc.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "virtual_hosts[0].routes[0].route.retry_policy.num_retries: 0 is below 1"
        );
    }

    /// gRFC A44: a `retry_back_off` without a positive `base_interval` is
    /// NACKed, on a virtual host as on a route.
    #[test]
    fn retry_back_off_without_base_interval_is_rejected() {
        use envoy_types::pb::envoy::config::route::v3::retry_policy::RetryBackOff;
        let mut rc = route_config("r", &["c1"]);
        rc.virtual_hosts[0].retry_policy = Some(RetryPolicy {
            retry_on: "unavailable".into(),
            retry_back_off: Some(RetryBackOff::default()),
            ..Default::default()
        });
        let err = RouteConfigurationType::decode(&rc.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "virtual_hosts[0].retry_policy.retry_back_off.base_interval: missing or not above 0"
        );
    }

    #[test]
    fn virtual_host_without_domains_is_rejected() {
        let mut rc = route_config("r", &["c1"]);
        rc.virtual_hosts[0].domains.clear();
        let err = RouteConfigurationType::decode(&rc.encode_to_vec()).unwrap_err();
        assert!(err.0.starts_with("virtual_hosts[0]"), "{err}");
        assert!(err.0.ends_with(".domains: empty"), "{err}");
    }
}
