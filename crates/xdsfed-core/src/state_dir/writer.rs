//! The writer: a dedicated thread that performs the write plan's
//! operations. The event path only hands a copy over (reference-counted
//! strings and [`Bytes`], no copy of the resource) and wakes the thread;
//! the thread encodes, writes and syncs.
//!
//! A write is atomic: the record goes to `<name>.tmp` in the same
//! directory, is synced, renamed over `<name>.rec`, and the directory is
//! synced, so a crash leaves either the old record or the new one (and
//! perhaps a temporary file, which the next load deletes).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::protocol::ResourceKey;

use super::Counters;
use super::plan::{Op, Report, WritePlan};
use super::record::{Record, TEMP_SUFFIX, file_name_of};

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
/// it lets the thread finish what is planned (at most one operation per
/// resource) and waits for it.
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
    /// Starts the writer thread for the records directory `dir`.
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
        let thread = std::thread::Builder::new()
            .name("xdsfed-state-dir".into())
            .spawn(move || run(&thread_shared, &dir, &counters))?;
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

/// The thread: waits for work, performs it outside the lock, until closed
/// and idle.
fn run(shared: &Shared, dir: &Path, counters: &Counters) {
    loop {
        let (next, reports) = {
            let mut work = lock(&shared.work);
            while work.plan.is_idle() && !work.closed {
                work = shared.wake.wait(work).unwrap_or_else(|e| e.into_inner());
            }
            let reports: Vec<Report> = std::iter::from_fn(|| work.plan.poll_report()).collect();
            (work.plan.poll_write(), reports)
        };
        for report in reports {
            counters.over_bound(dir, &report);
        }
        match next {
            Some((key, op)) => {
                if let Err(error) = perform(dir, &key, &op) {
                    counters.write_failed(dir, &key, &error);
                    lock(&shared.work).plan.handle_failed(key);
                } else {
                    counters.performed(&op);
                }
            }
            None => {
                let work = lock(&shared.work);
                if work.closed && work.plan.is_idle() {
                    return;
                }
            }
        }
    }
}

fn perform(dir: &Path, key: &ResourceKey, op: &Op) -> std::io::Result<()> {
    let path = dir.join(file_name_of(key));
    match op {
        Op::Write(record) => {
            let bytes = record.encode().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "a field over 4 GiB")
            })?;
            write_atomically(dir, &path, &bytes)
        }
        Op::Delete => match fs::remove_file(&path) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        },
    }
}

/// Temporary file, write, fsync, rename, fsync the directory.
pub(crate) fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(TEMP_SUFFIX);
    let temp = PathBuf::from(temp);
    let written = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written?;
    sync_dir(dir)
}

/// Makes a rename or deletion in `dir` durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
