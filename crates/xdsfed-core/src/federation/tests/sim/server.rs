//! A model delta-xDS management server for the whole-client simulation:
//! the truth it holds, one stream at a time, and the faults it can show.

use crate::hash::HashSet;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::{ConfigSource, config_source};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::{ResourceLocator, resource_locator};
use prost::Message;

use super::super::support::CDS;
use super::endpoints::{self, Flaw, Member};
use crate::protocol::RESOURCE_LOCATOR_TYPE_URL;
use crate::types::LB_ENDPOINT_COLLECTION_TYPE_URL;
use crate::types::testing::cluster_message;

/// What a server holds under a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// A valid cluster, told apart by its tag.
    Valid(String),
    /// A cluster that fails validation (`lrs_server` not `self`); its tag
    /// says `poison`, so a watcher that ever sees it shows a bypassed NACK.
    Poison,
    /// Bytes that are no cluster at all.
    Malformed,
    /// A `ResourceLocator` to another cluster: `(authority, id)`.
    Redirect(String, String),
    /// A valid LEDS list collection (gRFC A95): its inline endpoints.
    List(Vec<Member>),
    /// A LEDS list collection made invalid by one more entry.
    FlawedList(Vec<Member>, Flaw),
}

impl Body {
    pub(crate) fn to_any(&self, name: &str) -> Any {
        match self {
            Body::Valid(tag) => any(cluster_message(name, tag).encode_to_vec()),
            Body::Poison => {
                let mut cluster = cluster_message(name, "poison");
                cluster.lrs_server = Some(ConfigSource {
                    config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
                        Default::default(),
                    )),
                    ..Default::default()
                });
                any(cluster.encode_to_vec())
            }
            Body::Malformed => Any {
                type_url: type_of(name).into(),
                value: vec![0xff, 0xff, 0xff, 0x07],
            },
            Body::List(members) => endpoints::to_any(members, None),
            Body::FlawedList(members, flaw) => endpoints::to_any(members, Some(*flaw)),
            Body::Redirect(authority, id) => Any {
                type_url: RESOURCE_LOCATOR_TYPE_URL.into(),
                value: ResourceLocator {
                    scheme: resource_locator::Scheme::Xdstp as i32,
                    authority: authority.clone(),
                    resource_type: "envoy.config.cluster.v3.Cluster".into(),
                    id: id.clone(),
                    ..Default::default()
                }
                .encode_to_vec(),
            },
        }
    }
}

/// The type of the resource `name`: a LEDS list collection or a cluster.
pub(crate) fn type_of(name: &str) -> &'static str {
    if endpoints::is_list(name) {
        LB_ENDPOINT_COLLECTION_TYPE_URL
    } else {
        CDS
    }
}

/// A valid copy of `name`, sent as the resource of another authority.
fn foreign_body(name: &str) -> Body {
    let tag = "foreign".to_owned();
    if endpoints::is_list(name) {
        Body::List(vec![Member {
            name: None,
            address: tag,
            port: 80,
        }])
    } else {
        Body::Valid(tag)
    }
}

fn any(value: Vec<u8>) -> Any {
    Any {
        type_url: CDS.into(),
        value,
    }
}

/// One response's worth per type: resources and removed names.
type ByType = BTreeMap<&'static str, (Vec<Resource>, Vec<String>)>;

/// One model server.
#[derive(Default)]
pub(crate) struct ModelServer {
    /// The truth: name → (version, body).
    pub(crate) truth: BTreeMap<String, (u64, Body)>,
    /// Each name's body as last set, encoded once rather than on every
    /// push (stale for a name no longer in `truth`, never read then).
    encoded: BTreeMap<String, Any>,
    next_version: u64,
    /// The stream, when one is open.
    pub(crate) open: bool,
    /// The open stream was accepted while the server was silent: it never
    /// answers, whatever comes later.
    pub(crate) dead: bool,
    subs: BTreeSet<String>,
    client_has: BTreeMap<String, String>,
    /// Nonces sent on the open stream.
    nonces: HashSet<String>,
    next_nonce: u64,
    /// Connections are refused until then.
    pub(crate) refusing_until: Option<Instant>,
    /// Streams are accepted and never answered until then.
    pub(crate) silent_until: Option<Instant>,
    /// Responses are held until then.
    pub(crate) delayed_until: Option<Instant>,
    /// The next response repeats its first resource.
    pub(crate) duplicate_next: bool,
    /// The next response carries a resource of another authority.
    pub(crate) foreign_next: Option<String>,
    /// Versions sent twice in one response, which the client NACKed: a
    /// server does not send a NACKed version again.
    pub(crate) spoiled: HashSet<(String, u64)>,
    /// Requests received, per virtual second.
    pub(crate) requests_per_second: BTreeMap<u64, usize>,
}

