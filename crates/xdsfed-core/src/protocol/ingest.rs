//! What delta and SotW responses have in common: checking each resource's
//! name, applying the valid ones, rejecting the invalid ones, TTLs and
//! heartbeats, deletions.
//!
//! Both variants turn their response into a list of [`Item`]s and hand it to
//! [`Session::ingest`], which applies the rules in this order for each item:
//!
//! 1. the name parses ([`crate::name::canonical_key`]) — else NACK it;
//! 2. the name's authority is one this server may deliver — else ignore and
//!    count it (a server must not inject another authority's configuration);
//! 3. the name appears once in the response — else NACK it ("Clients should
//!    NACK responses that contain multiple instances of the same resource
//!    name", xds-protocol-v3 "Duplicate Resource Names");
//! 4. the name is subscribed, or `*` is — else ignore it ("The client will
//!    silently ignore any supplied resources that were not explicitly
//!    requested");
//! 5. the resource decodes and validates — else NACK it, and report it
//!    [`CoreEvent::Invalid`] while the last good copy keeps serving (gRFC
//!    A46); the valid resources of the same response are applied;
//! 6. the name inside the resource (`Listener.name`,
//!    `RouteConfiguration.name`, `Cluster.name`,
//!    `ClusterLoadAssignment.cluster_name`) names the same resource as the
//!    name it was sent under (the delta `Resource.name`, a SotW `Resource`
//!    wrapper's name) — else NACK it as in 5, naming both. gRPC clients key a
//!    resource by its inner name (grpc-go unwraps the `Resource` wrapper and
//!    reads the name from the resource), so a resource accepted under a
//!    wrapper name that disagrees would be one resource to xdsfed and another
//!    to a gRPC client of the same server. The wire name keys the rejection:
//!    it is the subscription the server claims to answer. xdstp names compare
//!    by canonical key, old-style names exactly. A SotW resource without a
//!    wrapper has only its inner name. Not compared: a redirect (a
//!    `ResourceLocator` has no inner name; its target is checked when it
//!    arrives under its own name), a list collection (no inner name), and an
//!    inline collection entry (its entry name is a key local to the
//!    collection, TP1, not a resource name).

use crate::hash::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};

use super::ack::Rejected;
use super::event::{CoreEvent, RemovedReason, ResourceKey};
use super::session::Session;
use super::timers::Timer;
use crate::name::{NameError, canonical_key, canonical_key_of};
use crate::types::{Decoded, TypeRegistry, ValidationError};
use crate::version::Version;
use std::borrow::Cow;

/// The type URL of a redirect (xDS TP1 "Server redirects").
pub const RESOURCE_LOCATOR_TYPE_URL: &str = "type.googleapis.com/xds.core.v3.ResourceLocator";

/// The canonical key a `ResourceLocator`'s bytes point at. Only `xdstp`
/// locators are followed; directives in a locator are not supported.
pub(crate) fn locator_target(bytes: &[u8]) -> Result<Arc<str>, ValidationError> {
    use envoy_types::pb::xds::core::v3::ResourceLocator;
    use prost::Message as _;

    let locator = ResourceLocator::decode(bytes)
        .map_err(|e| ValidationError(format!("malformed ResourceLocator: {e}")))?;
    locator_key(locator)
}

