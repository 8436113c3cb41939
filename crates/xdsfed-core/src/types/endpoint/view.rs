//! What the client holds of a validated `ClusterLoadAssignment` or LEDS
//! `LbEndpoint`: the bytes the server sent, shared, and a compact view of
//! what a data plane reads.
//!
//! A decoded `ClusterLoadAssignment` of ten endpoints is some 4.7 KB of
//! prost structs, most of it empty inline options; its bytes are about
//! 460. So the decoded message lives only while it is validated and read:
//! what stays is the bytes, every string of the view in one buffer, one
//! fixed-size record per locality and one per endpoint. Three allocations
//! per assignment however many endpoints it has. The full message is
//! decoded again from the bytes on demand ([`LoadAssignment::decode`]).
//! An assignment or LEDS endpoint of the common shape is not decoded at
//! all: its view is read from its bytes (`wire`), and is the view the
//! decoded message would give.
//!
//! Rule: the view shows exactly what the message says, field for field, of
//! what it covers: each locality's region, zone, sub-zone, weight (0 when
//! unset), priority and LEDS configuration, and each endpoint's socket
//! address, port, weight (1 when unset) and health status, in the
//! message's order. Only validated messages are viewed, so every endpoint
//! has a socket address and a port.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::address::Address;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{ConfigSource, HealthStatus};
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::endpoint::v3::locality_lb_endpoints::LbConfig;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints,
};
use prost::Message;

use super::LedsMembers;
use super::members::Iter as MembersIter;
use super::wire::assignment;
use crate::types::ValidationError;

/// A validated `ClusterLoadAssignment`, held as its bytes and a compact
/// view: its localities and endpoints, in the message's order.
///
/// Cloning copies the view; share it in an `Arc`, as the client does. A
/// copy filled in from LEDS ([`LoadAssignment::with_leds_members`]) shares
/// the assignment it was filled from instead of copying its view.
///
/// ```
/// use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
/// use xdsfed_core::types::LoadAssignment;
///
/// let message = ClusterLoadAssignment {
///     cluster_name: "backend".into(),
///     ..Default::default()
/// };
/// let held = LoadAssignment::new(&message)?;
/// assert_eq!(held.cluster_name(), "backend");
/// assert_eq!(held.endpoint_count(), 0);
/// assert_eq!(held.decode()?, message);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LoadAssignment {
    parts: Parts,
}

/// What the server sent: held here, or, in a copy filled in from LEDS, by
/// the assignment it was filled from (never itself a filled copy). A
/// graph fills a copy per cluster, and another for every snapshot a
/// member changes in, and the text and records of the assignment do not
/// change with its members: a copy is 24 bytes and its members, not the
/// 104 of what the server sent, which is boxed for that.
#[derive(Clone)]
enum Parts {
    Own(Box<Own>),
    /// Each LEDS locality's members, by its index in the LEDS localities,
    /// filled in by a graph ([`LoadAssignment::with_leds_members`]).
    Of(Arc<LoadAssignment>, Box<[LedsMembers]>),
}

/// The bytes and the view of an assignment as the server sent it.
#[derive(Clone, PartialEq)]
struct Own {
    raw: Bytes,
    text: Box<str>,
    name: Span,
    localities: Box<[LocalityRecord]>,
    endpoints: Box<[EndpointRecord]>,
    /// The LEDS localities' configurations; `None` when there are none.
    leds: Option<Arc<[LedsLocality]>>,
}

/// Equal when they hold the same message and the same members, whether
/// the message is held or shared.
impl PartialEq for LoadAssignment {
    fn eq(&self, other: &Self) -> bool {
        self.own() == other.own() && self.members() == other.members()
    }
}

/// One locality of a [`LoadAssignment`].
#[derive(Clone, Copy)]
pub struct LocalityView<'a> {
    held: &'a LoadAssignment,
    record: &'a LocalityRecord,
}

