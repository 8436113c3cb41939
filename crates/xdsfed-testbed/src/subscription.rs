//! What one stream subscribes to for one resource type.
//!
//! The rules follow the xDS protocol's "How the client specifies what
//! resources to return" and TP1's "Collections":
//!
//! - **Legacy wildcard.** A first request for a type that names nothing is a
//!   subscription to `*`. Once the client has named anything (`*` included),
//!   that reading is gone: in SotW an empty list then means "nothing", in
//!   delta an empty request changes nothing.
//! - **Explicit wildcard.** `*` among the names subscribes to every resource of
//!   the type; in delta, unsubscribing `*` ends it and keeps the other names.
//! - **Names.** Old-style names and xdstp URNs, compared by canonical key, so
//!   the order of context parameters does not matter.
//! - **Glob collections.** `xdstp://auth/T/path/*?params` matches every
//!   resource of the type whose URN lies directly under `path/` (no further
//!   `/`) and carries exactly the same context parameters.

use std::{collections::BTreeMap, ops::Bound, sync::Arc};

use imbl::OrdMap;

use xdsfed_core::name::canonical_key;

use crate::store::{StoredResource, TypeTable};

/// The wildcard name.
pub const WILDCARD: &str = "*";

/// A glob collection subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    /// The name as the client wrote it (used in `removed_resources`).
    pub wire: String,
    /// Everything before the `*`: `xdstp://auth/T/path/`.
    prefix: String,
    /// The canonical context parameters, without the `?`.
    query: String,
}

impl Glob {
    /// Parses a canonical key; `None` unless it is an xdstp glob.
    fn parse(wire: &str, key: &str) -> Option<Self> {
        if !key.starts_with("xdstp://") {
            return None;
        }
        let (base, query) = key.split_once('?').unwrap_or((key, ""));
        let prefix = base.strip_suffix('*')?;
        prefix.ends_with('/').then(|| Self {
            wire: wire.to_owned(),
            prefix: prefix.to_owned(),
            query: query.to_owned(),
        })
    }

    /// Whether the resource with canonical key `key` is in this collection.
    pub fn matches(&self, key: &str) -> bool {
        let (base, query) = key.split_once('?').unwrap_or((key, ""));
        let Some(leaf) = base.strip_prefix(self.prefix.as_str()) else {
            return false;
        };
        query == self.query && !leaf.is_empty() && leaf != WILDCARD && !leaf.contains('/')
    }

    /// The members of this collection in `table`, in key order.
    pub fn members<'a>(
        &'a self,
        table: &'a TypeTable,
    ) -> impl Iterator<Item = (&'a String, &'a Arc<StoredResource>)> + 'a {
        // Every member starts with the prefix: a range scan from it suffices.
        table
            .range::<_, str>((Bound::Included(self.prefix.as_str()), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(self.prefix.as_str()))
            .filter(|(key, _)| self.matches(key))
    }
}

/// The subscription state of one stream for one type.
///
/// The maps are persistent (`imbl`): the stream hands a copy to the ACK
/// tracker after every request, and a copy costs O(1) however many names
/// are subscribed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Subscribed to every resource of the type (legacy or explicit `*`).
    pub wildcard: bool,
    /// The client has named something, so the legacy wildcard is gone.
    pub explicit: bool,
    /// Whether any request for this type has been seen on the stream.
    pub seen: bool,
    /// Exact names: canonical key → the name as the client wrote it.
    pub names: OrdMap<String, String>,
    /// Glob collections by canonical key.
    pub globs: OrdMap<String, Glob>,
}

/// What a request changed in a subscription.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Canonical keys (names and globs) newly named; the server must send them
    /// even if the client seems to have them.
    pub subscribed: Vec<String>,
    /// Canonical keys no longer named.
    pub unsubscribed: Vec<String>,
}

/// The canonical key of a name on the wire. A name that is not a valid xdstp
/// URN stays as written: it matches nothing and so "does not exist".
pub fn key_of(name: &str) -> String {
    canonical_key(name).unwrap_or_else(|_| name.to_owned())
}

impl Subscription {
    fn add(&mut self, wire: &str, change: &mut Change) {
        if wire == WILDCARD {
            self.wildcard = true;
            return;
        }
        let key = key_of(wire);
        if let Some(glob) = Glob::parse(wire, &key) {
            self.globs.insert(key.clone(), glob);
        } else {
            self.names.insert(key.clone(), wire.to_owned());
        }
        change.subscribed.push(key);
    }

