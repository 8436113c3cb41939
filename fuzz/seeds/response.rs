//! Writes the seed corpus of the `response` fuzz target into
//! `fuzz/corpus/response/`: whole conversations in the target's input
//! format (a flags byte, then operations), with valid resources of the four
//! types, NACKs, deletions, TTLs, redirects, restarts and raw resources.
//! Each valid resource is first checked to pass the built-in validation, so
//! the seeds reach the accepting path. Run with
//! `cargo test --manifest-path fuzz/Cargo.toml --test response_seeds`.

// A generator of test inputs: a failure is a bug in the generator.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ConfigSource, SocketAddress, address, config_source,
    socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryResponse, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::{Any, Duration};
use envoy_types::pb::xds::core::v3::{ResourceLocator, resource_locator};
use prost::{Message, Name};
use xdsfed_core::protocol::RESOURCE_WRAPPER_TYPE_URL;
use xdsfed_core::types::TypeRegistry;

const L1: &str = "xdstp://a.example/envoy.config.listener.v3.Listener/l1";
const OLD: &str = "old-style-listener";
const R1: &str = "xdstp://a.example/envoy.config.route.v3.RouteConfiguration/r1";
const C1: &str = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1";
const C2: &str = "xdstp://b.example/envoy.config.cluster.v3.Cluster/c2";
const C3: &str = "xdstp://c.example/envoy.config.cluster.v3.Cluster/c3";
const E2: &str = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/c2";
const E1: &str = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/pool/e1";

/// A resource packed in an `Any`, checked valid when `valid`.
fn pack<M: Message + Name>(m: &M, valid: bool) -> Any {
    let any = Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    };
    let ty = TypeRegistry::with_builtin();
    let decoded = ty
        .get(&any.type_url)
        .unwrap()
        .decode(any.value.clone().into());
    assert_eq!(decoded.is_ok(), valid, "{}: {decoded:?}", M::NAME);
    any
}

fn ads() -> Option<ConfigSource> {
    Some(ConfigSource {
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource::default(),
        )),
        ..Default::default()
    })
}

fn listener(name: &str) -> Any {
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: ads(),
            route_config_name: R1.into(),
        })),
        ..Default::default()
    };
    let api_listener = Some(ApiListener {
        api_listener: Some(Any {
            type_url: HttpConnectionManager::type_url(),
            value: hcm.encode_to_vec(),
        }),
    });
    let l = Listener {
        name: name.into(),
        api_listener,
        ..Default::default()
    };
    pack(&l, true)
}

fn endpoints(name: &str) -> Any {
    let socket = SocketAddress {
        address: "127.0.0.1".into(),
        port_specifier: Some(socket_address::PortSpecifier::PortValue(8080)),
        ..Default::default()
    };
    let endpoint = Endpoint {
        address: Some(Address {
            address: Some(address::Address::SocketAddress(socket)),
        }),
        ..Default::default()
    };
    let cla = ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(endpoint)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    pack(&cla, true)
}

fn eds_cluster(name: &str, service_name: &str) -> Any {
    let c = Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: ads(),
            service_name: service_name.into(),
        }),
        ..Default::default()
    };
    pack(&c, !service_name.is_empty())
}

fn routes(name: &str) -> Any {
    let rc = RouteConfiguration {
        name: name.into(),
        ..Default::default()
    };
    pack(&rc, true)
}

fn redirect(to_id: &str) -> Any {
    let locator = ResourceLocator {
        scheme: resource_locator::Scheme::Xdstp as i32,
        authority: "b.example".into(),
        resource_type: "envoy.config.cluster.v3.Cluster".into(),
        id: to_id.into(),
        ..Default::default()
    };
    Any {
        type_url: ResourceLocator::type_url(),
        value: locator.encode_to_vec(),
    }
}

fn wrapped(name: &str, body: Option<Any>, ttl_secs: Option<i64>) -> Any {
    let r = Resource {
        name: name.into(),
        resource: body,
        ttl: ttl_secs.map(|seconds| Duration { seconds, nanos: 0 }),
        ..Default::default()
    };
    Any {
        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
        value: r.encode_to_vec(),
    }
}

fn type_url(any: &Any) -> String {
    any.type_url.clone()
}

/// One input of the target, built operation by operation.
struct Seed(Vec<u8>);