/// One endpoint: a view into a [`LoadAssignment`] or an [`LedsEndpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointView<'a> {
    /// The socket address's `address`: an IP address or a host name.
    pub address: &'a str,
    /// The socket address's port.
    pub port: u16,
    /// `load_balancing_weight`, 1 when unset (validation refuses 0).
    pub weight: u32,
    /// `health_status` as sent; see [`EndpointView::health`].
    pub health_status: i32,
}

impl EndpointView<'_> {
    /// The health status, `None` for a value this client does not know.
    pub fn health(&self) -> Option<HealthStatus> {
        HealthStatus::try_from(self.health_status).ok()
    }

    /// Whether gRPC sends traffic to an endpoint of this health: UNKNOWN
    /// or HEALTHY (gRFC A27).
    pub fn is_usable(&self) -> bool {
        matches!(
            self.health(),
            Some(HealthStatus::Unknown | HealthStatus::Healthy)
        )
    }
}

/// A locality that takes its endpoints from LEDS (xDS TP1): the collection
/// it names and the ConfigSource to fetch it through.
#[derive(Debug, Clone, PartialEq)]
pub struct LedsLocality {
    /// `leds_cluster_locality_config.leds_collection_name`.
    /// Shared: a graph keys the collection by this very copy when it is
    /// canonical.
    pub collection_name: Arc<str>,
    /// `leds_cluster_locality_config.leds_config`, encoded: the decoded
    /// message is 216 bytes, its encoding a few, and it is read once, when
    /// the assignment's edges are worked out.
    config: Option<Box<[u8]>>,
}

impl LedsLocality {
    /// `leds_cluster_locality_config.leds_config`.
    pub fn config(&self) -> Option<ConfigSource> {
        // The message was decoded from a valid encoding and encoded again
        // here, so this decodes; were it not to, the locality reads as
        // naming no ConfigSource rather than as someone else's.
        let encoded = self.config.as_deref()?;
        ConfigSource::decode(encoded).ok()
    }
}

/// A validated LEDS `LbEndpoint`, held as its bytes and a compact view.
///
/// LEDS endpoints arrive by the hundred thousand and each is held for a
/// long time, so one costs its bytes and a few integers, 48 bytes (64 when
/// it kept its address in an allocation of its own): the address is read
/// from where it lies in the bytes. An address is at most 65 535 bytes
/// (a host name is at most 253, an IP address 45), so its length takes two
/// bytes and the whole fits 48.
#[derive(Clone, PartialEq, Eq)]
pub struct LedsEndpoint {
    raw: Bytes,
    /// Where the socket address's `address` starts in `raw`, and its
    /// length. Set only where `raw` holds the bytes of a `str` there, so
    /// it is UTF-8.
    address_start: u32,
    address_len: u16,
    weight: u32,
    health_status: i32,
    port: u16,
}

