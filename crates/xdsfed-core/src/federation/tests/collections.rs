//! Glob and list collections (xDS TP1).

use std::sync::Arc;

use super::support::{CDS, Harness, cluster, deleted, upsert};
use crate::entry::{ResourceStatus, Source};
use crate::error::Cause;
use crate::federation::Home;
use crate::protocol::{CoreEvent, ResourceKey};
use crate::types::ListEntry;
use crate::types::testing::{cluster_copy, list_body};

const LIST_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.ClusterCollection";

#[test]
fn glob_members_answer_for_the_glob_under_their_own_names() {
    let mut h = Harness::new();
    let _glob = h.watch("xdstp://a/envoy.config.cluster.v3.Cluster/edge/*");
    let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/edge/m1");
    h.model.entries.entry(member.clone()).or_default();
    h.upsert("a1", &member, "m1");
    assert_eq!(h.tag(&member).as_deref(), Some("m1"));
}

#[test]
fn glob_members_are_gated_by_the_globs_servers() {
    let mut h = Harness::new();
    let _glob = h.watch("xdstp://a/envoy.config.cluster.v3.Cluster/edge/*");
    let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/edge/m1");
    h.model.entries.entry(member.clone()).or_default();
    h.upsert("a2", &member, "stray");
    assert_eq!(h.tag(&member), None);
}

#[test]
fn unrouted_keys_pass_through_as_sent() {
    let mut h = Harness::new();
    let stranger = cluster("a", "wildcard-only");
    let server = h.id("a1");
    h.fed
        .handle_events(server, vec![upsert(&stranger, "x")], &h.model);
    let action = h.fed.poll_action();
    assert!(matches!(
        action,
        Some(super::super::Action::Unrouted { .. })
    ));
}

fn watch_list(h: &mut Harness) -> ResourceKey {
    let list = ResourceKey::new(
        LIST_TYPE,
        "xdstp://a/envoy.config.cluster.v3.ClusterCollection/all",
    );
    h.model.entries.entry(list.clone()).or_default();
    let partition = crate::authority::Partition::Authority("a".into());
    let parsed = crate::name::ResourceName::parse(&list.name).expect("a valid name");
    h.fed
        .ensure_authority(&partition, &parsed)
        .expect("authority a");
    h.fed
        .watch_list(&list, CDS, Home::Authority(partition), &h.model);
    h.drain();
    list
}

fn body(list: &ResourceKey, entries: Vec<ListEntry>, bytes: &'static [u8]) -> CoreEvent {
    CoreEvent::Upsert {
        key: list.clone(),
        resource: list_body(entries, bytes),
        version: crate::version::Version::from("1"),
        ttl: None,
    }
}

#[test]
fn list_locator_members_are_watched_on_their_own_authority() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let m1 = cluster("b", "m1");
    h.events(
        "a1",
        vec![body(
            &list,
            vec![ListEntry::Locator(Arc::clone(&m1.name))],
            b"1",
        )],
    );
    assert_eq!(h.subscribed(&m1), ["b1"]);
    h.upsert("b1", &m1, "m1");
    assert_eq!(h.tag(&m1).as_deref(), Some("m1"));
}

#[test]
fn list_members_that_leave_are_let_go() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let m1 = cluster("b", "m1");
    h.events(
        "a1",
        vec![body(
            &list,
            vec![ListEntry::Locator(Arc::clone(&m1.name))],
            b"1",
        )],
    );
    h.events("a1", vec![body(&list, Vec::new(), b"2")]);
    assert!(h.subscribed(&m1).is_empty());
    assert!(!h.model.entries.contains_key(&m1), "its entry is released");
}

#[test]
fn list_a_body_with_the_same_bytes_changes_nothing() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let m1 = cluster("b", "m1");
    let entries = || vec![ListEntry::Locator(Arc::clone(&m1.name))];
    h.events("a1", vec![body(&list, entries(), b"1")]);
    h.unwatch(&m1);
    h.events("a1", vec![body(&list, entries(), b"1")]);
    assert!(
        h.subscribed(&m1).is_empty(),
        "the member was not watched again"
    );
}

#[test]
fn list_inline_entries_are_delivered_under_their_entry_keys() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let entry = ResourceKey::new(CDS, format!("{}#entry=e1", list.name));
    h.model.entries.entry(entry.clone()).or_default();
    h.fed.want_entry(&list, &entry);
    let inline = ListEntry::Inline {
        name: Some(Arc::from("e1")),
        version: crate::version::Version::from("1"),
        resource: cluster_copy("e1", "inline"),
    };
    h.events("a1", vec![body(&list, vec![inline], b"1")]);
    assert_eq!(h.tag(&entry).as_deref(), Some("inline"));
    let source: Source = h.state(&entry).source.clone().expect("a source");
    assert_eq!(&*source.fetched_as, &*list.name);
    h.events("a1", vec![body(&list, Vec::new(), b"2")]);
    assert_eq!(
        h.state(&entry).status,
        ResourceStatus::DoesNotExist,
        "an entry that left is removed"
    );
}

#[test]
fn list_a_member_of_an_authority_the_bootstrap_lacks_is_an_error_for_it() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let rogue = cluster("rogue.example", "m1");
    h.events(
        "a1",
        vec![body(
            &list,
            vec![ListEntry::Locator(Arc::clone(&rogue.name))],
            b"1",
        )],
    );
    assert!(h.subscribed(&rogue).is_empty());
    let cause = h.state(&rogue).error.as_ref().map(|e| e.cause().clone());
    assert_eq!(cause, Some(Cause::UnknownAuthority));
}

#[test]
fn list_deleted_lets_every_member_go() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let m1 = cluster("b", "m1");
    h.events(
        "a1",
        vec![body(
            &list,
            vec![ListEntry::Locator(Arc::clone(&m1.name))],
            b"1",
        )],
    );
    h.events("a1", vec![deleted(&list)]);
    assert!(h.subscribed(&m1).is_empty());
}

#[test]
fn list_unwatched_lets_every_member_go() {
    let mut h = Harness::new();
    let list = watch_list(&mut h);
    let m1 = cluster("b", "m1");
    h.events(
        "a1",
        vec![body(
            &list,
            vec![ListEntry::Locator(Arc::clone(&m1.name))],
            b"1",
        )],
    );
    h.unwatch(&list);
    assert!(h.subscribed(&m1).is_empty());
    assert!(h.subscribed(&list).is_empty());
}
