//! Listener → RouteConfiguration.
//!
//! The route configuration hangs off the HttpConnectionManager (HCM). A
//! client-side (gRPC-style) listener carries it in `api_listener.api_listener`;
//! a server-side (Envoy-style) listener carries one per filter chain, as the
//! `typed_config` of a network filter. Each HCM names its routes either by
//! `rds.route_config_name` (an edge to a RouteConfiguration resource, with
//! `rds.config_source` beside it) or inline in `route_config` (whose clusters
//! become edges of the listener itself).

use std::sync::Arc;
use xdsfed_core::hash::HashSet;
use xdsfed_core::types::RouteConfigView;

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter::ConfigType};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::{Edge, Key, ParseCx, canonical_name, scan_route_config};
use crate::error::GraphError;
use crate::resource::{Provenance, ResourceKind, Versioned};
use crate::snapshot::{RouteBinding, RouteConfigSnapshot};

const HCM_MESSAGE: &str =
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/// What a listener points at, and the first problem found in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenerShape {
    pub(crate) routes: Vec<RouteBinding>,
    /// A listener-level problem; the listener is unusable while it is set.
    pub(crate) error: Option<GraphError>,
}

/// Reads the route edges of `listener` (named `name`). Inline route
/// configurations become [`RouteConfigSnapshot`]s here, once per listener
/// version, so later snapshots share them.
pub(crate) fn parse_listener(
    cx: ParseCx<'_>,
    name: &Arc<str>,
    listener: &Listener,
    provenance: &Provenance,
) -> (ListenerShape, Vec<Edge>) {
    let mut out = Builder {
        cx,
        name,
        provenance,
        shape: ListenerShape::default(),
        edges: Vec::new(),
        seen: HashSet::default(),
        found_hcm: false,
    };
    if let Some(api) = &listener.api_listener {
        match &api.api_listener {
            Some(any) if is_hcm(any) => out.hcm(any),
            _ => out.fail(GraphError::NoHttpConnectionManager {
                listener: Arc::clone(name),
            }),
        }
    }
    let chains = listener
        .filter_chains
        .iter()
        .chain(listener.default_filter_chain.as_ref());
    for chain in chains {
        out.chain(chain);
    }
    if !out.found_hcm {
        out.fail(GraphError::NoHttpConnectionManager {
            listener: Arc::clone(name),
        });
    }
    (out.shape, out.edges)
}

fn is_hcm(any: &Any) -> bool {
    any.type_url.rsplit('/').next() == Some(HCM_MESSAGE)
}

struct Builder<'a> {
    cx: ParseCx<'a>,
    name: &'a Arc<str>,
    provenance: &'a Provenance,
    shape: ListenerShape,
    edges: Vec<Edge>,
    seen: HashSet<Key>,
    found_hcm: bool,
}

impl Builder<'_> {
    fn fail(&mut self, error: GraphError) {
        // The first problem is the one reported; later ones are usually its
        // consequences.
        self.shape.error.get_or_insert(error);
    }

    fn edge(&mut self, edge: Edge) {
        if self.seen.insert(edge.target.clone()) {
            self.edges.push(edge);
        }
    }

    fn chain(&mut self, chain: &FilterChain) {
        for filter in &chain.filters {
            if let Some(ConfigType::TypedConfig(any)) = &filter.config_type
                && is_hcm(any)
            {
                self.hcm(any);
            }
        }
    }

    fn hcm(&mut self, any: &Any) {
        self.found_hcm = true;
        let hcm = match HttpConnectionManager::decode(any.value.as_slice()) {
            Ok(hcm) => hcm,
            Err(e) => {
                return self.fail(GraphError::BadHttpConnectionManager {
                    listener: Arc::clone(self.name),
                    reason: Arc::from(e.to_string()),
                });
            }
        };
        match hcm.route_specifier {
            Some(RouteSpecifier::Rds(rds)) => self.rds(&rds.route_config_name, rds.config_source),
            Some(RouteSpecifier::RouteConfig(rc)) => self.inline(rc),
            Some(RouteSpecifier::ScopedRoutes(_)) => {
                self.fail(GraphError::ScopedRoutesUnsupported {
                    listener: Arc::clone(self.name),
                })
            }
            None => self.fail(GraphError::NoRouteSpecifier {
                listener: Arc::clone(self.name),
            }),
        }
    }

    fn rds(
        &mut self,
        raw: &str,
        source: Option<envoy_types::pb::envoy::config::core::v3::ConfigSource>,
    ) {
        let kind = ResourceKind::RouteConfiguration;
        let name = match canonical_name(kind, raw) {
            Ok(name) => name,
            Err(e) => return self.fail(e),
        };
        // An RDS edge that cannot be resolved fails the listener (A74: route
        // problems are listener problems) and creates no node.
        match self.cx.resolve(kind, &name, source.as_ref(), self.name) {
            Ok(via) => {
                let target = Key::new(kind, Arc::clone(&name));
                if !self.seen.contains(&target) {
                    self.shape.routes.push(RouteBinding::Rds(name));
                }
                self.edge(Edge {
                    target,
                    via: Ok(via),
                });
            }
            Err(e) => self.fail(e),
        }
    }

    fn inline(&mut self, rc: envoy_types::pb::envoy::config::route::v3::RouteConfiguration) {
        // Held as an RDS configuration is: its bytes and a view.
        let rc = match RouteConfigView::new(&rc) {
            Ok(rc) => rc,
            Err(e) => {
                return self.fail(GraphError::BadHttpConnectionManager {
                    listener: Arc::clone(self.name),
                    reason: Arc::from(format!("route_config.{}", e.0)),
                });
            }
        };
        let scan = scan_route_config(self.cx, &rc, self.name);
        for edge in &scan.edges {
            self.edge(edge.clone());
        }
        let snapshot = RouteConfigSnapshot::present(
            Arc::from(rc.name()),
            Versioned {
                value: Arc::new(rc),
                provenance: self.provenance.clone(),
                ambient_error: None,
            },
            &scan,
        );
        self.shape
            .routes
            .push(RouteBinding::Inline(Arc::new(snapshot)));
    }
}
