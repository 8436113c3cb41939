//! The write plan: which record to write or delete next, coalescing
//! updates, keeping the directory within its bounds, and backing off from
//! operations that fail. Sans-IO: the writer thread performs what it polls
//! and reports back, passing the time and a random number in.
//!
//! ```text
//! handle_put(key, record)      ─►┐             ┌─► poll_write(now) ─► Write(key, record) | Delete(key)
//! handle_remove(key)           ─►│  WritePlan  ├─► poll_report     ─► OverBound (once per key)
//! handle_failed(key, now, r)   ─►│             ├─► poll_timeout    ─► when a retry is due
//! handle_succeeded(key)        ─►┘             └─► is_idle
//! ```
//!
//! One pending operation per key: a newer copy replaces the pending one,
//! so a burst of updates to one resource costs one write, and what waits
//! is bounded by the number of resources, not by the update rate. Keys are
//! written in the order they first became pending.
//!
//! Sizes are accounted when an operation is planned: a copy over the
//! per-record bound, or one that would take the directory past its total
//! bound, is not written; its older record is deleted instead (the
//! directory never holds a copy older than the one the client accepted),
//! and the first refusal per key is reported.
//!
//! A failed operation leaves the key's record unknown, so a deletion is
//! planned (unless a newer copy waits), after a backoff: exponential with
//! jitter, per key, from [`RetryPolicy`]. After `max_attempts` failures in
//! a row the key is given up: nothing is pending for it until its next
//! copy, which starts afresh. A file system that fails every call (read
//! only, full, the directory replaced by a file) thus costs a bounded
//! number of calls per key, never a spin.

use crate::hash::{HashMap, HashSet};
use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::backoff::BackoffConfig;
use crate::backoff::spread;
use crate::protocol::ResourceKey;

use super::record::Record;

/// What the writer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Write this record, replacing any older one.
    Write(Record),
    /// Delete the key's record, if there is one.
    Delete,
}

/// Something to report once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// `key`'s copy of `len` bytes was not persisted: over `bound`.
    OverRecordBound {
        /// The resource.
        key: ResourceKey,
        /// Its copy's size.
        len: u64,
        /// The bound on one record.
        bound: u64,
    },
    /// `key`'s copy would take the directory past its total bound.
    OverTotalBound {
        /// The resource.
        key: ResourceKey,
        /// Its copy's size.
        len: u64,
        /// The bound on all records.
        bound: u64,
    },
}

/// What became of a failed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// It is retried (as a deletion, unless a newer copy waits) at `at`.
    RetryAt(Instant),
    /// The key failed `attempts` times in a row: nothing is pending for it
    /// until its next copy.
    GaveUp {
        /// The failures in a row.
        attempts: u32,
    },
}

/// How failed operations are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// The delay before each retry of one key: grows from `initial` by
    /// `multiplier` up to `max`, spread by `jitter`.
    pub backoff: BackoffConfig,
    /// Failures in a row after which a key is given up.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    /// 0.5 s, 1 s, 2 s … up to 30 s, ±20 %; given up after 8 failures
    /// (about a minute).
    fn default() -> Self {
        RetryPolicy {
            backoff: BackoffConfig {
                initial: Duration::from_millis(500),
                multiplier: 2.0,
                jitter: 0.2,
                max: Duration::from_secs(30),
            },
            max_attempts: 8,
        }
    }
}

impl RetryPolicy {
    /// The delay after a key's `failures`-th failure in a row, with `r`
    /// in [0, 1) choosing where in the jitter.
    fn delay(&self, failures: u32, r: f64) -> Duration {
        let b = &self.backoff;
        let exponent = i32::try_from(failures.saturating_sub(1)).unwrap_or(i32::MAX);
        let grown = b.initial.as_secs_f64() * f64::from(b.multiplier.max(1.0)).powi(exponent);
        let base = Duration::try_from_secs_f64(grown.min(b.max.as_secs_f64())).unwrap_or(b.max);
        spread(base, b.jitter, r)
    }
}

/// The plan (see the module docs).
#[derive(Debug)]
pub struct WritePlan {
    pending: HashMap<ResourceKey, Op>,
    /// Keys to perform, oldest first. May hold keys with nothing pending
    /// any more, or waiting out a backoff: [`Self::poll_write`] skips them.
    order: VecDeque<ResourceKey>,
    /// Keys whose last operation failed, with their failures in a row.
    failures: HashMap<ResourceKey, u32>,
    /// Keys waiting out a backoff, with when their pending operation may
    /// be tried again; not in `order` until then.
    waiting: HashMap<ResourceKey, Instant>,
    /// The same retry times, earliest first.
    retries: BTreeSet<(Instant, ResourceKey)>,
    retry: RetryPolicy,
    /// Bytes of each key's record once everything planned is done.
    sizes: HashMap<ResourceKey, u64>,
    total: u64,
    max_record: u64,
    max_total: u64,
    /// Keys whose refusal was reported, until a copy of theirs fits again.
    reported: HashSet<ResourceKey>,
    reports: VecDeque<Report>,
}

