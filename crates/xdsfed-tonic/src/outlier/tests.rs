//! gRFC A50's algorithms in virtual time: instants are made up, draws are
//! fixed.

use super::*;
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

fn secs(s: i64) -> Option<PbDuration> {
    Some(PbDuration {
        seconds: s,
        nanos: 0,
    })
}

fn value(v: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value: v })
}

/// Failure percentage only: 3 hosts, 10 calls each, above 50 % failures.
fn failure_percentage(max_percent: u32) -> OutlierConfig {
    OutlierConfig::of(Some(&OutlierDetection {
        interval: secs(1),
        base_ejection_time: secs(10),
        max_ejection_time: secs(100),
        max_ejection_percent: value(max_percent),
        enforcing_success_rate: value(0),
        enforcing_failure_percentage: value(100),
        failure_percentage_threshold: value(50),
        failure_percentage_minimum_hosts: value(3),
        failure_percentage_request_volume: value(10),
        ..Default::default()
    }))
    .unwrap()
}

fn counts(failures: &[u64]) -> Vec<(&'static str, CallCounts)> {
    ["a", "b", "c", "d"]
        .into_iter()
        .zip(failures)
        .map(|(k, f)| {
            (
                k,
                CallCounts {
                    successes: 10 - f,
                    failures: *f,
                },
            )
        })
        .collect()
}

const ALWAYS: fn() -> u64 = || 0;

/// A50: defaults when the field is empty; success rate on, failure
/// percentage off; no field, no detection.
#[test]
fn outlier_config_takes_a50_defaults() {
    let config = OutlierConfig::of(Some(&OutlierDetection::default())).unwrap();
    assert_eq!(config.interval, Duration::from_secs(10));
    assert_eq!(config.base_ejection_time, Duration::from_secs(30));
    assert_eq!(config.max_ejection_time, Duration::from_secs(300));
    assert_eq!(config.max_ejection_percent, 10);
    assert!(config.success_rate.is_some());
    assert!(config.failure_percentage.is_none());
    assert_eq!(OutlierConfig::of(None), None);
}

/// A50: an endpoint whose failure percentage is above the threshold is
/// ejected; the others stay.
#[test]
fn failure_percentage_ejects_the_endpoint_above_the_threshold() {
    let mut detector = OutlierDetector::new(failure_percentage(50));
    let t0 = Instant::now();
    let changes = detector.handle_interval(t0, &counts(&[10, 0, 1]), ALWAYS);
    assert_eq!(changes, [("a", Ejection::Eject)]);
}

/// A50: fewer candidates than the minimum hosts, or too few calls, eject
/// nobody.
#[test]
fn failure_percentage_needs_minimum_hosts_with_enough_calls() {
    let mut detector = OutlierDetector::new(failure_percentage(100));
    let t0 = Instant::now();
    let few = &counts(&[10, 0])[..];
    assert!(detector.handle_interval(t0, few, ALWAYS).is_empty());
    let mut quiet = counts(&[10, 0, 0]);
    quiet[1].1 = CallCounts::default();
    assert!(detector.handle_interval(t0, &quiet, ALWAYS).is_empty());
}

/// A50: ejections stop once `max_ejection_percent` of the endpoints are
/// ejected (here 1 of 4 reaches 25 %).
#[test]
fn ejections_stop_at_max_ejection_percent() {
    let mut detector = OutlierDetector::new(failure_percentage(25));
    let t0 = Instant::now();
    let changes = detector.handle_interval(t0, &counts(&[10, 10, 10, 0]), ALWAYS);
    assert_eq!(changes, [("a", Ejection::Eject)]);
}

/// A50: enforcement is a probability: a draw at or above the percentage
/// spares the endpoint.
#[test]
fn enforcement_percentage_is_drawn_per_ejection() {
    let mut config = failure_percentage(100);
    if let Some(a) = config.failure_percentage.as_mut() {
        a.enforcement_percentage = 30;
    }
    let mut detector = OutlierDetector::new(config);
    let t0 = Instant::now();
    assert!(
        detector
            .handle_interval(t0, &counts(&[10, 0, 0]), || 30)
            .is_empty()
    );
    assert_eq!(
        detector.handle_interval(t0, &counts(&[10, 0, 0]), || 29),
        [("a", Ejection::Eject)]
    );
}

/// A50: an ejected endpoint returns after base × multiplier; ejected again
/// at once, it stays out twice as long; intervals without ejection bring
/// the multiplier back down.
#[test]
fn ejection_time_grows_with_the_multiplier_and_decays() {
    let mut detector = OutlierDetector::new(failure_percentage(50));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let bad = counts(&[10, 0, 0]);
    let mut out = bad.clone();
    out[0].1 = CallCounts::default();
    assert_eq!(
        detector.handle_interval(at(0), &bad, ALWAYS),
        [("a", Ejection::Eject)]
    );
    assert!(detector.handle_interval(at(9), &out, ALWAYS).is_empty());
    assert_eq!(
        detector.handle_interval(at(10), &out, ALWAYS),
        [("a", Ejection::Return)]
    );
    assert_eq!(
        detector.handle_interval(at(11), &bad, ALWAYS),
        [("a", Ejection::Eject)]
    );
    assert!(
        detector.handle_interval(at(30), &out, ALWAYS).is_empty(),
        "2 × base"
    );
    assert_eq!(
        detector.handle_interval(at(31), &out, ALWAYS),
        [("a", Ejection::Return)]
    );
    for s in 32..40 {
        assert!(
            detector
                .handle_interval(at(s), &counts(&[0, 0, 0]), ALWAYS)
                .is_empty()
        );
    }
    assert_eq!(
        detector.handle_interval(at(40), &bad, ALWAYS),
        [("a", Ejection::Eject)]
    );
    assert_eq!(
        detector.handle_interval(at(50), &out, ALWAYS),
        [("a", Ejection::Return)],
        "the multiplier decayed back to 0, so 1 × base again"
    );
}

/// A50: success rate ejects an endpoint below mean − stdev × factor/1000.
#[test]
fn success_rate_ejects_the_endpoint_below_mean_minus_stdev() {
    let config = OutlierConfig::of(Some(&OutlierDetection {
        max_ejection_percent: value(100),
        success_rate_minimum_hosts: value(4),
        success_rate_request_volume: value(10),
        success_rate_stdev_factor: value(1000),
        ..Default::default()
    }))
    .unwrap();
    let mut detector = OutlierDetector::new(config);
    let changes = detector.handle_interval(Instant::now(), &counts(&[6, 0, 0, 0]), ALWAYS);
    assert_eq!(changes, [("a", Ejection::Eject)]);
}

/// A50: an endpoint that leaves the cluster is forgotten.
#[test]
fn endpoints_that_leave_are_forgotten() {
    let mut detector = OutlierDetector::new(failure_percentage(50));
    let t0 = Instant::now();
    let _ = detector.handle_interval(t0, &counts(&[10, 0, 0]), ALWAYS);
    let _ = detector.handle_interval(t0, &counts(&[0, 0, 0])[1..], ALWAYS);
    assert_eq!(detector.endpoints.len(), 2);
}
