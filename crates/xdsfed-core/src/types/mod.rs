//! Resource types: how bytes from a server become validated resources.
//!
//! Every resource type is described by a [`ResourceType`]: its type URL,
//! whether state-of-the-world responses carry the full set of its resources
//! (LDS and CDS do), and how to decode and validate its bytes. The protocol
//! core works with type-erased [`ErasedType`]s looked up in a
//! [`TypeRegistry`], so users can register types of their own.

use crate::hash::HashMap;
use std::any::Any;

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// Why a resource was rejected. The message names the field that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValidationError(pub String);

impl ValidationError {
    /// An error about `field`: `"{field}: {why}"`.
    pub fn field(field: impl fmt::Display, why: impl fmt::Display) -> Self {
        ValidationError(format!("{field}: {why}"))
    }
}

/// A resource type the client can subscribe to.
pub trait ResourceType: Send + Sync + 'static {
    /// The type URL, e.g. `type.googleapis.com/envoy.config.cluster.v3.Cluster`.
    const TYPE_URL: &'static str;
    /// Whether a state-of-the-world response carries every resource of this
    /// type, so that a resource missing from it has been deleted (LDS, CDS).
    const SOTW_FULL_STATE: bool;
    /// The decoded, validated resource.
    type Resource: Send + Sync + 'static;
    /// Decodes and validates `bytes` (the `value` of the resource's `Any`).
    fn decode(bytes: &[u8]) -> Result<Self::Resource, ValidationError>;
    /// [`decode`](Self::decode) of bytes the client holds shared: a type
    /// whose resource keeps its bytes (to decode the full message again on
    /// demand) takes them from here without a copy.
    fn decode_shared(bytes: &Bytes) -> Result<Self::Resource, ValidationError> {
        Self::decode(bytes)
    }
    /// Whether a resource keeps the bytes it was decoded from, so that the
    /// client holds them through it ([`held_bytes`](Self::held_bytes)),
    /// once, rather than beside it.
    const KEEPS_BYTES: bool = false;
    /// [`decode_shared`](Self::decode_shared) of bytes the resource may
    /// keep as they are: a type that [keeps its bytes](Self::KEEPS_BYTES)
    /// moves them into the resource, so no second owner makes them shared
    /// (which costs an allocation per resource).
    fn decode_owned(bytes: Bytes) -> Result<Self::Resource, ValidationError> {
        Self::decode_shared(&bytes)
    }
    /// The bytes `resource` was decoded from, when it
    /// [keeps them](Self::KEEPS_BYTES).
    fn held_bytes(resource: &Self::Resource) -> Option<&Bytes> {
        let _ = resource;
        None
    }
    /// The name the resource carries inside itself (`Listener.name`,
    /// `ClusterLoadAssignment.cluster_name`, …). State-of-the-world responses
    /// without the `Resource` wrapper identify resources only by this.
    fn name(resource: &Self::Resource) -> Option<&str>;
    /// The name inside bytes that failed [`decode`](Self::decode), if they
    /// still parse far enough to say it. Only called on the failure path, so
    /// a state-of-the-world NACK can name the resource it rejects.
    fn name_of_invalid(bytes: &[u8]) -> Option<String> {
        let _ = bytes;
        None
    }
}

/// A decoded and validated resource, together with the bytes it came from.
///
/// Only [`ErasedType::decode`] builds one, so whatever holds a `Decoded` holds
/// data that passed validation.
///
/// 24 bytes: every cache entry holds one. A type that keeps its bytes is
/// its value alone, its bytes and name read through the value; any other
/// is a value holding the resource and its bytes.
#[derive(Clone)]
pub struct Decoded {
    value: Arc<dyn Any + Send + Sync>,
    reader: &'static Reader,
}

/// The value of a resource whose type keeps no bytes: the resource, with
/// the bytes it was decoded from.
struct Beside {
    resource: Arc<dyn Any + Send + Sync>,
    raw: Bytes,
}

