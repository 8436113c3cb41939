//! The status dump's resource list, read from the cache.

use std::sync::Arc;
use xdsfed_core::hash::HashMap;

use xdsfed_core::status::ResourceStatusEntry;

use crate::cache::Cache;

/// Every cached entry, ordered by type URL and name; `uris` maps each
/// server's name to its URI (the federation core's `server_uris`).
pub(crate) fn resources_of(
    cache: &Cache,
    uris: &HashMap<Arc<str>, Arc<str>>,
) -> Vec<ResourceStatusEntry> {
    let uri_of = |server: &str| {
        uris.get(server)
            .map_or_else(|| server.to_owned(), |uri| uri.to_string())
    };
    let mut out = Vec::with_capacity(cache.len());
    cache.for_each(|key, provenance, state| {
        out.push(ResourceStatusEntry::of(key, provenance, state, &uri_of));
    });
    out.sort_by(|a, b| (&a.type_url, &a.name).cmp(&(&b.type_url, &b.name)));
    out
}
