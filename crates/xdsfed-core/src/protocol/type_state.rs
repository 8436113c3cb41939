//! Per-type state of a session, split by lifetime.
//!
//! The ADS stream multiplexes one logical xDS stream per resource type. Each
//! type's state is two structs, so that "what survives a reconnect" is a type,
//! not a comment:
//!
//! - [`Durable`]: subscriptions, the resources received (and their versions),
//!   the last ACKed SotW version. "The version for a resource type is not a
//!   property of an individual xDS stream but rather a property of the
//!   resources themselves" (xds-protocol-v3, ACK/NACK).
//! - [`PerStream`]: the last nonce, what the server has been told about the
//!   subscriptions, and the pending changes. "The nonce is valid only in the
//!   context of an individual xDS stream; it does not survive stream
//!   restarts."
//!
//! Subscription changes are kept as two pending sets (`add`, `remove`)
//! against what was sent, so a delta request carries only the change and the
//! work per change is `O(1)`, whatever the number of subscriptions.

use super::glob::{GlobKey, glob_of, is_glob, with_glob_of};
use crate::hash::{HashMap, HashSet, NameMap};
use crate::version::Version;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The wildcard name.
pub(crate) const WILDCARD: &str = "*";

/// One resource type's state on one session.
#[derive(Debug, Default)]
pub(crate) struct TypeState {
    /// Survives reconnects.
    pub(crate) durable: Durable,
    /// Reset by every new stream.
    pub(crate) stream: PerStream,
}

/// State that survives a reconnect.
#[derive(Debug, Default)]
pub(crate) struct Durable {
    /// Names explicitly subscribed (canonical keys).
    pub(crate) subscribed: HashSet<Arc<str>>,
    /// An explicit `*` subscription.
    pub(crate) wildcard: bool,
    /// Resources received and neither deleted nor expired since, with their
    /// version: the "cached" set of gRFC A57 (no does-not-exist timer for
    /// them) and the delta `initial_resource_versions` of a reconnect.
    pub(crate) held: Held,
    /// Names the server said do not exist (deleted, or never had); a new
    /// stream does not time them out again.
    pub(crate) absent: HashSet<Arc<str>>,
    /// Names the does-not-exist timer reported: no server answered them. A
    /// new stream does not time them out again either, but the server's
    /// own answer about them, even a deletion, is still news.
    pub(crate) timed_out: HashSet<Arc<str>>,
    /// Copies from the state directory this server sent to a previous run
    /// of the client, not yet confirmed ([`super::resume`]).
    pub(crate) resumed: HashMap<Arc<str>, super::resume::Resumed>,
    /// SotW: the `version_info` of the last ACKed response.
    pub(crate) acked_version: Version,
    /// How many of `subscribed` are glob collections (so that names are
    /// matched against globs only when there are some).
    pub(crate) globs: usize,
}

impl Durable {
    /// The session's own copy of `name` (subscribed or held), so that a
    /// name the server echoes byte for byte is neither parsed again nor
    /// allocated again: a canonical key is its own canonical form.
    ///
    /// Says too whether the name is subscribed by name, which answers
    /// [`TypeState::wants`] without looking it up again: `None` for a
    /// member held under its glob, found there first without a look at
    /// the subscribed names (a probe each LEDS endpoint update would miss).
    pub(crate) fn shared_name(&self, name: &str) -> Option<(Arc<str>, Option<bool>)> {
        if let Some(member) = self.held.member_name(name) {
            return Some((Arc::clone(member), None));
        }
        if let Some(subscribed) = self.subscribed.get(name) {
            return Some((Arc::clone(subscribed), Some(true)));
        }
        self.held
            .flat_name(name)
            .map(|held| (Arc::clone(held), Some(false)))
    }

