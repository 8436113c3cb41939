//! Cheap per-thread randomness for runtime fractions and weighted
//! clusters: xorshift64*, seeded once per thread from the standard
//! library's random hasher keys. Not for anything secret.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    // Never 0: xorshift would stay at 0 for ever.
    RandomState::new().hash_one(std::thread::current().id()) | 1
}

/// The next pseudo-random number of this thread.
pub(crate) fn next_u64() -> u64 {
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_spread_over_buckets() {
        let mut buckets = [0u32; 10];
        for _ in 0..10_000 {
            buckets[(super::next_u64() % 10) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|b| (800..1200).contains(b)),
            "{buckets:?}"
        );
    }
}
