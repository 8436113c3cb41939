//! What the protocol core tells the cache.

use std::sync::Arc;
use std::time::Duration;

use super::stream_end::StreamFailure;
use crate::types::{Decoded, ValidationError};
use crate::version::Version;

/// A resource's identity in the cache: its type URL and its cache key (the
/// canonical `xdstp:` URN, or an old-style name as it is; see
/// [`crate::name::canonical_key`]).
///
/// Hashed by its name and the length of its type URL: every table of keys
/// would otherwise hash the same sixty bytes of type URL again on each
/// lookup, and keys of different types rarely share a name (when they do,
/// equality tells them apart).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceKey {
    /// e.g. `type.googleapis.com/envoy.config.cluster.v3.Cluster`.
    pub type_url: Arc<str>,
    /// The cache key.
    pub name: Arc<str>,
}

impl ResourceKey {
    /// A key from a type URL and a cache key. A type URL given as text is
    /// the process's one shared copy of it (see [`TypeUrl`]).
    pub fn new(type_url: impl TypeUrl, name: impl Into<Arc<str>>) -> Self {
        ResourceKey {
            type_url: type_url.into_type_url(),
            name: name.into(),
        }
    }
}

impl std::hash::Hash for ResourceKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.type_url.len());
        self.name.hash(state);
    }
}

/// A type URL as a key holds it: one shared `Arc<str>` per type in the
/// process, however many keys name it.
///
/// A million keys of one type would otherwise each allocate their own copy
/// of the same 60 bytes. Text is looked up among the type URLs already
/// interned (a handful: the registered types); an `Arc<str>` is taken as
/// it is. The table is bounded, so text nobody registered cannot grow it
/// without limit: past [`INTERNED_TYPE_URLS`] distinct URLs, a key
/// allocates its own copy as before.
///
/// ```
/// use std::sync::Arc;
/// use xdsfed_core::protocol::ResourceKey;
///
/// let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// let a = ResourceKey::new(cds, "a");
/// let b = ResourceKey::new(String::from(cds), "b");
/// assert!(Arc::ptr_eq(&a.type_url, &b.type_url));
/// ```
pub trait TypeUrl {
    /// The shared copy of this type URL.
    fn into_type_url(self) -> Arc<str>;
}

impl TypeUrl for Arc<str> {
    fn into_type_url(self) -> Arc<str> {
        self
    }
}

impl TypeUrl for &Arc<str> {
    fn into_type_url(self) -> Arc<str> {
        Arc::clone(self)
    }
}

impl TypeUrl for &str {
    fn into_type_url(self) -> Arc<str> {
        intern_type_url(self)
    }
}

impl TypeUrl for String {
    fn into_type_url(self) -> Arc<str> {
        intern_type_url(&self)
    }
}

impl TypeUrl for &String {
    fn into_type_url(self) -> Arc<str> {
        intern_type_url(self)
    }
}

/// How many distinct type URLs the process shares; more than any client
/// registers.
pub const INTERNED_TYPE_URLS: usize = 64;

fn intern_type_url(type_url: &str) -> Arc<str> {
    static TABLE: std::sync::OnceLock<std::sync::Mutex<crate::hash::Interner>> =
        std::sync::OnceLock::new();
    let table =
        TABLE.get_or_init(|| std::sync::Mutex::new(crate::hash::Interner::new(INTERNED_TYPE_URLS)));
    // A poisoned table only means another thread panicked while holding
    // it; its contents are whole either way.
    table
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .shared(type_url)
}

impl std::fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.type_url, self.name)
    }
}