    /// `name` exists after all: neither known absent nor timed out. Both
    /// sets are mostly empty, and then nothing is hashed.
    pub(crate) fn forget_absence(&mut self, name: &str) {
        if !self.absent.is_empty() {
            self.absent.remove(name);
        }
        if !self.timed_out.is_empty() {
            self.timed_out.remove(name);
        }
    }
}

/// The resources a session holds, with their versions, each held once:
/// a member of a glob collection under its glob, any other name in a flat
/// table.
///
/// Rule: a name received while a glob of its type is subscribed, and that
/// is a member of one by its spelling, is held in its glob's [`NameMap`]
/// and nowhere else; every other name in `versions`. A name held already
/// stays where it is when its version changes. Releasing a glob then costs
/// its members, not every resource of the type, and a LEDS endpoint costs
/// its name and version in a slice of its collection's members, 24 bytes,
/// where a flat table and an index of members beside it took some 50 (test
/// `a_member_is_held_once_under_its_glob`).
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Held names that are no glob's indexed member.
    versions: HashMap<Arc<str>, Version>,
    /// Held members by the glob they belong to ([`glob_of`]). A subscribed
    /// glob is keyed by the subscription's own copy of its name.
    by_glob: HashMap<Arc<str>, NameMap<Version>>,
}

impl Held {
    /// The glob members held under `name`'s glob, when there are any.
    fn members(&self, name: &str) -> Option<&NameMap<Version>> {
        if self.by_glob.is_empty() {
            return None;
        }
        with_glob_of(name, |glob| self.by_glob.get(glob)).flatten()
    }

    /// The session's own copy of `name` and its version, when it holds it.
    fn get_key_value(&self, name: &str) -> Option<(&Arc<str>, &Version)> {
        if let Some(held) = self.members(name).and_then(|m| m.get_key_value(name)) {
            return Some(held);
        }
        if self.versions.is_empty() {
            return None;
        }
        self.versions.get_key_value(name)
    }

    /// The session's own copy of `name`, when it holds it under its glob.
    fn member_name(&self, name: &str) -> Option<&Arc<str>> {
        let (held, _) = self.members(name)?.get_key_value(name)?;
        Some(held)
    }

    /// The session's own copy of `name`, when it holds it as no glob's
    /// member.
    fn flat_name(&self, name: &str) -> Option<&Arc<str>> {
        if self.versions.is_empty() {
            return None;
        }
        self.versions.get_key_value(name).map(|(held, _)| held)
    }

