//! The protobuf JSON mapping of xDS messages: `DiscoveryRequest` and
//! `DiscoveryResponse` as JSON (the REST-JSON variant of the protocol) and
//! as YAML (files of a filesystem source, handcrafted configuration).
//!
//! The mapping needs the descriptors of every Envoy, xds and google type
//! that `envoy-types` generates, because a response's resources are `Any`s
//! whose JSON form is the named type's own. They are loaded into a
//! `prost-reflect` pool on first use from `descriptors/envoy-types.bin`, a
//! file of this crate: the descriptor set `envoy-types` ships, with its
//! source comments stripped.
//!
//! Why a file of our own. `envoy-types` keeps its descriptor set as a package
//! file, not as an API, and a crate cannot name a dependency's package
//! directory: only cargo knows it, and asking cargo (`cargo metadata`) from a
//! build script needs every package of the lock file, dev-dependencies of
//! every workspace member included, which a fresh offline build has never
//! downloaded. A file inside this crate is an input of the build like any
//! source file: the same bytes offline and online, from a registry, a vendor
//! directory or a git checkout, with no build script at all.
//!
//! The file is pinned to the `envoy-types` version in `Cargo.lock`: the test
//! `tests/envoy_descriptors.rs` fails when the two disagree, and
//! `cargo run -p xdsfed-core --example update_envoy_descriptors` writes
//! both again after an upgrade.
//!
//! Every function here takes text the caller has already bounded in size
//! (`TransportOptions::max_text_message_size`), and bounds what decoding it
//! costs: JSON goes straight from the bytes into the message, with no
//! generic tree of the whole text in between, after a linear scan has
//! refused a text that would decode too large ([`DECODING_BUDGET`]) or
//! that nests too deep; YAML is scanned
//! for nesting first (the parser is quadratic in it). Errors name the field
//! where the mapping failed.

use std::sync::LazyLock;

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use prost::Name;
use prost_reflect::{DescriptorPool, DynamicMessage};

use crate::text_limits::{JsonBudget, check_json_budget, check_yaml_nesting};

/// What a JSON text of the protobuf JSON mapping may hold (see
/// [`check_json_budget`]). Decoded, a value takes up to about 800 bytes
/// (inside a `google.protobuf.Struct` even a `0` is a message of its own)
/// and a resource about 900 bytes however short (docs/performance.md,
/// "Parsing JSON and YAML bodies"), so:
///
/// - 131 072 values in one resource: its tree stays within about 100 MiB,
///   and a ClusterLoadAssignment of 10 000 endpoints (about 11 values
///   each) still fits;
/// - 262 144 resources: the held resources within about 250 MiB, two and a
///   half times xDS TP1's 100 000 clusters;
/// - 4 194 304 values in all: the parse's time within about twice a
///   realistic body's at the 32 MiB text limit.
pub const DECODING_BUDGET: JsonBudget = JsonBudget {
    elements: 1 << 18,
    values_per_element: 1 << 17,
    values: 1 << 22,
};

static ENVOY_DESCRIPTORS: &[u8] = include_bytes!("../descriptors/envoy-types.bin");

static ENVOY_POOL: LazyLock<Result<DescriptorPool, String>> =
    LazyLock::new(|| DescriptorPool::decode(ENVOY_DESCRIPTORS).map_err(|e| e.to_string()));

/// The descriptor pool of every type `envoy-types` generates. Add your own
/// types to a clone of it to map them too.
///
/// ```
/// let pool = xdsfed_core::json::envoy_pool().unwrap();
/// assert!(pool.get_message_by_name("envoy.config.cluster.v3.Cluster").is_some());
/// ```
pub fn envoy_pool() -> Result<DescriptorPool, String> {
    ENVOY_POOL
        .as_ref()
        .map(Clone::clone)
        .map_err(|e| format!("the envoy-types descriptor set does not load: {e}"))
}

/// Why a JSON or YAML text does not map to its message, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct MappingError {
    /// The field path inside the message (`resources[0].name`), empty when
    /// the text as a whole is wrong.
    pub field: String,
    /// What is wrong there.
    pub message: String,
}

impl MappingError {
    fn whole(message: impl Into<String>) -> Self {
        MappingError {
            field: String::new(),
            message: message.into(),
        }
    }
}

