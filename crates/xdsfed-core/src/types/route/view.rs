//! What the client holds of a validated `RouteConfiguration`: the bytes the
//! server sent, shared, and a compact view of the clusters its routes can
//! send to.
//!
//! A decoded `Route` is some 3.6 KB of prost structs against about 100
//! bytes on the wire, and a configuration may hold 100 000 of them. What a
//! graph and an operator's view read is which clusters the routes name; a
//! data plane compiles its routing table from the full message, decoded
//! again from the bytes when the configuration changes
//! ([`RouteConfigView::decode`]).
//!
//! Rule: the view lists, in the message's order, every cluster a request
//! could be sent to: the configuration's, each virtual host's and each
//! route's request mirror policies, each route's `cluster` and each of its
//! `weighted_clusters` with its weight; and every `cluster_header` (a
//! cluster chosen per request). Names are kept once each in one buffer.
//! Only validated messages are viewed.

use std::fmt;
use std::hash::BuildHasher;

use bytes::Bytes;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::{
    ClusterSpecifier, RequestMirrorPolicy,
};
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
use prost::Message;

use crate::hash::HashMap;
use crate::types::ValidationError;

/// A validated `RouteConfiguration`, held as its bytes and a compact view.
///
/// ```
/// use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
/// use xdsfed_core::types::{RouteConfigView, RouteTarget};
///
/// let message = RouteConfiguration { name: "front".into(), ..Default::default() };
/// let held = RouteConfigView::new(&message)?;
/// assert_eq!(held.name(), "front");
/// assert_eq!(held.targets().count(), 0);
/// assert_eq!(held.decode()?, message);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct RouteConfigView {
    raw: Bytes,
    text: Box<str>,
    name: Span,
    virtual_hosts: u32,
    targets: Box<[TargetRecord]>,
}

