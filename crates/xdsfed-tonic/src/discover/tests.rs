use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{FutureExt, StreamExt};

use super::*;
use crate::endpoint::EndpointService;
use crate::error::BoxError;

fn set(endpoints: &[(u16, f64)]) -> Arc<EndpointSet> {
    let endpoints: BTreeMap<EndpointAddress, f64> = endpoints
        .iter()
        .map(|(port, w)| (EndpointAddress::new("10.0.0.1", *port), *w))
        .collect();
    Arc::new(EndpointSet::from_map(endpoints))
}

/// A connector that counts its calls and answers every request at once.
fn counting_connector() -> (Arc<dyn Connector>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let connector = move |_: &ConnectTarget<'_>| -> Result<crate::Connecting, BoxError> {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(Box::pin(async {
            Ok(EndpointService::new(tower::service_fn(|_| async {
                Ok::<_, BoxError>(http::Response::new(tonic::body::Body::empty()))
            })))
        }))
    };
    (Arc::new(connector), calls)
}

fn discover(
    first: Arc<EndpointSet>,
) -> (
    EndpointDiscover,
    watch::Sender<Arc<EndpointSet>>,
    Arc<AtomicUsize>,
) {
    let (connector, calls) = counting_connector();
    let (tx, rx) = watch::channel(first);
    let context = ClusterContext {
        cluster: "c".into(),
        authority: "svc".into(),
        connect_timeout: None,
        policy: LbPolicy::RoundRobin,
        outlier: None,
        connector,
        tls: None,
    };
    (EndpointDiscover::new(context, rx), tx, calls)
}

/// The changes ready now, as `+port` for an insert and `-port` for a removal.
fn drain(d: &mut EndpointDiscover) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(Some(Ok(change))) = d.next().now_or_never() {
        out.push(match change {
            Change::Insert(a, _) => format!("+{}", a.port()),
            Change::Remove(a) => format!("-{}", a.port()),
        });
    }
    out
}

#[tokio::test]
async fn the_first_set_inserts_every_endpoint() {
    let (mut d, _tx, calls) = discover(set(&[(1, 0.5), (2, 0.5)]));
    assert_eq!(drain(&mut d), ["+1", "+2"]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_endpoint_that_stays_keeps_its_service_and_gets_its_new_weight() {
    let (mut d, tx, calls) = discover(set(&[(1, 0.5), (2, 0.5)]));
    drain(&mut d);
    tx.send_replace(set(&[(2, 0.25), (3, 0.75)]));
    assert_eq!(drain(&mut d), ["-1", "+3"]);
    // One connection for each endpoint ever added, none for the one that stayed.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let stayed = &d.known[&EndpointAddress::new("10.0.0.1", 2)];
    assert_eq!(stayed.level(), 0.0);
    assert_eq!(stayed.weight(), 0.25);
}

#[tokio::test]
async fn an_unchanged_set_yields_nothing() {
    let (mut d, tx, calls) = discover(set(&[(1, 1.0)]));
    drain(&mut d);
    tx.send_replace(set(&[(1, 1.0)]));
    assert!(drain(&mut d).is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn only_the_latest_set_is_applied() {
    let (mut d, tx, _calls) = discover(set(&[(1, 1.0)]));
    drain(&mut d);
    tx.send_replace(set(&[(2, 1.0)]));
    tx.send_replace(set(&[(1, 1.0)]));
    assert!(drain(&mut d).is_empty(), "the set in between is skipped");
}

#[tokio::test]
async fn a_failed_connect_leaves_the_endpoint_out() {
    let connector = |t: &ConnectTarget<'_>| -> Result<crate::Connecting, BoxError> {
        Err(format!("refusing {}", t.address).into())
    };
    let (_tx, rx) = watch::channel(set(&[(1, 1.0)]));
    let context = ClusterContext {
        cluster: "c".into(),
        authority: "svc".into(),
        connect_timeout: None,
        policy: LbPolicy::RoundRobin,
        outlier: None,
        connector: Arc::new(connector),
        tls: None,
    };
    let mut d = EndpointDiscover::new(context, rx);
    assert!(drain(&mut d).is_empty());
    assert!(d.known.is_empty());
}
