//! Outlier detection (gRFC A50), sans-IO: every `interval` the driver hands
//! in each endpoint's call counts since the last tick and the time; the
//! detector answers which endpoints to eject and which to return.
//!
//! ```text
//! handle_interval(now, [(endpoint, successes, failures)], random) ─► [(endpoint, Eject | Return)]
//! ```
//!
//! Rules, in the order A50 runs them at each interval:
//! 1. **Success rate** (unless `enforcing_success_rate` is 0): among the
//!    endpoints with at least `success_rate_request_volume` calls, if there
//!    are at least `success_rate_minimum_hosts`, those whose success rate
//!    is below `mean − stdev × success_rate_stdev_factor / 1000` are
//!    ejected, each with probability `enforcing_success_rate` %.
//! 2. **Failure percentage** (only when `enforcing_failure_percentage` is
//!    above 0): the same candidates by `failure_percentage_request_volume`
//!    and `failure_percentage_minimum_hosts`; those whose failure
//!    percentage is above `failure_percentage_threshold` are ejected, each
//!    with probability `enforcing_failure_percentage` %.
//! 3. Before each ejection: no more once `max_ejection_percent` of the
//!    endpoints are ejected.
//! 4. Then every endpoint not ejected lowers its multiplier by one (not
//!    below 0); an ejected one returns once `now ≥ ejected_at +
//!    min(base_ejection_time × multiplier, max(base_ejection_time,
//!    max_ejection_time))`. An ejection raises the multiplier by one.
//!
//! Defaults (A50, Envoy): interval 10 s, base 30 s, max 300 s, max percent
//! 10, stdev factor 1900, enforcing success rate 100, minimum hosts 5,
//! request volume 100 (success rate) and 50 (failure percentage),
//! threshold 85, enforcing failure percentage 0.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::OutlierDetection;
use tokio::time::Instant;
use xdsfed_core::types::std_duration;

/// A cluster's outlier detection, with A50's defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OutlierConfig {
    pub(crate) interval: Duration,
    base_ejection_time: Duration,
    max_ejection_time: Duration,
    max_ejection_percent: u32,
    success_rate: Option<Algorithm>,
    failure_percentage: Option<Algorithm>,
}

/// One ejection algorithm's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Algorithm {
    /// The stdev factor (success rate) or the threshold in % (failure
    /// percentage).
    bound: u32,
    enforcement_percentage: u32,
    minimum_hosts: u32,
    request_volume: u32,
}

impl OutlierConfig {
    /// The detection of a cluster's `outlier_detection` field; `None` when
    /// it has none. Values were checked by core validation (percentages up
    /// to 100); out-of-range ones are capped here all the same.
    pub(crate) fn of(field: Option<&OutlierDetection>) -> Option<Self> {
        let od = field?;
        let n = |v: &Option<envoy_types::pb::google::protobuf::UInt32Value>, default: u32| {
            v.as_ref().map_or(default, |v| v.value)
        };
        let d = |v: &Option<envoy_types::pb::google::protobuf::Duration>, default: u64| {
            v.as_ref()
                .and_then(std_duration)
                .unwrap_or(Duration::from_secs(default))
        };
        let base_ejection_time = d(&od.base_ejection_time, 30);
        let enforcing_success_rate = n(&od.enforcing_success_rate, 100).min(100);
        let enforcing_failure_percentage = n(&od.enforcing_failure_percentage, 0).min(100);
        Some(Self {
            interval: d(&od.interval, 10).max(Duration::from_millis(1)),
            base_ejection_time,
            max_ejection_time: d(&od.max_ejection_time, 300).max(base_ejection_time),
            max_ejection_percent: n(&od.max_ejection_percent, 10).min(100),
            success_rate: (enforcing_success_rate > 0).then(|| Algorithm {
                bound: n(&od.success_rate_stdev_factor, 1900),
                enforcement_percentage: enforcing_success_rate,
                minimum_hosts: n(&od.success_rate_minimum_hosts, 5),
                request_volume: n(&od.success_rate_request_volume, 100),
            }),
            failure_percentage: (enforcing_failure_percentage > 0).then(|| Algorithm {
                bound: n(&od.failure_percentage_threshold, 85).min(100),
                enforcement_percentage: enforcing_failure_percentage,
                minimum_hosts: n(&od.failure_percentage_minimum_hosts, 5),
                request_volume: n(&od.failure_percentage_request_volume, 50),
            }),
        })
    }
}

/// Calls one endpoint finished in the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallCounts {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
}

impl CallCounts {
    fn volume(&self) -> u64 {
        self.successes.saturating_add(self.failures)
    }

    /// Successes per call, in [0, 1]; only read when the volume is above 0.
    fn success_rate(&self) -> f64 {
        self.successes as f64 / self.volume().max(1) as f64
    }
}

/// What to do with an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ejection {
    /// Take it out of the picks.
    Eject,
    /// Put it back.
    Return,
}

#[derive(Debug, Default)]
struct EndpointState {
    multiplier: u32,
    ejected_at: Option<Instant>,
}