/// A cluster a route configuration can send requests to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteTarget<'a> {
    /// A route's `cluster`.
    Cluster(&'a str),
    /// One of a route's `weighted_clusters`, with its weight (0 when
    /// unset).
    Weighted(&'a str, u32),
    /// A request mirror policy's `cluster`: it receives copies.
    Mirror(&'a str),
    /// A `cluster_header`: the cluster is named per request by this header.
    Header(&'a str),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// The text this span holds in `text`.
    fn of(self, text: &str) -> &str {
        text.get(self.start as usize..)
            .and_then(|t| t.get(..self.len as usize))
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetKind {
    Cluster,
    Weighted(u32),
    Mirror,
    Header,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TargetRecord {
    name: Span,
    kind: TargetKind,
}

impl RouteConfigView {
    /// Validates `message` as the client validates RDS (gRFC A27, A28) and
    /// holds it; for tests and for configurations inline in listeners.
    pub fn new(message: &RouteConfiguration) -> Result<Self, ValidationError> {
        super::validate_route_configuration(message)?;
        Self::of_validated(message, Bytes::from(message.encode_to_vec()))
    }

    /// The view of `message`, which validation accepted and which was
    /// decoded from `raw`.
    pub(crate) fn of_validated(
        message: &RouteConfiguration,
        raw: Bytes,
    ) -> Result<Self, ValidationError> {
        let mut builder = Builder::new(message)?;
        for vhost in &message.virtual_hosts {
            builder.virtual_host(vhost)?;
            for route in &vhost.routes {
                builder.route(route)?;
            }
        }
        Ok(builder.finish(raw, message.virtual_hosts.len()))
    }

    /// `name`.
    pub fn name(&self) -> &str {
        self.span(self.name)
    }

    /// How many virtual hosts it has.
    pub fn virtual_host_count(&self) -> usize {
        self.virtual_hosts as usize
    }

    /// Every cluster a request could be sent to, and every header that
    /// names one per request, in the message's order (a name used twice is
    /// listed twice).
    pub fn targets(&self) -> impl ExactSizeIterator<Item = RouteTarget<'_>> {
        self.targets.iter().map(move |t| {
            let name = self.span(t.name);
            match t.kind {
                TargetKind::Cluster => RouteTarget::Cluster(name),
                TargetKind::Weighted(w) => RouteTarget::Weighted(name, w),
                TargetKind::Mirror => RouteTarget::Mirror(name),
                TargetKind::Header => RouteTarget::Header(name),
            }
        })
    }

    /// The bytes the server sent, shared.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The full message, decoded again from the bytes the server sent.
    pub fn decode(&self) -> Result<RouteConfiguration, prost::DecodeError> {
        RouteConfiguration::decode(self.raw.clone())
    }

    fn span(&self, span: Span) -> &str {
        span.of(&self.text)
    }
}

impl fmt::Debug for RouteConfigView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteConfigView")
            .field("name", &self.name())
            .field("virtual_hosts", &self.virtual_hosts)
            .field("targets", &self.targets.len())
            .field("bytes", &self.raw.len())
            .finish()
    }
}

/// Builds a view from a configuration's parts, fed in the message's order:
/// the configuration, then each virtual host followed by its routes. Each
/// part may be dropped once fed, so a configuration can be viewed one route
/// at a time.
///
/// Each name is kept once in the buffer, whatever it is used as. Names are
/// found again by their hash rather than borrowed from the message (which
/// may be gone) or copied into the map; a hash that meets another name
/// only stores the name again, a view a little less compact.
pub(super) struct Builder {
    text: String,
    spans: HashMap<u64, Span>,
    name: Span,
    targets: Vec<TargetRecord>,
}

impl Builder {
    /// A view of `config`'s name and its own request mirror policies; its
    /// `virtual_hosts` are not read but fed one by one.
    pub(super) fn new(config: &RouteConfiguration) -> Result<Self, ValidationError> {
        let mut builder = Builder {
            text: String::new(),
            spans: HashMap::default(),
            name: Span::default(),
            targets: Vec::new(),
        };
        builder.name = builder.text(&config.name)?;
        builder.mirrors(&config.request_mirror_policies)?;
        Ok(builder)
    }

    /// The next virtual host's own request mirror policies; its `routes`
    /// are not read but fed one by one.
    pub(super) fn virtual_host(&mut self, vhost: &VirtualHost) -> Result<(), ValidationError> {
        self.mirrors(&vhost.request_mirror_policies)
    }

    /// The next route of the last virtual host fed.
    pub(super) fn route(&mut self, route: &Route) -> Result<(), ValidationError> {
        if let Some(Action::Route(action)) = &route.action {
            self.action(&action.cluster_specifier)?;
            self.mirrors(&action.request_mirror_policies)?;
        }
        Ok(())
    }

    /// The view of the configuration fed, decoded from `raw`, which has
    /// `virtual_hosts` virtual hosts.
    pub(super) fn finish(self, raw: Bytes, virtual_hosts: usize) -> RouteConfigView {
        RouteConfigView {
            raw,
            text: self.text.into_boxed_str(),
            name: self.name,
            virtual_hosts: u32::try_from(virtual_hosts).unwrap_or(u32::MAX),
            targets: self.targets.into_boxed_slice(),
        }
    }

    fn text(&mut self, s: &str) -> Result<Span, ValidationError> {
        let hash = self.spans.hasher().hash_one(s);
        if let Some(&span) = self.spans.get(&hash)
            && span.of(&self.text) == s
        {
            return Ok(span);
        }
        let too_long = || ValidationError("route configuration: names longer than 4 GiB".into());
        let span = Span {
            start: u32::try_from(self.text.len()).map_err(|_| too_long())?,
            len: u32::try_from(s.len()).map_err(|_| too_long())?,
        };
        self.text.push_str(s);
        self.spans.entry(hash).or_insert(span);
        Ok(span)
    }

    fn push(&mut self, name: &str, kind: TargetKind) -> Result<(), ValidationError> {
        if name.is_empty() {
            return Ok(());
        }
        let name = self.text(name)?;
        self.targets.push(TargetRecord { name, kind });
        Ok(())
    }

    fn mirrors(&mut self, mirrors: &[RequestMirrorPolicy]) -> Result<(), ValidationError> {
        for mirror in mirrors {
            self.push(&mirror.cluster, TargetKind::Mirror)?;
            self.push(&mirror.cluster_header, TargetKind::Header)?;
        }
        Ok(())
    }

    fn action(&mut self, specifier: &Option<ClusterSpecifier>) -> Result<(), ValidationError> {
        match specifier {
            Some(ClusterSpecifier::Cluster(name)) => self.push(name, TargetKind::Cluster),
            Some(ClusterSpecifier::WeightedClusters(weighted)) => {
                for wc in &weighted.clusters {
                    let weight = wc.weight.as_ref().map_or(0, |w| w.value);
                    self.push(&wc.name, TargetKind::Weighted(weight))?;
                    self.push(&wc.cluster_header, TargetKind::Header)?;
                }
                Ok(())
            }
            Some(ClusterSpecifier::ClusterHeader(header)) => self.push(header, TargetKind::Header),
            Some(ClusterSpecifier::ClusterSpecifierPlugin(_))
            | Some(ClusterSpecifier::InlineClusterSpecifierPlugin(_))
            | None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