/// The canonical key a `ResourceLocator` points at (a redirect's target, a
/// list collection's locator entry). Only `xdstp` locators are supported.
pub(crate) fn locator_key(
    locator: envoy_types::pb::xds::core::v3::ResourceLocator,
) -> Result<Arc<str>, ValidationError> {
    use envoy_types::pb::xds::core::v3::resource_locator;

    if locator.scheme != resource_locator::Scheme::Xdstp as i32 {
        return Err(ValidationError::field(
            "scheme",
            "only xdstp redirects are supported",
        ));
    }
    if locator.resource_type.is_empty() || locator.id.is_empty() {
        return Err(ValidationError(
            "ResourceLocator without a resource type or id".into(),
        ));
    }
    let mut name = format!(
        "xdstp://{}/{}/{}",
        locator.authority, locator.resource_type, locator.id
    );
    if let Some(resource_locator::ContextParamSpecifier::ExactContext(cx)) =
        locator.context_param_specifier
    {
        let mut params: Vec<(String, String)> = cx.params.into_iter().collect();
        params.sort();
        let query: Vec<String> = params
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !query.is_empty() {
            name.push('?');
            name.push_str(&query.join("&"));
        }
    }
    canonical_key(&name)
        .map(Arc::from)
        .map_err(|e| ValidationError(format!("ResourceLocator names an invalid resource: {e}")))
}

/// `resource` if the name it carries inside itself names the same resource
/// as the name it was sent under (`wire`, canonical key `key`); else the
/// mismatch, naming both. xdstp names compare by canonical key (context
/// parameter order and percent-encoding do not matter), old-style names
/// exactly. A resource that carries no name inside (an empty name, a list
/// collection) has only the wire name, and nothing to disagree with.
pub(crate) fn same_name(
    key: &str,
    wire: &(impl AsRef<[u8]> + ?Sized),
    resource: Decoded,
) -> Result<Decoded, ValidationError> {
    let Some(inner) = resource.name() else {
        return Ok(resource);
    };
    // Bytes, not text: the wire name was checked to be text when the
    // response was read, and checking it again costs more than comparing.
    let wire = wire.as_ref();
    if inner.as_bytes() == wire || canonical_key(inner).is_ok_and(|inner| inner == key) {
        return Ok(resource);
    }
    Err(ValidationError(format!(
        "resource name mismatch: sent as {:?}, but the resource names itself {inner:?}",
        String::from_utf8_lossy(wire)
    )))
}

/// Text a response carried: decoded into a `String` of its own, or read
/// in place from a [`WireDeltaResponse`](super::WireDeltaResponse), whose
/// text was checked to be UTF-8.
#[derive(Debug)]
pub(super) enum Text {
    Owned(String),
    InMessage(Bytes),
}

impl Text {
    pub(super) fn as_str(&self) -> &str {
        match self {
            Text::Owned(text) => text,
            Text::InMessage(bytes) => super::wire::as_text(bytes),
        }
    }
}

impl AsRef<[u8]> for Text {
    /// The text's bytes, not checked again: for comparisons, which need no
    /// `&str` (making one from a message's bytes checks them each time).
    fn as_ref(&self) -> &[u8] {
        match self {
            Text::Owned(text) => text.as_bytes(),
            Text::InMessage(bytes) => bytes,
        }
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text::Owned(text)
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        match text {
            Text::Owned(text) => text,
            Text::InMessage(_) => text.as_str().to_owned(),
        }
    }
}

/// A resource not decoded yet: its type URL and bytes.
#[derive(Debug)]
pub(super) struct RawAny {
    pub(super) type_url: Text,
    pub(super) value: Bytes,
}

impl From<Any> for RawAny {
    /// The bytes move into a `Bytes`, uncopied.
    fn from(any: Any) -> Self {
        RawAny {
            type_url: any.type_url.into(),
            value: Bytes::from(any.value),
        }
    }
}

/// One resource of a response, before the rules are applied.
#[derive(Debug)]
pub(super) struct Item {
    /// The name as the server sent it, for error messages.
    pub(super) raw_name: Text,
    /// Its cache key.
    pub(super) key: Result<Arc<str>, NameError>,
    /// Whether the key was found among the names subscribed by name (so it
    /// is wanted); `false` when that was not looked up.
    pub(super) subscribed: bool,
    /// Whether the key was looked up among the names subscribed by name
    /// (so `subscribed` is the answer, not a default).
    pub(super) looked_up: bool,
    /// Whether the key is the session's own copy of the name (subscribed or
    /// held): two items of one name then hold the same `Arc`.
    pub(super) shared: bool,
    /// The resource.
    pub(super) body: Body,
    /// Delta: the resource's version; SotW: the response's.
    pub(super) version: Version,
    /// The TTL of the `Resource` wrapper, if any.
    pub(super) ttl: Option<PbDuration>,
}

