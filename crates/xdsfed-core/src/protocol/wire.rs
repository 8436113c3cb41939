//! A delta response as it arrives, its text read where it lies: see
//! [`WireDeltaResponse`].
//!
//! Rule: a response with a text field that is not UTF-8 is refused whole,
//! naming the field, its entry and the resource, as prost refuses such a
//! `string` ([`WireDeltaResponse::check_text`];
//! test `text_that_is_not_utf8_is_refused_naming_its_field`).

use bytes::Bytes;
use envoy_types::pb::google::protobuf::Duration;

/// `envoy.service.discovery.v3.DeltaDiscoveryResponse`, its text in place.
///
/// prost decodes each `string` field of a `DeltaDiscoveryResponse` into a
/// `String` of its own. A response carrying one endpoint's change cost four
/// allocations before the session read a byte of it (the response's
/// `system_version_info`, the resource's name and version, the `Any`'s
/// type URL): half of the client's allocations per LEDS update
/// (docs/performance.md, "Allocations per update"). This message reads the
/// same bytes (the same field numbers; `string` and `bytes` are one wire
/// type), each text field a slice of the received message, so the session
/// ([`Session::handle_delta_wire`](super::Session::handle_delta_wire))
/// reads names, versions and type URLs in place and copies only what it
/// keeps: a version, once per response whose resources share it, and a
/// resource's bytes, so that a held resource does not keep the whole
/// message alive.
///
/// Fields the client does not read are not declared, so decoding skips
/// them: `system_version_info` ("used for debugging") and `control_plane`
/// (not implemented), a resource's `aliases`, `cache_control` and `metadata`,
/// a name's `dynamic_parameter_constraints`, a status's `details`. Text
/// that is not UTF-8 is refused by [`WireDeltaResponse::check_text`], which
/// a reader calls before handing the response on.
///
/// ```
/// use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
/// use prost::Message;
/// use xdsfed_core::protocol::WireDeltaResponse;
///
/// let sent = DeltaDiscoveryResponse {
///     type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
///     nonce: "7".into(),
///     resources: vec![Resource { name: "c1".into(), version: "v1".into(), ..Default::default() }],
///     ..Default::default()
/// };
/// let bytes = bytes::Bytes::from(sent.encode_to_vec());
/// let read = WireDeltaResponse::decode(bytes).unwrap();
/// read.check_text().unwrap();
/// assert_eq!(&read.resources[0].name[..], b"c1");
/// ```
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireDeltaResponse {
    /// `resources`.
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<WireResource>,
    /// `type_url`.
    #[prost(bytes = "bytes", tag = "4")]
    pub type_url: Bytes,
    /// `removed_resources`.
    #[prost(bytes = "bytes", repeated, tag = "6")]
    pub removed_resources: Vec<Bytes>,
    /// `removed_resource_names`.
    #[prost(message, repeated, tag = "8")]
    pub removed_resource_names: Vec<WireResourceName>,
    /// `nonce`.
    #[prost(bytes = "bytes", tag = "5")]
    pub nonce: Bytes,
    /// `resource_errors`.
    #[prost(message, repeated, tag = "9")]
    pub resource_errors: Vec<WireResourceError>,
}

/// `envoy.service.discovery.v3.Resource`, its text in place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireResource {
    /// `name`.
    #[prost(bytes = "bytes", tag = "3")]
    pub name: Bytes,
    /// `resource_name`.
    #[prost(message, optional, tag = "8")]
    pub resource_name: Option<WireResourceName>,
    /// `version`.
    #[prost(bytes = "bytes", tag = "1")]
    pub version: Bytes,
    /// `resource`.
    #[prost(message, optional, tag = "2")]
    pub resource: Option<WireAny>,
    /// `ttl`.
    #[prost(message, optional, tag = "6")]
    pub ttl: Option<Duration>,
}

/// `google.protobuf.Any`, its type URL and bytes in place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireAny {
    /// `type_url`.
    #[prost(bytes = "bytes", tag = "1")]
    pub type_url: Bytes,
    /// `value`: a slice of the message; the session copies what it keeps,
    /// so that a resource held does not hold the whole message.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `envoy.service.discovery.v3.ResourceName`, its name in place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireResourceName {
    /// `name`.
    #[prost(bytes = "bytes", tag = "1")]
    pub name: Bytes,
}

/// `envoy.service.discovery.v3.ResourceError`, its text in place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireResourceError {
    /// `resource_name`.
    #[prost(message, optional, tag = "1")]
    pub resource_name: Option<WireResourceName>,
    /// `error_detail`.
    #[prost(message, optional, tag = "2")]
    pub error_detail: Option<WireStatus>,
}