/// Reads a `DiscoveryResponse` written in the protobuf JSON mapping.
///
/// ```
/// let text = br#"{"version_info": "1", "resources": [{
///     "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
///     "name": "c", "type": "EDS"}]}"#;
/// let response = xdsfed_core::json::discovery_response_from_json(text).unwrap();
/// assert_eq!(response.version_info, "1");
/// assert_eq!(response.resources.len(), 1);
/// ```
pub fn discovery_response_from_json(text: &[u8]) -> Result<DiscoveryResponse, MappingError> {
    from_json(text)
}

/// Reads a `DiscoveryResponse` written in YAML, through the protobuf JSON
/// mapping (as Envoy reads its YAML configuration).
pub fn discovery_response_from_yaml(text: &[u8]) -> Result<DiscoveryResponse, MappingError> {
    from_yaml(text)
}

/// Reads a `DiscoveryRequest` written in the protobuf JSON mapping (what a
/// REST-JSON server receives).
pub fn discovery_request_from_json(text: &[u8]) -> Result<DiscoveryRequest, MappingError> {
    from_json(text)
}

/// Writes a `DiscoveryRequest` in the protobuf JSON mapping (what a
/// REST-JSON client sends), as Envoy's REST subscription prints it: with
/// the proto field names (`version_info`, `resource_names`, `type_url`,
/// `response_nonce`, `error_detail`), which some servers read exclusively
/// (sovereign), though the mapping lets a parser accept both. Fields at
/// their default value are printed too (an empty `node.cluster`, a NACK's
/// empty `error_detail.details`): a server that validates the request
/// against a schema of its own (sovereign's requires both) finds them.
///
/// ```
/// use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
/// let request = DiscoveryRequest {
///     resource_names: vec!["c".into()],
///     ..Default::default()
/// };
/// let json = xdsfed_core::json::discovery_request_to_json(&request).unwrap();
/// let text = String::from_utf8(json).unwrap();
/// assert!(text.contains(r#""resource_names":["c"]"#) && text.contains(r#""version_info":"""#));
/// ```
pub fn discovery_request_to_json(request: &DiscoveryRequest) -> Result<Vec<u8>, MappingError> {
    let options = prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    to_json_with(request, &options)
}

/// Writes a `DiscoveryResponse` in the protobuf JSON mapping (what a
/// REST-JSON server answers).
pub fn discovery_response_to_json(response: &DiscoveryResponse) -> Result<Vec<u8>, MappingError> {
    to_json(response)
}

fn descriptor_of<M: Name>() -> Result<prost_reflect::MessageDescriptor, MappingError> {
    let pool = envoy_pool().map_err(MappingError::whole)?;
    pool.get_message_by_name(&M::full_name()).ok_or_else(|| {
        MappingError::whole(format!("{} is not in the descriptor set", M::full_name()))
    })
}

/// Reads `M` from JSON text, straight from the bytes into the message: no
/// generic tree of the whole text is built first (that took 100 times the
/// text's size).
fn from_json<M: Name + Default>(text: &[u8]) -> Result<M, MappingError> {
    check_json_budget(text, DECODING_BUDGET)
        .map_err(|e| MappingError::whole(format!("refused before parsing: {e}")))?;
    let mut de = serde_json::Deserializer::from_slice(text);
    let message = from_deserializer(&mut de, |e: &serde_json::Error| {
        use serde_json::error::Category;
        matches!(
            e.classify(),
            Category::Syntax | Category::Eof | Category::Io
        )
        .then(|| format!("not JSON: {e}"))
    })?;
    de.end()
        .map_err(|e| MappingError::whole(format!("not JSON: {e}")))?;
    Ok(message)
}

/// The deepest a YAML text may nest collections: the YAML deserializer's
/// own recursion limit, checked before the parser (quadratic in the depth)
/// starts.
const MAX_YAML_NESTING: usize = 128;

/// Reads `M` from YAML text, through the protobuf JSON mapping.
fn from_yaml<M: Name + Default>(text: &[u8]) -> Result<M, MappingError> {
    let utf8 = std::str::from_utf8(text)
        .map_err(|e| MappingError::whole(format!("not YAML: not UTF-8 text: {e}")))?;
    check_yaml_nesting(utf8, MAX_YAML_NESTING).map_err(|e| {
        MappingError::whole(format!(
            "not YAML: {e} at line {} column {}",
            e.line, e.column
        ))
    })?;
    let de = serde_norway::Deserializer::from_slice(text);
    from_deserializer(de, |_: &serde_norway::Error| None)
}