impl Item {
    /// An item named `raw_name`.
    pub(super) fn new(
        raw_name: impl Into<Text>,
        body: Body,
        version: Version,
        ttl: Option<PbDuration>,
    ) -> Self {
        Self::named(raw_name.into(), body, version, ttl, None)
    }

    /// An item named `raw_name`, whose key is the session's own copy when
    /// `known` (the type's durable state) has one.
    pub(super) fn named(
        raw_name: Text,
        body: Body,
        version: Version,
        ttl: Option<PbDuration>,
        known: Option<&super::type_state::Durable>,
    ) -> Self {
        let name = raw_name.as_str();
        // Whether the key is subscribed by name, when the lookup said.
        let (key, by_name, shared) = match known.and_then(|d| d.shared_name(name)) {
            Some((key, by_name)) => (Ok(key), by_name, true),
            None => match canonical_key_of(name) {
                // Spelled otherwise than the session's copy: that copy all the
                // same, so that one name is one `Arc` here too.
                Ok(Cow::Owned(canonical)) => match known.and_then(|d| d.shared_name(&canonical)) {
                    Some((key, by_name)) => (Ok(key), by_name, true),
                    None => (Ok(Arc::from(canonical)), Some(false), false),
                },
                Ok(Cow::Borrowed(key)) => (Ok(Arc::from(key)), Some(false), false),
                Err(e) => (Err(e), Some(false), false),
            },
        };
        Item {
            raw_name,
            key,
            subscribed: by_name == Some(true),
            looked_up: known.is_some() && by_name.is_some(),
            shared,
            body,
            version,
            ttl,
        }
    }
}

/// An item's resource.
#[derive(Debug)]
pub(super) enum Body {
    /// Not decoded yet: decoded only if someone wants it.
    Raw(RawAny),
    /// Already decoded (SotW without the wrapper must decode to find the name).
    Decoded(Decoded),
    /// Decoded and rejected, but the name could still be read (SotW without
    /// the wrapper), so the rejection can name it.
    Failed(ValidationError),
    /// No resource: a TTL heartbeat ("a Resource with the resource unset and
    /// version matching the most recently sent version can be used to update
    /// the TTL. These resources will not be treated as resource updates").
    Heartbeat,
}

/// How a heartbeat is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeartbeatRule {
    /// Delta: its version must equal the held copy's.
    SameVersion,
    /// SotW: the held copy's version is the response's, which a heartbeat
    /// response changes; holding the resource suffices.
    Held,
}

/// The valid `Resource.ttl` as a `Duration`; `None` for no TTL.
pub(super) fn ttl_of(ttl: Option<PbDuration>) -> Result<Option<Duration>, ValidationError> {
    let Some(ttl) = ttl else {
        return Ok(None);
    };
    crate::types::std_duration(&ttl)
        .map(Some)
        .ok_or_else(|| ValidationError::field("ttl", "negative"))
}

/// The names that appear more than once among `items`, with how often.
/// Usually none: the sets of names seen are then dropped and nothing else
/// is looked up per item.
///
/// A name the session knows is its one shared `Arc` in every item that
/// carries it (see [`Item::named`]), so those are told apart by address,
/// without reading their text again; only names new to the session are
/// compared as text, and a new name never spells a known one.
fn duplicates(items: &[Item]) -> HashMap<Arc<str>, usize> {
    if items.len() <= FEW_ITEMS {
        return duplicates_among_few(items);
    }
    // Sized once: grown insert by insert, a response of a million names
    // rehashed its set some twenty times.
    let shared_names = items.iter().filter(|i| i.shared).count();
    let mut shared: HashSet<*const u8> =
        HashSet::with_capacity_and_hasher(shared_names, Default::default());
    let mut fresh: HashSet<&str> =
        HashSet::with_capacity_and_hasher(items.len() - shared_names, Default::default());
    let mut counts: HashMap<Arc<str>, usize> = HashMap::default();
    for item in items {
        let Ok(key) = &item.key else { continue };
        let first = match item.shared {
            true => shared.insert(Arc::as_ptr(key).cast::<u8>()),
            false => fresh.insert(key),
        };
        if !first {
            *counts.entry(Arc::clone(key)).or_insert(1) += 1;
        }
    }
    counts
}

