//! Validating and viewing a `RouteConfiguration` from its bytes, one route
//! at a time.
//!
//! A decoded `Route` is some 3 KB of prost structs against about 100 bytes
//! on the wire, so decoding a configuration of 100 000 routes whole, only to
//! keep its compact view, took some 300 MB for as long as it lasted: most
//! of the client's peak on a large route table. Here the configuration's
//! bytes are walked instead (`types::wire`): its own fields are decoded
//! without its virtual hosts, each virtual host without its routes, and
//! each route alone, validated and fed to the view before the next one is
//! decoded. What is held at once is one route, one virtual host without its
//! routes, and the view being built.
//!
//! Rule: what is accepted, and its view, are what decoding the whole message
//! gives. Fields stay in their order, so they merge as prost merges them.
//! Each part is decoded as deep as it lies in the message ([`nested`]), so
//! prost's nesting limit counts from the configuration as it does for the
//! whole message, and whatever is accepted decodes whole again
//! ([`RouteConfigView::decode`]). Validation runs the same rules in the same
//! order (a virtual host's own before its routes'), with the same errors.
//!
//! Bytes that do not decode are refused, naming the part where prost
//! stopped (`not a valid RouteConfiguration: virtual_hosts[0].routes[2]:
//! failed to decode …`). The first fault met in the bytes is the one
//! reported: where the whole decode reported any malformed byte before any
//! invalid field, a route that breaks a rule is now reported before a
//! malformed route after it. Both are refused either way.

use std::fmt;

use bytes::{Buf, Bytes};
use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use prost::{DecodeError, Message};

use super::view::Builder;
use super::{RouteConfigView, validate_route, validate_virtual_host};
use crate::types::ValidationError;
use crate::types::wire::Fields;

/// `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS: u32 = 2;
/// `VirtualHost.routes`.
const ROUTES: u32 = 3;

/// Validates the `RouteConfiguration` encoded in `bytes`, one route at a
/// time, and returns its view holding `bytes` (moved in, not shared).
pub(super) fn view(bytes: Bytes) -> Result<RouteConfigView, ValidationError> {
    let mut buffers = Buffers::default();
    let own = buffers
        .own_fields(&bytes)
        .map_err(|e| malformed(Part::Configuration, e))?;
    let mut builder = Builder::new(&own)?;
    drop(own);
    let mut v = 0;
    for field in Fields::new(&bytes) {
        let field = field.map_err(|e| malformed(Part::Configuration, e))?;
        if let Some(vhost) = field.message(VIRTUAL_HOSTS) {
            buffers.virtual_host(v, vhost, &mut builder)?;
            v += 1;
        }
    }
    Ok(builder.finish(bytes, v))
}

/// Room to decode parts in, kept from one part to the next.
#[derive(Default)]
struct Buffers {
    /// A message's bytes without the field walked one by one.
    rest: Vec<u8>,
    /// The tags and lengths that open the messages enclosing a part.
    opening: Vec<u8>,
}

impl Buffers {
    /// The configuration's own fields: all but its virtual hosts.
    fn own_fields(&mut self, bytes: &[u8]) -> Result<RouteConfiguration, DecodeError> {
        self.keep_all_but(VIRTUAL_HOSTS, bytes)?;
        RouteConfiguration::decode(self.rest.as_slice())
    }

    /// Validates virtual host `v`, encoded in `bytes`, then each of its
    /// routes, feeding each to `builder` and dropping it before the next.
    fn virtual_host(
        &mut self,
        v: usize,
        bytes: &[u8],
        builder: &mut Builder,
    ) -> Result<(), ValidationError> {
        let vhost = self
            .host_without_routes(bytes)
            .map_err(|e| malformed(Part::VirtualHost(v), e))?;
        validate_virtual_host(v, &vhost)?;
        builder.virtual_host(&vhost)?;
        drop(vhost);
        let mut r = 0;
        for field in Fields::new(bytes) {
            let field = field.map_err(|e| malformed(Part::VirtualHost(v), e))?;
            if let Some(route) = field.message(ROUTES) {
                let route = self
                    .route(route)
                    .map_err(|e| malformed(Part::Route(v, r), e))?;
                validate_route(v, r, &route)?;
                builder.route(&route)?;
                r += 1;
            }
        }
        Ok(())
    }