    fn remove(&mut self, wire: &str, change: &mut Change) {
        if wire == WILDCARD {
            self.wildcard = false;
            return;
        }
        let key = key_of(wire);
        if self.names.remove(&key).is_some() || self.globs.remove(&key).is_some() {
            change.unsubscribed.push(key);
        }
    }

    /// Applies a delta request's `resource_names_subscribe` and
    /// `resource_names_unsubscribe`.
    pub fn apply_delta(&mut self, subscribe: &[String], unsubscribe: &[String]) -> Change {
        let mut change = Change::default();
        if !self.seen && subscribe.is_empty() && unsubscribe.is_empty() {
            self.wildcard = true;
        }
        self.seen = true;
        if !subscribe.is_empty() {
            self.explicit = true;
        }
        for name in subscribe {
            self.add(name, &mut change);
        }
        for name in unsubscribe {
            self.remove(name, &mut change);
        }
        change
    }

    /// Applies a SotW request's `resource_names`, which replace the previous set.
    pub fn apply_sotw(&mut self, resource_names: &[String]) -> Change {
        let mut change = Change::default();
        self.seen = true;
        if !self.explicit && resource_names.is_empty() {
            self.wildcard = true;
            return change;
        }
        self.explicit = true;
        let old_names = std::mem::take(&mut self.names);
        let old_globs = std::mem::take(&mut self.globs);
        self.wildcard = false;
        let mut added = Change::default();
        for name in resource_names {
            self.add(name, &mut added);
        }
        change.subscribed = added
            .subscribed
            .into_iter()
            .filter(|k| !old_names.contains_key(k) && !old_globs.contains_key(k))
            .collect();
        change.unsubscribed = old_names
            .keys()
            .chain(old_globs.keys())
            .filter(|k| !self.names.contains_key(*k) && !self.globs.contains_key(*k))
            .cloned()
            .collect();
        change
    }

    /// Whether the resource with canonical key `key` is subscribed to.
    pub fn covers(&self, key: &str) -> bool {
        self.wildcard || self.names.contains_key(key) || self.glob_of(key).is_some()
    }

    /// The subscribed glob collection `key` is a member of, if any. A key
    /// belongs to one glob at most, `xdstp://auth/T/path/*?params` for
    /// `xdstp://auth/T/path/id?params` (both canonical), so this is one
    /// lookup, however many globs are subscribed (a client following LEDS
    /// subscribes to one per cluster).
    pub fn glob_of(&self, key: &str) -> Option<(&String, &Glob)> {
        if self.globs.is_empty() {
            return None;
        }
        self.globs
            .get_key_value(&*xdsfed_core::protocol::glob_of(key)?)
            .filter(|(_, glob)| glob.matches(key))
    }

    /// Whether the stream has anything subscribed for this type.
    pub fn is_empty(&self) -> bool {
        !self.wildcard && self.names.is_empty() && self.globs.is_empty()
    }

    /// What the subscription selects from `table`.
    pub fn select(&self, table: &TypeTable) -> Selection {
        let mut selection = Selection::default();
        if self.wildcard {
            for stored in table.values() {
                let wire = self.names.get(&stored.key).unwrap_or(&stored.name);
                selection
                    .wanted
                    .insert(stored.key.clone(), (wire.clone(), stored.clone()));
            }
        } else {
            for (key, wire) in &self.names {
                if let Some(stored) = table.get(key) {
                    selection
                        .wanted
                        .insert(key.clone(), (wire.clone(), stored.clone()));
                }
            }
        }
        for (key, wire) in &self.names {
            if !table.contains_key(key) {
                selection.absent.push((key.clone(), wire.clone()));
            }
        }
        for (glob_key, glob) in &self.globs {
            let mut any = false;
            for (key, stored) in glob.members(table) {
                any = true;
                if !selection.wanted.contains_key(key) {
                    selection
                        .wanted
                        .insert(key.clone(), (stored.name.clone(), stored.clone()));
                }
            }
            if !any {
                selection.absent.push((glob_key.clone(), glob.wire.clone()));
            }
        }
        selection
    }

