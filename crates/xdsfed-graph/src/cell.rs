//! Publishing snapshots: one writer, many lock-free readers.
//!
//! The writer (the task that owns the engine) calls
//! [`SnapshotCell::publish`]. Readers hold a [`SnapshotReader`]:
//! [`load`](SnapshotReader::load) is an `arc-swap` load, which takes no lock
//! and never waits on the writer; [`changed`](SnapshotReader::changed)
//! sleeps until a newer snapshot than the one the reader last saw is
//! published. Readers only ever see the latest snapshot: a slow reader skips
//! intermediate ones and never holds the writer back.
//!
//! ```
//! use xdsfed_graph::SnapshotCell;
//! let cell = SnapshotCell::new();
//! let reader = cell.reader();
//! assert!(reader.load().is_none()); // nothing published yet
//! ```

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tokio::sync::watch;

use crate::snapshot::Snapshot;

/// The writer's side: holds the current snapshot and wakes readers.
#[derive(Debug)]
pub struct SnapshotCell {
    current: Arc<ArcSwapOption<Snapshot>>,
    /// Carries the generation; readers use it only to sleep and wake.
    tx: watch::Sender<u64>,
}

/// The writer is gone: no newer snapshot will ever be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the snapshot publisher is gone")]
pub struct PublisherGone;

impl SnapshotCell {
    /// An empty cell.
    pub fn new() -> Self {
        Self {
            current: Arc::new(ArcSwapOption::empty()),
            tx: watch::Sender::new(0),
        }
    }

    /// Makes `snapshot` the current one and wakes every waiting reader.
    pub fn publish(&self, snapshot: Arc<Snapshot>) {
        let generation = snapshot.generation();
        self.current.store(Some(snapshot));
        // Stored first, so a woken reader loads this snapshot or a newer one.
        self.tx.send_replace(generation);
    }

    /// The current snapshot, if one was published.
    pub fn load(&self) -> Option<Arc<Snapshot>> {
        self.current.load_full()
    }

    /// A reader. Its [`changed`](SnapshotReader::changed) waits for the
    /// first snapshot published after this call.
    pub fn reader(&self) -> SnapshotReader {
        SnapshotReader {
            current: Arc::clone(&self.current),
            rx: self.tx.subscribe(),
        }
    }
}

impl Default for SnapshotCell {
    fn default() -> Self {
        Self::new()
    }
}

/// A reader's side: lock-free loads, and a wait for the next snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotReader {
    current: Arc<ArcSwapOption<Snapshot>>,
    rx: watch::Receiver<u64>,
}

impl SnapshotReader {
    /// The current snapshot, if one was published. Lock-free.
    pub fn load(&self) -> Option<Arc<Snapshot>> {
        self.current.load_full()
    }

    /// Waits until a snapshot newer than the last one this reader saw
    /// through `changed` or [`ready`](Self::ready) is published, and returns
    /// the current one.
    pub async fn changed(&mut self) -> Result<Arc<Snapshot>, PublisherGone> {
        loop {
            self.rx.changed().await.map_err(|_| PublisherGone)?;
            self.rx.borrow_and_update();
            if let Some(snapshot) = self.load() {
                return Ok(snapshot);
            }
        }
    }

    /// The current snapshot, or the first one if none was published yet.
    pub async fn ready(&mut self) -> Result<Arc<Snapshot>, PublisherGone> {
        self.rx.borrow_and_update();
        match self.load() {
            Some(snapshot) => Ok(snapshot),
            None => self.changed().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imbl::OrdMap;

    fn snapshot(generation: u64) -> Arc<Snapshot> {
        Arc::new(Snapshot {
            generation,
            listeners: OrdMap::new(),
            route_configs: OrdMap::new(),
            clusters: OrdMap::new(),
            collections: OrdMap::new(),
        })
    }

    #[tokio::test]
    async fn changed_returns_the_snapshot_published_after_subscribing() {
        let cell = SnapshotCell::new();
        cell.publish(snapshot(1));
        let mut reader = cell.reader();
        assert_eq!(reader.load().map(|s| s.generation()), Some(1));

        let waiter = tokio::spawn(async move { reader.changed().await.map(|s| s.generation()) });
        tokio::task::yield_now().await;
        cell.publish(snapshot(2));
        assert_eq!(waiter.await.ok(), Some(Ok(2)));
    }

    #[tokio::test]
    async fn slow_reader_skips_to_the_latest_snapshot() {
        let cell = SnapshotCell::new();
        let mut reader = cell.reader();
        for generation in 1..=3 {
            cell.publish(snapshot(generation));
        }
        assert_eq!(reader.changed().await.map(|s| s.generation()), Ok(3));
    }

    #[tokio::test]
    async fn ready_returns_the_current_snapshot_without_waiting() {
        let cell = SnapshotCell::new();
        cell.publish(snapshot(4));
        let mut reader = cell.reader();
        assert_eq!(reader.ready().await.map(|s| s.generation()), Ok(4));
    }

    #[tokio::test]
    async fn changed_reports_a_dropped_publisher() {
        let cell = SnapshotCell::new();
        let mut reader = cell.reader();
        drop(cell);
        assert_eq!(
            reader.changed().await.map(|s| s.generation()),
            Err(PublisherGone)
        );
    }
}