    /// The virtual host encoded in `bytes`, without its routes, decoded
    /// where it lies in a configuration.
    fn host_without_routes(&mut self, bytes: &[u8]) -> Result<VirtualHost, DecodeError> {
        self.keep_all_but(ROUTES, bytes)?;
        self.opening.clear();
        open(VIRTUAL_HOSTS, self.rest.len(), &mut self.opening);
        let whole = self.opening.as_slice().chain(self.rest.as_slice());
        let nested = nested::host::RouteConfiguration::decode(whole)?;
        // The opening is the field, so prost always sets it (an empty
        // message included); the default is never taken.
        Ok(nested.virtual_hosts.unwrap_or_default())
    }

    /// The route encoded in `bytes`, decoded where it lies in a
    /// configuration.
    fn route(&mut self, bytes: &[u8]) -> Result<Route, DecodeError> {
        let in_host = key_and_length_len(ROUTES, bytes.len()) + bytes.len();
        self.opening.clear();
        open(VIRTUAL_HOSTS, in_host, &mut self.opening);
        open(ROUTES, bytes.len(), &mut self.opening);
        let whole = self.opening.as_slice().chain(bytes);
        let nested = nested::route::RouteConfiguration::decode(whole)?;
        // As above: both fields are in the opening.
        Ok(nested
            .virtual_hosts
            .and_then(|host| host.routes)
            .unwrap_or_default())
    }

    /// Copies into `rest` every field of `bytes` in order but the embedded
    /// messages numbered `number`.
    fn keep_all_but(&mut self, number: u32, bytes: &[u8]) -> Result<(), DecodeError> {
        self.rest.clear();
        for field in Fields::new(bytes) {
            let field = field?;
            if field.message(number).is_none() {
                self.rest.extend_from_slice(field.whole);
            }
        }
        Ok(())
    }
}

/// Appends the tag and length that open length-delimited field `number` of
/// `len` bytes.
fn open(number: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// How many bytes [`open`] appends.
fn key_and_length_len(number: u32, len: usize) -> usize {
    prost::encoding::key_len(number) + encoded_len_varint(len as u64)
}

/// Where in a configuration prost stopped.
#[derive(Debug, Clone, Copy)]
enum Part {
    Configuration,
    VirtualHost(usize),
    Route(usize, usize),
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Configuration => Ok(()),
            Part::VirtualHost(v) => write!(f, "virtual_hosts[{v}]: "),
            Part::Route(v, r) => write!(f, "virtual_hosts[{v}].routes[{r}]: "),
        }
    }
}

/// The refusal of bytes prost could not decode at `part`.
fn malformed(part: Part, error: DecodeError) -> ValidationError {
    ValidationError(format!("not a valid RouteConfiguration: {part}{error}"))
}

/// A virtual host and a route as deep as they lie in a configuration.
///
/// prost allows 100 levels of nested messages counted from the message it
/// decodes, so a route decoded alone could nest two levels deeper than a
/// route in a whole configuration: accepted here, it would fail to decode
/// again whole. Decoded inside these, it cannot. The messages and fields
/// are named after those they stand for, so that prost's errors name the
/// path they would name in the whole message.
mod nested {
    /// A virtual host in a configuration.
    pub(super) mod host {
        use envoy_types::pb::envoy::config::route::v3::VirtualHost;

        /// A configuration holding one virtual host.
        #[derive(prost::Message)]
        pub(in crate::types::route) struct RouteConfiguration {
            /// The virtual host.
            #[prost(message, optional, tag = "2")]
            pub(in crate::types::route) virtual_hosts: Option<VirtualHost>,
        }
    }

    /// A route in a virtual host in a configuration.
    pub(super) mod route {
        use envoy_types::pb::envoy::config::route::v3::Route;

        /// A configuration holding one virtual host holding one route.
        #[derive(prost::Message)]
        pub(in crate::types::route) struct RouteConfiguration {
            /// The virtual host.
            #[prost(message, optional, tag = "2")]
            pub(in crate::types::route) virtual_hosts: Option<VirtualHost>,
        }

        /// A virtual host holding one route.
        #[derive(prost::Message)]
        pub(in crate::types::route) struct VirtualHost {
            /// The route.
            #[prost(message, optional, tag = "3")]
            pub(in crate::types::route) routes: Option<Route>,
        }
    }
}

#[cfg(test)]
mod tests;
