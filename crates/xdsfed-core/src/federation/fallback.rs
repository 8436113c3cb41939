//! gRFC A71 within each authority: falling back when the active server
//! fails with resources unanswered (or, with gRFC A95's
//! `fallback_on_reachability_only`, whenever it fails), and switching back
//! when a higher-priority server answers again.

use super::state::Home;
use super::{Action, Answers, Federation};
use crate::authority::{Partition, ServerId};
use crate::error::XdsError;
use crate::hash::HashSet;
use crate::protocol::ResourceKey;

impl Federation {
    /// gRFC A71: the first response from a server before an authority's
    /// active one makes it active again. The servers after it lose the
    /// authority's subscriptions, and one left with none is closed now.
    pub(super) fn switch_back(&mut self, server: ServerId) {
        let mut dropped: Vec<(ServerId, ResourceKey)> = Vec::new();
        for (partition, authority) in &mut self.authorities {
            let Some(index) = authority.index_of(server) else {
                continue;
            };
            if index >= authority.active {
                continue;
            }
            let name = self.registry.name(server);
            tracing::info!(%partition, server = %name, "higher-priority server answers again; switching back to it");
            let after = authority
                .servers
                .iter()
                .take(authority.active + 1)
                .skip(index + 1);
            for lower in after {
                dropped.extend(authority.keys.iter().map(|k| (*lower, k.clone())));
            }
            authority.active = index;
        }
        let mut lower: HashSet<ServerId> = HashSet::default();
        for (server, key) in dropped {
            lower.insert(server);
            self.unsubscribe(server, key);
        }
        for server in lower {
            if !self.has_subscriptions(server) {
                self.actions.push_back(Action::Close { server });
            }
        }
    }

    /// gRFC A57 failure of `server`: fall back (A71: with a resource
    /// unanswered; A95: with `fallback_on_reachability_only`, in any case),
    /// start alternatives, or report the failure, per authority for which
    /// it is the active server.
    pub(super) fn on_failure(&mut self, server: ServerId, error: &XdsError, answers: &dyn Answers) {
        let mut affected: Vec<ResourceKey> = Vec::new();
        let mut transient: HashSet<ResourceKey> = HashSet::default();
        let mut fall_back: Vec<Partition> = Vec::new();
        for (partition, authority) in &self.authorities {
            if authority.index_of(server) != Some(authority.active) {
                continue;
            }
            let readers = || {
                authority
                    .keys
                    .iter()
                    .filter_map(|k| self.fetches.get(k).map(|f| (k, f)))
                    .flat_map(|(k, f)| f.readers.iter(k))
            };
            // gRFC A95: with `fallback_on_reachability_only` the failure
            // alone is reason enough, for an authority that fetches anything.
            let reachability = authority.reachability_only && !authority.keys.is_empty();
            let waiting = reachability || readers().any(|r| !answers.is_answered(r));
            if waiting && authority.active + 1 < authority.servers.len() {
                // Copies keep serving, with an ambient error; watchers
                // without one wait for the fallback server.
                transient.extend(readers().filter(|r| answers.has_copy(r)).cloned());
                fall_back.push(partition.clone());
                continue;
            }
            affected.extend(authority.keys.iter().cloned());
        }
        affected.extend(
            self.fetches
                .iter()
                .filter(|(_, f)| matches!(f.home, Home::Server(id) if id == server))
                .map(|(k, _)| k.clone()),
        );
        for partition in fall_back {
            if let Some(authority) = self.authorities.get_mut(&partition) {
                authority.active += 1;
            }
            self.subscribe_on_active(&partition);
        }
        for key in affected {
            self.fail_fetch(&key, answers, &mut transient);
        }
        let mut transient: Vec<ResourceKey> = transient.into_iter().collect();
        transient.sort();
        for key in transient {
            self.actions.push_back(Action::Transient {
                key,
                error: error.clone(),
            });
        }
    }

    /// A fetch whose server failed with no fallback left: each reader whose
    /// primary it is and who holds no copy starts its alternative; readers
    /// it shows to hear of the failure.
    fn fail_fetch(
        &mut self,
        key: &ResourceKey,
        answers: &dyn Answers,
        transient: &mut HashSet<ResourceKey>,
    ) {
        let Some(fetch) = self.fetches.get(key) else {
            return;
        };
        let readers: Vec<ResourceKey> = fetch.readers.iter(key).cloned().collect();
        for reader in readers {
            let Some(route) = self.route(&reader) else {
                continue;
            };
            let alt_active = route.alt.as_ref().is_some_and(|a| a.active);
            // An alternative stands in for a resource the primary cannot
            // deliver; a copy or a known absence is the primary's answer.
            if reader == *key && route.alt.is_some() && !answers.is_answered(&reader) {
                self.start_alt(&reader);
                continue;
            }
            let shows_key = reader == *key && !alt_active
                || route
                    .alt
                    .as_ref()
                    .is_some_and(|a| a.active && a.key == *key);
            if shows_key {
                transient.insert(reader);
            }
        }
    }
}
