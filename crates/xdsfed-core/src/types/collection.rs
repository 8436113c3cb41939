//! List collections (xDS TP1 §List collections): a `<T>Collection` resource
//! whose body is a list of `xds.core.v3.CollectionEntry`, each a locator of
//! a resource fetched on its own, or a resource inlined.

use crate::hash::HashSet;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use envoy_types::pb::xds::core::v3::collection_entry::ResourceSpecifier;

use super::{Decoded, ErasedType, ValidationError, decode_message};
use crate::protocol::locator_key;
use crate::version::Version;

/// The type URL of Envoy's listener list collection.
pub const LISTENER_COLLECTION_TYPE_URL: &str =
    "type.googleapis.com/envoy.config.listener.v3.ListenerCollection";
/// The type URL of Envoy's cluster list collection.
pub const CLUSTER_COLLECTION_TYPE_URL: &str =
    "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";
/// The type URL of Envoy's LEDS list collection (gRFC A95): a locality's
/// endpoints, each an inline `LbEndpoint`.
pub const LB_ENDPOINT_COLLECTION_TYPE_URL: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.LbEndpointCollection";

/// A decoded list collection: its entries in the order the server sent them.
#[derive(Debug, Clone)]
pub struct ListCollection {
    /// The entries.
    pub entries: Vec<ListEntry>,
}

/// One entry of a [`ListCollection`].
#[derive(Debug, Clone)]
pub enum ListEntry {
    /// A resource fetched on its own: its canonical key.
    Locator(Arc<str>),
    /// A resource carried in the collection.
    Inline {
        /// Its name, which `#entry=` refers to; `None` for an anonymous entry.
        name: Option<Arc<str>>,
        /// Its version.
        version: Version,
        /// The validated resource (of the collection's member type).
        resource: Decoded,
    },
}

/// The erased type of a list collection of `member`s.
pub(crate) struct ListCollectionType {
    pub(crate) type_url: &'static str,
    pub(crate) member: Arc<dyn ErasedType>,
    /// Whether every entry must be inline, a locator being rejected
    /// (gRFC A95 for `LbEndpointCollection`).
    pub(crate) inline_only: bool,
}

impl fmt::Debug for ListCollectionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_url)
    }
}

/// The short name of a type URL (`envoy.config.cluster.v3.Cluster`).
fn short(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

impl ErasedType for ListCollectionType {
    fn type_url(&self) -> &'static str {
        self.type_url
    }

    fn sotw_full_state(&self) -> bool {
        false
    }

    fn decode(&self, raw: Bytes) -> Result<Decoded, ValidationError> {
        // Every `<T>Collection` has the same wire shape (TP1): field 1,
        // repeated CollectionEntry. Envoy's listener collection decodes any.
        let message: envoy_types::pb::envoy::config::listener::v3::ListenerCollection =
            decode_message(&raw, short(self.type_url))?;
        let member_url = self.member.type_url();
        let mut names = HashSet::default();
        let mut entries = Vec::with_capacity(message.entries.len());
        for (i, entry) in message.entries.into_iter().enumerate() {
            let field = |f: &str| format!("entries[{i}]{f}");
            match entry.resource_specifier {
                Some(ResourceSpecifier::Locator(_)) if self.inline_only => {
                    return Err(ValidationError::field(
                        field(""),
                        "must be an inline_entry, not a locator",
                    ));
                }
                Some(ResourceSpecifier::Locator(locator)) => {
                    let key = locator_key(locator)
                        .map_err(|e| ValidationError::field(field(".locator"), e))?;
                    crate::name::ResourceName::parse(&key)
                        .and_then(|n| n.check_type(member_url))
                        .map_err(|e| ValidationError::field(field(".locator"), e))?;
                    entries.push(ListEntry::Locator(key));
                }
                Some(ResourceSpecifier::InlineEntry(inline)) => {
                    let name = if inline.name.is_empty() {
                        None
                    } else {
                        if !is_entry_name(&inline.name) {
                            return Err(ValidationError::field(
                                field(".inline_entry.name"),
                                format_args!("{:?} must match [0-9a-zA-Z_-.~:]+", inline.name),
                            ));
                        }
                        if !names.insert(inline.name.clone()) {
                            return Err(ValidationError::field(
                                field(".inline_entry.name"),
                                format_args!("{:?} is not unique in the collection", inline.name),
                            ));
                        }
                        Some(Arc::from(inline.name))
                    };
                    let Some(any) = inline.resource else {
                        return Err(ValidationError::field(
                            field(".inline_entry.resource"),
                            "missing",
                        ));
                    };
                    if any.type_url != member_url {
                        return Err(ValidationError::field(
                            field(".inline_entry.resource"),
                            format_args!("expected {member_url}, got {:?}", any.type_url),
                        ));
                    }
                    let resource = self
                        .member
                        .decode(Bytes::from(any.value))
                        .map_err(|e| ValidationError::field(field(".inline_entry.resource"), e))?;
                    entries.push(ListEntry::Inline {
                        name,
                        version: Version::from(inline.version),
                        resource,
                    });
                }
                None => {
                    return Err(ValidationError::field(
                        field(""),
                        "neither a locator nor an inline entry",
                    ));
                }
            }
        }
        Ok(Decoded::beside(Arc::new(ListCollection { entries }), raw))
    }

    fn name_of_invalid(&self, _raw: &[u8]) -> Option<String> {
        None
    }
}