/// Reads what a type-erased value keeps: its bytes and the name inside
/// it, and, for a [`Beside`], the resource it holds.
struct Reader {
    raw: fn(&(dyn Any + Send + Sync)) -> Option<&Bytes>,
    name: fn(&(dyn Any + Send + Sync)) -> Option<&str>,
    /// Whether the value is a [`Beside`].
    beside: bool,
}

impl Reader {
    /// For a [`Beside`] whose resource keeps no name.
    const NAMELESS_BESIDE: &'static Reader = &Reader {
        raw: raw_beside,
        name: |_| None,
        beside: true,
    };
}

/// The bytes of a value that keeps none.
static NO_BYTES: Bytes = Bytes::new();

/// The bytes a [`Beside`] holds.
fn raw_beside(value: &(dyn Any + Send + Sync)) -> Option<&Bytes> {
    value.downcast_ref::<Beside>().map(|beside| &beside.raw)
}

/// [`ResourceType::held_bytes`] of a type-erased `T::Resource`.
fn held_bytes_of<T: ResourceType>(value: &(dyn Any + Send + Sync)) -> Option<&Bytes> {
    value.downcast_ref::<T::Resource>().and_then(T::held_bytes)
}

/// [`ResourceType::name`] of a type-erased `T::Resource`.
fn name_of<T: ResourceType>(value: &(dyn Any + Send + Sync)) -> Option<&str> {
    value.downcast_ref::<T::Resource>().and_then(T::name)
}

/// [`ResourceType::name`] of the `T::Resource` a [`Beside`] holds.
fn name_beside<T: ResourceType>(value: &(dyn Any + Send + Sync)) -> Option<&str> {
    let beside = value.downcast_ref::<Beside>()?;
    name_of::<T>(beside.resource.as_ref())
}

impl Decoded {
    /// `value`, whose bytes are `raw`, and which keeps no name: a
    /// collection's body, say.
    pub(crate) fn beside(value: Arc<dyn Any + Send + Sync>, raw: Bytes) -> Self {
        Decoded {
            value: Arc::new(Beside {
                resource: value,
                raw,
            }),
            reader: Reader::NAMELESS_BESIDE,
        }
    }

    /// The bytes the resource was decoded from, shared, not copied.
    pub fn raw(&self) -> &Bytes {
        (self.reader.raw)(self.value.as_ref()).unwrap_or(&NO_BYTES)
    }

    /// The decoded resource, if it is a `T`.
    pub fn downcast<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        Arc::clone(self.value()).downcast::<T>().ok()
    }

    /// The decoded resource, type-erased.
    pub fn value(&self) -> &Arc<dyn Any + Send + Sync> {
        // A type that keeps its bytes, the common case, is its value.
        if !self.reader.beside {
            return &self.value;
        }
        match self.value.downcast_ref::<Beside>() {
            Some(beside) => &beside.resource,
            None => &self.value,
        }
    }

    /// The name inside the resource, see [`ResourceType::name`].
    pub fn name(&self) -> Option<&str> {
        (self.reader.name)(self.value.as_ref())
    }
}

impl fmt::Debug for Decoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoded")
            .field("bytes", &self.raw().len())
            .finish()
    }
}

/// A [`ResourceType`] with its type parameter erased, as the protocol core
/// and the cache use it.
pub trait ErasedType: Send + Sync + fmt::Debug {
    /// The type URL.
    fn type_url(&self) -> &'static str;
    /// See [`ResourceType::SOTW_FULL_STATE`].
    fn sotw_full_state(&self) -> bool;
    /// Decodes and validates one resource.
    fn decode(&self, raw: Bytes) -> Result<Decoded, ValidationError>;
    /// See [`ResourceType::name_of_invalid`].
    fn name_of_invalid(&self, raw: &[u8]) -> Option<String>;
}

/// Erases a [`ResourceType`].
pub struct Erased<T>(std::marker::PhantomData<fn() -> T>);

impl<T> Erased<T> {
    /// The erased form of `T`.
    pub fn new() -> Self {
        Erased(std::marker::PhantomData)
    }
}