    /// The name to send `stored` under: as the client wrote it if it named
    /// it, else as it was stored (the rule [`Subscription::select`] follows).
    pub fn wire_name<'a>(&'a self, stored: &'a StoredResource) -> &'a str {
        self.names.get(&stored.key).unwrap_or(&stored.name)
    }
}

/// The resources a subscription selects from a type's table.
#[derive(Debug, Default)]
pub struct Selection {
    /// Canonical key → (name to send, resource).
    pub wanted: BTreeMap<String, (String, Arc<StoredResource>)>,
    /// Subscribed names that do not exist and globs that match nothing:
    /// (canonical key, name as the client wrote it).
    pub absent: Vec<(String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// §How the client specifies what resources to return, SotW example.
    #[test]
    fn sotw_wildcard_follows_spec_example() {
        let mut sub = Subscription::default();
        sub.apply_sotw(&[]);
        assert!(sub.wildcard, "unset names first: wildcard");
        sub.apply_sotw(&names(&["*", "A"]));
        assert!(sub.wildcard && sub.names.contains_key("A"));
        sub.apply_sotw(&names(&["A"]));
        assert!(!sub.wildcard && sub.names.contains_key("A"));
        sub.apply_sotw(&[]);
        assert!(sub.is_empty(), "unset names after explicit names: nothing");
    }

    /// §How the client specifies what resources to return, incremental example.
    #[test]
    fn delta_wildcard_follows_spec_example() {
        let mut sub = Subscription::default();
        sub.apply_delta(&[], &[]);
        assert!(sub.wildcard);
        sub.apply_delta(&names(&["A"]), &[]);
        assert!(sub.wildcard && sub.names.contains_key("A"));
        sub.apply_delta(&[], &names(&["*"]));
        assert!(!sub.wildcard && sub.names.contains_key("A"));
        sub.apply_delta(&[], &names(&["A"]));
        assert!(sub.is_empty());
        sub.apply_delta(&[], &[]);
        assert!(sub.is_empty(), "an empty request later is not a wildcard");
    }

    #[test]
    fn delta_first_request_naming_something_is_not_wildcard() {
        let mut sub = Subscription::default();
        sub.apply_delta(&names(&["A"]), &[]);
        assert!(!sub.wildcard);
    }

    /// TP1 §Glob: same context parameters, directly under the path.
    #[test]
    fn glob_matches_direct_children_with_same_params_only() {
        let glob = Glob::parse("g", "xdstp://a/T/foo/*?some=thing").unwrap();
        assert!(glob.matches("xdstp://a/T/foo/bar?some=thing"));
        assert!(!glob.matches("xdstp://a/T/foo/bar"));
        assert!(!glob.matches("xdstp://a/T/foo/bar/baz?some=thing"));
        assert!(!glob.matches("xdstp://b/T/foo/bar?some=thing"));
        assert!(!glob.matches("xdstp://a/T/foobar?some=thing"));
    }

    #[test]
    fn glob_of_finds_the_one_glob_a_key_belongs_to() {
        let mut sub = Subscription::default();
        sub.apply_delta(
            &["xdstp://a/T/foo/*?k=v".into(), "xdstp://a/T/bar/*".into()],
            &[],
        );
        let found = |key: &str| sub.glob_of(key).map(|(k, _)| k.clone());
        assert_eq!(
            found("xdstp://a/T/foo/x?k=v").as_deref(),
            Some("xdstp://a/T/foo/*?k=v")
        );
        assert_eq!(
            found("xdstp://a/T/bar/y").as_deref(),
            Some("xdstp://a/T/bar/*")
        );
        assert_eq!(found("xdstp://a/T/foo/x"), None);
        assert_eq!(found("xdstp://a/T/bar/y/z"), None);
        assert_eq!(found("xdstp://a/T/baz/y"), None);
        // The same answer as asking every glob.
        for key in [
            "xdstp://a/T/foo/x?k=v",
            "xdstp://a/T/bar/*",
            "xdstp://a/T/foo/?k=v",
        ] {
            let slow = sub
                .globs
                .iter()
                .find(|(_, g)| g.matches(key))
                .map(|(k, _)| k.clone());
            assert_eq!(found(key), slow, "{key}");
        }
    }

    #[test]
    fn old_style_name_ending_in_star_is_not_a_glob() {
        assert!(Glob::parse("foo/*", "foo/*").is_none());
    }
}
