//! The process's one source of randomness: seeds for the sans-IO sessions'
//! jitter and backoff, and the unpredictable parts of names.

use std::hash::{BuildHasher, Hasher, RandomState};

/// 64 bits nobody outside the process can predict: SipHash under the key
/// the standard library draws from the OS's random source (once per
/// thread, then stepped for each `RandomState`). Jitter needs spread, not
/// cryptographic randomness; temporary file names need only not to be
/// guessable in advance.
pub(crate) fn random_u64() -> u64 {
    RandomState::new().build_hasher().finish()
}

/// A number in [0, 1).
pub(crate) fn unit_random() -> f64 {
    // 53 bits: exactly representable in an f64.
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}
