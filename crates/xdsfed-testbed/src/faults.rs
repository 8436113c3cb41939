//! Faults a server injects on purpose, switchable at run time.
//!
//! Every field's default means "no fault". A server reads its faults afresh
//! for every connection, stream and response, so [`crate::Server::set_faults`]
//! takes effect at once on open streams too.
//!
//! | fault | effect on the wire |
//! | --- | --- |
//! | `refuse_connections` | new TCP connections are closed at once; new streams on open connections end with `UNAVAILABLE` |
//! | `close_immediately` | every new stream ends with `UNAVAILABLE` before any response |
//! | `close_after_responses: K` | a stream ends with `UNAVAILABLE` (or `close_code`) right after its K-th response |
//! | `close_code` | the status `close_after_responses` ends a stream with, e.g. `OK` |
//! | `response_delay` | every response leaves that much later |
//! | `silent_names` / `silent_types` | those resources, or every response of those types, are never sent |
//! | `malformed_names` | those resources are sent with bytes that do not decode |
//! | `duplicate_names` | those resources appear twice in one response |
//! | `inject` | these resources (typically of an authority the server does not serve) ride along in every response of their type |
//! | `redirects` | a subscribed name (or a name matching a subscribed glob) is answered with an `xds.core.v3.ResourceLocator` pointing at another name |
//! | `delta_unimplemented` | `DeltaAggregatedResources` answers `UNIMPLEMENTED` |
//! | `http_status: S` | REST only: every request is answered with HTTP status `S` (e.g. 503) |
//! | `malformed_body` | REST only: responses carry a body that is not a `DiscoveryResponse` |
//! | `cdn_status` | an HTTP CDN server answers every `GET` with this status and no body |
//! | `cdn_malformed_body` | an HTTP CDN server answers `200` with a body that is not a `DiscoveryResponse` |
//!
//! Restarting on the same port, keeping or dropping state, is
//! [`crate::Server::restart`]. A server that accepts TCP connections and
//! never speaks is a [`Tarpit`], a listener of its own.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::{
    ContextParams, ResourceLocator,
    resource_locator::{ContextParamSpecifier, Scheme},
};
use prost::Message;
use tokio::net::TcpListener;
use tonic::Code;

use crate::subscription::key_of;

/// The type URL of a redirect.
pub const RESOURCE_LOCATOR_TYPE_URL: &str = "type.googleapis.com/xds.core.v3.ResourceLocator";

/// The bytes a malformed resource carries: a field tag with wire type 7, which
/// no protobuf decoder accepts.
pub const MALFORMED_BYTES: &[u8] = &[0x0f, 0xff, 0xff];

/// A resource to inject into responses, whatever the subscriptions say.
#[derive(Debug, Clone, PartialEq)]
pub struct Injected {
    /// The name sent on the wire.
    pub name: String,
    /// The resource; its type URL selects the responses it rides in.
    pub resource: Any,
}

/// The faults of one server. `Faults::default()` injects nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Close new connections at once and fail new streams with `UNAVAILABLE`.
    pub refuse_connections: bool,
    /// End every new stream with `UNAVAILABLE` before any response.
    pub close_immediately: bool,
    /// End a stream with `UNAVAILABLE` (or [`Faults::close_code`]) right
    /// after this many responses.
    pub close_after_responses: Option<u32>,
    /// The status `close_after_responses` ends a stream with (default
    /// `UNAVAILABLE`); `OK` ends it as if the server were done.
    pub close_code: Option<Code>,
    /// Hold every response back this long.
    pub response_delay: Option<Duration>,
    /// Never send these resources (names, compared canonically).
    pub silent_names: BTreeSet<String>,
    /// Never answer for these type URLs.
    pub silent_types: BTreeSet<String>,
    /// Send these resources with bytes that do not decode.
    pub malformed_names: BTreeSet<String>,
    /// Send these resources twice in the same response.
    pub duplicate_names: BTreeSet<String>,
    /// Add these resources to every response of their type.
    pub inject: Vec<Injected>,
    /// Answer a subscribed name (key), or a name matching a subscribed glob
    /// collection, with a redirect to another name (value).
    pub redirects: BTreeMap<String, String>,
    /// Answer `DeltaAggregatedResources` with `UNIMPLEMENTED`.
    pub delta_unimplemented: bool,
    /// REST only: answer every request with this HTTP status (e.g. 503)
    /// and no `DiscoveryResponse`.
    pub http_status: Option<u16>,
    /// REST only: answer with a body that is not a `DiscoveryResponse`.
    pub malformed_body: bool,
    /// An HTTP CDN server ([`crate::cdn`]) answers every `GET` with this
    /// status (e.g. 503) and an empty body.
    pub cdn_status: Option<u16>,
    /// An HTTP CDN server answers `200` with a body that does not decode.
    pub cdn_malformed_body: bool,
}

