//! ClusterLoadAssignment → LEDS collections (xDS TP1).
//!
//! A locality whose `leds_cluster_locality_config` is set takes its
//! endpoints from an `LbEndpoint` glob collection
//! (`xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*`, delta only) or
//! an `LbEndpointCollection` list collection
//! (`xdstp://a/envoy.config.endpoint.v3.LbEndpointCollection/pool`,
//! gRFC A95), one edge per distinct collection; its own `lb_endpoints` are
//! ignored, as Envoy ignores them. The collection is resolved like any
//! name: through the `leds_config` ConfigSource when it lists the
//! authority, otherwise through the bootstrap. A name of neither form is an
//! error on that edge, which the cluster using the assignment reports.

use std::sync::Arc;

use xdsfed_core::types::{LedsLocality, LoadAssignment};

use super::{Edge, Key, ParseCx, canonical_shared};
use crate::error::GraphError;
use crate::resource::ResourceKind;

/// The resource type of a LEDS list collection's name (gRFC A95).
const LIST_TYPE: &str = "envoy.config.endpoint.v3.LbEndpointCollection";

/// The key of the LEDS collection a locality names, or why it cannot be
/// followed.
pub(crate) fn leds_key(leds: &LedsLocality) -> Result<Key, (Key, GraphError)> {
    let kind = ResourceKind::LbEndpoint;
    let raw = &leds.collection_name;
    let name = canonical_shared(kind, raw).map_err(|e| (Key::new(kind, Arc::clone(raw)), e))?;
    let followed = xdsfed_core::name::ResourceName::parse_user_supplied(&name).is_ok_and(|n| {
        n.as_xdstp().is_some_and(|x| match x.is_glob() {
            true => x.resource_type() == kind.message_name(),
            false => x.resource_type() == LIST_TYPE && x.directives().is_empty(),
        })
    });
    if !followed {
        let why = "a LEDS collection must be an xdstp:// glob of LbEndpoint (…/LbEndpoint/…/*) \
                   or an LbEndpointCollection (…/LbEndpointCollection/…)";
        let error = GraphError::InvalidName {
            kind,
            name: Arc::clone(&name),
            why: Arc::from(why),
        };
        return Err((Key::new(kind, name), error));
    }
    Ok(Key::new(kind, name))
}

/// The edges of ClusterLoadAssignment `name`: one per distinct LEDS
/// collection its localities name.
pub(crate) fn leds_edges(cx: ParseCx<'_>, name: &Arc<str>, cla: &LoadAssignment) -> Vec<Edge> {
    let mut edges: Vec<Edge> = Vec::new();
    for (_, leds) in cla.leds_localities() {
        let edge = match leds_key(leds) {
            Ok(target) => Edge {
                via: cx
                    .resolve(target.kind, &target.name, leds.config().as_ref(), name)
                    .map_err(Box::new),
                target,
            },
            Err((target, error)) => Edge {
                target,
                via: Err(Box::new(error)),
            },
        };
        if !edges.iter().any(|e| e.target == edge.target) {
            edges.push(edge);
        }
    }
    edges
}
