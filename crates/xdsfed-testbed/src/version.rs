//! Content-hash versions.
//!
//! A resource's version is the lowercase hex SHA-256 of its encoded bytes, so
//! the same resource has the same version on every server and across restarts
//! (the policy distribution protocol's rule). A state-of-the-world response
//! carries one version for the whole response: the hash over the sorted
//! `(name, version)` pairs it holds.

use sha2::{Digest, Sha256};

/// The version of a resource whose encoding is `bytes`.
pub fn of_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The version of a state-of-the-world response carrying `pairs` of
/// `(name, version)`, independent of their order.
pub fn of_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut sorted: Vec<(&str, &str)> = pairs.into_iter().collect();
    sorted.sort_unstable();
    let mut hasher = Sha256::new();
    for (name, version) in sorted {
        // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
        hasher.update((name.len() as u64).to_be_bytes());
        hasher.update(name.as_bytes());
        hasher.update((version.len() as u64).to_be_bytes());
        hasher.update(version.as_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_lowercase_hex_sha256_of_bytes() {
        assert_eq!(
            of_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn pair_version_ignores_order_but_not_boundaries() {
        let a = of_pairs([("a", "1"), ("b", "2")]);
        assert_eq!(a, of_pairs([("b", "2"), ("a", "1")]));
        assert_ne!(of_pairs([("ab", "c")]), of_pairs([("a", "bc")]));
    }
}
