//! The policy set's version, exactly as the protocol computes it: the
//! policy names sorted, and for each the name then the encoded policy fed
//! to one SHA-256, in lowercase hex.

use std::collections::BTreeMap;

use prost::Message;
use sha2::{Digest, Sha256};
use xdsfed_core::policy_stream::wire::ValidatingPolicy;

/// The version of `policies` (keyed, and so sorted, by name).
pub fn of_policies(policies: &BTreeMap<String, ValidatingPolicy>) -> String {
    let mut hasher = Sha256::new();
    for (name, policy) in policies {
        hasher.update(name.as_bytes());
        hasher.update(policy.encode_to_vec());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdsfed_core::policy_stream::wire::{ValidatingPolicySpec, Validation};

    fn policy(name: &str, expression: &str) -> ValidatingPolicy {
        ValidatingPolicy {
            name: name.into(),
            delete: false,
            spec: Some(ValidatingPolicySpec {
                validations: vec![Validation {
                    expression: expression.into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn set(policies: &[ValidatingPolicy]) -> BTreeMap<String, ValidatingPolicy> {
        policies
            .iter()
            .map(|p| (p.name.clone(), p.clone()))
            .collect()
    }

    /// §Version Computation: the version is the same whatever order the
    /// policies were stored in.
    #[test]
    fn version_is_independent_of_insertion_order() {
        let (a, b, c) = (policy("a", "1"), policy("b", "2"), policy("c", "3"));
        let one = set(&[a.clone(), b.clone(), c.clone()]);
        let other = set(&[c, a, b]);
        assert_eq!(of_policies(&one), of_policies(&other));
    }

    /// §Deleting a Policy: removing one changes the hash.
    #[test]
    fn deletion_changes_the_version() {
        let mut policies = set(&[policy("a", "1"), policy("b", "2")]);
        let before = of_policies(&policies);
        policies.remove("b");
        assert_ne!(of_policies(&policies), before);
    }

    /// The hash is the documented one: SHA-256 over name, then bytes, per
    /// policy in name order (here written out by hand).
    #[test]
    fn version_is_sha256_of_names_and_encoded_policies_in_name_order() {
        let (a, b) = (policy("a", "1"), policy("b", "2"));
        let mut hasher = Sha256::new();
        hasher.update(b"a");
        hasher.update(a.encode_to_vec());
        hasher.update(b"b");
        hasher.update(b.encode_to_vec());
        let expected = hex::encode(hasher.finalize());
        assert_eq!(of_policies(&set(&[b, a])), expected);
        assert_eq!(expected.len(), 64);
    }

    /// A changed policy changes the version; the empty set has the hash of
    /// nothing.
    #[test]
    fn any_change_changes_the_version() {
        let before = of_policies(&set(&[policy("a", "1")]));
        assert_ne!(of_policies(&set(&[policy("a", "2")])), before);
        assert_eq!(
            of_policies(&BTreeMap::new()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