/// Up to how many items [`duplicates`] compares each with those before
/// it rather than building sets: a churn's responses carry a few dozen
/// resources at most (a dozen at ten thousand LEDS updates a second), and
/// the sets were two allocations per response.
const FEW_ITEMS: usize = 32;

/// [`duplicates`] for a few items: each compared with those before it, by
/// the same rules (a shared name by address, a new one by text).
fn duplicates_among_few(items: &[Item]) -> HashMap<Arc<str>, usize> {
    let mut counts: HashMap<Arc<str>, usize> = HashMap::default();
    for (at, item) in items.iter().enumerate() {
        let Ok(key) = &item.key else { continue };
        let seen = items[..at].iter().any(|earlier| match &earlier.key {
            Ok(other) if earlier.shared == item.shared => match item.shared {
                true => Arc::ptr_eq(other, key),
                false => other == key,
            },
            _ => false,
        });
        if seen {
            *counts.entry(Arc::clone(key)).or_insert(1) += 1;
        }
    }
    counts
}

/// Decodes and validates the bytes of an `Any` whose type URL is
/// `any_type_url`, answering for `type_url`, with the type `types` has for
/// it.
pub(crate) fn decode_registered(
    types: &TypeRegistry,
    type_url: &str,
    any_type_url: &(impl AsRef<[u8]> + ?Sized),
    raw: Bytes,
) -> Result<Decoded, ValidationError> {
    let any_type_url = any_type_url.as_ref();
    if any_type_url != type_url.as_bytes() {
        return Err(ValidationError(format!(
            "type {:?} in a response of type {type_url}",
            String::from_utf8_lossy(any_type_url)
        )));
    }
    let Some(ty) = types.get(type_url) else {
        return Err(ValidationError(format!(
            "no resource type registered for {type_url}"
        )));
    };
    ty.decode(raw)
}

impl Session {
    /// Applies the items of one response of type `type_url` (see the module
    /// docs for the rules). The keys of every allowed item (valid or not) are
    /// added to `present`, for SotW's deletion by absence.
    pub(super) fn ingest(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        items: Vec<Item>,
        heartbeat: HeartbeatRule,
        rejected: &mut Vec<Rejected>,
        mut present: Option<&mut HashSet<Arc<str>>>,
    ) {
        let counts = duplicates(&items);
        // One event per item at most: one allocation, not a doubling per
        // power of two (the queue gives its room back once drained).
        self.events.reserve(items.len());
        if let Some(state) = self.states.get_mut(type_url) {
            let names = items.iter().filter_map(|i| i.key.as_deref().ok());
            let globs = state.durable.globs > 0;
            state.durable.held.reserve_for(names.count(), globs);
        }
        let mut duplicates_reported: HashSet<Arc<str>> = HashSet::default();
        for item in items {
            let key = match item.key.clone() {
                Ok(key) => key,
                Err(error) => {
                    self.stats.resource_updates_invalid += 1;
                    rejected.push(Rejected::BadName {
                        name: item.raw_name.into(),
                        error,
                    });
                    continue;
                }
            };
            if !self.cfg.authorities.allows(&key) {
                self.stats.foreign_names_ignored += 1;
                tracing::debug!(name = %key, "ignoring a resource of an authority this server may not deliver");
                continue;
            }
            if let Some(present) = present.as_deref_mut() {
                present.insert(Arc::clone(&key));
            }
            let wanted = item.subscribed
                || self
                    .states
                    .get(type_url)
                    .is_some_and(|s| match item.looked_up {
                        true => s.wants_unsubscribed(&key),
                        false => s.wants(&key),
                    });
            // Usually no name repeats, and then nothing is looked up.
            let count = if counts.is_empty() {
                1
            } else {
                counts.get(&key).copied().unwrap_or(1)
            };
            if count > 1 {
                // Report the name once, however often it appears.
                if duplicates_reported.insert(Arc::clone(&key)) {
                    let r = Rejected::DuplicateName {
                        name: item.raw_name.into(),
                        count,
                    };
                    if wanted {
                        self.reject(type_url, key, &r, item.version);
                    } else {
                        self.stats.resource_updates_invalid += 1;
                    }
                    rejected.push(r);
                }
                continue;
            }
            if !wanted {
                self.stats.unrequested_ignored += 1;
                continue;
            }
            self.ingest_wanted(now, type_url, key, item, heartbeat, rejected);
        }
    }