/// An event for the cache, produced by one ADS stream's protocol core.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CoreEvent {
    /// A subscribed resource arrived and passed validation. Identical bytes to
    /// the cached copy are still reported (the cache decides who to wake).
    Upsert {
        /// Which resource.
        key: ResourceKey,
        /// The validated resource and its bytes.
        resource: Decoded,
        /// The resource's version (delta) or the response's version (SotW).
        version: Version,
        /// The resource's TTL, when the server set one.
        ttl: Option<Duration>,
    },
    /// A subscribed resource failed validation and was NACKed; the last good
    /// copy, if any, keeps serving.
    Invalid {
        /// Which resource.
        key: ResourceKey,
        /// Why it was rejected.
        error: ValidationError,
        /// The version of the rejected response.
        version: Version,
    },
    /// The server deleted the resource (delta `removed_resources`, absence
    /// from a SotW LDS/CDS response) or its TTL expired.
    Removed {
        /// Which resource.
        key: ResourceKey,
        /// Why.
        reason: RemovedReason,
    },
    /// A subscribed resource arrived as an `xds.core.v3.ResourceLocator`: the
    /// server redirects it to `target` (xDS TP1 "Server redirects"). Whether
    /// to follow is the client's decision; the core holds it as received.
    Redirect {
        /// Which resource.
        key: ResourceKey,
        /// The canonical key of the target.
        target: Arc<str>,
        /// The resource's version.
        version: Version,
    },
    /// The does-not-exist timer expired (gRFC A57).
    DoesNotExist {
        /// Which resource.
        key: ResourceKey,
    },
    /// The server reported an error for this resource (TP3 `resource_errors`).
    ResourceError {
        /// Which resource.
        key: ResourceKey,
        /// The status code the server sent.
        code: crate::error::GrpcCode,
        /// The server's message.
        message: Arc<str>,
    },
    /// The session cannot ask this server for the resource: a glob
    /// collection on a stream that speaks state-of-the-world xDS. Not the
    /// server's answer; the resource stays subscribed, and is asked for
    /// again if the server later speaks delta.
    NotRequested {
        /// Which resource.
        key: ResourceKey,
        /// Why, for the watchers.
        reason: Arc<str>,
    },
    /// The stream failed (A57: connection failure, or ended before any
    /// response). Resources of this stream keep their cached copies; watchers
    /// get an ambient error (or an error, if nothing is cached).
    StreamFailed {
        /// What happened; its `Display` is the sentence for people, naming
        /// the server.
        failure: StreamFailure,
    },
    /// The stream received its first response after being (re)established.
    StreamHealthy,
    /// The server accepted the (re)established stream: its response headers
    /// arrived. Not yet a response, so gRFC A57 and A71 still wait for one,
    /// but the server is reachable again: the transient errors of its last
    /// failure are over. (A server whose versions all match what the client
    /// holds may send nothing at all after a reconnect.)
    StreamAccepted,
}

/// Why a resource left the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovedReason {
    /// The server deleted it.
    Deleted,
    /// Its TTL passed without a refresh.
    TtlExpired,
    /// The server sent it, but for another evaluator: a policy-stream
    /// `ValidatingPolicy` whose evaluation mode is not one this client
    /// evaluates is not considered (as the upstream plugin skips it), so it
    /// does not exist here.
    NotConsidered,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rule: keys of one type share one copy of its type URL, whether it
    /// was given as text, as a `String` or as another key's copy.
    #[test]
    fn keys_of_one_type_share_its_type_url() {
        let cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
        let a = ResourceKey::new(cds, "a");
        let b = ResourceKey::new(cds.to_owned(), "b");
        let c = ResourceKey::new(&a.type_url, "c");
        assert!(Arc::ptr_eq(&a.type_url, &b.type_url));
        assert!(Arc::ptr_eq(&a.type_url, &c.type_url));
        let eds = ResourceKey::new(
            "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            "a",
        );
        assert_ne!(a.type_url, eds.type_url);
    }

    /// Rule: text nobody registered cannot grow the table without bound;
    /// past it, a key still names the type it was given, with a copy of
    /// its own.
    #[test]
    fn the_shared_type_urls_are_bounded() {
        let mut table = crate::hash::Interner::new(INTERNED_TYPE_URLS);
        let urls: Vec<String> = (0..INTERNED_TYPE_URLS + 10)
            .map(|i| format!("type.example/bounded.{i}"))
            .collect();
        let first: Vec<Arc<str>> = urls.iter().map(|u| table.shared(u)).collect();
        assert_eq!(table.len(), INTERNED_TYPE_URLS);
        for (url, held) in urls.iter().zip(&first) {
            assert_eq!(**held, **url);
        }
        let again: Vec<Arc<str>> = urls.iter().map(|u| table.shared(u)).collect();
        let shared = |i: usize| Arc::ptr_eq(&first[i], &again[i]);
        assert!((0..INTERNED_TYPE_URLS).all(shared));
        assert!(!(INTERNED_TYPE_URLS..urls.len()).any(shared));
    }
}