/// Whether `name` may name an inline entry (TP1:
/// `^[0-9a-zA-Z_\-\.~:]+$`).
fn is_entry_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'~' | b':'))
}

/// The cache key of the inline entry `entry` of the list collection `key`:
/// the collection's key with an `#entry=` directive, as TP1 addresses it.
pub fn entry_key(collection: &str, entry: &str) -> String {
    format!("{collection}#entry={entry}")
}

/// The cache key of the anonymous inline entry at `index` of the list
/// collection `collection`. Not a name anyone can watch (TP1: anonymous
/// entries cannot be referenced outside the collection); it only tells a
/// collection watcher's members apart.
pub(crate) fn anonymous_key(collection: &str, index: usize) -> String {
    format!("{collection}#anonymous={index}")
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::listener::v3::ListenerCollection;
    use envoy_types::pb::google::protobuf::Any;
    use envoy_types::pb::xds::core::v3::collection_entry::InlineEntry;
    use envoy_types::pb::xds::core::v3::{CollectionEntry, ResourceLocator, resource_locator};
    use prost::Message;

    use super::*;
    use crate::types::{ClusterType, Erased, ListenerType, ResourceType};

    fn listeners() -> ListCollectionType {
        ListCollectionType {
            type_url: LISTENER_COLLECTION_TYPE_URL,
            member: Arc::new(Erased::<ListenerType>::new()),
            inline_only: false,
        }
    }

    fn locator(resource_type: &str, id: &str) -> CollectionEntry {
        CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::Locator(ResourceLocator {
                scheme: resource_locator::Scheme::Xdstp as i32,
                authority: "a".into(),
                resource_type: resource_type.into(),
                id: id.into(),
                ..Default::default()
            })),
        }
    }

    fn inline(name: &str, any: Any) -> CollectionEntry {
        CollectionEntry {
            resource_specifier: Some(ResourceSpecifier::InlineEntry(InlineEntry {
                name: name.into(),
                version: "1".into(),
                resource: Some(any),
            })),
        }
    }

    fn listener(name: &str) -> Any {
        crate::types::tests_support::pack(&crate::types::tests_support::api_listener_rds(
            name, "routes",
        ))
    }

    fn decode(entries: Vec<CollectionEntry>) -> Result<Arc<ListCollection>, ValidationError> {
        let raw = Bytes::from(ListenerCollection { entries }.encode_to_vec());
        let decoded = listeners().decode(raw)?;
        decoded
            .downcast::<ListCollection>()
            .ok_or_else(|| ValidationError("not a list collection".into()))
    }

    /// TP1: entries are locators (canonical keys) or inline resources,
    /// named or anonymous, in the order sent.
    #[test]
    fn list_collection_entries_decode_in_order() {
        let c = decode(vec![
            locator("envoy.config.listener.v3.Listener", "bar"),
            inline("baz", listener("baz")),
            inline("", listener("anon")),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let shapes: Vec<String> = c
            .entries
            .iter()
            .map(|e| match e {
                ListEntry::Locator(k) => format!("locator {k}"),
                ListEntry::Inline { name, .. } => format!("inline {name:?}"),
            })
            .collect();
        assert_eq!(
            shapes,
            [
                "locator xdstp://a/envoy.config.listener.v3.Listener/bar",
                "inline Some(\"baz\")",
                "inline None",
            ]
        );
    }

    /// TP1: entry names are unique in a collection.
    #[test]
    fn list_collection_with_duplicate_entry_names_is_rejected() {
        let err = decode(vec![inline("x", listener("1")), inline("x", listener("2"))])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("entries[1].inline_entry.name") && err.contains("unique"),
            "{err}"
        );
    }

    /// Members are of the collection's member type, inline or located.
    #[test]
    fn list_collection_members_of_another_type_are_rejected() {
        let cluster = Any {
            type_url: ClusterType::TYPE_URL.into(),
            value: Vec::new(),
        };
        let err = decode(vec![inline("x", cluster)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("entries[0].inline_entry.resource"), "{err}");
        let err = decode(vec![locator("envoy.config.cluster.v3.Cluster", "c")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("entries[0].locator"), "{err}");
    }

    /// TP1 entry names match `^[0-9a-zA-Z_\-\.~:]+$`.
    #[test]
    fn list_collection_entry_name_outside_the_pattern_is_rejected() {
        let err = decode(vec![inline("a/b", listener("1"))])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("must match"), "{err}");
    }
}