impl<T: ResourceType> Erased<T> {
    /// For a `T` that keeps its bytes.
    const READER: &'static Reader = &Reader {
        raw: held_bytes_of::<T>,
        name: name_of::<T>,
        beside: false,
    };
    /// For a `T` that keeps none, held in a [`Beside`].
    const BESIDE: &'static Reader = &Reader {
        raw: raw_beside,
        name: name_beside::<T>,
        beside: true,
    };
}

impl<T> Default for Erased<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: ResourceType> fmt::Debug for Erased<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::TYPE_URL)
    }
}

impl<T: ResourceType> ErasedType for Erased<T> {
    fn type_url(&self) -> &'static str {
        T::TYPE_URL
    }
    fn sotw_full_state(&self) -> bool {
        T::SOTW_FULL_STATE
    }
    fn decode(&self, raw: Bytes) -> Result<Decoded, ValidationError> {
        // A type that keeps its bytes has them moved into the value; any
        // other has them beside it.
        if T::KEEPS_BYTES {
            let value = T::decode_owned(raw)?;
            return Ok(Decoded {
                value: Arc::new(value),
                reader: Self::READER,
            });
        }
        let resource = T::decode_shared(&raw)?;
        Ok(Decoded {
            value: Arc::new(Beside {
                resource: Arc::new(resource),
                raw,
            }),
            reader: Self::BESIDE,
        })
    }
    fn name_of_invalid(&self, raw: &[u8]) -> Option<String> {
        T::name_of_invalid(raw)
    }
}

/// The resource types a client knows, by type URL.
#[derive(Debug, Clone, Default)]
pub struct TypeRegistry {
    by_url: HashMap<&'static str, Arc<dyn ErasedType>>,
    /// List collection type URLs by member type URL.
    collections: HashMap<&'static str, &'static str>,
}

impl TypeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the type `T`.
    pub fn register<T: ResourceType>(&mut self) -> &mut Self {
        self.by_url
            .insert(T::TYPE_URL, Arc::new(Erased::<T>::new()));
        self
    }

    /// Adds the list collection type `collection_type_url` (xDS TP1, e.g.
    /// `type.googleapis.com/envoy.config.listener.v3.ListenerCollection`)
    /// whose members are `T`s, so that `T` can be watched as a list
    /// collection. `T` is registered too.
    pub fn register_list_collection<T: ResourceType>(
        &mut self,
        collection_type_url: &'static str,
    ) -> &mut Self {
        self.insert_list_collection::<T>(collection_type_url, false)
    }

    /// [`register_list_collection`](Self::register_list_collection), with
    /// locator entries rejected when `inline_only`.
    fn insert_list_collection<T: ResourceType>(
        &mut self,
        collection_type_url: &'static str,
        inline_only: bool,
    ) -> &mut Self {
        self.register::<T>();
        self.by_url.insert(
            collection_type_url,
            Arc::new(collection::ListCollectionType {
                type_url: collection_type_url,
                member: Arc::new(Erased::<T>::new()),
                inline_only,
            }),
        );
        self.collections.insert(T::TYPE_URL, collection_type_url);
        self
    }

    /// The list collection type URL of members of type `member_type_url`,
    /// if one is registered.
    pub fn list_collection_of(&self, member_type_url: &str) -> Option<&'static str> {
        self.collections.get(member_type_url).copied()
    }

    /// The type with this URL.
    pub fn get(&self, type_url: &str) -> Option<&Arc<dyn ErasedType>> {
        self.by_url.get(type_url)
    }
}

mod cluster;
mod collection;
#[cfg(test)]
mod decoded_tests;
mod endpoint;
mod listener;
mod presized;
mod route;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests_support;
mod validating_policy;
mod wire;