    /// One item of a wanted name, once its name is known to be good and
    /// unique: a redirect, a heartbeat, or a resource to validate.
    fn ingest_wanted(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        key: Arc<str>,
        item: Item,
        heartbeat: HeartbeatRule,
        rejected: &mut Vec<Rejected>,
    ) {
        let ttl = match ttl_of(item.ttl) {
            Ok(ttl) => ttl,
            Err(error) => {
                return self.invalid(type_url, key, item.raw_name, error, item.version, rejected);
            }
        };
        let decoded = match item.body {
            Body::Raw(any) if any.type_url.as_ref() == RESOURCE_LOCATOR_TYPE_URL.as_bytes() => {
                return match locator_target(&any.value) {
                    Ok(target) => self.redirect(now, type_url, key, target, item.version, ttl),
                    Err(error) => {
                        self.invalid(type_url, key, item.raw_name, error, item.version, rejected)
                    }
                };
            }
            Body::Heartbeat => {
                let beat = self.heartbeat(now, type_url, &key, &item.version, ttl, heartbeat);
                if let Err(error) = beat {
                    self.invalid(type_url, key, item.raw_name, error, item.version, rejected);
                }
                return;
            }
            Body::Decoded(decoded) => Ok(decoded),
            Body::Failed(error) => Err(error),
            Body::Raw(any) => decode_registered(&self.types, type_url, &any.type_url, any.value),
        };
        match decoded.and_then(|d| same_name(&key, &item.raw_name, d)) {
            Ok(resource) => self.accept(now, type_url, key, resource, item.version, ttl),
            Err(error) => self.invalid(type_url, key, item.raw_name, error, item.version, rejected),
        }
    }

    /// Rejects an item that failed validation, and names it in the NACK.
    fn invalid(
        &mut self,
        type_url: &Arc<str>,
        key: Arc<str>,
        raw_name: Text,
        error: ValidationError,
        version: Version,
        rejected: &mut Vec<Rejected>,
    ) {
        let r = Rejected::Invalid {
            name: raw_name.into(),
            error,
        };
        self.reject(type_url, key, &r, version);
        rejected.push(r);
    }

    /// Decodes one `Any` of a response of type `type_url`. The bytes move
    /// into a `Bytes`, uncopied.
    pub(super) fn decode(&self, type_url: &str, any: Any) -> Result<Decoded, ValidationError> {
        self.decode_bytes(type_url, &any.type_url, Bytes::from(any.value))
    }

    /// Decodes the bytes of an `Any` whose type URL is `any_type_url`.
    pub(super) fn decode_bytes(
        &self,
        type_url: &str,
        any_type_url: &str,
        raw: Bytes,
    ) -> Result<Decoded, ValidationError> {
        decode_registered(&self.types, type_url, any_type_url, raw)
    }

