//! Scenario 4: ingest in process. One delta response of `n` clusters goes
//! through the protocol session (decode, validate), the cache (one watcher
//! each) and out as an ACK; no network, no server. The cost must grow
//! linearly with `n`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use xdsfed::client::cache::{Cache, DataErrorPolicy, Provenance};
use xdsfed::core::protocol::{AuthorityFilter, ResourceKey, Session, SessionConfig};
use xdsfed::core::types::{ClusterType, ResourceType, TypeRegistry};

use crate::fleet::{self, Mode, Shape};

#[derive(Debug, Clone, Copy)]
pub struct Ingest {
    pub time: Duration,
    pub floor: Duration,
}

pub fn run(count: usize) -> Ingest {
    let shape = Shape {
        clusters: count,
        authorities: 1,
        servers: 1,
        mode: Mode::Eds,
    };
    let mut types = TypeRegistry::new();
    types.register::<ClusterType>();
    let config = SessionConfig::new(Node {
        id: "scale".into(),
        ..Default::default()
    })
    .with_authorities(AuthorityFilter::any());
    let mut session = Session::new(config, Arc::new(types));
    let cache = Cache::new();
    let server: Arc<str> = "scale".into();
    let policy = DataErrorPolicy::default();
    let provenance = Provenance {
        authority: Some(Arc::from(fleet::authority(0))),
        server: Arc::clone(&server),
    };
    let mut receivers = Vec::with_capacity(count);
    let now = Instant::now();
    let mut resources = Vec::with_capacity(count);
    for i in 0..count {
        let name = fleet::cluster_name(&shape, i);
        let key = ResourceKey::new(ClusterType::TYPE_URL, name.clone());
        receivers.push(cache.add_watcher(&key, provenance.clone(), policy).0);
        session.subscribe(key);
        resources.push(Resource {
            version: "1".into(),
            resource: Some(Any {
                type_url: Cluster::type_url(),
                value: fleet::cluster(&shape, i).encode_to_vec(),
            }),
            name,
            ..Default::default()
        });
    }
    session.handle_connected(now);
    while session.poll_transmit(now).is_some() {}
    let floor = {
        let start = Instant::now();
        let n: usize = resources
            .iter()
            .filter_map(|r| r.resource.as_ref())
            .map(|a| Cluster::decode(a.value.as_slice()).map_or(0, |c| c.name.len()))
            .sum();
        std::hint::black_box(n);
        start.elapsed()
    };
    let response = DeltaDiscoveryResponse {
        type_url: ClusterType::TYPE_URL.into(),
        nonce: "1".into(),
        resources,
        ..Default::default()
    };
    let start = Instant::now();
    session.handle_delta_response(now, response);
    let events: Vec<_> = std::iter::from_fn(|| session.poll_event()).collect();
    cache.apply(&server, policy, events);
    let acked = session.poll_transmit(now).is_some();
    let time = start.elapsed();
    assert!(acked, "the response is ACKed");
    Ingest { time, floor }
}