    /// The version held for `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Version> {
        self.get_key_value(name).map(|(_, version)| version)
    }

    /// The version held for `name`, to change in place.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Version> {
        if !self.by_glob.is_empty()
            && let Some(held) =
                with_glob_of(name, |glob| self.by_glob.get_mut(glob)?.get_mut(name)).flatten()
        {
            return Some(held);
        }
        self.versions.get_mut(name)
    }

    /// Whether `name` is held.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.get_key_value(name).is_some()
    }

    /// Makes room for `names` more names in one step when nothing is held
    /// yet, rather than the table doubling its way there (a cold start
    /// brings tens of thousands in one response). Counting which names are
    /// new would hash every name once more: a later response finds room,
    /// or grows the table the usual way. Members of globs go to their
    /// globs' slices, which are sized exactly anyway.
    pub(crate) fn reserve_for(&mut self, names: usize, globs: bool) {
        if !globs && self.versions.is_empty() {
            self.versions.reserve(names);
        }
    }

    /// Holds `name` at `version`; `globs` is the type's subscribed names
    /// when any glob of the type is subscribed (a new name that is a
    /// member of a glob by its spelling is then held under that glob,
    /// keyed by the subscription's own copy of the glob's name when there
    /// is one).
    pub(crate) fn insert(
        &mut self,
        name: Arc<str>,
        version: Version,
        globs: Option<&HashSet<Arc<str>>>,
    ) {
        if !self.by_glob.is_empty()
            && let Some(held) =
                with_glob_of(&name, |glob| self.by_glob.get_mut(glob)?.get_mut(&name)).flatten()
        {
            *held = version;
            return;
        }
        if let Some(subscribed) = globs
            && let Some(glob) = glob_of(&name)
            && (self.versions.is_empty() || !self.versions.contains_key(&*name))
        {
            match self.by_glob.get_mut(&*glob) {
                Some(members) => {
                    members.insert(name, version);
                }
                None => {
                    let glob = subscribed.get(&*glob).map_or(glob, Arc::clone);
                    self.by_glob.entry(glob).or_default().insert(name, version);
                }
            }
            return;
        }
        // One probe: a name held already keeps its key and takes the
        // version (a cold start's million new names each cost one lookup).
        self.versions.insert(name, version);
    }

    /// Forgets `name`; its version, if it was held.
    pub(crate) fn remove(&mut self, name: &str) -> Option<Version> {
        if !self.by_glob.is_empty()
            && let Some(glob) = glob_of(name)
            && let Some(members) = self.by_glob.get_mut(&*glob)
            && let Some(version) = members.remove(name)
        {
            if members.is_empty() {
                self.by_glob.remove(&*glob);
            }
            return Some(version);
        }
        self.versions.remove(name)
    }

    /// The held members indexed under `glob`.
    pub(crate) fn members_of<'a>(&'a self, glob: &str) -> impl Iterator<Item = &'a Arc<str>> {
        self.by_glob.get(glob).into_iter().flat_map(NameMap::keys)
    }

    /// Keeps the names `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Arc<str>) -> bool) {
        self.versions.retain(|name, _| keep(name));
        self.by_glob.retain(|_, members| {
            members.retain(|name, _| keep(name));
            !members.is_empty()
        });
    }

    /// Every held name and its version.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Version)> {
        let members = self.by_glob.values().flat_map(NameMap::iter);
        self.versions.iter().chain(members)
    }

    /// Every held name.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(name, _)| name)
    }
}

/// State that a new stream resets.
#[derive(Debug, Default)]
pub(crate) struct PerStream {
    /// The nonce of the last response of this type on this stream.
    pub(crate) nonce: String,
    /// Whether a request of this type was sent on this stream. Until then a
    /// response of this type is not ours to answer, and the first request
    /// must not be empty: "if the client sends a request for a given resource
    /// type but has never explicitly subscribed to any resource names [...]
    /// the server should treat that identically to [...] `*`".
    pub(crate) requested: bool,
    /// The names the server has been told we subscribe to.
    pub(crate) sent: HashSet<Arc<str>>,
    /// Whether the server has been told we subscribe to `*`.
    pub(crate) sent_wildcard: bool,
    /// Subscribed, not yet told.
    pub(crate) add: BTreeSet<Arc<str>>,
    /// Unsubscribed, not yet told.
    pub(crate) remove: BTreeSet<Arc<str>>,
    /// Whether the type sits in the session's queue of types to write.
    pub(crate) queued: bool,
}

/// The subscription changes one request carries.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// Newly subscribed names, sorted; `*` is not among them.
    pub(crate) subscribe: Vec<Arc<str>>,
    /// Newly unsubscribed names, sorted.
    pub(crate) unsubscribe: Vec<Arc<str>>,
    /// `Some(true)`: subscribe `*`; `Some(false)`: unsubscribe `*`.
    pub(crate) wildcard: Option<bool>,
}

impl Changes {
    pub(crate) fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.unsubscribe.is_empty() && self.wildcard.is_none()
    }
}

impl TypeState {
    /// Whether resources named `name` are of interest: subscribed, `*`, or
    /// a member of a subscribed glob collection.
    pub(crate) fn wants(&self, name: &(impl GlobKey + ?Sized)) -> bool {
        // The glob first: a member's name is then not looked up among the
        // subscribed names, where it nearly never is.
        self.wants_unsubscribed(name) || self.durable.subscribed.contains(name.text())
    }

