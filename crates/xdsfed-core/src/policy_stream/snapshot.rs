//! A response's policies, checked as one snapshot, and how policy names map
//! to cache keys.
//!
//! ```text
//! PolicyDiscoveryResponse ─► policies of another evaluation mode ─► skipped (named in the Snapshot)
//!                         ─► every other policy validated ─► all good ─► Snapshot (ACK)
//!                                                        └─► one bad  ─► Rejection (NACK, naming it)
//! policy "require-auth" ─► xdstp://{each authority}/kyverno.http.v1alpha1.ValidatingPolicy/require-auth
//!                       └► "require-auth"  (when the server serves old-style names)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use prost::Message;

use super::config::PolicySessionConfig;
use super::wire::PolicyDiscoveryResponse;
use crate::name::authority_of;
use crate::types::{
    Decoded, Erased, ErasedType, VALIDATING_POLICY_MESSAGE, VALIDATING_POLICY_TYPE_URL,
    ValidatingPolicyType, is_policy_considered,
};
use crate::version::Version;

/// A longest `error_detail` message: a server's name repeated into a NACK
/// must not grow without bound.
const MAX_DETAIL: usize = 1024;

/// A snapshot that passed validation: the policies the client serves.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// The response's `version_info`.
    pub(crate) version: Version,
    /// The policies by name.
    pub(crate) policies: BTreeMap<String, Decoded>,
    /// Entries marked `delete`, left out.
    pub(crate) deletion_markers: u64,
    /// Policies not considered, by name (`policies[i]` without one): their
    /// evaluation mode, as sent, is not one this client evaluates.
    pub(crate) skipped: BTreeMap<String, String>,
}

/// Why a snapshot was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    /// The policy at fault, when it has a usable name.
    pub(crate) policy: Option<String>,
    /// The `error_detail` message: names the policy and the field.
    pub(crate) message: String,
}

/// Checks every policy of `response`. A policy of another evaluation mode
/// (or of none) is skipped unchecked, as the upstream plugin does not
/// consider it: it is not an error. The first bad policy among the rest
/// rejects the whole snapshot: the protocol's versions cover the set, so
/// a client cannot ACK part of one.
pub(crate) fn check(response: &PolicyDiscoveryResponse) -> Result<Snapshot, Rejection> {
    let erased = Erased::<ValidatingPolicyType>::new();
    let mut snapshot = Snapshot {
        version: Version::new(&response.version_info),
        policies: BTreeMap::new(),
        deletion_markers: 0,
        skipped: BTreeMap::new(),
    };
    let mut seen = BTreeSet::new();
    for (i, policy) in response.policies.iter().enumerate() {
        if policy.delete {
            snapshot.deletion_markers += 1;
            continue;
        }
        let shown = if policy.name.is_empty() {
            format!("policies[{i}]")
        } else {
            format!("policy {:?}", shorten(&policy.name))
        };
        let usable = (!policy.name.is_empty()).then(|| policy.name.clone());
        // Unnamed entries fail validation, or are skipped, on their own.
        if usable.is_some() && !seen.insert(policy.name.as_str()) {
            return Err(Rejection {
                policy: usable,
                message: bounded(format!("{shown} appears twice in the snapshot")),
            });
        }
        if let Some(spec) = &policy.spec
            && !is_policy_considered(spec)
        {
            let name = usable.unwrap_or_else(|| format!("policies[{i}]"));
            snapshot.skipped.insert(name, spec.evaluation_mode.clone());
            continue;
        }
        let decoded = erased
            .decode(Bytes::from(policy.encode_to_vec()))
            .map_err(|e| Rejection {
                policy: usable.clone(),
                message: bounded(format!("{shown}: {e}")),
            })?;
        snapshot.policies.insert(policy.name.clone(), decoded);
    }
    Ok(snapshot)
}

