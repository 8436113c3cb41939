//! What the client holds of a validated `Cluster`: the bytes the server
//! sent, shared, and a compact view of what the graph and a data plane
//! read.
//!
//! A decoded `Cluster` is some 3.4 KB of prost structs, nearly all of it
//! empty inline options; an EDS cluster's bytes are about 100. So the
//! decoded message lives only while it is validated: what stays is the
//! bytes and the few settings a data plane acts on, each boxed only when
//! the cluster sets it. The name, the EDS service name and the EDS
//! ConfigSource are read from the bytes where they lie (checked against
//! the decoded message when the view is built; copied when they cannot be
//! found there), so an EDS cluster costs no allocation beyond its bytes and
//! its view. The full message is decoded again from the bytes on demand
//! ([`ClusterView::decode`]).
//!
//! Rule: the view shows exactly what the message says, of what it covers:
//! the name; how endpoints are found (EDS with its service name and
//! ConfigSource, an aggregate's children in order, or endpoints inside the
//! cluster for STATIC and LOGICAL_DNS); `lb_policy`, `lb_config` and
//! `load_balancing_policy`; `connect_timeout`; `outlier_detection`; the
//! TLS of gRFC A29; and the DEFAULT priority's `max_requests` (gRFC A32).
//! Only validated messages are viewed.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, LbConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, LoadBalancingPolicy, OutlierDetection};
use envoy_types::pb::envoy::config::core::v3::{ConfigSource, RoutingPriority};
use prost::Message;

use super::{UpstreamTls, aggregate_children};
use crate::types::{LoadAssignment, ValidationError, std_duration};

/// A validated `Cluster`, held as its bytes and a compact view.
///
/// ```
/// use envoy_types::pb::envoy::config::cluster::v3::Cluster;
/// use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig};
/// use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, ConfigSource};
/// use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
/// use xdsfed_core::types::{ClusterDiscovery, ClusterView};
///
/// let message = Cluster {
///     name: "backend".into(),
///     cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
///     eds_cluster_config: Some(EdsClusterConfig {
///         service_name: "backend-eds".into(),
///         eds_config: Some(ConfigSource {
///             config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
///             ..Default::default()
///         }),
///     }),
///     ..Default::default()
/// };
/// let held = ClusterView::new(&message)?;
/// assert_eq!(held.name(), "backend");
/// assert!(matches!(held.discovery(), ClusterDiscovery::Eds { service_name: "backend-eds", .. }));
/// assert_eq!(held.decode()?, message);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct ClusterView {
    raw: Bytes,
    /// Where the names are: in `raw` when this is empty (the usual case),
    /// else copied here.
    text: Box<str>,
    name: Range<u32>,
    kind: Kind,
    lb_policy: i32,
    lb_config: Option<Box<LbConfig>>,
    load_balancing_policy: Option<Box<LoadBalancingPolicy>>,
    connect_timeout: Option<Duration>,
    outlier_detection: Option<Box<OutlierDetection>>,
    upstream_tls: Option<Arc<UpstreamTls>>,
    max_requests: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Eds {
        service_name: Range<u32>,
        config: EdsConfig,
    },
    Aggregate {
        children: Box<[Box<str>]>,
    },
    Inline {
        logical_dns: bool,
        load_assignment: Option<Arc<LoadAssignment>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum EdsConfig {
    Absent,
    /// The message's bytes, in `raw`.
    InRaw(Range<u32>),
    Copied(Arc<ConfigSource>),
}

/// How a cluster's endpoints are found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClusterDiscovery<'a> {
    /// From EDS.
    Eds {
        /// `eds_cluster_config.service_name` as sent: empty means the
        /// cluster's own name. The ConfigSource is
        /// [`ClusterView::eds_config`].
        service_name: &'a str,
    },
    /// An aggregate cluster (gRFC A37): its children in priority order, as
    /// listed.
    Aggregate {
        /// The child cluster names.
        children: &'a [Box<str>],
    },
    /// STATIC: the endpoints inside the cluster.
    Static {
        /// `load_assignment`, held as an EDS assignment is.
        load_assignment: Option<&'a Arc<LoadAssignment>>,
    },
    /// LOGICAL_DNS (gRFC A37): one host name inside the cluster.
    LogicalDns {
        /// `load_assignment`: one locality with one endpoint.
        load_assignment: Option<&'a Arc<LoadAssignment>>,
    },
}

impl ClusterView {
    /// Validates `message` as the client validates CDS (gRFC A27, A29,
    /// A37, A50) and holds it; for tests and for clusters built by hand.
    pub fn new(message: &Cluster) -> Result<Self, ValidationError> {
        let tls = super::validate_cluster(message)?;
        Self::of_validated(message, Bytes::from(message.encode_to_vec()), tls)
    }

