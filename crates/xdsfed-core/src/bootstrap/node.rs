//! The `node` section: who this client is, as servers see it.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::google::protobuf::{self as pb, value::Kind};
use serde_json::{Map, Value};

use super::walk::{At, Result};

/// `node.locality`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locality {
    /// `region`.
    pub region: String,
    /// `zone`.
    pub zone: String,
    /// `sub_zone`.
    pub sub_zone: String,
}

/// The bootstrap's `node`: the identity sent in the first request of every
/// ADS stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    /// `id`: the node's identifier; empty when not given.
    pub id: String,
    /// `cluster`: the service cluster the node belongs to.
    pub cluster: String,
    /// `locality`.
    pub locality: Option<Locality>,
    /// `metadata`: an arbitrary JSON object, sent as a `google.protobuf.Struct`.
    pub metadata: Map<String, Value>,
}

/// The client's name in `Node.user_agent_name`.
pub const USER_AGENT_NAME: &str = "xdsfed";

impl Node {
    /// The `envoy.config.core.v3.Node` to send to servers, with
    /// `user_agent_name` `xdsfed` and this crate's version. Client features
    /// are left empty for the protocol layer to fill in.
    pub fn to_proto(&self) -> core::Node {
        core::Node {
            id: self.id.clone(),
            cluster: self.cluster.clone(),
            metadata: (!self.metadata.is_empty()).then(|| to_struct(&self.metadata)),
            locality: self.locality.as_ref().map(|l| core::Locality {
                region: l.region.clone(),
                zone: l.zone.clone(),
                sub_zone: l.sub_zone.clone(),
            }),
            user_agent_name: USER_AGENT_NAME.to_owned(),
            user_agent_version_type: Some(core::node::UserAgentVersionType::UserAgentVersion(
                env!("CARGO_PKG_VERSION").to_owned(),
            )),
            ..core::Node::default()
        }
    }
}

/// JSON → `google.protobuf.Struct`, the protobuf JSON mapping in reverse.
fn to_struct(map: &Map<String, Value>) -> pb::Struct {
    pb::Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
    }
}

fn to_value(value: &Value) -> pb::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(pb::NullValue::NullValue as i32),
        Value::Bool(b) => Kind::BoolValue(*b),
        // Struct numbers are doubles: large integers lose precision, as they
        // do in every protobuf JSON implementation.
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(pb::ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    pb::Value { kind: Some(kind) }
}

/// Reads `node`: `{"id", "cluster", "locality": {"region", "zone", "sub_zone"}, "metadata"}`.
pub(crate) fn parse_node(at: &At<'_>) -> Result<Node> {
    at.object()?;
    let locality = match at.get("locality")? {
        Some(loc) => {
            loc.object()?;
            Some(Locality {
                region: loc.opt_str("region")?.unwrap_or_default().to_owned(),
                zone: loc.opt_str("zone")?.unwrap_or_default().to_owned(),
                sub_zone: loc.opt_str("sub_zone")?.unwrap_or_default().to_owned(),
            })
        }
        None => None,
    };
    let metadata = match at.get("metadata")? {
        Some(m) => m.object()?.clone(),
        None => Map::new(),
    };
    Ok(Node {
        id: at.opt_str("id")?.unwrap_or_default().to_owned(),
        cluster: at.opt_str("cluster")?.unwrap_or_default().to_owned(),
        locality,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_to_proto_carries_identity_locality_and_metadata() {
        let doc = serde_json::json!({
            "id": "n1", "cluster": "c1",
            "locality": {"region": "eu", "zone": "eu-a"},
            "metadata": {"team": "pay", "n": 2, "list": [true, null], "nested": {"k": "v"}}
        });
        let node = parse_node(&At::root(&doc)).unwrap_or_default();
        let proto = node.to_proto();
        assert_eq!(proto.id, "n1");
        assert_eq!(proto.cluster, "c1");
        assert_eq!(proto.user_agent_name, "xdsfed");
        assert_eq!(
            proto.locality.as_ref().map(|l| l.zone.as_str()),
            Some("eu-a")
        );
        let fields = proto.metadata.map(|m| m.fields).unwrap_or_default();
        assert_eq!(
            fields.get("team").and_then(|v| v.kind.clone()),
            Some(Kind::StringValue("pay".into()))
        );
        assert_eq!(
            fields.get("n").and_then(|v| v.kind.clone()),
            Some(Kind::NumberValue(2.0))
        );
        assert_eq!(fields.len(), 4);
    }

    #[test]
    fn node_fields_must_have_their_types() {
        let doc = serde_json::json!({"locality": {"zone": 3}});
        let err = parse_node(&At::root(&doc)).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("locality.zone: expected a string, found a number")
        );
    }
}
