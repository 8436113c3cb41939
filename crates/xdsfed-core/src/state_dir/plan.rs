//! The write plan: which record to write or delete next, coalescing
//! updates and keeping the directory within its bounds. Sans-IO: the
//! writer thread performs what it polls and reports back.
//!
//! ```text
//! handle_put(key, record)  ─►┐             ┌─► poll_write  ─► Write(key, record) | Delete(key)
//! handle_remove(key)       ─►│  WritePlan  ├─► poll_report ─► OverBound (once per key)
//! handle_failed(key)       ─►┘             └─► is_idle
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

use std::collections::{HashMap, HashSet, VecDeque};

use crate::protocol::ResourceKey;

use super::record::Record;

/// What the writer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Write this record, replacing any older one.
    Write(Record),
    /// Delete the key's record, if there is one.
    Delete,
}

/// Something to report once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// `key`'s copy of `len` bytes was not persisted: over `bound`.
    OverRecordBound {
        key: ResourceKey,
        len: u64,
        bound: u64,
    },
    /// `key`'s copy would take the directory past its total bound.
    OverTotalBound {
        key: ResourceKey,
        len: u64,
        bound: u64,
    },
}

/// The plan (see the module docs).
#[derive(Debug)]
pub(crate) struct WritePlan {
    pending: HashMap<ResourceKey, Op>,
    order: VecDeque<ResourceKey>,
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
    pub(crate) fn new(max_record: u64, max_total: u64) -> Self {
        WritePlan {
            pending: HashMap::new(),
            order: VecDeque::new(),
            sizes: HashMap::new(),
            total: 0,
            max_record,
            max_total,
            reported: HashSet::new(),
            reports: VecDeque::new(),
        }
    }

    /// Counts a record already on disk (found when the directory loaded).
    pub(crate) fn handle_existing(&mut self, key: ResourceKey, len: u64) {
        self.account(key, Some(len));
    }

    /// A copy to persist.
    pub(crate) fn handle_put(&mut self, record: Record) {
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
    pub(crate) fn handle_remove(&mut self, key: ResourceKey) {
        self.account(key.clone(), None);
        self.queue(key, Op::Delete);
    }

    /// Writing `key`'s record failed: what is on disk for it is unknown,
    /// so it is deleted (and not counted).
    pub(crate) fn handle_failed(&mut self, key: ResourceKey) {
        if !self.pending.contains_key(&key) {
            self.handle_remove(key);
        }
    }

    /// The next operation to perform.
    #[must_use]
    pub(crate) fn poll_write(&mut self) -> Option<(ResourceKey, Op)> {
        let key = self.order.pop_front()?;
        let op = self.pending.remove(&key)?;
        Some((key, op))
    }

    /// The next refusal to report.
    #[must_use]
    pub(crate) fn poll_report(&mut self) -> Option<Report> {
        self.reports.pop_front()
    }

    /// Whether nothing waits to be written or reported.
    pub(crate) fn is_idle(&self) -> bool {
        self.order.is_empty() && self.reports.is_empty()
    }

    /// Bytes of the records once everything planned is done.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
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
        if self.pending.insert(key.clone(), op).is_none() {
            self.order.push_back(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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

    fn drain(plan: &mut WritePlan) -> Vec<(Arc<str>, Op)> {
        std::iter::from_fn(|| plan.poll_write())
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
    /// unless a newer copy is already planned.
    #[test]
    fn failed_write_plans_a_deletion_unless_a_newer_copy_waits() {
        let mut plan = WritePlan::new(1 << 20, 1 << 30);
        plan.handle_put(record("a", "1", 10));
        let (key, _) = plan.poll_write().unwrap();
        plan.handle_failed(key.clone());
        assert_eq!(plan.poll_write(), Some((key.clone(), Op::Delete)));
        assert_eq!(plan.total(), 0);
        plan.handle_put(record("a", "2", 10));
        let _ = plan.poll_write();
        plan.handle_put(record("a", "3", 10));
        plan.handle_failed(key);
        assert_eq!(
            drain(&mut plan),
            vec![(Arc::from("a"), Op::Write(record("a", "3", 10)))]
        );
    }
}