/// A protobuf `Duration` from a server as a [`std::time::Duration`];
/// `None` when either part is negative. Every conversion of a server's
/// duration goes through here, so none of them can panic on what was sent.
///
/// ```
/// use envoy_types::pb::google::protobuf::Duration;
/// use xdsfed_core::types::std_duration;
/// let d = Duration { seconds: 1, nanos: 500_000_000 };
/// assert_eq!(std_duration(&d), Some(std::time::Duration::from_millis(1500)));
/// assert_eq!(std_duration(&Duration { seconds: -1, nanos: 0 }), None);
/// assert_eq!(std_duration(&Duration { seconds: 0, nanos: -1 }), None);
/// assert!(std_duration(&Duration { seconds: i64::MAX, nanos: i32::MAX }).is_some());
/// ```
pub fn std_duration(
    d: &envoy_types::pb::google::protobuf::Duration,
) -> Option<std::time::Duration> {
    let secs = u64::try_from(d.seconds).ok()?;
    let nanos = u64::try_from(d.nanos).ok()?;
    std::time::Duration::from_secs(secs).checked_add(std::time::Duration::from_nanos(nanos))
}

pub use cluster::{
    AGGREGATE_CLUSTER_TYPE, ClusterDiscovery, ClusterType, ClusterView, aggregate_children,
};
pub use cluster::{
    ProviderRef, SanMatcher, SubjectAltName, TLS_TRANSPORT_SOCKET, UpstreamTls,
    leaf_subject_alt_names, san_matches, upstream_tls,
};
pub(crate) use collection::anonymous_key;
pub use collection::entry_key;
pub use collection::{
    CLUSTER_COLLECTION_TYPE_URL, LB_ENDPOINT_COLLECTION_TYPE_URL, LISTENER_COLLECTION_TYPE_URL,
    ListCollection, ListEntry,
};
pub use endpoint::{
    EndpointType, EndpointView, LbEndpointType, LedsEndpoint, LedsLocality, LedsMembers,
    LedsMembersIter, LoadAssignment, LocalityView,
};
pub use listener::{ListenerType, http_connection_manager};
pub use route::{RouteConfigView, RouteConfigurationType, RouteTarget};
pub use validating_policy::{
    EVALUATION_MODES, VALIDATING_POLICY_MESSAGE, VALIDATING_POLICY_TYPE_URL, ValidatingPolicyType,
    is_considered as is_policy_considered, validate as validate_policy,
};

impl TypeRegistry {
    /// A registry holding the built-in types: [`ListenerType`],
    /// [`RouteConfigurationType`], [`ClusterType`], [`EndpointType`] and
    /// [`LbEndpointType`] (LEDS), [`ValidatingPolicyType`] (what
    /// policy-stream servers deliver), the list collections of listeners
    /// and clusters, and that of LEDS endpoints (`LbEndpointCollection`,
    /// gRFC A95: inline entries only).
    pub fn with_builtin() -> Self {
        let mut registry = TypeRegistry::new();
        registry
            .register::<ListenerType>()
            .register::<RouteConfigurationType>()
            .register::<ClusterType>()
            .register::<EndpointType>()
            .register::<LbEndpointType>()
            .register::<ValidatingPolicyType>()
            .register_list_collection::<ListenerType>(LISTENER_COLLECTION_TYPE_URL)
            .register_list_collection::<ClusterType>(CLUSTER_COLLECTION_TYPE_URL)
            .insert_list_collection::<LbEndpointType>(LB_ENDPOINT_COLLECTION_TYPE_URL, true);
        registry
    }
}

/// Decodes a protobuf message, naming the type on failure.
fn decode_message<M: prost::Message + Default>(
    bytes: &[u8],
    what: &str,
) -> Result<M, ValidationError> {
    M::decode(bytes).map_err(|e| ValidationError(format!("not a valid {what}: {e}")))
}

