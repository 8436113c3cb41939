//! Hash maps and sets keyed by what servers choose: resource names, type
//! URLs, versions.
//!
//! std's SipHash was 5–11 % of the client's CPU under churn; foldhash
//! costs a fraction of it. Its hash is not keyed cryptographically, so its
//! seed is what stands between a server and names chosen to collide: every
//! process draws one shared seed from the operating system's randomness
//! (through std's `RandomState`, the source std's own maps use), and every
//! map a seed of its own on top. A server cannot see the client's hashes,
//! so it cannot search for names that collide under seeds it never learns.
//! docs/performance.md ("Hashing") says why this hasher and not another.
//!
//! [`SmallSet`] is the set of per-resource bookkeeping whose usual size is
//! one: inline until a second element arrives; [`Interner`] the one shared
//! copy of a name many resources carry; [`KeyedTable`] a table of a
//! million boxed values whose slots are one pointer each; [`TypeMap`] the
//! handful of values a layer keeps per resource type, found without a
//! hash.

use std::hash::BuildHasher;
use std::sync::OnceLock;

mod interner;
mod keyed;
mod name_map;
mod name_set;
mod small_set;
mod type_map;

pub use interner::Interner;
pub use keyed::KeyedTable;
pub use name_map::NameMap;
pub use name_set::NameSet;
pub use small_set::{Iter as SmallSetIter, SmallSet};
pub use type_map::TypeMap;

use foldhash::SharedSeed;
use foldhash::fast::{FoldHasher, SeedableRandomState};

/// Gives a map's room back once it is empty: a hash table keeps its
/// largest size otherwise, and tables that fill for a cold start (a timer
/// per resource) and empty as resources arrive would hold that room for
/// the life of the process. Releasing it costs no allocation; shrinking
/// step by step as the map drains would cost a rehash and an allocation
/// at each step.
///
/// ```
/// use xdsfed_core::hash::{HashMap, release_when_empty};
///
/// let mut map: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
/// for i in 0..10_000 {
///     map.remove(&i);
///     release_when_empty(&mut map);
/// }
/// assert_eq!(map.capacity(), 0);
/// ```
pub fn release_when_empty<K: Eq + std::hash::Hash, V, S: BuildHasher>(
    map: &mut std::collections::HashMap<K, V, S>,
) {
    if map.is_empty() && map.capacity() > 0 {
        map.shrink_to(0);
    }
}

/// A map keyed by server-chosen text, hashed by [`NameHasher`].
pub type HashMap<K, V> = std::collections::HashMap<K, V, NameHasher>;

/// A set of server-chosen text, hashed by [`NameHasher`].
pub type HashSet<T> = std::collections::HashSet<T, NameHasher>;

/// Builds the hashers of [`HashMap`] and [`HashSet`]: foldhash under this
/// process's random seed and a random seed of the map's own.
///
/// ```
/// use xdsfed_core::hash::HashMap;
///
/// let mut versions: HashMap<&str, u32> = HashMap::default();
/// versions.insert("xdstp://cloud.example/envoy.config.cluster.v3.Cluster/a", 1);
/// assert_eq!(versions.len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct NameHasher(SeedableRandomState);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(SeedableRandomState::with_seed(os_random(), process_seed()))
    }
}

impl BuildHasher for NameHasher {
    type Hasher = FoldHasher;

    fn build_hasher(&self) -> FoldHasher {
        self.0.build_hasher()
    }
}

/// The seed every map of this process shares, drawn once.
fn process_seed() -> &'static SharedSeed {
    static SEED: OnceLock<SharedSeed> = OnceLock::new();
    SEED.get_or_init(|| SharedSeed::from_u64(os_random()))
}

/// 64 random bits: std's `RandomState` holds keys the operating system
/// drew (and steps them for each new state), so hashing a constant with a
/// fresh one gives a value no server can predict.
fn os_random() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed is drawn per map: two maps hash the same name apart, so a
    /// collision found in one (were one found) is no collision in another.
    #[test]
    fn each_map_hashes_under_a_seed_of_its_own() {
        let name = "xdstp://cloud.example/envoy.config.cluster.v3.Cluster/a";
        let (a, b) = (NameHasher::default(), NameHasher::default());
        assert_ne!(a.hash_one(name), b.hash_one(name));
        assert_eq!(a.hash_one(name), a.clone().hash_one(name));
    }
}
