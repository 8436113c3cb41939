//! The rules of the module docs, one test each, driven without IO: the
//! "file" is a YAML text handed to `handle_contents`.

use std::sync::Arc;

use crate::types::ClusterView;

use super::*;
use crate::protocol::CoreEvent;
use crate::types::{CLUSTER_COLLECTION_TYPE_URL, ListCollection, ListEntry};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

fn session() -> FileSession {
    let cfg = FileSessionConfig {
        path: "/etc/xds/config.yaml".into(),
        format: FileFormat::Yaml,
        filter: AuthorityFilter::new()
            .with_old_style(true)
            .with_authority("a.example"),
    };
    FileSession::new(cfg, Arc::new(TypeRegistry::with_builtin()))
}

fn key(name: &str) -> ResourceKey {
    ResourceKey::new(CDS, name)
}

/// A valid EDS cluster, its service name telling copies apart.
fn cluster(name: &str, service: &str) -> String {
    format!(
        "  - {{'@type': {CDS}, name: '{name}', type: EDS, eds_cluster_config: {{eds_config: {{ads: {{}}}}, service_name: '{service}'}}}}\n"
    )
}

/// A cluster that fails validation (EDS without its config).
fn bad_cluster(name: &str) -> String {
    format!("  - {{'@type': {CDS}, name: '{name}', type: EDS}}\n")
}

fn file(version: &str, resources: &[String]) -> String {
    format!(
        "version_info: '{version}'\nresources:\n{}",
        resources.concat()
    )
}

