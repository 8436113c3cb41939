//! Every request and response of every stream, with timestamps.
//!
//! Each server keeps a [`Recorder`]. It survives restarts of the server, so a
//! test can compare the stream before a restart with the one after it:
//!
//! ```no_run
//! # async fn demo(server: &xdsfed_testbed::Server) {
//! let streams = server.recording().streams();
//! let second = &streams[1];
//! let first_request = second.delta_requests().next().unwrap();
//! assert!(first_request.initial_resource_versions.contains_key("c1"));
//! # }
//! ```

use std::{
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, SystemTime},
};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tokio::sync::watch;

/// Which ADS method a stream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `DeltaAggregatedResources` (incremental).
    Delta,
    /// `StreamAggregatedResources` (state of the world).
    Sotw,
}

/// One recorded message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A delta request from the client.
    DeltaRequest(DeltaDiscoveryRequest),
    /// A delta response from the server.
    DeltaResponse(DeltaDiscoveryResponse),
    /// A SotW request from the client.
    Request(DiscoveryRequest),
    /// A SotW response from the server.
    Response(DiscoveryResponse),
}

impl Message {
    /// Whether the client sent it.
    pub fn is_request(&self) -> bool {
        matches!(self, Self::DeltaRequest(_) | Self::Request(_))
    }
}

/// A message and when it was received or sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When the server received (request) or sent (response) it.
    pub at: SystemTime,
    /// The message.
    pub message: Message,
}

/// Everything one stream carried.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    /// The stream's number on its server, counting from 0 across restarts.
    pub id: u64,
    /// Delta or SotW.
    pub variant: Variant,
    /// The node id of the stream's first request that carried a node.
    pub node_id: Option<String>,
    /// When the stream opened.
    pub opened_at: SystemTime,
    /// When it ended, and why (the status sent, or "client closed").
    pub closed: Option<(SystemTime, String)>,
    /// The messages in order.
    pub events: Vec<Event>,
}

impl StreamRecord {
    /// The delta requests in order.
    pub fn delta_requests(&self) -> impl Iterator<Item = &DeltaDiscoveryRequest> {
        self.events.iter().filter_map(|e| match &e.message {
            Message::DeltaRequest(r) => Some(r),
            _ => None,
        })
    }

    /// The delta responses in order.
    pub fn delta_responses(&self) -> impl Iterator<Item = &DeltaDiscoveryResponse> {
        self.events.iter().filter_map(|e| match &e.message {
            Message::DeltaResponse(r) => Some(r),
            _ => None,
        })
    }

    /// The SotW requests in order.
    pub fn sotw_requests(&self) -> impl Iterator<Item = &DiscoveryRequest> {
        self.events.iter().filter_map(|e| match &e.message {
            Message::Request(r) => Some(r),
            _ => None,
        })
    }

    /// The SotW responses in order.
    pub fn sotw_responses(&self) -> impl Iterator<Item = &DiscoveryResponse> {
        self.events.iter().filter_map(|e| match &e.message {
            Message::Response(r) => Some(r),
            _ => None,
        })
    }

    /// How many responses the server sent on the stream.
    pub fn response_count(&self) -> usize {
        self.events
            .iter()
            .filter(|e| !e.message.is_request())
            .count()
    }
}

/// The recording wait ran out of time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the recording did not reach the expected state within {0:?}")]
pub struct WaitTimedOut(pub Duration);

/// The recording of one server.
#[derive(Debug)]
pub struct Recorder {
    streams: Mutex<Vec<StreamRecord>>,
    changed: watch::Sender<u64>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            streams: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Vec<StreamRecord>> {
        // Each mutation is a single push; a poisoned lock holds consistent data.
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// A copy of every stream recorded so far, in the order they opened.
    pub fn streams(&self) -> Vec<StreamRecord> {
        self.lock().clone()
    }

    /// The stream with number `id`.
    pub fn stream(&self, id: u64) -> Option<StreamRecord> {
        let index = usize::try_from(id).ok()?;
        self.lock().get(index).cloned()
    }

    /// How many streams have opened.
    pub fn stream_count(&self) -> usize {
        self.lock().len()
    }

    /// Waits until `check` holds for the recorded streams, or `timeout` passes.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&[StreamRecord]) -> bool,
    ) -> Result<(), WaitTimedOut> {
        let mut changed = self.changed.subscribe();
        let wait = async {
            loop {
                if check(&self.lock()) {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| WaitTimedOut(timeout))
    }

    /// Waits until some stream has carried a request.
    pub(crate) async fn wait_for_request(&self) {
        let mut changed = self.changed.subscribe();
        loop {
            let any_request = self
                .lock()
                .iter()
                .any(|s| s.events.iter().any(|e| e.message.is_request()));
            // A closed channel means the recorder is going away: nothing
            // more will arrive.
            if any_request || changed.changed().await.is_err() {
                return;
            }
        }
    }

    pub(crate) fn open(&self, variant: Variant) -> u64 {
        let mut streams = self.lock();
        let id = streams.len() as u64;
        streams.push(StreamRecord {
            id,
            variant,
            node_id: None,
            opened_at: SystemTime::now(),
            closed: None,
            events: Vec::new(),
        });
        drop(streams);
        self.bump();
        id
    }

    pub(crate) fn record(&self, id: u64, message: Message) {
        let mut streams = self.lock();
        if let Some(stream) = usize::try_from(id).ok().and_then(|i| streams.get_mut(i)) {
            stream.events.push(Event {
                at: SystemTime::now(),
                message,
            });
        }
        drop(streams);
        self.bump();
    }

    pub(crate) fn set_node(&self, id: u64, node_id: &str) {
        let mut streams = self.lock();
        if let Some(stream) = usize::try_from(id).ok().and_then(|i| streams.get_mut(i)) {
            stream.node_id.get_or_insert_with(|| node_id.to_owned());
        }
    }

    pub(crate) fn close(&self, id: u64, why: String) {
        let mut streams = self.lock();
        if let Some(stream) = usize::try_from(id).ok().and_then(|i| streams.get_mut(i)) {
            stream.closed.get_or_insert((SystemTime::now(), why));
        }
        drop(streams);
        self.bump();
    }
}