    /// [`TypeState::wants`] for a name known not to be subscribed by name
    /// (its lookup just said so): `*`, or a member of a subscribed glob.
    /// A LEDS member's update then looks its name up once, not twice.
    pub(crate) fn wants_unsubscribed(&self, name: &(impl GlobKey + ?Sized)) -> bool {
        self.durable.wildcard
            || (self.durable.globs > 0
                && with_glob_of(name, |g| self.durable.subscribed.contains(g)) == Some(true))
    }

    /// Whether anything at all is subscribed.
    pub(crate) fn has_interest(&self) -> bool {
        self.durable.wildcard || !self.durable.subscribed.is_empty()
    }

    /// Records a subscription; returns whether the server must be told.
    pub(crate) fn subscribe(&mut self, name: Arc<str>) -> bool {
        if !self.durable.subscribed.insert(Arc::clone(&name)) {
            return false;
        }
        if is_glob(&name) {
            self.durable.globs += 1;
        }
        // A name still on the wire (its unsubscription not yet written) is
        // subscribed again anyway: the spec lets a client repeat a
        // subscription, and writing it re-arms its does-not-exist timer,
        // which the unsubscription cancelled.
        self.stream.remove.remove(&name);
        self.stream.add.insert(name);
        true
    }

    /// Records an unsubscription; returns whether the server must be told.
    /// Forgets the resource unless `*` still delivers it.
    pub(crate) fn unsubscribe(&mut self, name: &Arc<str>) -> bool {
        if !self.durable.subscribed.remove(name) {
            return false;
        }
        if !self.durable.wildcard {
            self.durable.held.remove(name);
            self.durable.absent.remove(name);
            self.durable.timed_out.remove(name);
        }
        if is_glob(name) {
            self.durable.globs = self.durable.globs.saturating_sub(1);
            if !self.durable.wildcard {
                // Members only the glob delivered are forgotten with it:
                // the glob's own members, found by index, not by walking
                // every resource of the type.
                let subscribed = &self.durable.subscribed;
                let orphans: Vec<Arc<str>> = self
                    .durable
                    .held
                    .members_of(name)
                    .filter(|member| !subscribed.contains(*member))
                    .cloned()
                    .collect();
                for member in orphans {
                    self.durable.held.remove(&member);
                }
            }
        }
        self.stream.add.remove(name);
        if self.stream.sent.contains(name) {
            self.stream.remove.insert(Arc::clone(name));
        }
        true
    }

    /// Records the `*` subscription. `None` when nothing changed; otherwise
    /// the names forgotten because only `*` delivered them.
    pub(crate) fn set_wildcard(&mut self, on: bool) -> Option<Vec<Arc<str>>> {
        if self.durable.wildcard == on {
            return None;
        }
        self.durable.wildcard = on;
        let mut dropped = Vec::new();
        if !on {
            let subscribed = &self.durable.subscribed;
            self.durable.held.retain(|name| {
                let keep = subscribed.contains(name);
                if !keep {
                    dropped.push(Arc::clone(name));
                }
                keep
            });
            self.durable.absent.retain(|name| subscribed.contains(name));
            self.durable
                .timed_out
                .retain(|name| subscribed.contains(name));
        }
        Some(dropped)
    }

    /// Whether a request of this type has something to say, ACKs aside.
    #[cfg(test)]
    pub(crate) fn has_changes(&self) -> bool {
        !self.stream.add.is_empty()
            || !self.stream.remove.is_empty()
            || self.stream.sent_wildcard != self.durable.wildcard
    }

    /// Resets the per-stream state for a new stream: everything subscribed is
    /// to be sent again ("the reconnecting client must provide the server
    /// with all resource names it is interested in").
    pub(crate) fn reset_stream(&mut self) {
        self.stream = PerStream {
            add: self.durable.subscribed.iter().cloned().collect(),
            ..PerStream::default()
        };
    }