impl ModelServer {
    pub(crate) fn set(&mut self, name: &str, body: Body) {
        self.next_version += 1;
        self.encoded.insert(name.to_owned(), body.to_any(name));
        self.truth
            .insert(name.to_owned(), (self.next_version, body));
    }

    pub(crate) fn delete(&mut self, name: &str) {
        self.truth.remove(name);
    }

    pub(crate) fn open_stream(&mut self, now: Instant) {
        self.open = true;
        self.dead = self.silent(now);
        self.subs.clear();
        self.client_has.clear();
        self.nonces.clear();
    }

    pub(crate) fn close_stream(&mut self) {
        self.open = false;
        self.subs.clear();
        self.client_has.clear();
        self.nonces.clear();
    }

    /// Whether the server answers now.
    pub(crate) fn silent(&self, now: Instant) -> bool {
        self.silent_until.is_some_and(|t| now < t)
    }

    /// Takes one request. Panics (an invariant) if an ACK or NACK names a
    /// nonce this stream never sent.
    pub(crate) fn handle(
        &mut self,
        request: &DeltaDiscoveryRequest,
        second: u64,
    ) -> Vec<DeltaDiscoveryResponse> {
        *self.requests_per_second.entry(second).or_default() += 1;
        assert!(
            request.response_nonce.is_empty() || self.nonces.contains(&request.response_nonce),
            "the client acknowledged nonce {:?}, which this stream never sent",
            request.response_nonce
        );
        for name in &request.resource_names_subscribe {
            self.subs.insert(name.clone());
            self.client_has.remove(name);
        }
        for name in &request.resource_names_unsubscribe {
            self.subs.remove(name);
            self.client_has.remove(name);
        }
        for (name, version) in &request.initial_resource_versions {
            self.client_has.insert(name.clone(), version.clone());
        }
        self.push(&request.resource_names_subscribe)
    }

    /// What the client lacks, as one response per type; subscribed names
    /// that do not exist (among `newly`, or known to the client) are
    /// removed.
    pub(crate) fn push(&mut self, newly: &[String]) -> Vec<DeltaDiscoveryResponse> {
        if !self.open || self.dead {
            return Vec::new();
        }
        let mut by_type = ByType::new();
        for (name, (version, body)) in &self.truth {
            if !self.subs.contains(name) {
                continue;
            }
            let version = version.to_string();
            if self.client_has.get(name) != Some(&version) {
                by_type.entry(type_of(name)).or_default().0.push(Resource {
                    name: name.clone(),
                    version: version.clone(),
                    resource: Some(
                        self.encoded
                            .get(name)
                            .cloned()
                            .unwrap_or_else(|| body.to_any(name)),
                    ),
                    ..Resource::default()
                });
                self.client_has.insert(name.clone(), version);
            }
        }
        let gone: Vec<String> = self
            .client_has
            .keys()
            .filter(|n| !self.truth.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.client_has.remove(&name);
            by_type.entry(type_of(&name)).or_default().1.push(name);
        }
        for name in newly {
            let removed = &mut by_type.entry(type_of(name)).or_default().1;
            if !self.truth.contains_key(name) && !removed.contains(name) {
                removed.push(name.clone());
            }
        }
        self.add_faults(&mut by_type);
        let mut responses = Vec::new();
        for (type_url, (resources, removed)) in by_type {
            if resources.is_empty() && removed.is_empty() {
                continue;
            }
            self.next_nonce += 1;
            let nonce = format!("n{}", self.next_nonce);
            self.nonces.insert(nonce.clone());
            responses.push(DeltaDiscoveryResponse {
                type_url: type_url.into(),
                nonce,
                resources,
                removed_resources: removed,
                ..DeltaDiscoveryResponse::default()
            });
        }
        responses
    }

    fn add_faults(&mut self, by_type: &mut ByType) {
        let first = by_type.values_mut().find(|(r, _)| !r.is_empty());
        if let Some((resources, _)) = first
            && std::mem::take(&mut self.duplicate_next)
        {
            let first = resources[0].clone();
            if let Ok(version) = first.version.parse::<u64>() {
                self.spoiled.insert((first.name.clone(), version));
            }
            resources.push(first);
        }
        if let Some(name) = self.foreign_next.take() {
            let (resources, _) = by_type.entry(type_of(&name)).or_default();
            resources.push(Resource {
                name: name.clone(),
                version: "foreign".into(),
                resource: Some(foreign_body(&name).to_any(&name)),
                ..Resource::default()
            });
        }
    }
}
