//! Building an [`XdsChannel`]: the target, where snapshots come from, and
//! the few knobs a channel has.
//!
//! The target resolves as gRFC A47 says, through the bootstrap
//! (`xdsfed_core`'s `AuthorityRegistry::listener_resource_name`):
//!
//! ```text
//! xds:///svc            → client_default_listener_resource_name_template ("%s" by default)
//! xds://authority/svc   → authorities[authority].client_listener_resource_name_template
//!                         ("xdstp://authority/envoy.config.listener.v3.Listener/%s" by default)
//! ```
//!
//! The data-plane authority, which picks the virtual host, is the target's
//! path without its leading `/`, percent-decoded (`svc` above), as gRPC
//! uses it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::watch;
use xdsfed_client::client::XdsClient;
use xdsfed_core::bootstrap::{Bootstrap, CertificateProvider};
use xdsfed_graph::{ConfigGraph, GraphOptions, SnapshotReader};

use crate::channel::{Inner, XdsChannel};
use crate::connector::Connector;
#[cfg(doc)]
use crate::connector::PlaintextConnector;
use crate::error::ChannelError;
use crate::follow::Follower;
use crate::throttle::{RetryBucket, RetryThrottling};
use crate::tls::{Providers, XdsConnector};

/// How long a call waits for the first snapshot by default: longer than
/// the graph's default warming timeout (15 s), after which the graph
/// publishes what it has with the missing parts marked failed.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the channel's snapshots come from.
enum Source {
    Bootstrap(Box<Bootstrap>),
    Client(XdsClient),
    Graph {
        reader: SnapshotReader,
        listener: String,
    },
}

/// Builds an [`XdsChannel`].
///
/// ```no_run
/// # fn run(bootstrap: xdsfed_core::bootstrap::Bootstrap) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use xdsfed_tonic::ChannelBuilder;
///
/// let channel = ChannelBuilder::new("xds://cloud.example/greeter", bootstrap)
///     .ready_timeout(Duration::from_secs(5))
///     .build()?;
/// # Ok(()) }
/// ```
pub struct ChannelBuilder {
    target: String,
    source: Source,
    ready_timeout: Duration,
    connector: Option<Arc<dyn Connector>>,
    certificate_providers: Option<Providers>,
    graph_options: Option<GraphOptions>,
    retry_throttling: Option<RetryThrottling>,
}

impl std::fmt::Debug for ChannelBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelBuilder")
            .field("target", &self.target)
            .field("ready_timeout", &self.ready_timeout)
            .finish_non_exhaustive()
    }
}

impl ChannelBuilder {
    /// A channel for `target` (`xds:///svc`, `xds:svc` or
    /// `xds://authority/svc`) through the process's xDS client for
    /// `bootstrap`: the one every other channel of an equal bootstrap uses
    /// while one is alive, else a new one (gRPC shares its xDS client the
    /// same way). [`with_client`](Self::with_client) picks a client
    /// yourself.
    pub fn new(target: impl Into<String>, bootstrap: Bootstrap) -> Self {
        Self::with_source(target.into(), Source::Bootstrap(Box::new(bootstrap)))
    }

    /// A channel for `target` that follows its listener through an
    /// existing client, sharing its ADS streams and cache with every other
    /// user of that client.
    pub fn with_client(target: impl Into<String>, client: XdsClient) -> Self {
        Self::with_source(target.into(), Source::Client(client))
    }

    /// A channel over snapshots you publish yourself (a `ConfigGraph` you
    /// run, or a `GraphEngine` with a `SnapshotCell`): it routes by
    /// `listener` in each snapshot `reader` sees. `authority` is the
    /// data-plane authority that picks the virtual host; it also names the
    /// channel in messages.
    pub fn with_graph(reader: SnapshotReader, listener: &str, authority: &str) -> Self {
        let source = Source::Graph {
            reader,
            listener: listener.to_owned(),
        };
        Self::with_source(authority.to_owned(), source)
    }

    fn with_source(target: String, source: Source) -> Self {
        Self {
            target,
            source,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            connector: None,
            certificate_providers: None,
            graph_options: None,
            retry_throttling: None,
        }
    }

    /// How long a call waits for the first snapshot before failing with
    /// `UNAVAILABLE` ([`DEFAULT_READY_TIMEOUT`] unless set).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// How endpoints are reached, replacing the default: TLS for clusters
    /// with an `UpstreamTlsContext` (gRFC A29) and [`PlaintextConnector`]
    /// for the others. The connector sees each cluster's TLS in
    /// [`ConnectTarget::tls`](crate::ConnectTarget::tls).
    pub fn connector(mut self, connector: impl Connector) -> Self {
        self.connector = Some(Arc::new(connector));
        self
    }

