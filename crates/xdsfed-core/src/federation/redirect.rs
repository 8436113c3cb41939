//! Redirect chains (xDS TP1 `ResourceLocator`s): following, cutting and
//! refusing them.

use std::sync::Arc;

use super::route::{From, rekeyed};
use super::{Action, Federation, short_type};
use crate::error::{Cause, ErrorKind, RedirectRefusal, XdsError};
use crate::name::{ResourceName, authority_of};
use crate::protocol::{CoreEvent, ResourceKey, glob_of, is_glob};

impl Federation {
    /// Routes `event`, about `key`, to `entry` if `key` is a target of the
    /// entry's redirect chain. Returns whether it was one.
    pub(super) fn route_hop(
        &mut self,
        entry: &ResourceKey,
        key: &ResourceKey,
        event: &CoreEvent,
        from: &From<'_>,
    ) -> bool {
        let Some(at) = self
            .redirects
            .get(entry)
            .and_then(|r| r.hops.iter().position(|h| h == key))
        else {
            return false;
        };
        if let CoreEvent::Redirect { target, .. } = event {
            self.on_redirect(entry, key, target, from);
            return true;
        }
        // This target answers for itself now: the ones it led to are no
        // longer followed.
        self.cut_chain(entry, at + 1);
        let mut source = self.source(from, key, entry);
        source.redirected = true;
        self.deliver(rekeyed(event, entry), source);
        true
    }

    /// `from_key` (the entry itself, or a target of its chain) redirects to
    /// `target`: follows it, unless that makes a loop, exceeds the hop limit
    /// or changes the type. Targets after `from_key` are no longer followed.
    pub(super) fn on_redirect(
        &mut self,
        entry: &ResourceKey,
        from_key: &ResourceKey,
        target: &Arc<str>,
        from: &From<'_>,
    ) {
        let keep = self
            .redirects
            .get(entry)
            .and_then(|r| r.hops.iter().position(|h| h == from_key))
            .map_or(0, |at| at + 1);
        self.cut_chain(entry, keep);
        // A hop fetched for another entry already replays its answer to
        // this one (see `Federation::replay`): a redirect there extends
        // this chain too.
        self.follow(entry, from_key, target, from);
    }

    /// Adds `target` to `entry`'s chain after `from_key` and fetches it, or
    /// reports an error for the entry when it may not be followed.
    fn follow(
        &mut self,
        entry: &ResourceKey,
        from_key: &ResourceKey,
        target: &Arc<str>,
        from: &From<'_>,
    ) {
        let hops: Vec<ResourceKey> = self
            .redirects
            .get(entry)
            .map(|r| r.hops.clone())
            .unwrap_or_default();
        let hop = ResourceKey::new(Arc::clone(&entry.type_url), Arc::clone(target));
        let chain: Vec<&str> = std::iter::once(&*entry.name)
            .chain(hops.iter().map(|h| &*h.name))
            .chain(std::iter::once(&**target))
            .collect();
        let chain = chain.join(" -> ");
        let what = format!(
            "{} {} redirected by server {} (authority {})",
            short_type(&entry.type_url),
            entry.name,
            from.server,
            authority_of(&from_key.name).unwrap_or("none"),
        );
        if let Some((why, detail)) = self.refusal(entry, &hop, &hops, target) {
            self.refuse(entry, from, why, format!("{what}: {detail}: {chain}"));
            return;
        }
        let home = match self.home_of(target) {
            Ok(home) => home,
            Err(e) => {
                let message = format!("{what} to {target}: refused ({chain}): {e}");
                self.refuse(entry, from, RedirectRefusal::UnknownAuthority, message);
                return;
            }
        };
        tracing::debug!(resource = %entry, %chain, "following a redirect");
        self.redirects
            .entry(entry.clone())
            .or_default()
            .hops
            .push(hop.clone());
        self.index_redirect(entry);
        self.fetch(hop, home, entry.clone());
    }

    /// Why the hop to `target` may not be followed, if it may not.
    fn refusal(
        &self,
        entry: &ResourceKey,
        hop: &ResourceKey,
        hops: &[ResourceKey],
        target: &str,
    ) -> Option<(RedirectRefusal, String)> {
        let max = self.max_redirects;
        if is_glob(target) {
            // A glob collection names no resource to stand in for the entry
            // (and a member redirected to its own glob would wait forever).
            return Some((
                RedirectRefusal::GlobTarget,
                format!("the target {target} is a glob collection, not a resource"),
            ));
        }
        if hop == entry || hops.contains(hop) {
            return Some((RedirectRefusal::Loop, "redirect loop".to_owned()));
        }
        if hops.len() >= max {
            return Some((
                RedirectRefusal::TooManyHops { limit: max },
                format!("more than {max} redirects in a row"),
            ));
        }
        if let Err(e) = ResourceName::parse(target).and_then(|n| n.check_type(&entry.type_url)) {
            return Some((
                RedirectRefusal::InvalidTarget,
                format!("target of another type refused ({e})"),
            ));
        }
        None
    }

    fn refuse(
        &mut self,
        entry: &ResourceKey,
        from: &From<'_>,
        why: RedirectRefusal,
        message: String,
    ) {
        tracing::warn!(resource = %entry, %message, "redirect refused");
        let error = XdsError::new(ErrorKind::ServerError, message)
            .with_cause(Cause::RedirectRefused(why))
            .with_resource(entry.clone())
            .with_server(Arc::clone(from.server));
        self.actions.push_back(Action::DataError {
            key: entry.clone(),
            error,
        });
    }

    /// Stops following the hops of `entry`'s chain from index `keep` on.
    fn cut_chain(&mut self, entry: &ResourceKey, keep: usize) {
        let Some(redirect) = self.redirects.get_mut(entry) else {
            return;
        };
        if keep >= redirect.hops.len() {
            return;
        }
        let dropped: Vec<ResourceKey> = redirect.hops.drain(keep..).collect();
        for hop in dropped {
            self.unfetch(&hop, entry);
        }
    }

    /// The entry answers for itself: its redirect targets are no longer
    /// followed.
    pub(super) fn stop_redirect(&mut self, entry: &ResourceKey) {
        // Every update asks; with no redirect anywhere, the key is not
        // hashed (a map's `remove` hashes even when it is empty).
        if self.redirects.is_empty() {
            return;
        }
        let Some(redirect) = self.redirects.remove(entry) else {
            return;
        };
        for hop in redirect.hops {
            self.unfetch(&hop, entry);
        }
        if let Some(glob) = glob_of(&entry.name) {
            let glob = ResourceKey::new(Arc::clone(&entry.type_url), glob);
            if let Some(members) = self.glob_redirects.get_mut(&glob) {
                members.remove(entry);
                if members.is_empty() {
                    self.glob_redirects.remove(&glob);
                }
            }
        }
    }
}
