//! Redirect chains (xDS TP1 `ResourceLocator`s).

use std::sync::Arc;

use super::support::{CDS, Harness, cluster, redirect, upsert};
use crate::entry::ResourceStatus;
use crate::error::{Cause, RedirectRefusal};
use crate::protocol::{CoreEvent, ResourceKey};

fn refusal(h: &Harness, key: &ResourceKey) -> Option<RedirectRefusal> {
    match h.state(key).error.as_ref()?.cause() {
        Cause::RedirectRefused(why) => Some(*why),
        _ => None,
    }
}

#[test]
fn redirect_of_a_singleton_is_followed_to_another_authority() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let target = cluster("b", "c1");
    h.events("a1", vec![redirect(&entry, &target)]);
    assert_eq!(
        h.subscribed(&target),
        ["b1"],
        "fetched on its own authority"
    );
    h.upsert("b1", &target, "delegated");
    assert_eq!(h.tag(&entry).as_deref(), Some("delegated"));
    let source = h.state(&entry).source.clone().expect("a source");
    assert!(source.redirected);
    assert_eq!(&*source.fetched_as, &*target.name);
    assert_eq!(source.authority.as_deref(), Some("b"));
}

#[test]
fn redirect_a_target_that_redirects_extends_the_chain() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let hop1 = cluster("b", "h1");
    let hop2 = cluster("a", "h2");
    h.events("a1", vec![redirect(&entry, &hop1)]);
    h.events("b1", vec![redirect(&hop1, &hop2)]);
    assert_eq!(h.subscribed(&hop1), ["b1"], "earlier hops stay fetched");
    assert_eq!(h.subscribed(&hop2), ["a1"]);
    h.upsert("a1", &hop2, "end");
    assert_eq!(h.tag(&entry).as_deref(), Some("end"));
}

#[test]
fn redirect_a_target_answering_for_itself_cuts_the_chain_there() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let hop1 = cluster("b", "h1");
    let hop2 = cluster("a", "h2");
    h.events("a1", vec![redirect(&entry, &hop1)]);
    h.events("b1", vec![redirect(&hop1, &hop2)]);
    h.upsert("b1", &hop1, "hop1");
    assert!(h.subscribed(&hop2).is_empty());
    assert_eq!(h.tag(&entry).as_deref(), Some("hop1"));
}

#[test]
fn redirect_the_entry_answering_for_itself_drops_the_chain() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let hop1 = cluster("b", "h1");
    h.events("a1", vec![redirect(&entry, &hop1)]);
    h.upsert("b1", &hop1, "hop1");
    h.upsert("a1", &entry, "own");
    assert!(h.subscribed(&hop1).is_empty());
    assert_eq!(h.tag(&entry).as_deref(), Some("own"));
    assert!(
        h.state(&entry)
            .source
            .as_ref()
            .is_some_and(|s| !s.redirected)
    );
}

#[test]
fn redirect_a_loop_is_refused_and_the_last_good_copy_keeps_serving() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let hop1 = cluster("b", "h1");
    h.events("a1", vec![redirect(&entry, &hop1)]);
    h.upsert("b1", &hop1, "good");
    h.events("b1", vec![redirect(&hop1, &entry)]);
    assert_eq!(refusal(&h, &entry), Some(RedirectRefusal::Loop));
    assert_eq!(h.tag(&entry).as_deref(), Some("good"));
    let message = h
        .state(&entry)
        .error
        .as_ref()
        .map(|e| e.message().to_owned());
    let chain = format!("{} -> {} -> {}", entry.name, hop1.name, entry.name);
    assert!(
        message.is_some_and(|m| m.contains(&chain)),
        "the error names the chain"
    );
}

