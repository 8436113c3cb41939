//! The ADS service of one management server: both `StreamAggregatedResources`
//! (state of the world, [`sotw`]) and `DeltaAggregatedResources` (incremental,
//! [`delta`]).
//!
//! ```text
//!  client requests ─► stream task ─► Subscription per type ─┐
//!  store changes   ─►     │                                 ├─► select + faults ─► response ─► client
//!  fault changes   ─►     │                                 │
//!  shutdown        ─►     └─► Recorder, AckTracker ◄────────┘
//! ```
//!
//! Each stream is one task that owns its per-type state; it wakes on a
//! request, on a change of the store or of the faults, and on the server's
//! shutdown. The store is read through persistent-map snapshots, so a slow
//! stream never holds up a writer and a write never copies a table.
//!
//! A stream remembers the store revision of each type it last evaluated. When
//! only the store moved since (no new request changed the subscription, no
//! fault changed), it asks the store which keys changed and looks at those
//! alone ([`plain_selection`] says when that is sound); otherwise it selects
//! from the whole table.

mod delta;
mod sotw;

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_server::AggregatedDiscoveryService,
};
use envoy_types::pb::google::protobuf::Any;
use futures::Stream;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::{
    faults::{Faults, MALFORMED_BYTES, redirect_any},
    recording::Variant,
    server::Shared,
    store::{StoredResource, TypeTable},
    subscription::Subscription,
    version,
};

/// How many responses may wait for the transport before a stream task pauses.
const OUTBOUND_QUEUE: usize = 16;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The tonic service of one server run.
#[derive(Debug, Clone)]
pub(crate) struct Ads {
    pub(crate) shared: Arc<Shared>,
    /// Becomes `true` when the server stops; every stream then ends with `UNAVAILABLE`.
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// What a stream task needs.
#[derive(Debug)]
pub(crate) struct StreamCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: u64,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) store_changed: watch::Receiver<u64>,
    pub(crate) faults_changed: watch::Receiver<Arc<Faults>>,
    /// Responses sent so far on this stream.
    pub(crate) responses: u32,
    next_nonce: u64,
}

impl StreamCtx {
    fn nonce(&mut self) -> String {
        self.next_nonce += 1;
        format!("{}-{}", self.id, self.next_nonce)
    }

    /// The status that ends the stream after a response, if the faults say so.
    fn close_after_response(&self) -> Option<Status> {
        let faults = self.shared.faults();
        let limit = faults.close_after_responses?;
        let code = faults.close_code.unwrap_or(Code::Unavailable);
        (self.responses >= limit).then(|| {
            Status::new(
                code,
                format!("fault: stream closed after {limit} responses"),
            )
        })
    }
}

