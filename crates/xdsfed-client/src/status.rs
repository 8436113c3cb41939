//! The status dump's resource list, read from the cache.

use xdsfed_core::status::ResourceStatusEntry;

use crate::cache::Cache;

/// Every cached entry, ordered by type URL and name.
pub(crate) fn resources_of(cache: &Cache) -> Vec<ResourceStatusEntry> {
    let mut out = Vec::with_capacity(cache.len());
    cache.for_each(|key, provenance, state| {
        out.push(ResourceStatusEntry::of(key, provenance, state));
    });
    out.sort_by(|a, b| (&a.type_url, &a.name).cmp(&(&b.type_url, &b.name)));
    out
}
