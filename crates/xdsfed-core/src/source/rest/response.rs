//! What a REST-JSON poll's `200 OK` body says: a `DiscoveryResponse` of
//! the polled type, some of whose resources may not map, or a body that is
//! rejected as a whole. Sans-IO: bytes in, a [`Read`] out.
//!
//! Envoy's REST subscription (`http_subscription_impl.cc`) is the bar:
//!
//! - the type is the one polled: a response without `type_url` (sovereign
//!   sends none, and Envoy never reads it) is of the polled type; one that
//!   names another type is rejected, naming both;
//! - a body that does not map, as a whole or in one resource, is a
//!   rejected update (Envoy's `UpdateRejected`), not a failure of the
//!   server: the session NACKs it and the poll goes on.
//!
//! A body maps as a whole in one pass. Only when that fails is it read
//! again in parts, so that the resources that map are kept and each one
//! that does not is named: its envelope (every field but `resources`) and
//! each resource apart, each through the same mapping
//! ([`discovery_response_from_json`]), the parts borrowed from the body
//! (no copy of the whole).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use envoy_types::pb::google::protobuf::Any;
use serde_json::value::RawValue;

use crate::json::{DECODING_BUDGET, MappingError, discovery_response_from_json};
use crate::protocol::{RESOURCE_WRAPPER_TYPE_URL, UndecodedResource};
use crate::text_limits::check_json_budget;
use crate::types::ValidationError;

/// The type URL of the one type whose resources are named by another field
/// than `name`.
const ENDPOINTS_TYPE_URL: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// What a body says.
#[derive(Debug)]
pub enum Read {
    /// A `DiscoveryResponse` of the polled type (its `type_url` set), with
    /// the resources that mapped; those that did not are in `undecoded`,
    /// each at its position in the body.
    Response {
        /// The response, with the resources that mapped.
        response: DiscoveryResponse,
        /// The resources that did not map.
        undecoded: Vec<UndecodedResource>,
    },
    /// The body is rejected as a whole.
    Rejected(RejectedBody),
}

/// A body rejected as a whole, with what could be read of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedBody {
    /// The response's nonce, if it could be read (else empty).
    pub nonce: String,
    /// The response's version, if it could be read (else empty).
    pub version: String,
    /// Why, for the NACK and the watchers.
    pub error: ValidationError,
}

/// Reads the body of an answer to a poll of `polled`. A body over the
/// decoding budget is rejected whole: reading it in parts would let each
/// part spend the budget again.
pub fn read(polled: &str, body: &[u8]) -> Read {
    if let Err(over) = check_json_budget(body, DECODING_BUDGET) {
        return Read::Rejected(RejectedBody {
            nonce: String::new(),
            version: String::new(),
            error: ValidationError(format!("the body is refused before parsing: {over}")),
        });
    }
    match discovery_response_from_json(body) {
        Ok(response) => of_polled_type(polled, response, Vec::new()),
        Err(whole) => read_in_parts(polled, body, &whole),
    }
}

/// `response` with the polled type filled in, or rejected when it names
/// another.
fn of_polled_type(
    polled: &str,
    mut response: DiscoveryResponse,
    undecoded: Vec<UndecodedResource>,
) -> Read {
    if response.type_url.is_empty() {
        polled.clone_into(&mut response.type_url);
    } else if response.type_url != polled {
        let error = ValidationError(format!(
            "a poll of {polled} was answered with a response of type {}",
            response.type_url
        ));
        return Read::Rejected(RejectedBody {
            nonce: response.nonce,
            version: response.version_info,
            error,
        });
    }
    Read::Response {
        response,
        undecoded,
    }
}

