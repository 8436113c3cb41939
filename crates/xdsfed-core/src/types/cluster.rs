//! `envoy.config.cluster.v3.Cluster`, validated as gRPC validates it
//! (gRFC A27, A37 aggregate clusters, A47 federation), plus STATIC clusters.

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, OutlierDetection,
    cluster::{ClusterDiscoveryType, DiscoveryType},
};
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::extensions::clusters::aggregate::v3::ClusterConfig;

use bytes::Bytes;

use super::{ResourceType, ValidationError, check_config_source, unpack_any, with_reused};

mod san;
mod upstream_tls;
mod view;

pub use view::{ClusterDiscovery, ClusterView};

pub use san::{SanMatcher, SubjectAltName, leaf_subject_alt_names, san_matches};
pub use upstream_tls::{ProviderRef, TLS_TRANSPORT_SOCKET, UpstreamTls, upstream_tls};

/// The name of the aggregate cluster extension (gRFC A37).
pub const AGGREGATE_CLUSTER_TYPE: &str = "envoy.clusters.aggregate";

/// The CDS resource type. A resource is held as its bytes and a compact
/// view ([`ClusterView`]); the full message is decoded on demand.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterType;

impl ResourceType for ClusterType {
    const TYPE_URL: &'static str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const SOTW_FULL_STATE: bool = true;
    type Resource = ClusterView;

    fn decode(bytes: &[u8]) -> Result<ClusterView, ValidationError> {
        Self::decode_shared(&Bytes::copy_from_slice(bytes))
    }

    fn decode_shared(bytes: &Bytes) -> Result<ClusterView, ValidationError> {
        Self::decode_owned(bytes.clone())
    }

    const KEEPS_BYTES: bool = true;

    fn decode_owned(bytes: Bytes) -> Result<ClusterView, ValidationError> {
        thread_local! {
            static CLUSTER: std::cell::RefCell<Cluster> = std::cell::RefCell::default();
        }
        // The message lives only until its view is built.
        with_reused(&CLUSTER, bytes, "Cluster", |cluster, bytes| {
            let tls = validate_cluster(cluster)?;
            ClusterView::of_validated(cluster, bytes, tls)
        })
    }

    fn held_bytes(resource: &ClusterView) -> Option<&Bytes> {
        Some(resource.raw())
    }

    fn name(resource: &ClusterView) -> Option<&str> {
        Some(resource.name()).filter(|n| !n.is_empty())
    }

    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        super::name_of_message::<Cluster>(bytes, |m| &m.name)
    }
}

/// The child cluster names of an aggregate cluster, or `None` when `cluster`
/// is not an aggregate cluster.
pub fn aggregate_children(cluster: &Cluster) -> Option<Result<Vec<String>, ValidationError>> {
    let Some(ClusterDiscoveryType::ClusterType(custom)) = &cluster.cluster_discovery_type else {
        return None;
    };
    if custom.name != AGGREGATE_CLUSTER_TYPE {
        return None;
    }
    let Some(any) = custom.typed_config.as_ref() else {
        return Some(Err(ValidationError::field(
            "cluster_type.typed_config",
            "missing",
        )));
    };
    Some(unpack_any::<ClusterConfig>(any, "cluster_type.typed_config").map(|c| c.clusters))
}

/// Validates `cluster`; its TLS (gRFC A29) comes out of it.
fn validate_cluster(cluster: &Cluster) -> Result<Option<UpstreamTls>, ValidationError> {
    if let Some(lrs) = cluster.lrs_server.as_ref()
        && !matches!(
            lrs.config_source_specifier,
            Some(ConfigSourceSpecifier::Self_(_))
        )
    {
        return Err(ValidationError::field("lrs_server", "must be `self`"));
    }
    if let Some(od) = &cluster.outlier_detection {
        validate_outlier_detection(od)?;
    }
    let tls = upstream_tls(cluster)?;
    validate_discovery(cluster)?;
    Ok(tls)
}