/// Deserializes `M` from `de`, tracking the field path for errors.
/// `syntax` tells an error in the text itself (which has no field) from
/// one in the mapping.
fn from_deserializer<'de, M, D>(
    de: D,
    syntax: impl FnOnce(&D::Error) -> Option<String>,
) -> Result<M, MappingError>
where
    M: Name + Default,
    D: serde::Deserializer<'de>,
{
    let descriptor = descriptor_of::<M>()?;
    let mut track = serde_path_to_error::Track::new();
    let message = DynamicMessage::deserialize(
        descriptor,
        serde_path_to_error::Deserializer::new(de, &mut track),
    )
    .map_err(|e| {
        if let Some(message) = syntax(&e) {
            return MappingError::whole(message);
        }
        let mut field = track.path().to_string();
        // The root prints as ".".
        if field == "." {
            field.clear();
        }
        MappingError {
            field,
            message: e.to_string(),
        }
    })?;
    message
        .transcode_to::<M>()
        .map_err(|e| MappingError::whole(format!("cannot encode the message: {e}")))
}

fn to_json<M: prost::Message + Name>(message: &M) -> Result<Vec<u8>, MappingError> {
    to_json_with(message, &prost_reflect::SerializeOptions::new())
}

fn to_json_with<M: prost::Message + Name>(
    message: &M,
    options: &prost_reflect::SerializeOptions,
) -> Result<Vec<u8>, MappingError> {
    let descriptor = descriptor_of::<M>()?;
    let mut dynamic = DynamicMessage::new(descriptor);
    dynamic
        .transcode_from(message)
        .map_err(|e| MappingError::whole(format!("cannot read the message: {e}")))?;
    let mut json = Vec::new();
    dynamic
        .serialize_with_options(&mut serde_json::Serializer::new(&mut json), options)
        .map_err(|e| MappingError::whole(e.to_string()))?;
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    fn cluster_any(name: &str) -> Any {
        Any {
            type_url: Cluster::type_url(),
            value: Cluster {
                name: name.into(),
                ..Default::default()
            }
            .encode_to_vec(),
        }
    }

    #[test]
    fn a_response_round_trips_through_json_with_its_resources() {
        let response = DiscoveryResponse {
            version_info: "7".into(),
            nonce: "n".into(),
            type_url: Cluster::type_url(),
            resources: vec![cluster_any("a"), cluster_any("b")],
            ..Default::default()
        };
        let json = discovery_response_to_json(&response).unwrap();
        assert_eq!(discovery_response_from_json(&json).unwrap(), response);
    }

    #[test]
    fn a_request_round_trips_through_json() {
        let request = DiscoveryRequest {
            version_info: "3".into(),
            resource_names: vec!["a".into()],
            type_url: Cluster::type_url(),
            response_nonce: "n".into(),
            ..Default::default()
        };
        let json = discovery_request_to_json(&request).unwrap();
        assert_eq!(discovery_request_from_json(&json).unwrap(), request);
    }

    #[test]
    fn yaml_names_the_field_that_does_not_map() {
        let text = b"version_info: '1'\nresources:\n- '@type': type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n  connect_timeout: forever\n";
        let error = discovery_response_from_yaml(text).unwrap_err();
        assert!(error.field.starts_with("resources[0]"), "{error}");
    }

    /// A YAML file nested deeper than the deserializer's limit is refused
    /// before parsing, the error naming the nesting limit and the line.
    #[test]
    fn deeply_nested_yaml_is_refused_by_the_nesting_limit() {
        let text = format!("version_info: '1'\nresources: {}", "[".repeat(200_000));
        let error = discovery_response_from_yaml(text.as_bytes()).unwrap_err();
        assert!(
            error.message.contains("nesting limit") && error.message.contains("line 2"),
            "{error}"
        );
    }

    #[test]
    fn text_that_is_not_json_is_an_error_not_a_panic() {
        assert!(discovery_response_from_json(b"{\"resources\": [").is_err());
        assert!(discovery_response_from_yaml(b"- [").is_err());
        assert!(
            discovery_response_from_json(
                b"{\"resources\": [{\"@type\": \"type.googleapis.com/no.Such\"}]}"
            )
            .is_err()
        );
    }
}