/// The longest address a [`LedsEndpoint`] holds.
const LONGEST_ADDRESS: usize = u16::MAX as usize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn range(self) -> Range<usize> {
        let start = self.start as usize;
        start..start + self.len as usize
    }

    /// `range` as a span, `None` past 4 GiB.
    fn of(range: Range<usize>) -> Option<Self> {
        Some(Span {
            start: u32::try_from(range.start).ok()?,
            len: u32::try_from(range.end.checked_sub(range.start)?).ok()?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LocalityRecord {
    region: Span,
    zone: Span,
    sub_zone: Span,
    weight: u32,
    priority: u32,
    endpoints: Span,
    /// Index into `leds`, or `NO_LEDS`.
    leds: u32,
}

const NO_LEDS: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EndpointRecord {
    address: Span,
    weight: u32,
    health_status: i32,
    port: u16,
}

impl LoadAssignment {
    /// Validates `message` as the client validates EDS (gRFC A27) and holds
    /// it; for tests and for assignments inside clusters.
    pub fn new(message: &ClusterLoadAssignment) -> Result<Self, ValidationError> {
        super::validate_load_assignment(message)?;
        Self::of_validated(message, Bytes::from(message.encode_to_vec()))
    }

    /// The view of `message`, which validation accepted and which was
    /// decoded from `raw`.
    pub(crate) fn of_validated(
        message: &ClusterLoadAssignment,
        raw: Bytes,
    ) -> Result<Self, ValidationError> {
        let mut builder = Builder::sized_for(message);
        builder.name = builder.push_text(&message.cluster_name)?;
        for locality in &message.endpoints {
            builder.push_locality(locality)?;
        }
        Ok(builder.finish(raw))
    }

    /// The assignment held in `raw` when its bytes have the common shape
    /// (see `wire::assignment`), read from them; for any other, `raw`
    /// back, for the full decode.
    pub(crate) fn of_common_shape(raw: Bytes) -> Result<Self, Bytes> {
        match Builder::of_common_shape(&raw) {
            Some(builder) => Ok(builder.finish(raw)),
            None => Err(raw),
        }
    }

    /// A copy in which each LEDS locality shows the members of its
    /// collection as its endpoints: `members[i]` those of the `i`-th LEDS
    /// locality (in the order of [`LoadAssignment::leds_localities`]); a
    /// locality past the end of `members` shows none. The members are
    /// shared, not copied, and so are the bytes, which stay those of the
    /// assignment as the server sent it.
    ///
    /// The copy shares `self` (or what `self` was filled from) rather than
    /// copying its text and records.
    pub fn with_leds_members(self: &Arc<Self>, members: Vec<LedsMembers>) -> Self {
        let base = match &self.parts {
            Parts::Own(_) => Arc::clone(self),
            Parts::Of(base, _) => Arc::clone(base),
        };
        LoadAssignment {
            parts: Parts::Of(base, members.into_boxed_slice()),
        }
    }

    /// The message's bytes and view, wherever they are held.
    fn own(&self) -> &Own {
        match &self.parts {
            Parts::Own(own) => own,
            Parts::Of(base, _) => base.own(),
        }
    }

    /// The LEDS localities' members a graph filled in; none as the server
    /// sent the assignment.
    fn members(&self) -> &[LedsMembers] {
        match &self.parts {
            Parts::Own(_) => &[],
            Parts::Of(_, members) => members,
        }
    }

    /// `cluster_name`.
    pub fn cluster_name(&self) -> &str {
        let own = self.own();
        &own.text[own.name.range()]
    }

    /// The localities, in the message's order.
    pub fn localities(&self) -> impl ExactSizeIterator<Item = LocalityView<'_>> {
        self.own()
            .localities
            .iter()
            .map(move |record| LocalityView { held: self, record })
    }

    /// Every endpoint of every locality, in the message's order (a LEDS
    /// locality's, filled in, in its members' name order).
    pub fn endpoints(&self) -> impl ExactSizeIterator<Item = EndpointView<'_>> {
        AllEndpoints {
            localities: self.localities(),
            current: LocalityEndpoints::Inline(self, [].iter()),
            remaining: self.endpoint_count(),
        }
    }

    /// How many endpoints the localities list together.
    pub fn endpoint_count(&self) -> usize {
        self.own().endpoints.len() + self.members().iter().map(LedsMembers::len).sum::<usize>()
    }

    /// Whether any locality takes its endpoints from LEDS; O(1).
    pub fn has_leds_localities(&self) -> bool {
        !self.leds().is_empty()
    }

    /// The localities that take their endpoints from LEDS, with their index.
    pub fn leds_localities(&self) -> impl Iterator<Item = (usize, &LedsLocality)> {
        self.own()
            .localities
            .iter()
            .enumerate()
            .filter_map(|(i, l)| self.leds().get(l.leds as usize).map(|leds| (i, leds)))
    }

    fn leds(&self) -> &[LedsLocality] {
        self.own().leds.as_deref().unwrap_or_default()
    }

    /// The bytes the server sent, shared.
    pub fn raw(&self) -> &Bytes {
        &self.own().raw
    }

    /// The full message, decoded again from the bytes the server sent.
    /// Endpoints filled in from LEDS are not in it.
    pub fn decode(&self) -> Result<ClusterLoadAssignment, prost::DecodeError> {
        ClusterLoadAssignment::decode(self.own().raw.clone())
    }

    fn endpoint(&self, record: &EndpointRecord) -> EndpointView<'_> {
        EndpointView {
            address: &self.own().text[record.address.range()],
            port: record.port,
            weight: record.weight,
            health_status: record.health_status,
        }
    }
}