    /// A redirect: held like a resource (it answers the subscription, and
    /// a reconnect reports its version), reported for the client to follow
    /// or refuse.
    fn redirect(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        name: Arc<str>,
        target: Arc<str>,
        version: Version,
        ttl: Option<Duration>,
    ) {
        let key = self.hold(now, type_url, name, &version, ttl);
        self.events.push_back(CoreEvent::Redirect {
            key,
            target,
            version,
        });
    }

    /// A valid answer (a resource or a redirect) for `name`: count it, hold
    /// its version (a reconnect reports it), stop its does-not-exist timer
    /// and (re)arm its TTL. Returns its key.
    fn hold(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        name: Arc<str>,
        version: &Version,
        ttl: Option<Duration>,
    ) -> ResourceKey {
        self.stats.resource_updates_valid += 1;
        if let Some(state) = self.states.get_mut(type_url) {
            let durable = &mut state.durable;
            let globs = (durable.globs > 0).then_some(&durable.subscribed);
            durable
                .held
                .insert(Arc::clone(&name), version.clone(), globs);
            durable.forget_absence(&name);
        }
        let key = ResourceKey::new(Arc::clone(type_url), name);
        self.cancel_does_not_exist(&key);
        self.set_ttl(now, &key, ttl);
        key
    }

    /// Stops the does-not-exist timer of `key` and, for a member of a glob
    /// collection, of its glob: a member answers the glob.
    fn cancel_does_not_exist(&mut self, key: &ResourceKey) {
        // An update of a resource already held (churn) finds none armed.
        if !self.timers.any_does_not_exist() {
            return;
        }
        self.timers.stop_does_not_exist(key);
        // Working out a glob costs allocations: only when one is subscribed.
        let globs = self
            .states
            .get(&key.type_url)
            .is_some_and(|s| s.durable.globs > 0);
        if let Some(glob) = globs.then(|| super::glob::glob_of(&key.name)).flatten() {
            self.timers.cancel(&Timer::DoesNotExist(ResourceKey::new(
                Arc::clone(&key.type_url),
                glob,
            )));
        }
    }

    /// A valid resource: hold it, stop its does-not-exist timer, (re)arm its
    /// TTL, report it.
    fn accept(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        name: Arc<str>,
        resource: Decoded,
        version: Version,
        ttl: Option<Duration>,
    ) {
        let key = self.hold(now, type_url, name, &version, ttl);
        self.events.push_back(CoreEvent::Upsert {
            key,
            resource,
            version,
            ttl,
        });
    }

    /// An invalid resource that is wanted: report it. The held copy stays;
    /// the resource exists, so its does-not-exist timer stops, and a later
    /// deletion of it is news.
    fn reject(&mut self, type_url: &Arc<str>, name: Arc<str>, why: &Rejected, version: Version) {
        self.stats.resource_updates_invalid += 1;
        if let Some(state) = self.states.get_mut(type_url) {
            state.durable.forget_absence(&name);
        }
        let key = ResourceKey::new(Arc::clone(type_url), name);
        self.timers.stop_does_not_exist(&key);
        tracing::warn!(resource = %key, error = %why, "rejected resource");
        self.events.push_back(CoreEvent::Invalid {
            key,
            error: why.to_validation_error(),
            version,
        });
    }

    /// A heartbeat: refresh the TTL of a held resource.
    fn heartbeat(
        &mut self,
        now: Instant,
        type_url: &Arc<str>,
        name: &Arc<str>,
        version: &Version,
        ttl: Option<Duration>,
        rule: HeartbeatRule,
    ) -> Result<(), ValidationError> {
        let held = self
            .states
            .get(type_url)
            .and_then(|s| s.durable.held.get(name));
        match (held, rule) {
            (None, _) => {
                return Err(ValidationError::field(
                    "resource",
                    "unset, and the client holds no copy to refresh",
                ));
            }
            (Some(held), HeartbeatRule::SameVersion) if held != version => {
                return Err(ValidationError::field(
                    "resource",
                    format!("unset, but version {version:?} is not the held version {held:?}"),
                ));
            }
            _ => {}
        }
        let key = ResourceKey::new(Arc::clone(type_url), Arc::clone(name));
        self.set_ttl(now, &key, ttl);
        Ok(())
    }