/// Decodes `bytes` into this thread's reusable `M` and hands it to `read`,
/// with the bytes, which the view `read` builds may keep.
///
/// A message decoded only to be validated and viewed, then dropped, costs
/// an allocation per string and list each time; one cleared and filled
/// again keeps the room its top-level strings and lists already had, so a
/// stream of resources of one type allocates only for what is nested in
/// optional sub-messages (cleared to `None`). The room kept is bounded by
/// the largest message this thread decoded, itself bounded by the size
/// limit on a response. Re-entered (a message of the same type decoded
/// while one is being read), it decodes into a fresh message.
fn with_reused<M: prost::Message + Default, R>(
    scratch: &'static std::thread::LocalKey<std::cell::RefCell<M>>,
    bytes: Bytes,
    what: &str,
    read: impl FnOnce(&M, Bytes) -> Result<R, ValidationError>,
) -> Result<R, ValidationError> {
    let invalid = |e: prost::DecodeError| ValidationError(format!("not a valid {what}: {e}"));
    scratch.with(|cell| match cell.try_borrow_mut() {
        Ok(mut message) => {
            message.clear();
            message.merge(&bytes[..]).map_err(invalid)?;
            read(&message, bytes)
        }
        Err(_) => read(&M::decode(&bytes[..]).map_err(invalid)?, bytes),
    })
}

/// Unpacks an `Any` that must hold a message of type `M`.
fn unpack_any<M: prost::Message + prost::Name + Default>(
    any: &envoy_types::pb::google::protobuf::Any,
    field: &str,
) -> Result<M, ValidationError> {
    let expected = M::type_url();
    if any.type_url != expected {
        return Err(ValidationError::field(
            field,
            format_args!("expected {expected}, got {:?}", any.type_url),
        ));
    }
    M::decode(any.value.as_slice())
        .map_err(|e| ValidationError::field(field, format_args!("not a valid {}: {e}", M::NAME)))
}

/// Checks that a `ConfigSource` pointing at a dynamic resource is well
/// formed: `ads` or `self` (all gRPC accepts, gRFC A27), or, beyond gRPC, a
/// source naming its own server or file (xDS TP1).
fn check_config_source(
    source: Option<&envoy_types::pb::envoy::config::core::v3::ConfigSource>,
    field: &str,
) -> Result<(), ValidationError> {
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    let Some(source) = source else {
        return Err(ValidationError::field(field, "missing"));
    };
    // A source naming its own server (xDS TP1: a ConfigSource beside a
    // name) is well formed here; whether the client may use it is the
    // graph's trust rule (docs/federation.md), not a reason to NACK.
    match &source.config_source_specifier {
        Some(ConfigSourceSpecifier::Ads(_)) | Some(ConfigSourceSpecifier::Self_(_)) => Ok(()),
        Some(ConfigSourceSpecifier::ApiConfigSource(api)) => check_api_config_source(api, field),
        Some(ConfigSourceSpecifier::PathConfigSource(path)) if path.path.is_empty() => Err(
            ValidationError::field(format!("{field}.path_config_source.path"), "empty"),
        ),
        Some(ConfigSourceSpecifier::PathConfigSource(_)) => Ok(()),
        #[allow(deprecated)]
        Some(ConfigSourceSpecifier::Path(path)) if !path.is_empty() => Ok(()),
        _ => Err(ValidationError::field(
            field,
            "must be `ads`, `self`, an `api_config_source` or a `path_config_source`",
        )),
    }
}

/// An `api_config_source` must name a known `api_type` (not 0,
/// `DEPRECATED_AND_UNAVAILABLE_DO_NOT_USE`) and some service to ask.
fn check_api_config_source(
    api: &envoy_types::pb::envoy::config::core::v3::ApiConfigSource,
    field: &str,
) -> Result<(), ValidationError> {
    use envoy_types::pb::envoy::config::core::v3::api_config_source::ApiType;
    if api.api_type == 0 || ApiType::try_from(api.api_type).is_err() {
        return Err(ValidationError::field(
            format!("{field}.api_config_source.api_type"),
            format!("unsupported value {}", api.api_type),
        ));
    }
    if api.grpc_services.is_empty() && api.cluster_names.is_empty() {
        return Err(ValidationError::field(
            format!("{field}.api_config_source"),
            "names neither grpc_services nor cluster_names",
        ));
    }
    Ok(())
}

/// The name field of a message that failed validation, for NACKs.
fn name_of_message<M: prost::Message + Default>(
    bytes: &[u8],
    name: impl Fn(&M) -> &str,
) -> Option<String> {
    let message = M::decode(bytes).ok()?;
    Some(name(&message).to_owned()).filter(|n| !n.is_empty())
}