/// `name` cut to 128 characters (`…` marks a cut): server text repeated
/// into messages and logs must not grow without bound.
pub(crate) fn shorten(name: &str) -> String {
    let mut shown: String = name.chars().take(128).collect();
    if shown.len() < name.len() {
        shown.push('…');
    }
    shown
}

fn bounded(mut message: String) -> String {
    if message.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// What a subscribed cache key stands for on a policy stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyMeaning<'a> {
    /// The policy of this name.
    Policy(&'a str),
    /// A glob collection: not served (the protocol has no collections).
    Glob,
    /// A name of an authority this server may not deliver: never answered.
    Foreign,
    /// Something a policy stream never carries (another type, context
    /// parameters): absent.
    Never,
}

/// What `key` (a canonical key of type `type_url`) stands for.
pub(crate) fn meaning<'a>(
    cfg: &PolicySessionConfig,
    type_url: &str,
    key: &'a str,
) -> KeyMeaning<'a> {
    if !cfg.filter.allows(key) {
        return KeyMeaning::Foreign;
    }
    if type_url != VALIDATING_POLICY_TYPE_URL {
        return KeyMeaning::Never;
    }
    let Some(authority) = authority_of(key) else {
        return KeyMeaning::Policy(key);
    };
    if crate::protocol::is_glob(key) {
        return KeyMeaning::Glob;
    }
    let id = key
        .strip_prefix("xdstp://")
        .and_then(|rest| rest.strip_prefix(authority))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_prefix(VALIDATING_POLICY_MESSAGE))
        .and_then(|rest| rest.strip_prefix('/'));
    match id {
        Some(id) if !id.is_empty() && !id.contains(['?', '#', '/']) => KeyMeaning::Policy(id),
        _ => KeyMeaning::Never,
    }
}

/// Every cache key of the policy `name`.
pub(crate) fn keys_of(cfg: &PolicySessionConfig, name: &str) -> Vec<Arc<str>> {
    let mut keys: Vec<Arc<str>> = cfg
        .authorities
        .iter()
        .map(|a| Arc::from(format!("xdstp://{a}/{VALIDATING_POLICY_MESSAGE}/{name}")))
        .collect();
    if cfg.old_style() {
        keys.push(Arc::from(name));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> PolicySessionConfig {
        PolicySessionConfig::new("c", ["policies.onprem"]).with_old_style(false)
    }

    #[test]
    fn keys_map_back_to_their_policy() {
        let cfg = cfg();
        let keys = keys_of(&cfg, "require-auth");
        assert_eq!(
            &*keys[0],
            "xdstp://policies.onprem/kyverno.http.v1alpha1.ValidatingPolicy/require-auth"
        );
        assert_eq!(keys.len(), 1);
        assert_eq!(
            meaning(&cfg, VALIDATING_POLICY_TYPE_URL, &keys[0]),
            KeyMeaning::Policy("require-auth")
        );
    }

    #[test]
    fn other_names_are_globs_foreign_or_never() {
        let cfg = cfg();
        let url = VALIDATING_POLICY_TYPE_URL;
        let glob = "xdstp://policies.onprem/kyverno.http.v1alpha1.ValidatingPolicy/*";
        assert_eq!(meaning(&cfg, url, glob), KeyMeaning::Glob);
        let foreign = "xdstp://other/kyverno.http.v1alpha1.ValidatingPolicy/p";
        assert_eq!(meaning(&cfg, url, foreign), KeyMeaning::Foreign);
        assert_eq!(meaning(&cfg, url, "bare"), KeyMeaning::Foreign);
        let cluster = "xdstp://policies.onprem/envoy.config.cluster.v3.Cluster/p";
        assert_eq!(meaning(&cfg, url, cluster), KeyMeaning::Never);
        let with_params = "xdstp://policies.onprem/kyverno.http.v1alpha1.ValidatingPolicy/p?a=b";
        assert_eq!(meaning(&cfg, url, with_params), KeyMeaning::Never);
        assert_eq!(
            meaning(&cfg, "type.googleapis.com/x", cluster),
            KeyMeaning::Never
        );
    }
}
