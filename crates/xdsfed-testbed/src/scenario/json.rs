//! Envoy resources written in YAML through the protobuf JSON mapping.
//!
//! The mapping reads the descriptors of every Envoy type from
//! [`xdsfed_core::json::envoy_pool`].
//!
//! A resource is an object whose `"@type"` names its type, exactly like an
//! `Any` in Envoy's YAML configuration; nested `Any`s (typed configs such as
//! the HTTP connection manager) work the same way.
//!
//! Before conversion, strings may refer to backends the scenario started:
//! `${backend.NAME.host}`, `${backend.NAME.port}` and `${backend.NAME.address}`
//! (`host:port`). A string that is exactly a port reference becomes a number.

use std::collections::HashMap;

use envoy_types::pb::google::protobuf::Any;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_norway::Value;

pub use xdsfed_core::json::envoy_pool;

/// Where backends listen, by name.
pub(crate) type BackendPorts = HashMap<String, u16>;

/// Why a YAML resource does not map to its type, and where inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MappingError {
    /// The field path inside the resource (`lb_policy`,
    /// `load_assignment.endpoints[0]`), empty for the resource as a whole.
    pub(crate) field: String,
    /// What is wrong there.
    pub(crate) message: String,
}

impl MappingError {
    fn whole(message: impl Into<String>) -> Self {
        Self {
            field: String::new(),
            message: message.into(),
        }
    }

    /// The full path of the failing field, given the resource's own path
    /// (`resources[0].resource`), and the message.
    pub(crate) fn located(self, path: &str) -> (String, String) {
        let full = match self.field.as_str() {
            "" => path.to_owned(),
            field if field.starts_with('[') => format!("{path}{field}"),
            field => format!("{path}.{field}"),
        };
        (full, self.message)
    }
}

impl From<MappingError> for String {
    fn from(e: MappingError) -> Self {
        if e.field.is_empty() {
            e.message
        } else {
            format!("{}: {}", e.field, e.message)
        }
    }
}

/// Converts a YAML resource (with `"@type"`) into an `Any`. An error names
/// the field inside the resource where the mapping failed: the deserializer
/// is wrapped in one that tracks the path as it goes, so finding it costs
/// nothing beyond the conversion itself.
pub(crate) fn to_any(
    pool: &DescriptorPool,
    value: &Value,
    backends: &BackendPorts,
) -> Result<Any, MappingError> {
    let value = substitute(value, backends).map_err(MappingError::whole)?;
    let Value::Mapping(map) = &value else {
        return Err(MappingError::whole(
            "a resource must be a mapping with an \"@type\" key",
        ));
    };
    if !map.contains_key("@type") {
        return Err(MappingError::whole(
            "the resource has no \"@type\" key naming its type",
        ));
    }
    let any_descriptor = pool
        .get_message_by_name("google.protobuf.Any")
        .ok_or_else(|| MappingError::whole("the descriptor pool lacks google.protobuf.Any"))?;
    let options = prost_reflect::DeserializeOptions::new();
    let mut track = serde_path_to_error::Track::new();
    let message = DynamicMessage::deserialize_with_options(
        any_descriptor,
        serde_path_to_error::Deserializer::new(value, &mut track),
        &options,
    )
    .map_err(|e| {
        let message = e.to_string();
        let mut field = track.path().to_string();
        // The root prints as ".".
        if field == "." {
            field.clear();
        }
        // An unknown key is refused by the message around it, before the
        // path reaches it; the message names it.
        if let Some(key) = unknown_field(&message)
            && !field.ends_with(key)
        {
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(key);
        }
        MappingError { field, message }
    })?;
    message
        .transcode_to::<Any>()
        .map_err(|e| MappingError::whole(format!("cannot encode the resource: {e}")))
}

/// The key an unknown-field message names: prost-reflect's
/// "unrecognized field name 'KEY'" or serde's "unknown field `KEY`, …".
fn unknown_field(message: &str) -> Option<&str> {
    if let Some(rest) = message.strip_prefix("unrecognized field name '") {
        return rest.split_once('\'').map(|(key, _)| key);
    }
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(key, _)| key)
}

/// Replaces backend references in every string of `value`.
fn substitute(value: &Value, backends: &BackendPorts) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => substitute_str(s, backends)?,
        Value::Sequence(items) => Value::Sequence(
            items
                .iter()
                .map(|v| substitute(v, backends))
                .collect::<Result<_, _>>()?,
        ),
        Value::Mapping(map) => {
            let mut out = serde_norway::Mapping::with_capacity(map.len());
            for (k, v) in map {
                out.insert(k.clone(), substitute(v, backends)?);
            }
            Value::Mapping(out)
        }
        Value::Tagged(tagged) => substitute(&tagged.value, backends)?,
        other => other.clone(),
    })
}

