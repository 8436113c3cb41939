//! The glob collection a member belongs to by its name (xDS TP1 §Glob),
//! worked out once and handed out again.
//!
//! Every layer a LEDS update passes through asks for the glob of the
//! member it handles (the session, the federation core, the cache, the
//! graph), some eight times an update. Two memories on the asking thread
//! answer without parsing the key again:
//!
//! - the last few globs worked out: a key that is a member of one of them
//!   by its spelling is given that one (a comparison of its prefix and a
//!   scan of its last segment);
//! - the answers given lately for shared names (`Arc<str>`), by the
//!   address of the name's allocation: the name the session holds is the
//!   one the federation core, the cache and the graph are handed, so the
//!   layers after the first find the answer by that address, without
//!   reading the name. The answer keeps its glob, so a run of responses
//!   that spans more collections than there are remembered globs does
//!   not lose it; remembering one takes a count on the name and on the
//!   glob, a lookup takes none.
//!
//! Rule: a remembered answer is the answer a fresh parse of the key gives
//! (tests `the_shared_glob_answers_as_a_fresh_parse`,
//! `a_shared_name_is_answered_as_its_text`). An answer remembered by
//! address holds a `Weak` reference to the name, so the allocation cannot
//! be freed and reused by another name while the answer is remembered,
//! and the text of an `Arc<str>` does not change.

use std::sync::{Arc, Weak};

/// A key [`glob_of`] reads: its text, and the shared allocation it is in
/// when it has one (an answer is then remembered by that allocation's
/// address).
pub trait GlobKey {
    /// The key's text.
    fn text(&self) -> &str;
    /// The shared name, when the key is one.
    fn shared(&self) -> Option<&Arc<str>> {
        None
    }
}

impl GlobKey for str {
    fn text(&self) -> &str {
        self
    }
}

impl GlobKey for String {
    fn text(&self) -> &str {
        self
    }
}

impl<K: GlobKey + ?Sized> GlobKey for &K {
    fn text(&self) -> &str {
        (**self).text()
    }
    fn shared(&self) -> Option<&Arc<str>> {
        (**self).shared()
    }
}

impl GlobKey for Arc<str> {
    fn text(&self) -> &str {
        self
    }
    fn shared(&self) -> Option<&Arc<str>> {
        Some(self)
    }
}

/// The glob collection a canonical `xdstp:` key would belong to (xDS TP1
/// §Glob): its path's last segment replaced by `*`, the same context
/// parameters. `xdstp://a/T/foo/bar?k=v` → `xdstp://a/T/foo/*?k=v`. `None`
/// for old-style names and globs themselves.
///
/// The answer is shared: every layer asks for the glob of the member it
/// just handled (session, federation core, cache, graph), and a response's
/// members mostly share one to three collections, so the last few globs
/// worked out on this thread are handed out again when one of them is the
/// one asked for. Working it out
/// afresh costs a string and an `Arc`; recognising it costs one comparison
/// of the glob's prefix and a scan of the member's last segment, not a
/// parse of the whole key (a LEDS update asks some ten times).
pub fn glob_of(key: &(impl GlobKey + ?Sized)) -> Option<Arc<str>> {
    with_last_glob(key, Arc::clone)
}

/// [`glob_of`], lent to `f` rather than shared: a lookup by the glob's
/// name then touches no reference count. The glob is shared by the threads
/// of the session, the cache and the graph, and each count taken and given
/// back on one of them moves its cache line away from the others.
///
/// ```
/// use xdsfed_core::protocol::with_glob_of;
///
/// let member = "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/e1?k=v";
/// let glob = with_glob_of(member, str::to_owned);
/// assert_eq!(glob.as_deref(), Some("xdstp://a/envoy.config.endpoint.v3.LbEndpoint/pool/*?k=v"));
/// ```
pub fn with_glob_of<R>(key: &(impl GlobKey + ?Sized), f: impl FnOnce(&str) -> R) -> Option<R> {
    with_last_glob(key, |glob| f(glob))
}

/// `f` on the glob of `key`: the one answered lately for the same shared
/// name, or one of the last few worked out on this thread when `key` is
/// its member, else one worked out afresh and remembered in place of the
/// oldest. An `f` that asks for a glob itself has it worked out apart.
fn with_last_glob<R>(key: &(impl GlobKey + ?Sized), f: impl FnOnce(&Arc<str>) -> R) -> Option<R> {
    LAST_GLOBS.with(|last| match last.try_borrow_mut() {
        Ok(mut last) => match key.shared() {
            Some(name) => last.glob_of_shared(name).map(f),
            None => last.glob_of(key.text()).map(f),
        },
        Err(_) => LastGlob::of(key.text()).map(|fresh| f(&fresh.glob)),
    })
}