impl fmt::Debug for LoadAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadAssignment")
            .field("cluster_name", &self.cluster_name())
            .field("localities", &self.localities().collect::<Vec<_>>())
            .field("bytes", &self.own().raw.len())
            .finish()
    }
}

impl<'a> LocalityView<'a> {
    /// `locality.region`.
    pub fn region(&self) -> &'a str {
        &self.held.own().text[self.record.region.range()]
    }

    /// `locality.zone`.
    pub fn zone(&self) -> &'a str {
        &self.held.own().text[self.record.zone.range()]
    }

    /// `locality.sub_zone`.
    pub fn sub_zone(&self) -> &'a str {
        &self.held.own().text[self.record.sub_zone.range()]
    }

    /// `load_balancing_weight`, 0 when unset: gRPC ignores such a locality.
    pub fn weight(&self) -> u32 {
        self.record.weight
    }

    /// `priority`.
    pub fn priority(&self) -> u32 {
        self.record.priority
    }

    /// Its endpoints: those listed inline, or for an LEDS locality those
    /// the graph filled in (none in the assignment as the server sent it).
    pub fn endpoints(&self) -> impl ExactSizeIterator<Item = EndpointView<'a>> + use<'a> {
        self.walk()
    }

    fn walk(&self) -> LocalityEndpoints<'a> {
        let held = self.held;
        match held.members().get(self.record.leds as usize) {
            Some(members) => LocalityEndpoints::Members(members.iter()),
            None => LocalityEndpoints::Inline(
                held,
                held.own().endpoints[self.record.endpoints.range()].iter(),
            ),
        }
    }

    /// Its LEDS configuration, when it takes its endpoints from LEDS.
    pub fn leds(&self) -> Option<&'a LedsLocality> {
        self.held.leds().get(self.record.leds as usize)
    }
}

/// The endpoints of one locality: records of the assignment, or a LEDS
/// collection's members.
enum LocalityEndpoints<'a> {
    Inline(&'a LoadAssignment, std::slice::Iter<'a, EndpointRecord>),
    Members(MembersIter<'a>),
}

impl<'a> Iterator for LocalityEndpoints<'a> {
    type Item = EndpointView<'a>;

    fn next(&mut self) -> Option<EndpointView<'a>> {
        match self {
            LocalityEndpoints::Inline(held, records) => records.next().map(|e| held.endpoint(e)),
            LocalityEndpoints::Members(members) => members.next().map(|(_, e)| e.view()),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            LocalityEndpoints::Inline(_, records) => records.size_hint(),
            LocalityEndpoints::Members(members) => members.size_hint(),
        }
    }
}

impl ExactSizeIterator for LocalityEndpoints<'_> {}

/// Every endpoint of an assignment, locality after locality.
struct AllEndpoints<'a, L> {
    localities: L,
    current: LocalityEndpoints<'a>,
    remaining: usize,
}

