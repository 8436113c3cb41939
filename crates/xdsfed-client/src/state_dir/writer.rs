//! The writer: a dedicated thread that performs the write plan's
//! operations. The event path only hands a copy over (reference-counted
//! strings and [`Bytes`](bytes::Bytes), no copy of the resource) and wakes
//! the thread; the thread encodes, writes and syncs
//! ([`files::write_atomically`]).
//!
//! A failed operation is retried when the plan says (a backoff per key)
//! and given up after a bounded number of attempts. The thread logs one
//! warning when failures start and one when it first gives up, then only
//! counts, until an operation succeeds again: a file system that fails
//! every call costs a few lines, not one per attempt.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::random::unit_random;
use xdsfed_core::protocol::ResourceKey;

use super::Counters;
use super::files;
use xdsfed_core::state_dir::plan::{Failure, Op, Report, WritePlan};
use xdsfed_core::state_dir::record::{Record, file_name_of};

/// What the client and the writer thread share.
struct Shared {
    work: Mutex<Work>,
    wake: Condvar,
}

struct Work {
    plan: WritePlan,
    closed: bool,
}

/// The handle the cache holds: hands copies to the writer thread. Dropping
/// it lets the thread finish the operations that are due (at most one per
/// resource) and waits for it; retries waiting out a backoff are dropped.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    /// Starts the writer thread for the records directory `dir`. The
    /// thread logs to the `tracing` subscriber current here, if there is
    /// one (else to the global one, whenever it is set).
    pub(crate) fn start(
        dir: PathBuf,
        plan: WritePlan,
        counters: Arc<Counters>,
    ) -> std::io::Result<Writer> {
        let shared = Arc::new(Shared {
            work: Mutex::new(Work {
                plan,
                closed: false,
            }),
            wake: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let thread = std::thread::Builder::new()
            .name("xdsfed-state-dir".into())
            .spawn(move || {
                let work = || run(&thread_shared, &dir, &counters);
                if dispatch.is::<tracing::subscriber::NoSubscriber>() {
                    work();
                } else {
                    tracing::dispatcher::with_default(&dispatch, work);
                }
            })?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    /// Persists `record`, replacing any copy of its key still pending.
    pub(crate) fn put(&self, record: Record) {
        self.with_plan(|plan| plan.handle_put(record));
    }

    /// Deletes `key`'s record.
    pub(crate) fn remove(&self, key: ResourceKey) {
        self.with_plan(|plan| plan.handle_remove(key));
    }

    fn with_plan(&self, f: impl FnOnce(&mut WritePlan)) {
        f(&mut lock(&self.shared.work).plan);
        self.shared.wake.notify_one();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        lock(&self.shared.work).closed = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("the state directory's writer thread panicked");
        }
    }
}

fn lock(work: &Mutex<Work>) -> MutexGuard<'_, Work> {
    // The plan is consistent between calls: a panic cannot leave it torn.
    work.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread: performs what is due, outside the lock, until closed and
/// nothing more is due.
fn run(shared: &Shared, dir: &Path, counters: &Counters) {
    let mut burst = Burst::default();
    while let Some((key, op)) = next(shared, dir, counters) {
        match perform(dir, &key, &op) {
            Ok(()) => {
                burst.succeeded(dir);
                counters.performed(&op);
                lock(&shared.work).plan.handle_succeeded(&key);
            }
            Err(error) => {
                let failure = lock(&shared.work).plan.handle_failed(
                    key.clone(),
                    Instant::now(),
                    unit_random(),
                );
                counters.write_failed(&failure);
                burst.failed(dir, &key, &error, failure);
            }
        }
    }
}

/// Waits for the next operation that is due; `None` once the writer is
/// closed and nothing is due (retries still waiting are dropped: shutdown
/// never waits on a backoff).
fn next(shared: &Shared, dir: &Path, counters: &Counters) -> Option<(ResourceKey, Op)> {
    let mut work = lock(&shared.work);
    loop {
        let reports: Vec<Report> = std::iter::from_fn(|| work.plan.poll_report()).collect();
        if !reports.is_empty() {
            drop(work);
            for report in &reports {
                counters.over_bound(dir, report);
            }
            work = lock(&shared.work);
        }
        let now = Instant::now();
        if let Some(next) = work.plan.poll_write(now) {
            return Some(next);
        }
        if work.closed {
            return None;
        }
        work = match work.plan.poll_timeout() {
            Some(at) => {
                let wait = at.saturating_duration_since(now);
                shared
                    .wake
                    .wait_timeout(work, wait)
                    .map(|(work, _)| work)
                    .unwrap_or_else(|e| e.into_inner().0)
            }
            None => shared.wake.wait(work).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

fn perform(dir: &Path, key: &ResourceKey, op: &Op) -> std::io::Result<()> {
    let file_name = file_name_of(key);
    match op {
        Op::Write(record) => {
            let bytes = record.encode().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "a field over 4 GiB")
            })?;
            files::write_atomically(dir, &file_name, &bytes)
        }
        Op::Delete => match std::fs::remove_file(dir.join(&file_name)) {
            Ok(()) => files::sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        },
    }
}

/// Whether failures are under way, so that a burst of them logs once.
#[derive(Debug, Default)]
struct Burst {
    failing: bool,
    gave_up: bool,
}

impl Burst {
    fn failed(&mut self, dir: &Path, key: &ResourceKey, error: &std::io::Error, failure: Failure) {
        if !self.failing {
            self.failing = true;
            tracing::warn!(
                dir = %dir.display(),
                resource = %key,
                %error,
                "state directory: write failed; retrying with backoff (further failures are counted in the status, not logged)"
            );
        }
        if let Failure::GaveUp { attempts } = failure
            && !self.gave_up
        {
            self.gave_up = true;
            tracing::warn!(
                dir = %dir.display(),
                resource = %key,
                attempts,
                %error,
                "state directory: gave up on a record after repeated failures (it is written again on its next update)"
            );
        }
    }

    fn succeeded(&mut self, dir: &Path) {
        if self.failing {
            tracing::info!(dir = %dir.display(), "state directory: writes succeed again");
        }
        *self = Burst::default();
    }
}

#[cfg(test)]
mod tests;