    /// Takes the pending changes, recording them as told to the server.
    pub(crate) fn take_changes(&mut self) -> Changes {
        let stream = &mut self.stream;
        let subscribe: Vec<Arc<str>> = std::mem::take(&mut stream.add).into_iter().collect();
        let unsubscribe: Vec<Arc<str>> = std::mem::take(&mut stream.remove).into_iter().collect();
        for name in &subscribe {
            stream.sent.insert(Arc::clone(name));
        }
        for name in &unsubscribe {
            stream.sent.remove(name);
        }
        let wildcard =
            (stream.sent_wildcard != self.durable.wildcard).then_some(self.durable.wildcard);
        stream.sent_wildcard = self.durable.wildcard;
        Changes {
            subscribe,
            unsubscribe,
            wildcard,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    /// xDS TP1 §Glob: members sit directly under the glob's path, with
    /// exactly its context parameters.
    #[test]
    fn glob_members_match_their_glob_only() {
        let mut t = TypeState::default();
        t.subscribe(name("xdstp://a/T/foo/*?k=v"));
        assert!(t.wants("xdstp://a/T/foo/bar?k=v"));
        assert!(!t.wants("xdstp://a/T/foo/bar"));
        assert!(!t.wants("xdstp://a/T/foo/bar?k=v&x=y"));
        assert!(!t.wants("xdstp://a/T/foo/bar/baz?k=v"));
        assert!(!t.wants("xdstp://a/T/other/bar?k=v"));
        assert_eq!(glob_of("xdstp://a/T/foo/*"), None);
        assert!(is_glob("xdstp://a/T/foo/*?k=v"));
        assert!(!is_glob("xdstp://a/T/foo/x*"));
    }

    #[test]
    fn unsubscribing_a_glob_forgets_its_members() {
        let mut t = TypeState::default();
        t.subscribe(name("xdstp://a/T/g/*"));
        t.subscribe(name("xdstp://a/T/g/kept"));
        let subscribed = t.durable.subscribed.clone();
        for member in ["xdstp://a/T/g/m", "xdstp://a/T/g/kept"] {
            t.durable
                .held
                .insert(name(member), Version::from("1"), Some(&subscribed));
        }
        t.unsubscribe(&name("xdstp://a/T/g/*"));
        assert!(!t.wants("xdstp://a/T/g/m"));
        assert!(!t.durable.held.contains_key("xdstp://a/T/g/m"));
        assert!(t.durable.held.contains_key("xdstp://a/T/g/kept"));
    }

    #[test]
    fn subscribe_then_unsubscribe_before_sending_leaves_nothing_to_send() {
        let mut t = TypeState::default();
        t.subscribe(name("a"));
        t.unsubscribe(&name("a"));
        assert!(!t.has_changes());
        assert!(t.take_changes().is_empty());
    }

    #[test]
    fn resubscribe_before_an_unsubscribe_is_written_writes_a_subscription() {
        let mut t = TypeState::default();
        t.subscribe(name("a"));
        let _ = t.take_changes();
        t.unsubscribe(&name("a"));
        assert!(t.has_changes());
        t.subscribe(name("a"));
        let changes = t.take_changes();
        assert_eq!(changes.subscribe, vec![name("a")]);
        assert!(changes.unsubscribe.is_empty());
    }

    #[test]
    fn reset_stream_resends_every_subscription() {
        let mut t = TypeState::default();
        t.subscribe(name("b"));
        t.subscribe(name("a"));
        t.set_wildcard(true);
        let _ = t.take_changes();
        t.reset_stream();
        let changes = t.take_changes();
        assert_eq!(changes.subscribe, vec![name("a"), name("b")]);
        assert_eq!(changes.wildcard, Some(true));
    }

    #[test]
    fn unsubscribe_forgets_the_held_copy_unless_wildcard_delivers_it() {
        let mut t = TypeState::default();
        t.subscribe(name("a"));
        t.durable.held.insert(name("a"), Version::from("1"), None);
        t.set_wildcard(true);
        t.unsubscribe(&name("a"));
        assert!(t.durable.held.contains_key("a"));
        t.set_wildcard(false);
        assert!(!t.durable.held.contains_key("a"));
    }

    /// A subscribed glob's index is keyed by the subscription's copy of
    /// its name: one copy a collection.
    #[test]
    fn a_subscribed_globs_index_shares_the_subscriptions_name() {
        const GLOB: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/web/*";
        let glob = name(GLOB);
        let mut t = TypeState::default();
        t.subscribe(Arc::clone(&glob));
        let subscribed = t.durable.subscribed.clone();
        for id in ["e1", "e2"] {
            t.durable.held.insert(
                name(&GLOB.replace('*', id)),
                Version::from("1"),
                Some(&subscribed),
            );
        }
        let (indexed, members) = t.durable.held.by_glob.get_key_value(GLOB).expect("indexed");
        assert_eq!(members.len(), 2);
        assert!(
            Arc::ptr_eq(indexed, &glob),
            "the subscription's copy, shared"
        );
    }

    /// Rule of [`Held`]: a member received while its glob is subscribed is
    /// held once, under its glob; a name held before stays where it is.
    #[test]
    fn a_member_is_held_once_under_its_glob() {
        const GLOB: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/web/*";
        let member = |id: &str| name(&GLOB.replace('*', id));
        let mut t = TypeState::default();
        t.durable
            .held
            .insert(member("early"), Version::from("1"), None);
        t.subscribe(name(GLOB));
        let subscribed = t.durable.subscribed.clone();
        let held = &mut t.durable.held;
        for id in ["e1", "e2", "early"] {
            held.insert(member(id), Version::from("2"), Some(&subscribed));
        }
        held.insert(member("e1"), Version::from("3"), Some(&subscribed));

        assert_eq!(held.versions.len(), 1, "only the name held before");
        assert!(held.versions.contains_key(&*member("early")));
        let under: Vec<&str> = held.members_of(GLOB).map(|n| &**n).collect();
        assert_eq!(under.len(), 2);
        assert!(held.get(&member("e1")).is_some_and(|v| *v == "3"));
        assert!(held.get(&member("early")).is_some_and(|v| *v == "2"));
        assert_eq!(held.iter().count(), 3);

        let own = Arc::clone(held.member_name(&member("e2")).expect("held"));
        assert_eq!(
            held.remove(&member("e2")).map(String::from),
            Some("2".into())
        );
        assert!(!held.contains_key(&own));
        held.retain(|n| !n.ends_with("/e1"));
        assert_eq!(held.keys().count(), 1);
        assert!(held.by_glob.is_empty(), "a glob goes with its last member");
    }

    #[test]
    fn releasing_a_glob_forgets_its_members_only() {
        const G1: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/web/*";
        const G2: &str = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/api/*";
        let member = |glob: &str, id: &str| name(&glob.replace('*', id));
        let mut t = TypeState::default();
        t.subscribe(name(G1));
        t.subscribe(name(G2));
        // A member also subscribed on its own outlives its glob.
        t.subscribe(member(G1, "pinned"));
        for (glob, id) in [(G1, "e1"), (G1, "e2"), (G1, "pinned"), (G2, "e1")] {
            let subscribed = t.durable.subscribed.clone();
            t.durable
                .held
                .insert(member(glob, id), Version::from("1"), Some(&subscribed));
        }
        t.unsubscribe(&name(G1));
        assert!(!t.durable.held.contains_key(&member(G1, "e1")));
        assert!(!t.durable.held.contains_key(&member(G1, "e2")));
        assert!(t.durable.held.contains_key(&member(G1, "pinned")));
        assert!(t.durable.held.contains_key(&member(G2, "e1")));
        // A member removed before its glob leaves no trace in the index.
        t.durable.held.remove(&member(G2, "e1"));
        assert_eq!(t.durable.held.members_of(G2).count(), 0);
    }
}