impl<'a, L: Iterator<Item = LocalityView<'a>>> Iterator for AllEndpoints<'a, L> {
    type Item = EndpointView<'a>;

    fn next(&mut self) -> Option<EndpointView<'a>> {
        loop {
            if let Some(endpoint) = self.current.next() {
                self.remaining = self.remaining.saturating_sub(1);
                return Some(endpoint);
            }
            self.current = self.localities.next()?.walk();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<'a, L: Iterator<Item = LocalityView<'a>>> ExactSizeIterator for AllEndpoints<'a, L> {}

impl fmt::Debug for LocalityView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locality")
            .field("region", &self.region())
            .field("zone", &self.zone())
            .field("sub_zone", &self.sub_zone())
            .field("weight", &self.weight())
            .field("priority", &self.priority())
            .field("endpoints", &self.endpoints().collect::<Vec<_>>())
            .field("leds", &self.leds())
            .finish()
    }
}

impl LedsEndpoint {
    /// Validates `message` as the client validates LEDS and holds it; for
    /// tests.
    pub fn new(message: &LbEndpoint) -> Result<Self, ValidationError> {
        super::validate_lb_endpoint(message)?;
        Self::of_validated(message, Bytes::from(message.encode_to_vec()))
    }

    /// The view of `message`, which validation accepted and which was
    /// decoded from `raw`.
    pub(crate) fn of_validated(message: &LbEndpoint, raw: Bytes) -> Result<Self, ValidationError> {
        let (address, port) = socket_of(message)?;
        if address.len() > LONGEST_ADDRESS {
            return Err(ValidationError::field(
                "endpoint.address.socket_address.address",
                format!(
                    "{} bytes long, longer than the {LONGEST_ADDRESS} bytes of any host name or IP address",
                    address.len()
                ),
            ));
        }
        let found = span_in(&raw, address).and_then(short_span);
        let (address_start, address_len) = found.ok_or_else(|| {
            ValidationError::field(
                "endpoint.address.socket_address.address",
                "not found in the bytes where decoding read it, or past 4 GiB",
            )
        })?;
        Ok(Self {
            raw,
            address_start,
            address_len,
            port,
            weight: weight_of(message),
            health_status: message.health_status,
        })
    }

    /// The endpoint held in `raw` when its bytes have the common shape
    /// (see `wire`), read from them; for any other, `raw` back, for the
    /// full decode.
    pub(crate) fn of_common_shape(raw: Bytes) -> Result<Self, Bytes> {
        let found = super::wire::lb_endpoint(&raw).and_then(|common| {
            let address = short_span(Span::of(common.address_at)?)?;
            Some((address, common.port, common.weight, common.health_status))
        });
        let Some(((address_start, address_len), port, weight, health_status)) = found else {
            return Err(raw);
        };
        Ok(Self {
            raw,
            address_start,
            address_len,
            port,
            weight,
            health_status,
        })
    }

    /// The endpoint's view.
    pub fn view(&self) -> EndpointView<'_> {
        EndpointView {
            address: self.address(),
            port: self.port,
            weight: self.weight,
            health_status: self.health_status,
        }
    }

    /// The socket address's `address`. The span was set where `raw`
    /// holds a `str`, so the check cannot fail; were it to, the address
    /// reads as empty rather than as someone else's bytes.
    fn address(&self) -> &str {
        let start = self.address_start as usize;
        self.raw
            .get(start..start + usize::from(self.address_len))
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or_default()
    }

    /// The bytes the server sent, shared.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The full message, decoded again from the bytes the server sent.
    pub fn decode(&self) -> Result<LbEndpoint, prost::DecodeError> {
        LbEndpoint::decode(self.raw.clone())
    }
}

impl fmt::Debug for LedsEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.view(), f)
    }
}

/// The view under construction.
struct Builder {
    text: String,
    name: Span,
    localities: Vec<LocalityRecord>,
    endpoints: Vec<EndpointRecord>,
    leds: Vec<LedsLocality>,
}

