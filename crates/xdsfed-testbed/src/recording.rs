//! Every request and response of every stream, with timestamps, within
//! bounds.
//!
//! Each server keeps a [`Recorder`]. It survives restarts of the server, so a
//! test can compare the stream before a restart with the one after it.
//!
//! A testbed may run for days under steady updates, so the recording is
//! bounded by [`RecordingLimits`]: each stream keeps its newest
//! `events_per_stream` messages within `bytes_per_stream` bytes (their
//! encoded size), and the recorder its newest `streams` streams (closed ones
//! are dropped before open ones). What is dropped is counted:
//! [`StreamRecord::dropped_events`] and [`Recorder::dropped_streams`]. With
//! `events_per_stream` at 0 no message is copied at all, for a server used
//! as a load generator's peer.
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
    collections::VecDeque,
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
    /// Its encoded size in bytes, what [`RecordingLimits::bytes_per_stream`]
    /// counts.
    pub size: usize,
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
    /// When it ended, and why: the status sent (`"Unavailable: server is
    /// stopping"`), or a normal end by the client (`"client closed"`: it
    /// half-closed; `"client cancelled"`: it reset the stream;
    /// `"client disconnected"`: its connection ended under the stream), or
    /// `"client failed: STATUS"` for a protocol error on its side.
    pub closed: Option<(SystemTime, String)>,
    /// The newest messages, in order; at most
    /// [`RecordingLimits::events_per_stream`], of at most
    /// [`RecordingLimits::bytes_per_stream`] together.
    pub events: VecDeque<Event>,
    /// The encoded size of `events`, in bytes.
    pub bytes: usize,
    /// How many messages were dropped to stay within the limits (a single
    /// message above the byte limit is dropped at once).
    pub dropped_events: u64,
    /// The `authorization` header values of the call that opened the
    /// stream (of a REST client, of its latest request): what a client's
    /// call credentials sent (gRFC A97). A test server records them as
    /// received.
    pub authorization: Vec<String>,
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

/// How much a [`Recorder`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordingLimits {
    /// The newest messages kept per stream (default 1,000); 0 keeps none and
    /// copies none.
    pub events_per_stream: usize,
    /// The most bytes (encoded size) of messages kept per stream (default
    /// 16 MiB): the newest that fit.
    pub bytes_per_stream: usize,
    /// The newest streams kept (default 1,000); closed streams are dropped
    /// before open ones.
    pub streams: usize,
}

impl Default for RecordingLimits {
    fn default() -> Self {
        Self {
            events_per_stream: 1_000,
            bytes_per_stream: 16 << 20,
            streams: 1_000,
        }
    }
}

impl RecordingLimits {
    /// Streams are still listed (node, when they opened and closed), but no
    /// message is kept or copied: for a server under a load generator.
    pub fn streams_only() -> Self {
        Self {
            events_per_stream: 0,
            ..Self::default()
        }
    }
}

/// The recording of one server.
#[derive(Debug)]
pub struct Recorder {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

/// The streams kept, in the order they opened (so sorted by id), and what
/// was dropped.
#[derive(Debug, Default)]
struct Inner {
    streams: VecDeque<StreamRecord>,
    limits: RecordingLimits,
    /// The id of the next stream; also how many streams have opened.
    next_id: u64,
    dropped_streams: u64,
    /// Whether any stream has carried a request, whether or not it is kept.
    any_request: bool,
}

impl Inner {
    fn get_mut(&mut self, id: u64) -> Option<&mut StreamRecord> {
        let index = self.streams.binary_search_by_key(&id, |s| s.id).ok()?;
        self.streams.get_mut(index)
    }

