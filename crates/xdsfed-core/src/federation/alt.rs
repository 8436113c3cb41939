//! `#alt` alternatives (xDS TP1): fetched while the primary cannot deliver.

use super::Federation;
use crate::protocol::ResourceKey;

impl Federation {
    /// Whether `entry` has an alternative.
    pub(super) fn has_alt(&self, entry: &ResourceKey) -> bool {
        self.route(entry).is_some_and(|r| r.alt.is_some())
    }

    /// Whether `entry`'s alternative is fetched and serving.
    pub(super) fn alt_active(&self, entry: &ResourceKey) -> bool {
        self.route(entry)
            .and_then(|r| r.alt.as_ref())
            .is_some_and(|a| a.active)
    }

    /// The primary cannot deliver `entry`: its alternative is fetched, on
    /// its own authority.
    pub(super) fn start_alt(&mut self, entry: &ResourceKey) {
        let Some(alt) = self
            .route_mut(entry)
            .and_then(|r| r.alt.as_mut())
            .filter(|a| !a.active)
        else {
            return;
        };
        alt.active = true;
        let key = alt.key.clone();
        tracing::info!(resource = %entry, alt = %key, "primary cannot deliver; using the #alt alternative");
        match self.home_of(&key.name) {
            Ok(home) => self.fetch(key, home, entry.clone()),
            Err(error) => tracing::warn!(alt = %key, %error, "the #alt alternative has no servers"),
        }
    }

    /// The primary delivers again: the alternative is let go.
    pub(super) fn leave_alt(&mut self, entry: &ResourceKey) {
        let Some(alt) = self
            .route_mut(entry)
            .and_then(|r| r.alt.as_mut())
            .filter(|a| a.active)
        else {
            return;
        };
        alt.active = false;
        let key = alt.key.clone();
        tracing::info!(resource = %entry, alt = %key, "primary delivers again; leaving the #alt alternative");
        self.unfetch(&key, entry);
    }
}
