//! What a CDN file says about the one resource it holds: the body of a
//! `200` read as a `DiscoveryResponse`, and its resource checked with the
//! protocol core's own helpers (decoding through the type registry, the
//! name inside the resource, locators).

use std::sync::Arc;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;

use crate::name::canonical_key;
use crate::protocol::{
    RESOURCE_LOCATOR_TYPE_URL, RESOURCE_WRAPPER_TYPE_URL, ResourceKey, decode_registered,
    locator_target, same_name,
};
use crate::types::{Decoded, TypeRegistry, ValidationError};

/// What one file answers for its resource.
#[derive(Debug)]
pub enum Answer {
    /// The resource, validated.
    Resource(Decoded),
    /// A locator: the resource lives at this canonical key (xDS TP1
    /// redirect).
    Redirect(Arc<str>),
}

/// Whether a `Content-Type` names JSON (`application/json`, any
/// parameters, any case); anything else is read as binary protobuf.
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|c| c.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// Reads `body` (JSON or protobuf) as a `DiscoveryResponse`. A body that
/// is not one is a failure of the source, like a broken connection (the
/// copy keeps serving, watchers get an ambient error), not a NACK: nothing
/// in it can be named.
pub fn parse(body: &Bytes, json: bool) -> Result<DiscoveryResponse, String> {
    if json {
        crate::json::discovery_response_from_json(body)
            .map_err(|e| format!("not a DiscoveryResponse in JSON: {e}"))
    } else {
        DiscoveryResponse::decode(body.clone()).map_err(|e| format!("not a DiscoveryResponse: {e}"))
    }
}

/// The answer `response` gives for `key`: its type must be the key's, and
/// it must hold exactly one resource, bare or in a `Resource` wrapper,
/// that names `key` (or carries no name) and validates. An error is the
/// server's data being wrong (reported `Invalid`, like a NACK).
pub fn answer(
    types: &TypeRegistry,
    key: &ResourceKey,
    response: DiscoveryResponse,
) -> Result<Answer, ValidationError> {
    if !response.type_url.is_empty() && response.type_url != *key.type_url {
        return Err(ValidationError::field(
            "type_url",
            format!("{:?}, not {}", response.type_url, key.type_url),
        ));
    }
    let [any] = <[Any; 1]>::try_from(response.resources).map_err(|all| {
        ValidationError::field(
            "resources",
            format!(
                "holds {} resources; a CDN file holds exactly one",
                all.len()
            ),
        )
    })?;
    let any = unwrap(key, any)?;
    if any.type_url == RESOURCE_LOCATOR_TYPE_URL {
        return locator_target(&any.value).map(Answer::Redirect);
    }
    decode_registered(types, &key.type_url, &any.type_url, Bytes::from(any.value))
        .and_then(|d| same_name(&key.name, key.name.as_bytes(), d))
        .map(Answer::Resource)
}

/// The resource inside a `Resource` wrapper, whose name (when it has one)
/// must be `key`'s; a bare resource as it is.
fn unwrap(key: &ResourceKey, any: Any) -> Result<Any, ValidationError> {
    if any.type_url != RESOURCE_WRAPPER_TYPE_URL {
        return Ok(any);
    }
    let wrapper = Resource::decode(Bytes::from(any.value))
        .map_err(|e| ValidationError(format!("Resource wrapper: {e}")))?;
    let named = !wrapper.name.is_empty()
        && wrapper.name != *key.name
        && canonical_key(&wrapper.name).map_or(true, |k| *k != *key.name);
    if named {
        return Err(ValidationError::field(
            "name",
            format!(
                "the file of {} holds a resource named {:?}",
                key.name, wrapper.name
            ),
        ));
    }
    wrapper
        .resource
        .ok_or_else(|| ValidationError::field("resource", "unset: the file holds no resource"))
}