    /// The view of `message`, which validation accepted (finding `tls`) and
    /// which was decoded from `raw`.
    pub(crate) fn of_validated(
        message: &Cluster,
        raw: Bytes,
        tls: Option<UpstreamTls>,
    ) -> Result<Self, ValidationError> {
        let names = Names::of(message, &raw)?;
        let kind = kind_of(message, &raw, names.service_name)?;
        Ok(Self {
            raw,
            text: names.text,
            name: names.name,
            kind,
            lb_policy: message.lb_policy,
            lb_config: message.lb_config.clone().map(Box::new),
            load_balancing_policy: message
                .load_balancing_policy
                .clone()
                .filter(|p| !p.policies.is_empty())
                .map(Box::new),
            connect_timeout: message.connect_timeout.as_ref().and_then(std_duration),
            outlier_detection: message.outlier_detection.clone().map(Box::new),
            upstream_tls: tls.map(Arc::new),
            max_requests: max_requests(message),
        })
    }

    /// `name`.
    pub fn name(&self) -> &str {
        self.span(&self.name)
    }

    /// How the cluster's endpoints are found.
    pub fn discovery(&self) -> ClusterDiscovery<'_> {
        match &self.kind {
            Kind::Eds { service_name, .. } => ClusterDiscovery::Eds {
                service_name: self.span(service_name),
            },
            Kind::Aggregate { children } => ClusterDiscovery::Aggregate { children },
            Kind::Inline {
                logical_dns: false,
                load_assignment,
            } => ClusterDiscovery::Static {
                load_assignment: load_assignment.as_ref(),
            },
            Kind::Inline {
                logical_dns: true,
                load_assignment,
            } => ClusterDiscovery::LogicalDns {
                load_assignment: load_assignment.as_ref(),
            },
        }
    }

    /// The EDS service name as sent (empty: the cluster's own name), or
    /// `None` when the cluster is not EDS.
    pub fn eds_service_name(&self) -> Option<&str> {
        match self.discovery() {
            ClusterDiscovery::Eds { service_name, .. } => Some(service_name),
            _ => None,
        }
    }

    /// `lb_policy` as sent (0, ROUND_ROBIN, when unset).
    pub fn lb_policy(&self) -> i32 {
        self.lb_policy
    }

    /// `lb_config`, if set.
    pub fn lb_config(&self) -> Option<&LbConfig> {
        self.lb_config.as_deref()
    }

    /// `load_balancing_policy`, if it lists any policy (it then replaces
    /// `lb_policy`, gRFC A52).
    pub fn load_balancing_policy(&self) -> Option<&LoadBalancingPolicy> {
        self.load_balancing_policy.as_deref()
    }

    /// `connect_timeout`, if set to a usable duration.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// `outlier_detection` (gRFC A50), if set.
    pub fn outlier_detection(&self) -> Option<&OutlierDetection> {
        self.outlier_detection.as_deref()
    }

    /// The TLS the cluster's endpoints are reached with (gRFC A29), `None`
    /// for plaintext.
    pub fn upstream_tls(&self) -> Option<&Arc<UpstreamTls>> {
        self.upstream_tls.as_ref()
    }

    /// The DEFAULT priority's `circuit_breakers` `max_requests` (gRFC A32),
    /// if set; gRPC's default is 1024.
    pub fn max_requests(&self) -> Option<u32> {
        self.max_requests
    }

    /// The bytes the server sent, shared.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The full message, decoded again from the bytes the server sent.
    pub fn decode(&self) -> Result<Cluster, prost::DecodeError> {
        Cluster::decode(self.raw.clone())
    }

    fn span(&self, range: &Range<u32>) -> &str {
        let range = range.start as usize..range.end as usize;
        if self.text.is_empty() {
            // Checked to be the decoded string when the view was built.
            let bytes = self.raw.get(range).unwrap_or_default();
            std::str::from_utf8(bytes).unwrap_or_default()
        } else {
            self.text.get(range).unwrap_or_default()
        }
    }

    /// `eds_cluster_config.eds_config` of an EDS cluster, decoded from the
    /// bytes (an `ads` or `self` source decodes without allocating).
    pub fn eds_config(&self) -> Option<Cow<'_, ConfigSource>> {
        let Kind::Eds { config, .. } = &self.kind else {
            return None;
        };
        match config {
            EdsConfig::Absent => None,
            EdsConfig::InRaw(range) => {
                let bytes = self.raw.get(range.start as usize..range.end as usize)?;
                // Decoded and compared when the view was built.
                ConfigSource::decode(bytes).ok().map(Cow::Owned)
            }
            EdsConfig::Copied(config) => Some(Cow::Borrowed(config)),
        }
    }
}

impl fmt::Debug for ClusterView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterView")
            .field("name", &self.name())
            .field("discovery", &self.discovery())
            .field("lb_policy", &self.lb_policy)
            .field("tls", &self.upstream_tls.is_some())
            .field("bytes", &self.raw.len())
            .finish()
    }
}