impl WritePlan {
    /// A plan for a directory holding records of at most `max_record`
    /// bytes each and `max_total` bytes in all.
    pub fn new(max_record: u64, max_total: u64) -> Self {
        WritePlan {
            pending: HashMap::default(),
            order: VecDeque::new(),
            failures: HashMap::default(),
            waiting: HashMap::default(),
            retries: BTreeSet::new(),
            retry: RetryPolicy::default(),
            sizes: HashMap::default(),
            total: 0,
            max_record,
            max_total,
            reported: HashSet::default(),
            reports: VecDeque::new(),
        }
    }

    /// Retries failed operations by `policy` instead of the default.
    #[cfg(any(test, feature = "test-support"))]
    #[doc(hidden)]
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Counts a record already on disk (found when the directory loaded).
    pub fn handle_existing(&mut self, key: ResourceKey, len: u64) {
        self.account(key, Some(len));
    }

    /// A copy to persist.
    pub fn handle_put(&mut self, record: Record) {
        let key = record.key();
        let len = record.encoded_len();
        let refusal = if len > self.max_record {
            Some(Report::OverRecordBound {
                key: key.clone(),
                len,
                bound: self.max_record,
            })
        } else {
            let others = self.total - self.sizes.get(&key).copied().unwrap_or(0);
            (others.saturating_add(len) > self.max_total).then(|| Report::OverTotalBound {
                key: key.clone(),
                len,
                bound: self.max_total,
            })
        };
        match refusal {
            Some(report) => {
                if self.reported.insert(key.clone()) {
                    self.reports.push_back(report);
                }
                self.handle_remove(key);
            }
            None => {
                self.reported.remove(&key);
                self.account(key.clone(), Some(len));
                self.queue(key, Op::Write(record));
            }
        }
    }

    /// `key`'s copy is gone: its record goes too.
    pub fn handle_remove(&mut self, key: ResourceKey) {
        self.account(key.clone(), None);
        self.queue(key, Op::Delete);
    }

    /// `key`'s operation, polled before `now`, failed. What is on disk for
    /// it is unknown, so it is deleted (and not counted), after a backoff
    /// whose jitter `r` in [0, 1) places; or the key is given up.
    pub fn handle_failed(&mut self, key: ResourceKey, now: Instant, r: f64) -> Failure {
        let failures = self.failures.remove(&key).unwrap_or(0) + 1;
        self.stop_waiting(&key);
        self.account(key.clone(), None);
        if failures >= self.retry.max_attempts {
            // Left in `order`, if there, with nothing pending: skipped.
            self.pending.remove(&key);
            return Failure::GaveUp { attempts: failures };
        }
        self.pending.entry(key.clone()).or_insert(Op::Delete);
        let at = now
            .checked_add(self.retry.delay(failures, r))
            .unwrap_or(now);
        self.failures.insert(key.clone(), failures);
        self.waiting.insert(key.clone(), at);
        self.retries.insert((at, key));
        Failure::RetryAt(at)
    }

    /// `key`'s operation succeeded: its failures are forgotten.
    pub fn handle_succeeded(&mut self, key: &ResourceKey) {
        self.failures.remove(key);
    }

    /// The next operation to perform at `now`: the oldest pending one
    /// whose key is not waiting out a backoff.
    #[must_use]
    pub fn poll_write(&mut self, now: Instant) -> Option<(ResourceKey, Op)> {
        while let Some((at, _)) = self.retries.first()
            && *at <= now
        {
            if let Some((_, key)) = self.retries.pop_first() {
                // Due: back in line (its failures still count).
                self.waiting.remove(&key);
                self.order.push_back(key);
            }
        }
        while let Some(key) = self.order.pop_front() {
            // A key waiting out a backoff is back in line when it is due.
            if self.waiting.contains_key(&key) {
                continue;
            }
            if let Some(op) = self.pending.remove(&key) {
                return Some((key, op));
            }
        }
        None
    }