fn validate_discovery(cluster: &Cluster) -> Result<(), ValidationError> {
    match &cluster.cluster_discovery_type {
        Some(ClusterDiscoveryType::ClusterType(custom)) => {
            if custom.name != AGGREGATE_CLUSTER_TYPE {
                return Err(ValidationError::field(
                    "cluster_type.name",
                    format_args!("unsupported custom cluster type {:?}", custom.name),
                ));
            }
            let children = aggregate_children(cluster).unwrap_or(Ok(Vec::new()))?;
            if children.is_empty() {
                return Err(ValidationError::field(
                    "cluster_type.typed_config.clusters",
                    "an aggregate cluster needs at least one child",
                ));
            }
            if let Some(i) = children.iter().position(String::is_empty) {
                return Err(ValidationError::field(
                    format_args!("cluster_type.typed_config.clusters[{i}]"),
                    "empty",
                ));
            }
            Ok(())
        }
        Some(ClusterDiscoveryType::Type(t)) => match DiscoveryType::try_from(*t) {
            Ok(DiscoveryType::Eds) => validate_eds(cluster),
            Ok(DiscoveryType::LogicalDns) => validate_logical_dns(cluster),
            Ok(DiscoveryType::Static) => validate_static(cluster),
            Ok(other) => Err(ValidationError::field(
                "type",
                format_args!("unsupported discovery type {}", other.as_str_name()),
            )),
            Err(_) => Err(ValidationError::field(
                "type",
                format_args!("unknown value {t}"),
            )),
        },
        // The proto default for `type` is STATIC (0).
        None => validate_static(cluster),
    }
}

/// gRFC A50: the three durations must be valid protobuf durations and the
/// four percentages at most 100.
fn validate_outlier_detection(od: &OutlierDetection) -> Result<(), ValidationError> {
    // google.protobuf.Duration's own range: ±10 000 years, nanos below 1 s.
    const MAX_SECONDS: i64 = 315_576_000_000;
    let durations = [
        ("interval", &od.interval),
        ("base_ejection_time", &od.base_ejection_time),
        ("max_ejection_time", &od.max_ejection_time),
    ];
    for (name, d) in durations {
        if let Some(d) = d
            && !((0..=MAX_SECONDS).contains(&d.seconds) && (0..1_000_000_000).contains(&d.nanos))
        {
            return Err(ValidationError::field(
                format_args!("outlier_detection.{name}"),
                format_args!("{}s {}ns is not a valid duration", d.seconds, d.nanos),
            ));
        }
    }
    let percentages = [
        ("max_ejection_percent", &od.max_ejection_percent),
        ("enforcing_success_rate", &od.enforcing_success_rate),
        (
            "failure_percentage_threshold",
            &od.failure_percentage_threshold,
        ),
        (
            "enforcing_failure_percentage",
            &od.enforcing_failure_percentage,
        ),
    ];
    for (name, p) in percentages {
        if let Some(p) = p.as_ref().filter(|p| p.value > 100) {
            return Err(ValidationError::field(
                format_args!("outlier_detection.{name}"),
                format_args!("{} is above 100", p.value),
            ));
        }
    }
    Ok(())
}

fn validate_eds(cluster: &Cluster) -> Result<(), ValidationError> {
    let Some(eds) = cluster.eds_cluster_config.as_ref() else {
        return Err(ValidationError::field(
            "eds_cluster_config",
            "missing for an EDS cluster",
        ));
    };
    check_config_source(eds.eds_config.as_ref(), "eds_cluster_config.eds_config")?;
    // gRFC A47: an xdstp cluster cannot default its EDS name to its own name,
    // because the cluster's name is of the CDS type, not the EDS type.
    if crate::name::has_xdstp_scheme(&cluster.name) && eds.service_name.is_empty() {
        return Err(ValidationError::field(
            "eds_cluster_config.service_name",
            "must be set when the cluster name is an xdstp name",
        ));
    }
    // The type is the path's first segment, not any segment: compared in
    // place (a substring search cost a searcher's setup per cluster).
    if crate::name::has_xdstp_scheme(&eds.service_name)
        && crate::name::xdstp_type_of(&eds.service_name)
            != Some("envoy.config.endpoint.v3.ClusterLoadAssignment")
    {
        return Err(ValidationError::field(
            "eds_cluster_config.service_name",
            "an xdstp name here must be of type envoy.config.endpoint.v3.ClusterLoadAssignment",
        ));
    }
    Ok(())
}