/// The ejection state of one cluster's endpoints.
#[derive(Debug)]
pub(crate) struct OutlierDetector<K> {
    config: OutlierConfig,
    endpoints: HashMap<K, EndpointState>,
}

impl<K: Hash + Eq + Clone> OutlierDetector<K> {
    pub(crate) fn new(config: OutlierConfig) -> Self {
        Self {
            config,
            endpoints: HashMap::new(),
        }
    }

    /// One interval: `counts` holds every endpoint of the cluster now (one
    /// that is missing is forgotten) with its calls since the last tick;
    /// `random` gives the enforcement draws. Returns the changes, in the
    /// order of `counts`.
    #[must_use]
    pub(crate) fn handle_interval(
        &mut self,
        now: Instant,
        counts: &[(K, CallCounts)],
        mut random: impl FnMut() -> u64,
    ) -> Vec<(K, Ejection)> {
        self.endpoints
            .retain(|k, _| counts.iter().any(|(key, _)| key == k));
        for (key, _) in counts {
            self.endpoints.entry(key.clone()).or_default();
        }
        let mut changes = Vec::new();
        if let Some(algorithm) = self.config.success_rate {
            let outliers = success_rate_outliers(&algorithm, counts);
            self.eject(
                now,
                outliers,
                algorithm.enforcement_percentage,
                &mut random,
                &mut changes,
            );
        }
        if let Some(algorithm) = self.config.failure_percentage {
            let outliers = failure_percentage_outliers(&algorithm, counts);
            self.eject(
                now,
                outliers,
                algorithm.enforcement_percentage,
                &mut random,
                &mut changes,
            );
        }
        for (key, _) in counts {
            if self.returns(now, key) {
                changes.push((key.clone(), Ejection::Return));
            }
        }
        changes
    }

    /// Ejects each of `outliers` not yet ejected, with probability
    /// `percentage`, while under the maximum.
    fn eject(
        &mut self,
        now: Instant,
        outliers: Vec<K>,
        percentage: u32,
        random: &mut impl FnMut() -> u64,
        changes: &mut Vec<(K, Ejection)>,
    ) {
        for key in outliers {
            let ejected = self
                .endpoints
                .values()
                .filter(|s| s.ejected_at.is_some())
                .count();
            // A50: stop once the ejected share reaches max_ejection_percent.
            if ejected * 100 >= self.config.max_ejection_percent as usize * self.endpoints.len() {
                return;
            }
            if random() % 100 >= u64::from(percentage) {
                continue;
            }
            if let Some(state) = self
                .endpoints
                .get_mut(&key)
                .filter(|s| s.ejected_at.is_none())
            {
                state.ejected_at = Some(now);
                state.multiplier = state.multiplier.saturating_add(1);
                changes.push((key, Ejection::Eject));
            }
        }
    }

    /// Step 4 for one endpoint: whether it returns now.
    fn returns(&mut self, now: Instant, key: &K) -> bool {
        let config = &self.config;
        let Some(state) = self.endpoints.get_mut(key) else {
            return false;
        };
        match state.ejected_at {
            None => {
                state.multiplier = state.multiplier.saturating_sub(1);
                false
            }
            Some(at) => {
                let time = config
                    .base_ejection_time
                    .saturating_mul(state.multiplier)
                    .min(config.max_ejection_time);
                let back = now >= at + time;
                if back {
                    state.ejected_at = None;
                }
                back
            }
        }
    }
}

/// The endpoints whose success rate is below mean − stdev × factor.
fn success_rate_outliers<K: Clone>(algorithm: &Algorithm, counts: &[(K, CallCounts)]) -> Vec<K> {
    let candidates: Vec<&(K, CallCounts)> = counts
        .iter()
        .filter(|(_, c)| c.volume() >= u64::from(algorithm.request_volume))
        .collect();
    if candidates.len() < algorithm.minimum_hosts as usize || candidates.is_empty() {
        return Vec::new();
    }
    let rates: Vec<f64> = candidates.iter().map(|(_, c)| c.success_rate()).collect();
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let variance = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / rates.len() as f64;
    let threshold = mean - variance.sqrt() * (f64::from(algorithm.bound) / 1000.0);
    candidates
        .iter()
        .zip(rates)
        .filter(|(_, rate)| *rate < threshold)
        .map(|((key, _), _)| key.clone())
        .collect()
}

/// The endpoints whose failure percentage is above the threshold.
fn failure_percentage_outliers<K: Clone>(
    algorithm: &Algorithm,
    counts: &[(K, CallCounts)],
) -> Vec<K> {
    let candidates: Vec<&(K, CallCounts)> = counts
        .iter()
        .filter(|(_, c)| c.volume() >= u64::from(algorithm.request_volume))
        .collect();
    if candidates.len() < algorithm.minimum_hosts as usize {
        return Vec::new();
    }
    candidates
        .into_iter()
        .filter(|(_, c)| (1.0 - c.success_rate()) * 100.0 > f64::from(algorithm.bound))
        .map(|(key, _)| key.clone())
        .collect()
}

#[cfg(test)]
mod tests;
