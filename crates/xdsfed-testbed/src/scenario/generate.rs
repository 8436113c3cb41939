//! Generators: many resources from one line of a scenario.
//!
//! `clusters: {count: N, endpoints_per_cluster: E}` makes N EDS clusters and
//! their N `ClusterLoadAssignment`s with E endpoints each, named
//! `xdstp://AUTHORITY/envoy.config.cluster.v3.Cluster/PREFIX-NNNN` and
//! `xdstp://AUTHORITY/envoy.config.endpoint.v3.ClusterLoadAssignment/PREFIX-NNNN`.
//! Endpoints point at the named backend when there is one, otherwise at
//! distinct loopback ports from 20000 up that nothing listens on.

use envoy_types::pb::envoy::config::{cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment};
use envoy_types::pb::google::protobuf::Any;
use prost::Name;

use crate::resources::{cluster, endpoints, pack};

/// The first port of generated endpoints without a backend.
const FIRST_PORT: u32 = 20_000;

/// How many distinct ports generated endpoints without a backend cycle through.
const PORTS: u64 = 40_000;

/// The most clusters the generators of one scenario make together.
pub const MAX_CLUSTERS: u64 = 1_000_000;

/// The longest prefix, and the longest authority, a generator puts in its
/// names.
pub(crate) const MAX_NAME_PART: usize = 256;

/// The most endpoints the generators of one scenario make together: ten
/// times xDS TP1's design load of a million endpoints.
pub const MAX_ENDPOINTS: u64 = 10_000_000;

/// What the generators of a scenario make together, checked against
/// [`MAX_CLUSTERS`] and [`MAX_ENDPOINTS`] before anything is generated.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    clusters: u64,
    endpoints: u64,
}

impl Totals {
    /// Adds one generator; on refusal, the field that went over and why.
    pub(crate) fn add(
        &mut self,
        count: u32,
        endpoints_per_cluster: u32,
    ) -> Result<(), (&'static str, String)> {
        let clusters = self.clusters + u64::from(count);
        if clusters > MAX_CLUSTERS {
            return Err((
                "count",
                format!(
                    "{count} clusters would make {clusters} generated clusters in all; \
                     the most is {MAX_CLUSTERS}"
                ),
            ));
        }
        let endpoints = self.endpoints + u64::from(count) * u64::from(endpoints_per_cluster);
        if endpoints > MAX_ENDPOINTS {
            return Err((
                "endpoints_per_cluster",
                format!(
                    "{count} × {endpoints_per_cluster} endpoints would make {endpoints} \
                     generated endpoints in all; the most is {MAX_ENDPOINTS}"
                ),
            ));
        }
        self.clusters = clusters;
        self.endpoints = endpoints;
        Ok(())
    }
}

/// What to generate, resolved against the scenario.
#[derive(Debug, Clone)]
pub(crate) struct Clusters {
    pub(crate) count: u32,
    pub(crate) endpoints_per_cluster: u32,
    pub(crate) authority: String,
    pub(crate) prefix: String,
    pub(crate) backend_port: Option<u16>,
}

/// The generated resources as `(name, resource)`: each cluster, then its endpoints.
pub(crate) fn clusters(spec: &Clusters) -> Vec<(String, Any)> {
    let width = spec.count.saturating_sub(1).to_string().len().max(4);
    let mut out = Vec::with_capacity(spec.count as usize * 2);
    for i in 0..spec.count {
        let leaf = format!("{}-{i:0width$}", spec.prefix);
        let cluster_name = format!("xdstp://{}/{}/{leaf}", spec.authority, Cluster::full_name());
        let cla_name = format!(
            "xdstp://{}/{}/{leaf}",
            spec.authority,
            ClusterLoadAssignment::full_name()
        );
        let ports: Vec<u32> = (0..spec.endpoints_per_cluster)
            .map(|e| match spec.backend_port {
                Some(port) => u32::from(port),
                None => loopback_port(i, spec.endpoints_per_cluster, e),
            })
            .collect();
        let addrs: Vec<(&str, u32)> = ports.iter().map(|p| ("127.0.0.1", *p)).collect();
        let cluster = cluster(&cluster_name, &cla_name);
        let cla = endpoints(&cla_name, &addrs);
        out.push((cluster_name, pack(&cluster)));
        out.push((cla_name, pack(&cla)));
    }
    out
}

/// The port of endpoint `endpoint` of cluster `cluster`: consecutive over
/// the whole generator, wrapping after [`PORTS`].
fn loopback_port(cluster: u32, endpoints_per_cluster: u32, endpoint: u32) -> u32 {
    let index = u64::from(cluster) * u64::from(endpoints_per_cluster) + u64::from(endpoint);
    // The remainder is below PORTS, so it always fits.
    FIRST_PORT + u32::try_from(index % PORTS).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn clusters_generator_makes_count_clusters_with_endpoints() {
        let made = clusters(&Clusters {
            count: 3,
            endpoints_per_cluster: 2,
            authority: "cloud.example".into(),
            prefix: "bulk".into(),
            backend_port: None,
        });
        assert_eq!(made.len(), 6);
        assert_eq!(
            made[0].0,
            "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/bulk-0000"
        );
        let cla = ClusterLoadAssignment::decode(made[1].1.value.as_slice()).unwrap();
        assert_eq!(cla.endpoints[0].lb_endpoints.len(), 2);
    }

    /// Clients know a resource by the name inside it: every generated
    /// resource carries the name it is stored under.
    #[test]
    fn generated_resources_carry_their_own_names() {
        let made = clusters(&Clusters {
            count: 2,
            endpoints_per_cluster: 1,
            authority: "cloud.example".into(),
            prefix: "bulk".into(),
            backend_port: Some(8080),
        });
        for (name, any) in &made {
            super::super::own_name::check(name, "resource", any).unwrap();
        }
    }

    #[test]
    fn loopback_ports_wrap_without_overflow() {
        assert_eq!(loopback_port(0, 10, 3), FIRST_PORT + 3);
        assert_eq!(loopback_port(4000, 10, 1), FIRST_PORT + 1);
        let last = loopback_port(u32::MAX, u32::MAX, u32::MAX);
        assert!((FIRST_PORT..FIRST_PORT + 40_000).contains(&last));
    }
}