impl Seed {
    fn new(flags: u8) -> Self {
        Seed(vec![flags])
    }
    /// Tag bit 0 makes `bytes` a resource, not a response; bits 3.. name it.
    fn chunk(mut self, tag: u8, bytes: &[u8]) -> Self {
        let len = u16::try_from(bytes.len()).unwrap();
        self.0.push(tag);
        self.0.extend_from_slice(&len.to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }
    fn delta(
        self,
        type_url: &str,
        nonce: &str,
        res: &[(&str, &str, Option<Any>)],
        removed: &[&str],
    ) -> Self {
        let r = DeltaDiscoveryResponse {
            type_url: type_url.into(),
            nonce: nonce.into(),
            resources: res
                .iter()
                .map(|(name, version, body)| Resource {
                    name: (*name).into(),
                    version: (*version).into(),
                    resource: body.clone(),
                    ..Default::default()
                })
                .collect(),
            removed_resources: removed.iter().map(|s| (*s).into()).collect(),
            ..Default::default()
        };
        self.chunk(0, &r.encode_to_vec())
    }
    fn sotw(self, type_url: &str, version: &str, nonce: &str, resources: Vec<Any>) -> Self {
        let r = DiscoveryResponse {
            type_url: type_url.into(),
            version_info: version.into(),
            nonce: nonce.into(),
            resources,
            ..Default::default()
        };
        self.chunk(0, &r.encode_to_vec())
    }
    fn op(mut self, tag: u8, arg: u8) -> Self {
        self.0.extend_from_slice(&[tag, arg]);
        self
    }
}

fn seeds() -> Vec<(&'static str, Seed)> {
    let (lds, rds, cds, eds) = (
        type_url(&listener(L1)),
        type_url(&routes(R1)),
        type_url(&eds_cluster(C1, E2)),
        type_url(&endpoints(E2)),
    );
    let delta_all = Seed::new(0)
        .delta(
            &lds,
            "n1",
            &[
                (L1, "1", Some(listener(L1))),
                (OLD, "1", Some(listener(OLD))),
            ],
            &[],
        )
        .delta(&rds, "n2", &[(R1, "1", Some(routes(R1)))], &[])
        .delta(
            &cds,
            "n3",
            &[
                (C1, "1", Some(eds_cluster(C1, E2))),
                (C2, "1", Some(eds_cluster(C2, ""))),
            ],
            &[],
        )
        .delta(
            &eds,
            "n4",
            &[
                (E2, "1", Some(endpoints(E2))),
                (E1, "1", Some(endpoints(E1))),
            ],
            &[],
        )
        .op(4, 20)
        .delta(&cds, "n5", &[], &[C1])
        .op(4, 0);
    let sotw_all = Seed::new(1)
        .sotw(
            &lds,
            "1",
            "n1",
            vec![listener(L1), wrapped(OLD, Some(listener(OLD)), None)],
        )
        .sotw(&rds, "1", "n2", vec![routes(R1)])
        .sotw(&cds, "1", "n3", vec![eds_cluster(C1, E2)])
        .sotw(&eds, "1", "n4", vec![endpoints(E2)])
        .sotw(&cds, "2", "n5", vec![])
        .op(4, 0);
    let nacks = Seed::new(2 | 16)
        .delta(&cds, "n1", &[(C1, "1", Some(eds_cluster(C1, E2)))], &[])
        .delta(
            &cds,
            "n2",
            &[
                (C1, "2", Some(eds_cluster(C1, ""))),
                (C2, "1", None),
                (C3, "1", Some(eds_cluster(C3, E2))),
            ],
            &[],
        )
        .delta(
            &cds,
            "n3",
            &[
                (C2, "1", Some(eds_cluster(C2, E2))),
                (C2, "1", Some(eds_cluster(C2, E2))),
            ],
            &[],
        )
        .delta(
            &lds,
            "n4",
            &[("xdstp://a.example/bad name", "1", Some(listener(L1)))],
            &[],
        );
    let ttl = Seed::new(1 | 8)
        .sotw(
            &cds,
            "1",
            "n1",
            vec![wrapped(C1, Some(eds_cluster(C1, E2)), Some(30))],
        )
        .op(4, 20)
        .sotw(&cds, "2", "n2", vec![wrapped(C1, None, Some(30))])
        .op(4, 0)
        .op(4, 0);
    let redirects = Seed::new(0)
        .delta(&cds, "n1", &[(C2, "1", Some(redirect("c9")))], &[])
        .delta(&eds, "n2", &[(E1, "1", Some(endpoints(E1)))], &[]);
    let raw = Seed::new(0)
        .chunk(1, &listener(L1).value)
        .chunk(3 << 3 | 1, &eds_cluster(C1, E2).value)
        .chunk(5 << 3 | 1, &[0xff, 0xff])
        .op(4, 0);
    let raw_sotw = Seed::new(1)
        .chunk(2 << 3 | 1, &routes(R1).value)
        .chunk(1 << 3 | 1, &listener(OLD).value);
    let restarts = Seed::new(4 | 32)
        .op(4, 0)
        .op(5 | 8, 0)
        .op(6 | 8, 0)
        .delta(&lds, "n1", &[(L1, "1", Some(listener(L1)))], &[])
        .op(7, 3)
        .op(7, 7)
        .op(5 | 8 | 16 | 32, 0)
        .sotw(&lds, "1", "n2", vec![listener(L1)])
        .op(4, 0)
        .op(6, 0);
    vec![
        ("delta_all", delta_all),
        ("sotw_all", sotw_all),
        ("nacks", nacks),
        ("ttl", ttl),
        ("redirects", redirects),
        ("raw", raw),
        ("raw_sotw", raw_sotw),
        ("restarts", restarts),
    ]
}

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/response");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, seed) in seeds() {
        let path = dir.join(format!("seed_{name}"));
        std::fs::write(&path, &seed.0).unwrap();
        println!("{} ({} bytes)", path.display(), seed.0.len());
    }
}