    /// Arms the TTL of `key`, or disarms it when the resource came without.
    fn set_ttl(&mut self, now: Instant, key: &ResourceKey, ttl: Option<Duration>) {
        match ttl.and_then(|ttl| now.checked_add(ttl)) {
            Some(deadline) => self.timers.set(Timer::TtlExpiry(key.clone()), deadline),
            None => self.timers.cancel_ttl(key),
        }
    }

    /// The server deleted `name` (delta `removed_resources`, a `NOT_FOUND`
    /// resource error, or SotW absence). A held copy is removed; a wanted name
    /// never received is known not to exist at once.
    pub(super) fn server_removed(&mut self, type_url: &Arc<str>, name: Arc<str>, full_state: bool) {
        if !self.cfg.authorities.allows(&name) {
            self.stats.foreign_names_ignored += 1;
            return;
        }
        let ignore_deletion = full_state && self.cfg.ignore_resource_deletion;
        let Some(state) = self.states.get_mut(type_url) else {
            return;
        };
        if !state.wants(&name) {
            return;
        }
        let key = ResourceKey::new(Arc::clone(type_url), Arc::clone(&name));
        if state.durable.held.contains_key(&name) {
            if ignore_deletion {
                // gRFC A53: keep using the resource, say so.
                self.stats.deletions_ignored += 1;
                tracing::warn!(resource = %key, "server deleted a resource; ignored (ignore_resource_deletion)");
                return;
            }
            state.durable.held.remove(&name);
            self.timers.cancel(&Timer::TtlExpiry(key.clone()));
            self.events.push_back(CoreEvent::Removed {
                key,
                reason: RemovedReason::Deleted,
            });
        } else if state.durable.absent.insert(Arc::clone(&name)) {
            state.durable.timed_out.remove(&name);
            // The server answered: a deletion, not the does-not-exist timer
            // (which means nobody answered, and may call for an `#alt`).
            self.timers.stop_does_not_exist(&key);
            self.events.push_back(CoreEvent::Removed {
                key,
                reason: RemovedReason::Deleted,
            });
        }
    }

    /// Whether `type_url` is a full-state type (LDS, CDS).
    pub(super) fn full_state(&self, type_url: &str) -> bool {
        self.types
            .get(type_url)
            .is_some_and(|t| t.sotw_full_state())
    }

    /// A TP3 `resource_errors` entry: `NOT_FOUND` is a deletion (as the
    /// field's documentation says); any other code is reported as is.
    pub(super) fn resource_error(
        &mut self,
        type_url: &Arc<str>,
        raw_name: &str,
        code: i32,
        message: String,
    ) {
        let Ok(name) = canonical_key(raw_name).map(Arc::<str>::from) else {
            tracing::debug!(
                name = raw_name,
                "ignoring a resource error for an invalid name"
            );
            return;
        };
        let code = crate::error::GrpcCode::from_i32(code);
        if code == crate::error::GrpcCode::NotFound {
            let full_state = self.full_state(type_url);
            self.server_removed(type_url, name, full_state);
            return;
        }
        if !self.cfg.authorities.allows(&name) {
            self.stats.foreign_names_ignored += 1;
            return;
        }
        if !self.states.get(type_url).is_some_and(|s| s.wants(&name)) {
            return;
        }
        let key = ResourceKey::new(Arc::clone(type_url), name);
        self.timers.stop_does_not_exist(&key);
        self.events.push_back(CoreEvent::ResourceError {
            key,
            code,
            message: Arc::from(message),
        });
    }
}