impl Builder {
    /// Room for `message`'s view, so that nothing grows while it is built.
    fn sized_for(message: &ClusterLoadAssignment) -> Self {
        let mut text = message.cluster_name.len();
        let mut endpoints = 0;
        for locality in &message.endpoints {
            if let Some(l) = &locality.locality {
                text += l.region.len() + l.zone.len() + l.sub_zone.len();
            }
            endpoints += locality.lb_endpoints.len();
            text += locality
                .lb_endpoints
                .iter()
                .filter_map(|lb| socket_of(lb).ok())
                .map(|(address, _)| address.len())
                .sum::<usize>();
        }
        Self {
            text: String::with_capacity(text),
            name: Span::default(),
            localities: Vec::with_capacity(message.endpoints.len()),
            endpoints: Vec::with_capacity(endpoints),
            leds: Vec::new(),
        }
    }

    /// The view of an assignment of the common shape, read from its
    /// bytes: what [`Builder::push_locality`] makes of its message, string
    /// for string in the same order, so the views are equal.
    fn of_common_shape(raw: &[u8]) -> Option<Self> {
        let size = assignment::size(raw)?;
        let mut builder = Self {
            // Every string of the view is a different part of `raw`, so
            // they fit; the room left is given back when the view is
            // finished.
            text: String::with_capacity(raw.len()),
            name: Span::default(),
            localities: Vec::with_capacity(size.localities),
            endpoints: Vec::with_capacity(size.endpoints),
            leds: Vec::new(),
        };
        builder.name = builder.push_text(size.name).ok()?;
        assignment::walk(raw, &size, |event| match event {
            assignment::Event::Locality(locality) => builder.push_common_locality(&locality),
            assignment::Event::Endpoint(endpoint) => builder
                .push_endpoint(EndpointView {
                    address: endpoint.address,
                    port: endpoint.port,
                    weight: endpoint.weight,
                    health_status: endpoint.health_status,
                })
                .ok(),
        })?;
        Some(builder)
    }

    /// A locality of the common shape, whose endpoints come next.
    fn push_common_locality(&mut self, locality: &assignment::Locality<'_>) -> Option<()> {
        let [region, zone, sub_zone] = locality.place.unwrap_or_default();
        let (region, zone, sub_zone) = (
            self.push_text(region).ok()?,
            self.push_text(zone).ok()?,
            self.push_text(sub_zone).ok()?,
        );
        let endpoints = Span::of(self.endpoints.len()..self.endpoints.len() + locality.endpoints)?;
        self.localities.push(LocalityRecord {
            region,
            zone,
            sub_zone,
            weight: locality.weight,
            priority: locality.priority,
            endpoints,
            leds: NO_LEDS,
        });
        Some(())
    }

    fn push_text(&mut self, s: &str) -> Result<Span, ValidationError> {
        let too_long = || ValidationError("the assignment's text exceeds 4 GiB".into());
        let start = u32::try_from(self.text.len()).map_err(|_| too_long())?;
        let len = u32::try_from(s.len()).map_err(|_| too_long())?;
        start.checked_add(len).ok_or_else(too_long)?;
        self.text.push_str(s);
        Ok(Span { start, len })
    }

    fn push_endpoint(&mut self, endpoint: EndpointView<'_>) -> Result<(), ValidationError> {
        let address = self.push_text(endpoint.address)?;
        self.endpoints.push(EndpointRecord {
            address,
            weight: endpoint.weight,
            health_status: endpoint.health_status,
            port: endpoint.port,
        });
        Ok(())
    }

    fn endpoints_from(&self, first: usize) -> Result<Span, ValidationError> {
        let count =
            |n: usize| u32::try_from(n).map_err(|_| ValidationError("too many endpoints".into()));
        Ok(Span {
            start: count(first)?,
            len: count(self.endpoints.len() - first)?,
        })
    }

