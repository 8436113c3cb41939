//! The ring of RING_HASH (gRFC A42), sans-IO: built from the endpoints and
//! their weights, walked from a request's hash.
//!
//! Construction, as gRPC (after Envoy) builds it: weights are normalized
//! to sum 1; `scale = min(ceil(min_weight × min_ring_size) / min_weight,
//! max_ring_size)`; walking the endpoints, each gets entries until the
//! running count reaches the running `scale × weight` sum; entry *n* of an
//! endpoint hashes `"<address>_<n>"` with XXH64 (seed 0). Entries are
//! sorted by hash. A request goes to the first entry whose hash is at
//! least its own (wrapping to the start); the balancer walks on from there
//! to the first endpoint that is ready.

use xxhash_rust::xxh64::xxh64;

/// A42's defaults and cap of the ring size.
pub(crate) const DEFAULT_MIN_RING_SIZE: u64 = 1024;
pub(crate) const DEFAULT_MAX_RING_SIZE: u64 = 8 * 1024 * 1024;

/// A built ring: hashes in order and the endpoint (an index into the
/// endpoints it was built from) of each.
#[derive(Debug)]
pub(crate) struct Ring<K> {
    entries: Vec<(u64, usize)>,
    endpoints: Vec<K>,
}

impl<K> Default for Ring<K> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            endpoints: Vec::new(),
        }
    }
}

impl<K: std::fmt::Display + Clone> Ring<K> {
    /// The ring of `endpoints` (key and weight above 0), between the two
    /// sizes.
    pub(crate) fn build(endpoints: &[(K, f64)], min_size: u64, max_size: u64) -> Self {
        let total: f64 = endpoints.iter().map(|(_, w)| w.max(0.0)).sum();
        if endpoints.is_empty() || total <= 0.0 {
            return Self::default();
        }
        let normalized: Vec<f64> = endpoints.iter().map(|(_, w)| w.max(0.0) / total).collect();
        let min_weight = normalized
            .iter()
            .copied()
            .filter(|w| *w > 0.0)
            .fold(1.0, f64::min);
        let scale = ((min_weight * min_size as f64).ceil() / min_weight).min(max_size as f64);
        let mut entries = Vec::with_capacity(scale.ceil() as usize);
        let (mut current, mut target) = (0.0_f64, 0.0_f64);
        for (index, ((key, _), weight)) in endpoints.iter().zip(&normalized).enumerate() {
            target += scale * weight;
            let mut n = 0u64;
            while current < target {
                entries.push((xxh64(format!("{key}_{n}").as_bytes(), 0), index));
                n += 1;
                current += 1.0;
            }
        }
        entries.sort_unstable();
        Self {
            entries,
            endpoints: endpoints.iter().map(|(k, _)| k.clone()).collect(),
        }
    }

    /// How many entries the ring has.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The endpoints in ring order from `hash`'s place: the first entry
    /// whose hash is at least `hash`, then on round the ring, each
    /// endpoint once.
    pub(crate) fn walk(&self, hash: u64) -> impl Iterator<Item = &K> + '_ {
        let start = self.entries.partition_point(|(h, _)| *h < hash);
        let mut seen = vec![false; self.endpoints.len()];
        self.entries[start..]
            .iter()
            .chain(&self.entries[..start])
            .filter_map(move |(_, index)| {
                let first = !std::mem::replace(seen.get_mut(*index)?, true);
                first.then(|| self.endpoints.get(*index)).flatten()
            })
    }
}

/// A request's hash, set by the channel from the route's `hash_policy`
/// and read by a RING_HASH balancer (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHash(pub(crate) u64);

#[cfg(test)]
mod tests {
    use super::*;

    /// gRFC A42: XXH64 with seed 0, as gRPC's rings hash (reference value
    /// of the XXH64 specification for the empty input).
    #[test]
    fn ring_hashes_with_xxh64_seed_zero() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
    }

    /// gRFC A42: the ring size is the min ring size scaled so that the
    /// lightest endpoint gets its share, capped by the max; entries follow
    /// the weights.
    #[test]
    fn ring_size_and_shares_follow_the_weights() {
        let ring = Ring::build(&[("a", 1.0), ("b", 3.0)], 1024, 1 << 20);
        assert_eq!(ring.len(), 1024);
        let a = ring.entries.iter().filter(|(_, i)| *i == 0).count();
        assert_eq!(a, 256);
        // The lightest has weight 0.001: ceil(0.001 × 100) / 0.001 = 1000.
        let light = Ring::build(&[("a", 1.0), ("b", 999.0)], 100, 1 << 20);
        assert!((1000..=1001).contains(&light.len()), "{}", light.len());
        let capped = Ring::build(&[("a", 1.0), ("b", 999.0)], 100, 500);
        assert!((500..=501).contains(&capped.len()), "{}", capped.len());
        assert!(Ring::<&str>::build(&[], 10, 10).walk(0).next().is_none());
    }

    /// A walk starts at the first entry at or after the hash, wraps, and
    /// yields each endpoint once; the same hash always walks the same way.
    #[test]
    fn walk_visits_each_endpoint_once_from_the_hash() {
        let ring = Ring::build(&[("a", 1.0), ("b", 1.0), ("c", 1.0)], 64, 1024);
        for hash in [0, u64::MAX, 1 << 63, 12_345] {
            let walked: Vec<&str> = ring.walk(hash).copied().collect();
            assert_eq!(walked.len(), 3, "{walked:?}");
            let again: Vec<&str> = ring.walk(hash).copied().collect();
            assert_eq!(walked, again);
            let start = ring.entries.partition_point(|(h, _)| *h < hash) % ring.len();
            assert_eq!(walked[0], ["a", "b", "c"][ring.entries[start].1]);
        }
    }
}
