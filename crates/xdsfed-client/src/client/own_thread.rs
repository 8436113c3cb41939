//! A thread of the client's own, for [`XdsClientBuilder::own_thread`]:
//! a single-threaded tokio runtime that runs the client's streams, their
//! connections and timers, and the tasks spawned on
//! [`XdsClient::runtime`](super::XdsClient::runtime), such as a graph's.
//!
//! Why: a response passes through several tasks (the HTTP/2 connection's,
//! the stream's, the graph's); on a runtime of several workers they run
//! wherever a worker is free, and each finds the tables the last one wrote
//! on another processor. Kept on one thread, they find them where they
//! were left, as Envoy's xDS work runs on its main thread.
//!
//! Rule: the thread ends once the client's last handle is dropped (its
//! tasks are dropped with the runtime), whichever thread drops it (tests
//! `the_thread_ends_when_stopped` here, and the end-to-end
//! `own_thread_e2e`).
//!
//! [`XdsClientBuilder::own_thread`]: super::XdsClientBuilder::own_thread

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The name of the client's own thread, as `top -H` and `/proc` show it.
pub const THREAD_NAME: &str = "xdsfed-client";

/// Ends the client's own thread when dropped: its runtime stops driving
/// the client's tasks and drops them.
#[derive(Debug)]
pub(super) struct Stop {
    _stop: oneshot::Sender<()>,
}

/// Starts the thread and its runtime; returns the runtime's handle, and
/// what stops it.
pub(super) fn start() -> std::io::Result<(Handle, Stop)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            // Ends when the sender is dropped: a send never happens.
            let _ = runtime.block_on(stopped);
            // Outside `block_on`, the runtime may be dropped here; its
            // tasks are dropped with it.
            drop(runtime);
        })?;
    Ok((handle, Stop { _stop: stop }))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    fn own_threads() -> usize {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return 0;
        };
        tasks
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim_end() == super::THREAD_NAME)
            })
            .count()
    }

    /// Rule of the module: dropping the stop ends the thread.
    #[test]
    fn the_thread_ends_when_stopped() {
        if !std::path::Path::new("/proc/self/task").exists() {
            eprintln!("skipped: no /proc/self/task to count threads in");
            return;
        }
        let before = own_threads();
        let (handle, stop) = super::start().expect("a thread starts");
        let (tx, rx) = std::sync::mpsc::channel();
        drop(handle.spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        }));
        let ran_on = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the task ran");
        assert_eq!(ran_on.as_deref(), Some(super::THREAD_NAME));
        assert!(own_threads() > before);
        drop(stop);
        let deadline = Instant::now() + Duration::from_secs(5);
        while own_threads() > before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(own_threads(), before, "the thread ended");
    }
}
