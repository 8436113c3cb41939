//! Test resource types and message builders.
//!
//! The types here are deliberately tiny: a Cluster is valid unless its name
//! is empty or its `alt_stat_name` is `"invalid"`; Listener (full state) and
//! ClusterLoadAssignment (not full state) are valid when named.

use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};
use prost::Message;

use crate::bootstrap::ApiVariant;
use crate::protocol::{
    CoreEvent, RESOURCE_WRAPPER_TYPE_URL, RemovedReason, Request, ResourceKey, Session,
    SessionConfig,
};
use crate::types::{ResourceType, TypeRegistry, ValidationError};

pub(super) const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub(super) const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub(super) const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// Registered nowhere.
pub(super) const UNKNOWN_TYPE: &str = "type.googleapis.com/example.Unknown";

pub(super) struct TestCluster;
impl ResourceType for TestCluster {
    const TYPE_URL: &'static str = CDS;
    const SOTW_FULL_STATE: bool = true;
    type Resource = Cluster;
    fn decode(bytes: &[u8]) -> Result<Cluster, ValidationError> {
        let c = Cluster::decode(bytes).map_err(|e| ValidationError(e.to_string()))?;
        if c.name.is_empty() {
            return Err(ValidationError::field("name", "empty"));
        }
        if c.alt_stat_name == "invalid" {
            return Err(ValidationError::field("alt_stat_name", "marked invalid"));
        }
        Ok(c)
    }
    fn name(c: &Cluster) -> Option<&str> {
        Some(&c.name)
    }
}

pub(super) struct TestListener;
impl ResourceType for TestListener {
    const TYPE_URL: &'static str = LDS;
    const SOTW_FULL_STATE: bool = true;
    type Resource = Listener;
    fn decode(bytes: &[u8]) -> Result<Listener, ValidationError> {
        let l = Listener::decode(bytes).map_err(|e| ValidationError(e.to_string()))?;
        if l.name.is_empty() {
            return Err(ValidationError::field("name", "empty"));
        }
        Ok(l)
    }
    fn name(l: &Listener) -> Option<&str> {
        Some(&l.name)
    }
}

pub(super) struct TestEndpoints;
impl ResourceType for TestEndpoints {
    const TYPE_URL: &'static str = EDS;
    const SOTW_FULL_STATE: bool = false;
    type Resource = ClusterLoadAssignment;
    fn decode(bytes: &[u8]) -> Result<ClusterLoadAssignment, ValidationError> {
        let c = ClusterLoadAssignment::decode(bytes).map_err(|e| ValidationError(e.to_string()))?;
        if c.cluster_name.is_empty() {
            return Err(ValidationError::field("cluster_name", "empty"));
        }
        Ok(c)
    }
    fn name(c: &ClusterLoadAssignment) -> Option<&str> {
        Some(&c.cluster_name)
    }
}

pub(super) fn registry() -> Arc<TypeRegistry> {
    let mut r = TypeRegistry::new();
    r.register::<TestCluster>()
        .register::<TestListener>()
        .register::<TestEndpoints>();
    Arc::new(r)
}

/// A fixed epoch: tests never read the clock beyond this one call.
pub(super) fn t0() -> Instant {
    Instant::now()
}

pub(super) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(super) fn node() -> Node {
    Node {
        id: "test-node".into(),
        ..Node::default()
    }
}

pub(super) fn config(variant: ApiVariant) -> SessionConfig {
    SessionConfig::new(node()).with_variant(variant)
}

pub(super) fn session(variant: ApiVariant) -> Session {
    Session::new(config(variant), registry())
}

pub(super) fn key(type_url: &str, name: &str) -> ResourceKey {
    ResourceKey::new(type_url, name)
}

pub(super) fn cluster(name: &str) -> Any {
    cluster_with(name, "")
}

/// A cluster whose bytes differ with `tag` (stands for a new version).
pub(super) fn cluster_with(name: &str, tag: &str) -> Any {
    let c = Cluster {
        name: name.into(),
        alt_stat_name: tag.into(),
        ..Cluster::default()
    };
    Any {
        type_url: CDS.into(),
        value: c.encode_to_vec(),
    }
}

pub(super) fn bad_cluster(name: &str) -> Any {
    cluster_with(name, "invalid")
}

pub(super) fn listener(name: &str) -> Any {
    let l = Listener {
        name: name.into(),
        ..Listener::default()
    };
    Any {
        type_url: LDS.into(),
        value: l.encode_to_vec(),
    }
}

pub(super) fn endpoints(name: &str) -> Any {
    let c = ClusterLoadAssignment {
        cluster_name: name.into(),
        ..ClusterLoadAssignment::default()
    };
    Any {
        type_url: EDS.into(),
        value: c.encode_to_vec(),
    }
}

pub(super) fn pb_secs(s: i64) -> PbDuration {
    PbDuration {
        seconds: s,
        nanos: 0,
    }
}

/// A delta `Resource`.
pub(super) fn dres(name: &str, version: &str, body: Option<Any>) -> Resource {
    Resource {
        name: name.into(),
        version: version.into(),
        resource: body,
        ..Resource::default()
    }
}