/// Where the cluster's name and EDS service name are: ranges of the bytes
/// when both are found there as decoded, else of a copy.
struct Names {
    text: Box<str>,
    name: Range<u32>,
    service_name: Range<u32>,
}

/// Cluster.name, and Cluster.eds_cluster_config.service_name.
const NAME: &[u32] = &[1];
const SERVICE_NAME: &[u32] = &[3, 2];
/// Cluster.eds_cluster_config.eds_config.
const EDS_CONFIG: &[u32] = &[3, 1];

impl Names {
    fn of(cluster: &Cluster, raw: &[u8]) -> Result<Self, ValidationError> {
        let service_name = service_name(cluster);
        let name = in_raw(raw, NAME, &cluster.name);
        let service = in_raw(raw, SERVICE_NAME, service_name);
        if let (Some(name), Some(service_name)) = (name, service) {
            return Ok(Self {
                text: Box::default(),
                name,
                service_name,
            });
        }
        let mut text = String::with_capacity(cluster.name.len() + service_name.len());
        let name = push(&mut text, &cluster.name)?;
        let service_name = push(&mut text, service_name)?;
        Ok(Self {
            text: text.into_boxed_str(),
            name,
            service_name,
        })
    }
}

/// The range of `raw` holding `value` as the field at `path`: empty for an
/// empty value, `None` when it is not there as decoded.
fn in_raw(raw: &[u8], path: &[u32], value: &str) -> Option<Range<u32>> {
    if value.is_empty() {
        return Some(0..0);
    }
    let range = crate::types::presized::field_range(raw, path)?;
    let found = raw.get(range.clone())?;
    (found == value.as_bytes())
        .then(|| Some(u32::try_from(range.start).ok()?..u32::try_from(range.end).ok()?))
        .flatten()
}

fn push(text: &mut String, s: &str) -> Result<Range<u32>, ValidationError> {
    let too_long = || ValidationError("cluster: names longer than 4 GiB".into());
    let start = u32::try_from(text.len()).map_err(|_| too_long())?;
    text.push_str(s);
    let end = u32::try_from(text.len()).map_err(|_| too_long())?;
    Ok(start..end)
}

fn service_name(cluster: &Cluster) -> &str {
    cluster
        .eds_cluster_config
        .as_ref()
        .map_or("", |c| c.service_name.as_str())
}

fn kind_of(
    cluster: &Cluster,
    raw: &[u8],
    service_name: Range<u32>,
) -> Result<Kind, ValidationError> {
    if let Some(children) = aggregate_children(cluster) {
        let children = children?.into_iter().map(String::into_boxed_str).collect();
        return Ok(Kind::Aggregate { children });
    }
    let discovery = match &cluster.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(*t).ok(),
        _ => None,
    };
    if discovery == Some(DiscoveryType::Eds) {
        let config = cluster
            .eds_cluster_config
            .as_ref()
            .and_then(|c| c.eds_config.as_ref());
        return Ok(Kind::Eds {
            service_name,
            config: eds_config(raw, config),
        });
    }
    // Validation checked the assignment; it is held as EDS ones are.
    let load_assignment = cluster
        .load_assignment
        .as_ref()
        .map(|cla| LoadAssignment::of_validated(cla, Bytes::from(cla.encode_to_vec())))
        .transpose()
        .map_err(|e| ValidationError(format!("load_assignment.{}", e.0)))?;
    Ok(Kind::Inline {
        logical_dns: discovery == Some(DiscoveryType::LogicalDns),
        load_assignment: load_assignment.map(Arc::new),
    })
}

/// The EDS ConfigSource where it lies in `raw` when it decodes from there
/// to what the message says, else a copy.
fn eds_config(raw: &[u8], config: Option<&ConfigSource>) -> EdsConfig {
    let Some(config) = config else {
        return EdsConfig::Absent;
    };
    let found = crate::types::presized::field_range(raw, EDS_CONFIG).and_then(|range| {
        let decoded = ConfigSource::decode(raw.get(range.clone())?).ok()?;
        let range = u32::try_from(range.start).ok()?..u32::try_from(range.end).ok()?;
        (decoded == *config).then_some(range)
    });
    match found {
        Some(range) => EdsConfig::InRaw(range),
        None => EdsConfig::Copied(Arc::new(config.clone())),
    }
}

fn max_requests(cluster: &Cluster) -> Option<u32> {
    let thresholds = &cluster.circuit_breakers.as_ref()?.thresholds;
    thresholds
        .iter()
        .find(|t| t.priority == RoutingPriority::Default as i32)
        .and_then(|t| t.max_requests.as_ref())
        .map(|v| v.value)
}

#[cfg(test)]
mod tests;