    fn push_locality(&mut self, locality: &LocalityLbEndpoints) -> Result<(), ValidationError> {
        let place = locality.locality.clone().unwrap_or_default();
        let (region, zone, sub_zone) = (
            self.push_text(&place.region)?,
            self.push_text(&place.zone)?,
            self.push_text(&place.sub_zone)?,
        );
        let leds = match &locality.lb_config {
            Some(LbConfig::LedsClusterLocalityConfig(config)) => {
                self.leds.push(LedsLocality {
                    collection_name: config.leds_collection_name.as_str().into(),
                    config: config
                        .leds_config
                        .as_ref()
                        .map(|c| c.encode_to_vec().into_boxed_slice()),
                });
                index_of_last(&self.leds)
            }
            _ => NO_LEDS,
        };
        let first = self.endpoints.len();
        // Envoy ignores a LEDS locality's own endpoints; so does the view.
        if leds == NO_LEDS {
            for lb in &locality.lb_endpoints {
                let (address, port) = socket_of(lb)?;
                self.push_endpoint(EndpointView {
                    address,
                    port,
                    weight: weight_of(lb),
                    health_status: lb.health_status,
                })?;
            }
        }
        let endpoints = self.endpoints_from(first)?;
        self.localities.push(LocalityRecord {
            region,
            zone,
            sub_zone,
            weight: locality
                .load_balancing_weight
                .as_ref()
                .map_or(0, |w| w.value),
            priority: locality.priority,
            endpoints,
            leds,
        });
        Ok(())
    }

    fn finish(self, raw: Bytes) -> LoadAssignment {
        LoadAssignment {
            parts: Parts::Own(Box::new(Own {
                raw,
                text: self.text.into_boxed_str(),
                name: self.name,
                localities: self.localities.into_boxed_slice(),
                endpoints: self.endpoints.into_boxed_slice(),
                leds: (!self.leds.is_empty()).then(|| Arc::from(self.leds)),
            })),
        }
    }
}

fn index_of_last<T>(items: &[T]) -> u32 {
    u32::try_from(items.len() - 1).unwrap_or(NO_LEDS)
}

/// A validated endpoint's socket address and port.
fn socket_of(lb: &LbEndpoint) -> Result<(&str, u16), ValidationError> {
    let socket = match &lb.host_identifier {
        Some(HostIdentifier::Endpoint(endpoint)) => {
            match endpoint.address.as_ref().and_then(|a| a.address.as_ref()) {
                Some(Address::SocketAddress(socket)) => Some(socket),
                _ => None,
            }
        }
        _ => None,
    };
    let missing = || ValidationError::field("endpoint.address.socket_address", "missing");
    let socket = socket.ok_or_else(missing)?;
    match socket.port_specifier {
        Some(PortSpecifier::PortValue(port)) => u16::try_from(port)
            .map(|port| (socket.address.as_str(), port))
            .map_err(|_| missing()),
        _ => Err(missing()),
    }
}

/// `LbEndpoint.endpoint.address.socket_address.address`.
const SOCKET_ADDRESS_ADDRESS: &[u32] = &[1, 1, 1, 2];

/// Where in `raw` the bytes of `address`, a validated endpoint's socket
/// address decoded from `raw`, lie: the field's last occurrence, which is
/// what decoding keeps, also when sub-messages came in pieces that it
/// merged (a walk linear in the bytes: a search for the address's bytes
/// anywhere in them cost their lengths' product on a hostile message).
/// `None` only past 4 GiB (or for an address not decoded from `raw`, which
/// no caller gives).
fn span_in(raw: &[u8], address: &str) -> Option<Span> {
    let wanted = address.as_bytes();
    if wanted.is_empty() {
        return Some(Span::default());
    }
    let range = crate::types::presized::field_range(raw, SOCKET_ADDRESS_ADDRESS)
        .filter(|range| raw.get(range.clone()) == Some(wanted))?;
    Span::of(range)
}

/// `span` as a [`LedsEndpoint`] holds it: its start, and its length when
/// that is at most [`LONGEST_ADDRESS`].
fn short_span(span: Span) -> Option<(u32, u16)> {
    Some((span.start, u16::try_from(span.len).ok()?))
}

fn weight_of(lb: &LbEndpoint) -> u32 {
    lb.load_balancing_weight.as_ref().map_or(1, |w| w.value)
}

#[cfg(test)]
mod tests;
