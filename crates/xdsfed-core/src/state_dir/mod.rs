//! The state directory's sans-IO parts: the record format and its checks
//! ([`record`]), and the plan that decides which write comes next,
//! coalescing, bounds and retries ([`plan`]). The client crate's
//! `state_dir` module creates the directory, reads and writes the files by
//! the file-safety rule, and runs the plan on a writer thread. Which stream
//! may claim a persisted copy's version is [`claim`]'s.

pub mod claim;
pub mod plan;
pub mod record;

use serde::Serialize;

pub use record::{Record, RecordError};

/// The state directory's part of [`ClientStatus`](crate::status::ClientStatus).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StateDirStatus {
    /// The state directory.
    pub dir: String,
    /// Records loaded into the cache at start.
    pub records_loaded: u64,
    /// Files ignored: corrupt, truncated, foreign, of an unregistered type,
    /// failing validation, or unreadable.
    pub records_rejected: u64,
    /// The first of those files, each with why (at most 64).
    pub problems: Vec<String>,
    /// Records written since start.
    pub records_written: u64,
    /// Records deleted since start.
    pub records_deleted: u64,
    /// Copies not persisted because they were over a bound.
    pub over_bound: u64,
    /// Attempts to write or delete a record that failed. Each is retried
    /// with backoff (as a deletion: what the failure left is unknown).
    pub write_errors: u64,
    /// Resources given up after repeated failures in a row: nothing is
    /// written for them until their next update.
    pub gave_up: u64,
}