/// `google.rpc.Status`, its message in place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireStatus {
    /// `code`.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// `message`.
    #[prost(bytes = "bytes", tag = "2")]
    pub message: Bytes,
}

/// A text field of a response that is not UTF-8, with the entry of a
/// repeated field it is in and, for a resource, its name when that is
/// text (quoted with escapes: it comes from the server).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid string value in field {field}{}: data is not UTF-8 encoded", where_of(*.entry, .name.as_deref()))]
pub struct NotText {
    /// The field, as `DeltaDiscoveryResponse.<path>`.
    pub field: &'static str,
    /// Which entry of the repeated field (`resources`,
    /// `removed_resources`, …) holds it, counted from 0.
    pub entry: Option<usize>,
    /// The name of the resource it belongs to, when that name is text.
    pub name: Option<String>,
}

fn where_of(entry: Option<usize>, name: Option<&str>) -> String {
    match (entry, name) {
        (Some(entry), Some(name)) => format!(" (entry {entry}, {name:?})"),
        (Some(entry), None) => format!(" (entry {entry})"),
        (None, _) => String::new(),
    }
}

impl WireDeltaResponse {
    /// Checks that every text field is UTF-8, as decoding them into
    /// `String`s would have; the session then reads them as text.
    pub fn check_text(&self) -> Result<(), NotText> {
        text("type_url", &self.type_url).map_err(|e| e.at(None))?;
        text("nonce", &self.nonce).map_err(|e| e.at(None))?;
        for (at, removed) in self.removed_resources.iter().enumerate() {
            text("removed_resources", removed).map_err(|e| e.at(Some(at)))?;
        }
        for (at, name) in self.removed_resource_names.iter().enumerate() {
            text("removed_resource_names.name", &name.name).map_err(|e| e.at(Some(at)))?;
        }
        for (at, error) in self.resource_errors.iter().enumerate() {
            let name = error.resource_name.as_ref().map(|n| &n.name[..]);
            let in_error =
                |field, bytes: &[u8]| text(field, bytes).map_err(|e| e.at(Some(at)).named(name));
            if let Some(name) = name {
                in_error("resource_errors.resource_name.name", name)?;
            }
            if let Some(status) = &error.error_detail {
                in_error("resource_errors.error_detail.message", &status.message)?;
            }
        }
        for (at, resource) in self.resources.iter().enumerate() {
            resource
                .check_text(&self.type_url)
                .map_err(|e| e.at(Some(at)).named(Some(resource.name_bytes())))?;
        }
        Ok(())
    }
}

impl WireResource {
    /// `response_type_url` is the response's, checked already: a resource's
    /// own type URL is nearly always the same bytes, which then need no
    /// second check.
    fn check_text(&self, response_type_url: &[u8]) -> Result<(), Unchecked> {
        text("resources.name", &self.name)?;
        text("resources.version", &self.version)?;
        if let Some(name) = &self.resource_name {
            text("resources.resource_name.name", &name.name)?;
        }
        if let Some(any) = &self.resource
            && any.type_url != response_type_url
        {
            text("resources.resource.type_url", &any.type_url)?;
        }
        Ok(())
    }

    /// The name it is sent under: `name`, or `resource_name` without one.
    fn name_bytes(&self) -> &[u8] {
        match &self.resource_name {
            Some(n) if self.name.is_empty() => &n.name,
            _ => &self.name,
        }
    }
}