    /// The certificate provider instances that clusters' TLS contexts name
    /// (a bootstrap's `certificate_providers`, gRFC A29). A channel built
    /// with [`new`](Self::new) takes its bootstrap's unless set; one built
    /// with [`with_client`](Self::with_client) or
    /// [`with_graph`](Self::with_graph) has none unless set, and fails the
    /// connections of TLS clusters naming the missing instance.
    pub fn certificate_providers(
        mut self,
        providers: BTreeMap<String, CertificateProvider>,
    ) -> Self {
        self.certificate_providers = Some(Arc::new(providers));
        self
    }

    /// The options of the graph the channel starts (warming timeout,
    /// aggregate depth); not used with [`with_graph`](Self::with_graph).
    pub fn graph_options(mut self, options: GraphOptions) -> Self {
        self.graph_options = Some(options);
        self
    }

    /// Throttles the retries of every route (gRFC A6's `retryThrottling`,
    /// which gRFC A44 keeps in the channel's service config rather than in
    /// xDS): none unless set.
    pub fn retry_throttling(mut self, throttling: RetryThrottling) -> Self {
        self.retry_throttling = Some(throttling);
        self
    }

    /// Resolves the target, starts the client (for
    /// [`new`](Self::new)) and the graph, and returns the channel. Calls
    /// made before the first snapshot wait for it.
    ///
    /// # Errors
    /// A target the bootstrap cannot resolve (malformed, unknown
    /// authority), or a client that cannot start.
    ///
    /// # Panics
    /// When called outside a tokio runtime, as `tokio::spawn` does.
    pub fn build(self) -> Result<XdsChannel, ChannelError> {
        let mut providers = self.certificate_providers;
        let (reader, listener, graph, authority) = match self.source {
            Source::Graph { reader, listener } => (reader, listener, None, self.target.clone()),
            Source::Bootstrap(bootstrap) => {
                providers.get_or_insert_with(|| Arc::new(bootstrap.certificate_providers.clone()));
                let client = crate::shared::client_for(*bootstrap)?;
                start_graph(&self.target, client, self.graph_options)?
            }
            Source::Client(client) => start_graph(&self.target, client, self.graph_options)?,
        };
        let listener: Arc<str> = listener.into();
        let authority: Arc<str> = authority.into();
        let routing = Arc::new(ArcSwapOption::empty());
        let (generation, generation_rx) = watch::channel(0);
        let connector = self
            .connector
            .unwrap_or_else(|| Arc::new(XdsConnector::new(providers.unwrap_or_default())));
        let follower = Follower::new(
            Arc::clone(&listener),
            Arc::clone(&authority),
            connector,
            Arc::clone(&routing),
            generation,
        );
        let follower = tokio::spawn(follower.run(reader, graph));
        Ok(XdsChannel::from_inner(Inner {
            target: self.target.into(),
            listener,
            authority,
            ready_timeout: self.ready_timeout,
            routing,
            channel_id: crate::rng::next_u64(),
            retry_bucket: self.retry_throttling.map(|t| Arc::new(RetryBucket::new(t))),
            generation: generation_rx,
            follower,
        }))
    }
}

type Started = (SnapshotReader, String, Option<ConfigGraph>, String);

/// Resolves `target` to its listener and starts a graph rooted there.
fn start_graph(
    target: &str,
    client: XdsClient,
    options: Option<GraphOptions>,
) -> Result<Started, ChannelError> {
    let listener = client
        .registry()
        .listener_resource_name(target)?
        .to_string();
    let mut builder = ConfigGraph::builder(client).listener(listener.clone());
    if let Some(options) = options {
        builder = builder.options(options);
    }
    let graph = builder.start();
    Ok((
        graph.reader(),
        listener,
        Some(graph),
        data_plane_authority(target),
    ))
}

/// The target's path without its leading `/`, percent-decoded (invalid
/// escapes and bytes that are not UTF-8 are kept as they are).
fn data_plane_authority(target: &str) -> String {
    let rest = target.split_once(':').map_or(target, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let path = match rest.strip_prefix("//") {
        Some(hier) => hier.find('/').map_or("", |i| &hier[i..]),
        None => rest,
    };
    percent_decode(path.strip_prefix('/').unwrap_or(path))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|hex| bytes[i] == b'%' && hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_plane_authority_is_the_targets_decoded_path() {
        assert_eq!(data_plane_authority("xds:///greeter"), "greeter");
        assert_eq!(data_plane_authority("xds:greeter"), "greeter");
        assert_eq!(
            data_plane_authority("xds://cloud.example/svc%201?x#y"),
            "svc 1"
        );
        assert_eq!(data_plane_authority("xds:///a/b"), "a/b");
        assert_eq!(data_plane_authority("xds:///bad%zz%+1"), "bad%zz%+1");
    }
}
