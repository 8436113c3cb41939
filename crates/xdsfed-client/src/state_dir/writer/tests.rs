//! The writer thread against a records directory that fails every call:
//! a regular file in its place (which fails for root too).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tracing::span;

use super::*;
use crate::state_dir::plan::RetryPolicy;
use crate::transport::BackoffConfig;

/// How long the test waits for what must happen before calling it hung.
const HANG: Duration = Duration::from_secs(10);

fn record(name: &str) -> Record {
    Record {
        type_url: Arc::from("t"),
        name: Arc::from(name),
        version: Arc::from("1"),
        server: Arc::from("s"),
        resource: Bytes::from_static(b"r"),
    }
}

fn policy(initial: Duration, max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        backoff: BackoffConfig {
            initial,
            multiplier: 2.0,
            jitter: 0.2,
            max: initial * 4,
        },
        max_attempts,
    }
}

/// Counts the `warn` events it is given.
struct CountWarnings(Arc<AtomicUsize>);

impl tracing::Subscriber for CountWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

/// A writer over a records "directory" that is a regular file, logging to
/// a subscriber that counts warnings.
fn broken_writer(
    policy: RetryPolicy,
) -> (tempfile::TempDir, Writer, Arc<Counters>, Arc<AtomicUsize>) {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    std::fs::write(&records, "a file, not a directory").unwrap();
    let counters = Arc::new(Counters::default());
    let warnings = Arc::new(AtomicUsize::new(0));
    let plan = WritePlan::new(1 << 20, 1 << 30).with_retry(policy);
    let writer = tracing::subscriber::with_default(CountWarnings(Arc::clone(&warnings)), || {
        Writer::start(records, plan, Arc::clone(&counters)).unwrap()
    });
    (dir, writer, counters, warnings)
}

/// Whether `f` holds within [`HANG`].
fn within_deadline(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + HANG;
    while !f() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Drops `writer` on a thread of its own: whether that returned within
/// [`HANG`]. (A test must not drop a writer that may never let go on its
/// own thread, or it hangs instead of failing.)
fn dropped_within_deadline(writer: Writer) -> bool {
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(writer);
        let _ = done.send(());
    });
    dropped.recv_timeout(HANG).is_ok()
}

/// The state directory's files: writes that keep failing are attempted a
/// bounded number of times per resource, counted, and logged twice per
/// burst (when failures start, when the first resource is given up), not
/// once per attempt.
#[test]
fn failing_writes_are_bounded_counted_and_logged_once_per_burst() {
    let (_dir, writer, counters, warnings) = broken_writer(policy(Duration::from_millis(1), 5));
    for name in ["a", "b", "c"] {
        writer.put(record(name));
    }
    let gave_up = within_deadline(|| counters.snapshot().gave_up == 3);
    assert!(dropped_within_deadline(writer), "dropping the writer hangs");
    let status = counters.snapshot();
    assert!(gave_up, "the three resources are not given up: {status:?}");
    assert_eq!(status.write_errors, 15, "five attempts for each of three");
    assert_eq!(status.records_written, 0);
    assert_eq!(warnings.load(Ordering::Relaxed), 2);
}

/// The state directory's files: dropping the writer does not wait for a
/// failed operation's backoff (here an hour): the retry is dropped.
#[test]
fn drop_does_not_wait_on_a_retry() {
    let (_dir, writer, counters, _) = broken_writer(policy(Duration::from_secs(3600), 5));
    writer.put(record("a"));
    let failed = within_deadline(|| counters.snapshot().write_errors == 1);
    assert!(
        dropped_within_deadline(writer),
        "dropping the writer waits on the retry"
    );
    assert!(
        failed,
        "the write did not fail once: {:?}",
        counters.snapshot()
    );
    assert_eq!(counters.snapshot().write_errors, 1);
}