fn contains(set: &BTreeSet<String>, key: &str) -> bool {
    set.iter().any(|name| key_of(name) == key)
}

impl Faults {
    /// Whether the resource with canonical key `key` is silenced.
    pub fn is_silent(&self, type_url: &str, key: &str) -> bool {
        self.silent_types.contains(type_url) || contains(&self.silent_names, key)
    }

    /// Whether the resource with canonical key `key` is sent malformed.
    pub fn is_malformed(&self, key: &str) -> bool {
        contains(&self.malformed_names, key)
    }

    /// Whether the resource with canonical key `key` is sent twice.
    pub fn is_duplicated(&self, key: &str) -> bool {
        contains(&self.duplicate_names, key)
    }

    /// The redirect target for canonical key `key`, if any.
    pub fn redirect_for(&self, key: &str) -> Option<&str> {
        self.redirects
            .iter()
            .find(|(name, _)| key_of(name) == key)
            .map(|(_, target)| target.as_str())
    }
}

/// The gRPC status code named `name`: its name in any case (`OK`,
/// `unavailable`) or its number (`0`–`16`).
pub fn parse_code(name: &str) -> Option<Code> {
    let number = match name.parse::<i32>() {
        Ok(n) => n,
        Err(_) => xdsfed_core::error::GrpcCode::from_name(name)?.as_i32(),
    };
    (0..=16).contains(&number).then(|| Code::from_i32(number))
}

/// A listener on `127.0.0.1` that accepts TCP connections and never speaks:
/// no TLS, no HTTP/2 preface, nothing read or written. It holds every
/// connection until it is dropped, as a management server that hangs after
/// `accept` would.
#[derive(Debug)]
pub struct Tarpit {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Tarpit {
    /// Binds `127.0.0.1:0` and starts accepting (on the current tokio
    /// runtime).
    pub async fn bind() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            // Accept errors (out of descriptors) end the tarpit: its
            // clients then see refused connections, still no answer.
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                held.push(socket);
            }
        });
        Ok(Tarpit {
            addr,
            accepted,
            task,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for a bootstrap's `server_uri`.
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many connections it has accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Tarpit {
    fn drop(&mut self) {
        // Dropping the task's state closes every held connection.
        self.task.abort();
    }
}

/// A `ResourceLocator` for `target`, packed in an `Any`.
///
/// An xdstp URN fills authority, type, id and exact context parameters; any
/// other name becomes the id of an authority-less xdstp locator.
pub fn redirect_any(target: &str) -> Any {
    let mut locator = ResourceLocator {
        scheme: Scheme::Xdstp as i32,
        ..Default::default()
    };
    match target.strip_prefix("xdstp://") {
        Some(rest) => {
            let rest = rest.split('#').next().unwrap_or(rest);
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let mut segments = path.splitn(3, '/');
            locator.authority = segments.next().unwrap_or_default().to_owned();
            locator.resource_type = segments.next().unwrap_or_default().to_owned();
            locator.id = segments.next().unwrap_or_default().to_owned();
            if !query.is_empty() {
                let params = query
                    .split('&')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap_or((p, ""));
                        (decode(k), decode(v))
                    })
                    .collect();
                locator.context_param_specifier =
                    Some(ContextParamSpecifier::ExactContext(ContextParams {
                        params,
                    }));
            }
        }
        None => locator.id = target.to_owned(),
    }
    Any {
        type_url: RESOURCE_LOCATOR_TYPE_URL.to_owned(),
        value: locator.encode_to_vec(),
    }
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_any_carries_urn_parts_and_params() {
        let any = redirect_any("xdstp://a/envoy.config.listener.v3.Listener/baz?x=1%202");
        assert_eq!(any.type_url, RESOURCE_LOCATOR_TYPE_URL);
        let locator = ResourceLocator::decode(any.value.as_slice()).unwrap();
        assert_eq!(locator.authority, "a");
        assert_eq!(locator.resource_type, "envoy.config.listener.v3.Listener");
        assert_eq!(locator.id, "baz");
        let Some(ContextParamSpecifier::ExactContext(ctx)) = locator.context_param_specifier else {
            panic!("context params missing");
        };
        assert_eq!(ctx.params.get("x").map(String::as_str), Some("1 2"));
    }

    #[test]
    fn parse_code_takes_names_in_any_case_and_numbers() {
        assert_eq!(parse_code("OK"), Some(Code::Ok));
        assert_eq!(parse_code("unavailable"), Some(Code::Unavailable));
        assert_eq!(parse_code("16"), Some(Code::Unauthenticated));
        assert_eq!(parse_code("17"), None);
        assert_eq!(parse_code("-1"), None);
        assert_eq!(parse_code("NOPE"), None);
    }

    #[test]
    fn malformed_bytes_do_not_decode() {
        assert!(ResourceLocator::decode(MALFORMED_BYTES).is_err());
    }
}