/// The body did not map as a whole: its envelope and each resource apart.
fn read_in_parts(polled: &str, body: &[u8], whole: &MappingError) -> Read {
    let not_a_response = |fields: Option<&BTreeMap<String, &RawValue>>| {
        let field = |names: &[&str]| fields.map(|f| string_field(f, names)).unwrap_or_default();
        Read::Rejected(RejectedBody {
            nonce: field(&["nonce"]),
            version: field(&["version_info", "versionInfo"]),
            error: ValidationError(format!("the body is not a DiscoveryResponse: {whole}")),
        })
    };
    let Ok(mut fields) = serde_json::from_slice::<BTreeMap<String, &RawValue>>(body) else {
        return not_a_response(None);
    };
    let resources = fields.remove("resources");
    let envelope = serde_json::to_vec(&fields).ok();
    let response = envelope.and_then(|e| discovery_response_from_json(&e).ok());
    let resources: Option<Vec<&RawValue>> = match resources {
        None => Some(Vec::new()),
        Some(raw) => serde_json::from_str(raw.get()).ok(),
    };
    let (Some(mut response), Some(resources)) = (response, resources) else {
        return not_a_response(Some(&fields));
    };
    let mut undecoded = Vec::new();
    for (index, raw) in resources.into_iter().enumerate() {
        match one_resource(raw) {
            Ok(any) => response.resources.push(any),
            Err(error) => undecoded.push(UndecodedResource {
                index,
                name: name_of(polled, raw),
                error,
            }),
        }
    }
    of_polled_type(polled, response, undecoded)
}

/// One resource of a response, through the mapping of a whole response
/// (the one bounded parser), its error worded for the resource.
fn one_resource(raw: &RawValue) -> Result<Any, ValidationError> {
    let alone = format!("{{\"resources\":[{}]}}", raw.get());
    match discovery_response_from_json(alone.as_bytes()) {
        Ok(mut response) if response.resources.len() == 1 => Ok(response.resources.swap_remove(0)),
        Ok(_) => Err(ValidationError("not one resource".to_owned())),
        Err(e) => {
            let field = e.field.strip_prefix("resources[0]").unwrap_or(&e.field);
            let field = field.trim_start_matches('.');
            Err(if field.is_empty() {
                ValidationError(e.message)
            } else {
                ValidationError::field(field, e.message)
            })
        }
    }
}

/// The name a resource of type `polled` gives itself in its JSON, if it
/// gives one: `name` (or a `Resource` wrapper's `name`), and
/// `cluster_name` for endpoints.
fn name_of(polled: &str, raw: &RawValue) -> Option<String> {
    let fields: BTreeMap<String, &RawValue> = serde_json::from_str(raw.get()).ok()?;
    let wrapped = string_field(&fields, &["@type"]) == RESOURCE_WRAPPER_TYPE_URL;
    let names: &[&str] = if polled == ENDPOINTS_TYPE_URL && !wrapped {
        &["cluster_name", "clusterName"]
    } else {
        &["name"]
    };
    Some(string_field(&fields, names)).filter(|n| !n.is_empty())
}

