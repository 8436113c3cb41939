//! What `publish` follows (sans-IO): each name given on the command line
//! classified by its form, and the resources a listener's graph needs, as
//! a set to compare snapshot after snapshot.

use std::collections::BTreeSet;
use std::str::FromStr as _;
use std::sync::Arc;

use xdsfed::graph::{ClusterEndpoints, RouteBinding, Snapshot};

use super::super::CliError;
use super::super::target::{CollectionTarget, TypeArg};

/// One thing `publish` follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Followed {
    /// One resource, published as it changes, its file removed when it is
    /// deleted.
    Resource(TypeArg, String),
    /// A listener (a full name or an `xds:` target) and every route
    /// configuration, cluster and endpoint assignment its graph needs.
    Listener(String),
    /// A glob or list collection: its members, and a list collection's own
    /// file.
    Collection(CollectionTarget),
}

impl Followed {
    /// A NAME argument: an `xds:` target is a listener; an `xdstp:` name
    /// is classified by its type segment (a glob or a `…Collection` is a
    /// collection, a listener is followed with its graph, any other known
    /// type is one resource). Old-style names carry no type: they go with
    /// `--resource TYPE NAME`.
    pub(super) fn of_name(name: &str) -> Result<Self, CliError> {
        if name.starts_with("xds:") {
            return Ok(Self::Listener(name.to_owned()));
        }
        let Some(type_segment) = xdstp_type_segment(name) else {
            return Err(CliError::bad_input(format!(
                "NAME {name:?}: neither an xdstp:// name nor an xds: target"
            ))
            .hint("an old-style name carries no type: give it as --resource TYPE NAME"));
        };
        let is_glob = name
            .split(['?', '#'])
            .next()
            .is_some_and(|p| p.ends_with("/*"));
        let element = type_segment.strip_suffix("Collection").filter(|_| !is_glob);
        let kind = TypeArg::from_str(element.unwrap_or(type_segment))
            .map_err(|e| CliError::bad_input(format!("NAME {name}: {e}")))?;
        if is_glob || element.is_some() {
            return CollectionTarget::parse(kind, name).map(Self::Collection);
        }
        Ok(match kind {
            TypeArg::Listener => Self::Listener(name.to_owned()),
            _ => Self::Resource(kind, name.to_owned()),
        })
    }

    /// A `--resource TYPE NAME` pair: exactly that resource (a listener
    /// without its graph).
    pub(super) fn of_resource_flag(pair: &[String]) -> Result<Self, CliError> {
        let [kind, name] = pair else {
            return Err(CliError::bad_input("--resource takes a TYPE and a NAME"));
        };
        let kind =
            TypeArg::from_str(kind).map_err(|e| CliError::bad_input(format!("--resource: {e}")))?;
        Ok(Self::Resource(kind, name.clone()))
    }
}

/// The type segment of an `xdstp://AUTHORITY/TYPE/…` name.
fn xdstp_type_segment(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("xdstp://")?;
    let (_authority, typed) = rest.split_once('/')?;
    let (type_segment, _id) = typed.split_once('/')?;
    Some(type_segment)
}

/// The resources `snapshot` holds, by type: its listeners, the route
/// configurations fetched through RDS, its clusters, and the endpoint
/// assignments fetched through EDS. Inline ones live in their parent's
/// file.
pub(super) fn graph_resources(snapshot: &Snapshot) -> BTreeSet<(TypeArg, Arc<str>)> {
    let mut needed = BTreeSet::new();
    for listener in snapshot.listeners() {
        needed.insert((TypeArg::Listener, Arc::clone(&listener.name)));
        for binding in &listener.routes {
            if let RouteBinding::Rds(name) = binding {
                needed.insert((TypeArg::Route, Arc::clone(name)));
            }
        }
    }
    for cluster in snapshot.clusters() {
        needed.insert((TypeArg::Cluster, Arc::clone(&cluster.name)));
        if let ClusterEndpoints::Eds { service_name, .. } = &cluster.endpoints {
            needed.insert((TypeArg::Endpoint, Arc::clone(service_name)));
        }
    }
    needed
}

#[cfg(test)]
mod tests {
    use super::super::super::target::CollectionShape;
    use super::*;

    fn of(name: &str) -> Followed {
        Followed::of_name(name).unwrap()
    }

    /// A NAME's form says what is followed: a listener with its graph, a
    /// collection, or one resource.
    #[test]
    fn names_are_classified_by_their_type_segment() {
        let listener = "xdstp://a/envoy.config.listener.v3.Listener/edge";
        assert_eq!(of(listener), Followed::Listener(listener.to_owned()));
        assert_eq!(
            of("xds:///edge"),
            Followed::Listener("xds:///edge".to_owned())
        );
        let cluster = "xdstp://a/envoy.config.cluster.v3.Cluster/pay";
        assert_eq!(
            of(cluster),
            Followed::Resource(TypeArg::Cluster, cluster.to_owned())
        );
        let list = "xdstp://a/envoy.config.cluster.v3.ClusterCollection/mesh/all";
        assert!(matches!(of(list), Followed::Collection(c) if c.shape == CollectionShape::List));
        let glob = "xdstp://a/envoy.config.cluster.v3.Cluster/pool/*";
        assert!(matches!(of(glob), Followed::Collection(c) if c.shape == CollectionShape::Glob));
    }

    /// An old-style name or an unknown type is bad input naming it.
    #[test]
    fn names_without_a_known_type_are_refused() {
        for name in ["pay", "xdstp://a/unknown.Type/x"] {
            let e = Followed::of_name(name).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
    }
}