/// How many globs a thread remembers. The layers a response passes
/// through on one thread (session, cache, graph) each walk its members in
/// turn, and a response of a LEDS churn spans two or three collections: a
/// single remembered glob was worked out again by each layer for each of
/// them, some eight strings and `Arc`s a response.
const REMEMBERED_GLOBS: usize = 4;

/// How many answers for shared names a thread remembers. A response's
/// members pass through the session, then the federation core and the
/// cache on one thread, a layer at a time, and responses read together
/// are handled together (up to some 64 resources, then flushed): most
/// answers of such a run are still there when the next layer asks, in
/// 256 places of 32 bytes.
const RECENT_NAMES: usize = 256;

/// The globs a thread worked out last, replaced oldest first, and the
/// answers it gave lately for shared names.
struct LastGlobs {
    slots: [Option<LastGlob>; REMEMBERED_GLOBS],
    /// The slot the next glob worked out goes to.
    next: usize,
    /// Answers by the address of the name's allocation, one per place.
    recent: [Option<Answer>; RECENT_NAMES],
}

/// The glob [`glob_of`] answered for a shared name.
struct Answer {
    /// Keeps the allocation from being freed, so no other name is found
    /// at its address while the answer is remembered.
    name: Weak<str>,
    /// `None`: no member of a glob.
    glob: Option<Arc<str>>,
}

impl LastGlobs {
    /// `key`'s glob: the slot that holds it, or worked out into the oldest
    /// slot.
    fn glob_of(&mut self, key: &str) -> Option<&Arc<str>> {
        let known = self
            .slots
            .iter()
            .position(|slot| slot.as_ref().is_some_and(|g| g.has_member(key)));
        let at = match known {
            Some(at) => at,
            None => {
                let fresh = LastGlob::of(key)?;
                let at = self.next;
                self.next = (at + 1) % REMEMBERED_GLOBS;
                *self.slots.get_mut(at)? = Some(fresh);
                at
            }
        };
        self.slots.get(at)?.as_ref().map(|last| &last.glob)
    }

    /// [`LastGlobs::glob_of`] for a shared name: the answer remembered for
    /// its allocation, else worked out and remembered in its place.
    fn glob_of_shared(&mut self, name: &Arc<str>) -> Option<&Arc<str>> {
        let place = recent_place(name);
        let remembered = self.recent.get(place).is_some_and(|answer| {
            answer
                .as_ref()
                .is_some_and(|a| std::ptr::eq(a.name.as_ptr(), Arc::as_ptr(name)))
        });
        if !remembered {
            #[cfg(test)]
            MISSES.with(|m| m.set(m.get() + 1));
            let glob = self.glob_of(name).cloned();
            let entry = self.recent.get_mut(place)?;
            *entry = Some(Answer {
                name: Arc::downgrade(name),
                glob,
            });
        }
        self.recent.get(place)?.as_ref()?.glob.as_ref()
    }
}