pub(super) fn dresp(
    type_url: &str,
    nonce: &str,
    resources: Vec<Resource>,
    removed: &[&str],
) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        type_url: type_url.into(),
        nonce: nonce.into(),
        resources,
        removed_resources: removed.iter().map(|s| s.to_string()).collect(),
        ..DeltaDiscoveryResponse::default()
    }
}

pub(super) fn sresp(
    type_url: &str,
    version: &str,
    nonce: &str,
    resources: Vec<Any>,
) -> DiscoveryResponse {
    DiscoveryResponse {
        type_url: type_url.into(),
        version_info: version.into(),
        nonce: nonce.into(),
        resources,
        ..DiscoveryResponse::default()
    }
}

/// A SotW resource wrapped in `Resource` (xds.config.resource-in-sotw).
pub(super) fn wrapped(name: &str, body: Option<Any>, ttl: Option<PbDuration>) -> Any {
    let r = Resource {
        name: name.into(),
        resource: body,
        ttl,
        ..Resource::default()
    };
    Any {
        type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
        value: r.encode_to_vec(),
    }
}

/// Every request the session wants to write now.
pub(super) fn drain(s: &mut Session, now: Instant) -> Vec<Request> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

/// Every request, as delta requests (panics on SotW: a test bug).
pub(super) fn drain_delta(s: &mut Session, now: Instant) -> Vec<DeltaDiscoveryRequest> {
    drain(s, now)
        .into_iter()
        .map(|r| match r {
            Request::Delta(d) => d,
            Request::Sotw(_) => panic!("expected a delta request"),
        })
        .collect()
}

/// Every request, as SotW requests (panics on delta: a test bug).
pub(super) fn drain_sotw(s: &mut Session, now: Instant) -> Vec<DiscoveryRequest> {
    drain(s, now)
        .into_iter()
        .map(|r| match r {
            Request::Sotw(d) => d,
            Request::Delta(_) => panic!("expected a SotW request"),
        })
        .collect()
}

/// Connects, has the server accept the stream (the `accepted` event is
/// consumed), and returns the first requests.
pub(super) fn connect_delta(s: &mut Session, now: Instant) -> Vec<DeltaDiscoveryRequest> {
    open(s, now);
    drain_delta(s, now)
}

pub(super) fn connect_sotw(s: &mut Session, now: Instant) -> Vec<DiscoveryRequest> {
    open(s, now);
    drain_sotw(s, now)
}

/// Opens a stream the server accepts at once, leaving the events as they
/// were: the stream is established, so what is written arms its
/// does-not-exist timers.
pub(super) fn open(s: &mut Session, now: Instant) {
    s.handle_connected(now);
    s.handle_stream_accepted(now);
    assert!(
        matches!(s.events.pop_back(), Some(CoreEvent::StreamAccepted)),
        "an accepted stream reports it"
    );
}

/// Every event, summarised as short strings: `upsert NAME VERSION`,
/// `invalid NAME`, `removed NAME`, `expired NAME`, `dne NAME`,
/// `error NAME CODE`, `failed`, `healthy`.
pub(super) fn events(s: &mut Session) -> Vec<String> {
    std::iter::from_fn(|| s.poll_event())
        .map(|e| summary(&e))
        .collect()
}

pub(super) fn summary(e: &CoreEvent) -> String {
    match e {
        CoreEvent::Upsert { key, version, .. } => format!("upsert {} {version}", key.name),
        CoreEvent::Invalid { key, .. } => format!("invalid {}", key.name),
        CoreEvent::Removed {
            key,
            reason: RemovedReason::Deleted,
        } => format!("removed {}", key.name),
        CoreEvent::Removed {
            key,
            reason: RemovedReason::TtlExpired,
        } => format!("expired {}", key.name),
        CoreEvent::Removed {
            key,
            reason: RemovedReason::NotConsidered,
        } => format!("not considered {}", key.name),
        CoreEvent::DoesNotExist { key } => format!("dne {}", key.name),
        CoreEvent::Redirect { key, target, .. } => format!("redirect {} {target}", key.name),
        CoreEvent::ResourceError { key, code, .. } => {
            format!("error {} {}", key.name, code.as_i32())
        }
        CoreEvent::NotRequested { key, .. } => format!("not requested {}", key.name),
        CoreEvent::StreamFailed { .. } => "failed".into(),
        CoreEvent::StreamHealthy => "healthy".into(),
        CoreEvent::StreamAccepted => "accepted".into(),
    }
}

pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A delta session subscribed to `names` of `type_url`, connected, with
/// its first request consumed.
pub(super) fn delta_subscribed(now: Instant, type_url: &str, names: &[&str]) -> Session {
    let mut s = session(ApiVariant::Delta);
    for n in names {
        s.subscribe(key(type_url, n));
    }
    let _ = connect_delta(&mut s, now);
    s
}

/// A SotW session subscribed to `names` of `type_url`, connected, with its
/// first request consumed.
pub(super) fn sotw_subscribed(now: Instant, type_url: &str, names: &[&str]) -> Session {
    let mut s = session(ApiVariant::Sotw);
    for n in names {
        s.subscribe(key(type_url, n));
    }
    let _ = connect_sotw(&mut s, now);
    s
}