impl Ads {
    /// Opens a stream on the recorder and tracker, or refuses it per the faults.
    fn open(
        &self,
        variant: Variant,
        peer: Option<SocketAddr>,
        metadata: &tonic::metadata::MetadataMap,
    ) -> Result<StreamCtx, Status> {
        let faults = self.shared.faults();
        let id = self.shared.recorder.open(variant);
        let authorization = metadata
            .get_all("authorization")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        self.shared.recorder.set_authorization(id, authorization);
        let refusal = if *self.shutdown.borrow() {
            Some(Status::unavailable("server is stopping"))
        } else if faults.refuse_connections {
            Some(Status::unavailable("fault: refusing connections"))
        } else if faults.close_immediately {
            Some(Status::unavailable("fault: stream closed at once"))
        } else if variant == Variant::Delta && faults.delta_unimplemented {
            Some(Status::unimplemented(
                "fault: DeltaAggregatedResources is not implemented",
            ))
        } else {
            None
        };
        if let Some(status) = refusal {
            self.shared.recorder.close(id, status_text(&status));
            return Err(status);
        }
        self.shared.tracker.open(id, peer);
        Ok(StreamCtx {
            shared: self.shared.clone(),
            id,
            shutdown: self.shutdown.clone(),
            store_changed: self.shared.store.subscribe(),
            faults_changed: self.shared.subscribe_faults(),
            responses: 0,
            next_nonce: 0,
        })
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let ctx = self.open(Variant::Sotw, request.remote_addr(), request.metadata())?;
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        tokio::spawn(serve::<sotw::Sotw>(ctx, request.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let ctx = self.open(Variant::Delta, request.remote_addr(), request.metadata())?;
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        tokio::spawn(serve::<delta::Delta>(ctx, request.into_inner(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

fn status_text(status: &Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

/// One resource a response will carry, before wire faults are applied.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// The name to send it under.
    pub(crate) wire: String,
    /// The resource, shared with the store (a redirect's is made up here),
    /// so selecting never copies resource bytes.
    pub(crate) stored: Arc<StoredResource>,
}

impl Outgoing {
    /// The resource as selected from the store.
    pub(crate) fn new(wire: String, stored: Arc<StoredResource>) -> Self {
        Self { wire, stored }
    }

    /// A redirect of canonical key `key` to `target`, sent as `wire`.
    fn redirect(key: &str, wire: &str, target: &str) -> Self {
        let resource = redirect_any(target);
        let stored = StoredResource {
            name: wire.to_owned(),
            key: key.to_owned(),
            version: version::of_bytes(&resource.value),
            resource,
        };
        Self::new(wire.to_owned(), Arc::new(stored))
    }

    /// The canonical key.
    pub(crate) fn key(&self) -> &str {
        &self.stored.key
    }

    /// The content-hash version.
    pub(crate) fn version(&self) -> &str {
        &self.stored.version
    }
}

/// What a subscription selects, with redirects and silences applied.
#[derive(Debug, Default)]
pub(crate) struct Selected {
    /// By canonical key.
    pub(crate) wanted: BTreeMap<String, Outgoing>,
    /// Absent names and empty globs: (key, name as written).
    pub(crate) absent: Vec<(String, String)>,
}

/// Whether the faults leave the selection of `type_url` to the subscription
/// alone: no redirects, no silenced names and nothing injected. Then a
/// change of one stored resource can only change what is selected for that
/// resource's key, and a stream may look at the changed keys alone. The
/// other faults either act per key on what is sent (malformed, duplicate),
/// silence the whole type, or do not touch content at all.
pub(crate) fn plain_selection(faults: &Faults, type_url: &str) -> bool {
    faults.redirects.is_empty()
        && faults.silent_names.is_empty()
        && !faults
            .inject
            .iter()
            .any(|i| i.resource.type_url == type_url)
}

pub(crate) fn select(
    faults: &Faults,
    type_url: &str,
    sub: &Subscription,
    table: &TypeTable,
) -> Selected {
    let selection = sub.select(table);
    let mut selected = Selected {
        wanted: selection
            .wanted
            .into_iter()
            .map(|(key, (wire, stored))| (key, Outgoing::new(wire, stored)))
            .collect(),
        absent: selection.absent,
    };
    // A redirect answers a subscribed name whether or not it exists here.
    for (key, wire) in &sub.names {
        if let Some(target) = faults.redirect_for(key) {
            selected
                .wanted
                .insert(key.clone(), Outgoing::redirect(key, wire, target));
            selected.absent.retain(|(k, _)| k != key);
        }
    }
    // So does a member of a subscribed glob collection (xDS TP1 lets glob
    // members be redirected): the glob is then not empty.
    for (name, target) in &faults.redirects {
        let key = crate::subscription::key_of(name);
        if sub.names.contains_key(&key) {
            continue;
        }
        let globs: Vec<&String> = sub
            .glob_of(&key)
            .map(|(glob_key, _)| glob_key)
            .into_iter()
            .collect();
        if globs.is_empty() {
            continue;
        }
        selected.absent.retain(|(k, _)| !globs.contains(&k));
        let outgoing = Outgoing::redirect(&key, name, target);
        selected.wanted.insert(key, outgoing);
    }
    selected
        .wanted
        .retain(|key, _| !faults.is_silent(type_url, key));
    selected
        .absent
        .retain(|(key, _)| !faults.is_silent(type_url, key));
    selected
}

/// Applies the wire faults (malformed, duplicate, injected) to what a
/// response carries: `(name, resource, version)` in order.
pub(crate) fn on_the_wire(
    faults: &Faults,
    type_url: &str,
    outgoing: &[Outgoing],
) -> Vec<(String, Any, String)> {
    let mut wire = Vec::with_capacity(outgoing.len());
    for out in outgoing {
        let mut resource = out.stored.resource.clone();
        if faults.is_malformed(out.key()) {
            resource.value = MALFORMED_BYTES.to_vec();
        }
        if faults.is_duplicated(out.key()) {
            wire.push((out.wire.clone(), resource.clone(), out.version().to_owned()));
        }
        wire.push((out.wire.clone(), resource, out.version().to_owned()));
    }
    for injected in faults
        .inject
        .iter()
        .filter(|i| i.resource.type_url == type_url)
    {
        wire.push((
            injected.name.clone(),
            injected.resource.clone(),
            version::of_bytes(&injected.resource.value),
        ));
    }
    wire
}

/// Why a stream task ends.
#[derive(Debug)]
pub(crate) enum End {
    /// The server ends the stream with this status.
    Status(Status),
    /// The client half-closed its side.
    ClientClosed,
    /// The client left without ending the stream: see [`End::from_read_error`].
    ClientLeft(&'static str),
    /// The client's side failed (a protocol error, a message that does not decode).
    ClientFailed(Status),
    /// The response stream was dropped: the client is gone.
    ClientGone,
}

impl End {
    pub(crate) fn stopping() -> Self {
        Self::Status(Status::unavailable("server is stopping"))
    }

    /// Why a stream ends when reading the client's next request fails.
    ///
    /// Two failures are a client leaving, not a fault, and are recorded as
    /// normal ends:
    /// - `CANCELLED`: the client reset the stream with `RST_STREAM CANCEL`,
    ///   which is how gRPC cancels a call (gRPC's PROTOCOL-HTTP2.md,
    ///   "Errors"): a channel shut down, a watch dropped.
    /// - `UNKNOWN`: an HTTP/2 error without an HTTP/2 error code, that is the
    ///   connection's I/O ended under the stream (end of file, reset): the
    ///   client process exited or closed its connection. Reading a request
    ///   fails with `UNKNOWN` for nothing else: a message that does not
    ///   decode is `INTERNAL`, one too large `OUT_OF_RANGE`.
    ///
    /// Everything else (an HTTP/2 protocol error, a bad message) stays a
    /// client failure with its status.
    pub(crate) fn from_read_error(status: Status) -> Self {
        match status.code() {
            Code::Cancelled => Self::ClientLeft("client cancelled"),
            Code::Unknown => Self::ClientLeft("client disconnected"),
            _ => Self::ClientFailed(status),
        }
    }
}

/// Resolves once the server run is stopping (or its control is gone).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _closed_counts_as_stopped = shutdown.wait_for(|stopping| *stopping).await;
}

/// Sends one response: applies the delay fault, records it, counts it and
/// ends the stream if the close-after-K fault says so.
pub(crate) async fn send<T: prost::Message + Clone>(
    ctx: &mut StreamCtx,
    tx: &mpsc::Sender<Result<T, Status>>,
    response: T,
    record: impl FnOnce(T) -> crate::recording::Message,
) -> Result<(), End> {
    if let Some(delay) = ctx.shared.faults().response_delay {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopped(&mut ctx.shutdown) => return Err(End::stopping()),
        }
    }
    ctx.shared.recorder.record(ctx.id, false, &response, record);
    tokio::select! {
        sent = tx.send(Ok(response)) => sent.map_err(|_| End::ClientGone)?,
        () = stopped(&mut ctx.shutdown) => return Err(End::stopping()),
    }
    ctx.responses = ctx.responses.saturating_add(1);
    match ctx.close_after_response() {
        Some(status) => Err(End::Status(status)),
        None => Ok(()),
    }
}

/// Ends a stream: sends the closing status if there is one and takes the
/// stream out of the recorder and the tracker.
/// What makes the SotW and delta streams differ: their messages, what a
/// stream remembers per type, and how it answers a request or a change of
/// the store or the faults. The loop around them is [`serve`].
pub(crate) trait Protocol {
    type Request: Send + 'static;
    type Response: Send + 'static;
    type TypeState: Default + Send;

    /// Answers one request of the client.
    fn on_request(
        ctx: &mut StreamCtx,
        types: &mut HashMap<String, Self::TypeState>,
        request: Self::Request,
        tx: &mpsc::Sender<Result<Self::Response, Status>>,
    ) -> impl Future<Output = Result<(), End>> + Send;

    /// Sends each type what changed; `everything` re-evaluates every type
    /// from scratch (the faults changed).
    fn push_all(
        ctx: &mut StreamCtx,
        types: &mut HashMap<String, Self::TypeState>,
        tx: &mpsc::Sender<Result<Self::Response, Status>>,
        everything: bool,
    ) -> impl Future<Output = Result<(), End>> + Send;
}

/// Runs one ADS stream until it ends: requests, store changes and fault
/// changes, then the stream's end in the recorder and the tracker.
pub(crate) async fn serve<P: Protocol>(
    mut ctx: StreamCtx,
    mut inbound: Streaming<P::Request>,
    tx: mpsc::Sender<Result<P::Response, Status>>,
) {
    let mut types: HashMap<String, P::TypeState> = HashMap::new();
    let end = loop {
        // Biased: a change made before a request was sent is handled before
        // that request, so a test's fence request is answered after the push.
        let step = tokio::select! {
            biased;
            () = stopped(&mut ctx.shutdown) => Err(End::stopping()),
            _ = ctx.faults_changed.changed() => P::push_all(&mut ctx, &mut types, &tx, true).await,
            _ = ctx.store_changed.changed() => P::push_all(&mut ctx, &mut types, &tx, false).await,
            message = inbound.message() => match message {
                Ok(Some(request)) => P::on_request(&mut ctx, &mut types, request, &tx).await,
                Ok(None) => Err(End::ClientClosed),
                Err(status) => Err(End::from_read_error(status)),
            },
        };
        if let Err(end) = step {
            break end;
        }
    };
    finish(ctx, tx, end).await;
}

pub(crate) async fn finish<T>(ctx: StreamCtx, tx: mpsc::Sender<Result<T, Status>>, end: End) {
    let why = match end {
        End::Status(status) => {
            let why = status_text(&status);
            // An OK end is the response stream ending (dropping `tx`);
            // otherwise the status is sent. The client may be gone already:
            // the status is best effort.
            if status.code() != Code::Ok {
                let _ = tx.try_send(Err(status));
            }
            why
        }
        End::ClientClosed => "client closed".to_owned(),
        End::ClientLeft(why) => why.to_owned(),
        End::ClientFailed(status) => format!("client failed: {}", status_text(&status)),
        End::ClientGone => "client gone".to_owned(),
    };
    ctx.shared.recorder.close(ctx.id, why);
    ctx.shared.tracker.close(ctx.id);
}

/// The node id a request carries, if any.
pub(crate) fn node_id(
    node: Option<&envoy_types::pb::envoy::config::core::v3::Node>,
) -> Option<&str> {
    node.map(|n| n.id.as_str())
}

impl StreamCtx {
    /// Books a request with the recorder and the tracker.
    pub(crate) fn on_request(&self, node: Option<&str>) {
        if let Some(node) = node {
            self.shared.recorder.set_node(self.id, node);
        }
        self.shared.tracker.request(self.id, node);
    }
}
