//! A file's bytes as the resources it holds, keyed as the cache keys them.
//!
//! The per-resource rules are the protocol core's: names parse
//! ([`canonical_key`]), a name of an authority the source does not serve
//! is ignored, a name twice in one file rejects it
//! ([`Rejected::DuplicateName`]), the resource decodes and validates with
//! its registered type, and the name inside it agrees with the wrapper's
//! ([`same_name`]). An entry whose name or type cannot be known at all
//! fails the whole file: nothing could carry its error, and deleting what
//! it might have held would be a guess.

use crate::hash::HashMap;
use std::collections::BTreeMap;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use prost::Message as _;

use crate::bootstrap::FileFormat;
use crate::name::canonical_key;
use crate::protocol::{
    AuthorityFilter, RESOURCE_WRAPPER_TYPE_URL, Rejected, ResourceKey, same_name,
};
use crate::types::{Decoded, TypeRegistry, ValidationError};
use crate::version::Version;

/// What the file says of one resource.
#[derive(Debug, Clone)]
pub(super) enum Entry {
    /// A valid copy.
    Valid(Decoded),
    /// A copy that failed validation (or a name given twice).
    Invalid(ValidationError),
}

/// A file that decoded as a whole.
#[derive(Debug, Clone)]
pub(super) struct Contents {
    /// `version_info`, or a digest of the bytes when it is empty.
    pub(super) version: Version,
    /// Every resource of an authority the source serves.
    pub(super) entries: BTreeMap<ResourceKey, Entry>,
    /// Resources of other authorities, ignored.
    pub(super) foreign: u64,
}

/// The response the bytes hold, in `format`; the problem names the field
/// for the JSON mapping.
pub(super) fn decode(bytes: &[u8], format: FileFormat) -> Result<DiscoveryResponse, String> {
    let mapped = match format {
        FileFormat::Protobuf => {
            return DiscoveryResponse::decode(bytes)
                .map_err(|e| format!("not a binary DiscoveryResponse: {e}"));
        }
        FileFormat::Json => crate::json::discovery_response_from_json(bytes),
        FileFormat::Yaml => crate::json::discovery_response_from_yaml(bytes),
    };
    mapped.map_err(|e| format!("not a DiscoveryResponse: {e}"))
}

/// The contents of `response`; `Err` names the entry that fails the file.
pub(super) fn contents(
    response: DiscoveryResponse,
    digest: u64,
    types: &TypeRegistry,
    filter: &AuthorityFilter,
) -> Result<Contents, String> {
    let version: Version = if response.version_info.is_empty() {
        Version::from(format!("{digest:016x}"))
    } else {
        Version::from(response.version_info)
    };
    let mut named = Vec::with_capacity(response.resources.len());
    for (index, any) in response.resources.into_iter().enumerate() {
        let field = format!("resources[{index}]");
        let (wire, type_url, body) = entry(types, any).map_err(|e| format!("{field}: {e}"))?;
        let key = canonical_key(&wire)
            .map_err(|e| format!("{field}: {wire:?} is not a valid resource name: {e}"))?;
        named.push((wire, ResourceKey::new(type_url, key), body));
    }
    let mut counts: HashMap<ResourceKey, usize> =
        HashMap::with_capacity_and_hasher(named.len(), Default::default());
    for (_, key, _) in &named {
        *counts.entry(key.clone()).or_default() += 1;
    }
    let mut out = Contents {
        version,
        entries: BTreeMap::new(),
        foreign: 0,
    };
    for (wire, key, body) in named {
        if !filter.allows(&key.name) {
            out.foreign += 1;
            continue;
        }
        let count = counts.get(&key).copied().unwrap_or(1);
        let entry = if count > 1 {
            let rejected = Rejected::DuplicateName { name: wire, count };
            Entry::Invalid(rejected.to_validation_error())
        } else {
            match body.and_then(|d| same_name(&key.name, &wire, d)) {
                Ok(decoded) => Entry::Valid(decoded),
                Err(error) => Entry::Invalid(error),
            }
        };
        out.entries.insert(key, entry);
    }
    Ok(out)
}

/// One `Any` of the file: its name as written, its type, and the resource
/// decoded and validated (or why not). `Err` when no name or type can be
/// known.
fn entry(
    types: &TypeRegistry,
    any: Any,
) -> Result<(String, String, Result<Decoded, ValidationError>), String> {
    if any.type_url != RESOURCE_WRAPPER_TYPE_URL {
        let raw = Bytes::from(any.value);
        let body = decode_as(types, &any.type_url, raw.clone());
        let name = match &body {
            Ok(decoded) => decoded.name().map(str::to_owned),
            Err(_) => types
                .get(&any.type_url)
                .and_then(|ty| ty.name_of_invalid(&raw)),
        };
        return match name.filter(|n| !n.is_empty()) {
            Some(name) => Ok((name, any.type_url, body)),
            None => Err(match body {
                Err(e) => format!("{}: {e}", any.type_url),
                Ok(_) => "the resource carries no name: wrap it in a Resource with a name".into(),
            }),
        };
    }
    let wrapper = Resource::decode(Bytes::from(any.value))
        .map_err(|e| format!("not a valid Resource wrapper: {e}"))?;
    let Some(inner) = wrapper.resource else {
        return Err(
            "resource: unset (a TTL heartbeat has nothing to refresh in a file)".to_owned(),
        );
    };
    let body = decode_as(types, &inner.type_url, Bytes::from(inner.value));
    let mut name = if wrapper.name.is_empty() {
        wrapper.resource_name.map(|n| n.name).unwrap_or_default()
    } else {
        wrapper.name
    };
    if name.is_empty() {
        name = match &body {
            Ok(decoded) => decoded.name().unwrap_or_default().to_owned(),
            Err(e) => return Err(format!("name: unset, and the resource is invalid: {e}")),
        };
    }
    if name.is_empty() {
        return Err("name: unset, and the resource carries none".to_owned());
    }
    Ok((name, inner.type_url, body))
}

/// Decodes and validates `raw` as a resource of `type_url`.
fn decode_as(types: &TypeRegistry, type_url: &str, raw: Bytes) -> Result<Decoded, ValidationError> {
    match types.get(type_url) {
        Some(ty) => ty.decode(raw),
        None => Err(ValidationError(format!(
            "no resource type registered for {type_url:?}"
        ))),
    }
}

/// FNV-1a over `bytes`: the digest that tells identical contents apart
/// and names a version when the file gives none.
pub(super) fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