/// The first of `names` that `fields` holds as a JSON string, or empty.
fn string_field(fields: &BTreeMap<String, &RawValue>, names: &[&str]) -> String {
    names
        .iter()
        .filter_map(|n| fields.get(*n))
        .find_map(|raw| serde_json::from_str::<String>(raw.get()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

    fn cluster(name: &str, extra: &str) -> String {
        format!(r#"{{"@type": "{CDS}", "name": "{name}", "type": "EDS"{extra}}}"#)
    }

    fn response(body: &str) -> (DiscoveryResponse, Vec<UndecodedResource>) {
        match read(CDS, body.as_bytes()) {
            Read::Response {
                response,
                undecoded,
            } => (response, undecoded),
            Read::Rejected(r) => panic!("rejected: {r:?}"),
        }
    }

    fn rejected(polled: &str, body: &str) -> RejectedBody {
        match read(polled, body.as_bytes()) {
            Read::Rejected(r) => r,
            Read::Response { response, .. } => panic!("accepted: {response:?}"),
        }
    }

    /// A body over the decoding budget in all, each of whose resources is
    /// within it, is rejected whole: reading it in parts would spend the
    /// budget once per resource.
    #[test]
    fn a_body_over_the_decoding_budget_is_rejected_whole_not_read_in_parts() {
        let per_resource = DECODING_BUDGET.values_per_element - 16;
        let count = DECODING_BUDGET.values / per_resource + 1;
        let values = vec!["0"; per_resource].join(",");
        let extra = format!(r#", "metadata": {{"filter_metadata": {{"x": {{"l": [{values}]}}}}}}"#);
        let resources: Vec<String> = (0..count)
            .map(|i| cluster(&format!("c{i}"), &extra))
            .collect();
        let body = format!(
            r#"{{"version_info": "1", "resources": [{}]}}"#,
            resources.join(",")
        );
        let refused = rejected(CDS, &body);
        assert!(
            refused.error.0.contains("refused before parsing"),
            "{}",
            refused.error
        );
    }

    #[test]
    fn a_response_without_type_url_is_of_the_polled_type() {
        let (r, undecoded) = response(&format!(
            r#"{{"version_info": "1", "resources": [{}]}}"#,
            cluster("a", "")
        ));
        assert_eq!((r.type_url.as_str(), r.resources.len()), (CDS, 1));
        assert!(undecoded.is_empty());
    }

    #[test]
    fn a_response_of_another_type_is_rejected_naming_both() {
        let r = rejected(
            LDS,
            &format!(r#"{{"version_info": "1", "nonce": "n", "type_url": "{CDS}"}}"#),
        );
        assert_eq!((r.nonce.as_str(), r.version.as_str()), ("n", "1"));
        assert!(
            r.error.0.contains(CDS) && r.error.0.contains(LDS),
            "{}",
            r.error
        );
    }

    #[test]
    fn a_resource_that_does_not_map_is_named_and_the_others_kept() {
        let body = format!(
            r#"{{"version_info": "2", "nonce": "n2", "resources": [{}, {}, {}]}}"#,
            cluster("a", ""),
            cluster("b", r#", "connect_timeout": "forever""#),
            r#"{"@type": "type.googleapis.com/no.Such"}"#,
        );
        let (r, undecoded) = response(&body);
        assert_eq!((r.version_info.as_str(), r.nonce.as_str()), ("2", "n2"));
        assert_eq!(r.resources.len(), 1);
        let [b, unnamed] = &undecoded[..] else {
            panic!("{undecoded:?}")
        };
        assert_eq!((b.index, b.name.as_deref()), (1, Some("b")));
        assert!(
            b.error.to_string().starts_with("connect_timeout: "),
            "{}",
            b.error
        );
        assert_eq!((unnamed.index, unnamed.name.as_deref()), (2, None));
    }

    #[test]
    fn endpoints_are_named_by_cluster_name() {
        let eds = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
        let body = format!(
            r#"{{"resources": [{{"@type": "{eds}", "cluster_name": "e", "endpoints": 7}}]}}"#
        );
        let Read::Response { undecoded, .. } = read(eds, body.as_bytes()) else {
            panic!("rejected")
        };
        assert_eq!(undecoded[0].name.as_deref(), Some("e"));
    }

    #[test]
    fn a_body_that_is_no_response_is_rejected_with_what_can_be_read() {
        assert_eq!(rejected(CDS, "{\"resources\": [").nonce, "");
        let r = rejected(CDS, r#"{"nonce": "n", "versionInfo": "3", "resources": 5}"#);
        assert_eq!((r.nonce.as_str(), r.version.as_str()), ("n", "3"));
        assert!(r.error.0.contains("not a DiscoveryResponse"), "{}", r.error);
        let r = rejected(CDS, r#"{"nonce": "n", "version_info": 3}"#);
        assert_eq!(r.nonce, "n");
    }
}
