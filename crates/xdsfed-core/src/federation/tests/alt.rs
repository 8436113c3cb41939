//! `#alt` alternatives (xDS TP1).

use super::support::{Harness, cluster, deleted};
use crate::entry::ResourceStatus;
use crate::protocol::CoreEvent;

fn with_alt(h: &mut Harness) -> (crate::protocol::ResourceKey, crate::protocol::ResourceKey) {
    let alt = cluster("b", "spare");
    let entry = h.watch(&format!("{}#alt={}", cluster("a", "c1").name, alt.name));
    (entry, alt)
}

#[test]
fn alt_is_fetched_when_every_server_of_the_primary_failed() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    assert!(h.subscribed(&alt).is_empty());
    h.fail("a1");
    assert!(h.subscribed(&alt).is_empty(), "a2 is still to be asked");
    h.fail("a2");
    assert_eq!(h.subscribed(&alt), ["b1"]);
    h.upsert("b1", &alt, "spare");
    assert_eq!(h.tag(&entry).as_deref(), Some("spare"));
    let source = h.state(&entry).source.clone().expect("a source");
    assert!(source.alt);
    assert_eq!(&*source.fetched_as, &*alt.name);
}

#[test]
fn alt_is_fetched_when_the_does_not_exist_timer_fires() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    h.events("a1", vec![CoreEvent::DoesNotExist { key: entry.clone() }]);
    assert_eq!(h.subscribed(&alt), ["b1"]);
    assert_eq!(
        h.state(&entry).status,
        ResourceStatus::Requested,
        "not reported: the alternative is asked"
    );
}

#[test]
fn alt_a_deletion_by_the_primary_is_an_answer_not_a_failure() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    h.events("a1", vec![deleted(&entry)]);
    assert!(h.subscribed(&alt).is_empty());
    assert_eq!(h.state(&entry).status, ResourceStatus::DoesNotExist);
}

#[test]
fn alt_the_primary_updating_again_ends_the_alternative() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    h.fail("a1");
    h.fail("a2");
    h.upsert("b1", &alt, "spare");
    h.healthy("a1");
    h.upsert("a1", &entry, "primary");
    assert!(h.subscribed(&alt).is_empty(), "the alternative is let go");
    assert_eq!(h.tag(&entry).as_deref(), Some("primary"));
    h.upsert("b1", &alt, "late");
    assert_eq!(h.tag(&entry).as_deref(), Some("primary"));
}

#[test]
fn alt_is_not_used_while_a_copy_is_cached() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    h.upsert("a1", &entry, "v1");
    h.fail("a1");
    h.fail("a2");
    assert!(h.subscribed(&alt).is_empty());
    assert_eq!(h.tag(&entry).as_deref(), Some("v1"));
}

#[test]
fn alt_unwatching_the_entry_lets_the_alternative_go() {
    let mut h = Harness::new();
    let (entry, alt) = with_alt(&mut h);
    h.events("a1", vec![CoreEvent::DoesNotExist { key: entry.clone() }]);
    h.unwatch(&entry);
    assert!(h.subscribed(&alt).is_empty());
    assert!(h.subscribed(&entry).is_empty());
}

/// A name whose `#alt` is itself has no alternative: its servers failing
/// and answering again leaves it subscribed where it was, still watched.
#[test]
fn alt_naming_the_entry_itself_is_no_alternative() {
    let mut h = Harness::new();
    let own = cluster("a", "c1");
    let entry = h.watch(&format!("{}#alt={}", own.name, own.name));
    assert_eq!(entry, own);
    h.fail("a1");
    h.fail("a2");
    h.healthy("a1");
    h.upsert("a1", &entry, "back");
    assert_eq!(h.tag(&entry).as_deref(), Some("back"));
    assert!(
        !h.subscribed(&entry).is_empty(),
        "the entry's own fetch is kept"
    );
}
