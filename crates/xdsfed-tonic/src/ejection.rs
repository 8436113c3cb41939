//! The driver of a cluster's outlier detection: every `interval` it takes
//! each endpoint's call counts, hands them to the sans-IO
//! [`OutlierDetector`], and ejects or returns endpoints as it says. An
//! ejected endpoint stays pending in the balancer, so it is not picked,
//! until it returns; when every endpoint is ejected, calls fail at once
//! (the cluster's [`Connectivity`] says so) rather than wait for one.

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::discover::{EndpointRegistry, registry_map};
use crate::endpoint::EndpointAddress;
use crate::outlier::{CallCounts, Ejection, OutlierConfig, OutlierDetector};
use crate::subchannel::Connectivity;

/// Starts the detection of one cluster; the task runs until aborted (its
/// balancer aborts it when dropped).
pub(crate) fn spawn(
    config: OutlierConfig,
    cluster: std::sync::Arc<str>,
    registry: EndpointRegistry,
    connectivity: std::sync::Arc<Connectivity>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut detector = OutlierDetector::new(config);
        let mut next = Instant::now() + config.interval;
        loop {
            tokio::time::sleep_until(next).await;
            next += config.interval;
            tick(&mut detector, &cluster, &registry, &connectivity);
        }
    })
}

/// One interval: counts taken, decisions applied.
fn tick(
    detector: &mut OutlierDetector<EndpointAddress>,
    cluster: &str,
    registry: &EndpointRegistry,
    connectivity: &Connectivity,
) {
    let endpoints = registry_map(registry);
    let mut counts: Vec<(EndpointAddress, CallCounts)> = endpoints
        .iter()
        .map(|(address, stats)| {
            let (successes, failures) = stats.take_calls();
            (
                address.clone(),
                CallCounts {
                    successes,
                    failures,
                },
            )
        })
        .collect();
    // A fixed order, so that `max_ejection_percent` spares the same ones
    // whatever the map's order.
    counts.sort_by(|a, b| a.0.cmp(&b.0));
    for (address, change) in detector.handle_interval(Instant::now(), &counts, crate::rng::next_u64)
    {
        let ejected = change == Ejection::Eject;
        if ejected {
            tracing::info!(%cluster, endpoint = %address, "outlier detection ejects endpoint");
        }
        if let Some(stats) = endpoints.get(&address) {
            stats.set_ejected(ejected);
        }
    }
    let ejected = endpoints.values().filter(|s| s.is_ejected()).count();
    connectivity.set_ejected(ejected, endpoints.len());
}
