//! What the cache was told of each key, and how a snapshot or a NACK
//! changes it: the diff that turns whole snapshots into per-policy events.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use super::PolicySession;
use crate::policy_stream::snapshot::{self, KeyMeaning, Rejection};
use crate::protocol::{CoreEvent, RemovedReason, ResourceKey};
use crate::types::{VALIDATING_POLICY_TYPE_URL, ValidationError};
use crate::version::Version;

/// What the cache was last told of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Told {
    /// A copy with these bytes.
    Copy(Bytes),
    /// That it does not exist, or was deleted.
    Absent,
    /// That the server sent it for another evaluator: not considered.
    Skipped,
}

impl PolicySession {
    /// Tells the watchers of every policy the rejected snapshot would have
    /// changed: each served copy (it stays, with an ambient error naming
    /// the snapshot and the reason) and the bad policy itself (its own
    /// error). Names without a copy hear nothing: their absence stands.
    pub(super) fn report_nack(&mut self, rejection: &Rejection, version: &Version) {
        let bad: BTreeSet<ResourceKey> = rejection
            .policy
            .iter()
            .flat_map(|name| snapshot::keys_of(&self.cfg, name))
            .map(|name| ResourceKey::new(VALIDATING_POLICY_TYPE_URL, name))
            .filter(|key| self.subscribed.contains(key) || self.wildcard)
            .collect();
        let served = self
            .told
            .iter()
            .filter(|(_, told)| matches!(told, Told::Copy(_)))
            .map(|(key, _)| key.clone());
        let affected: BTreeSet<ResourceKey> = served.chain(bad.iter().cloned()).collect();
        for key in affected {
            let error = if bad.contains(&key) {
                rejection.message.clone()
            } else {
                format!(
                    "the snapshot of version {:?} was rejected: {}",
                    snapshot::shorten(&version.as_str()),
                    rejection.message
                )
            };
            // The next good snapshot states the key again, so that the
            // error clears even if the copy is unchanged.
            if matches!(self.told.get(&key), Some(Told::Copy(_))) {
                self.nacked.insert(key.clone());
            } else {
                self.told.remove(&key);
            }
            self.events.push_back(CoreEvent::Invalid {
                key,
                error: ValidationError(error),
                version: version.clone(),
            });
        }
    }

    /// Every key of every held policy, when `*` is subscribed.
    pub(super) fn held_keys(&self) -> Vec<ResourceKey> {
        let (Some(held), true) = (&self.held, self.wildcard) else {
            return Vec::new();
        };
        held.policies
            .keys()
            .flat_map(|name| snapshot::keys_of(&self.cfg, name))
            .map(|name| ResourceKey::new(VALIDATING_POLICY_TYPE_URL, name))
            .collect()
    }

    pub(super) fn wildcard_covers(&self, key: &ResourceKey) -> bool {
        self.wildcard
            && matches!(
                snapshot::meaning(&self.cfg, &key.type_url, &key.name),
                KeyMeaning::Policy(_)
            )
    }

    /// Tells the cache what the held snapshot says of `key`, unless it was
    /// told exactly that already (or `restate`).
    pub(super) fn state(&mut self, key: &ResourceKey, restate: bool) {
        let Some(held) = &self.held else {
            return;
        };
        let wanted = self.subscribed.contains(key) || self.wildcard_covers(key);
        let copy = match snapshot::meaning(&self.cfg, &key.type_url, &key.name) {
            KeyMeaning::Foreign => return,
            KeyMeaning::Glob => {
                self.events.push_back(CoreEvent::NotRequested {
                    key: key.clone(),
                    reason: Arc::from(
                        "the policy stream has no collections: watch `*` of the policy type instead",
                    ),
                });
                return;
            }
            KeyMeaning::Never => None,
            KeyMeaning::Policy(name) => held.policies.get(name).cloned(),
        };
        let skipped = matches!(
            snapshot::meaning(&self.cfg, &key.type_url, &key.name),
            KeyMeaning::Policy(name) if held.skipped.contains_key(name)
        );
        let version = held.version.clone();
        let before = self.told.get(key);
        match copy {
            Some(decoded) if wanted => {
                let now = Told::Copy(decoded.raw().clone());
                if !restate && before == Some(&now) {
                    return;
                }
                self.told.insert(key.clone(), now);
                self.events.push_back(CoreEvent::Upsert {
                    key: key.clone(),
                    resource: decoded,
                    version,
                    ttl: None,
                });
            }
            Some(_) => {}
            None => self.tell_absent(key, wanted, skipped),
        }
    }

    /// Tells the cache that `key` is not in the held snapshot (or is, for
    /// another evaluator: `skipped`), unless it was told so already.
    fn tell_absent(&mut self, key: &ResourceKey, wanted: bool, skipped: bool) {
        let (absent, reason) = if skipped && wanted {
            (Told::Skipped, RemovedReason::NotConsidered)
        } else {
            (Told::Absent, RemovedReason::Deleted)
        };
        let before = self.told.get(key);
        // Absence is said once, even on a new stream: only a change (a
        // copy gone, or absent for another reason) is news.
        if before == Some(&absent) {
            return;
        }
        if !wanted && !matches!(before, Some(Told::Copy(_))) {
            return;
        }
        if wanted {
            self.told.insert(key.clone(), absent);
        } else {
            self.told.remove(key);
        }
        // The snapshot is the server's whole answer: absence is a deletion,
        // not the does-not-exist timer (which means nobody answered, and
        // may call for an `#alt`).
        self.events.push_back(CoreEvent::Removed {
            key: key.clone(),
            reason,
        });
    }
}