    /// When the earliest retry is due, if one waits.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.retries.first().map(|(at, _)| *at)
    }

    /// The next refusal to report.
    #[must_use]
    pub fn poll_report(&mut self) -> Option<Report> {
        self.reports.pop_front()
    }

    /// Whether nothing waits to be written, retried or reported.
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.reports.is_empty()
    }

    /// Bytes of the records once everything planned is done.
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    fn account(&mut self, key: ResourceKey, len: Option<u64>) {
        let old = match len {
            Some(len) => self.sizes.insert(key, len),
            None => self.sizes.remove(&key),
        };
        self.total = self.total - old.unwrap_or(0) + len.unwrap_or(0);
    }

    fn queue(&mut self, key: ResourceKey, op: Op) {
        if self.pending.insert(key.clone(), op).is_none() && !self.waiting.contains_key(&key) {
            self.order.push_back(key);
        }
    }

    fn stop_waiting(&mut self, key: &ResourceKey) {
        if let Some(at) = self.waiting.remove(key) {
            self.retries.remove(&(at, key.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use super::*;

    fn record(name: &str, version: &str, len: usize) -> Record {
        Record {
            type_url: Arc::from("t"),
            name: Arc::from(name),
            version: Arc::from(version),
            server: Arc::from("s"),
            resource: Bytes::from(vec![0u8; len]),
        }
    }

    /// Everything ready at once (no backoff is involved).
    fn drain(plan: &mut WritePlan) -> Vec<(Arc<str>, Op)> {
        let now = Instant::now();
        std::iter::from_fn(|| plan.poll_write(now))
            .map(|(k, op)| (k.name, op))
            .collect()
    }

    /// A burst of copies of one resource costs one write, of the newest.
    #[test]
    fn updates_to_one_key_coalesce_to_the_newest_copy() {
        let mut plan = WritePlan::new(1 << 20, 1 << 30);
        for v in 0..1000 {
            plan.handle_put(record("a", &v.to_string(), 10));
        }
        plan.handle_put(record("b", "1", 10));
        let writes = drain(&mut plan);
        assert_eq!(
            writes,
            vec![
                (Arc::from("a"), Op::Write(record("a", "999", 10))),
                (Arc::from("b"), Op::Write(record("b", "1", 10))),
            ]
        );
        assert!(plan.is_idle());
    }

    /// A deletion after a pending copy replaces it; a copy after a
    /// deletion replaces that.
    #[test]
    fn removal_replaces_a_pending_write_and_the_reverse() {
        let mut plan = WritePlan::new(1 << 20, 1 << 30);
        plan.handle_put(record("a", "1", 10));
        plan.handle_remove(record("a", "1", 0).key());
        assert_eq!(drain(&mut plan), vec![(Arc::from("a"), Op::Delete)]);
        assert_eq!(plan.total(), 0);
        plan.handle_remove(record("a", "1", 0).key());
        plan.handle_put(record("a", "2", 10));
        assert_eq!(
            drain(&mut plan),
            vec![(Arc::from("a"), Op::Write(record("a", "2", 10)))]
        );
    }

    /// A copy over the per-record bound is not written; its older record
    /// is deleted; the refusal is reported once, until a copy fits again.
    #[test]
    fn copy_over_the_record_bound_deletes_the_old_record_and_is_reported_once() {
        let small = record("a", "1", 10).encoded_len();
        let mut plan = WritePlan::new(small, 1 << 30);
        plan.handle_put(record("a", "1", 10));
        let _ = drain(&mut plan);
        plan.handle_put(record("a", "2", 11));
        plan.handle_put(record("a", "3", 12));
        assert_eq!(drain(&mut plan), vec![(Arc::from("a"), Op::Delete)]);
        assert!(matches!(
            plan.poll_report(),
            Some(Report::OverRecordBound { len, bound, .. }) if len == small + 1 && bound == small
        ));
        assert_eq!(plan.poll_report(), None);
        assert_eq!(plan.total(), 0);
        plan.handle_put(record("a", "4", 10));
        plan.handle_put(record("a", "5", 11));
        assert!(
            plan.poll_report().is_some(),
            "fitting again re-arms the report"
        );
    }

    /// The total bound counts every record; replacing a record counts only
    /// the difference; a deletion frees its bytes.
    #[test]
    fn total_bound_counts_every_record_and_frees_deleted_ones() {
        let one = record("a", "1", 100).encoded_len();
        let mut plan = WritePlan::new(1 << 20, 2 * one);
        plan.handle_existing(record("a", "0", 0).key(), one);
        plan.handle_put(record("b", "1", 100));
        plan.handle_put(record("b", "2", 100));
        assert_eq!(plan.total(), 2 * one);
        plan.handle_put(record("c", "1", 100));
        assert!(matches!(
            plan.poll_report(),
            Some(Report::OverTotalBound { .. })
        ));
        assert_eq!(plan.total(), 2 * one);
        plan.handle_remove(record("a", "", 0).key());
        plan.handle_put(record("c", "2", 100));
        assert_eq!(plan.total(), 2 * one);
        let writes = drain(&mut plan);
        assert_eq!(writes.len(), 3, "b, c (delete then write coalesced), a");
    }

    /// A failed write is followed by a deletion of whatever the key left,
    /// after a backoff, unless a newer copy is already planned.
    #[test]
    fn failed_write_plans_a_deletion_unless_a_newer_copy_waits() {
        let t0 = Instant::now();
        let mut plan = WritePlan::new(1 << 20, 1 << 30);
        plan.handle_put(record("a", "1", 10));
        let (key, _) = plan.poll_write(t0).unwrap();
        let Failure::RetryAt(at) = plan.handle_failed(key.clone(), t0, 0.5) else {
            panic!("the first failure is retried");
        };
        assert!(at > t0);
        assert_eq!(plan.poll_write(t0), None, "not before the backoff");
        assert_eq!(plan.poll_timeout(), Some(at));
        assert_eq!(plan.poll_write(at), Some((key.clone(), Op::Delete)));
        plan.handle_succeeded(&key);
        assert_eq!(plan.total(), 0);
        plan.handle_put(record("a", "2", 10));
        let _ = plan.poll_write(at);
        plan.handle_put(record("a", "3", 10));
        let Failure::RetryAt(again) = plan.handle_failed(key, at, 0.5) else {
            panic!("a success started the count afresh");
        };
        assert_eq!(plan.poll_write(at), None);
        assert_eq!(
            plan.poll_write(again),
            Some((key_of("a"), Op::Write(record("a", "3", 10))))
        );
    }

    fn key_of(name: &str) -> ResourceKey {
        record(name, "", 0).key()
    }

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            backoff: BackoffConfig {
                initial: Duration::from_millis(100),
                multiplier: 2.0,
                jitter: 0.2,
                max: Duration::from_millis(700),
            },
            max_attempts,
        }
    }

    /// The state directory's files: an operation that keeps failing (a
    /// deletion on a read-only file system) is retried with a growing,
    /// jittered, capped backoff and given up after a bounded number of
    /// attempts, not retried forever.
    #[test]
    fn failing_operation_is_given_up_after_bounded_attempts() {
        let t0 = Instant::now();
        let mut plan = WritePlan::new(1 << 20, 1 << 30).with_retry(policy(6));
        plan.handle_put(record("a", "1", 10));
        let mut now = t0;
        let mut attempts = 0;
        let mut delays = Vec::new();
        loop {
            while let Some((key, _)) = plan.poll_write(now) {
                attempts += 1;
                assert!(attempts <= 100, "still retrying after {attempts} attempts");
                match plan.handle_failed(key, now, 0.0) {
                    Failure::RetryAt(at) => delays.push(at - now),
                    Failure::GaveUp { attempts: n } => assert_eq!(n, attempts),
                }
            }
            match plan.poll_timeout() {
                Some(at) => now = at,
                None => break,
            }
        }
        assert_eq!(attempts, 6);
        assert!(plan.is_idle(), "nothing is pending once given up");
        // 100 ms doubling, capped at 700 ms, all at the low end of ±20 %.
        let ms: Vec<u64> = delays
            .iter()
            .map(|d| (d.as_secs_f64() * 1000.0).round() as u64)
            .collect();
        assert_eq!(ms, [80, 160, 320, 560, 560]);
        // The next copy starts afresh.
        plan.handle_put(record("a", "2", 10));
        let (key, _) = plan.poll_write(now).unwrap();
        assert!(matches!(
            plan.handle_failed(key, now, 0.0),
            Failure::RetryAt(_)
        ));
    }

    /// A key waiting out its backoff does not hold up the others, and a
    /// newer copy of it waits with it (it replaces the planned deletion).
    #[test]
    fn key_in_backoff_does_not_hold_up_others_and_its_newer_copy_waits() {
        let t0 = Instant::now();
        let mut plan = WritePlan::new(1 << 20, 1 << 30).with_retry(policy(6));
        plan.handle_put(record("a", "1", 10));
        let (a, _) = plan.poll_write(t0).unwrap();
        let Failure::RetryAt(at) = plan.handle_failed(a.clone(), t0, 0.5) else {
            panic!("retried");
        };
        plan.handle_put(record("b", "1", 10));
        plan.handle_put(record("a", "2", 10));
        assert_eq!(
            plan.poll_write(t0).map(|(k, _)| k.name),
            Some(Arc::from("b"))
        );
        assert_eq!(plan.poll_write(t0), None);
        assert!(!plan.is_idle());
        assert_eq!(
            plan.poll_write(at),
            Some((a, Op::Write(record("a", "2", 10))))
        );
        assert_eq!(plan.poll_write(at), None);
    }
}
