//! A locality's `leds_cluster_locality_config`, validated.
//!
//! Two forms are accepted. A glob (`…/envoy.config.endpoint.v3.LbEndpoint/
//! pool/*`, xDS TP1, delta only) is checked no further here: the graph
//! follows it or reports it. Any other name is a list collection, and
//! gRFC A95's rules apply: `leds_config` must be `self`, and the name must
//! be an `xdstp://` name of an `LbEndpointCollection`. The locality's own
//! `lb_endpoints` are then ignored (A95), so they are not validated.

use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::endpoint::v3::LedsClusterLocalityConfig;

use crate::name::ResourceName;
use crate::types::ValidationError;

/// The resource type an A95 list collection name must carry.
const LIST_TYPE: &str = "envoy.config.endpoint.v3.LbEndpointCollection";

/// Whether `collection_name` names a glob collection, which A95 leaves to
/// delta xDS (the name ends in `/*`).
pub(crate) fn is_glob(collection_name: &str) -> bool {
    collection_name.ends_with("/*")
}

/// Checks the LEDS configuration of locality `l`; `Ok(true)` when its
/// `lb_endpoints` are ignored and need no validation (a list collection).
pub(crate) fn check_leds_locality(
    l: usize,
    config: &LedsClusterLocalityConfig,
) -> Result<bool, ValidationError> {
    let name = config.leds_collection_name.as_str();
    if is_glob(name) {
        return Ok(false);
    }
    let field = |f: &str| format!("endpoints[{l}].leds_cluster_locality_config.{f}");
    let is_self = config.leds_config.as_ref().is_some_and(|c| {
        matches!(
            c.config_source_specifier,
            Some(ConfigSourceSpecifier::Self_(_))
        )
    });
    if !is_self {
        return Err(ValidationError::field(
            field("leds_config"),
            "must be `self` for a list collection (gRFC A95)",
        ));
    }
    let parsed = ResourceName::parse(name)
        .map_err(|e| ValidationError::field(field("leds_collection_name"), e))?;
    let of_list_type = parsed
        .as_xdstp()
        .is_some_and(|x| x.resource_type() == LIST_TYPE);
    if !of_list_type {
        return Err(ValidationError::field(
            field("leds_collection_name"),
            format_args!("{name:?} is neither a glob (…/*) nor an xdstp:// name of {LIST_TYPE}"),
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::{ConfigSource, SelfConfigSource};
    use envoy_types::pb::envoy::config::endpoint::v3::LbEndpointCollection;
    use envoy_types::pb::envoy::config::endpoint::v3::locality_lb_endpoints::LbConfig;
    use envoy_types::pb::xds::core::v3::CollectionEntry;
    use envoy_types::pb::xds::core::v3::collection_entry::{InlineEntry, ResourceSpecifier};
    use envoy_types::pb::xds::core::v3::{ResourceLocator, resource_locator};
    use prost::Message;

    use crate::types::tests_support::{ads, load_assignment, pack};
    use crate::types::{EndpointType, ListCollection, ResourceType, TypeRegistry};

    const LIST: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpointCollection/pool";
    const GLOB: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*";
    const COLLECTION_URL: &str =
        "type.googleapis.com/envoy.config.endpoint.v3.LbEndpointCollection";

    fn self_source() -> ConfigSource {
        ConfigSource {
            config_source_specifier: Some(super::ConfigSourceSpecifier::Self_(
                SelfConfigSource::default(),
            )),
            ..Default::default()
        }
    }

    /// A one-locality assignment whose locality names `collection` through
    /// `source`, and still lists an endpoint of its own on `port`.
    fn leds_assignment(
        collection: &str,
        source: ConfigSource,
        port: u32,
    ) -> Result<crate::types::LoadAssignment, crate::types::ValidationError> {
        let mut cla = load_assignment("c1", &[("10.0.0.1", port)]);
        cla.endpoints[0].lb_config = Some(LbConfig::LedsClusterLocalityConfig(
            envoy_types::pb::envoy::config::endpoint::v3::LedsClusterLocalityConfig {
                leds_config: Some(source),
                leds_collection_name: collection.into(),
            },
        ));
        EndpointType::decode(&cla.encode_to_vec())
    }

    fn error_of<T>(r: Result<T, crate::types::ValidationError>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    fn inline_endpoint(name: &str, port: u32) -> CollectionEntry {
        let lb = load_assignment("c1", &[("10.0.0.9", port)]).endpoints[0].lb_endpoints[0].clone();
        CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::InlineEntry(InlineEntry {
                name: name.into(),
                version: "1".into(),
                resource: Some(pack(&lb)),
            })),
        }
    }

    fn decode_collection(
        entries: Vec<CollectionEntry>,
    ) -> Result<std::sync::Arc<ListCollection>, crate::types::ValidationError> {
        let registry = TypeRegistry::with_builtin();
        let Some(ty) = registry.get(COLLECTION_URL) else {
            return Err(crate::types::ValidationError(
                "LbEndpointCollection is not registered".into(),
            ));
        };
        let raw = bytes::Bytes::from(LbEndpointCollection { entries }.encode_to_vec());
        let decoded = ty.decode(raw)?;
        decoded
            .downcast::<ListCollection>()
            .ok_or_else(|| crate::types::ValidationError("not a list collection".into()))
    }

    /// gRFC A95: "The `leds_config` field must have its `self` field set."
    #[test]
    fn list_leds_config_other_than_self_is_rejected() {
        let err = error_of(leds_assignment(LIST, ads(), 80));
        assert!(
            err.starts_with("endpoints[0].leds_cluster_locality_config.leds_config: "),
            "{err}"
        );
        assert!(leds_assignment(LIST, self_source(), 80).is_ok());
    }

    /// gRFC A95: "The `leds_collection_name` field must not end with `/*`
    /// (since that indicates a glob collection instead of a list
    /// collection …)": a list name is an `LbEndpointCollection`; a name of
    /// another type, or not an `xdstp://` name, is rejected.
    #[test]
    fn list_leds_collection_name_not_an_lb_endpoint_collection_is_rejected() {
        for name in [
            "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool",
            "old-style-pool",
        ] {
            let err = error_of(leds_assignment(name, self_source(), 80));
            assert!(
                err.starts_with("endpoints[0].leds_cluster_locality_config.leds_collection_name: "),
                "{name}: {err}"
            );
        }
    }

    /// gRFC A95: "if the `leds_cluster_locality_config` field is set, then
    /// the `lb_endpoints` field will be ignored."
    #[test]
    fn list_leds_locality_lb_endpoints_are_ignored() {
        assert!(leds_assignment(LIST, self_source(), 70000).is_ok());
    }

    /// Glob LEDS (xDS TP1, delta) keeps its rules: any well-formed source.
    #[test]
    fn glob_leds_locality_keeps_any_config_source() {
        assert!(leds_assignment(GLOB, ads(), 80).is_ok());
        assert!(leds_assignment(GLOB, self_source(), 80).is_ok());
    }

    /// gRFC A95: "The `inline_entry` field must be populated": a locator
    /// entry is rejected, naming it.
    #[test]
    fn lb_endpoint_collection_locator_entry_is_rejected() {
        let locator = CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::Locator(ResourceLocator {
                scheme: resource_locator::Scheme::Xdstp as i32,
                authority: "a".into(),
                resource_type: "envoy.config.endpoint.v3.LbEndpoint".into(),
                id: "e1".into(),
                ..Default::default()
            })),
        };
        let err = error_of(decode_collection(vec![inline_endpoint("e0", 80), locator]));
        assert!(err.starts_with("entries[1]: "), "{err}");
    }

    /// gRFC A95: "The validation rules for the `LbEndpoint` message are the
    /// same as for each entry of the `lb_endpoints` field in the EDS
    /// resource."
    #[test]
    fn lb_endpoint_collection_inline_endpoint_is_validated_as_an_eds_endpoint() {
        let err = error_of(decode_collection(vec![inline_endpoint("e0", 70000)]));
        assert_eq!(
            err,
            "entries[0].inline_entry.resource: endpoint.address.socket_address.port_value: 70000 is not a port"
        );
        let ok = decode_collection(vec![inline_endpoint("e0", 80), inline_endpoint("", 81)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.entries.len(), 2);
    }

    /// gRFC A95: "If the `entries` field is empty, then the locality will be
    /// considered unreachable": the collection is valid, with no members.
    #[test]
    fn lb_endpoint_collection_without_entries_is_valid_and_empty() {
        let empty = decode_collection(Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(empty.entries.is_empty());
    }
}