/// A field found not to be text, before it is placed in the response.
struct Unchecked(&'static str);

impl Unchecked {
    fn at(self, entry: Option<usize>) -> NotText {
        NotText {
            field: self.0,
            entry,
            name: None,
        }
    }
}

impl NotText {
    /// Names the resource (when its name is text).
    fn named(mut self, name: Option<&[u8]>) -> Self {
        self.name = name
            .and_then(|n| std::str::from_utf8(n).ok())
            .map(str::to_owned);
        self
    }
}

fn text(field: &'static str, bytes: &[u8]) -> Result<(), Unchecked> {
    match std::str::from_utf8(bytes) {
        Ok(_) => Ok(()),
        Err(_) => Err(Unchecked(field)),
    }
}

/// `bytes` read as text: a field [`WireDeltaResponse::check_text`] passed
/// is; one it did not pass reads as empty.
pub(crate) fn as_text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use envoy_types::pb::envoy::config::core::v3::ControlPlane;
    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryResponse, Resource, ResourceError, ResourceName,
    };
    use envoy_types::pb::google::protobuf::Any;
    use envoy_types::pb::google::rpc::Status;
    use prost::Message;

    fn sent() -> DeltaDiscoveryResponse {
        DeltaDiscoveryResponse {
            system_version_info: "debug only".into(),
            type_url: "type.googleapis.com/T".into(),
            nonce: "n1".into(),
            control_plane: Some(ControlPlane {
                identifier: "cp".into(),
            }),
            resources: vec![Resource {
                name: "xdstp://a/T/r1".into(),
                version: "v1".into(),
                aliases: vec!["alias".into()],
                resource: Some(Any {
                    type_url: "type.googleapis.com/T".into(),
                    value: vec![1, 2, 3],
                }),
                ttl: Some(Duration {
                    seconds: 5,
                    nanos: 0,
                }),
                ..Default::default()
            }],
            removed_resources: vec!["gone".into()],
            removed_resource_names: vec![ResourceName {
                name: "gone too".into(),
                ..Default::default()
            }],
            resource_errors: vec![ResourceError {
                resource_name: Some(ResourceName {
                    name: "broken".into(),
                    ..Default::default()
                }),
                error_detail: Some(Status {
                    code: 5,
                    message: "not found".into(),
                    details: vec![],
                }),
            }],
        }
    }

    /// Every field the client reads comes through, and each text field is
    /// a slice of the received message, not a copy.
    #[test]
    fn it_reads_envoys_message_in_place() {
        let bytes = Bytes::from(sent().encode_to_vec());
        let within = bytes.as_ptr_range();
        let read = WireDeltaResponse::decode(bytes.clone()).unwrap();
        read.check_text().unwrap();
        let resource = &read.resources[0];
        assert_eq!(&resource.name[..], b"xdstp://a/T/r1");
        assert_eq!(&resource.version[..], b"v1");
        let any = resource.resource.as_ref().unwrap();
        assert_eq!(&any.type_url[..], b"type.googleapis.com/T");
        assert_eq!(&any.value[..], [1, 2, 3]);
        assert_eq!(resource.ttl.as_ref().unwrap().seconds, 5);
        assert_eq!(&read.type_url[..], b"type.googleapis.com/T");
        assert_eq!(&read.nonce[..], b"n1");
        assert_eq!(read.removed_resources, [Bytes::from_static(b"gone")]);
        assert_eq!(&read.removed_resource_names[0].name[..], b"gone too");
        let error = &read.resource_errors[0];
        assert_eq!(&error.resource_name.as_ref().unwrap().name[..], b"broken");
        let status = error.error_detail.as_ref().unwrap();
        assert_eq!((status.code, &status.message[..]), (5, &b"not found"[..]));
        for field in [
            &resource.name,
            &resource.version,
            &any.type_url,
            &read.nonce,
        ] {
            assert!(within.contains(&field.as_ptr()), "{field:?} was copied");
        }
    }

    fn not_utf8() -> Bytes {
        Bytes::from_static(&[0xff, 0xfe])
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_naming_its_field() {
        let bad = |edit: fn(&mut WireDeltaResponse)| {
            let mut read = WireDeltaResponse::decode(Bytes::from(sent().encode_to_vec())).unwrap();
            edit(&mut read);
            read.check_text().unwrap_err().field
        };
        assert_eq!(bad(|r| r.nonce = not_utf8()), "nonce");
        assert_eq!(bad(|r| r.resources[0].name = not_utf8()), "resources.name");
        assert_eq!(
            bad(|r| r.resources[0].version = not_utf8()),
            "resources.version"
        );
        assert_eq!(
            bad(|r| r.resources[0].resource.as_mut().unwrap().type_url = not_utf8()),
            "resources.resource.type_url"
        );
        assert_eq!(
            bad(|r| r.removed_resources[0] = not_utf8()),
            "removed_resources"
        );
        assert_eq!(
            bad(|r| r.resource_errors[0].error_detail.as_mut().unwrap().message = not_utf8()),
            "resource_errors.error_detail.message"
        );
        // The entry is named, and the resource by its name when that is text.
        let mut read = WireDeltaResponse::decode(Bytes::from(sent().encode_to_vec())).unwrap();
        read.resources[0].version = not_utf8();
        let error = read.check_text().unwrap_err();
        assert_eq!(
            (error.entry, error.name.as_deref()),
            (Some(0), Some("xdstp://a/T/r1"))
        );
        assert!(
            error.to_string().contains(r#"(entry 0, "xdstp://a/T/r1")"#),
            "{error}"
        );
        // Bytes that are no text are fine where they are no text.
        let mut read = WireDeltaResponse::decode(Bytes::from(sent().encode_to_vec())).unwrap();
        read.resources[0].resource.as_mut().unwrap().value = not_utf8();
        assert!(read.check_text().is_ok());
    }
}