fn validate_logical_dns(cluster: &Cluster) -> Result<(), ValidationError> {
    let Some(cla) = cluster.load_assignment.as_ref() else {
        return Err(ValidationError::field(
            "load_assignment",
            "missing for a LOGICAL_DNS cluster",
        ));
    };
    let endpoints: usize = cla.endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
    if cla.endpoints.len() != 1 || endpoints != 1 {
        return Err(ValidationError::field(
            "load_assignment",
            format_args!(
                "a LOGICAL_DNS cluster needs exactly one locality with one endpoint, got {} localities and {endpoints} endpoints",
                cla.endpoints.len()
            ),
        ));
    }
    super::endpoint::validate_load_assignment(cla)
        .map_err(|e| ValidationError(format!("load_assignment.{}", e.0)))
}

fn validate_static(cluster: &Cluster) -> Result<(), ValidationError> {
    let Some(cla) = cluster.load_assignment.as_ref() else {
        return Err(ValidationError::field(
            "load_assignment",
            "missing for a STATIC cluster",
        ));
    };
    super::endpoint::validate_load_assignment(cla)
        .map_err(|e| ValidationError(format!("load_assignment.{}", e.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tests_support::*;
    use prost::Message;

    /// gRFC A50: a percentage above 100 in `outlier_detection` is NACKed,
    /// naming the field.
    #[test]
    fn outlier_detection_percentage_above_100_is_rejected() {
        let mut c = eds_cluster("c1", "");
        c.outlier_detection = Some(OutlierDetection {
            enforcing_failure_percentage: Some(envoy_types::pb::google::protobuf::UInt32Value {
                value: 101,
            }),
            ..Default::default()
        });
        let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "outlier_detection.enforcing_failure_percentage: 101 is above 100"
        );
    }

    /// gRFC A50: a negative duration in `outlier_detection` is NACKed.
    #[test]
    fn outlier_detection_negative_interval_is_rejected() {
        let mut c = eds_cluster("c1", "");
        c.outlier_detection = Some(OutlierDetection {
            interval: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: -1,
                nanos: 0,
            }),
            ..Default::default()
        });
        let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
        assert_eq!(
            err.0,
            "outlier_detection.interval: -1s 0ns is not a valid duration"
        );
    }

    #[test]
    fn eds_cluster_decodes() {
        let c = eds_cluster("c1", "");
        let out = ClusterType::decode(&c.encode_to_vec()).expect("valid");
        assert_eq!(ClusterType::name(&out), Some("c1"));
    }

    #[test]
    fn xdstp_eds_cluster_without_service_name_is_rejected() {
        let c = eds_cluster("xdstp://a/envoy.config.cluster.v3.Cluster/c1", "");
        let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
        assert!(
            err.0.starts_with("eds_cluster_config.service_name:"),
            "{err}"
        );
    }

    /// gRFC A47: an xdstp service name must be of the EDS type, which is
    /// its path's first segment; the type's name further along is an id.
    #[test]
    fn xdstp_service_name_must_be_of_the_assignment_type() {
        const EDS: &str = "envoy.config.endpoint.v3.ClusterLoadAssignment";
        let cluster = "xdstp://a/envoy.config.cluster.v3.Cluster/c1";
        for (service_name, ok) in [
            (format!("xdstp://a/{EDS}/c1"), true),
            (format!("XDSTP://a/{EDS}/c1?k=v"), true),
            (
                format!("xdstp://a/envoy.config.cluster.v3.Cluster/{EDS}/c1"),
                false,
            ),
            (format!("xdstp://a/x/{EDS}/c1"), false),
            ("xdstp://a".to_owned(), false),
        ] {
            let c = eds_cluster(cluster, &service_name);
            let decoded = ClusterType::decode(&c.encode_to_vec());
            assert_eq!(decoded.is_ok(), ok, "{service_name}: {decoded:?}");
            if let Err(err) = decoded {
                assert!(
                    err.0.starts_with("eds_cluster_config.service_name:"),
                    "{err}"
                );
            }
        }
    }

    #[test]
    fn eds_cluster_with_non_ads_config_source_is_rejected() {
        let mut c = eds_cluster("c1", "");
        if let Some(eds) = c.eds_cluster_config.as_mut() {
            eds.eds_config = Some(Default::default());
        }
        let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
        assert!(err.0.starts_with("eds_cluster_config.eds_config:"), "{err}");
    }

    #[test]
    fn eds_cluster_whose_config_source_names_a_server_or_a_file_is_accepted() {
        use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
        use envoy_types::pb::envoy::config::core::v3::{
            ApiConfigSource, ConfigSource, GrpcService, PathConfigSource,
        };
        let sources = [
            ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
                api_type: 6, // AGGREGATED_DELTA_GRPC
                grpc_services: vec![GrpcService::default()],
                ..Default::default()
            }),
            ConfigSourceSpecifier::PathConfigSource(PathConfigSource {
                path: "/etc/xds/eds.yaml".into(),
                ..Default::default()
            }),
        ];
        for specifier in sources {
            let mut c = eds_cluster("c1", "");
            if let Some(eds) = c.eds_cluster_config.as_mut() {
                eds.eds_config = Some(ConfigSource {
                    config_source_specifier: Some(specifier.clone()),
                    ..Default::default()
                });
            }
            assert!(
                ClusterType::decode(&c.encode_to_vec()).is_ok(),
                "{specifier:?}"
            );
        }
    }

    #[test]
    fn eds_cluster_whose_config_source_is_unusable_names_the_field() {
        use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
        use envoy_types::pb::envoy::config::core::v3::{
            ApiConfigSource, ConfigSource, PathConfigSource,
        };
        let cases = [
            (
                ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
                    api_type: 6,
                    ..Default::default()
                }),
                "eds_cluster_config.eds_config.api_config_source:",
            ),
            (
                ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
                    api_type: 99,
                    ..Default::default()
                }),
                "eds_cluster_config.eds_config.api_config_source.api_type:",
            ),
            (
                ConfigSourceSpecifier::PathConfigSource(PathConfigSource::default()),
                "eds_cluster_config.eds_config.path_config_source.path:",
            ),
        ];
        for (specifier, field) in cases {
            let mut c = eds_cluster("c1", "");
            if let Some(eds) = c.eds_cluster_config.as_mut() {
                eds.eds_config = Some(ConfigSource {
                    config_source_specifier: Some(specifier),
                    ..Default::default()
                });
            }
            let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
            assert!(err.0.starts_with(field), "{err}");
        }
    }

    #[test]
    fn aggregate_cluster_without_children_is_rejected() {
        let c = aggregate_cluster("agg", &[]);
        let err = ClusterType::decode(&c.encode_to_vec()).unwrap_err();
        assert!(err.0.contains("at least one child"), "{err}");
    }

    #[test]
    fn aggregate_cluster_lists_its_children() {
        let c = aggregate_cluster("agg", &["a", "b"]);
        let out = ClusterType::decode(&c.encode_to_vec()).expect("valid");
        let ClusterDiscovery::Aggregate { children } = out.discovery() else {
            panic!("not aggregate: {out:?}");
        };
        assert_eq!(children, [Box::from("a"), Box::from("b")]);
    }
}