fn substitute_str(s: &str, backends: &BackendPorts) -> Result<Value, String> {
    if !s.contains("${") {
        return Ok(Value::String(s.to_owned()));
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut whole_port = None;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated reference in {s:?}"))?;
        let reference = &after[..end];
        let (name, field) = reference
            .strip_prefix("backend.")
            .and_then(|r| r.rsplit_once('.'))
            .ok_or_else(|| {
                format!(
                    "unknown reference ${{{reference}}} (write ${{backend.NAME.port|host|address}})"
                )
            })?;
        let port = *backends
            .get(name)
            .ok_or_else(|| format!("${{{reference}}} names no backend of the scenario"))?;
        match field {
            "port" => {
                if start == 0 && end + 3 == rest.len() && out.is_empty() {
                    whole_port = Some(port);
                }
                out.push_str(&port.to_string());
            }
            "host" => out.push_str("127.0.0.1"),
            "address" => out.push_str(&format!("127.0.0.1:{port}")),
            other => {
                return Err(format!(
                    "unknown backend field {other:?} in ${{{reference}}}"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(match whole_port {
        Some(port) if rest.is_empty() => Value::Number(port.into()),
        _ => Value::String(out),
    })
}

/// The backend names referenced by strings in `value`.
pub(crate) fn backend_references(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${backend.") {
                let after = &rest[start + "${backend.".len()..];
                let Some(end) = after.find('}') else { break };
                if let Some((name, _)) = after[..end].rsplit_once('.') {
                    found.push(name.to_owned());
                }
                rest = &after[end..];
            }
        }
        Value::Sequence(items) => items.iter().for_each(|v| backend_references(v, found)),
        Value::Mapping(map) => map.values().for_each(|v| backend_references(v, found)),
        Value::Tagged(tagged) => backend_references(&tagged.value, found),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;

    fn yaml(text: &str) -> Value {
        serde_norway::from_str(text).unwrap()
    }

    #[test]
    fn to_any_maps_json_names_to_cluster_fields() {
        let pool = envoy_pool().unwrap();
        let any = to_any(
            &pool,
            &yaml(
                r#"
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: payments
type: EDS
connect_timeout: 1.5s
eds_cluster_config: {service_name: payments-eds}
"#,
            ),
            &BackendPorts::new(),
        )
        .unwrap();
        assert_eq!(
            any.type_url,
            "type.googleapis.com/envoy.config.cluster.v3.Cluster"
        );
        let cluster = Cluster::decode(any.value.as_slice()).unwrap();
        assert_eq!(cluster.name, "payments");
        assert_eq!(cluster.connect_timeout.unwrap().nanos, 500_000_000);
    }

    #[test]
    fn to_any_rejects_unknown_field_with_its_name() {
        let pool = envoy_pool().unwrap();
        let err = to_any(
            &pool,
            &yaml("{\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, nmae: x}"),
            &BackendPorts::new(),
        )
        .unwrap_err();
        assert_eq!(err.field, "nmae", "{err:?}");
        assert!(err.message.contains("nmae"), "{err:?}");
    }

    #[test]
    fn to_any_names_the_failing_field_inside_the_resource() {
        let pool = envoy_pool().unwrap();
        let err = to_any(
            &pool,
            &yaml(
                "{\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, \
                 load_assignment: {endpoints: [{lb_endpoints: [{endpoint: \
                 {address: {socket_address: {port_value: x}}}}]}]}}",
            ),
            &BackendPorts::new(),
        )
        .unwrap_err();
        assert_eq!(
            err.clone().located("resources[0].resource").0,
            "resources[0].resource.load_assignment.endpoints[0].lb_endpoints[0]\
             .endpoint.address.socket_address.port_value"
        );
        let whole = MappingError::whole("no @type");
        assert_eq!(
            whole.located("resources[1].resource"),
            ("resources[1].resource".to_owned(), "no @type".to_owned())
        );
    }

    #[test]
    fn whole_port_reference_becomes_number() {
        let ports = BackendPorts::from([("greeter".to_owned(), 4242)]);
        assert_eq!(
            substitute_str("${backend.greeter.port}", &ports).unwrap(),
            Value::Number(4242.into())
        );
        assert_eq!(
            substitute_str("dns:///${backend.greeter.address}", &ports).unwrap(),
            Value::String("dns:///127.0.0.1:4242".into())
        );
        assert!(substitute_str("${backend.nope.port}", &ports).is_err());
    }
}