    /// Drops what exceeds the limits: the oldest events of `stream` (every
    /// stream when `None`), then the oldest closed streams, then the oldest.
    fn trim(&mut self, stream: Option<u64>) {
        let RecordingLimits {
            events_per_stream,
            bytes_per_stream,
            ..
        } = self.limits;
        let trim_events = |s: &mut StreamRecord| {
            while s.events.len() > events_per_stream || s.bytes > bytes_per_stream {
                let Some(oldest) = s.events.pop_front() else {
                    break;
                };
                s.bytes -= oldest.size;
                s.dropped_events += 1;
            }
        };
        match stream {
            Some(id) => self.get_mut(id).into_iter().for_each(trim_events),
            None => self.streams.iter_mut().for_each(trim_events),
        }
        while self.streams.len() > self.limits.streams {
            let oldest_closed = self.streams.iter().position(|s| s.closed.is_some());
            self.streams.remove(oldest_closed.unwrap_or(0));
            self.dropped_streams += 1;
        }
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new(RecordingLimits::default())
    }
}

impl Recorder {
    /// A recorder that keeps what `limits` allow.
    pub fn new(limits: RecordingLimits) -> Self {
        Self {
            inner: Mutex::new(Inner {
                limits,
                ..Inner::default()
            }),
            changed: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each mutation leaves the data consistent before anything can
        // panic, so a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limits in force.
    pub fn limits(&self) -> RecordingLimits {
        self.lock().limits
    }

    /// Changes the limits; what exceeds the new ones is dropped at once.
    pub fn set_limits(&self, limits: RecordingLimits) {
        let mut inner = self.lock();
        inner.limits = limits;
        inner.trim(None);
        drop(inner);
        self.bump();
    }

    /// How many streams were dropped to stay within
    /// [`RecordingLimits::streams`].
    pub fn dropped_streams(&self) -> u64 {
        self.lock().dropped_streams
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// A copy of every stream kept, in the order they opened.
    pub fn streams(&self) -> Vec<StreamRecord> {
        self.lock().streams.iter().cloned().collect()
    }

    /// The stream with number `id`, if it is kept.
    pub fn stream(&self, id: u64) -> Option<StreamRecord> {
        self.lock().get_mut(id).map(|s| s.clone())
    }

    /// How many streams have opened, including those dropped.
    pub fn stream_count(&self) -> usize {
        usize::try_from(self.lock().next_id).unwrap_or(usize::MAX)
    }

    /// Waits until `check` holds for the streams kept, or `timeout` passes.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&[StreamRecord]) -> bool,
    ) -> Result<(), WaitTimedOut> {
        let mut changed = self.changed.subscribe();
        let wait = async {
            loop {
                if check(self.lock().streams.make_contiguous()) {
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
            let any_request = self.lock().any_request;
            // A closed channel means the recorder is going away: nothing
            // more will arrive.
            if any_request || changed.changed().await.is_err() {
                return;
            }
        }
    }

    pub(crate) fn open(&self, variant: Variant) -> u64 {
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.streams.push_back(StreamRecord {
            id,
            variant,
            node_id: None,
            opened_at: SystemTime::now(),
            closed: None,
            events: VecDeque::new(),
            bytes: 0,
            dropped_events: 0,
            authorization: Vec::new(),
        });
        inner.trim(None);
        drop(inner);
        self.bump();
        id
    }

    /// Records the `authorization` values of stream `id`'s call (or latest
    /// request).
    pub(crate) fn set_authorization(&self, id: u64, values: Vec<String>) {
        if let Some(stream) = self.lock().get_mut(id) {
            stream.authorization = values;
        }
    }

    /// Records `message` of stream `id`, copied and wrapped by `wrap` only
    /// when the limits keep it; one of a dropped stream is counted nowhere,
    /// its stream being gone.
    pub(crate) fn record<T: prost::Message + Clone>(
        &self,
        id: u64,
        is_request: bool,
        message: &T,
        wrap: impl FnOnce(T) -> Message,
    ) {
        let mut inner = self.lock();
        inner.any_request |= is_request;
        let limits = inner.limits;
        if let Some(stream) = inner.get_mut(id) {
            // Sized before it is copied: a message that cannot be kept is
            // not copied.
            let size = (limits.events_per_stream > 0)
                .then(|| message.encoded_len())
                .filter(|&size| size <= limits.bytes_per_stream);
            match size {
                None => stream.dropped_events += 1,
                Some(size) => {
                    stream.events.push_back(Event {
                        at: SystemTime::now(),
                        size,
                        message: wrap(message.clone()),
                    });
                    stream.bytes += size;
                    inner.trim(Some(id));
                }
            }
        }
        drop(inner);
        self.bump();
    }

    pub(crate) fn set_node(&self, id: u64, node_id: &str) {
        if let Some(stream) = self.lock().get_mut(id) {
            stream.node_id.get_or_insert_with(|| node_id.to_owned());
        }
    }

    pub(crate) fn close(&self, id: u64, why: String) {
        if let Some(stream) = self.lock().get_mut(id) {
            stream.closed.get_or_insert((SystemTime::now(), why));
        }
        self.bump();
    }
}