#[test]
fn redirect_more_hops_than_the_limit_are_refused() {
    let mut h = Harness::with(super::support::BOOTSTRAP, 2);
    let entry = h.watch(&cluster("a", "c1").name);
    let hops: Vec<ResourceKey> = (0..3).map(|i| cluster("b", &format!("h{i}"))).collect();
    h.events("a1", vec![redirect(&entry, &hops[0])]);
    h.events("b1", vec![redirect(&hops[0], &hops[1])]);
    assert_eq!(refusal(&h, &entry), None);
    h.events("b1", vec![redirect(&hops[1], &hops[2])]);
    assert_eq!(
        refusal(&h, &entry),
        Some(RedirectRefusal::TooManyHops { limit: 2 })
    );
    assert!(h.subscribed(&hops[2]).is_empty());
}

#[test]
fn redirect_a_target_of_another_type_is_refused() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let listener: Arc<str> = Arc::from("xdstp://b/envoy.config.listener.v3.Listener/l");
    h.events(
        "a1",
        vec![CoreEvent::Redirect {
            key: entry.clone(),
            target: listener,
            version: crate::version::Version::from("r"),
        }],
    );
    assert_eq!(refusal(&h, &entry), Some(RedirectRefusal::InvalidTarget));
}

#[test]
fn redirect_a_target_on_an_authority_the_bootstrap_lacks_is_refused() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let rogue = cluster("rogue.example", "c1");
    h.events("a1", vec![redirect(&entry, &rogue)]);
    assert_eq!(refusal(&h, &entry), Some(RedirectRefusal::UnknownAuthority));
    assert!(h.subscribed(&rogue).is_empty());
}

#[test]
fn redirect_of_a_glob_collection_itself_is_refused() {
    let mut h = Harness::new();
    let glob = h.watch("xdstp://a/envoy.config.cluster.v3.Cluster/edge/*");
    h.events("a1", vec![redirect(&glob, &cluster("b", "c1"))]);
    assert_eq!(refusal(&h, &glob), Some(RedirectRefusal::GlobCollection));
}

#[test]
fn redirect_to_a_glob_collection_is_refused() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let glob = ResourceKey::new(CDS, "xdstp://b/envoy.config.cluster.v3.Cluster/edge/*");
    h.events("a1", vec![redirect(&entry, &glob)]);
    assert_eq!(refusal(&h, &entry), Some(RedirectRefusal::GlobTarget));
}

#[test]
fn redirect_of_a_glob_member_is_followed_and_let_go_with_the_glob() {
    let mut h = Harness::new();
    let glob = h.watch("xdstp://a/envoy.config.cluster.v3.Cluster/edge/*");
    let member = ResourceKey::new(CDS, "xdstp://a/envoy.config.cluster.v3.Cluster/edge/m1");
    let target = cluster("b", "m1");
    h.model.entries.entry(member.clone()).or_default();
    h.events("a1", vec![redirect(&member, &target)]);
    assert_eq!(h.subscribed(&target), ["b1"]);
    h.upsert("b1", &target, "delegated");
    assert_eq!(h.tag(&member).as_deref(), Some("delegated"));
    h.unwatch(&glob);
    assert!(h.subscribed(&target).is_empty());
}

#[test]
fn redirect_to_a_target_already_fetched_starts_from_its_copy() {
    let mut h = Harness::new();
    let target = h.watch(&cluster("b", "shared").name);
    h.upsert("b1", &target, "shared");
    let entry = h.watch(&cluster("a", "c1").name);
    h.events("a1", vec![redirect(&entry, &target)]);
    assert_eq!(h.tag(&entry).as_deref(), Some("shared"));
    assert_eq!(h.state(&entry).status, ResourceStatus::Acked);
}

#[test]
fn redirect_targets_are_gated_by_their_own_authority() {
    let mut h = Harness::new();
    let entry = h.watch(&cluster("a", "c1").name);
    let target = cluster("b", "c1");
    h.events("a1", vec![redirect(&entry, &target)]);
    h.events("a1", vec![upsert(&target, "forged")]);
    assert_eq!(h.tag(&entry), None, "a1 does not serve authority b");
}