/// Where the answer for `name` is remembered: its allocation's address,
/// mixed (names allocated one after another sit a fixed distance apart).
fn recent_place(name: &Arc<str>) -> usize {
    let address = Arc::as_ptr(name).cast::<u8>().addr() as u64;
    let mixed = (address >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The top bits: RECENT_NAMES is a power of two.
    (mixed >> (64 - RECENT_NAMES.trailing_zeros())) as usize
}

#[cfg(test)]
thread_local! {
    /// Answers for shared names worked out on this thread, for the tests.
    static MISSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// The last globs [`glob_of`] worked out on this thread.
    static LAST_GLOBS: std::cell::RefCell<LastGlobs> = const {
        std::cell::RefCell::new(LastGlobs {
            slots: [const { None }; REMEMBERED_GLOBS],
            next: 0,
            recent: [const { None }; RECENT_NAMES],
        })
    };
}

/// A glob [`glob_of`] worked out, with where its `*` sits.
struct LastGlob {
    /// `xdstp://{parent}/*`, then `?{query}` when the members had one.
    glob: Arc<str>,
    /// The length of `xdstp://{parent}/`.
    prefix: usize,
}

impl LastGlob {
    /// The glob of member `key`, worked out from its spelling.
    fn of(key: &str) -> Option<Self> {
        let (parent, query) = glob_parts(key)?;
        let mut glob = String::with_capacity(key.len() + 2);
        glob.push_str("xdstp://");
        glob.push_str(parent);
        glob.push('/');
        let prefix = glob.len();
        glob.push('*');
        if let Some(q) = query {
            glob.push('?');
            glob.push_str(q);
        }
        Some(LastGlob {
            glob: Arc::from(glob),
            prefix,
        })
    }

    /// Whether `key` is a member of this glob by its spelling: the glob's
    /// prefix, then a last segment (no `/`, not empty, not `*`), then
    /// exactly the glob's context parameters. The same answer as comparing
    /// [`glob_parts`] of `key` with the glob's: the parent holds no `?`
    /// (it was cut before the first one), so `key`'s first `?` is past it.
    fn has_member(&self, key: &str) -> bool {
        let (Some(prefix), Some(tail)) = (
            self.glob.get(..self.prefix),
            self.glob.get(self.prefix + 1..),
        ) else {
            return false;
        };
        // The parents of one type's collections differ at their end (the
        // collection's own id), so that is compared first: a key of
        // another collection is told apart in a few bytes, not by a
        // comparison of the whole prefix.
        if last_word(key.as_bytes(), prefix.len()) != last_word(prefix.as_bytes(), prefix.len()) {
            return false;
        }
        let Some(rest) = key.strip_prefix(prefix) else {
            return false;
        };
        let end = rest
            .bytes()
            .position(|b| b == b'/' || b == b'?')
            .unwrap_or(rest.len());
        let (segment, after) = rest.split_at(end);
        !segment.is_empty() && segment != "*" && after == tail
    }
}

/// The eight bytes of `s` before `end`, as one word [`LastGlob::has_member`]
/// compares at once (a slice comparison would call `memcmp`); `None` when
/// there are not so many.
fn last_word(s: &[u8], end: usize) -> Option<[u8; 8]> {
    s.get(end.checked_sub(8)?..end)?.try_into().ok()
}

/// A member key's collection path (after `xdstp://`, without its last
/// segment) and context parameters; `None` when it is no member.
fn glob_parts(key: &str) -> Option<(&str, Option<&str>)> {
    let rest = key.strip_prefix("xdstp://")?;
    let (path, query) = split_query(rest);
    let slash = memchr::memrchr(b'/', path.as_bytes())?;
    let (parent, last) = (path.get(..slash)?, path.get(slash + 1..)?);
    // authority/type at least, and a member, not a glob.
    if last == "*" || last.is_empty() || memchr::memchr(b'/', parent.as_bytes()).is_none() {
        return None;
    }
    Some((parent, query))
}

/// `key` before its first `?`, and what follows it. The searches of this
/// module are of ASCII bytes, which never occur inside a multi-byte
/// character, so each position found is a character boundary; `memchr`
/// compares many bytes at once where a search for a char goes a word at
/// a time, and every resource received is searched so two or three times.
fn split_query(key: &str) -> (&str, Option<&str>) {
    match memchr::memchr(b'?', key.as_bytes()) {
        Some(at) => (key.get(..at).unwrap_or(key), key.get(at + 1..)),
        None => (key, None),
    }
}

/// Whether a canonical key is a glob collection (`…/*`, before any query).
pub fn is_glob(key: &str) -> bool {
    key.starts_with("xdstp:") && split_query(key).0.ends_with("/*")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte searches answer as searches for chars do, on names with
    /// and without context parameters, multi-byte characters and `/` or
    /// `*` in odd places.
    #[test]
    fn byte_searches_answer_as_char_searches() {
        fn parts_by_chars(key: &str) -> Option<(&str, Option<&str>)> {
            let rest = key.strip_prefix("xdstp://")?;
            let (path, query) = match rest.split_once('?') {
                Some((path, query)) => (path, Some(query)),
                None => (rest, None),
            };
            let (parent, last) = path.rsplit_once('/')?;
            if last == "*" || last.is_empty() || !parent.contains('/') {
                return None;
            }
            Some((parent, query))
        }
        fn glob_by_chars(key: &str) -> bool {
            key.starts_with("xdstp:")
                && key
                    .split_once('?')
                    .map_or(key, |(path, _)| path)
                    .ends_with("/*")
        }
        for key in [
            "xdstp://a/T/c/e1",
            "xdstp://a/T/c/*",
            "xdstp://a/T/c/*?k=v",
            "xdstp://a/T/c/e1?k=v/x",
            "xdstp://a/T/c?x=/*",
            "xdstp://a/T/ç/é?ü=/ß",
            "xdstp://a/T/c/",
            "xdstp://a/T",
            "xdstp://a/T/*",
            "xdstp:///T/c/e",
            "xdstp://a/T/c/e?",
            "xdstp:",
            "old-style/*",
            "",
        ] {
            assert_eq!(glob_parts(key), parts_by_chars(key), "{key}");
            assert_eq!(is_glob(key), glob_by_chars(key), "{key}");
        }
    }

    /// A glob lent to a lookup that asks for a glob itself: answered
    /// apart, correctly, without a second borrow of the remembered one.
    #[test]
    fn a_glob_asked_for_inside_a_lent_one_is_worked_out_apart() {
        let outer = with_glob_of("xdstp://a/T/g/1", |g| {
            let inner = with_glob_of("xdstp://a/T/h/1", str::to_owned);
            (g.to_owned(), inner, glob_of("xdstp://a/T/g/2"))
        });
        let (g, inner, again) = outer.unwrap();
        assert_eq!(g, "xdstp://a/T/g/*");
        assert_eq!(inner.as_deref(), Some("xdstp://a/T/h/*"));
        assert_eq!(again.as_deref(), Some("xdstp://a/T/g/*"));
        assert_eq!(with_glob_of("xdstp://a/T/g/*", str::to_owned), None);
        assert_eq!(with_glob_of("plain-name", str::to_owned), None);
    }

    /// The shared answer is reused only for the same collection, context
    /// parameters included.
    #[test]
    fn the_shared_glob_is_the_members_own() {
        let cases = [
            ("xdstp://a/T/foo/x", Some("xdstp://a/T/foo/*")),
            ("xdstp://a/T/foo/y", Some("xdstp://a/T/foo/*")),
            ("xdstp://a/T/foo/y?k=v", Some("xdstp://a/T/foo/*?k=v")),
            ("xdstp://a/T/foo/w?k=v", Some("xdstp://a/T/foo/*?k=v")),
            (
                "xdstp://a/T/foo/w?k=v&x=y",
                Some("xdstp://a/T/foo/*?k=v&x=y"),
            ),
            ("xdstp://a/T/foo/w", Some("xdstp://a/T/foo/*")),
            ("xdstp://a/T/foo/", None),
            ("xdstp://a/T/foo/w?k", Some("xdstp://a/T/foo/*?k")),
            ("xdstp://a/T/foo/v/w?k", Some("xdstp://a/T/foo/v/*?k")),
            ("xdstp://a/T/foo/z", Some("xdstp://a/T/foo/*")),
            ("xdstp://a/T/foo/bar/z", Some("xdstp://a/T/foo/bar/*")),
            ("xdstp://a/T/fo/z", Some("xdstp://a/T/fo/*")),
            ("xdstp://a/T/fo/*", None),
            ("xdstp://a/T/x", Some("xdstp://a/T/*")),
            ("plain", None),
        ];
        for (member, glob) in cases {
            assert_eq!(glob_of(member).as_deref(), glob, "{member}");
        }
        let first = glob_of("xdstp://a/T/g/1");
        let second = glob_of("xdstp://a/T/g/2");
        assert!(first.zip(second).is_some_and(|(a, b)| Arc::ptr_eq(&a, &b)));
    }

    /// Layers that walk the same few collections in turn share each one's
    /// glob: none is worked out again while no more than
    /// [`REMEMBERED_GLOBS`] are in use, and the oldest gives way to a new
    /// one past that.
    #[test]
    fn a_few_collections_walked_in_turn_keep_their_globs() {
        let members = ["xdstp://a/T/g/1", "xdstp://a/T/h/1", "xdstp://a/T/i/1"];
        let first: Vec<_> = members.iter().filter_map(glob_of).collect();
        for _ in 0..3 {
            for (member, glob) in members.iter().zip(&first) {
                let again = glob_of(&member.replace("/1", "/2"));
                assert!(again.is_some_and(|a| Arc::ptr_eq(&a, glob)), "{member}");
            }
        }
        for other in ["j", "k", "l", "m"] {
            let _ = glob_of(&format!("xdstp://a/T/{other}/1"));
        }
        let worked_out_again = glob_of("xdstp://a/T/g/3");
        assert_eq!(worked_out_again.as_deref(), Some("xdstp://a/T/g/*"));
        assert!(worked_out_again.is_some_and(|a| !Arc::ptr_eq(&a, &first[0])));
    }

    /// Recognising a member of the last glob answers what parsing the
    /// member's key would, whatever glob was worked out before it.
    #[test]
    fn the_shared_glob_answers_as_a_fresh_parse() {
        let keys = [
            "xdstp://a/T/g/m",
            "xdstp://a/T/g/m?k=v",
            "xdstp://a/T/g/m?k=v/w?x",
            "xdstp://a/T/g/*",
            "xdstp://a/T/g/",
            "xdstp://a/T/g/m/n",
            "xdstp://a/T/g/m/n?k=v",
            "xdstp://a/T/gg/m",
            "xdstp://a/T/m",
            "xdstp://a/T/?k",
            "xdstp://a/T/g?k=v/m",
            "xdstp://a/T",
            "plain/name",
            // Long parents that differ at their end, or only at their start.
            "xdstp://auth.example/envoy.config.endpoint.v3.LbEndpoint/pool-0001/m",
            "xdstp://auth.example/envoy.config.endpoint.v3.LbEndpoint/pool-0002/m",
            "xdstp://auth.examplf/envoy.config.endpoint.v3.LbEndpoint/pool-0001/m",
            "xdstp://auth.example/envoy.config.endpoint.v3.LbEndpoint/pool-0001/",
        ];
        let fresh = |key: &str| {
            glob_parts(key).map(|(parent, query)| match query {
                Some(q) => format!("xdstp://{parent}/*?{q}"),
                None => format!("xdstp://{parent}/*"),
            })
        };
        for before in keys {
            for key in keys {
                let _ = glob_of(before);
                assert_eq!(
                    glob_of(key).as_deref(),
                    fresh(key).as_deref(),
                    "{before} then {key}"
                );
            }
        }
    }

    /// The layers after the first find a shared name's answer by its
    /// address, for a run of members of a few collections: the first
    /// works every answer out, the three after it work out only those
    /// that two names of the run sharing a place pushed out (`MISSES`
    /// counts the answers worked out; twenty names in 256 places seldom
    /// share one).
    #[test]
    fn layers_after_the_first_find_the_answer() {
        let names: Vec<Arc<str>> = (0..20)
            .map(|i| {
                let member = format!(
                    "xdstp://a/envoy.config.endpoint.v3.LbEndpoint/c{}/e{i}",
                    i / 10
                );
                Arc::from(member)
            })
            .collect();
        let before = MISSES.with(|m| m.get());
        for _layer in 0..4 {
            for name in &names {
                assert_eq!(glob_of(name).as_deref(), glob_of(&**name).as_deref());
            }
        }
        let misses = MISSES.with(|m| m.get()) - before;
        assert!(misses >= names.len(), "{misses}");
        assert!(misses - names.len() < names.len(), "{misses}");
    }

    /// An answer remembered for a shared name is the one its text gets,
    /// also after its slot went to other globs and after the name was
    /// dropped and another allocated.
    #[test]
    fn a_shared_name_is_answered_as_its_text() {
        let member: Arc<str> = Arc::from("xdstp://a/T/g/1");
        let plain: Arc<str> = Arc::from("plain-name");
        for _ in 0..2 {
            assert_eq!(glob_of(&member).as_deref(), Some("xdstp://a/T/g/*"));
            assert_eq!(glob_of(&plain), None);
        }
        // Every slot given to another glob: the answer is worked out again.
        for other in 0..REMEMBERED_GLOBS {
            let _ = glob_of(&Arc::<str>::from(format!("xdstp://a/T/o{other}/1")));
        }
        assert_eq!(glob_of(&member).as_deref(), Some("xdstp://a/T/g/*"));
        // Names dropped and allocated again, likely at the same addresses.
        for round in 0..200 {
            let name: Arc<str> = Arc::from(format!("xdstp://a/T/c{}/m", round % 7));
            let expected = format!("xdstp://a/T/c{}/*", round % 7);
            assert_eq!(with_glob_of(&name, str::to_owned), Some(expected));
            let glob: Arc<str> = Arc::from(format!("xdstp://a/T/c{}/*", round % 5));
            assert_eq!(glob_of(&glob), None, "{glob}");
        }
    }
}