fn read(s: &mut FileSession, text: &str) -> Vec<CoreEvent> {
    s.handle_contents(Ok(text.as_bytes()));
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn events(s: &mut FileSession) -> Vec<CoreEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// `U name service version`, `I name`, `R name`, `D name`, `F`, `H`, `N name`.
fn show(events: &[CoreEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            CoreEvent::Upsert {
                key,
                resource,
                version,
                ..
            } => {
                let service = resource
                    .downcast::<ClusterView>()
                    .and_then(|c| c.eds_service_name().map(str::to_owned))
                    .unwrap_or_default();
                format!("U {} {service} {version}", key.name)
            }
            CoreEvent::Invalid { key, .. } => format!("I {}", key.name),
            CoreEvent::Removed { key, .. } => format!("R {}", key.name),
            CoreEvent::DoesNotExist { key } => format!("D {}", key.name),
            CoreEvent::StreamFailed { .. } => "F".into(),
            CoreEvent::StreamHealthy => "H".into(),
            CoreEvent::NotRequested { key, .. } => format!("N {}", key.name),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn valid_resource_is_delivered_with_the_file_version() {
    let mut s = session();
    s.subscribe(key("c1"));
    assert!(events(&mut s).is_empty(), "nothing before the file is read");
    let got = read(&mut s, &file("v1", &[cluster("c1", "a")]));
    assert_eq!(show(&got), ["H", "U c1 a v1"]);
    assert!(s.is_healthy());
    assert_eq!(s.stats().resource_updates_valid, 1);
}

#[test]
fn empty_version_is_a_digest_of_the_bytes() {
    let mut s = session();
    s.subscribe(key("c1"));
    let text = format!("resources:\n{}", cluster("c1", "a"));
    let got = read(&mut s, &text);
    let digest = format!("{:016x}", super::entries::digest(text.as_bytes()));
    assert_eq!(show(&got), ["H".to_owned(), format!("U c1 a {digest}")]);
}

#[test]
fn invalid_resource_is_reported_and_the_copy_kept() {
    let mut s = session();
    s.subscribe(key("c1"));
    s.subscribe(key("c2"));
    read(
        &mut s,
        &file("v1", &[cluster("c1", "a"), cluster("c2", "a")]),
    );
    let got = read(
        &mut s,
        &file("v2", &[bad_cluster("c1"), cluster("c2", "b")]),
    );
    assert_eq!(show(&got), ["I c1", "U c2 b v2"]);
    let CoreEvent::Invalid { error, .. } = &got[0] else {
        unreachable!()
    };
    assert!(error.0.contains("eds_cluster_config"), "{error}");
    // The same invalid copy again is no news; its fix is.
    let got = read(
        &mut s,
        &file("v3", &[bad_cluster("c1"), cluster("c2", "c")]),
    );
    assert_eq!(show(&got), ["U c2 c v3"]);
    let got = read(
        &mut s,
        &file("v4", &[cluster("c1", "a"), cluster("c2", "c")]),
    );
    assert_eq!(
        show(&got),
        ["U c1 a v4"],
        "the fixed copy clears the error even if unchanged"
    );
}

#[test]
fn duplicate_names_are_invalid() {
    let mut s = session();
    s.subscribe(key("c1"));
    let got = read(
        &mut s,
        &file("v1", &[cluster("c1", "a"), cluster("c1", "b")]),
    );
    assert_eq!(show(&got), ["H", "I c1"]);
    let CoreEvent::Invalid { error, .. } = &got[1] else {
        unreachable!()
    };
    assert!(error.0.contains("2 times"), "{error}");
}

#[test]
fn absent_resource_is_removed() {
    let mut s = session();
    s.subscribe(key("c1"));
    read(&mut s, &file("v1", &[cluster("c1", "a")]));
    let got = read(&mut s, &file("v2", &[]));
    assert_eq!(show(&got), ["R c1"]);
    let got = read(&mut s, &file("v3", &[cluster("c2", "a")]));
    assert!(got.is_empty(), "told once: {:?}", show(&got));
    let got = read(&mut s, &file("v4", &[cluster("c1", "b")]));
    assert_eq!(show(&got), ["U c1 b v4"]);
}

#[test]
fn absent_at_first_read_does_not_exist_at_once() {
    let mut s = session();
    s.subscribe(key("c1"));
    let got = read(&mut s, &file("v1", &[cluster("c2", "a")]));
    assert_eq!(show(&got), ["H", "D c1"]);
}

#[test]
fn late_subscription_is_answered_from_held_contents() {
    let mut s = session();
    s.subscribe(key("c1"));
    read(
        &mut s,
        &file("v1", &[cluster("c1", "a"), cluster("c2", "b")]),
    );
    s.subscribe(key("c2"));
    s.subscribe(key("c3"));
    assert_eq!(show(&events(&mut s)), ["U c2 b v1", "D c3"]);
    // Unsubscribed and subscribed again: answered again.
    s.unsubscribe(&key("c2"));
    s.subscribe(key("c2"));
    assert_eq!(show(&events(&mut s)), ["U c2 b v1"]);
}

#[test]
fn wildcard_gets_every_resource_of_its_type() {
    let mut s = session();
    let got = read(
        &mut s,
        &file("v1", &[cluster("c1", "a"), cluster("c2", "b")]),
    );
    assert_eq!(show(&got), ["H"], "nothing is asked for yet");
    s.subscribe_wildcard(CDS);
    assert_eq!(show(&events(&mut s)), ["U c1 a v1", "U c2 b v1"]);
    assert!(s.answered_types().contains(CDS));
    let got = read(&mut s, &file("v2", &[cluster("c2", "b")]));
    assert_eq!(show(&got), ["R c1"]);
}

#[test]
fn bad_file_fails_the_source_and_keeps_every_copy() {
    let mut s = session();
    s.subscribe(key("c1"));
    read(&mut s, &file("v1", &[cluster("c1", "a")]));
    let got = read(&mut s, "resources: [ {{{ not yaml");
    assert_eq!(show(&got), ["F"]);
    let CoreEvent::StreamFailed { failure } = &got[0] else {
        unreachable!()
    };
    let error = failure.to_string();
    assert!(error.contains("/etc/xds/config.yaml"), "{error}");
    assert!(!s.is_healthy());
    // A mapping error names the field.
    let got = read(&mut s, "resources: [{'@type': 7}]");
    let CoreEvent::StreamFailed { failure } = &got[0] else {
        panic!("{:?}", show(&got))
    };
    let error = failure.to_string();
    assert!(error.contains("resources[0]"), "{error}");
    // Unreadable: same story. The good bytes again end the failure.
    s.handle_contents(Err("No such file or directory".into()));
    assert_eq!(show(&events(&mut s)), ["F"]);
    let got = read(&mut s, &file("v1", &[cluster("c1", "a")]));
    assert_eq!(
        show(&got),
        ["H"],
        "the copy is unchanged: only the recovery"
    );
    assert_eq!(s.stats().failures, 3);
}

#[test]
fn unnamed_entry_fails_the_whole_file() {
    let mut s = session();
    s.subscribe(key("c1"));
    read(&mut s, &file("v1", &[cluster("c1", "a")]));
    let unnamed = format!("  - {{'@type': {CDS}, type: EDS}}\n");
    let got = read(&mut s, &file("v2", &[unnamed]));
    assert_eq!(show(&got), ["F"], "c1 is not removed");
    let CoreEvent::StreamFailed { failure } = &got[0] else {
        unreachable!()
    };
    let error = failure.to_string();
    assert!(error.contains("resources[0]"), "{error}");
}

#[test]
fn identical_bytes_make_no_events() {
    let mut s = session();
    s.subscribe(key("c1"));
    let text = file("v1", &[cluster("c1", "a")]);
    assert_eq!(read(&mut s, &text).len(), 2);
    assert!(read(&mut s, &text).is_empty());
    // Other bytes, same resource: the cache is not told again either.
    let got = read(&mut s, &format!("# a comment\n{text}"));
    assert!(got.is_empty(), "{:?}", show(&got));
}

#[test]
fn same_failure_is_reported_once() {
    let mut s = session();
    s.subscribe(key("c1"));
    s.handle_contents(Err("No such file or directory".into()));
    s.handle_contents(Err("No such file or directory".into()));
    assert_eq!(show(&events(&mut s)), ["F"]);
    assert_eq!(s.stats().failures, 1);
}

#[test]
fn foreign_authority_is_ignored() {
    let mut s = session();
    let other = "xdstp://b.example/envoy.config.cluster.v3.Cluster/c1";
    let ours = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c1";
    s.subscribe_wildcard(CDS);
    let got = read(
        &mut s,
        &file("v1", &[cluster(other, "x"), cluster(ours, "a")]),
    );
    assert_eq!(show(&got), ["H".to_owned(), format!("U {ours} a v1")]);
    assert_eq!(s.stats().foreign_names_ignored, 1);
}

#[test]
fn glob_collection_is_not_requested() {
    let mut s = session();
    s.subscribe(key("xdstp://a.example/envoy.config.cluster.v3.Cluster/*"));
    assert_eq!(
        show(&events(&mut s)),
        ["N xdstp://a.example/envoy.config.cluster.v3.Cluster/*"]
    );
}

/// TP1's handcrafted configuration: a list collection, named by its
/// `Resource` wrapper, with inline entries. (Envoy declares
/// `ClusterCollection.entries` singular, so its JSON form holds one entry;
/// on the wire it reads like `ListenerCollection`'s repeated field.)
#[test]
fn wrapped_list_collection_with_inline_entries_is_delivered() {
    let mut s = session();
    let name = "xdstp://a.example/envoy.config.cluster.v3.ClusterCollection/all";
    let collection = ResourceKey::new(CLUSTER_COLLECTION_TYPE_URL, name);
    s.subscribe(collection.clone());
    let text = format!(
        "resources:
  - '@type': type.googleapis.com/envoy.service.discovery.v3.Resource
    name: '{name}'
    resource:
      '@type': {CLUSTER_COLLECTION_TYPE_URL}
      entries:
        inline_entry:
          name: one
          version: '1'
          resource: {{'@type': {CDS}, name: one, type: EDS, eds_cluster_config: {{eds_config: {{ads: {{}}}}}}}}
"
    );
    let got = read(&mut s, &text);
    let Some(CoreEvent::Upsert { key, resource, .. }) = got.get(1) else {
        panic!("{got:?}")
    };
    assert_eq!(key, &collection);
    let list = resource.downcast::<ListCollection>().unwrap();
    assert!(
        matches!(&list.entries[..], [ListEntry::Inline { name: Some(n), .. }] if &**n == "one")
    );
}
