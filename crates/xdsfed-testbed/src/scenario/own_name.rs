//! A scenario resource must be named inside as it is named in the scenario.
//!
//! A resource reaches clients under its scenario name (the delta
//! `Resource.name`) and, over state-of-the-world without the `Resource`
//! wrapper, under the name inside it only. gRPC clients go by the inner name
//! whatever the variant, and xdsfed's client NACKs a resource whose names
//! disagree (docs/rules.md). A scenario whose names disagree would serve a
//! resource that clients cannot agree on, so it is refused before anything
//! starts, naming both names.

use envoy_types::pb::envoy::config::{
    cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment, listener::v3::Listener,
    route::v3::RouteConfiguration,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use xdsfed_core::name::canonical_key;

/// The name inside `any` and the field that holds it, for the types that
/// carry one; `None` for other types, and for bytes that do not decode
/// (`encoded` may be broken on purpose: the client's NACK is the test).
fn inner_name(any: &Any) -> Option<(&'static str, String)> {
    fn decoded<M: Message + Default>(any: &Any) -> Option<M> {
        M::decode(any.value.as_slice()).ok()
    }
    let url = any.type_url.as_str();
    if url == Listener::type_url() {
        decoded::<Listener>(any).map(|m| ("name", m.name))
    } else if url == RouteConfiguration::type_url() {
        decoded::<RouteConfiguration>(any).map(|m| ("name", m.name))
    } else if url == Cluster::type_url() {
        decoded::<Cluster>(any).map(|m| ("name", m.name))
    } else if url == ClusterLoadAssignment::type_url() {
        decoded::<ClusterLoadAssignment>(any).map(|m| ("cluster_name", m.cluster_name))
    } else {
        None
    }
}

/// Whether `a` and `b` name the same resource: xdstp names by canonical key
/// (context-parameter order, percent-escapes), old-style names exactly.
fn same_name(a: &str, b: &str) -> bool {
    a == b || matches!((canonical_key(a), canonical_key(b)), (Ok(a), Ok(b)) if a == b)
}

/// Checks that the resource `any`, named `name` in the scenario, carries the
/// same name inside. `body` is the scenario field that holds the resource
/// (`resource` or `encoded`). The error says why, for the `name` field.
pub(super) fn check(name: &str, body: &str, any: &Any) -> Result<(), String> {
    let Some((field, inner)) = inner_name(any) else {
        return Ok(());
    };
    if same_name(name, &inner) {
        return Ok(());
    }
    Err(format!(
        "{name:?} is not the name inside the resource: {body}.{field} is {inner:?} \
         (clients know a resource by the name inside it; make the two the same)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{api_listener, cluster, endpoints, pack, route_config};

    #[test]
    fn every_named_type_is_checked_by_its_own_field() {
        let cases = [
            (pack(&api_listener("other", "rc")), "resource.name"),
            (pack(&route_config("other", &[])), "resource.name"),
            (pack(&cluster("other", "svc")), "resource.name"),
            (pack(&endpoints("other", &[])), "resource.cluster_name"),
        ];
        for (any, field) in cases {
            let why = check("svc", "resource", &any).unwrap_err();
            assert!(
                why.starts_with(&format!(
                    "\"svc\" is not the name inside the resource: {field} is \"other\""
                )),
                "{why}"
            );
            check("other", "resource", &any).unwrap();
        }
    }

    #[test]
    fn xdstp_names_compare_canonically_and_old_style_names_exactly() {
        let inner = "xdstp://a/envoy.config.cluster.v3.Cluster/c%7e?b=2&a=1";
        let any = pack(&cluster(inner, "svc"));
        check(
            "xdstp://a/envoy.config.cluster.v3.Cluster/c~?a=1&b=2",
            "resource",
            &any,
        )
        .unwrap();
        assert!(check("SVC", "resource", &pack(&cluster("svc", "svc"))).is_err());
    }

    #[test]
    fn an_empty_inner_name_differs() {
        assert!(check("svc", "encoded", &pack(&cluster("", "svc"))).is_err());
    }

    #[test]
    fn types_without_an_inner_name_and_broken_bytes_pass() {
        let policy = Any {
            type_url: "type.googleapis.com/xdsfed.policy.v1.Policy".into(),
            value: vec![1, 2, 3],
        };
        check("svc", "encoded", &policy).unwrap();
        let broken = Any {
            type_url: Cluster::type_url(),
            value: vec![0xff, 0xff],
        };
        check("svc", "encoded", &broken).unwrap();
    }
}
